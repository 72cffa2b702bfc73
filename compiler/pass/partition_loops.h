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
// The pass partitions a serial loop with a constant extent of at least 2 when an unrolled or
// vectorized loop inside it has an extent that uses its variable, and only when every such extent
// is a constant in both parts afterwards; otherwise the loop stays as it was. Run it after
// storage_flatten and simplify, before vectorize_loops and unroll_loops.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt partition_loops(const ir::Stmt& s);

}  // namespace kiln::pass
