// Small questions passes ask about expressions.
#pragma once

#include <vector>

#include "compiler/ir/expr.h"

namespace kiln::ir {

/// Whether evaluating e may have an effect: a call that is not a pure intrinsic.
bool has_side_effects(const Expr& e);

/// The largest k such that `e` is known to be a multiple of k (1 when nothing is known; a vector
/// index by its base): what an access's alignment can rely on.
int64_t known_multiple(const Expr& e);

/// The conjuncts of c: a && b && ... as [a, b, ...] (c itself when it is no conjunction).
void split_conjuncts(const Expr& c, std::vector<Expr>* out);

}  // namespace kiln::ir
