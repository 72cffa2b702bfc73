// Grouped convolutions whose groups are not whole channel blocks get zero channels at the end of
// each group, so that alter_layout blocks them group by group instead of merging neighbouring
// groups into block-diagonal ones. RegNet's groups of 120 channels (X-8GF), 168 (X-32GF) or 232
// (Y-32GF) in AVX-512's blocks of 16 merged two groups: the 3x3 convolutions did twice their
// work; padded to 128, 176, 240 they do 7%, 5%, 3% more, and so do the 1x1 convolutions around.
//
//   %a = Conv(%x, %wa[240,80,1,1])                        %a = Conv(%x, %wa'[256,80,1,1])
//   %r = Relu(%a)                      [1,240,H,W]   =>   %r = Relu(%a)         [1,256,H,W]
//   %b = Conv(%r, %wb[240,120,3,3]) {group=2}             %b = Conv(%r, %wb'[256,128,3,3])
//   {group=2} %c = Conv(Relu(%b), %wc[240,240,1,1])                 %c = Conv(Relu(%b),
//   %wc'[240,256,1,1])
//
// Channel k of group j (of width w) becomes channel j * w' + k, w' the width rounded up to the
// block alter_layout gives the convolution; channels j * w' + w .. j * w' + w' - 1 are padding.
// The padded values form a region: a grouped convolution's input (when its input groups need
// padding) or output (when its output groups do), and through per-channel operators what they
// are computed from and what reads them. The region's ends:
// - producers: Conv with a constant kernel and bias (zero kernel rows and bias: the padding is 0);
// - readers: Conv with a constant kernel (zero kernel columns: the padding is never read);
// - between them, values of the same channels: elementwise operators that keep finite values
//   finite (alter_layout.h's finite_on_finite; an operand that is a per-channel constant gets
//   zeros in the padding, a single element or a constant without channels stays), and poolings
//   (RegNet-Y's squeeze-excitation: GlobalAveragePool -> Conv -> Relu -> Conv -> Sigmoid -> Mul).
// Each grouped convolution met must be one the pass pads the same way, and every other node
// (a Reshape, a Concat, a graph output, a graph input, a depthwise or other grouped
// convolution) leaves the whole connected set of regions as it is, for alter_layout to merge.
// The set is padded only when its added multiplications (every convolution's, from its kernel's
// and output's sizes) are fewer than those merging adds (merge - 1 times the grouped
// convolutions', or, for one that alter_layout would leave in NCHW, 3 times: an NCHW grouped
// convolution ran at a quarter of a blocked one's rate).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/graph/alter_layout.h"
#include "compiler/graph/graph.h"

namespace kiln::graph {

struct PadGroupsReport {
  size_t padded = 0;  ///< grouped convolutions whose groups became whole blocks
  /// One line per grouped convolution left to alter_layout's merging: its name and why.
  std::vector<std::string> kept;
};

/// Pads the grouped convolutions of `g` (verified, topologically ordered, batch norms folded)
/// whose groups `options`' blocks do not divide, by the rules above; run right before
/// alter_layout with the same options.
PadGroupsReport pad_groups(Graph& g, const AlterLayoutOptions& options);

}  // namespace kiln::graph
