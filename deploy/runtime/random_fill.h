// Seeded inputs that every machine of a farm generates alike: the tuner's reference (kilnd) and a
// board's agent must fill a task's inputs with the same numbers without shipping them. The
// generator is SplitMix64 (fixed arithmetic, no std:: distribution), so the values do not depend
// on the compiler or the C++ library.
//
//   NDArray a = NDArray::empty({64, 3, 7, 7}, kFloat32);
//   fill_uniform(a, seed_of("conv2d:...:1234") + 0);   // uniform in [-1, 1)
#pragma once

#include <cstdint>
#include <string>

#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

/// A 64-bit seed from text (FNV-1a), the same on every platform.
uint64_t seed_of(const std::string& text);

/// Fills a float32 array with values uniform in [-1, 1) from `seed`. kiln::Error naming the dtype
/// for any other element type.
void fill_uniform(NDArray& array, uint64_t seed);

}  // namespace kiln::runtime
