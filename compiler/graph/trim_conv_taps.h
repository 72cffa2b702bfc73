// Dead convolution taps: a kernel tap that reads only padding, for every output position, is
// dropped at build time, so no kernel multiplies by those zeros. Dilated convolutions on small
// maps have many: DeepLabV3's atrous pyramid runs 3x3 convolutions of rate 24 and 36 on a 16x16
// map with padding equal to the rate, where only the centre tap ever reaches the input; such a
// convolution is exactly a 1x1 one.
//
//   %y = Conv(%x, %w) {kernel_shape=[3,3], dilations=[24,24], pads=[24,24,24,24]}  (x 16x16)
//     =>
//   %y = Conv(%x, %w.trimmed) {kernel_shape=[1,1], dilations=[1,1], pads=[0,0,0,0]}
//
// Along each spatial axis (1-D and 2-D Conv), tap k reads input positions o * stride + k *
// dilation - pad_begin for the outputs o; when none of them lies in the input, the tap is dead.
// The dead taps at either end of the kernel are removed (the weight sliced into a new constant
// "<name>.trimmed"), and the pads shrink by the dilation per removed tap, which keeps the output's
// size and every output's value. An axis left with one tap gets dilation 1. Conditions: a Conv
// whose weight is a float32 constant, an axis with at least one live tap, and pads that stay
// non-negative (an axis that would need the input cropped is left alone).
#pragma once

#include <cstddef>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Trims every Conv that meets the conditions above; returns how many it rewrote.
size_t trim_conv_taps(Graph& graph);

}  // namespace kiln::graph
