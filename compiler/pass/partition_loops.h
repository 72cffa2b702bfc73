// Loop partitioning: a tile loop whose last iteration is partial is split into the full
// iterations and the last one, so that the loops it bounds have constant extents in both parts.
//
// A split that does not divide its extent (a register tile of 4 columns over 7) leaves the inner
// loop with an extent that depends on the outer one:
//
//   for ow.outer in range(2):
//     for ow in range(min(ow.outer*4 + 3, 6) - ow.outer*4 + 1):   # unrolled, but not constant
//
// and such a loop can be neither unrolled nor vectorized, so the tile's accumulators stay in
// memory. Partitioned, the full tiles see `range(4)` and the last one `range(3)`:
//
//   for ow.outer in range(1): ... range(4) ...     (a one-iteration loop is inlined by simplify)
//   ... ow.outer = 1: range(3) ...
//
// A split of a row that the vector does not divide (softmax over 1500 columns in vectors of 16)
// leaves a guard inside the vectorized loop instead, which vectorizes into a predicate computed
// and applied (masked loads and stores) on every iteration:
//
//   for p.outer in range(94):
//     vectorized for p.inner in range(16):
//       if p.outer*16 + p.inner < 1500: ...
//
// Partitioned, the 93 full iterations lose the guard and only the last vector is predicated.
//
// The pass partitions a serial loop with a constant extent of at least 2 when an unrolled or
// vectorized loop inside it has an extent that uses its variable, and only when every such extent
// is a constant in both parts afterwards, or when a guard inside a vectorized loop uses its
// variable, and only when the full iterations lose every such guard; otherwise the loop stays as
// it was. Run it after
// storage_flatten and simplify, before vectorize_loops and unroll_loops.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt partition_loops(const ir::Stmt& s);

}  // namespace kiln::pass
