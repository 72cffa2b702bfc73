// The GPU template of NCHW convolutions (groups = 1): direct convolution with shared-memory
// tiling, as the paper's GPU schedules. Each block computes a tile of output channels × rows ×
// columns; threads and virtual threads split it; per step of the input channels and kernel
// window the block copies the padded input's window and the kernel's slice into shared memory
// cooperatively. The padding is inlined into that copy.
//
// Knobs: tile_f, tile_y, tile_x (4 parts: block, virtual thread, thread, inner), tile_rc,
// tile_ry, tile_rx (2 parts: steps, inner), unroll (0/1: the innermost loops, where outputs a
// thread × tile_rx's inner part are at most 512).
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace conv2d_nchw_gpu_space(const te::Tensor& out);
space::Config conv2d_nchw_gpu_default(const space::ConfigSpace& space,
                                      const target::Target& target);
void schedule_conv2d_nchw_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                              const te::Tensor& output);

}  // namespace kiln::topi::gpu
