// realize_qlinear: the QDQ form of a quantized convolution or product with float scales (what
// onnxruntime's quantize_static writes: per-tensor or per-channel weights, activation zero
// points, int8 or uint8) becomes ONNX's integer product followed by ONNX Runtime's
// requantization, so that the result equals its QLinearConv / QGemm kernels':
//
//   DequantizeLinear(x_q, s_x, z_x)
//     -> Conv(DequantizeLinear(w_q constant, s_w[M] or s_w, z_w), DequantizeLinear(b_q int32,
//     s_x*s_w))
//     -> [Relu, the conv's only reader]
//     -> QuantizeLinear(s_y, z_y)
//   =>
//   acc = ConvInteger(x_u8, w_q, z_x, [z_w]) {the Conv's attributes}    int32
//       -> Add(acc, b_q[1,M,1,1])                                       int32 (when there is a
//       bias)
//       -> Cast(float32) -> Mul(m[1,M,1,1]) -> [Relu]
//       -> QuantizeLinear(1.0, z_y)                                     round half to even, clip
//
// with m[c] = s_x * s_w[c] / s_y computed in float32 as ORT does (MlasRequantizeOutput: float
// multiply, nearest even). Gemm (transA 0, alpha and beta 1) and MatMul with a constant quantized
// B become MatMulInteger the same way, B transposed to [K, N] at build time and m per column.
//
// Integer products read uint8 activations: a QuantizeLinear writing int8 whose readers are all
// DequantizeLinear is retyped first to uint8 with its zero points + 128 (the same real values);
// an int8 x from anywhere else gets x + 128 through int32 (Cast, Add, Cast). What lies between
// QDQ pairs (residual Add, GlobalAveragePool, Flatten) stays float in the dequantized domain,
// within 1 LSB of ORT's float-in-the-middle QLinearAdd and kin; a MaxPool between a
// DequantizeLinear and a QuantizeLinear of the same scale and zero point runs on the 8-bit values
// (exactly, as ORT drops that pair).
//
// A pattern that does not qualify stays float and the report says why, one line per convolution
// or product; a zero or non-finite scale, or per-channel weight scales of the wrong length, are
// errors (kiln::Error naming the node, the scale and both values). On the VDLA target
// realize_qconv runs first and takes the power-of-two patterns as QConv; on CPUs this pass takes
// them all.
//
//   RealizeQLinearReport r = realize_qlinear(g);   // then g.remove_dead_nodes()
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::graph {

struct RealizeQLinearReport {
  size_t convolutions = 0;          ///< ConvInteger nodes made
  size_t products = 0;              ///< MatMulInteger nodes made (from Gemm and MatMul)
  size_t unsigned_activations = 0;  ///< int8 QuantizeLinear nodes retyped to uint8
  size_t pools = 0;                 ///< MaxPool nodes moved onto 8-bit values
  /// "node 'conv3' (Conv): stays float: its output is not quantized ...", one per convolution or
  /// product that reads a DequantizeLinear but was not realized.
  std::vector<std::string> kept_float;
};

/// Rewrites every qualifying pattern of `g`; the nodes it replaces are left for
/// remove_dead_nodes.
RealizeQLinearReport realize_qlinear(Graph& g);

}  // namespace kiln::graph
