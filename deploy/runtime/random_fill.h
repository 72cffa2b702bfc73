// Seeded inputs that every machine of a farm generates alike: the tuner's reference (kilnd) and a
// board's agent must fill a task's inputs with the same numbers without shipping them. The
// generator is SplitMix64 (fixed arithmetic, no std:: distribution), so the values do not depend
// on the compiler or the C++ library.
//
//   NDArray a = NDArray::empty({64, 3, 7, 7}, kFloat32);
//   fill_uniform(a, seed_of("conv2d:...:1234") + 0);   // uniform in [-1, 1)
//   NDArray s = NDArray::empty({4, 16}, kInt32);
//   fill_input(s, seed + 3, ValueRange{0, 31});         // integers uniform in [0, 31]
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

/// A 64-bit seed from text (FNV-1a), the same on every platform.
uint64_t seed_of(const std::string& text);

/// Fills a float32 array with values uniform in [-1, 1) from `seed`. kiln::Error naming the dtype
/// for any other element type.
void fill_uniform(NDArray& array, uint64_t seed);

/// The values an integer input takes, both ends included: what keeps a generated input valid for
/// its operator (an int8 activation in [-128, 127], a per-channel shift in [0, 31]).
struct ValueRange {
  int64_t low = 0;
  int64_t high = 0;
  bool operator==(const ValueRange&) const = default;
};

/// Fills an integer array (int8/16/32/64, uint8/16/32) with values uniform in [range.low,
/// range.high] from `seed`, with the same SplitMix64 stream as fill_uniform. kiln::Error naming
/// the dtype for any other element type, and naming the range when it is empty or does not fit
/// the dtype.
void fill_uniform_int(NDArray& array, uint64_t seed, const ValueRange& range);

/// A task's input: float32 arrays by fill_uniform (no range may be given), integer arrays by
/// fill_uniform_int over `range` (which they need). kiln::Error otherwise.
void fill_input(NDArray& array, uint64_t seed, const std::optional<ValueRange>& range);

}  // namespace kiln::runtime
