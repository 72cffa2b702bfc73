// Transposed 2-D convolution (ONNX ConvTranspose) in NCHW with IOHW weights, as a GEMM of the
// input with the kernel read as [C, M/groups * KH * KW] ("<name>.col", [N, H, W, M*KH*KW]: no
// product with the zeros of a dilated input, no weight rearranging), then a gather that adds up,
// for each output point, the column entries that land on it (ceil(KH/sh) * ceil(KW/sw) terms at
// dilation 1, or H * W for tiny inputs). An elementwise epilogue runs over each gathered output row
// (a buffer of one row, in the same kernel).
//
//   te::Tensor y = conv2d_transpose_nchw(x, w, {2, 2}, {1, 1, 1, 1}, {1, 1});
//   space::ConfigSpace space = conv2d_transpose_nchw_x86_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_conv2d_transpose_nchw_x86(s, y, conv2d_transpose_nchw_x86_default(space));
#pragma once

#include <string>

#include "compiler/space/space.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// out[n, m, y, x] = sum over (c, ih, iw, kh, kw) with ih * sh + kh * dh - pt == y and
/// iw * sw + kw * dw - pl == x of data[n, g * C/groups + c, ih, iw] * kernel[g * C/groups + c,
/// m % (M/groups), kh, kw] (g = m / (M/groups)), for data [N, C, H, W] and kernel
/// [C, M / groups, KH, KW]. The output is [N, M, OH, OW] with
/// OH = sh * (H - 1) + output_padding_h + (KH - 1) * dh + 1 - pt - pb (OW likewise). The gather
/// may add at most 4096 terms per output point (a kiln::Error beyond: a huge kernel at stride 1).
te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                 Ints4 padding, Ints2 output_padding = {0, 0},
                                 Ints2 dilation = {1, 1}, int groups = 1,
                                 const std::string& name = "conv2d_transpose");

/// The kernel [C, M/groups, KH, KW] packed into panels of `bf` GEMM columns, [M * KH * KW / bf,
/// C/groups, bf]: element [p, c, j] is column f = p * bf + j of group g = f / (M/groups * KH * KW)
/// for input channel g * C/groups + c, so that each panel of the GEMM streams one contiguous block
/// (the unpacked kernel is read bf-wide pieces of rows M/groups*KH*KW floats apart). bf must
/// divide M/groups * KH * KW. Meant for constant weights, packed once at build time by a graph
/// pass (as graph/pack_weights does for Gemm); not wired into the graph build yet.
te::Tensor pack_conv2d_transpose_weight(const te::Tensor& kernel, int groups, int64_t bf = 16,
                                        const std::string& name = "conv2d_transpose_packed");

/// conv2d_transpose_nchw on a kernel packed by pack_conv2d_transpose_weight; `kernel_shape` is the
/// unpacked kernel's [C, M/groups, KH, KW]. Scheduled by the same template.
te::Tensor conv2d_transpose_nchw_packed(const te::Tensor& data, const te::Tensor& packed,
                                        Ints4 kernel_shape, Ints2 stride, Ints4 padding,
                                        Ints2 output_padding = {0, 0}, Ints2 dilation = {1, 1},
                                        int groups = 1,
                                        const std::string& name = "conv2d_transpose");

/// Knobs: tile_f (the GEMM's weight tile, vectorized), tile_h x tile_w (its input points), f_outer
/// (weight tiles outside input rows or inside), vec_ow (the gather's vector width along the output
/// row). The default: 64 weights x 2 x 2 input points where 64 divides the columns, else 16 weights
/// x (up to 2 x 8) input points; 16 accumulators either way.
space::ConfigSpace conv2d_transpose_nchw_x86_space(const te::Tensor& out);
space::Config conv2d_transpose_nchw_x86_default(const space::ConfigSpace& space);
/// `output`: an elementwise epilogue, computed over each gathered row (a row buffer) before it is
/// stored: inlined into the gather's expression, an expensive one (tanh) stretched the gather's
/// load latencies, and the fused kernel was slower than the two kernels unfused.
void schedule_conv2d_transpose_nchw_x86(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output = {});

}  // namespace kiln::topi
