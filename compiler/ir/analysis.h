// Small questions passes ask about expressions.
#pragma once

#include "compiler/ir/expr.h"

namespace kiln::ir {

/// Whether evaluating e may have an effect: a call that is not a pure intrinsic.
bool has_side_effects(const Expr& e);

}  // namespace kiln::ir
