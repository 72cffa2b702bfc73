// The int8 conv2d for the VDLA (docs/architecture.md, "The VDLA"): a compute over blocked layouts
// and a schedule that puts it on the accelerator through the compiler (tensorize onto the GEMM
// intrinsic, DMA copies into the on-chip buffers, bias, shift and clip on the ALU, stores), with
// tunable tiles and a virtual-thread knob; compiler/vdla/program.h builds its driver calls. It
// computes a QConv node (compiler/graph, the quantized convolution's contract) on blocked layouts.
//
// Layouts (batch 1, blocks of 16 = the GEMM unit's BLOCK_IN and BLOCK_OUT):
//   data    [IC/16][H][W][1][16] int8
//   kernel  [OC/16][IC/16][K][K][16 out][16 in] int8 (each block transposed, as WGT rows are)
//   bias    [OC/16][1][16] int32 (one ACC row per channel block)
//   shift   [OC/16][1][16] int32, each in [0, 31] (one ACC row per channel block)
//   output  [OC/16][OH][OW][1][16] int8 = clip((bias + conv) >> shift, relu ? 0 : -128, 127),
//           the sum wrapping at 32 bits, >> arithmetic (floor)
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
#include "deploy/vdla/device/config.h"

namespace kiln::topi {

struct VdlaConv2dShape {
  int h = 0, w = 0;    ///< input height and width
  int ic = 0, oc = 0;  ///< channels, multiples of 16
  int k = 1;           ///< kernel height = width
  int stride = 1;
  int pad = 0;  ///< on every side
  int oh() const { return (h + 2 * pad - k) / stride + 1; }
  int ow() const { return (w + 2 * pad - k) / stride + 1; }
  int64_t macs() const { return int64_t{oc} * oh() * ow() * ic * k * k; }
};

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

struct VdlaConv2d {
  te::Tensor data, kernel, bias, shift, out;
  /// The stages the schedule places: padded data (inlined), the accumulation, bias added, shifted,
  /// max, min.
  te::Tensor data_pad, conv, biased, shr, clip_lo, clip_hi;
  VdlaConv2dShape shape;
  bool relu = false;
  /// The program's arguments, in order: data, kernel, bias, shift, out.
  std::vector<te::Tensor> args() const { return {data, kernel, bias, shift, out}; }
};

/// The compute; with `relu` the lower clip is 0 instead of -128.
VdlaConv2d vdla_conv2d(const VdlaConv2dShape& shape, bool relu);

/// Why `c` cannot schedule `op` on `cfg` (a factor that does not divide, a buffer overflowing,
/// an odd number of tiles to split between two threads, ...), or "".
std::string vdla_conv2d_problem(const VdlaConv2d& op, const VdlaConv2dConfig& c,
                                const vdla::Config& cfg);

/// The schedule; kiln::Error with vdla_conv2d_problem's reason.
te::Schedule schedule_vdla_conv2d(const VdlaConv2d& op, const VdlaConv2dConfig& c,
                                  const vdla::Config& cfg);

/// Every config that fits: divisors for the channel tiles, row tiles and column tiles (the whole
/// width, or divisors of it), for `vthreads` 1 or 2 (both axes).
std::vector<VdlaConv2dConfig> vdla_conv2d_space(const VdlaConv2d& op, int vthreads,
                                                const vdla::Config& cfg);

/// The space pruned as a tuner would start: per channel tiles, column tile (the largest divisors
/// of the width up to all, a half and a quarter of it) and thread axis, the tallest row tile that
/// fits and the next two smaller divisors.
std::vector<VdlaConv2dConfig> vdla_conv2d_candidates(const VdlaConv2d& op, int vthreads,
                                                     const vdla::Config& cfg);

}  // namespace kiln::topi
