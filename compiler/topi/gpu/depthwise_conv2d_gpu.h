// The GPU template of depthwise (groups = channels) and other grouped NCHW convolutions: one thread
// per output element, accumulating its kernel window over its group's input channels in a local
// register, the padding inlined. A depthwise output reads only its own channel's k x k window, so
// the work is small per output and shared-memory tiling buys little; neighbouring threads read
// neighbouring input points (coalesced).
//
//   te::Tensor y = conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1}, {1, 1}, /*groups=*/channels);
//   space::ConfigSpace space = depthwise_conv2d_nchw_gpu_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_depthwise_conv2d_nchw_gpu(s, y, depthwise_conv2d_nchw_gpu_default(space, target), y);
//
// Knobs: threads (a block's threads: 32 ... 1024), unroll (0/1: the window's loops, up to 64
// terms a thread).
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace depthwise_conv2d_nchw_gpu_space(const te::Tensor& out);
space::Config depthwise_conv2d_nchw_gpu_default(const space::ConfigSpace& space,
                                                const target::Target& target);
/// `output`: `out` or an elementwise epilogue of it (a bias, an activation), computed in the
/// thread.
void schedule_depthwise_conv2d_nchw_gpu(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output);

}  // namespace kiln::topi::gpu
