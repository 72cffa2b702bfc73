// The int8 conv2d for the VDLA (docs/architecture.md, "The VDLA"), its compute: a QConv node
// (compiler/graph, the quantized convolution's contract) on blocked layouts, carrying its workload
// (workload.h). Its schedule, which puts it on the accelerator, and its tunable template are the
// VDLA compiler's (compiler/vdla/conv2d_schedule.h, conv2d_template.h): the compute is an operator
// like any other, the schedule needs the VDLA's intrinsic.
//
// Layouts (batch 1, blocks of 16 = the GEMM unit's BLOCK_IN and BLOCK_OUT):
//   data    [IC/16][H][W][1][16] int8
//   kernel  [OC/16][IC/16][K][K][16 out][16 in] int8 (each block transposed, as WGT rows are)
//   bias    [OC/16][1][16] int32 (one ACC row per channel block)
//   shift   [OC/16][1][16] int32, each in [0, 31] (one ACC row per channel block)
//   output  [OC/16][OH][OW][1][16] int8 = clip((bias + conv) >> shift, relu ? 0 : -128, 127),
//           the sum wrapping at 32 bits, >> arithmetic (floor)
#pragma once

#include <string>
#include <vector>

#include "compiler/te/schedule.h"

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

}  // namespace kiln::topi
