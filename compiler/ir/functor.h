// Walking and rewriting the IR. IRVisitor visits every child in order; IRMutator rebuilds a node
// only when a child changed, so an untouched subtree keeps its identity (passes rely on that to
// know nothing happened). Override the visit_/mutate_ overload of the node kinds you care about
// and call the base version to recurse.
#pragma once

#include <functional>

#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

#define KILN_VISIT_DECL(T) virtual void visit_(const T##Node* op);
  KILN_EXPR_NODES(KILN_VISIT_DECL)
  KILN_STMT_NODES(KILN_VISIT_DECL)
#undef KILN_VISIT_DECL
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  /// `self` is the node being mutated as an Expr/Stmt, returned when no child changed.
#define KILN_MUTATE_EXPR_DECL(T) virtual Expr mutate_(const T##Node* op, const Expr& self);
  KILN_EXPR_NODES(KILN_MUTATE_EXPR_DECL)
#undef KILN_MUTATE_EXPR_DECL
#define KILN_MUTATE_STMT_DECL(T) virtual Stmt mutate_(const T##Node* op, const Stmt& self);
  KILN_STMT_NODES(KILN_MUTATE_STMT_DECL)
#undef KILN_MUTATE_STMT_DECL

  /// Mutates each element; returns true when any changed.
  bool mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out);
};

/// Calls f on every expression and statement node of `s`, children before parents.
void post_order_visit(const Stmt& s, const std::function<void(const Object*)>& f);
void post_order_visit(const Expr& e, const std::function<void(const Object*)>& f);

}  // namespace kiln::ir
