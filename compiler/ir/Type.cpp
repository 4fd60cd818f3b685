#include "compiler/ir/Type.h"

#include "compiler/support/Error.h"

#include <llvm/ADT/StringRef.h>
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

int DataType::min_normal_exponent() const {
  internal_check(is_float()) << "min_normal_exponent of " << str();
  switch (code_) {
  case BFloat:
    return -126;
  case Float8E4M3:
    return -6;
  case Float8E5M2:
    return -14;
  default:
    return bits_ == 16 ? -14 : bits_ == 32 ? -126 : -1022;
  }
}

double DataType::max_finite() const {
  internal_check(is_float()) << "max_finite of " << str();
  switch (code_) {
  case BFloat:
    return 0x1.fep127;
  case Float8E4M3:
    return 448.0;
  case Float8E5M2:
    return 57344.0;
  default:
    return bits_ == 16   ? 65504.0
           : bits_ == 32 ? double(std::numeric_limits<float>::max())
                         : std::numeric_limits<double>::max();
  }
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
  case Float8E4M3:
  case Float8E5M2:
    return std::string(code_ == Float8E4M3 ? "float8_e4m3" : "float8_e5m2") +
           (lanes_ > 1 ? "x" + std::to_string(lanes_) : std::string());
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
  auto unknown = [&]() {
    user_error("DataType::parse")
        << "unknown data type '" << name
        << "'; expected one of bool, int8/16/32/64, uint8/16/32/64, float16/32/64, bfloat16, "
           "float8_e4m3, float8_e5m2, handle, optionally with lanes such as float16x8";
  };
  // The digits of `text` after `prefix` as a number; 0 if they are not all digits or do not fit
  // (float99999999999 is no type, not an overflow).
  auto number_after = [](llvm::StringRef text, llvm::StringRef prefix) {
    unsigned n = 0;
    if (!text.consume_front(prefix) || text.empty() ||
        text.find_first_not_of("0123456789") != llvm::StringRef::npos || text.getAsInteger(10, n))
      return 0u;
    return n;
  };
  llvm::StringRef base = name;
  unsigned lanes = 1;
  if (auto x = base.rfind('x'); x != llvm::StringRef::npos && x + 1 < base.size() &&
                                base.find_first_not_of("0123456789", x + 1) == llvm::StringRef::npos) {
    lanes = number_after(base.substr(x), "x");
    base = base.substr(0, x);
    if (lanes == 0 || lanes > 65535)
      unknown();
  }
  const int l = int(lanes);
  if (base == "bool")
    return tessel::Bool(l);
  if (base == "handle")
    return tessel::Handle();
  if (base == "float8_e4m3")
    return tessel::Float8E4M3(l);
  if (base == "float8_e5m2")
    return tessel::Float8E5M2(l);
  if (number_after(base, "bfloat") == 16)
    return tessel::BFloat(16, l);
  if (unsigned b = number_after(base, "float"); b == 16 || b == 32 || b == 64)
    return tessel::Float(int(b), l);
  if (unsigned b = number_after(base, "uint"); b == 8 || b == 16 || b == 32 || b == 64)
    return tessel::UInt(int(b), l);
  if (unsigned b = number_after(base, "int"); b == 8 || b == 16 || b == 32 || b == 64)
    return tessel::Int(int(b), l);
  unknown();
  return {};
}

std::ostream &operator<<(std::ostream &os, const DataType &t) { return os << t.str(); }
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const DataType &t) { return os << t.str(); }

} // namespace tessel
