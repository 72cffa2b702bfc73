// Loop vectorization: a loop marked ForKind::kVectorized with a constant extent N > 1 is replaced
// by its body executed once on N-lane vectors. The loop variable becomes ramp(min, 1, N) and every
// expression that depends on it is widened: arithmetic broadcasts its scalar side, loads and stores
// at a vector index become vector loads and stores, selects, casts and pure intrinsic calls work
// lane by lane, and lets bound to vector values bind vector variables.
//
//   vectorized for x in range(8):          for k in range(K):
//     for k in range(K):              =>     C[ramp(0, 1, 8)] = C[ramp(0, 1, 8)]
//       C[x] = C[x] + A[k]*B[k*8 + x]            + x8(A[k])*B[ramp(k*8, 1, 8)]
//
// An `if` whose condition depends on the loop variable becomes predicated stores, and the loads
// under it that depend on the variable become predicated loads (loads that do not stay scalar);
// a condition that reads memory is bound to a `mask` variable first. Inner loops whose bounds do
// not depend on the variable stay loops around the vector code.
//
// The vectorize directive asserts that iterations are independent: the pass does not analyse
// dependences between lanes through memory (such as C[x + 1] = C[x]), only the structural cases
// below.
//
// When the body cannot be widened faithfully, the loop stays a loop and becomes ForKind::kSerial:
//  - the extent is not a constant, or is 0 or 1;
//  - a store's index does not depend on the variable (every lane would write one element, e.g. a
//    reduction into a scalar);
//  - an inner loop's bounds, an assert, an attribute value or a call with side effects (extern or
//    Kiln intrinsic) depend on the variable, or a call with side effects runs in the body at all;
//  - an Allocate (or a not yet flattened tensor) inside the body;
//  - an expression that already is a vector depends on the variable (it would take a vector of
//    vectors): of two nested vectorized loops the inner one is vectorized and the outer one is
//    kept serial.
// Loops are processed innermost first.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt vectorize_loops(const ir::Stmt& s);

}  // namespace kiln::pass
