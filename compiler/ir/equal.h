// Structural equality of expressions: the same tree of nodes, variables compared by identity.
#pragma once

#include "compiler/ir/expr.h"

namespace kiln::ir {

/// Whether a and b are the same expression tree (variables and tensors by identity).
bool expr_deep_equal(const Expr& a, const Expr& b);

}  // namespace kiln::ir
