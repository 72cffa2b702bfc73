// The GPU template of matrix products (matmul, dense, the LSTM's gemms, and batch_matmul, a batch
// per blockIdx.z): the paper's shared-memory tiled schedule (Fig. 7). Each block computes a tile of
// the output; each thread a (vthread_y · inner_y) × (vthread_x · inner_x) sub-tile accumulated in
// local memory; per reduction step of tile_k the block copies its rows of A and columns of B into
// shared memory cooperatively, and each thread reads them into local registers.
//
//   te::Tensor c = matmul(a, b);                    // or dense(x, w)
//   space::ConfigSpace space = matmul_gpu_space(c);
//   te::Schedule s = te::create_schedule({c});
//   schedule_matmul_gpu(s, c, matmul_gpu_default(space, target), c);
//
// Knobs: tile_y, tile_x (4 parts each: block, virtual thread, thread, inner), tile_k (2 parts:
// steps, rows per step), unroll (0/1: unroll the inner loops, where outputs a thread × the step
// are at most 1024), vector (1/4: the shared copies load 4 floats at a time where the step and the
// block's rows and columns are multiples of 4), prefetch (0/1: the next step's tiles loaded from
// global memory into registers while this step computes, pass::prefetch_shared), cross_thread (only
// where there are at most 4096 outputs over a reduction of at least 256, a GEMV: 1 computes each
// output with a block of threads that share its reduction, reduce_gpu's cross-thread form, and the
// epilogue in a kernel of its own; the tile knobs then do not matter).
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace matmul_gpu_space(const te::Tensor& out);
space::Config matmul_gpu_default(const space::ConfigSpace& space, const target::Target& target);
/// `output`: `out` or an elementwise epilogue of it (topi::epilogue_stage), computed in the tile.
void schedule_matmul_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                         const te::Tensor& output);

}  // namespace kiln::topi::gpu
