// Removal of statements that do nothing, innermost first, so that an emptied body empties its
// loop or branch in turn.
#include "compiler/pass/remove_no_op.h"

#include "compiler/ir/analysis.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

/// Whether s refers to v: in an expression, or as the node of an attribute (storage_scope).
bool refers_to(const Stmt& s, const Var& v) {
  bool found = false;
  post_order_visit(s, [&](const Object* n) {
    if (n == v.get()) found = true;
    if (auto a = dynamic_cast<const AttrStmtNode*>(n); a && a->node.get() == v.get()) found = true;
  });
  return found;
}

class NoOpRemover : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto f = s.as<ForNode>();
    auto extent = as_const_int(f->extent);
    if (is_no_op(f->body) || (extent && *extent <= 0)) return no_op();
    return s;
  }

  Stmt mutate_(const IfThenElseNode* op, const Stmt& self) override {
    Stmt then_case = mutate(op->then_case);
    Stmt else_case = mutate(op->else_case);
    if (else_case.defined() && is_no_op(else_case)) else_case = Stmt();
    if (auto c = as_const_int(op->condition)) {
      if (*c) return then_case;
      return else_case.defined() ? else_case : no_op();
    }
    if (is_no_op(then_case)) {
      if (else_case.defined()) return if_then_else(!op->condition, else_case);
      return has_side_effects(op->condition) ? evaluate(op->condition) : no_op();
    }
    if (then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) return self;
    return if_then_else(op->condition, then_case, else_case);
  }

  Stmt mutate_(const EvaluateNode* op, const Stmt& self) override {
    if (is_no_op(self) || has_side_effects(op->value)) return self;
    return no_op();
  }

  Stmt mutate_(const StoreNode* op, const Stmt& self) override {
    auto l = op->value.as<LoadNode>();
    if (l && l->buffer_var.same_as(op->buffer_var) && expr_deep_equal(l->index, op->index) &&
        !l->predicate.defined() && !op->predicate.defined()) {
      return no_op();
    }
    return self;
  }

  Stmt mutate_(const AllocateNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto a = s.as<AllocateNode>();
    if (!refers_to(a->body, a->buffer_var)) return a->body;
    return s;
  }

  Stmt mutate_(const LetStmtNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto l = s.as<LetStmtNode>();
    if (!refers_to(l->body, l->var) && !has_side_effects(l->value)) return l->body;
    return s;
  }

  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto a = s.as<AttrStmtNode>();
    if (is_no_op(a->body) && !has_side_effects(a->value)) return a->body;
    return s;
  }

  Stmt mutate_(const ProducerRealizeNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto r = s.as<ProducerRealizeNode>();
    return is_no_op(r->body) ? r->body : s;
  }
};

}  // namespace

ir::Stmt remove_no_op(const ir::Stmt& s) { return NoOpRemover().mutate(s); }

}  // namespace kiln::pass
