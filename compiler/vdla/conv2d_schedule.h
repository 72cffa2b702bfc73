// The VDLA's schedule of the int8 conv2d (compiler/topi/vdla_conv2d.h's compute, whose layouts it
// keeps): it puts the conv2d on the accelerator through the compiler (tensorize onto the GEMM
// intrinsic, DMA copies into the on-chip buffers, bias, shift and clip on the ALU, stores), with
// tunable tiles and a virtual-thread knob; program.h builds its driver calls.
//
// The schedule, per output tile (tile_oc channel blocks x tile_h rows x tile_w columns):
//   output loops (oc tile, row tile, column tile) [with the oc or row tiles split between two
//   `cthread` virtual threads, outermost]; at the column tile: the accumulator (local.acc_buffer)
//   reset, per step of tile_ic input channel blocks the input window and the weights DMA'd into
//   local.inp_buffer / local.wgt_buffer and the GEMM nest (oc block, ic block, ky, kx, y, x)
//   tensorized at the block; then the tile's bias and shift rows (tile_oc ACC rows each) loaded by
//   DMA into local.acc_buffer, and four ALU passes over the accumulator: add the bias (a tensor
//   operand: each pixel's micro-op reads the bias row of its channel block), shift right by the
//   shift row (likewise), max with 0 or -128, min with 127; the tile stored by DMA.
//   The bias is an ALU pass rather than the accumulator's initial value: loading it as the initial
//   value would need one 64-byte ACC row per pixel over the DRAM port (a DMA that repeats the row),
//   where the ALU adds it in 2 cycles a row; the GEMM keeps its reset.
//   With `wgt_resident`, the weights' DMA moves out to the oc tile loop.
#pragma once

#include <string>
#include <vector>

#include "compiler/te/schedule.h"
#include "compiler/topi/vdla_conv2d.h"
#include "deploy/vdla/device/config.h"

namespace kiln::vdla_compiler {

struct VdlaConv2dConfig {
  int tile_oc = 1;         ///< output channel blocks per tile (divides OC/16)
  int tile_ic = 1;         ///< input channel blocks per reduction step (divides IC/16)
  int tile_h = 1;          ///< output rows per tile (divides OH)
  int tile_w = 0;          ///< output columns per tile (divides OW), 0 = the whole width
  int vthreads = 1;        ///< 1 or 2 (`cthread`)
  bool vthread_h = false;  ///< split the row tiles between the threads, not the oc tiles
  /// With the whole reduction in one step (tile_ic = IC/16): the weights are loaded once per
  /// output-channel tile, before its row and column tiles, instead of once per tile.
  bool wgt_resident = false;
  std::string to_string() const;
};

/// Why `c` cannot schedule `op` on `cfg` (a factor that does not divide, a buffer overflowing,
/// an odd number of tiles to split between two threads, ...), or "".
std::string vdla_conv2d_problem(const topi::VdlaConv2d& op, const VdlaConv2dConfig& c,
                                const vdla::Config& cfg);

/// The schedule; kiln::Error with vdla_conv2d_problem's reason.
te::Schedule schedule_vdla_conv2d(const topi::VdlaConv2d& op, const VdlaConv2dConfig& c,
                                  const vdla::Config& cfg);

/// Every config that fits: divisors for the channel tiles, row tiles and column tiles (the whole
/// width, or divisors of it), for `vthreads` 1 or 2 (both axes).
std::vector<VdlaConv2dConfig> vdla_conv2d_space(const topi::VdlaConv2d& op, int vthreads,
                                                const vdla::Config& cfg);

/// The space pruned as a tuner would start: per channel tiles, column tile (the largest divisors
/// of the width up to all, a half and a quarter of it) and thread axis, the tallest row tile that
/// fits and the next two smaller divisors.
std::vector<VdlaConv2dConfig> vdla_conv2d_candidates(const topi::VdlaConv2d& op, int vthreads,
                                                     const vdla::Config& cfg);

}  // namespace kiln::vdla_compiler
