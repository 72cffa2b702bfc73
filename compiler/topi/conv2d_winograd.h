// Winograd's minimal filtering for blocked (NCHW[x]c) 3x3 convolutions of stride 1, F(m x m, 3 x 3)
// with m = 2 or 4 (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each
// m x m tile of the output is A^T [(G g G^T) . (B^T d B)] A of the (m + 2)^2 input tile d that it
// reads, so that the multiplications of a tile over all channels are (m + 2)^2 independent
// products U[e, nu] x V[e, nu] (a batched GEMM) instead of m^2 * 9 taps: 2.25x fewer for F(2x2),
// 4x for F(4x4). The kernel's transform U = G g G^T is done once at build time (alter_layout),
// the input's and the output's transforms are stages of the kernel.
//
//   U = winograd_kernel_transform(oihw, 4, ob, o_pad, c_pad)   (build time, float64 inside)
//   te::Tensor y = conv2d_nchwc_winograd(x, u, {1, 1, 1, 1}, 4);
//   space::ConfigSpace space = conv2d_nchwc_winograd_x86_space(y);
//   schedule_conv2d_nchwc_winograd_x86(s, y, conv2d_nchwc_winograd_x86_default(y, space, t));
//
// Stages (alpha = m + 2, P = N * ceil(OH / m) * ceil(OW / m) tiles, p = (n, tile row, tile col)):
//   <name>.pad    the input padded to whole tiles
//   <name>.bt     [alpha, alpha, CB, P, cb]   B^T d, rows of the tile transformed
//   <name>.v      [alpha, alpha, CB, P, cb]   (B^T d) B
//   <name>.m      [alpha, alpha, OB, P, ob]   sum over input channels c of U[., ., ob, c] V[., .,
//   c, p] <name>.at     [m, alpha, OB, P, ob]       A^T M <name>        [N, OB, OH, OW, ob] (A^T M)
//   A, the tile put in place
// Float32 rounding: F(2x2) is about as exact as the direct sum; F(4x4)'s transforms scale by up to
// 8 and 1/24, which costs about one more decimal digit (tests bound both against a direct sum).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// The output tile sizes m of F(m x m, 3 x 3) that the computes support.
bool winograd_tile_supported(int m);

/// An OIHW [O, C, 3, 3] float32 kernel transformed for F(m x m, 3 x 3) in the layout that
/// conv2d_nchwc_winograd reads: [alpha, alpha, o_pad / ob, c_pad, ob], element [e, nu, f, c, j] is
/// (G g G^T)[e, nu] of output channel f * ob + j and input channel c (zeros past O and C).
std::vector<float> winograd_kernel_transform(const float* oihw, int64_t o, int64_t c, int m, int ob,
                                             int64_t o_pad, int64_t c_pad);

/// data [N, CB, H, W, cb], kernel [alpha, alpha, OB, CB * cb, ob] (winograd_kernel_transform),
/// out [N, OB, OH, OW, ob] with OH = H + top + bottom - 2, OW = W + left + right - 2: the
/// convolution of stride 1 and dilation 1 that conv2d_nchwc computes with the untransformed kernel.
te::Tensor conv2d_nchwc_winograd(const te::Tensor& data, const te::Tensor& kernel, Ints4 padding,
                                 int m, const std::string& name = "conv2d_nchwc_winograd");

/// Knobs of the batched product's register tile: tile_p (tiles, rows of the product) x tile_ob
/// (output channel blocks, vectors of ob), and unroll_c (the input channels of a block unrolled).
space::ConfigSpace conv2d_nchwc_winograd_x86_space(const te::Tensor& out);
/// A register tile of 8 vector accumulators: on AVX-512 4 tiles x 2 blocks of 16 channels.
space::Config conv2d_nchwc_winograd_x86_default(const te::Tensor& out,
                                                const space::ConfigSpace& space,
                                                const target::Target& target);
/// Each stage at the root, in parallel: the padding; the input transform per (channel block,
/// tile), its rows (.bt) computed there; the product over (e, nu, output channel block tiles),
/// the register tile's sums kept in registers over all input channels; the output transform per
/// (n, output channel block, tile row), its .at rows computed per tile, with the epilogue
/// `output` (topi::epilogue_stage) applied as each tile is stored.
void schedule_conv2d_nchwc_winograd_x86(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output = {});

}  // namespace kiln::topi
