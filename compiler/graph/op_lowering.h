// From one fused group of graph nodes (fuse.h) to one scheduled tensor program: each supported ONNX
// operator becomes its topi compute, chained inside the group, over te placeholders of the group's
// external inputs (constants included: they are the function's parameters). The master node's
// default x86 schedule is applied (the template's default config, or schedule_injective_x86 for
// injective stages) with the group's last stage as the one that stores the result; every other
// node's stages are inlined, so a conv's bias, batch norm, activation and residual add are
// computed on its register tile.
// For a GPU target ("cuda", "opencl") the group gets a GPU schedule instead, at the template's
// default config: a 2-D convolution with one group in conv2d_nchw_gpu, a 2-D Gemm / MatMul in
// matmul_gpu (the epilogue in their tiles), an elementwise or injective group in one kernel
// (topi::gpu::schedule_injective); any other group is a kiln::Error naming the node and operator.
//
//   std::vector<FusedGroup> groups = fuse_ops(g);
//   LoweredOp op = lower_group(g, groups[i]);
//   ir::PrimFunc f = compiler::lower(op.schedule, op.args, "conv1_0");
//   // the function takes the tensors of op.values, in that order (inputs, then outputs)
//
// Operators whose parameters topi needs at compile time (Reshape's shape, Pad's pads, Slice's
// bounds, Clip's bounds, a reduction's axes, Tile's repeats, Split's sizes) read them from the
// attributes the ONNX front end filled in.
#pragma once

#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/graph/fuse.h"
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

/// Lowers `group` of `g`. kiln::Error naming the operator and the node when an operator (or the
/// form of it: a 3-D convolution, a bidirectional LSTM, ...) has no lowering.
/// Tunable operators get the config `configs` chooses for their task (for `target`), or their
/// template's default without a source.
LoweredOp lower_group(const Graph& g, const FusedGroup& group,
                      autotune::ConfigSource* configs = nullptr,
                      const std::string& target = "llvm");

/// Whether lower_group knows the operator type `op` (some of its forms may still be refused).
bool has_lowering(const std::string& op);

}  // namespace kiln::graph
