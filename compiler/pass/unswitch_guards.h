// Unswitching of guarded accumulations: the padded taps of a convolution are skipped, not
// multiplied by zero.
//
// An inlined padding stage leaves its bounds check in every accumulation of the convolution:
//
//   for rci in range(16):
//     acc[0] = acc[0] + x16(select(y + rh >= 1 and x + rw >= 1, data[...], 0f)) * kernel[...]
//     acc[16] = acc[16] + x16(select(y + rh >= 1, data[...], 0f)) * kernel[...]
//
// When a guard does not depend on the loop (it depends only on outer loops: the tap, the tile),
// it is decided once for the whole loop: the loop is copied once per combination of its distinct
// loop-invariant guards (at most kMaxUnswitched of them, the ones guarding the most
// accumulations), behind ifs on those guards; in each copy a true guard is dropped from the
// select and an accumulation whose guard is false is left out. A guard every accumulation of the
// loop shares becomes one if around the loop with no else. So the taps that read padding cost
// nothing, as in oneDNN's convolutions, instead of a multiply by zero.
//
// The pass applies to innermost loops (bodies of stores only) whose stores are updates
// `b[i] = b[i] + f * g` (either order) with a factor `select(c, v, 0)` (or its broadcast); an
// update whose factor is a constant zero (a guard simplify already decided false) is left out.
// Leaving out `+ 0 * g` assumes g is finite (0 * inf is NaN); the other factor of a padded tap is
// a weight. Run it after unroll_loops and simplify, so that unrolled taps have constant guards.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

/// The most distinct guards one loop is unswitched on (2^k copies of the loop).
inline constexpr int kMaxUnswitched = 3;

ir::Stmt unswitch_guards(const ir::Stmt& s);

}  // namespace kiln::pass
