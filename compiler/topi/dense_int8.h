// The int8 matrix product of quantized linear layers on x86 (ONNX MatMulInteger against a
// constant weight, BERT's linear layers): unsigned 8-bit rows times a signed 8-bit weight packed
// at build time into [N/16, K/4, 16, 4] panels, so that one 64-byte row holds 4 reduction steps
// of 16 columns, the operand of one VNNI vpdpbusd (dot4_intrin.h); exact int32 sums.
//
//   te::Tensor wp = pack_dense_weight_int8(w, /*trans_b=*/false);    // w int8 [K, N]
//   te::Tensor y = dense_int8(x, wp);                                 // x uint8 [M, K] or [B, M,
//   K] space::ConfigSpace space = dense_int8_x86_space(y); te::Schedule s =
//   te::create_schedule({y}); schedule_dense_int8_x86(s, y, dense_int8_x86_default(y, space,
//   target));
//
// The output is int32 [.., M, N] (N a multiple of 16: the packed weight's columns, zeros past the
// weight's own). A zero point's share and any requantization are an elementwise epilogue
// (`output`) computed on the register tile.
#pragma once

#include <string>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi {

/// w int8 [K, N] ([N, K] when trans_b) -> [ceil(N/16), ceil(K/4), 16, 4], zeros past N and K.
te::Tensor pack_dense_weight_int8(const te::Tensor& w, bool trans_b,
                                  const std::string& name = "weight_packed_int8");

/// out[.., i, j] = sum_{k4, kc} int32(x[.., i, k4 * 4 + kc]) * int32(packed[j / 16, k4, j % 16,
/// kc]) for x uint8 [M, K] or [B, M, K] with K = 4 * packed's K/4 (pad K with zeros to a multiple
/// of 4), packed int8 [N/16, K/4, 16, 4]; out int32 [.., M, N].
te::Tensor dense_int8(const te::Tensor& x, const te::Tensor& packed,
                      const std::string& name = "dense_int8");

/// Knobs: tile_y (rows of the register tile), tile_x (16-column blocks), tile_k (4-deep reduction
/// steps unrolled).
space::ConfigSpace dense_int8_x86_space(const te::Tensor& out);
/// About 24 accumulator vectors on AVX-512 (3 column blocks by 8 rows where they divide), 12 on
/// AVX2, 16 on AArch64 (4 rows of one block of four NEON registers).
space::Config dense_int8_x86_default(const te::Tensor& out, const space::ConfigSpace& space,
                                     const target::Target& target);
/// (batch, column-block tiles, row tiles) fused in parallel, the column blocks outside the rows so
/// that a panel of the weight stays in cache; the register tile's (16 columns, 4 steps) loops
/// tensorized with dot4_u8s8; `output` an elementwise epilogue of `out` stored from the tile.
void schedule_dense_int8_x86(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                             const te::Tensor& output = {});

}  // namespace kiln::topi
