// Element types as the runtime sees them: helpers over the C struct KilnDType (code, bits, lanes)
// that parse and print the names users write ("float32", "int8", "bool", "float32x4") and give the
// storage size of one element. A bool is an unsigned 1-bit integer stored in one byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "deploy/runtime/c_abi.h"

namespace kiln::runtime {

inline constexpr KilnDType kFloat16{kKilnFloat, 16, 1};
inline constexpr KilnDType kFloat32{kKilnFloat, 32, 1};
inline constexpr KilnDType kFloat64{kKilnFloat, 64, 1};
inline constexpr KilnDType kInt8{kKilnInt, 8, 1};
inline constexpr KilnDType kInt16{kKilnInt, 16, 1};
inline constexpr KilnDType kInt32{kKilnInt, 32, 1};
inline constexpr KilnDType kInt64{kKilnInt, 64, 1};
inline constexpr KilnDType kUInt8{kKilnUInt, 8, 1};
inline constexpr KilnDType kBool{kKilnUInt, 1, 1};

/// Parses "float16|32|64", "int8|16|32|64", "uint8|16|32|64" or "bool", optionally followed by
/// "x<lanes>" ("float32x4"). Throws kiln::Error naming the string when it is not one of these.
KilnDType parse_dtype(std::string_view name);

/// The inverse of parse_dtype: "float32", "bool", "int8x16".
std::string dtype_to_string(KilnDType dtype);

/// Bytes one element occupies in memory: ceil(bits / 8) * lanes (a bool takes one byte).
int64_t dtype_bytes(KilnDType dtype);

/// Field-wise equality (KilnDType is a C struct and has no operator==).
constexpr bool dtype_equal(KilnDType a, KilnDType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/// The dtype a C++ element type stands for: dtype_of<float>() is kFloat32.
template <typename T>
constexpr KilnDType dtype_of() {
  if constexpr (std::is_same_v<T, bool>) {
    return kBool;
  } else if constexpr (std::is_floating_point_v<T>) {
    return KilnDType{kKilnFloat, static_cast<uint8_t>(sizeof(T) * 8), 1};
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return KilnDType{kKilnInt, static_cast<uint8_t>(sizeof(T) * 8), 1};
  } else {
    static_assert(std::is_integral_v<T> && std::is_unsigned_v<T>, "no dtype for this type");
    return KilnDType{kKilnUInt, static_cast<uint8_t>(sizeof(T) * 8), 1};
  }
}

}  // namespace kiln::runtime
