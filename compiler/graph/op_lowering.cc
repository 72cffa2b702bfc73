// The lowering driver: lower_group builds placeholders for the group's external inputs, lowers
// each node by its operator's entry in the operator registry (ops/registry.h: the computes and
// CPU schedules live in the family files under ops/), inlines what the master's kernel absorbs and
// returns the schedule with the arguments in call order; for a GPU target the master's GPU
// strategy (its registry entry) schedules the group.
#include "compiler/graph/op_lowering.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/target/target.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/reduce_gpu.h"
#include "compiler/topi/transform.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using ops::LowerCtx;
using ops::LowerResult;
using ops::Tuning;
using te::Tensor;

/// A placeholder for `v` named "in_<name>" (sanitized; "in_" keeps it apart from topi's names for
/// the outputs), made distinct from the names in `taken`: arguments of one function must have
/// distinct names.
Tensor placeholder_of(const Value& v, std::set<std::string>* taken) {
  std::vector<Expr> shape;
  for (int64_t d : v.shape) shape.push_back(Expr(static_cast<int>(d)));
  const std::string base = "in_" + ops::sanitize(v.name);
  std::string name = base;
  for (int k = 1; taken->count(name); ++k) name = base + "_" + std::to_string(k);
  taken->insert(name);
  return te::placeholder(shape, v.ir_dtype(), name);
}

/// A group's schedule for a GPU target: the master's template (table in docs/gpu.md, section 5)
/// tiling its anchor with the group's epilogue computed in its tile, at the config `tuning`
/// chooses, the group's other pure stages inlined; softmax, log-softmax and the reductions by
/// reduce_gpu (each reduction a kernel); an elementwise / injective group as one kernel
/// (schedule_injective); an LSTM by its own schedule. kiln::Error naming the node and the operator
/// for a group with no GPU schedule yet (1-D convolutions, products of more than 3 dimensions).
void schedule_group_gpu(const Graph& g, const FusedGroup& group, const LowerResult& master,
                        te::Schedule& s, const Tensor& output, const Tuning& tuning,
                        const target::Target& target) {
  const Node& n = g.nodes()[group.master];
  if (master.gpu) {
    master.gpu(s, target);
    return;
  }
  // The operator's strategy (its registry entry): a reduction, a template tiling the anchor
  // (none where the lowering gives no anchor: a 1-D form, a product of more than 3 dimensions),
  // one injective kernel, or none.
  const ops::OpDef* def = ops::find_op(n.op);
  const ops::GpuStrategy strategy = def != nullptr ? def->gpu : ops::GpuStrategy::kRefused;
  if (strategy == ops::GpuStrategy::kReduce) {
    const space::ConfigSpace space = topi::gpu::reduce_gpu_space(output);
    topi::gpu::schedule_reduce_gpu(s, output, topi::gpu::reduce_gpu_default(space, target));
    return;
  }
  std::string tmpl;
  if (strategy == ops::GpuStrategy::kTemplate && master.anchor.defined()) {
    tmpl = def->gpu_template(n, master.anchor.ndim());
  }
  if (tmpl.empty() && strategy != ops::GpuStrategy::kInjective) {
    const std::string form = strategy == ops::GpuStrategy::kTemplate ? def->gpu_note : "";
    KILN_USER_ERROR() << "graph build for " << target.kind << ": node '" << n.name << "' (" << n.op
                      << "): operator '" << n.op << "'" << form << " has no GPU schedule yet";
  }
  // Pure stages are inlined; the anchor and the reductions it reads (an average's sum) are the
  // template's to place.
  for (te::Stage st : s->stages) {
    if (st->is_placeholder() || st->origin_op == output) continue;
    if (!tmpl.empty() && (st->origin_op == master.anchor || !st->origin_op->reduce_axis.empty())) {
      continue;
    }
    st.compute_inline();
  }
  if (!tmpl.empty()) {
    tuning.schedule(tmpl, s, master.anchor, output);
  } else {
    // Blocks of at most 256 threads: a common size that every GPU of ours runs.
    topi::gpu::schedule_injective(s, output, std::min(256, target.max_num_threads));
  }
}

}  // namespace

bool has_lowering(const std::string& op) {
  const ops::OpDef* def = ops::find_op(op);
  return def != nullptr && def->lower != nullptr;
}

LoweredOp lower_group(const Graph& g, const FusedGroup& group, autotune::ConfigSource* configs,
                      const std::string& target) {
  KILN_ICHECK(!group.nodes.empty()) << "lower_group: an empty group";
  // Every value the group reads or computes, as a tensor: placeholders for the external inputs
  // (one per distinct value: Add(x, x) reads one argument twice), topi's stages for the rest.
  std::map<ValueId, Tensor> tensors;
  std::set<std::string> taken;
  for (ValueId v : group.inputs) tensors[v] = placeholder_of(g.value(v), &taken);
  std::set<ValueId> used_inputs;
  LowerResult master;
  std::vector<Tensor> master_outs;
  // For each node but the master: its outputs and the tensors it read, to find its stages.
  std::vector<std::pair<std::vector<Tensor>, std::set<const te::TensorNode*>>> others;

  for (size_t index : group.nodes) {
    const Node& node = g.nodes().at(index);
    std::vector<bool> used(node.inputs.size(), true);
    LowerCtx c{g, node, {}, Tuning{configs, target}, &used};
    const ops::OpDef* def = ops::find_op(node.op);
    if (def == nullptr || def->lower == nullptr) {
      c.fail("operator '" + node.op + "' has no lowering");
    }
    std::set<const te::TensorNode*> read;
    for (ValueId v : node.inputs) {
      if (v == kNoValue) {
        c.in.emplace_back();
        continue;
      }
      auto it = tensors.find(v);
      KILN_ICHECK(it != tensors.end()) << "lower_group: " << c.where() << " reads '"
                                       << g.value(v).name << "', which the group lacks";
      c.in.push_back(it->second);
      read.insert(it->second.get());
    }
    LowerResult r = def->lower(c);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] != kNoValue && used[i]) used_inputs.insert(node.inputs[i]);
    }
    std::vector<Tensor> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      if (i >= r.outs.size() || !r.outs[i].defined()) {
        c.fail("output " + std::to_string(i) + " is not supported");
      }
      const Value& v = g.value(node.outputs[i]);
      std::vector<int64_t> shape = topi::const_shape(r.outs[i], node.op);
      KILN_ICHECK(shape == v.shape)
          << "graph build: " << c.where() << ": the lowering computes output " << i
          << " with shape " << topi::shape_str(r.outs[i]->shape()) << ", the graph says "
          << v.type_string();
      tensors[node.outputs[i]] = r.outs[i];
    }
    if (index == group.master) {
      master = r;
      for (const Tensor& t : r.outs) {
        if (t.defined()) master_outs.push_back(t);
      }
    } else {
      others.emplace_back(r.outs, std::move(read));
    }
  }
  KILN_ICHECK(master.schedule) << "lower_group: the master node is not in the group";

  LoweredOp op;
  std::vector<Tensor> outputs;
  for (ValueId v : group.outputs) outputs.push_back(tensors.at(v));
  if (outputs.empty()) {
    KILN_USER_ERROR() << "graph build: node '" << g.nodes()[group.master].name << "' has no output";
  }
  // The schedule covers every output the master's topi made (an LSTM's absent ones become
  // temporaries); a fused group has one output, its last stage.
  op.schedule = te::create_schedule(group.nodes.size() == 1 ? master_outs : outputs);
  // The stages of the nodes fused into the master's kernel are inlined, all but the last.
  std::set<const te::TensorNode*> stored;
  for (const Tensor& t : outputs) stored.insert(t.get());
  for (const auto& [outs, read] : others) {
    std::vector<Tensor> todo;
    for (const Tensor& t : outs) {
      if (t.defined()) todo.push_back(t);
    }
    std::set<const te::TensorNode*> seen;
    while (!todo.empty()) {
      Tensor t = todo.back();
      todo.pop_back();
      if (read.count(t.get()) || !t->is_compute() || !seen.insert(t.get()).second) continue;
      if (!stored.count(t.get())) op.schedule[t].compute_inline();
      for (const Tensor& in : t->inputs()) todo.push_back(in);
    }
  }
  const target::Target tgt = target::Target::parse(target);
  if (tgt.is_gpu()) {
    schedule_group_gpu(g, group, master, op.schedule, tensors.at(group.output),
                       Tuning{configs, target}, tgt);
  } else {
    master.schedule(op.schedule, tensors.at(group.output));
  }

  for (ValueId v : group.inputs) {
    if (!used_inputs.count(v)) continue;
    op.args.push_back(tensors.at(v));
    op.values.push_back(v);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    op.args.push_back(outputs[i]);
    op.values.push_back(group.outputs[i]);
  }
  return op;
}

}  // namespace kiln::graph