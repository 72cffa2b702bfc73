// Domain and index propagation along split and fuse relations.
#include "compiler/te/message_passing.h"

#include "base/error.h"
#include "compiler/ir/simplify.h"

namespace kiln::te {
namespace {

Expr ceildiv(const Expr& a, const Expr& b) { return ir::simplify(ir::floordiv(a + b - 1, b)); }

const Range& range_of(const RangeMap& ranges, const IterVar& iv) {
  auto it = ranges.find(iv.get());
  KILN_ICHECK(it != ranges.end()) << "no range for axis " << iv.var().name();
  return it->second;
}

bool is_root(const StageNode& stage, const IterVar& iv) {
  for (auto& a : stage.op->axis)
    if (a == iv) return true;
  for (auto& a : stage.op->reduce_axis)
    if (a == iv) return true;
  return false;
}

}  // namespace

void pass_down_domain(const StageNode& stage, RangeMap* ranges) {
  for (auto& rel : stage.relations) {
    if (auto* s = std::get_if<SplitRelation>(&rel)) {
      const Range& p = range_of(*ranges, s->parent);
      if (s->factor.defined()) {
        (*ranges)[s->inner.get()] = Range(0, s->factor);
        (*ranges)[s->outer.get()] = Range(0, ceildiv(p.extent, s->factor));
      } else {
        (*ranges)[s->outer.get()] = Range(0, s->nparts);
        (*ranges)[s->inner.get()] = Range(0, ceildiv(p.extent, s->nparts));
      }
    } else {
      auto& f = std::get<FuseRelation>(rel);
      const Range& o = range_of(*ranges, f.outer);
      const Range& i = range_of(*ranges, f.inner);
      (*ranges)[f.fused.get()] = Range(0, ir::simplify(o.extent * i.extent));
    }
  }
}

ValueMap leaf_values(const StageNode& stage, const RangeMap& ranges) {
  ValueMap values;
  for (auto& iv : stage.leaf_iter_vars) {
    Expr v = iv.var();
    if (is_root(stage, iv)) v = v + range_of(ranges, iv).min;
    values[iv.get()] = v;
  }
  return values;
}

ValueMap pass_up_index(const StageNode& stage, const RangeMap& ranges, ValueMap values) {
  for (auto it = stage.relations.rbegin(); it != stage.relations.rend(); ++it) {
    if (auto* s = std::get_if<SplitRelation>(&*it)) {
      Expr inner_extent = range_of(ranges, s->inner).extent;
      Expr v = values.at(s->outer.get()) * inner_extent + values.at(s->inner.get());
      values[s->parent.get()] = v + range_of(ranges, s->parent).min;
    } else {
      auto& f = std::get<FuseRelation>(*it);
      Expr fused = values.at(f.fused.get());
      Expr inner_extent = range_of(ranges, f.inner).extent;
      // The fused loop counts from 0; its parts count from their own minimums (non-zero for an
      // attached stage, whose root axes start at its region's corner).
      values[f.outer.get()] = ir::floordiv(fused, inner_extent) + range_of(ranges, f.outer).min;
      values[f.inner.get()] = ir::floormod(fused, inner_extent) + range_of(ranges, f.inner).min;
    }
  }
  return values;
}

std::vector<Expr> split_guards(const StageNode& stage, const RangeMap& ranges,
                               const ValueMap& values) {
  std::vector<Expr> guards;
  for (auto& rel : stage.relations) {
    auto* s = std::get_if<SplitRelation>(&rel);
    if (!s) continue;
    const Range& p = range_of(ranges, s->parent);
    Expr covered =
        ir::simplify(range_of(ranges, s->outer).extent * range_of(ranges, s->inner).extent);
    if (ir::can_prove(covered == p.extent)) continue;  // the split divides: no guard
    guards.push_back(values.at(s->parent.get()) < p.min + p.extent);
  }
  return guards;
}

}  // namespace kiln::te
