// bf16 convolutions and dense layers: bfloat16 operands, float32 sums (compiler/ir/bf16.h). The
// weights are bf16 pairs packed along the reduction at build time (two input channels, or two
// steps of K, in one int32); the activations stay float32 in memory and are converted to pairs by
// a stage of the kernel itself (the padding stage of the convolution, "<name>.pad", which the
// template computes in full first, per register tile or inline as pad_at says; the dense layer's
// "<name>.pairs", computed first). The outputs are float32, so epilogues fuse as for float32.
//
//   out[n, f, y, x, fi] = sum_{c, kh, kw, k} bf16x2_dot(pairs[n, c, y*sh + kh*dh, x*sw + kw*dw, k],
//                                                      kernel[f, c, kh, kw, k, fi])
//   pairs[n, c, h, w, k] = bf16x2_pack(data[n, c, h-pt, w-pl, 2k], data[.., 2k+1])  (0 outside)
//
// The blocked convolution is conv2d_nchwc's loop nest with the block's input channels halved
// into pairs, so the same template (conv2d_nchwc_x86) schedules it; on avx512bf16 each step of
// its vectorized 16-channel tile is one vdpbf16ps of a broadcast input pair and 16 weight pairs.
#pragma once

#include <string>

#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// data [N, C/ic, H, W, ic] float32 (ic even), kernel [O/oc, C/ic, KH, KW, ic/2, oc] int32 (bf16
/// pairs: `pack_conv2d_kernel_bf16`), out [N, O/oc, OH, OW, oc] float32; groups == 1.
te::Tensor conv2d_nchwc_bf16(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                             Ints4 padding, Ints2 dilation = {1, 1},
                             const std::string& name = "conv2d_nchwc_bf16");
/// OIHW float32 [O, C, KH, KW] -> [O/oc, C/ic, KH, KW, ic/2, oc] int32: element [.., k, j] packs
/// input channels 2k and 2k+1 of the block for output channel j (ic even).
te::Tensor pack_conv2d_kernel_bf16(const te::Tensor& kernel, int ic_block, int oc_block,
                                   const std::string& name = "kernel_packed_bf16");

/// out[i, j] = sum_k bf16x2_dot(pairs[i, k], packed[j / bn, k, j % bn]) for x [M, K] float32,
/// packed [ceil(N / bn), ceil(K / 2), bn] int32 (`pack_dense_weight_bf16`), pairs the stage
/// "<name>.pairs" [M, ceil(K / 2)] of x's bf16 pairs (an odd K's last pair zero above); `n` is N.
te::Tensor dense_packed_bf16(const te::Tensor& x, const te::Tensor& packed, int64_t n,
                             const std::string& name = "dense_packed_bf16");
/// w [N, K] float32 -> [ceil(N / bn), ceil(K / 2), bn] int32 bf16 pairs along K, zero beyond.
te::Tensor pack_dense_weight_bf16(const te::Tensor& w, int bn,
                                  const std::string& name = "weight_packed_bf16");

}  // namespace kiln::topi
