// Which kernel taps of a convolution read the input and which only its padding, along one
// spatial axis. Output position o reads input position o * stride + k * dilation - pad_begin with
// tap k; where that is outside [0, in), the tap multiplies a padded zero. The outputs split into
// runs (regions) over which the live taps are one fixed interval of k: a 3x3 of rate 12 on a 16x16
// map with padding 12 has, along each axis, outputs 0-3 reading taps 1-2, 4-11 tap 1 alone and
// 12-15 taps 0-1, so three quarters of its multiplications are by padding.
//
// Used by the graph pass trim_conv_taps (taps no output reads are dropped from the weight) and by
// the blocked convolution's lowering (a convolution that would mostly multiply padding is computed
// region by region, each with its live taps only, no padding).
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::topi {

/// Outputs [begin, end) of one axis, all reading exactly the taps [tap_lo, tap_hi] inside the input
/// (tap_lo > tap_hi: none, the outputs read only padding).
struct TapRegion {
  int64_t begin = 0, end = 0;
  int64_t tap_lo = 0, tap_hi = -1;
  int64_t taps() const { return tap_hi >= tap_lo ? tap_hi - tap_lo + 1 : 0; }
};

/// The regions of an axis of `in` input and `out` output positions, in order, covering [0, out).
std::vector<TapRegion> tap_regions(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                   int64_t dilation, int64_t pad_begin);

}  // namespace kiln::topi
