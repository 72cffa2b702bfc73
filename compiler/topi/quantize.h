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
//
// DynamicQuantizeLinear quantizes x to uint8 with a scale and zero point taken from x's own range,
// widened to hold 0 (as ONNX and ONNX Runtime define it; ORT's scale 1 for an all-zero x):
//
//   lo = min(0, min(x)), hi = max(0, max(x))
//   scale = hi == lo ? 1 : (hi - lo) / 255
//   zero_point = round_half_to_even(saturate(0 - lo / scale))
//   y = saturate(round_half_to_even(x / scale) + zero_point)
//
// Two reductions over the whole tensor (min and max), then rank-0 stages and one elementwise one.
#pragma once

#include <string>

#include "compiler/te/schedule.h"
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

/// DynamicQuantizeLinear's outputs and the stages the schedule needs.
struct DynamicQuantized {
  te::Tensor y;           ///< uint8, x's shape
  te::Tensor scale;       ///< float32, rank 0
  te::Tensor zero_point;  ///< uint8, rank 0
  /// float32 [2]: x's minimum negated and its maximum, both reduced by max in one pass
  te::Tensor range;
  /// With `vector_lanes`: the stage folding x into [2, 16] lanes first (else undefined).
  te::Tensor range_lanes;
};

/// x float32 -> DynamicQuantizeLinear's three outputs, stages `name.range`, `name.scale`,
/// `name.zero_point` and `name`. x's minimum and maximum come from one reduction over every axis
/// (`name.range`, the maximum of -x and of x), which reads each element once; with `vector_lanes`
/// (CPUs) and x's last dimension a multiple of 16, it first folds x into 16 lanes per end
/// (`name.range.lanes`, one vector each) and then the lanes.
DynamicQuantized dynamic_quantize_linear(const te::Tensor& x, bool vector_lanes,
                                         const std::string& name = "dynamic_quantize_linear");

/// Its x86 schedule: the lanes vectorized inside the reduction loops, y by schedule_injective_x86.
void schedule_dynamic_quantize_linear_x86(te::Schedule& s, const DynamicQuantized& q);

}  // namespace kiln::topi
