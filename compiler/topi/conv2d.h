// 2-D convolution: its tensor expressions (NCHW with stride, four-sided padding, dilation and
// groups; the blocked NCHW[x]c layout of TVM's x86 templates; the layout conversions between
// them) and x86 schedule templates whose choices are knobs of a config space.
//
//   te::Tensor y = conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
//   space::ConfigSpace space = conv2d_nchw_x86_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_conv2d_nchw_x86(s, y, conv2d_nchw_x86_default(space));
//
// Padding is a stage of its own ("<name>.pad"), inlined into the convolution or computed inside
// its register tile, as the schedule chooses. Shapes must be constants. Bias is not part of the
// convolution: the graph adds it as its own stage.
#pragma once

#include <array>
#include <string>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi {

using Ints2 = std::array<int, 2>;  ///< (height, width)
using Ints4 = std::array<int, 4>;  ///< padding (top, left, bottom, right)

/// `t` (rank >= 4, dimensions 2 and 3 are height and width) padded with `value` (zero when
/// undefined; cast to t's dtype); `t` itself when every pad is 0.
te::Tensor pad_hw(const te::Tensor& t, const Ints4& pads, ir::Expr value = ir::Expr(),
                  const std::string& name = "pad");

/// out[n, o, y, x] = sum_{c, kh, kw} data[n, g * C/groups + c, y * sh + kh * dh - pt,
///                                        x * sw + kw * dw - pl] * kernel[o, c, kh, kw]
/// with g = o / (O / groups): data [N, C, H, W], kernel [O, C / groups, KH, KW] (OIHW).
/// groups == C with one input channel per group is depthwise (no reduction over channels).
te::Tensor conv2d_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                       Ints4 padding, Ints2 dilation = {1, 1}, int groups = 1,
                       const std::string& name = "conv2d");

/// Knobs of the NCHW template: tile_oc (output channels of the register tile), tile_ow (output
/// columns, vectorized), reorder_inner (0: channels of the reduction outside the kernel window
/// and the tile; 1: the tile's channel rows outside the window), unroll_kw, pad_at (0: inline,
/// 1: computed per register tile, 2: computed in full first). Works for any `conv2d_nchw` output
/// (grouped included).
space::ConfigSpace conv2d_nchw_x86_space(const te::Tensor& out);
space::Config conv2d_nchw_x86_default(const space::ConfigSpace& space);
/// Parallel over (n, output-channel blocks, output rows) fused; a register tile (cache_write
/// "local") of tile_oc × tile_ow with the rows unrolled and the columns vectorized.
///
/// Every conv2d template takes an optional `output`: the stage that stores the result, `out`
/// itself when undefined, or an elementwise epilogue of `out` of the same shape (bias, batch norm,
/// activation, residual add) whose other stages are inlined; the epilogue is then applied to the
/// register tile on its way to memory (operator fusion; see topi::epilogue_stage).
void schedule_conv2d_nchw_x86(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                              const te::Tensor& output = {});

/// The depthwise template (conv2d_nchw with groups == C, one input channel per group): knobs
/// tile_c, tile_ow, unroll_kw, pad_at; parallel over (n, channel blocks, rows), columns vectorized.
space::ConfigSpace depthwise_conv2d_nchw_x86_space(const te::Tensor& out);
space::Config depthwise_conv2d_nchw_x86_default(const space::ConfigSpace& space);
void schedule_depthwise_conv2d_nchw_x86(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output = {});

/// NCHW[x]c: data [N, C/ic, H, W, ic], kernel [O/oc, C/ic, KH, KW, ic, oc] (see
/// `pack_conv2d_kernel`), out [N, O/oc, OH, OW, oc]; groups == 1.
te::Tensor conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                        Ints4 padding, Ints2 dilation = {1, 1},
                        const std::string& name = "conv2d_nchwc");
/// Knobs: the register tile tile_ob (output channel blocks) x tile_oh (rows) x tile_ow (columns;
/// the width's factors and powers of two, whose partial last tile pass::partition_loops peels),
/// all unrolled, oc vectorized; reduce_order (0: ic innermost of the reduction; 1: ic outside the
/// kernel window), unroll_kw, pad_at (as for NCHW; the space lists the default's choice first),
/// tile_ic (the input channel blocks split into chunks x blocks: with one chunk each register
/// tile reduces over all of them; with more, the task's rows keep their sums in local memory and
/// each chunk runs over all the column tiles before the next). (n, channel-block tiles, row
/// tiles) run in parallel.
space::ConfigSpace conv2d_nchwc_x86_space(const te::Tensor& out);
/// The default register tile fills about 8 vector registers of the target's `vector_bits`, 16
/// on AVX-512 (32 registers): columns first, then channel blocks (on AVX-512 two channel blocks
/// where they split so). The reduction over input channel blocks goes in chunks (tile_ic) sized
/// by the target's L1 where a task's weights are too many for its L2 to keep them between column
/// tiles.
space::Config conv2d_nchwc_x86_default(const te::Tensor& out, const space::ConfigSpace& space,
                                       const target::Target& target);
void schedule_conv2d_nchwc_x86(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                               const te::Tensor& output = {});

/// Grouped NCHW[x]c with blocks inside the groups: data [N, C/ic, H, W, ic], kernel
/// [O/oc, (C/groups)/ic, KH, KW, ic, oc] (`pack_conv2d_kernel(w, ic, oc)` of the OIHW kernel
/// [O, C/groups, KH, KW]), out [N, O/oc, OH, OW, oc]; ic divides C/groups and oc divides
/// O/groups, so each block lies in one group:
///   out[n, f, y, x, fi] = sum_{c, kh, kw, ci} data[n, g * (C/groups)/ic + c, ..., ci]
///                                            * kernel[f, c, kh, kw, ci, fi],  g = f /
///                                            ((O/groups)/oc)
/// The reduction axes are conv2d_nchwc's, so schedule_conv2d_nchwc_x86 schedules it.
te::Tensor group_conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                              Ints4 padding, Ints2 dilation, int groups,
                              const std::string& name = "group_conv2d_nchwc");
/// conv2d_nchwc's knobs, the tile_ob channel blocks a factor of the blocks of one group (a
/// register tile never straddles two groups, so the blocks of its rows share their data), the
/// padding inlined first among pad_at's choices.
space::ConfigSpace group_conv2d_nchwc_x86_space(const te::Tensor& out);
/// The default register tile as for conv2d_nchwc_x86_default; the padding inlined and the
/// kernel's columns unrolled (as the depthwise template's default: little work per input).
space::Config group_conv2d_nchwc_x86_default(const te::Tensor& out, const space::ConfigSpace& space,
                                             const target::Target& target);
/// schedule_conv2d_nchwc_x86's loop nest.
void schedule_group_conv2d_nchwc_x86(te::Schedule& s, const te::Tensor& out,
                                     const space::Config& cfg, const te::Tensor& output = {});

/// Depthwise NCHW[x]c (channel multiplier 1): data [N, C/c, H, W, c], kernel [C/c, 1, KH, KW, 1, c]
/// (`pack_conv2d_kernel(w, 1, c)` of an OIHW [C, 1, KH, KW] kernel), out [N, C/c, OH, OW, c].
te::Tensor depthwise_conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                  Ints4 padding, Ints2 dilation = {1, 1},
                                  const std::string& name = "depthwise_conv2d_nchwc");
/// Knobs: the register tile tile_ob x tile_oh x tile_ow as for conv2d_nchwc (partial column tiles
/// included), unroll_kw, pad_at;
/// c is vectorized, (n, channel-block tiles, row tiles) run in parallel.
space::ConfigSpace depthwise_conv2d_nchwc_x86_space(const te::Tensor& out);
/// The default register tile as for conv2d_nchwc_x86_default.
space::Config depthwise_conv2d_nchwc_x86_default(const te::Tensor& out,
                                                 const space::ConfigSpace& space, int vector_bits);
void schedule_depthwise_conv2d_nchwc_x86(te::Schedule& s, const te::Tensor& out,
                                         const space::Config& cfg, const te::Tensor& output = {});

/// [N, C, H, W] -> [N, ceil(C / c_block), H, W, c_block]; where C is not a multiple of c_block
/// the last block's channels past C are zeros (padded blocks, see alter_layout).
te::Tensor nchw_to_nchwc(const te::Tensor& t, int c_block,
                         const std::string& name = "nchw_to_nchwc");
/// [N, CB, H, W, cb] -> [N, channels, H, W]: the first `channels` of the CB * cb (0: all).
te::Tensor nchwc_to_nchw(const te::Tensor& t, int64_t channels = 0,
                         const std::string& name = "nchwc_to_nchw");
/// Between NCHW (block 0) and NCHW[x]c with blocks of src_block / dst_block channels: the two
/// above, or [N, CB, H, W, a] -> [N, ceil(C / b), H, W, b] directly. `channels` is C, the real
/// channels of padded blocks (0: all of t's); channels past it are dropped, or zeros when padded.
te::Tensor layout_transform(const te::Tensor& t, int src_block, int dst_block, int64_t channels = 0,
                            const std::string& name = "layout_transform");
/// OIHW [O, C, KH, KW] -> [O / oc_block, C / ic_block, KH, KW, ic_block, oc_block].
te::Tensor pack_conv2d_kernel(const te::Tensor& kernel, int ic_block, int oc_block,
                              const std::string& name = "kernel_packed");
/// A schedule for a layout conversion (or any injective stage): leading axes fused in parallel,
/// the last one vectorized.
void schedule_layout_transform_x86(te::Schedule& s, const te::Tensor& out);

}  // namespace kiln::topi
