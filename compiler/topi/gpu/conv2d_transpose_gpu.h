// The GPU template of transposed convolutions (conv2d_transpose_nchw, NCHW data, IOHW kernel), in
// the two kernels of topi's decomposition: the GEMM of the input with the kernel ("<name>.col",
// [N, H, W, M * KH * KW]) with one thread per column entry, consecutive threads on consecutive
// kernel columns (coalesced weight reads, the input point shared), and the gather that adds each
// output point's terms, with the group's epilogue, one thread per output point.
//
//   te::Tensor y = conv2d_transpose_nchw(x, w, {2, 2}, {1, 1, 1, 1});
//   space::ConfigSpace space = conv2d_transpose_nchw_gpu_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_conv2d_transpose_nchw_gpu(s, y, conv2d_transpose_nchw_gpu_default(space, target), y);
//
// Knobs: threads (the GEMM's threads a block: 32 ... 1024), gather_threads (the gather's).
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace conv2d_transpose_nchw_gpu_space(const te::Tensor& out);
space::Config conv2d_transpose_nchw_gpu_default(const space::ConfigSpace& space,
                                                const target::Target& target);
/// `output`: `out` or an elementwise epilogue of it (a bias, an activation), computed in the
/// gather.
void schedule_conv2d_transpose_nchw_gpu(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output);

}  // namespace kiln::topi::gpu
