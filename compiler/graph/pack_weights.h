// Weight packing: constant weights rewritten at build time into the layouts the kernels read
// contiguously, so that no kernel transposes or gathers a weight at run time.
//
//   Gemm(%x, %w) {transA=0, transB=1}       Gemm(%x, %w.packed) {packed_bn=64, ...}
//   MatMul(%a, %b)  (b constant [K, N])  =>  MatMul(%a, %b.packed) {packed_bn=80}
//   LSTM(%x, %W, %R, ...)                    LSTM(%x, %W.packed, %R.packed, ...) {packed_bn=64}
//   GRU(%x, %W, %R, ...)                     GRU(%x, %W.packed, %R.packed, ...) {packed_bn=64}
//   ConvTranspose(%x, %w)                    ConvTranspose(%x, %w.packed) {packed_bf=16}
//   MatMulInteger(%a, %b, %az)               MatMulInteger(%a, %b.packed_int8, %az,
//                                                          %b.column_sums) {packed_int8=1}
//   ConvInteger(%x, %w, %xz)                 ConvInteger(%x, %w.packed_int8, -,
//                                                        %w.zero_point_share)
//                                                        {packed_int8=64, data_zero_point=131}
//
// Gemm (transA = 0) and MatMul whose B is a float32 constant 2-D matrix (A of rank >= 2; an N-D A
// is flattened to [M, K] by the lowering): B becomes a new constant "<name>.packed" of shape
// [ceil(N / bn), K, bn] (topi::pack_dense_weight's layout: element [p, k, j] is B's column
// p * bn + j, zero beyond N), and the node gets the attribute packed_bn = bn, which op_lowering
// reads to use topi::dense_packed (transB no longer matters). bn is dense_panel_width(N).
//
// LSTM (every direction) with float32 constant W [D, 4H, I] and R [D, 4H, H]: each direction's
// gates are packed the same way, [D, ceil(4H / bn), K, bn] with bn = topi::lstm_panel_width(4H)
// (K = I for W, H for R), and the node gets packed_bn = bn, which topi::lstm reads: the input
// projection and each step's recurrent GEMV then stream one contiguous block of the weight per
// tile of gates. (The [k, gate] transposed layout reads bn-wide pieces of rows 10 KiB apart, which
// the panels avoid: `scripts/bench.sh models` times the LSTM LM.) GRU likewise, bn =
// topi::lstm_panel_width(H): W [D, ceil(3H / bn), I, bn], R's row segments that its recurrent
// products read (topi::gru_panel_segments: all 3H gates with linear_before_reset, else z and r,
// then h) each in whole panels, one after the other. Without this a bidirectional LSTM or a GRU
// packed its weights by a stage of every run (a 512-wide bidirectional layer: 6 MiB gathered).
//
// ConvTranspose (1-D or 2-D) with a float32 constant weight W [C, M/G, k...] (G = group): W
// becomes "<name>.packed" of shape [M * K / bf, C/G, bf] (K the kernel's taps;
// topi::pack_conv2d_transpose_weight's layout: element [p, c, j] is column f = p * bf + j of the
// transposed convolution's GEMM, of group f / (M/G * K), for input channel group * C/G + c), and
// the node gets packed_bf = bf, which its lowering reads to use topi::conv2d_transpose_nchw_packed:
// each register tile of the GEMM streams one contiguous panel, where W read as [C, M/G * K] gives
// bf-wide pieces of rows M/G * K floats apart (the DCGAN generator's 512 -> 256 layer: 16 KiB).
// bf is conv_transpose_panel_width(M/G * K).
//
// MatMulInteger (on CPUs) with A uint8 of rank 2 or 3 whose zero point is one value or absent, B
// an int8 constant [K, N] (K a multiple of 4, N of 16) whose zero point is absent or 0: B becomes
// "<name>.packed_int8" [N/16, K/4, 16, 4] (topi::pack_dense_weight_int8's layout, what one VNNI
// vpdpbusd reads), input 3 (B's zero point) becomes "<name>.column_sums" [N] int32 when A has a
// zero point (none otherwise), and the node gets packed_int8 = 1: its lowering computes
// topi::dense_int8 over A's raw bytes and subtracts A's zero point times the column sums,
// sum (a - za) * b = sum a * b - za * sum b, in the register tile.
//
// ConvInteger (on CPUs; 2-D, one group or depthwise) with x uint8 NCHW whose zero point is a
// constant value or absent, w an int8 constant OIHW kernel whose zero point is
// absent or 0: w becomes "<name>.packed_int8" [ceil(O/16), ceil(C/cb), KH, KW, cb/4, 16, 4]
// (topi::pack_conv2d_kernel_int8's layout, zeros past O and C; cb = packed_int8, 64 where it
// divides C, else 16, else C rounded up to 4; with `int8_blocks16`, 16 where it divides C:
// alter_layout's blocks, the previous convolution's output read as it is), x's zero point moves to
// the attribute data_zero_point (what the padding reads), and input 3 becomes
// "<name>.zero_point_share", zx * the sum of each output channel's weights [ceil(O/16) * 16] int32
// (zeros past O; none when zx is 0): the lowering runs topi::conv2d_nchwc_int8 on x blocked by cb
// and subtracts the share. A depthwise one (group = C = O, w [C, 1, KH, KW], C a multiple of 16) is
// packed as [C/16, 1, KH, KW, 1, 16] with cb = 16, for topi::depthwise_conv2d_nchwc_int8.
//
// New constants are new values; the old ones stay in the arena (shared with the input graph) and
// are left out of the bundle when nothing reads them. A weight shared by several nodes is packed
// once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// The panel width used for a dense output of N columns, always whole AVX-512 vectors (a width
/// such as 40 would leave the register tile in half vectors): the largest multiple of 16 up to 80
/// dividing N (so that a register tile is one whole panel), else 16 for N <= 16, else the widest
/// of 64, 48 and 32 that pads N by at most a 32nd, else the one that pads it least (the product is
/// computed over whole panels and cropped: a language model's 5000 words are 79 panels of 64).
int64_t dense_panel_width(int64_t n);

/// The panel width of a ConvTranspose weight with `cols` = M/G * K GEMM columns per group: the
/// largest of 16, 8, 4, 2 dividing it, else 1 (a panel never spans two groups).
int64_t conv_transpose_panel_width(int64_t cols);

/// Rewrites every node that meets the conditions above; returns how many it rewrote. With `dense`
/// false only the LSTMs and GRUs (a GPU target: its products read a weight's rows as the model
/// gives them, consecutive threads along a row, but a recurrent operator would otherwise pack its
/// weights on every run).
/// With `bf16` (BuildOptions::precision), Gemm and MatMul weights are packed as bf16 pairs along
/// K instead: int32 [ceil(N / bn), ceil(K / 2), bn] (round to nearest even, an odd K's last pair
/// zero above; topi::dense_packed_bf16's layout), the node marked packed_bf16 = 1 beside
/// packed_bn; ConvTranspose, LSTM and GRU weights stay float32. `int8_blocks16`: ConvInteger's
/// input
// channel blocks as above.
size_t pack_weights(Graph& graph, bool dense = true, bool bf16 = false, bool int8_blocks16 = false);

}  // namespace kiln::graph
