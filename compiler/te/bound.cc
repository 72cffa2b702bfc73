// Bound inference, from the outputs back to the inputs.
#include "compiler/te/bound.h"

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/interval.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"

namespace kiln::te {
namespace {

using ir::Interval;
using ir::VarIntervals;

/// Collects the index lists of every read of `target` in an expression.
std::vector<std::vector<Expr>> reads_of(const Expr& body, const TensorNode* target) {
  std::vector<std::vector<Expr>> out;
  ir::post_order_visit(body, [&](const ir::Object* n) {
    if (auto l = dynamic_cast<const ir::ProducerLoadNode*>(n)) {
      if (l->producer.get() == target) out.push_back(l->indices);
    }
  });
  return out;
}

/// The region of `stage` that one iteration of its attach loop in the consumer reads.
std::vector<Range> attached_region(const StageNode& stage, Bounds* b) {
  const StageNode& consumer = *stage.attach_stage.get();
  const int attach = consumer.leaf_index(stage.attach_ivar);
  KILN_ICHECK(attach >= 0) << "attach loop is not a loop of " << consumer.name();

  // Loops inside the attach point range over their extents; those outside stay symbolic.
  VarIntervals relaxed, fixed;
  for (size_t i = 0; i < consumer.leaf_iter_vars.size(); ++i) {
    const IterVar& iv = consumer.leaf_iter_vars[i];
    const Range& r = b->ranges.at(iv.get());
    Interval full(ir::make_zero(r.extent.dtype()), ir::simplify(r.extent - 1));
    if (static_cast<int>(i) > attach) relaxed[iv.var().get()] = full; else fixed[iv.var().get()] = full;
  }
  ValueMap values = pass_up_index(consumer, b->ranges, leaf_values(consumer, b->ranges));
  ir::VarMap root_values;
  for (auto& iv : consumer.op->axis) root_values[iv.var().get()] = values.at(iv.get());
  for (auto& iv : consumer.op->reduce_axis) root_values[iv.var().get()] = values.at(iv.get());

  const TensorNode* target = stage.op.get();
  const size_t ndim = target->shape().size();
  std::vector<Interval> region(ndim);
  std::vector<bool> seen(ndim, false);
  for (auto& idx : reads_of(consumer.op->body, target)) {
    for (size_t d = 0; d < ndim; ++d) {
      Interval iv = ir::eval_interval(ir::substitute(idx[d], root_values), relaxed);
      region[d] = seen[d] ? ir::union_of(region[d], iv) : iv;
      seen[d] = true;
    }
  }
  KILN_ICHECK(std::all_of(seen.begin(), seen.end(), [](bool s) { return s; }))
      << consumer.name() << " does not read " << target->name();

  std::vector<Range> exact;
  std::vector<Range> storage;
  for (size_t d = 0; d < ndim; ++d) {
    // Never compute outside the tensor (a consumer's split tail may reach past it).
    Interval shape(ir::make_zero(target->shape()[d].dtype()), target->shape()[d] - 1);
    Interval r = ir::intersect(region[d], shape);
    KILN_USER_CHECK(r.min.defined() && r.max.defined())
        << "compute_at: cannot bound the region of '" << target->name() << "' (dimension " << d
        << ") that '" << consumer.name() << "' reads inside loop '" << stage.attach_ivar.var().name() << "'";
    Expr min = ir::simplify(r.min, fixed);
    Expr extent = ir::simplify(r.max - r.min + 1, fixed);
    exact.emplace_back(min, extent);
    auto cmax = ir::const_max(extent, fixed);
    storage.emplace_back(min, cmax ? ir::make_const(extent.dtype(), *cmax) : extent);
  }
  b->storage[&stage] = storage;
  return exact;
}

}  // namespace

Bounds infer_bound(const Schedule& sch) {
  Bounds b;
  const auto& stages = sch->stages;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) {
    const StageNode& s = *it->get();
    if (s.is_placeholder() || s.attach_type == AttachType::kInline) continue;
    std::vector<Range> root;
    if (s.attach_type == AttachType::kScope) {
      root = attached_region(s, &b);
    } else {
      for (auto& e : s.op->shape()) root.emplace_back(ir::make_zero(e.dtype()), e);
      b.storage[&s] = root;
    }
    for (size_t d = 0; d < s.op->axis.size(); ++d) b.ranges[s.op->axis[d].get()] = root[d];
    for (auto& iv : s.op->reduce_axis) b.ranges[iv.get()] = iv->dom;
    pass_down_domain(s, &b.ranges);
  }
  return b;
}

}  // namespace kiln::te
