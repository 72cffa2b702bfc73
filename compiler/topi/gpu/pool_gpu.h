// The GPU template of pooling (max_pool2d, avg_pool2d, global_max_pool2d, global_avg_pool2d, NCHW):
// one thread per output element, which reduces its window from global memory (a pooling window
// is read by few outputs, so shared-memory tiling buys little), the padding inlined.
//
//   te::Tensor y = max_pool2d(x, {3, 3}, {2, 2}, {1, 1, 1, 1});
//   space::ConfigSpace space = pool2d_gpu_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_pool2d_gpu(s, y, pool2d_gpu_default(space, target), y);
//
// A global pool may instead reduce each plane with a block of threads (reduce_gpu's cross-thread
// form: the plane's sum or maximum its own kernel, the rest one thread an element).
//
// Knobs: threads (a block's threads: 32 ... 1024), unroll (0/1: the window's loops, up to 64
// points), block_per_row (global pools only, 0/1).
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace pool2d_gpu_space(const te::Tensor& out);
space::Config pool2d_gpu_default(const space::ConfigSpace& space, const target::Target& target);
/// `output`: `out` or an elementwise epilogue of it (topi::epilogue_stage).
void schedule_pool2d_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                         const te::Tensor& output);

}  // namespace kiln::topi::gpu
