// Matrix multiplication: its tensor expression and a hand-written x86 schedule (packing of B into
// panels, a register tile accumulated in local memory, vectorized and unrolled, panels run in
// parallel). The schedule's choices are plain parameters here; the tuner turns them into knobs.
#pragma once

#include "compiler/te/schedule.h"

namespace kiln::topi {

/// C[i, j] = sum_k A[i, k] * B[k, j] for A (m × k) and B (k × n).
te::Tensor matmul(const te::Tensor& a, const te::Tensor& b, const std::string& name = "C");

/// The paper's example: C[y, x] = sum_k A[k, y] * B[k, x].
te::Tensor matmul_transposed_a(const te::Tensor& a, const te::Tensor& b,
                               const std::string& name = "C");

struct MatmulSchedule {
  int tile_rows = 8;   ///< rows of the register tile
  int tile_cols = 32;  ///< columns of the register tile (vector lanes × vectors)
  int k_unroll = 4;    ///< reduction steps unrolled per iteration
};

/// A packed matmul for x86: returns the schedule and its output, computing A (m × k) · B (k × n)
/// with B first packed into [n / tile_cols, k, tile_cols] panels. m must be a multiple of
/// tile_rows and n of tile_cols for the fastest code; other sizes are correct but guarded.
struct PackedMatmul {
  te::Tensor a, b, packed_b, c;
  te::Schedule schedule;
};
PackedMatmul packed_matmul_x86(ir::Expr m, ir::Expr n, ir::Expr k, const MatmulSchedule& cfg = {});

}  // namespace kiln::topi
