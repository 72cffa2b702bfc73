// Removal of statements that do nothing, innermost first, so that an emptied body empties its
// loop or branch in turn.
//
// An allocation or let whose body no longer refers to its variable goes too. Lowering nests one
// allocation per buffer around the whole program, so asking each one's body (refers_to) would be
// quadratic in the buffers (an unrolled recurrent network has thousands): the variables referred
// to anywhere are collected once, and so are those of every part the pass removes; only a
// variable some removed part referred to (or defined twice) is looked for in its body again.
#include "compiler/pass/remove_no_op.h"

#include <unordered_map>
#include <unordered_set>

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

/// The variables (and attribute nodes) `n` refers to, into `out`; with `defs`, how often each
/// variable is defined by an allocation or a let.
void collect_refs(const Object* n, std::unordered_set<const Object*>& out,
                  std::unordered_map<const Object*, int>* defs = nullptr) {
  if (dynamic_cast<const VarNode*>(n) != nullptr) {
    out.insert(n);
  } else if (auto a = dynamic_cast<const AttrStmtNode*>(n)) {
    // A buffer's storage_scope, around its own allocation, is not in the allocation's body.
    auto al = a->body.as<AllocateNode>();
    if (defs == nullptr || al == nullptr || al->buffer_var.get() != a->node.get()) {
      out.insert(a->node.get());
    }
  } else if (defs != nullptr) {
    if (auto al = dynamic_cast<const AllocateNode*>(n)) ++(*defs)[al->buffer_var.get()];
    if (auto l = dynamic_cast<const LetStmtNode*>(n)) ++(*defs)[l->var.get()];
  }
}

class NoOpRemover : public IRMutator {
 public:
  using IRMutator::mutate;

  explicit NoOpRemover(const Stmt& s) {
    post_order_visit(s, [&](const Object* n) { collect_refs(n, refs_, &defs_); });
  }

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto f = s.as<ForNode>();
    auto extent = as_const_int(f->extent);
    if (is_no_op(f->body) || (extent && *extent <= 0)) return removed(s);
    return s;
  }

  Stmt mutate_(const IfThenElseNode* op, const Stmt& self) override {
    Stmt then_case = mutate(op->then_case);
    Stmt else_case = mutate(op->else_case);
    if (else_case.defined() && is_no_op(else_case)) else_case = Stmt();
    if (auto c = as_const_int(op->condition)) {
      if (*c) {
        if (else_case.defined()) removed(else_case);
        return then_case;
      }
      removed(then_case);
      return else_case.defined() ? else_case : no_op();
    }
    if (is_no_op(then_case)) {
      if (else_case.defined()) return if_then_else(!op->condition, else_case);
      if (has_side_effects(op->condition)) return evaluate(op->condition);
      return removed(evaluate(op->condition));
    }
    if (then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) return self;
    return if_then_else(op->condition, then_case, else_case);
  }

  Stmt mutate_(const EvaluateNode* op, const Stmt& self) override {
    if (is_no_op(self) || has_side_effects(op->value)) return self;
    return removed(self);
  }

  Stmt mutate_(const StoreNode* op, const Stmt& self) override {
    auto l = op->value.as<LoadNode>();
    if (l && l->buffer_var.same_as(op->buffer_var) && expr_deep_equal(l->index, op->index) &&
        !l->predicate.defined() && !op->predicate.defined()) {
      return removed(self);
    }
    return self;
  }

  Stmt mutate_(const AllocateNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto a = s.as<AllocateNode>();
    if (refers(a->body, a->buffer_var)) return s;
    for (const Expr& e : a->extents) removed(e);
    return a->body;
  }

  Stmt mutate_(const LetStmtNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto l = s.as<LetStmtNode>();
    if (refers(l->body, l->var) || has_side_effects(l->value)) return s;
    removed(l->value);
    return l->body;
  }

  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto a = s.as<AttrStmtNode>();
    if (!is_no_op(a->body) || has_side_effects(a->value)) return s;
    gone_.insert(a->node.get());
    if (a->value.defined()) removed(a->value);
    return a->body;
  }

  Stmt mutate_(const ProducerRealizeNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto r = s.as<ProducerRealizeNode>();
    return is_no_op(r->body) ? removed(s) : s;
  }

 private:
  /// Whether `body`, the mutated body of v's definition, refers to v (refers_to, answered from
  /// the sets where they decide it).
  bool refers(const Stmt& body, const Var& v) const {
    if (!refs_.count(v.get())) return false;
    auto d = defs_.find(v.get());
    if (!gone_.count(v.get()) && (d == defs_.end() || d->second <= 1)) return true;
    return refers_to(body, v);
  }
  /// Notes what a part the pass drops referred to; returns the no-op that replaces it.
  Stmt removed(const Stmt& part) {
    post_order_visit(part, [&](const Object* n) { collect_refs(n, gone_); });
    return no_op();
  }
  void removed(const Expr& part) {
    post_order_visit(part, [&](const Object* n) { collect_refs(n, gone_); });
  }

  std::unordered_set<const Object*> refs_;  ///< referred to anywhere in the input
  std::unordered_map<const Object*, int> defs_;
  std::unordered_set<const Object*> gone_;  ///< referred to by a part the pass removed
};

}  // namespace

ir::Stmt remove_no_op(const ir::Stmt& s) { return NoOpRemover(s).mutate(s); }

}  // namespace kiln::pass
