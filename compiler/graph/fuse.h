// Operator fusion (the paper's section 3, TVM's FuseOps simplified to single-output groups): the
// graph's nodes are partitioned into groups, each compiled as one kernel whose intermediates never
// reach memory.
//
//   x ─ Conv ─ BatchNorm ─ Relu ─ MaxPool ─ Reshape ─ Gemm ─ Add ─ Softmax ─ out
//       └──── out-ewise group ───┘ └reduce┘ └inj┘    └─out-ewise─┘ └opaque┘
//       master = Conv                         (no fusing Reshape into Gemm)
//
// The rules. Every node starts as its own group with the pattern op_pattern(node) (op_pattern.h).
// A node's output "links" to its reader C when the node has one output, that output is not a graph
// output and exactly one node (C) reads it (possibly as several of C's inputs).
//   Phase 1 (out-ewise fusion): each out-ewise-fusable node (Conv, ConvTranspose, Gemm, MatMul),
//     in topological order, absorbs the chain of elementwise and broadcast nodes that follows it
//     through links (Conv -> BatchNorm -> Add(skip) -> Relu), stopping at the first node that is
//     injective or worse, that an earlier chain absorbed (so Add(conv1, conv2) goes with conv1),
//     or whose output has another shape than the master's (a broadcast that grows the tile, such
//     as a squeeze-and-excitation block's Mul of a [N,C,H,W] tensor by a 1x1 convolution's
//     [N,C,1,1] output: it becomes a broadcast group of its own, which phase 2 may merge).
//     The group is out-ewise-fusable and its master is the conv/dense node; the epilogue's other
//     operands (bias, skip connection) are the group's external inputs, except one that a
//     DequantizeLinear of the master's output shape computes for a chain node alone (a quantized
//     residual Add's skip branch): that node joins the epilogue, which reads its 8-bit input.
//   Phase 2 (injective fusion), in topological order, for the group P that the node ends and the
//     group Q of its linked reader:
//     1. P and Q both elementwise, broadcast or injective: merged (chains of injective ops fuse);
//        the merged pattern is the least fusable of the two and the master the last node;
//     2. P elementwise, broadcast or injective and Q a reduction (pooling): P is inlined into the
//        reduction's input; the merged group is a reduction whose master is the pooling node.
//     Except: a LayoutTransform from a blocked layout to rows of 16 or more (NCHW[x]c -> NCHW)
//     stays out of a reader that flattens it to fewer dimensions (schedule_injective_x86 tiles
//     the transposition in the conversion's own kernel; a flat output would gather).
// Both phases stop where the group's expression would grow past kMaxGroupOps operators (below).
// Nothing else merges: two out-ewise-fusable ops never share a group, nothing else is fused into
// an out-ewise-fusable group's inputs, a reduction is never fused into what follows it, opaque ops
// (Softmax, LSTM) stay alone, and a value read by two nodes or returned by the graph ends its
// group. Phase 2's rules depend only on the kinds of the two groups (and that exception on the two
// nodes), so its result does not depend on the order of independent nodes; phase 1 gives a node
// that two chains reach (Add(conv1, conv2)) to the chain of the conv that comes first in nodes().
// Because every inner value of a group has its one reader inside the group, a group has one
// external output and grouping never makes a cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_pattern.h"

namespace kiln::graph {

/// The most operators one fused group's output expression may apply, its inner values inlined: a
/// value read at k places (a linear Resize reads 4 per output element in 2-D) counts k times, one
/// read twice at the same place (Add(t, t), LeakyRelu's select) once (the lowering binds it to a
/// let). The passes over the loop IR recurse as deep as an expression, so this bounds their stack:
/// a chain of 20,000 elementwise operators becomes kernels of 256, not one expression 20,000 deep,
/// and a chain of resizes does not grow as 4^n. A real network's groups hold fewer than 20.
inline constexpr int64_t kMaxGroupOps = 256;

/// One fused kernel.
struct FusedGroup {
  /// Indices into graph.nodes(), in topological (ascending) order; the last one produces output.
  std::vector<size_t> nodes;
  /// The node whose schedule the group uses: its out-ewise-fusable or reduction op, else the last
  /// node.
  size_t master = 0;
  /// The group's pattern: the master's, or for an elementwise/injective group the least fusable.
  OpPattern pattern = OpPattern::kOpaque;
  /// The group's single external output (the last node's first output).
  ValueId output = kNoValue;
  /// Every value the group produces for outside readers: {output}, except for a multi-output
  /// opaque node (LSTM's Y, Y_h, Y_c), which is alone in its group; omitted outputs left out.
  std::vector<ValueId> outputs;
  /// External inputs including constants, in order of first use, each once.
  std::vector<ValueId> inputs;
};

/// Partitions `graph` (verified, in topological order) into fused groups by the rules above, in
/// topological order of groups. With enable = false every node is its own group (the fusion
/// ablation).
std::vector<FusedGroup> fuse_ops(const Graph& graph, bool enable = true);

/// One line per group: "group 0 [out_ewise_fusable, master Conv]: Conv, Add, Relu".
std::string fused_groups_to_string(const Graph& graph, const std::vector<FusedGroup>& groups);

}  // namespace kiln::graph
