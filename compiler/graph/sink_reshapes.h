// sink_reshapes: keeps chains of layers that run as 2-D convolutions 4-D, so that alter_layout
// blocks them throughout. Two importer / pass rewrites view a 4-D value [N, C, A, B] in another
// rank between reshapes that keep the data's order:
//
//   a 1-D layer (lift_conv1d)       [N, C, 1, T]   <->  [N, C, T]
//   a 3-D layer over frames as rows [N, C, D, H*W] <->  [N, C, D, H, W]
//     (rewrite_conv3d's (KD, 1, 1) convolutions, rewrite_pool3d's poolings)
//
// Such a view Reshape moves down past the operators that read it, which then run on the 4-D value
// and are followed by the view instead: elementwise and broadcasting ones whose every other operand
// is a view of the same shape too, a value of that shape (reshaped to 4-D itself: a residual from
// a layer that is not such a view), or a single element; a Concat of channels (axis 1) of views of
// the same trailing axes; a Slice of channels (axis 1 in steps of 1, every other axis whole: a
// Split's, after split_to_slices, as a gated unit's halves); a 1-D MaxPool / AveragePool (its
// window lifted as lift_conv1d lifts the Conv's) or GlobalAveragePool / GlobalMaxPool. A Reshape
// that gives a view its 4-D shape back is dropped:
//
//   Conv -> Reshape -> Relu -> Reshape -> MaxPool      Conv -> Relu -> MaxPool
//
// The remaining reshapes are views the fuser merges with the layout conversions alter_layout puts
// at the ends of such a chain. Run where alter_layout runs (a CPU target), after lift_conv1d.
#pragma once

#include <cstddef>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Moves view Reshapes down as above; returns how many nodes it moved to 4-D.
size_t sink_reshapes(Graph& graph);

}  // namespace kiln::graph
