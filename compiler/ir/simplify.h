// The arithmetic simplifier. Integer index expressions are brought to a canonical linear form
// (a sum of coefficient*term plus a constant, like terms collected, terms in order of first
// appearance and the constant last: `y*8 + x + 5`); divisions, remainders, min/max and comparisons
// by constants are resolved with the bounds of the variables (interval.h). Floating-point
// arithmetic is never reassociated, only constant-folded. Statements are simplified with the
// bounds of the loops around them: provable branches are taken, one-iteration loops inlined,
// empty loops and provable assertions removed.
//
// Like every mutator, the simplifier returns the very node it was given when nothing changed.
#pragma once

#include "compiler/ir/expr.h"
#include "compiler/ir/interval.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

/// e simplified, knowing that each variable in `dom` lies in its interval.
Expr simplify(const Expr& e, const VarIntervals& dom = {});

/// s simplified; loop variables, thread extents and let-bound values of enclosing statements are
/// known while their bodies are simplified, on top of `dom`.
Stmt simplify(const Stmt& s, const VarIntervals& dom = {});

/// Whether `cond` (a bool expression) is provably true for every point of `dom`. False means
/// "could not prove", not "false".
bool can_prove(const Expr& cond, const VarIntervals& dom = {});

}  // namespace kiln::ir
