// Quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear; QLinearConv and
// QLinearMatMul (rewritten into their QDQ form before import, onnx_qlinear.cc); QConv
// (realize_qconv) and VdlaQConv (offload_vdla), the integer convolutions the passes make.
#include <cmath>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/qconv2d.h"
#include "compiler/topi/quantize.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using te::Tensor;

LowerResult lower_quantize(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  Tensor zp = c.has(2) ? c.in[2] : Tensor();
  const int axis = static_cast<int>(n.i("axis"));
  if (op == "DequantizeLinear") {
    return injective_result(topi::dequantize_linear(c.input(0), c.input(1), zp, axis));
  }
  return injective_result(
      topi::quantize_linear(c.input(0), c.input(1), zp, axis, c.out_value().ir_dtype()));
}

/// DynamicQuantizeLinear: y, its scale and zero point from x's range, an opaque node of its own
/// (two reductions over the whole of x, then the quantization).
LowerResult lower_dynamic_quantize(const LowerCtx& c) {
  const topi::DynamicQuantized q =
      topi::dynamic_quantize_linear(c.input(0), row_fold(c) == topi::RowFold::kVectorLanes);
  LowerResult r;
  r.outs = {q.y, q.scale, q.zero_point};
  r.schedule = [=](te::Schedule& s, const Tensor&) {
    topi::schedule_dynamic_quantize_linear_x86(s, q);
  };
  return r;
}

/// QConv (realize_qconv.h): the integer convolution, its bias, shift and clip on the register
/// tile of the NCHW template at its default config; not tunable.
LowerResult lower_qconv(const LowerCtx& c) {
  const Node& n = c.node;
  const topi::QConv2d q =
      topi::qconv2d_nchw(c.input(0), c.input(1), c.input(2), c.input(3), ints2(n.ints("strides")),
                         ints4(n.ints("pads")), ints2(n.ints("dilations")),
                         static_cast<int>(n.i("group")), n.i("relu") != 0, "qconv2d");
  return {
      {q.out},
      [=](te::Schedule& s, const Tensor& output) { topi::schedule_qconv2d_nchw_x86(s, q, output); },
      q.acc};
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

/// QuantizeLinear / DequantizeLinear: the scale a scalar (per tensor) or, from opset 13, a 1-D
/// tensor of x's size along `axis` (per axis); the zero point of the scale's shape; an int32 x
/// (a bias) dequantized with a zero point of 0 only; a constant scale positive.
void check_quantize_linear(const NodeCheck& nc) {
  const bool per_axis = nc.rank(1) == 1;
  if (nc.rank(1) > 1 || (per_axis && nc.opset() < 13)) {
    nc.fail(nc.input_shaped(1) + " must be a scalar" +
            (nc.opset() < 13 ? " at opset " + str(nc.opset()) + " (per-axis scales need opset 13)"
                             : std::string(" or a 1-D tensor (per axis)")));
  }
  if (per_axis) {
    const int64_t axis =
        nc.axis_in(nc.attr_i("axis", 1), nc.rank(0), "attribute 'axis'", nc.input(0));
    if (nc.shape(1)[0] != nc.shape(0)[static_cast<size_t>(axis)]) {
      nc.fail(nc.input_shaped(1) + " has " + str(nc.shape(1)[0]) + " scales, but " +
              nc.input_shaped(0) + " has " + str(nc.shape(0)[static_cast<size_t>(axis)]) +
              " elements along axis " + str(axis));
    }
  }
  if (nc.has(2) && nc.shape(2) != nc.shape(1)) {
    nc.fail(nc.input_shaped(2) + " must have the shape of " + nc.input_shaped(1));
  }
  if (nc.value(1).is_constant()) {
    const runtime::NDArray& s = *nc.value(1).data;
    for (int64_t i = 0; i < s.num_elements(); ++i) {
      const double v = element_as_double(s, i);
      if (!(v > 0.0) || !std::isfinite(v)) {
        nc.fail(nc.input(1) + " holds " + std::to_string(v) + " at index " + str(i) +
                "; scales must be positive and finite");
      }
    }
  }
  if (nc.op() == "DequantizeLinear" && runtime::dtype_equal(nc.value(0).dtype, runtime::kInt32) &&
      nc.has(2) && nc.value(2).is_constant()) {
    for (int64_t i = 0; i < nc.value(2).num_elements(); ++i) {
      if (element_as_double(*nc.value(2).data, i) != 0.0) {
        nc.fail(nc.input(2) + " must be 0 for an int32 " + nc.input(0) +
                " (ONNX: int32 has no zero "
                "point)");
      }
    }
  }
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_quantize(ImportCtx& c) {
  Attrs a;
  // The axis of a per-axis (1-D) scale, 0 for a per-tensor one; validate_node checked it.
  const bool per_axis = c.in_rank(1) == 1;
  a["axis"] = per_axis ? norm_axis(c.attr_i("axis", 1), c.in_rank(0)) : int64_t{0};
  return a;
}

}  // namespace

void register_quant(Registry& r) {
  for (const char* op : {"DequantizeLinear", "QuantizeLinear"}) {
    r.add({.name = op,
           .family = "quant",
           .pattern = OpPattern::kBroadcast,
           .check = check_quantize_linear,
           .import = import_quantize,
           .lower = lower_quantize,
           .gpu = GpuStrategy::kInjective});
  }
  // Its two reductions and the quantization they feed fit neither a reduction's schedule nor an
  // epilogue; x float32 of any shape is all the schema asks.
  r.add({.name = "DynamicQuantizeLinear",
         .family = "quant",
         .pattern = OpPattern::kOpaque,
         .schema_checks_suffice = true,
         .no_attributes = true,
         .lower = lower_dynamic_quantize,
         .gpu = GpuStrategy::kRefused,
         .gpu_note = "no GPU schedule yet (reduce_gpu gives a scalar's reduction no threads)"});
  for (const char* op : {"QLinearConv", "QLinearMatMul"}) {
    r.add({.name = op,
           .family = "quant",
           .origin = Origin::kImportOnly,
           .import_note = "rewritten into its QDQ form",
           .schema_checks_suffice = true});  // its QDQ form's nodes are validated
  }
  // Its dequantization, residual add, Relu and requantization run on its tile.
  r.add({.name = "QConv",
         .family = "quant",
         .origin = Origin::kInternal,
         .internal_note = "realize_qconv",
         .pattern = OpPattern::kOutEWiseFusable,
         .lower = lower_qconv,
         .gpu = GpuStrategy::kRefused,
         .gpu_note = "no GPU schedule yet"});
  r.add({.name = "VdlaQConv",
         .family = "quant",
         .origin = Origin::kInternal,
         .internal_note = "offload_vdla",
         .pattern = OpPattern::kOpaque,  // a VDLA program, fused with nothing
         .fold_constants = false,
         .lower_note = "built into a VDLA program by graph_build (vdla_qconv_compute)",
         .gpu = GpuStrategy::kRefused,
         .gpu_note = "a VDLA program (target vdla)"});
}

}  // namespace kiln::graph::ops
