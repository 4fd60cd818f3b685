#include "compiler/ir/Type.h"

#include "compiler/support/Error.h"

#include <llvm/Support/raw_ostream.h>

#include <limits>

namespace tessel {

int64_t DataType::min_int() const {
  internal_check(is_integer_like()) << "min_int of " << str();
  if (code_ == UInt)
    return 0;
  return bits_ >= 64 ? std::numeric_limits<int64_t>::min() : -(int64_t(1) << (bits_ - 1));
}

int64_t DataType::max_int() const {
  internal_check(is_integer_like()) << "max_int of " << str();
  if (code_ == UInt)
    return bits_ >= 63 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << bits_) - 1;
  return bits_ >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t(1) << (bits_ - 1)) - 1;
}

std::string DataType::str() const {
  const char *prefix = "";
  switch (code_) {
  case Int:
    prefix = "int";
    break;
  case UInt:
    if (bits_ == 1)
      return lanes_ > 1 ? "boolx" + std::to_string(lanes_) : std::string("bool");
    prefix = "uint";
    break;
  case Float:
    prefix = "float";
    break;
  case BFloat:
    prefix = "bfloat";
    break;
  case Handle:
    return bits_ == 0 ? "void" : "handle";
  }
  std::string s = prefix;
  s += std::to_string(bits_);
  if (lanes_ > 1) {
    s += 'x';
    s += std::to_string(lanes_);
  }
  return s;
}

DataType DataType::parse(const std::string &name) {
  std::string base = name;
  int lanes = 1;
  if (auto x = name.rfind('x'); x != std::string::npos && x + 1 < name.size() &&
                                 name.find_first_not_of("0123456789", x + 1) == std::string::npos) {
    base = name.substr(0, x);
    lanes = std::stoi(name.substr(x + 1));
  }
  auto bits_after = [&](const char *prefix) -> int {
    size_t n = std::char_traits<char>::length(prefix);
    if (base.compare(0, n, prefix) != 0 || base.size() == n ||
        base.find_first_not_of("0123456789", n) != std::string::npos)
      return 0;
    return std::stoi(base.substr(n));
  };
  if (base == "bool")
    return tessel::Bool(lanes);
  if (base == "handle")
    return tessel::Handle();
  if (int b = bits_after("bfloat"); b == 16)
    return tessel::BFloat(16, lanes);
  if (int b = bits_after("float"); b == 16 || b == 32 || b == 64)
    return tessel::Float(b, lanes);
  if (int b = bits_after("uint"); b == 8 || b == 16 || b == 32 || b == 64)
    return tessel::UInt(b, lanes);
  if (int b = bits_after("int"); b == 8 || b == 16 || b == 32 || b == 64)
    return tessel::Int(b, lanes);
  user_error("DataType::parse")
      << "unknown data type '" << name
      << "'; expected one of bool, int8/16/32/64, uint8/16/32/64, float16/32/64, bfloat16, "
         "handle, optionally with lanes such as float16x8";
}

std::ostream &operator<<(std::ostream &os, const DataType &t) { return os << t.str(); }
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const DataType &t) { return os << t.str(); }

} // namespace tessel
