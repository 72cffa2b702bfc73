// Operator patterns: how fusable each graph operator is (each operator's entry in the operator
// registry, ops/registry.h, gives its pattern), TVM's four categories refined the way
// TVM's FuseOps refines them (elementwise and broadcast are special cases of injective). Lower is
// more fusable; fuse_ops (fuse.h) decides from these alone.
//
//   kElemWise         out[i] = f(in[i])                          Relu, Exp, Cast, Clip
//   kBroadcast        out[i] = f(a[bcast(i)], b[bcast(i)])        Add, Mul, BatchNormalization
//   kInjective        each output element reads one input element Reshape, Transpose, Concat, Pad
//   kCommReduce       out reduces a window/axis of its input      MaxPool, GlobalAveragePool
//   kOutEWiseFusable  complex, but elementwise ops can be fused    Conv, Gemm, MatMul
//                     into its output
//   kOpaque           cannot be fused                              LSTM, Softmax, LogSoftmax
//
// Softmax and LogSoftmax are kOpaque, as in TVM: their schedule is three stages (max, sum of
// exponentials, normalization) over the same axis, which fits neither the one-reduction schedule
// of kCommReduce (that inlines producers into a single reduction) nor an elementwise epilogue.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/graph/graph.h"

namespace kiln::graph {

enum class OpPattern { kElemWise, kBroadcast, kInjective, kCommReduce, kOutEWiseFusable, kOpaque };

/// The pattern of `node`'s operator (its registry entry's); kOpaque for an operator without one.
OpPattern op_pattern(const Node& node);

/// How many places of its first input one element of `node`'s output reads (its registry entry's
/// input_reads; 1 without one).
int64_t input_reads(const Graph& g, const Node& node);

/// "elemwise", "broadcast", "injective", "comm_reduce", "out_ewise_fusable", "opaque".
const char* op_pattern_name(OpPattern pattern);

}  // namespace kiln::graph
