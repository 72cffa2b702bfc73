// Loop partitioning: the last, partial iteration of a tile loop is peeled off.
#include "compiler/pass/partition_loops.h"

#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

bool wants_constant_extent(ForKind k) {
  return k == ForKind::kUnrolled || k == ForKind::kVectorized;
}

/// The unrolled or vectorized loops in `s` whose extent is not a constant; with `var` defined,
/// only those whose extent uses `var`.
int variable_tiles(const Stmt& s, const Var& var) {
  int n = 0;
  post_order_visit(s, [&](const Object* o) {
    auto f = dynamic_cast<const ForNode*>(o);
    if (f == nullptr || !wants_constant_extent(f->for_kind) || as_const_int(f->extent)) return;
    if (!var.defined() || uses_var(f->extent, var)) ++n;
  });
  return n;
}

/// The guards inside vectorized loops in `s` (a split that does not divide its extent: a vector
/// predicated on every iteration of the loop outside it); with `var` defined, only those whose
/// condition uses `var`.
int vector_guards(const Stmt& s, const Var& var) {
  int n = 0;
  post_order_visit(s, [&](const Object* o) {
    auto f = dynamic_cast<const ForNode*>(o);
    if (f == nullptr || f->for_kind != ForKind::kVectorized) return;
    post_order_visit(f->body, [&](const Object* g) {
      auto i = dynamic_cast<const IfThenElseNode*>(g);
      if (i != nullptr && (!var.defined() || uses_var(i->condition, var))) ++n;
    });
  });
  return n;
}

class LoopPartitioner : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto f = s.as<ForNode>();
    if (f == nullptr || f->for_kind != ForKind::kSerial) return s;
    auto min = as_const_int(f->min);
    auto extent = as_const_int(f->extent);
    if (!min || !extent || *extent < 2) return s;
    const int mine = variable_tiles(f->body, f->loop_var);
    const int guards = vector_guards(f->body, f->loop_var);
    if (mine == 0 && guards == 0) return s;
    const int others = variable_tiles(f->body, Var()) - mine;
    const int other_guards = vector_guards(f->body, Var()) - guards;

    // The full iterations [min, min + extent - 1) and the last one, each simplified with the
    // loop variable's range known.
    Stmt full = simplify(for_loop(f->loop_var, f->min, make_const(f->min.dtype(), *extent - 1),
                                  f->for_kind, f->body));
    VarMap last{{f->loop_var.get(), make_const(f->loop_var.dtype(), *min + *extent - 1)}};
    Stmt tail = simplify(substitute(f->body, last));
    // Worth it only when both parts lost every variable tile this loop bounded, and the full
    // iterations every vector guard on it (the last vector of a row, predicated in the tail only).
    if (mine > 0 && (variable_tiles(full, Var()) > others || variable_tiles(tail, Var()) > others))
      return s;
    if (guards > 0 && vector_guards(full, Var()) > other_guards) return s;
    return seq({full, tail});
  }
};

}  // namespace

ir::Stmt partition_loops(const ir::Stmt& s) { return LoopPartitioner().mutate(s); }

}  // namespace kiln::pass
