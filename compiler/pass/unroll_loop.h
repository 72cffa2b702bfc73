// Loop unrolling: a loop marked ForKind::kUnrolled with a constant extent N becomes N copies of
// its body in sequence, the loop variable replaced by min, min + 1, ..., min + N - 1 in each
// (constants fold as the copies are built). An unrolled loop whose extent is not a constant stays a
// loop and becomes ForKind::kSerial.
//
// With auto_max_step > 0, serial loops with a constant extent of at most auto_max_step that hold
// no other loop (innermost in the input) are unrolled as well.
//
// The copies share the variables bound inside the body (inner loop variables, lets, allocations);
// each binding's scope is one copy, and the copies do not overlap.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt unroll_loops(const ir::Stmt& s, int auto_max_step = 0);

}  // namespace kiln::pass
