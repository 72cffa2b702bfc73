// Replacing variables by expressions.
#pragma once

#include <functional>
#include <unordered_map>

#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

using VarMap = std::unordered_map<const VarNode*, Expr>;

/// e with every variable in `vmap` replaced (the replacement is not substituted again).
Expr substitute(const Expr& e, const VarMap& vmap);
Stmt substitute(const Stmt& s, const VarMap& vmap);

/// Whether e (or s) uses any variable for which `pred` is true.
bool uses_var(const Expr& e, const std::function<bool(const VarNode*)>& pred);
bool uses_var(const Stmt& s, const std::function<bool(const VarNode*)>& pred);
inline bool uses_var(const Expr& e, const Var& v) {
  return uses_var(e, [&](const VarNode* n) { return n == v.get(); });
}

}  // namespace kiln::ir
