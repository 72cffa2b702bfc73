// A Pad of zeros around the spatial dimensions folded into the convolutions and average pools
// that read it, as their own padding:
//
//   %p = Pad(%x) {mode="constant", pads=[0,0,1,1, 0,0,1,1], value=0}
//   %y = AveragePool(%p) {kernel_shape=[3,3], pads=[0,0,0,0], strides=[1,1]}
//     =>
//   %y = AveragePool(%x) {kernel_shape=[3,3], pads=[1,1,1,1], count_include_pad=1, ...}
//
// PyTorch exports `F.avg_pool2d(x, 3, 1, padding=1)` (Inception-v3's pool branches) and explicit
// `nn.ZeroPad2d` before a convolution this way. Left a node of its own, the Pad (which the layout
// pass does not block) converted each pool's input to NCHW and back, and ran the pool there at a
// tenth of the blocked one's speed. Folded when: the Pad pads with zeros, only dimensions 2 and
// up, by non-negative amounts; every reader is a Conv reading it as its data or an AveragePool
// (ceil_mode 0, whose own padding is zero or counted: the zeros the Pad wrote were counted); and
// it is not a graph output. An AveragePool then counts all its padding (count_include_pad = 1).
#pragma once

#include <cstddef>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Folds every such Pad into its readers; returns how many it folded (they are left dead for
/// remove_dead_nodes).
size_t fold_pad(Graph& graph);

}  // namespace kiln::graph
