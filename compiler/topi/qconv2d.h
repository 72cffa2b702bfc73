// The integer convolution of a quantized network, the graph's `QConv` node (realize_qconv.h):
// int8 data and kernel, an int32 per-channel bias and right shift, int8 out. This is the contract
// the VDLA implements bit for bit, and the CPU compute below follows it exactly:
//
//   acc[n, oc, y, x] = bias[oc] + sum_{c, kh, kw} int32(x_q[n, g * C/groups + c, y * sh + kh * dh -
//   pt,
//                                                            x * sw + kw * dw - pl])
//                                                * int32(w_q[oc, c, kh, kw])      (int32, wrapping)
//   y_q[n, oc, y, x] = int8(clip(acc >> shift[oc], relu ? 0 : -128, 127))
//
// where `>>` is an arithmetic shift right (floor division by 2^shift), shift[oc] in [0, 31], and
// padding reads zeros. Rounding to nearest (half up) is the caller's: realize_qconv folds
// 2^(shift - 1) into the bias.
//
//   QConv2d q = qconv2d_nchw(x, w, bias, shift, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, /*relu=*/true);
//   te::Schedule s = te::create_schedule({q.out});
//   schedule_qconv2d_nchw_x86(s, q);
#pragma once

#include <string>

#include "compiler/te/schedule.h"
#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// The stages of one integer convolution.
struct QConv2d {
  te::Tensor data, kernel;  ///< x_q and w_q as int32 (inlined)
  te::Tensor acc;           ///< the int32 sum of products, conv2d_nchw's compute (no bias)
  te::Tensor out;           ///< int8: bias, shift, clip
};

/// x_q int8 [N, C, H, W], w_q int8 [OC, C / groups, KH, KW], bias int32 [OC], shift int32 [OC].
QConv2d qconv2d_nchw(const te::Tensor& x_q, const te::Tensor& w_q, const te::Tensor& bias,
                     const te::Tensor& shift, Ints2 stride, Ints4 padding, Ints2 dilation,
                     int groups, bool relu, const std::string& name = "qconv2d");

/// conv2d_nchw_x86's loop nest at its default config on `q.acc`, the bias, shift and clip (and
/// `output`, an elementwise epilogue of `q.out`, when defined) computed on its register tile.
void schedule_qconv2d_nchw_x86(te::Schedule& s, const QConv2d& q, const te::Tensor& output = {});

}  // namespace kiln::topi
