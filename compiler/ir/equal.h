// Structural equality: of expressions as the same tree with variables compared by identity (for
// the simplifier), and of whole statements up to renaming (for the tuner).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/function.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

/// Whether a and b are the same expression tree (variables and tensors by identity).
bool expr_deep_equal(const Expr& a, const Expr& b);

}  // namespace kiln::ir

namespace kiln::ir {

/// A canonical encoding of a statement: node kinds, types, constants and loop annotations, with
/// every variable (and tensor) replaced by the order in which it first appears. Two statements
/// with the same encoding are the same program up to renaming; the tuner keys builds by it.
std::vector<uint64_t> structural_encoding(const Stmt& s);
/// The same for a lowered function: its parameters (in order, with types and shapes) first, so
/// that functions differing only in argument order differ.
std::vector<uint64_t> structural_encoding(const PrimFunc& f);

/// Equal up to renaming of variables (alpha-equivalence).
bool structural_equal(const Stmt& a, const Stmt& b);
bool structural_equal(const PrimFunc& a, const PrimFunc& b);

/// A hash consistent with structural_equal.
uint64_t structural_hash(const Stmt& s);
uint64_t structural_hash(const PrimFunc& f);

}  // namespace kiln::ir
