// The scalar and vector types of the IR: a type code (int, uint, float, handle, bool), a width in
// bits and a number of vector lanes. Vectorization turns a lanes=1 type into lanes=N.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::ir {

enum class TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kHandle = 3, kBool = 4 };

class DataType {
 public:
  constexpr DataType() = default;
  constexpr DataType(TypeCode code, int bits, int lanes = 1)
      : code_(code), bits_(static_cast<uint8_t>(bits)), lanes_(static_cast<uint16_t>(lanes)) {}

  static constexpr DataType Int(int bits, int lanes = 1) { return {TypeCode::kInt, bits, lanes}; }
  static constexpr DataType UInt(int bits, int lanes = 1) { return {TypeCode::kUInt, bits, lanes}; }
  static constexpr DataType Float(int bits, int lanes = 1) {
    return {TypeCode::kFloat, bits, lanes};
  }
  static constexpr DataType Bool(int lanes = 1) { return {TypeCode::kBool, 1, lanes}; }
  static constexpr DataType Handle() { return {TypeCode::kHandle, 64, 1}; }
  static constexpr DataType Void() { return {TypeCode::kHandle, 0, 0}; }

  /// Parses "float32", "float16", "int8", "int32", "int64", "uint8", "bool"; kiln::Error otherwise.
  static DataType parse(const std::string& s);

  constexpr TypeCode code() const { return code_; }
  constexpr int bits() const { return bits_; }
  constexpr int lanes() const { return lanes_; }
  constexpr int bytes() const { return (bits_ + 7) / 8; }
  constexpr bool is_int() const { return code_ == TypeCode::kInt; }
  constexpr bool is_uint() const { return code_ == TypeCode::kUInt; }
  constexpr bool is_float() const { return code_ == TypeCode::kFloat; }
  constexpr bool is_bool() const { return code_ == TypeCode::kBool; }
  constexpr bool is_handle() const { return code_ == TypeCode::kHandle && bits_ != 0; }
  constexpr bool is_void() const { return code_ == TypeCode::kHandle && bits_ == 0; }
  /// Integer-like: int, uint or bool; these take part in index arithmetic.
  constexpr bool is_integral() const { return is_int() || is_uint() || is_bool(); }
  constexpr bool is_scalar() const { return lanes_ == 1; }
  constexpr bool is_vector() const { return lanes_ > 1; }
  constexpr DataType element_of() const { return {code_, bits_, 1}; }
  constexpr DataType with_lanes(int lanes) const { return {code_, bits_, lanes}; }
  constexpr DataType with_bits(int bits) const { return {code_, bits, lanes_}; }

  constexpr bool operator==(const DataType& o) const {
    return code_ == o.code_ && bits_ == o.bits_ && lanes_ == o.lanes_;
  }
  constexpr bool operator!=(const DataType& o) const { return !(*this == o); }

  /// "float32", "int32x8", "bool", "handle".
  std::string str() const;

 private:
  TypeCode code_ = TypeCode::kInt;
  uint8_t bits_ = 32;
  uint16_t lanes_ = 1;
};

inline constexpr DataType kFloat32 = DataType::Float(32);
inline constexpr DataType kFloat16 = DataType::Float(16);
inline constexpr DataType kInt8 = DataType::Int(8);
inline constexpr DataType kInt32 = DataType::Int(32);
inline constexpr DataType kInt64 = DataType::Int(64);
inline constexpr DataType kBool = DataType::Bool();

}  // namespace kiln::ir
