// realize_qconv: the QDQ form of a quantized convolution becomes one integer `QConv` node, the
// operator the VDLA runs and the CPU runs bit-exactly (topi/qconv2d.h holds the contract):
//
//   DequantizeLinear(x_q int8, s_x, 0)
//     -> Conv(X, W = DequantizeLinear(w_q int8 constant, s_w per tensor or per output channel, 0),
//             B = DequantizeLinear(b_q int32 constant, s_x * s_w) or none)
//     -> [Relu, the conv's only reader]
//     -> QuantizeLinear(s_y, 0, int8)
//   =>
//   y_q = QConv(x_q, w_q, bias, shift) {strides, pads, dilations, group, relu}
//
// with shift[oc] = log2(s_y / (s_x * s_w[oc])) and bias[oc] = b_q[oc] + 2^(shift[oc] - 1) (0 for
// a shift of 0): rounding half up folded into the bias. Every scale must be a power of two, every
// shift an integer in [0, 31] and the bias must fit int32; zero points must be 0 (or absent on the
// dequantizations). A pattern that does not qualify stays float (DQ -> Conv -> Q computes the same
// on the CPU up to rounding), and the report says why, one line per convolution.
//
// It runs after fold_constants (which keeps the DequantizeLinear of constants for it), before
// batch norms are folded and layouts changed; the build folds the DequantizeLinear nodes it left.
//
//   RealizeQConvReport r = realize_qconv(g);   // then g.remove_dead_nodes()
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::graph {

struct RealizeQConvReport {
  size_t realized = 0;  ///< QConv nodes made
  /// "node 'conv3' (Conv): stays float: the weight scale 0.3 is not a power of two", one per
  /// convolution that reads a DequantizeLinear but was not realized.
  std::vector<std::string> kept_float;
};

/// Rewrites every qualifying pattern of `g`; the nodes it replaces are left for
/// remove_dead_nodes.
RealizeQConvReport realize_qconv(Graph& g);

}  // namespace kiln::graph
