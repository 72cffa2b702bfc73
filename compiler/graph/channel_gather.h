// Channel permutations as ChannelGather nodes, so that a network's channel shuffles run on the
// blocked layout of the convolutions around them (ShuffleNet: each block's Concat, Reshape to
// [N, g, C/g, H, W], Transpose(0, 2, 1, 3, 4), Reshape back to [N, C, H, W], then a Split into
// halves). Four rules, in this order:
//
// 1. A chain of Reshape / Flatten / Squeeze / Unsqueeze / Transpose nodes (each value between them
//    read only by the next) from a rank-4 value [N, C, H, W] to a value of the same shape whose
//    every element out[n, c, h, w] is in[n, p[c], h, w] (checked element by element on the chain's
//    index map, so it holds for any such chain, not one pattern) becomes one node
//
//      %y = ChannelGather(%x, %table)     %table: int32 [2, C], row 0 the input each output
//                                         channel reads (-1: none, a zero), row 1 its channel
//
// 2. A ChannelGather reading a Concat of channels (axis 1, rank 4) reads the Concat's inputs
//    instead (its channels index their concatenation), so the Concat is never written.
// 3. A Slice of channels only (every other axis whole) of a ChannelGather's output is a
//    ChannelGather of the same inputs with the table's sliced columns: each half of the shuffled
//    value is read straight from the producers of the shuffle's inputs.
// 4. A gather reading the output of a gather that nothing else reads reads that gather's inputs
//    instead, while it keeps at most 4 inputs (a ShuffleNet stage's last shuffle, whose first
//    half comes from the shuffle before: otherwise the fuser inlines one gather into the other,
//    a gather of gathers).
//
// The nodes they replace are left to remove_dead_nodes. alter_layout then runs a ChannelGather
// whose inputs are all blocked alike on those blocks, its output in the blocks its readers want
// (topi::channel_gather); otherwise on NCHW. Run where alter_layout runs (a CPU target): without
// it, the fused Reshape / Transpose chain is one injective kernel as good as this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// The source channel of each output channel when the Reshape / Transpose chain `chain` (nodes of
/// `g`, in order, the first reading a value of shape `in_shape`) maps its input to an output of
/// the same rank-4 shape by a permutation of the channels alone; nullopt otherwise (or when the
/// tensor has more than 2^22 elements, which the check would walk).
std::optional<std::vector<int64_t>> chain_channel_permutation(
    const Graph& g, const std::vector<int64_t>& in_shape, const std::vector<const Node*>& chain);

/// Applies the four rules above; returns how many ChannelGather nodes the graph has after them.
size_t gather_channel_permutations(Graph& g);

}  // namespace kiln::graph
