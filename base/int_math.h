// Integer division and remainder rounded toward negative infinity, as the IR's FloorDiv and
// FloorMod define them (C++'s / and % truncate toward zero): what constant folding, interval
// analysis and the evaluation of index expressions compute on int64 values.
//
//   floor_div(-7, 2) == -4   (-7 / 2 == -3)
//   floor_mod(-7, 2) == 1    (-7 % 2 == -1); the result has b's sign
#pragma once

#include <cstdint>

namespace kiln {

/// a / b rounded toward negative infinity; b must not be 0.
constexpr int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/// a - floor_div(a, b) * b: 0 or of b's sign, smaller than |b|; b must not be 0.
constexpr int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

/// a rounded up to a multiple of b (a channel count to whole blocks); a >= 0, b > 0.
constexpr int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

}  // namespace kiln
