// Split as one Slice per output, so that each part fuses into its reader's group instead of being
// copied out by a kernel of its own. A Split has several outputs, so the fuser cannot chain it to
// any reader: BERT's attention splits the fused QKV product [1, 128, 2304] into Q, K and V in a
// kernel that only copies, before each part's Reshape + Transpose copies it again. A Slice is
// injective with one output; fused, each head layout reads the product directly.
//
//   %q, %k, %v = Split(%x) {axis=2, split=[768, 768, 768]}
//     =>
//   %q = Slice(%x) {starts=[0, 0, 0],    ends=[1, 128, 768],  axes=[0, 1, 2], steps=[1, 1, 1]}
//   %k = Slice(%x) {starts=[0, 0, 768],  ends=[1, 128, 1536], ...}
//   %v = Slice(%x) {starts=[0, 0, 1536], ends=[1, 128, 2304], ...}
//
// Every Split (the front end gives its sizes and axis as attributes); an output the model leaves
// out gets no Slice.
#pragma once

#include <cstddef>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Rewrites every Split node into Slices in place; returns how many Splits it rewrote.
size_t split_to_slices(Graph& graph);

}  // namespace kiln::graph
