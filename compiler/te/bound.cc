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

/// The rank of a memory scope: global 0, shared 1 (one copy per block), local 2 (one per thread).
int storage_rank(const std::string& scope) {
  if (scope.rfind("shared", 0) == 0) return 1;
  if (scope.rfind("local", 0) == 0) return 2;
  return 0;
}

/// The rank of a thread axis: blockIdx 0; threadIdx and virtual threads 1.
int thread_rank(const std::string& tag) { return tag.rfind("blockIdx", 0) == 0 ? 0 : 1; }

/// Whether loop `iv` of `s` is bound to a thread axis that a buffer of `rank` is shared across:
/// its region must then cover every value of that axis (a shared buffer covers the block's
/// threads, a global one every block).
bool relaxed_by_binding(const StageNode& s, const IterVar& iv, int rank) {
  const IterVar& t = s.attr(iv).bind_thread;
  return t.defined() && thread_rank(t->thread_tag) >= rank;
}

/// The region of `stage` that one iteration of its attach loop in the consumer reads: what the
/// consumer reads of it, and what the stages computed inside that loop which read it (a local copy
/// of a shared tile) read of it.
std::vector<Range> attached_region(const ScheduleNode& sch, const StageNode& stage, Bounds* b) {
  const StageNode& consumer = *stage.attach_stage.get();
  const int attach = consumer.leaf_index(stage.attach_ivar);
  KILN_ICHECK(attach >= 0) << "attach loop is not a loop of " << consumer.name();
  const int rank = storage_rank(stage.scope);

  // Loops inside the attach point range over their extents; those outside stay symbolic, unless
  // they are bound to a thread axis the stage's storage is shared across (bound loops of the
  // stages the consumer is itself computed in included). The ranges of the fixed loops bound the
  // storage's extent.
  VarIntervals relaxed, fixed;
  auto full = [&](const IterVar& iv) {
    const Range& r = b->ranges.at(iv.get());
    return Interval(ir::make_zero(r.extent.dtype()), ir::simplify(r.extent - 1));
  };
  for (size_t i = 0; i < consumer.leaf_iter_vars.size(); ++i) {
    const IterVar& iv = consumer.leaf_iter_vars[i];
    bool inside = static_cast<int>(i) > attach;
    (inside || relaxed_by_binding(consumer, iv, rank) ? relaxed : fixed)[iv.var().get()] = full(iv);
  }
  for (const StageNode* s = &consumer; s->attach_type == AttachType::kScope;) {
    s = s->attach_stage.get();
    for (const IterVar& iv : s->leaf_iter_vars) {
      (relaxed_by_binding(*s, iv, rank) ? relaxed : fixed)[iv.var().get()] = full(iv);
    }
  }

  const TensorNode* target = stage.op.get();
  const size_t ndim = target->shape().size();
  std::vector<Interval> region(ndim);
  std::vector<bool> seen(ndim, false);
  for (const Stage& reader : sch.consumers_of(sch.stage_of(stage.op))) {
    if (reader->attach_type == AttachType::kInline) continue;  // substituted into its readers
    // A reader other than the consumer runs inside the attach loop: all its loops, and those of
    // the stages between it and the consumer, are relaxed.
    VarIntervals reader_relaxed = relaxed;
    for (const StageNode* s = reader.get(); s != &consumer; s = s->attach_stage.get()) {
      bool inside =
          s->attach_type == AttachType::kScope &&
          (s->attach_stage.get() != &consumer || consumer.leaf_index(s->attach_ivar) >= attach);
      KILN_USER_CHECK(inside) << "compute_at: '" << stage.name() << "' is computed inside loop '"
                              << stage.attach_ivar.var().name() << "' of '" << consumer.name()
                              << "', but its reader '" << reader->name()
                              << "' is not computed inside that loop";
      for (const IterVar& iv : s->leaf_iter_vars) reader_relaxed[iv.var().get()] = full(iv);
    }
    ValueMap values =
        pass_up_index(*reader.get(), b->ranges, leaf_values(*reader.get(), b->ranges));
    ir::VarMap root_values;
    for (auto& iv : reader->op->axis) root_values[iv.var().get()] = values.at(iv.get());
    for (auto& iv : reader->op->reduce_axis) root_values[iv.var().get()] = values.at(iv.get());
    for (auto& idx : reads_of(reader->op->body, target)) {
      for (size_t d = 0; d < ndim; ++d) {
        Interval iv = ir::eval_interval(ir::substitute(idx[d], root_values), reader_relaxed);
        region[d] = seen[d] ? ir::union_of(region[d], iv) : iv;
        seen[d] = true;
      }
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
        << ") that '" << consumer.name() << "' reads inside loop '"
        << stage.attach_ivar.var().name() << "'";
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
      root = attached_region(*sch.get(), s, &b);
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
