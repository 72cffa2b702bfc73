// 2-D pooling in NCHW or NCHW[x]c (5-D, the channel block last; the layout alter_layout gives
// convolution outputs): max and average pooling over a window (stride, four-sided padding,
// ceil_mode, count_include_pad for the average) and the global poolings, with x86 schedules
// (NCHW: parallel over n × c and output rows, output columns vectorized, window unrolled;
// NCHW[x]c: parallel over n × channel blocks × rows, the channel block vectorized).
//
//   te::Tensor y = max_pool2d(x, {3, 3}, {2, 2}, {1, 1, 1, 1});
//   space::ConfigSpace space = pool2d_x86_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_pool2d_x86(s, y, pool2d_x86_default(space));
//
// The pooling semantics follow ONNX MaxPool / AveragePool: with ceil_mode, the last window must
// start inside the input or its top/left padding; padded points never win a max; an average
// divides by the window clipped to the input (count_include_pad = false) or to the padded input.
#pragma once

#include <string>

#include "compiler/space/space.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/conv2d.h"

namespace kiln::topi {

/// out[n, c, y, x] = max over the window at (y * sh - pt, x * sw - pl) of data [N, C, H, W].
te::Tensor max_pool2d(const te::Tensor& data, Ints2 kernel, Ints2 stride, Ints4 padding,
                      bool ceil_mode = false, const std::string& name = "max_pool2d");
/// The window's sum divided by its size (see the file comment for which size). Two stages: the
/// sum ("<name>.sum") and the division (the output).
te::Tensor avg_pool2d(const te::Tensor& data, Ints2 kernel, Ints2 stride, Ints4 padding,
                      bool ceil_mode = false, bool count_include_pad = false,
                      const std::string& name = "avg_pool2d");
/// [N, C, H, W] -> [N, C, 1, 1]: the max / mean over each channel's plane. The mean is two
/// stages (the sum "<name>.sum", then the division).
te::Tensor global_max_pool2d(const te::Tensor& data, const std::string& name = "global_max_pool2d");
te::Tensor global_avg_pool2d(const te::Tensor& data, const std::string& name = "global_avg_pool2d");

/// Knobs of the template (any of the four outputs above): for NCHW tile_ow (output columns per
/// vector), tile_c, fuse_rows (1: parallel over n × c × rows; 0: over n × c), unroll_kw, pad_at
/// (1: the padding stage "<name>.pad" computed in full first; 0: inlined); for NCHW[x]c unroll_kw
/// and pad_at.
space::ConfigSpace pool2d_x86_space(const te::Tensor& out);
space::Config pool2d_x86_default(const space::ConfigSpace& space);
void schedule_pool2d_x86(te::Schedule& s, const te::Tensor& out, const space::Config& cfg);

}  // namespace kiln::topi
