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
// out gets no Slice. The Slices are in the front end's normalized form (bounds on every axis, steps
// of 1), which `slice_along` writes and `is_channel_slice` reads for the layout passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// Rewrites every Split node into Slices in place; returns how many Splits it rewrote.
size_t split_to_slices(Graph& graph);

/// The normalized attributes of a Slice of [start, start + count) along `axis` of a value of shape
/// `in`, every other axis whole.
Attrs slice_along(const std::vector<int64_t>& in, size_t axis, int64_t start, int64_t count);

/// Whether `n` is a Slice of channels: axis 1 in steps of 1, every other axis whole (a Split's
/// along the channels, as a gated unit's halves).
bool is_channel_slice(const Graph& g, const Node& n);

}  // namespace kiln::graph
