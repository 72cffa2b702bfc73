// ONNX's linear quantization as elementwise computes: QuantizeLinear and DequantizeLinear with a
// per-tensor scale (a scalar) or a per-axis one (1-D, along `axis`), and an optional zero point of
// the scale's shape whose dtype is the quantized type (int8 or uint8; uint8 without one).
//
//   y = saturate(round_half_to_even(x / scale) + zero_point)     quantize_linear
//   y = (x - zero_point) * scale                                 dequantize_linear
//
//   y = int32(x) - int32(zero_point)                             integer_operand
//
// Each is one stage, scheduled (and fused) as any elementwise stage; integer_operand is the
// widened operand of ConvInteger and MatMulInteger, inlined into their products.
#pragma once

#include <string>

#include "compiler/te/tensor.h"

namespace kiln::topi {

/// x float32 (or int32, converted to float32 first) -> `qtype` (int8 or uint8). `scale` is
/// float32, rank 0 or 1 (then of x's size along `axis`); `zero_point` undefined (0) or of
/// scale's shape and dtype `qtype`.
te::Tensor quantize_linear(const te::Tensor& x, const te::Tensor& scale,
                           const te::Tensor& zero_point, int axis, ir::DataType qtype,
                           const std::string& name = "quantize_linear");

/// x int8, uint8 or int32 -> float32; `scale` and `zero_point` as for quantize_linear (the zero
/// point has x's dtype). The difference is taken in int32 and converted, as ONNX Runtime does.
te::Tensor dequantize_linear(const te::Tensor& x, const te::Tensor& scale,
                             const te::Tensor& zero_point, int axis,
                             const std::string& name = "dequantize_linear");

/// x int8 or uint8 -> int32 minus its zero point (undefined: 0), which has x's dtype and is a
/// scalar, one element, a 1-D tensor of x's size along `axis` (per channel, per row or per column)
/// or of x's rank broadcasting against it (ONNX's [D1, D2, M, 1] for MatMulInteger's A).
te::Tensor integer_operand(const te::Tensor& x, const te::Tensor& zero_point, int axis,
                           const std::string& name);

}  // namespace kiln::topi
