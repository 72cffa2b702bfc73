#include "deploy/runtime/random_fill.h"

#include <climits>
#include <cstdint>

#include "base/error.h"
#include "base/fnv1a.h"
#include "deploy/runtime/dtype.h"

namespace kiln::runtime {

uint64_t seed_of(const std::string& text) { return fnv1a64(text.data(), text.size()); }

namespace {

/// The next value of the SplitMix64 stream whose state is `state`.
uint64_t splitmix64(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
void fill_ints(NDArray& array, uint64_t seed, const ValueRange& r) {
  uint64_t state = seed;
  // The span fits 64 bits: low >= INT64_MIN / 2 or high <= INT64_MAX / 2 for every dtype here.
  const uint64_t span = static_cast<uint64_t>(r.high) - static_cast<uint64_t>(r.low) + 1;
  T* p = array.data<T>();
  for (int64_t i = 0; i < array.num_elements(); ++i) {
    // A multiply-shift maps the stream's top 32 bits onto the span (spans here are < 2^33).
    const uint64_t offset = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(splitmix64(state) >> 32) * span) >> 32);
    p[i] = static_cast<T>(r.low + static_cast<int64_t>(offset));
  }
}

}  // namespace

void fill_uniform(NDArray& array, uint64_t seed) {
  KILN_USER_CHECK(dtype_equal(array.dtype(), kFloat32))
      << "fill_uniform: only float32 arrays are generated (got " << dtype_to_string(array.dtype())
      << ")";
  uint64_t state = seed;
  float* p = array.data<float>();
  for (int64_t i = 0; i < array.num_elements(); ++i) {
    // The top 24 bits give a float in [0, 1) exactly; map it to [-1, 1).
    p[i] = static_cast<float>(splitmix64(state) >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
}

void fill_uniform_int(NDArray& array, uint64_t seed, const ValueRange& range) {
  const KilnDType t = array.dtype();
  const std::string name = dtype_to_string(t);
  const bool is_int =
      t.lanes == 1 &&
      ((t.code == kKilnInt && (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)) ||
       (t.code == kKilnUInt && (t.bits == 8 || t.bits == 16 || t.bits == 32)));
  KILN_USER_CHECK(is_int) << "fill_uniform_int: " << name
                          << " arrays are not generated (int8, int16, int32, int64, uint8, "
                             "uint16 and uint32 are)";
  const int64_t lo = t.code == kKilnUInt ? 0
                     : t.bits == 64      ? INT64_MIN
                                         : -(int64_t{1} << (t.bits - 1));
  const int64_t hi = t.code == kKilnUInt ? (int64_t{1} << t.bits) - 1
                     : t.bits == 64      ? INT64_MAX
                                         : (int64_t{1} << (t.bits - 1)) - 1;
  // A span of at most 2^32 values keeps the mapping exact; no input needs more.
  const bool fits = range.low <= range.high && range.low >= lo && range.high <= hi &&
                    static_cast<__int128>(range.high) - range.low < (__int128{1} << 32);
  KILN_USER_CHECK(fits) << "fill_uniform_int: the range [" << range.low << ", " << range.high
                        << "] is empty, spans more than 2^32 values or does not fit " << name
                        << " [" << lo << ", " << hi << "]";
  if (t.code == kKilnUInt) {
    if (t.bits == 8) return fill_ints<uint8_t>(array, seed, range);
    if (t.bits == 16) return fill_ints<uint16_t>(array, seed, range);
    return fill_ints<uint32_t>(array, seed, range);
  }
  if (t.bits == 8) return fill_ints<int8_t>(array, seed, range);
  if (t.bits == 16) return fill_ints<int16_t>(array, seed, range);
  if (t.bits == 32) return fill_ints<int32_t>(array, seed, range);
  fill_ints<int64_t>(array, seed, range);
}

void fill_input(NDArray& array, uint64_t seed, const std::optional<ValueRange>& range) {
  if (array.dtype().code == kKilnFloat) {
    KILN_USER_CHECK(!range.has_value())
        << "fill_input: a " << dtype_to_string(array.dtype())
        << " input takes no value range (got [" << range->low << ", " << range->high << "])";
    fill_uniform(array, seed);
    return;
  }
  KILN_USER_CHECK(range.has_value()) << "fill_input: the " << dtype_to_string(array.dtype())
                                     << " input has no value range to be generated in";
  fill_uniform_int(array, seed, *range);
}

}  // namespace kiln::runtime
