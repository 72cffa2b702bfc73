// Transposed 2-D convolution (ONNX ConvTranspose) in NCHW with IOHW weights, as a direct
// compute: the input dilated by the stride and padded ("<name>.pad"), then convolved with the
// flipped kernel. Its x86 schedule is the NCHW convolution template of conv2d.h.
//
//   te::Tensor y = conv2d_transpose_nchw(x, w, {2, 2}, {1, 1, 1, 1}, {1, 1});
//   autotune::ConfigSpace space = conv2d_transpose_nchw_x86_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_conv2d_transpose_nchw_x86(s, y, conv2d_transpose_nchw_x86_default(space));
//
// The dilated input is mostly zeros for strides above 1 (3/4 of the products at stride 2): the
// direct form is simple and vectorizes, not the least work.
#pragma once

#include <string>

#include "compiler/autotune/space.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// out[n, m, y, x] = sum over (c, ih, iw, kh, kw) with ih * sh + kh * dh - pt == y and
/// iw * sw + kw * dw - pl == x of data[n, g * C/groups + c, ih, iw] * kernel[g * C/groups + c,
/// m % (M/groups), kh, kw] (g = m / (M/groups)), for data [N, C, H, W] and kernel
/// [C, M / groups, KH, KW]. The output is [N, M, OH, OW] with
/// OH = sh * (H - 1) + output_padding_h + (KH - 1) * dh + 1 - pt - pb (OW likewise).
te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                 Ints4 padding, Ints2 output_padding = {0, 0},
                                 Ints2 dilation = {1, 1}, int groups = 1,
                                 const std::string& name = "conv2d_transpose");

/// The knobs of conv2d_nchw_x86_space (tile_oc, tile_ow, reorder_inner, unroll_kw, pad_at).
autotune::ConfigSpace conv2d_transpose_nchw_x86_space(const te::Tensor& out);
autotune::Config conv2d_transpose_nchw_x86_default(const autotune::ConfigSpace& space);
/// `output`: an elementwise epilogue to compute on the register tile, as for conv2d.
void schedule_conv2d_transpose_nchw_x86(te::Schedule& s, const te::Tensor& out,
                                        const autotune::Config& cfg,
                                        const te::Tensor& output = {});

}  // namespace kiln::topi
