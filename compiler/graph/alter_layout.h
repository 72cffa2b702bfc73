// Data-layout transformation (the paper's section 3): 2-D convolutions move from NCHW to the
// blocked NCHW[x]c layout that their x86 templates vectorize over (topi::conv2d_nchwc), and the
// layout flows through the elementwise operators that follow, so that a chain of convolutions
// (ResNet's blocks, MobileNet's inverted residuals) converts its activations once, not around
// every convolution.
//
//   x ─ LayoutTransform(0→16) ─ Conv{data_block=16, out_block=16} ─ Relu ─ Add ─ Conv ... ─
//       LayoutTransform(16→0) ─ GlobalAveragePool ─ ...
//
// The rules. A Conv (float32, 2-D) whose channel counts have a block (16 when they divide by 16,
// else 8, else the count itself up to 16) becomes a blocked convolution: its data input is
// [N, C/ib, H, W, ib], its weight a new constant packed as [O/ob, C/ib, KH, KW, ib, ob]
// (depthwise: [C/c, 1, KH, KW, 1, c]; grouped: [O/ob, (C/groups)/ib, KH, KW, ib, ob]), its output
// [N, O/ob, OH, OW, ob]; its bias stays [O]. A grouped Conv (neither groups == 1 nor depthwise)
// is blocked when its groups' channels are whole blocks (ib divides C/groups, ob O/groups), or
// become whole blocks when `merge` (up to 4) neighbouring groups are taken as one: the kernel of
// the merged group is block-diagonal, zero between the original groups, and the node's `group`
// becomes groups / merge (1 when all merge: a plain blocked convolution); pad_groups.h, run
// before, pads groups to whole blocks instead where that costs less. Any other grouped Conv
// stays NCHW. Elementwise operators (activations; Add, Sub, Mul, Div, Max, Min whose
// operands are all blocked with the output's shape, per-channel rank-4 tensors such as [N,C,1,1]
// or [1,C,1,1], or single elements) keep the layout of their first operand blocked with the
// output's shape, converting the others to it (a single element stays NCHW and broadcasts), and
// so do 2-D poolings (MaxPool, AveragePool and the global ones
// pool NCHW[x]c directly; marked with data_block), 3-D poolings over frames as rows
// (rewrite_pool3d's, frame_shape) even of an NCHW value, converted first, and Slices of whole
// channel blocks (a gated unit's halves). Every other reader of a blocked value, and every
// graph output, reads it converted back to NCHW; a convolution that wants another block converts
// directly between blocks. Conversions are LayoutTransform nodes {src_block, dst_block} (0 = NCHW),
// each made at most once per value and block. A value keeps its id and NCHW meaning: its blocked
// form is a new value, and the original is produced by a conversion only if something still reads
// it.
//
// Padded blocks. With options.pad_to (AVX-512's 16 lanes), a channel count that is not a multiple
// of it but would be with at most an eighth more channels is blocked in pad_to with its last block
// padded: [N, ceil(C/b), H, W, b]; so is any count over the lanes on a map of one pixel (pad_to, or
// 8 without it: a squeeze-excitation's middle). A convolution computes the padding from zero
// weights and a zero bias (so a grouped one gets zero groups, a depthwise one zero channels); what
// reads a padded value never takes the padding for channels: convolutions give it zero weights, a
// conversion to NCHW or to unpadded blocks (a LayoutTransform with the attribute `channels`)
// drops it, one from NCHW fills it with zeros. Elementwise operators run on it only when they
// keep it finite (an infinity or NaN times a zero weight would not vanish); the others, and
// concatenations, read such a value in NCHW.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "compiler/graph/graph.h"

namespace kiln::graph {

struct AlterLayoutOptions {
  /// Blocks of this many channels (the target's vector lanes; 0: none) where they need a padded
  /// last block; see "Padded blocks" above.
  int pad_to = 0;
  /// bf16 products (BuildOptions::precision): a plain blocked Conv (groups 1) gets its kernel as
  /// bf16 pairs along the input channels, int32 [O/ob, C/ib, KH, KW, ib/2, ob] (round to nearest
  /// even; topi/conv2d_bf16.h), and the attribute bf16 = 1; its data and output stay float32. An
  /// odd input block (the count itself: an image's 3 colours) becomes a padded even one (4, a
  /// zero channel). Grouped and depthwise ones stay float32.
  bool bf16 = false;
  /// Winograd's F(m x m, 3 x 3) for the plain float32 3x3 convolutions of stride 1 where it pays
  /// (see "Winograd" above): the kernel transformed at build time, [alpha, alpha, O/ob, C, ob]
  /// (topi::winograd_kernel_transform, alpha = m + 2), and the attribute winograd = m.
  bool winograd = false;
};

struct AlterLayoutReport {
  size_t convolutions_blocked = 0;
  size_t grouped_blocked = 0;  ///< of those, grouped ones (neither groups == 1 nor depthwise)
  size_t padded = 0;           ///< of those, ones with a padded block (input or output)
  size_t bf16 = 0;             ///< of those, ones with bf16 operands (options.bf16)
  size_t int8_blocked = 0;     ///< of those, int8 ConvInteger (packed by pack_weights)
  size_t winograd = 0;         ///< of those, by Winograd's F(m x m, 3 x 3) (options.winograd)
  size_t conversions = 0;      ///< LayoutTransform nodes inserted
};

/// Rewrites `g` (verified, topologically ordered, batch norms already folded) by the rules above.
AlterLayoutReport alter_layout(Graph& g, const AlterLayoutOptions& options = {});

/// The channel block the pass gives `channels` (0: none, the convolution stays NCHW).
int channel_block(int64_t channels);

/// The block of `channels` under `options` for a map of `pixels` (H * W; 0 unknown):
/// channel_block's, or options.pad_to with the last block padded where that adds at most an
/// eighth of the channels (RegNet's 440 as 28 blocks of 16, not 55 of 8: AVX-512's full vectors
/// for 2% more work). A map of one pixel (a squeeze-excitation's: EfficientNet-B4's 1632 -> 68 ->
/// 1632) is always padded to full vectors (pad_to, else 8): its padding costs no memory to speak
/// of, while left unblocked for want of a dividing block its convolutions (products of a vector
/// and a matrix) ran 10x slower than blocked ones.
int channel_block(int64_t channels, const AlterLayoutOptions& options, int64_t pixels = 0);

/// Elementwise operators that map finite values to finite values, so that they may run on
/// padding channels (zeros from a convolution, then whatever these make of them): such channels
/// are never read as real ones, but a consumer convolution multiplies them by its zero weights,
/// and NaN or infinity times zero is NaN. Division, logarithms, roots, powers and exponentials
/// are left out.
bool finite_on_finite(const std::string& op);

/// How the pass blocks a grouped Conv `n` of `g` (neither groups == 1 nor depthwise): its input
/// and output blocks and how many of its groups it merges into one; in_block 0 when it stays
/// NCHW (or `n` is no convolution the pass blocks).
struct GroupedConvBlocks {
  int in_block = 0, out_block = 0;
  int64_t merge = 1;
};
GroupedConvBlocks grouped_conv_blocks(const Graph& g, const Node& n,
                                      const AlterLayoutOptions& options);

/// The LayoutTransform node writing `to` from `from` (blocks of `src_block` -> `dst_block`
/// channels; 0 is NCHW), named after `to`.
Node layout_transform_node(const Graph& g, ValueId from, ValueId to, int src_block, int dst_block);

}  // namespace kiln::graph
