// Scalar and vector data types of IR values: a code, a bit width and a lane count.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace llvm {
class raw_ostream;
}

namespace tessel {

class DataType {
public:
  /// Float8E4M3 / Float8E5M2: the 8-bit floats of Hopper's Tensor Cores (OCP FP8 "E4M3FN":
  /// no infinities, max 448; "E5M2": IEEE-like, max 57344), always 8 bits. Storage types: the
  /// IR casts them to and from other types but does no arithmetic in them.
  enum Code : uint8_t { Int, UInt, Float, BFloat, Handle, Float8E4M3, Float8E5M2 };

  constexpr DataType() : code_(Handle), bits_(0), lanes_(0) {}
  constexpr DataType(Code code, int bits, int lanes = 1)
      : code_(code), bits_(static_cast<uint8_t>(bits)), lanes_(static_cast<uint16_t>(lanes)) {}

  Code code() const { return code_; }
  int bits() const { return bits_; }
  int lanes() const { return lanes_; }
  int bytes() const { return (bits_ * lanes_ + 7) / 8; }

  bool is_int() const { return code_ == Int; }
  bool is_uint() const { return code_ == UInt && bits_ != 1; }
  bool is_bool() const { return code_ == UInt && bits_ == 1; }
  /// Any integer-like type: int, uint or bool.
  bool is_integer_like() const { return code_ == Int || code_ == UInt; }
  bool is_float() const { return code_ == Float || code_ == BFloat || is_float8(); }
  bool is_bfloat() const { return code_ == BFloat; }
  bool is_float8() const { return code_ == Float8E4M3 || code_ == Float8E5M2; }
  bool is_float16() const { return code_ == Float && bits_ == 16; }
  bool is_handle() const { return code_ == Handle; }
  bool is_scalar() const { return lanes_ == 1; }
  bool is_vector() const { return lanes_ > 1; }
  bool is_void() const { return code_ == Handle && bits_ == 0; }

  DataType with_lanes(int lanes) const { return DataType(code_, bits_, lanes); }
  DataType element_of() const { return with_lanes(1); }
  DataType with_bits(int bits) const { return DataType(code_, bits, lanes_); }

  /// Significand bits of a float type, the implicit leading one included (11 for float16).
  int significand_bits() const {
    if (code_ == BFloat)
      return 8;
    if (code_ == Float8E4M3)
      return 4;
    if (code_ == Float8E5M2)
      return 3;
    return bits_ == 16 ? 11 : bits_ == 32 ? 24 : 53;
  }
  /// Exponent of the smallest normal value of a float type (-14 for float16, -6 for e4m3).
  int min_normal_exponent() const;
  /// Largest finite value of a float type (65504 for float16, 448 for e4m3).
  double max_finite() const;

  /// Smallest and largest values of an integer type, as int64 (saturated for uint64).
  int64_t min_int() const;
  int64_t max_int() const;

  bool operator==(const DataType &o) const {
    return code_ == o.code_ && bits_ == o.bits_ && lanes_ == o.lanes_;
  }
  bool operator!=(const DataType &o) const { return !(*this == o); }

  /// "int32", "float16x8", "bool", "handle", "float8_e4m3".
  std::string str() const;

  /// Parses the names printed by str(); throws tessel::Error for an unknown name.
  static DataType parse(const std::string &name);

private:
  Code code_;
  uint8_t bits_;
  uint16_t lanes_;
};

inline DataType Int(int bits, int lanes = 1) { return DataType(DataType::Int, bits, lanes); }
inline DataType UInt(int bits, int lanes = 1) { return DataType(DataType::UInt, bits, lanes); }
inline DataType Float(int bits, int lanes = 1) { return DataType(DataType::Float, bits, lanes); }
inline DataType BFloat(int bits = 16, int lanes = 1) { return DataType(DataType::BFloat, bits, lanes); }
inline DataType Float8E4M3(int lanes = 1) { return DataType(DataType::Float8E4M3, 8, lanes); }
inline DataType Float8E5M2(int lanes = 1) { return DataType(DataType::Float8E5M2, 8, lanes); }
inline DataType Bool(int lanes = 1) { return DataType(DataType::UInt, 1, lanes); }
inline DataType Handle() { return DataType(DataType::Handle, 64); }
inline DataType Void() { return DataType(DataType::Handle, 0); }

std::ostream &operator<<(std::ostream &os, const DataType &t);
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const DataType &t);

} // namespace tessel
