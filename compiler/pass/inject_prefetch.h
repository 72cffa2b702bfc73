// Software prefetches of the operands a loop streams, where a schedule asks for them with the
// pragma "prefetch" (value d, a positive distance in iterations) on a loop L:
//
//   for rco in range(32):                          # pragma prefetch 1
//     for rh, rw, rci:
//       for lob in range(2):
//         for low in range(7):
//           for loc in range(16) vectorized:
//             acc[...] = acc[...] + data[...] * kernel[lob, rco, rh, rw, rci, loc]
//
// becomes, for the kernel (a vector along the vectorized loop; data is a broadcast):
//
//       for lob in range(2):
//         prefetch(kernel[lob, rco + 1, rh, rw, rci, 0])
//         for low ...
//
// Each load in L's body of a buffer that is not in registers or on the stack (not allocated in
// the function, or allocated "global": a padded input), whose index depends on L's variable and
// moves by one element along the innermost vectorized loop around it (a streamed vector operand,
// not a broadcast), gets a prefetch of the same load d iterations of L ahead. It goes at the
// start of the innermost loop around the load along which the index moves by a cache line (64
// bytes) or more, so each line is asked for once per pass over it; the loops inside that point
// take their first iteration. The first pass over weights too large for L2 then overlaps the
// fetch of the next chunk with the arithmetic of this one (a convolution's weights come from
// memory once a run).
//
// The pragma "prefetch_broadcasts" asks the same for the broadcast operands instead (the same
// element in every lane: a convolution's input against a vector of weights). Their prefetches go
// in front of the outermost loop along which the index moves by less than a line (the channels
// of one input block), one for each line the loops inside it name: a register tile's rows and
// columns, each value of theirs (32 at most, else none):
//
//   for owo in range(4):                           # pragma prefetch_broadcasts 1
//     for rco, rh, rw:
//       prefetch(data[rco, rh + loh, (owo + 1) * 14 + rw + low, 0])   for each loh, low
//       for rci, lob, loh, low, loc: ... data[rco, rh + loh, owo * 14 + rw + low, rci] ...
//
// An input too large for the caches then comes from memory one register tile ahead, not in as
// many streams as the reduction has input channel blocks that the hardware prefetchers miss.
// Run it after storage_flatten and simplify, before vectorizing and unrolling; the pragmas are
// removed.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

/// The pragmas (after attr::kPragmaPrefix).
inline constexpr const char* kPrefetchStreamsPragma = "prefetch";
inline constexpr const char* kPrefetchBroadcastsPragma = "prefetch_broadcasts";

/// The cache line the placement of a prefetch counts in, in bytes.
inline constexpr int kPrefetchLineBytes = 64;

ir::Stmt inject_prefetch(const ir::Stmt& s);

}  // namespace kiln::pass
