#include "deploy/runtime/random_fill.h"

#include "base/fnv1a.h"

namespace kiln::runtime {

uint64_t seed_of(const std::string& text) { return fnv1a64(text.data(), text.size()); }

void fill_uniform(NDArray& array, uint64_t seed) {
  KILN_USER_CHECK(dtype_equal(array.dtype(), kFloat32))
      << "fill_uniform: only float32 arrays are generated (got " << dtype_to_string(array.dtype()) << ")";
  uint64_t state = seed;
  float* p = array.data<float>();
  for (int64_t i = 0; i < array.num_elements(); ++i) {
    state += 0x9E3779B97F4A7C15ull;  // SplitMix64
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    // The top 24 bits give a float in [0, 1) exactly; map it to [-1, 1).
    p[i] = static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
}

}  // namespace kiln::runtime
