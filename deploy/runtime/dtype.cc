// Parsing and printing element type names.
#include "deploy/runtime/dtype.h"

#include <charconv>

#include "base/error.h"

namespace kiln::runtime {
namespace {

/// Parses a whole decimal number; false if `s` is empty or holds anything else.
bool parse_number(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

KilnDType parse_dtype(std::string_view name) {
  std::string_view base = name;
  int lanes = 1;
  if (size_t x = name.rfind('x'); x != std::string_view::npos) {
    KILN_USER_CHECK(parse_number(name.substr(x + 1), &lanes) && lanes >= 1 && lanes <= 65535)
        << "bad dtype '" << name << "': lanes after 'x' must be a number in [1, 65535]";
    base = name.substr(0, x);
  }
  KilnDType t{};
  int bits = 0;
  if (base == "bool") {
    t = kBool;
    bits = 1;
  } else if (base.starts_with("float") && parse_number(base.substr(5), &bits) &&
             (bits == 16 || bits == 32 || bits == 64)) {
    t.code = kKilnFloat;
  } else if (base.starts_with("uint") && parse_number(base.substr(4), &bits) &&
             (bits == 8 || bits == 16 || bits == 32 || bits == 64)) {
    t.code = kKilnUInt;
  } else if (base.starts_with("int") && parse_number(base.substr(3), &bits) &&
             (bits == 8 || bits == 16 || bits == 32 || bits == 64)) {
    t.code = kKilnInt;
  } else {
    KILN_USER_ERROR() << "unknown dtype '" << name
                      << "' (expected float16/32/64, int8/16/32/64, uint8/16/32/64 or bool, "
                         "optionally with x<lanes>)";
  }
  t.bits = static_cast<uint8_t>(bits);
  t.lanes = static_cast<uint16_t>(lanes);
  return t;
}

std::string dtype_to_string(KilnDType dtype) {
  std::string s;
  if (dtype.code == kKilnUInt && dtype.bits == 1) {
    s = "bool";
  } else {
    switch (dtype.code) {
      case kKilnInt:
        s = "int";
        break;
      case kKilnUInt:
        s = "uint";
        break;
      case kKilnFloat:
        s = "float";
        break;
      default:
        s = "code" + std::to_string(dtype.code) + "_";
        break;
    }
    s += std::to_string(dtype.bits);
  }
  if (dtype.lanes != 1) s += "x" + std::to_string(dtype.lanes);
  return s;
}

int64_t dtype_bytes(KilnDType dtype) {
  return static_cast<int64_t>((dtype.bits + 7) / 8) * dtype.lanes;
}

}  // namespace kiln::runtime
