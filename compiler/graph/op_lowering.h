// From one graph node to a scheduled tensor program: each supported ONNX operator becomes its topi
// compute over te placeholders of the node's inputs (constants included: they are the function's
// parameters), with the operator's default x86 schedule applied (the template's default config, or
// schedule_injective_x86 for injective stages).
//
//   LoweredOp op = lower_node(g, g.nodes()[i]);
//   ir::PrimFunc f = compiler::lower(op.schedule, op.args, "conv1_0");
//   // the function takes the tensors of op.values, in that order (inputs, then outputs)
//
// Operators whose parameters topi needs at compile time (Reshape's shape, Pad's pads, Slice's
// bounds, Clip's bounds) read them from the attributes the ONNX front end filled in.
#pragma once

#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"

namespace kiln::graph {

/// One node as a scheduled tensor program.
struct LoweredOp {
  te::Schedule schedule;
  /// The function's arguments in call order: the inputs it reads, then its outputs.
  std::vector<te::Tensor> args;
  /// The graph value behind each argument (same length as args).
  std::vector<ValueId> values;
};

/// Lowers `node` of `g`. kiln::Error naming the operator and the node when the operator (or the
/// form of it: a 1-D convolution, a bidirectional LSTM, ...) has no lowering.
LoweredOp lower_node(const Graph& g, const Node& node);

/// Whether lower_node knows the operator type `op` (some of its forms may still be refused).
bool has_lowering(const std::string& op);

}  // namespace kiln::graph
