// The reductions: ReduceSum, ReduceMean, ... (ten), ArgMax, ArgMin, and CumSum (a scan, opaque),
// lowered to topi's reductions with schedule_reduce_x86.
#include "compiler/topi/reduce.h"

#include <map>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/elementwise.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using ir::Expr;
using te::Tensor;

const std::map<std::string, topi::ReduceOp>& reductions() {
  static const std::map<std::string, topi::ReduceOp> m = {
      {"ReduceSum", topi::ReduceOp::kSum},
      {"ReduceMean", topi::ReduceOp::kMean},
      {"ReduceMax", topi::ReduceOp::kMax},
      {"ReduceMin", topi::ReduceOp::kMin},
      {"ReduceProd", topi::ReduceOp::kProd},
      {"ReduceL1", topi::ReduceOp::kL1},
      {"ReduceL2", topi::ReduceOp::kL2},
      {"ReduceLogSum", topi::ReduceOp::kLogSum},
      {"ReduceLogSumExp", topi::ReduceOp::kLogSumExp},
      {"ReduceSumSquare", topi::ReduceOp::kSumSquare},
  };
  return m;
}

/// The reductions and ArgMax / ArgMin: the front end normalized axes (non-negative, sorted;
/// empty: all), keepdims, and for the reductions noop (noop_with_empty_axes with no axes).
LowerResult lower_reduce(const LowerCtx& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  Tensor y;
  if (n.op == "ArgMax" || n.op == "ArgMin") {
    y = topi::arg_reduce(x, n.op == "ArgMax", n.i("axis"), n.i("keepdims") != 0,
                         n.i("select_last_index") != 0, sanitize(n.op));
  } else if (n.i("noop") != 0) {
    return injective_result(topi::elementwise(
        x, [](Expr e) { return e; }, "copy"));
  } else {
    y = topi::reduce(x, reductions().at(n.op), n.ints("axes"), n.i("keepdims") != 0, sanitize(n.op),
                     row_fold(c));
  }
  return {{y}, [=](te::Schedule& s, const Tensor& output) {
            topi::schedule_reduce_x86(s, y);
            then_injective(s, y, output);
          }};
}

LowerResult lower_cumsum(const LowerCtx& c) {
  const Node& n = c.node;
  return reduce_result(
      topi::cumsum(c.input(0), n.i("axis"), n.i("exclusive") != 0, n.i("reverse") != 0, "cumsum"));
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

/// The Reduce* operators: axes (attribute, or input 1 from opset 18 / ReduceSum 13) in range and
/// none twice; keepdims and noop_with_empty_axes flags.
void check_reduction(const NodeCheck& nc) {
  nc.flag("keepdims", 1);
  if (axes_is_input(nc.op(), nc.opset())) {
    nc.flag("noop_with_empty_axes", 0);
    if (!nc.has(1)) return;
    if (nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D (a list of axes)");
    if (const auto axes = nc.const_ints(1)) nc.axes_in(*axes, nc.rank(0), nc.input(1), nc.input(0));
    return;
  }
  nc.axes_in(nc.attr_ints("axes", {}), nc.rank(0), "attribute 'axes'", nc.input(0));
}

void check_arg_reduction(const NodeCheck& nc) {
  const int64_t ax = nc.axis_in(nc.attr_i("axis", 0), nc.rank(0), "attribute 'axis'", nc.input(0));
  nc.flag("keepdims", 1);
  nc.flag("select_last_index", 0);
  if (nc.shape(0)[static_cast<size_t>(ax)] == 0) {
    nc.fail(nc.input_shaped(0) + " has no elements along axis " + str(ax) + "; " + nc.op() +
            " has no index to give");
  }
}

void check_cumsum(const NodeCheck& nc) {
  if (nc.value(1).num_elements() != 1 || nc.rank(1) > 1)
    nc.fail(nc.input_shaped(1) + " must be a scalar");
  if (const auto axis = nc.const_ints(1))
    nc.axis_in((*axis)[0], nc.rank(0), nc.input(1), nc.input(0));
  nc.flag("exclusive", 0);
  nc.flag("reverse", 0);
  return;
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_reduction(ImportCtx& c) {
  Attrs a;
  const std::string& op = c.op();
  const int64_t rank = c.in_rank(0);
  std::vector<int64_t> axes;
  if (axes_is_input(op, c.opset())) {
    if (c.in(1) != kNoValue) axes = c.const_ints(1, "axes");
    a["noop"] = int64_t{c.attr_i("noop_with_empty_axes", 0) != 0 && axes.empty() ? 1 : 0};
  } else {
    axes = c.attr_ints("axes", {});
    a["noop"] = int64_t{0};
  }
  for (int64_t& ax : axes) ax = norm_axis(ax, rank);
  std::sort(axes.begin(), axes.end());
  a["axes"] = axes;  // empty: every axis
  a["keepdims"] = c.attr_i("keepdims", 1);
  c.inputs.resize(1);
  return a;
}

Attrs import_arg_reduction(ImportCtx& c) {
  Attrs a;
  a["axis"] = norm_axis(c.attr_i("axis", 0), c.in_rank(0));
  a["keepdims"] = c.attr_i("keepdims", 1);
  a["select_last_index"] = c.attr_i("select_last_index", 0);
  return a;
}

Attrs import_cumsum(ImportCtx& c) {
  Attrs a;
  const std::vector<int64_t> axis = c.const_ints(1, "axis");
  a["axis"] = norm_axis(axis.at(0), c.in_rank(0));
  a["exclusive"] = c.attr_i("exclusive", 0);
  a["reverse"] = c.attr_i("reverse", 0);
  c.inputs.resize(1);
  return a;
}

void need_axis(const ImportCtx& c) { c.need_constant(1, "axis"); }
void need_axes(const ImportCtx& c) {
  if (axes_is_input(c.op(), c.opset()) && c.in(1) != kNoValue) c.need_constant(1, "axes");
}

// --- libonnx shape inference ------------------------------------------------------------------

bool reduction_inference(const InferenceForm& f, std::vector<onnx::TypeProto>* types) {
  const std::string& op = f.node.op_type();
  if (!axes_is_input(op, f.opset)) return false;
  // Opset 18's axes input and noop_with_empty_axes, which libonnx 1.12 does not know: the
  // opset-13 form with an axes attribute (validate_node has checked them; the importer requires
  // the axes to be a constant), or an Identity where no axes mean no reduction.
  std::vector<int64_t> axes;
  if (f.inputs.size() > 1 && f.inputs[1] != nullptr && f.inputs[1]->is_constant()) {
    for (int64_t i = 0; i < f.inputs[1]->num_elements(); ++i) {
      axes.push_back(static_cast<int64_t>(element_as_double(*f.inputs[1]->data, i)));
    }
  }
  bool noop = false;
  onnx::NodeProto rewritten;
  rewritten.set_name(f.node.name());
  rewritten.set_op_type(op);
  rewritten.add_input(f.node.input(0));
  for (const std::string& o : f.node.output()) rewritten.add_output(o);
  for (const onnx::AttributeProto& a : f.node.attribute()) {
    if (a.name() == "noop_with_empty_axes") {
      noop = a.i() != 0;
    } else {
      *rewritten.add_attribute() = a;
    }
  }
  if (axes.empty() && noop) {
    rewritten.set_op_type("Identity");
    rewritten.clear_attribute();
  } else if (!axes.empty()) {
    onnx::AttributeProto* a = rewritten.add_attribute();
    a->set_name("axes");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t ax : axes) a->add_ints(ax);
  }
  *f.n = rewritten;
  return false;
}

}  // namespace

void register_reduce(Registry& r) {
  std::vector<std::string> ops = {"ArgMax", "ArgMin"};
  for (const auto& [op, kind] : reductions()) ops.push_back(op);
  for (const std::string& op : ops) {
    const bool arg = op.rfind("Arg", 0) == 0;
    r.add({.name = op,
           .family = "reduce",
           .pattern = OpPattern::kCommReduce,
           .check = arg ? check_arg_reduction : check_reduction,
           // From opset 18 the axes are input 1 (ReduceSum's from 13, in libonnx's schema).
           .opset18 =
               arg || op == "ReduceSum"
                   ? std::nullopt
                   : std::optional<Opset18Form>(Opset18Form{
                         .extra_inputs = {"axes"},
                         .extra_attributes = {{"noop_with_empty_axes", onnx::AttributeProto::INT}},
                         .removed_attributes = {{"axes",
                                                 "from opset 18 the axes "
                                                 "are input 1"}}}),
           .import = arg ? import_arg_reduction : import_reduction,
           .constant_inputs = arg ? nullptr : need_axes,
           .inference_form = arg || op == "ReduceSum" ? nullptr : reduction_inference,
           .lower = lower_reduce,
           .gpu = GpuStrategy::kReduce});
  }
  r.add({.name = "CumSum",
         .family = "reduce",
         .pattern = OpPattern::kOpaque,
         .check = check_cumsum,
         .import = import_cumsum,
         .constant_inputs = need_axis,
         .lower = lower_cumsum,
         .gpu = GpuStrategy::kReduce});
}

}  // namespace kiln::graph::ops
