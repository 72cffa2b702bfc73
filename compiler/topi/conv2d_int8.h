// The int8 convolution of quantized networks on x86: unsigned 8-bit data times signed 8-bit
// weights, summed exactly in int32, in the blocked NCHW[x]c layout with the weights packed so
// that one 64-byte row holds 4 input channels of 16 output channels, the operand of one VNNI
// vpdpbusd (dot4_intrin.h: its register tile is tensorized with dot4_u8s8).
//
//   te::Tensor w = pack_conv2d_kernel_int8(w_oihw, 16);       // at build time for a constant
//   te::Tensor y = conv2d_nchwc_int8(x, w, {1, 1}, {1, 1, 1, 1}, {1, 1}, /*pad_value=*/zx);
//   space::ConfigSpace space = conv2d_nchwc_int8_x86_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_conv2d_nchwc_int8_x86(s, y, conv2d_nchwc_int8_x86_default(y, space, target));
//
// The padding reads `pad_value` (a data zero point: the real value 0). A data zero point's share
// of the sum, zx * sum(w), is the caller's (a per-channel constant), as is any requantization:
// an elementwise epilogue computed on the register tile (`output`, as the fp32 templates take).
#pragma once

#include <string>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// Output channels per block of the int8 layouts: one AVX-512 vector of int32 accumulators.
inline constexpr int kInt8OutBlock = 16;

/// OIHW int8 [O, C, KH, KW] -> [ceil(O/16), ceil(C/ic_block), KH, KW, ic_block/4, 16, 4], zeros
/// past O and C; ic_block a positive multiple of 4.
te::Tensor pack_conv2d_kernel_int8(const te::Tensor& kernel, int ic_block,
                                   const std::string& name = "kernel_packed_int8");

/// out[n, f, y, x, fi] = sum_{cb, kh, kw, c4, ci} int32(data_p[n, cb, y*sh + kh*dh, x*sw + kw*dw,
///                                                       c4 * 4 + ci])
///                                                * int32(kernel[f, cb, kh, kw, c4, fi, ci])
/// data uint8 [N, C/cb, H, W, cb] padded with `pad_value` (0..255), kernel int8
/// [O/16, C/cb, KH, KW, cb/4, 16, 4] (pack_conv2d_kernel_int8), out int32 [N, O/16, OH, OW, 16].
te::Tensor conv2d_nchwc_int8(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                             Ints4 padding, Ints2 dilation = {1, 1}, int pad_value = 0,
                             const std::string& name = "conv2d_nchwc_int8");

/// The depthwise int8 convolution of the same layouts (MobileNetV2's 3x3 between its 1x1 ones):
/// out[n, cb, y, x, c] = sum_{kh, kw} int32(data_p[n, cb, y*sh + kh*dh, x*sw + kw*dw, c])
///                                    * int32(kernel[cb, 0, kh, kw, 0, c])
/// data uint8 [N, C/b, H, W, b] padded with `pad_value`, kernel int8 [C/b, 1, KH, KW, 1, b] (one
/// channel per input channel, depthwise_conv2d_nchwc's layout), out int32 [N, C/b, OH, OW, b].
/// No VNNI (a dot product of 4 input channels has nothing to sum here): the bytes widened to int32
/// along the channel vector and multiplied there; depthwise_conv2d_nchwc_x86 schedules it.
te::Tensor depthwise_conv2d_nchwc_int8(const te::Tensor& data, const te::Tensor& kernel,
                                       Ints2 stride, Ints4 padding, Ints2 dilation = {1, 1},
                                       int pad_value = 0,
                                       const std::string& name = "depthwise_conv2d_nchwc_int8");

/// Knobs as conv2d_nchwc_x86's: the register tile tile_ob x tile_oh x tile_ow (unrolled; the
/// width's factors and powers of two), reduce_order (0: the 4-channel groups innermost of the
/// window; 1: outside it), unroll_kw, pad_at (2: padded in full first, 1: per register tile; the
/// intrinsic reads plain memory, so never inlined), tile_ic (the input channel blocks in chunks).
space::ConfigSpace conv2d_nchwc_int8_x86_space(const te::Tensor& out);
/// About 16 accumulator vectors on AVX-512, 8 on AVX2 (a 16-channel block is two registers
/// there), 16 on AArch64 (four NEON registers a block), the whole reduction in each tile: for a
/// 3x3-like window with 4 channel blocks, 4 blocks by 4 columns (unstrided, a width 4 divides) or
/// by 2 x 2 outputs; else 2 blocks by a row.
space::Config conv2d_nchwc_int8_x86_default(const te::Tensor& out, const space::ConfigSpace& space,
                                            const target::Target& target);
/// Parallel over (n, channel-block tiles, row tiles); the register tile in local memory, its
/// (16 output channels, 4 input channels) loops tensorized with dot4_u8s8; the epilogue
/// (`output`, or `out` itself) stores it with the 16 channels vectorized.
void schedule_conv2d_nchwc_int8_x86(te::Schedule& s, const te::Tensor& out,
                                    const space::Config& cfg, const te::Tensor& output = {});

}  // namespace kiln::topi
