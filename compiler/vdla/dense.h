// The int8 dense layer (a matrix-vector product, batch 1) for the VDLA, the companion of the
// conv2d (conv2d_schedule.h): a compute over blocked layouts and a schedule that tensorizes it onto
// the GEMM intrinsic, with DMA copies, the shift and clip on the ALU, tunable tiles and a
// virtual-thread knob.
//
// Layouts (blocks of 16):
//   data    [K/16][1][16] int8
//   weight  [M/16][K/16][16 out][16 in] int8 (each block transposed, as WGT rows are)
//   output  [M/16][1][16] int8 = clip((weight . data) >> shift, -128, 127), wrapping at 32 bits
//
// The schedule: output tiles of tile_m blocks [split between two `cthread` threads]; per tile the
// accumulator reset, per step of tile_k input blocks the data and the weights DMA'd in and the
// GEMM nest (k block, m block) tensorized at the block, the m blocks innermost so that
// consecutive steps of the instruction accumulate into different rows; the ALU passes; the store.
#pragma once

#include <string>
#include <vector>

#include "compiler/te/schedule.h"
#include "deploy/vdla/device/config.h"

namespace kiln::vdla_compiler {

struct VdlaDenseConfig {
  int tile_m = 2;    ///< output blocks per tile (divides M/16, at least 2)
  int tile_k = 1;    ///< input blocks per reduction step (divides K/16)
  int vthreads = 1;  ///< 1 or 2 (`cthread`, over the output tiles)
  std::string to_string() const;
};

struct VdlaDense {
  te::Tensor data, weight, out;
  te::Tensor acc, shr, clip_lo, clip_hi;
  int m = 0, k = 0;
};

/// out = clip((weight . data) >> shift): M outputs from K inputs, both multiples of 16.
VdlaDense vdla_dense(int m, int k, int shift);

/// Why `c` cannot schedule `op` on `cfg`, or "".
std::string vdla_dense_problem(const VdlaDense& op, const VdlaDenseConfig& c,
                               const vdla::Config& cfg);

/// The schedule; kiln::Error with vdla_dense_problem's reason.
te::Schedule schedule_vdla_dense(const VdlaDense& op, const VdlaDenseConfig& c,
                                 const vdla::Config& cfg);

/// Every config that fits, for `vthreads` 1 or 2.
std::vector<VdlaDenseConfig> vdla_dense_space(const VdlaDense& op, int vthreads,
                                              const vdla::Config& cfg);

}  // namespace kiln::vdla_compiler
