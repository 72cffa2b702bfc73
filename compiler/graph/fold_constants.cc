// fold_constants: each foldable node is lowered as a group of its own (op_lowering), built with
// the JIT and run on the constants' data.
#include "compiler/graph/fold_constants.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/graph/fuse.h"
#include "compiler/graph/op_lowering.h"
#include "compiler/graph/op_pattern.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/lower.h"
#include "deploy/runtime/module.h"

namespace kiln::graph {
namespace {

bool foldable(const Graph& g, const Node& n, int64_t max_elements, bool keep_dequantize) {
  const ops::OpDef* def = ops::find_op(n.op);
  if (n.inputs.empty() || def == nullptr || !def->fold_constants || !has_lowering(n.op)) {
    return false;
  }
  if (keep_dequantize && n.op == "DequantizeLinear") return false;
  for (ValueId v : n.inputs) {
    if (v != kNoValue && !g.value(v).is_constant()) return false;
  }
  bool any_output = false;
  for (ValueId v : n.outputs) {
    if (v == kNoValue) continue;
    // A graph output stays computed: the executor returns what a node writes.
    if (g.value(v).num_elements() > max_elements || g.is_output(v)) return false;
    any_output = true;
  }
  return any_output;
}

/// The node alone as a fused group.
FusedGroup single_group(const Graph& g, size_t index) {
  const Node& n = g.nodes()[index];
  FusedGroup group;
  group.nodes = {index};
  group.master = index;
  group.pattern = op_pattern(n);
  for (ValueId v : n.outputs) {
    if (v != kNoValue) group.outputs.push_back(v);
  }
  group.output = group.outputs.front();
  for (ValueId v : n.inputs) {
    if (v != kNoValue &&
        std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end())
      group.inputs.push_back(v);
  }
  return group;
}

}  // namespace

size_t fold_constants(Graph& g, int64_t max_elements, bool keep_dequantize) {
  size_t folded = 0;
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!foldable(g, g.nodes()[i], max_elements, keep_dequantize)) {
      kept.push_back(g.nodes()[i]);
      continue;
    }
    const LoweredOp op = lower_group(g, single_group(g, i));
    const std::string name = "fold_" + std::to_string(i);
    // Run once: LLVM's optimizations would cost more than they save (a Swin transformer folds
    // a thousand nodes).
    runtime::Function f =
        compiler::build(op.schedule, op.args, "llvm", name, {}, /*optimize=*/false).function(name);
    std::vector<runtime::NDArray> results;
    std::vector<runtime::Arg> args;
    for (ValueId v : op.values) {
      const Value& val = g.value(v);
      if (val.is_constant()) {
        args.emplace_back(val.data->tensor());
      } else {
        results.push_back(runtime::NDArray::empty(val.shape, val.dtype));
      }
    }
    // Outputs come last in op.values; bind them now that `results` no longer grows.
    for (runtime::NDArray& r : results) args.emplace_back(r);
    f.call(args);
    size_t r = 0;
    for (ValueId v : op.values) {
      Value& val = g.value(v);
      if (!val.is_constant())
        val.data = std::make_shared<const runtime::NDArray>(std::move(results[r++]));
    }
    ++folded;
  }
  g.nodes() = std::move(kept);
  return folded;
}

}  // namespace kiln::graph
