// Variable substitution and use queries.
#include "compiler/ir/substitute.h"

#include "compiler/ir/functor.h"

namespace kiln::ir {
namespace {

class Substituter : public IRMutator {
 public:
  explicit Substituter(const VarMap& vmap) : vmap_(vmap) {}
  using IRMutator::mutate;

 protected:
  Expr mutate_(const VarNode* op, const Expr& self) override {
    auto it = vmap_.find(op);
    return it == vmap_.end() ? self : it->second;
  }

 private:
  const VarMap& vmap_;
};

class VarUseFinder : public IRVisitor {
 public:
  explicit VarUseFinder(const std::function<bool(const VarNode*)>& pred) : pred_(pred) {}
  using IRVisitor::visit;
  void visit_(const VarNode* op) override { found |= pred_(op); }
  void visit(const Expr& e) override {
    if (!found) IRVisitor::visit(e);
  }
  bool found = false;

 private:
  const std::function<bool(const VarNode*)>& pred_;
};

}  // namespace

Expr substitute(const Expr& e, const VarMap& vmap) {
  if (vmap.empty()) return e;
  return Substituter(vmap).mutate(e);
}

Stmt substitute(const Stmt& s, const VarMap& vmap) {
  if (vmap.empty()) return s;
  return Substituter(vmap).mutate(s);
}

bool uses_var(const Expr& e, const std::function<bool(const VarNode*)>& pred) {
  VarUseFinder f(pred);
  f.visit(e);
  return f.found;
}

bool uses_var(const Stmt& s, const std::function<bool(const VarNode*)>& pred) {
  VarUseFinder f(pred);
  f.visit(s);
  return f.found;
}

}  // namespace kiln::ir
