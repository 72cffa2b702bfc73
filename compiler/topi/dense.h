// Dense layers and batched matrix products: their tensor expressions (ONNX Gemm / MatMul; alpha,
// beta and the bias are separate elementwise stages of the graph) and x86 schedule templates.
//
//   te::Tensor y = dense(x, w);                       // x [M, K], w [N, K] (Gemm with transB = 1)
//   space::ConfigSpace space = dense_x86_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_dense_x86(s, y, dense_x86_default(space));
//
// The template is the register tile of matmul.cc's packed schedule: a tile_y × tile_x block of
// the output accumulated in local memory, the columns vectorized (in vectors of 16 or 8 lanes,
// unrolled, when tile_x is wider), the rows and tile_k reduction steps unrolled, the blocks run in
// parallel; for dense the column blocks are the outer loop, so that one block of the weight stays
// in cache for every row block. `dense_packed` reads a weight packed into [N / bn, K, bn] panels
// (`pack_dense_weight`; the graph's pack_weights packs constant weights at build time), so that
// the vectorized columns load contiguously; with tile_x = bn a tile streams one contiguous panel
// (the GEMV of batch 1 is then one sequential pass over the weight).
#pragma once

#include <string>

#include "compiler/space/space.h"
#include "compiler/te/schedule.h"

namespace kiln::topi {

/// out[i, j] = sum_k A[i, k] * B[k, j] with A = x [M, K] (x [K, M] when trans_a) and B = w [N, K]
/// when trans_b (ONNX Gemm's common case), w [K, N] otherwise.
te::Tensor dense(const te::Tensor& x, const te::Tensor& w, bool trans_a = false,
                 bool trans_b = true, const std::string& name = "dense");

/// w [N, K] -> [ceil(N / bn), K, bn], zero beyond N.
te::Tensor pack_dense_weight(const te::Tensor& w, int bn,
                             const std::string& name = "weight_packed");
/// out[i, j] = sum_k x[i, k] * packed[j / bn, k, j % bn] for x [M, K]; `n` is N.
te::Tensor dense_packed(const te::Tensor& x, const te::Tensor& packed, int64_t n,
                        const std::string& name = "dense_packed");

/// Knobs for `dense` and `dense_packed`: tile_y (rows of the register tile), tile_x (columns,
/// vectorized), tile_k (reduction steps unrolled); for dense_packed also `panel`, a knob of one
/// choice (the panel width bn) that the default reads to tile whole panels (tile_x = bn when bn
/// divides N, tile_y as many rows as keep the tile within ~25 AVX-512 vectors). `dense` with
/// trans_b reads the weight's columns with a stride (gathers): prefer dense_packed where the
/// weight is a constant.
space::ConfigSpace dense_x86_space(const te::Tensor& out);
space::Config dense_x86_default(const space::ConfigSpace& space);
/// `output`: an elementwise epilogue to compute on the register tile, as for the conv2d templates.
void schedule_dense_x86(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                        const te::Tensor& output = {});

/// out[b, i, j] = sum_k A[b, i, k] * B[b, k, j] for a [Ba, M, K] ([Ba, K, M] when trans_a) and
/// b [Bb, K, N] ([Bb, N, K] when trans_b); a batch of 1 broadcasts.
te::Tensor batch_matmul(const te::Tensor& a, const te::Tensor& b, bool trans_a = false,
                        bool trans_b = false, const std::string& name = "batch_matmul");
/// Knobs: tile_y, tile_x, tile_k as for dense; (batch, row blocks, column blocks) run in parallel.
space::ConfigSpace batch_matmul_x86_space(const te::Tensor& out);
space::Config batch_matmul_x86_default(const te::Tensor& out, const space::ConfigSpace& space,
                                       int vector_bits);
/// `output`: the stage that stores the tile, where batch_matmul_epilogue_fits (the stages between
/// `out` and it inlined by the caller).
void schedule_batch_matmul_x86(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                               const te::Tensor& output = {});
/// Whether `output` can store batched product `out`'s register tile: its batch axes are out's or
/// a reshape of them (ONNX's [1, H, M, N] for out's [H, M, N]), its rows and columns at most out's
/// (a crop of the rows and columns the caller padded); the stages between them elementwise.
bool batch_matmul_epilogue_fits(const te::Tensor& out, const te::Tensor& output);

/// The row and column counts to compute a [.., M, N] batched product on, so that the register
/// tile has a good shape: tile_y and tile_x are factors of the extents, so a prime M or N (an
/// attention's 197 tokens) would leave a 1 x 1 scalar tile. M is rounded up to a multiple of 4
/// (unless below 4); N is kept when a multiple of 8 or at most 8, else rounded up to a multiple of
/// 16 (below 32) or 32. The caller pads the operands with zeros and slices the result.
int64_t batch_matmul_padded_rows(int64_t m);
int64_t batch_matmul_padded_cols(int64_t n);

}  // namespace kiln::topi
