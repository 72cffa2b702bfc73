// The live taps of a convolution's axis, region by region.
#include "compiler/topi/conv_taps.h"

namespace kiln::topi {

std::vector<TapRegion> tap_regions(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                   int64_t dilation, int64_t pad_begin) {
  std::vector<TapRegion> regions;
  for (int64_t o = 0; o < out; ++o) {
    // Positions grow with k, so the taps inside [0, in) are an interval.
    int64_t lo = kernel, hi = -1;
    for (int64_t k = 0; k < kernel; ++k) {
      const int64_t pos = o * stride + k * dilation - pad_begin;
      if (pos < 0 || pos >= in) continue;
      if (lo == kernel) lo = k;
      hi = k;
    }
    if (hi < 0) lo = 0;  // one spelling of "none"
    if (!regions.empty() && regions.back().tap_lo == lo && regions.back().tap_hi == hi) {
      regions.back().end = o + 1;
    } else {
      regions.push_back({o, o + 1, lo, hi});
    }
  }
  return regions;
}

}  // namespace kiln::topi
