// ONNX ModelProto -> graph IR. import_model (at the end) is the script: check the model (opset,
// operators, static inputs), then let an Importer walk the nodes in file order (ONNX requires
// topological order). Each node is validated against the ONNX specification (validate_node), its
// outputs typed by ONNX shape inference of that node alone (ShapeInference, which sees the
// constants found so far), and then folded into a constant (try_fold), turned into an alias
// (Identity, Dropout) or emitted with normalized attributes (normalize). A graph input that also
// has an initializer is an input with that default value (IR version 4 and later; before, every
// initializer had to be listed as an input, and such inputs are constants).
#include "compiler/graph/onnx_frontend.h"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/topi/einsum.h"

namespace kiln::graph {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

const AttributeProto* find_attr(const NodeProto& n, const std::string& name) {
  for (const AttributeProto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

bool is_reduction(const std::string& op) {
  static const std::set<std::string> kOps = {
      "ReduceL1",   "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
      "ReduceMean", "ReduceMin", "ReduceProd",   "ReduceSum",       "ReduceSumSquare"};
  return kOps.count(op) != 0;
}

/// A possibly negative axis (validate_node has checked its range) made non-negative.
int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// The supported operators, sorted (std::binary_search looks them up).
// clang-format off
const std::vector<std::string> kSupported = {
    "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan", "Atanh",
    "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat",
    "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Cos", "Cosh", "CumSum",
    "DequantizeLinear", "Div", "Dropout", "Einsum", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten",
    "Floor", "GRU", "Gather", "GatherElements", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Greater",
    "GreaterOrEqual", "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization",
    "LSTM", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul",
    "Max", "MaxPool", "Mean", "Min", "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pad", "Pow",
    "QLinearConv", "QLinearMatMul", "QuantizeLinear", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
    "ReduceSumSquare", "Relu", "Reshape", "Resize", "Round", "Selu", "Shape", "Shrink", "Sigmoid",
    "Sign", "Sin", "Sinh", "Size", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt",
    "Squeeze", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Tile", "Transpose", "Trilu",
    "Unsqueeze", "Upsample", "Where", "Xor",
};
// clang-format on

/// The state of one import.
class Importer {
 public:
  Importer(const onnx::ModelProto& model, std::string origin, int64_t opset)
      : origin_(std::move(origin)), opset_(opset), inference_(model, origin_) {}

  /// Builds the graph from a model that check_model accepted.
  Graph run(const onnx::ModelProto& model);

 private:
  // --- the node being imported -----------------------------------------------------------------
  struct Ctx {
    const NodeProto* proto;
    std::string where;            // "node 'conv1' (Conv)"
    std::vector<ValueId> inputs;  // kNoValue for "" and for absent trailing inputs
  };

  [[noreturn]] void fail(const Ctx& c, const std::string& what) const {
    throw Error("error: '" + origin_ + "': " + c.where + ": " + what);
  }
  ValueId in(const Ctx& c, size_t i) const { return i < c.inputs.size() ? c.inputs[i] : kNoValue; }
  const Value& in_value(const Ctx& c, size_t i) const {
    if (in(c, i) == kNoValue) fail(c, "input " + std::to_string(i) + " is required");
    return g_.value(in(c, i));
  }
  /// The node's first output (already typed); error if the file leaves it unnamed.
  const Value& first_output(const Ctx& c) const {
    if (c.proto->output(0).empty()) fail(c, "output 0 is required");
    return g_.value(values_.at(c.proto->output(0)));
  }
  int64_t in_rank(const Ctx& c, size_t i) const {
    return static_cast<int64_t>(in_value(c, i).shape.size());
  }
  const runtime::NDArray* const_input(const Ctx& c, size_t i) const {
    ValueId v = in(c, i);
    return v == kNoValue || !g_.value(v).is_constant() ? nullptr : g_.value(v).data.get();
  }
  /// Constant input i; error if it is not a constant.
  const runtime::NDArray& need_constant(const Ctx& c, size_t i, const char* what) const {
    const runtime::NDArray* a = const_input(c, i);
    if (a != nullptr) return *a;
    if (in(c, i) != kNoValue && g_.input_default(in(c, i)) != nullptr) {
      const std::string& name = g_.value(in(c, i)).name;
      fail(c, std::string("input '") + what + "' is graph input '" + name + "', whose " +
                  "initializer is only a default that callers may replace; Kiln needs a constant " +
                  "here (remove '" + name + "' from the graph's inputs)");
    }
    fail(c, std::string("input '") + what + "' must be a constant");
  }
  /// An integer constant input (int32 or int64) as int64s; error if it is not a constant.
  std::vector<int64_t> const_ints(const Ctx& c, size_t i, const char* what) const {
    const runtime::NDArray* a = &need_constant(c, i, what);
    if (runtime::dtype_equal(a->dtype(), runtime::kInt64)) return a->to_vector<int64_t>();
    if (!runtime::dtype_equal(a->dtype(), runtime::kInt32)) {
      fail(c, std::string("input '") + what + "' must be int32 or int64");
    }
    const std::vector<int32_t> v = a->to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  /// A scalar constant input as a float, or `dflt` if the input is omitted.
  float const_float(const Ctx& c, size_t i, const char* what, float dflt) const {
    if (in(c, i) == kNoValue) return dflt;
    const runtime::NDArray* a = &need_constant(c, i, what);
    if (a->num_elements() != 1) fail(c, std::string("input '") + what + "' must be a scalar");
    return static_cast<float>(element_as_double(*a, 0));
  }

  int64_t attr_i(const Ctx& c, const char* name, int64_t dflt) const {
    const AttributeProto* a = find_attr(*c.proto, name);
    return a ? a->i() : dflt;
  }
  float attr_f(const Ctx& c, const char* name, float dflt) const {
    const AttributeProto* a = find_attr(*c.proto, name);
    return a ? a->f() : dflt;
  }
  std::string attr_s(const Ctx& c, const char* name, const std::string& dflt) const {
    const AttributeProto* a = find_attr(*c.proto, name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> attr_ints(const Ctx& c, const char* name, std::vector<int64_t> dflt) const {
    const AttributeProto* a = find_attr(*c.proto, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : dflt;
  }

  // --- per-operator normalization; each returns the node's attributes and may rewrite inputs --
  Attrs conv(Ctx& c, bool transpose);
  Attrs pool(Ctx& c, bool is_max);
  Attrs recurrent(Ctx& c);  // LSTM and GRU
  Attrs normalize(Ctx& c);
  /// Sets pads for auto_pad = SAME_UPPER/SAME_LOWER/VALID given output sizes.
  std::vector<int64_t> resolve_pads(const Ctx& c, const std::vector<int64_t>& in_sizes,
                                    const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& strides,
                                    const std::vector<int64_t>& dilations) const;

  /// Pow(x, 2) with a constant float32 scalar exponent and x's shape and dtype as its output's.
  bool is_constant_square(const Ctx& c) const {
    if (c.inputs.size() != 2 || c.inputs[1] == kNoValue) return false;
    const Value& x = g_.value(c.inputs[0]);
    const Value& e = g_.value(c.inputs[1]);
    const Value& y = g_.value(values_.at(c.proto->output(0)));
    return e.is_constant() && e.num_elements() == 1 &&
           runtime::dtype_equal(e.dtype, runtime::kFloat32) && e.data->data<float>()[0] == 2.0f &&
           runtime::dtype_equal(x.dtype, runtime::kFloat32) && y.shape == x.shape;
  }
  /// Evaluates the node if it can be (returns true and defines its output as a constant).
  bool try_fold(const Ctx& c);
  /// ConstantOfShape and Range, whose inputs decide the output's shape: computed at import into a
  /// constant; an error naming the node and the input when an input is not a constant.
  void generate(const Ctx& c);
  /// The inputs that are parameters Kiln needs at compile time (Expand's shape, Tile's repeats,
  /// Split's sizes, a reduction's axes): an error naming the node and the input when one is not
  /// a constant, before shape inference (which would give no static shape).
  void require_constant_inputs(const Ctx& c) const;
  /// The static shape ONNX shape inference gives the node's first output, if it gives one.
  bool inferred_static_shape(const Ctx& c, std::vector<int64_t>* shape);

  void define(const std::string& name, ValueId v) { values_[name] = v; }
  ValueId output_value(const NodeProto& n, int i);
  void set_type(ValueId v, const std::string& name, const std::string& where);
  /// Types the node's outputs by ONNX shape inference (into types_).
  void infer(const Ctx& c);
  /// A graph input that also has an initializer: an input with that default value.
  void add_input_with_default(const onnx::ValueInfoProto& input, const TensorProto& init);

  std::string origin_;
  int64_t opset_;
  Graph g_;
  std::unordered_map<std::string, ValueId> values_;
  /// The types the file declares (graph inputs, value_info, graph outputs), then the inferred
  /// ones merged in, by ONNX name.
  std::unordered_map<std::string, onnx::TypeProto> types_;
  ShapeInference inference_;
};

void Importer::set_type(ValueId v, const std::string& name, const std::string& where) {
  auto it = types_.find(name);
  KILN_USER_CHECK(it != types_.end() && it->second.has_tensor_type() &&
                  it->second.tensor_type().has_shape())
      << "'" << origin_ << "': ONNX shape inference gave no static shape for '" << name << "' ("
      << where << ")";
  const auto& tt = it->second.tensor_type();
  Value& val = g_.value(v);
  KILN_USER_CHECK(onnx_dtype(tt.elem_type(), &val.dtype))
      << "'" << origin_ << "': '" << name << "' (" << where << ") has element type "
      << onnx_dtype_name(tt.elem_type()) << ", which Kiln does not support";
  val.shape.clear();
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    KILN_USER_CHECK(dim.has_dim_value() && dim.dim_value() >= 0)
        << "'" << origin_ << "': '" << name << "' (" << where << ") has a dynamic dimension " << d
        << (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : std::string())
        << "; Kiln needs static shapes";
    val.shape.push_back(dim.dim_value());
  }
  val.typed = true;
}

void Importer::infer(const Ctx& c) {
  const NodeProto& n = *c.proto;
  std::vector<const Value*> inputs;
  for (ValueId v : c.inputs) inputs.push_back(v == kNoValue ? nullptr : &g_.value(v));
  std::vector<const onnx::TypeProto*> declared;
  for (const std::string& o : n.output()) {
    auto it = types_.find(o);
    declared.push_back(o.empty() || it == types_.end() ? nullptr : &it->second);
  }
  std::vector<onnx::TypeProto> types = inference_.infer(n, inputs, declared);
  if (n.op_type() == "Einsum") {
    // libonnx 1.12 infers only an Einsum's rank: its sizes come from the equation (validated).
    std::vector<std::vector<int64_t>> shapes;
    for (const Value* v : inputs) shapes.push_back(v->shape);
    auto* shape = types[0].mutable_tensor_type()->mutable_shape();
    shape->Clear();
    for (int64_t d : topi::einsum_shape(attr_s(c, "equation", ""), shapes))
      shape->add_dim()->set_dim_value(d);
  }
  for (int i = 0; i < n.output_size(); ++i) {
    if (!n.output(i).empty()) types_[n.output(i)] = std::move(types[static_cast<size_t>(i)]);
  }
}

void Importer::add_input_with_default(const onnx::ValueInfoProto& input, const TensorProto& init) {
  const std::string where = "'" + origin_ + "': graph input '" + input.name() + "'";
  auto data = std::make_shared<const runtime::NDArray>(
      tensor_to_ndarray(init, where + " (its initializer)"));
  const auto& tt = input.type().tensor_type();
  KILN_USER_CHECK(input.type().has_tensor_type() && tt.elem_type() == onnx_elem_type(data->dtype()))
      << where << " is declared " << onnx_dtype_name(tt.elem_type())
      << ", but its initializer (the default value) is "
      << onnx_dtype_name(onnx_elem_type(data->dtype()));
  if (tt.has_shape()) {
    bool same = tt.shape().dim_size() == data->ndim();
    for (int d = 0; same && d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      same = !dim.has_dim_value() || dim.dim_value() == data->shape()[static_cast<size_t>(d)];
    }
    std::string declared = "[";
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      declared += (d ? "," : "") + (dim.has_dim_value()       ? std::to_string(dim.dim_value())
                                    : dim.dim_param().empty() ? "?"
                                                              : dim.dim_param());
    }
    declared += "]";
    KILN_USER_CHECK(same) << where << " is declared with shape " << declared
                          << ", but its initializer (the default value) has shape "
                          << data->shape_string();
  }
  // The input has the default's static shape, also where the declaration leaves a dimension open.
  onnx::TypeProto& type = types_[input.name()];
  type.mutable_tensor_type()->set_elem_type(onnx_elem_type(data->dtype()));
  auto* shape = type.mutable_tensor_type()->mutable_shape();
  shape->clear_dim();
  for (int64_t d : data->shape()) shape->add_dim()->set_dim_value(d);
  define(input.name(), g_.add_input_with_default(input.name(), std::move(data)));
}

ValueId Importer::output_value(const NodeProto& n, int i) {
  const std::string& name = n.output(i);
  ValueId v = g_.add_untyped_value(name);
  set_type(v, name, "output of node '" + n.name() + "' (" + n.op_type() + ")");
  define(name, v);
  return v;
}

std::vector<int64_t> Importer::resolve_pads(const Ctx& c, const std::vector<int64_t>& in_sizes,
                                            const std::vector<int64_t>& kernel,
                                            const std::vector<int64_t>& strides,
                                            const std::vector<int64_t>& dilations) const {
  std::vector<int64_t> extent;
  for (size_t i = 0; i < kernel.size(); ++i) extent.push_back((kernel[i] - 1) * dilations[i] + 1);
  return window_pads(attr_s(c, "auto_pad", "NOTSET"),
                     attr_ints(c, "pads", std::vector<int64_t>(2 * kernel.size(), 0)), in_sizes,
                     extent, strides);
}

Attrs Importer::conv(Ctx& c, bool transpose) {
  const Value& w = in_value(c, 1);
  const Value& x = in_value(c, 0);
  const size_t k = w.shape.size() - 2;
  const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  const std::vector<int64_t> ones(k, 1);
  Attrs a;
  a["kernel_shape"] = kernel;
  a["strides"] = attr_ints(c, "strides", ones);
  a["dilations"] = attr_ints(c, "dilations", ones);
  a["group"] = attr_i(c, "group", 1);
  const auto& strides = std::get<std::vector<int64_t>>(a["strides"]);
  const auto& dil = std::get<std::vector<int64_t>>(a["dilations"]);
  std::vector<int64_t> in_sizes(x.shape.begin() + 2, x.shape.end());
  if (!transpose) {
    a["pads"] = resolve_pads(c, in_sizes, kernel, strides, dil);
    return a;
  }
  // ConvTranspose: out = stride*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end. With
  // auto_pad SAME or output_shape, solve for the pads from the inferred output shape.
  std::vector<int64_t> out_pad = attr_ints(c, "output_padding", std::vector<int64_t>(k, 0));
  a["output_padding"] = out_pad;
  const std::string auto_pad = attr_s(c, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" && !find_attr(*c.proto, "output_shape")) {
    a["pads"] = attr_ints(c, "pads", std::vector<int64_t>(2 * k, 0));
    return a;
  }
  const Value& y = first_output(c);
  std::vector<int64_t> pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i) {
    const int64_t total =
        strides[i] * (in_sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - y.shape[i + 2];
    if (total < 0) {  // output_shape asks for more than the kernel covers: extra rows at the end
      out_pad[i] -= total;
      continue;
    }
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[i + k] = auto_pad == "SAME_UPPER" ? large : small;
  }
  a["pads"] = pads;
  a["output_padding"] = out_pad;
  return a;
}

Attrs Importer::pool(Ctx& c, bool is_max) {
  const Value& x = in_value(c, 0);
  const size_t k = x.shape.size() - 2;
  const std::vector<int64_t> ones(k, 1);
  Attrs a;
  const std::vector<int64_t> kernel = attr_ints(c, "kernel_shape", {});
  a["kernel_shape"] = kernel;
  a["strides"] = attr_ints(c, "strides", ones);
  a["dilations"] = attr_ints(c, "dilations", ones);
  a["ceil_mode"] = attr_i(c, "ceil_mode", 0);
  if (!is_max) a["count_include_pad"] = attr_i(c, "count_include_pad", 0);
  const auto& strides = std::get<std::vector<int64_t>>(a["strides"]);
  const auto& dil = std::get<std::vector<int64_t>>(a["dilations"]);
  a["pads"] = resolve_pads(c, std::vector<int64_t>(x.shape.begin() + 2, x.shape.end()), kernel,
                           strides, dil);
  return a;
}

Attrs Importer::recurrent(Ctx& c) {
  const bool gru = c.proto->op_type() == "GRU";
  const int64_t gates = gru ? 3 : 4, acts = gru ? 2 : 3;
  const Value& w = in_value(c, 1);  // [num_directions, gates*hidden, input_size]
  Attrs a;
  a["direction"] = attr_s(c, "direction", "forward");
  a["hidden_size"] = attr_i(c, "hidden_size", w.shape[1] / gates);
  if (gru) {
    a["linear_before_reset"] = attr_i(c, "linear_before_reset", 0);
  } else {
    a["input_forget"] = attr_i(c, "input_forget", 0);
  }
  a["layout"] = attr_i(c, "layout", 0);
  if (const AttributeProto* clip = find_attr(*c.proto, "clip")) a["clip"] = clip->f();
  if (const AttributeProto* act = find_attr(*c.proto, "activations")) {
    for (int i = 0; i < act->strings_size(); ++i) {
      const char* expect = i % acts == 0 ? "Sigmoid" : "Tanh";
      if (act->strings(i) != expect) {
        fail(c, gru ? "only the default activations (Sigmoid, Tanh) are supported"
                    : "only the default activations (Sigmoid, Tanh, Tanh) are supported");
      }
    }
  }
  if (find_attr(*c.proto, "activation_alpha") || find_attr(*c.proto, "activation_beta")) {
    fail(c, "activation_alpha/activation_beta are not supported");
  }
  return a;
}

Attrs Importer::normalize(Ctx& c) {
  const std::string& op = c.proto->op_type();
  Attrs a;
  if (op == "Conv") return conv(c, false);
  if (op == "ConvTranspose") return conv(c, true);
  if (op == "MaxPool" || op == "AveragePool") {
    if (op == "MaxPool" && c.proto->output_size() > 1 && !c.proto->output(1).empty()) {
      fail(c, "the Indices output of MaxPool is not supported");
    }
    return pool(c, op == "MaxPool");
  }
  if (op == "LSTM" || op == "GRU") return recurrent(c);
  if (op == "Gemm") {
    a["alpha"] = attr_f(c, "alpha", 1.0f);
    a["beta"] = attr_f(c, "beta", 1.0f);
    a["transA"] = attr_i(c, "transA", 0);
    a["transB"] = attr_i(c, "transB", 0);
  } else if (op == "BatchNormalization") {
    if (attr_i(c, "training_mode", 0) != 0) fail(c, "training_mode=1 is not supported");
    for (int i = 1; i < c.proto->output_size(); ++i) {
      if (!c.proto->output(i).empty()) fail(c, "only the first output (Y) is supported");
    }
    a["epsilon"] = attr_f(c, "epsilon", 1e-5f);
  } else if (op == "LeakyRelu") {
    a["alpha"] = attr_f(c, "alpha", 0.01f);
  } else if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    // The axis of a per-axis (1-D) scale, 0 for a per-tensor one; validate_node checked it.
    const bool per_axis = in_rank(c, 1) == 1;
    a["axis"] = per_axis ? norm_axis(attr_i(c, "axis", 1), in_rank(c, 0)) : int64_t{0};
  } else if (op == "Clip") {
    a["min"] = const_float(c, 1, "min", -std::numeric_limits<float>::infinity());
    a["max"] = const_float(c, 2, "max", std::numeric_limits<float>::infinity());
    c.inputs.resize(1);
  } else if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    const int64_t rank = in_rank(c, 0);
    const int64_t axis = norm_axis(attr_i(c, "axis", opset_ < 13 ? 1 : -1), rank);
    if (opset_ < 13 && axis != rank - 1) {
      // Before opset 13 the input is flattened to 2-D at `axis`; the same thing unless the axis is
      // the last one or all later dimensions are 1.
      const auto& s = in_value(c, 0).shape;
      for (int64_t d = axis + 1; d < rank; ++d) {
        if (s[static_cast<size_t>(d)] != 1) {
          fail(c, "opset " + std::to_string(opset_) +
                      " semantics (softmax over all dimensions from axis " + std::to_string(axis) +
                      " on) are not supported; re-export with opset 13 or later");
        }
      }
    }
    a["axis"] = axis;
  } else if (op == "Concat") {
    a["axis"] = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0));
  } else if (op == "Reshape") {
    // validate_node checked a constant shape; where the shape is computed and the output's type
    // comes from the file's declaration, the element counts are checked here.
    const Value& y = first_output(c);
    if (y.num_elements() != in_value(c, 0).num_elements()) {
      fail(c, "input 1 ('" + c.proto->input(1) + "') makes the output " + y.type_string() + " (" +
                  std::to_string(y.num_elements()) + " elements), but input 0 ('" +
                  c.proto->input(0) + "') is " + in_value(c, 0).type_string() + " (" +
                  std::to_string(in_value(c, 0).num_elements()) + " elements)");
    }
    a["shape"] = y.shape;
    c.inputs.resize(1);
  } else if (op == "Flatten") {
    a["axis"] = norm_axis(attr_i(c, "axis", 1), in_rank(c, 0));
  } else if (op == "Transpose") {
    const int64_t rank = in_rank(c, 0);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
    a["perm"] = attr_ints(c, "perm", perm);
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    std::vector<int64_t> axes;
    const bool have = opset_ < 13 ? find_attr(*c.proto, "axes") != nullptr : in(c, 1) != kNoValue;
    if (have) axes = opset_ < 13 ? attr_ints(c, "axes", {}) : const_ints(c, 1, "axes");
    const int64_t rank = op == "Squeeze" ? in_rank(c, 0) : in_rank(c, 0) + int64_t(axes.size());
    if (op == "Squeeze" && !have) {
      const auto& s = in_value(c, 0).shape;
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] == 1) axes.push_back(static_cast<int64_t>(d));
      }
    }
    for (int64_t& ax : axes) ax = norm_axis(ax, rank);
    std::sort(axes.begin(), axes.end());
    a["axes"] = axes;
    c.inputs.resize(1);
  } else if (op == "Pad") {
    const int64_t rank = in_rank(c, 0);
    a["mode"] = attr_s(c, "mode", "constant");
    std::vector<int64_t> given = const_ints(c, 1, "pads");
    std::vector<int64_t> axes;
    if (in(c, 3) != kNoValue) {
      axes = const_ints(c, 3, "axes");
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t ax = norm_axis(axes[i], rank);
      pads[static_cast<size_t>(ax)] = given[i];
      pads[static_cast<size_t>(ax + rank)] = given[i + axes.size()];
    }
    a["pads"] = pads;
    a["value"] = const_float(c, 2, "constant_value", 0.0f);
    c.inputs.resize(1);
  } else if (op == "Slice") {
    const auto& shape = in_value(c, 0).shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    const std::vector<int64_t> starts = const_ints(c, 1, "starts");
    const std::vector<int64_t> ends = const_ints(c, 2, "ends");
    std::vector<int64_t> axes, steps;
    if (in(c, 3) != kNoValue) {
      axes = const_ints(c, 3, "axes");
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    steps =
        in(c, 4) != kNoValue ? const_ints(c, 4, "steps") : std::vector<int64_t>(starts.size(), 1);
    // Normalized to every axis: start and end clamped as ONNX specifies, step non-zero.
    std::vector<int64_t> s(static_cast<size_t>(rank), 0), e(shape.begin(), shape.end()),
        st(static_cast<size_t>(rank), 1), all_axes;
    for (int64_t i = 0; i < rank; ++i) all_axes.push_back(i);
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t ax = static_cast<size_t>(norm_axis(axes[i], rank));
      const int64_t dim = shape[ax], step = steps[i];
      auto clamp = [&](int64_t v, bool is_end) {
        if (v < 0) v += dim;
        if (step > 0) return std::clamp<int64_t>(v, 0, dim);
        return std::clamp<int64_t>(v, is_end ? -1 : 0, dim - 1);
      };
      s[ax] = clamp(starts[i], false);
      e[ax] = clamp(ends[i], true);
      st[ax] = step;
    }
    a["starts"] = s;
    a["ends"] = e;
    a["axes"] = all_axes;
    a["steps"] = st;
    c.inputs.resize(1);
  } else if (op == "Cast") {
    const int64_t to = attr_i(c, "to", 0);
    KilnDType t;
    if (!onnx_dtype(static_cast<int>(to), &t))
      fail(c, "cannot cast to " + onnx_dtype_name(int(to)));
    a["to"] = runtime::dtype_to_string(t);
  } else if (op == "Gather") {  // (constant data and indices were folded already)
    a["axis"] = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0));
  } else if (is_reduction(op)) {
    const int64_t rank = in_rank(c, 0);
    std::vector<int64_t> axes;
    if (axes_is_input(op, opset_)) {
      if (in(c, 1) != kNoValue) axes = const_ints(c, 1, "axes");
      a["noop"] = int64_t{attr_i(c, "noop_with_empty_axes", 0) != 0 && axes.empty() ? 1 : 0};
    } else {
      axes = attr_ints(c, "axes", {});
      a["noop"] = int64_t{0};
    }
    for (int64_t& ax : axes) ax = norm_axis(ax, rank);
    std::sort(axes.begin(), axes.end());
    a["axes"] = axes;  // empty: every axis
    a["keepdims"] = attr_i(c, "keepdims", 1);
    c.inputs.resize(1);
  } else if (op == "ArgMax" || op == "ArgMin") {
    a["axis"] = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0));
    a["keepdims"] = attr_i(c, "keepdims", 1);
    a["select_last_index"] = attr_i(c, "select_last_index", 0);
  } else if (op == "HardSigmoid") {
    a["alpha"] = attr_f(c, "alpha", 0.2f);
    a["beta"] = attr_f(c, "beta", 0.5f);
  } else if (op == "Elu") {
    a["alpha"] = attr_f(c, "alpha", 1.0f);
  } else if (op == "Selu") {
    a["alpha"] = attr_f(c, "alpha", 1.67326319217681884765625f);
    a["gamma"] = attr_f(c, "gamma", 1.05070102214813232421875f);
  } else if (op == "Split") {
    // The sizes are those inference gave the outputs (validate_node checked the forms).
    const int64_t axis = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0));
    std::vector<int64_t> sizes;
    for (int i = 0; i < c.proto->output_size(); ++i) {
      if (c.proto->output(i).empty()) fail(c, "output " + std::to_string(i) + " is unnamed");
      sizes.push_back(g_.value(values_.at(c.proto->output(i))).shape.at(static_cast<size_t>(axis)));
    }
    a["axis"] = axis;
    a["split"] = sizes;
    c.inputs.resize(1);
  } else if (op == "Expand") {
    c.inputs.resize(1);  // the output's shape is the broadcast of the two
  } else if (op == "GatherElements") {
    a["axis"] = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0));
  } else if (op == "Einsum") {
    a["equation"] = attr_s(c, "equation", "");
  } else if (op == "CumSum") {
    const std::vector<int64_t> axis = const_ints(c, 1, "axis");
    a["axis"] = norm_axis(axis.at(0), in_rank(c, 0));
    a["exclusive"] = attr_i(c, "exclusive", 0);
    a["reverse"] = attr_i(c, "reverse", 0);
    c.inputs.resize(1);
  } else if (op == "Trilu") {
    int64_t k = 0;
    if (in(c, 1) != kNoValue) k = const_ints(c, 1, "k").at(0);
    a["k"] = k;
    a["upper"] = attr_i(c, "upper", 1);
    c.inputs.resize(1);
  } else if (op == "Mod") {
    a["fmod"] = attr_i(c, "fmod", 0);
  } else if (op == "InstanceNormalization") {
    a["epsilon"] = attr_f(c, "epsilon", 1e-5f);
  } else if (op == "Celu") {
    a["alpha"] = attr_f(c, "alpha", 1.0f);
  } else if (op == "ThresholdedRelu") {
    a["alpha"] = attr_f(c, "alpha", 1.0f);
  } else if (op == "Shrink") {
    a["lambd"] = attr_f(c, "lambd", 0.5f);
    a["bias"] = attr_f(c, "bias", 0.0f);
  } else if (op == "CastLike") {  // a Cast to input 1's element type
    a["to"] = runtime::dtype_to_string(in_value(c, 1).dtype);
    c.inputs.resize(1);
  } else if (op == "LayerNormalization") {
    a["axis"] = norm_axis(attr_i(c, "axis", -1), in_rank(c, 0));
    a["epsilon"] = attr_f(c, "epsilon", 1e-5f);
    if (attr_i(c, "stash_type", 1) != 1) {
      fail(c, "stash_type=" + std::to_string(attr_i(c, "stash_type", 1)) +
                  " is not supported (only 1: statistics in float32)");
    }
  } else if (op == "Tile") {
    a["repeats"] = const_ints(c, 1, "repeats");
    c.inputs.resize(1);
  } else if (op == "Resize") {
    std::vector<const Value*> values;
    for (ValueId v : c.inputs) values.push_back(v == kNoValue ? nullptr : &g_.value(v));
    std::vector<int64_t> out;
    std::vector<float> scales;
    if (!resize_form(*c.proto, values, &out, &scales)) {
      fail(c, "input 'scales' or 'sizes' must be a constant: Kiln needs static shapes");
    }
    a["scales"] = scales;
    a["mode"] = attr_s(c, "mode", "nearest");
    a["coordinate_transformation_mode"] = attr_s(c, "coordinate_transformation_mode", "half_pixel");
    a["nearest_mode"] = attr_s(c, "nearest_mode", "round_prefer_floor");
    a["cubic_coeff_a"] = attr_f(c, "cubic_coeff_a", -0.75f);
    a["exclude_outside"] = attr_i(c, "exclude_outside", 0);
    c.inputs.resize(1);
  }
  // Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg, Add, Sub, Mul, Div, Pow, Max, Min, MatMul,
  // GlobalAveragePool, GlobalMaxPool: no attributes.
  return a;
}

bool Importer::try_fold(const Ctx& c) {
  const std::string& op = c.proto->op_type();
  const std::string& out_name = c.proto->output(0);
  if (out_name.empty()) return false;
  if (op == "Shape") {
    const auto& s = in_value(c, 0).shape;
    const int64_t rank = static_cast<int64_t>(s.size());
    int64_t start = attr_i(c, "start", 0), end = attr_i(c, "end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    std::vector<int64_t> dims(s.begin() + start, s.begin() + end);
    define(out_name, g_.add_constant(out_name, runtime::NDArray::from_vector(
                                                   dims, {static_cast<int64_t>(dims.size())})));
    return true;
  }
  if (op == "Size") {
    const int64_t count = in_value(c, 0).num_elements();
    define(out_name, g_.add_constant(
                         out_name, runtime::NDArray::from_vector(std::vector<int64_t>{count}, {})));
    return true;
  }
  {
    // Shape arithmetic on small integer constants (a rank computed from Shape and Size, a
    // negative axis made positive, a patch count divided out of an image size): folded here, so
    // that ConstantOfShape, Reshape, Resize and the like see constants.
    std::vector<const runtime::NDArray*> args;
    bool all_constant = true;
    for (ValueId v : c.inputs) {
      if (v != kNoValue && !g_.value(v).is_constant()) all_constant = false;
      args.push_back(v == kNoValue ? nullptr : g_.value(v).data.get());
    }
    Value& ov = g_.value(values_.at(out_name));
    runtime::NDArray folded;
    if (all_constant && fold_shape_arithmetic(*c.proto, args, ov, &folded)) {
      ov.data = std::make_shared<const runtime::NDArray>(std::move(folded));
      return true;
    }
  }
  static const std::set<std::string> kFoldable = {"Cast",    "Concat",  "Flatten",  "Gather",
                                                  "Reshape", "Squeeze", "Unsqueeze"};
  if (!kFoldable.count(op)) return false;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i] != kNoValue && !g_.value(c.inputs[i]).is_constant()) return false;
  }
  if (in(c, 0) == kNoValue) return false;
  const ValueId out = values_.at(out_name);
  Value& ov = g_.value(out);
  const runtime::NDArray& x = *g_.value(c.inputs[0]).data;
  // What inference says must agree with the data before any byte is copied.
  auto check = [&](bool ok) {
    if (!ok) fail(c, "the inferred output " + ov.type_string() + " does not match the inputs");
  };
  if (op != "Cast") check(runtime::dtype_equal(x.dtype(), ov.dtype));
  if (op != "Gather" && op != "Concat") check(ov.num_elements() == x.num_elements());
  runtime::NDArray result = runtime::NDArray::empty(ov.shape, ov.dtype);
  const int64_t elem = runtime::dtype_bytes(ov.dtype);
  char* dst = static_cast<char*>(result.data());
  if (op == "Cast") {
    // Through double: exact for every integer Kiln meets in shape arithmetic and for float32.
    const KilnDType t = ov.dtype;
    if (t.code == kKilnFloat && t.bits == 16) return false;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      const double v = element_as_double(x, i);
      char* p = dst + i * elem;
      if (t.code == kKilnFloat && t.bits == 32) {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
      } else if (t.code == kKilnFloat) {
        std::memcpy(p, &v, 8);
      } else if (t.bits == 1) {
        *p = v != 0.0;
      } else {
        const int64_t iv = static_cast<int64_t>(v);
        std::memcpy(p, &iv, static_cast<size_t>(elem));  // little-endian narrowing
      }
    }
  } else if (op == "Gather" || op == "Concat") {
    const int64_t rank = static_cast<int64_t>(ov.shape.size());
    const int64_t axis = norm_axis(attr_i(c, "axis", 0), op == "Gather" ? x.ndim() : rank);
    // Every array viewed as [outer, axis, inner]; copy rows of `inner` elements.
    auto inner_of = [&](const std::vector<int64_t>& s) {
      int64_t n = 1;
      for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) n *= s[d];
      return n;
    };
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
    if (op == "Gather") {
      const int64_t inner = inner_of(x.shape()), dim = x.shape()[static_cast<size_t>(axis)];
      const std::vector<int64_t> idx = const_ints(c, 1, "indices");
      check(outer * static_cast<int64_t>(idx.size()) * inner == ov.num_elements());
      const auto* src = static_cast<const char*>(x.data());
      char* p = dst;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j : idx) {
          if (j < -dim || j >= dim) fail(c, "index " + std::to_string(j) + " is out of range");
          if (j < 0) j += dim;
          const size_t row = static_cast<size_t>(inner * elem);
          std::memcpy(p, src + ((o * dim + j) * inner) * elem, row);
          p += row;
        }
      }
    } else {
      int64_t total = 0;
      for (ValueId v : c.inputs) {
        const runtime::NDArray& in_arr = *g_.value(v).data;
        check(in_arr.ndim() == rank && runtime::dtype_equal(in_arr.dtype(), ov.dtype));
        for (int64_t d = 0; d < rank; ++d) {
          check(d == axis ||
                in_arr.shape()[static_cast<size_t>(d)] == ov.shape[static_cast<size_t>(d)]);
        }
        total += in_arr.num_elements();
      }
      check(total == ov.num_elements());
      char* p = dst;
      for (int64_t o = 0; o < outer; ++o) {
        for (ValueId v : c.inputs) {
          const runtime::NDArray& in_arr = *g_.value(v).data;
          const int64_t chunk =
              in_arr.shape()[static_cast<size_t>(axis)] * inner_of(in_arr.shape());
          std::memcpy(p, static_cast<const char*>(in_arr.data()) + o * chunk * elem,
                      static_cast<size_t>(chunk * elem));
          p += chunk * elem;
        }
      }
    }
  } else {  // Reshape, Flatten, Squeeze, Unsqueeze: the same bytes, the inferred shape
    if (x.nbytes()) std::memcpy(dst, x.data(), static_cast<size_t>(x.nbytes()));
  }
  ov.data = std::make_shared<const runtime::NDArray>(std::move(result));
  return true;
}

void Importer::require_constant_inputs(const Ctx& c) const {
  const std::string& op = c.proto->op_type();
  if (op == "Expand") need_constant(c, 1, "shape");
  if (op == "Tile") need_constant(c, 1, "repeats");
  if (op == "Trilu" && in(c, 1) != kNoValue) need_constant(c, 1, "k");
  if (op == "CumSum") need_constant(c, 1, "axis");
  if (op == "Split" && in(c, 1) != kNoValue) need_constant(c, 1, "split");
  if (is_reduction(op) && axes_is_input(op, opset_) && in(c, 1) != kNoValue) {
    need_constant(c, 1, "axes");
  }
}

bool Importer::inferred_static_shape(const Ctx& c, std::vector<int64_t>* shape) {
  infer(c);
  auto it = types_.find(c.proto->output(0));
  if (it == types_.end() || !it->second.has_tensor_type() ||
      !it->second.tensor_type().has_shape()) {
    return false;
  }
  shape->clear();
  for (const auto& dim : it->second.tensor_type().shape().dim()) {
    if (!dim.has_dim_value() || dim.dim_value() < 0) return false;
    shape->push_back(dim.dim_value());
  }
  return true;
}

void Importer::generate(const Ctx& c) {
  const std::string& op = c.proto->op_type();
  const std::string& out_name = c.proto->output(0);
  runtime::NDArray data;
  if (op == "ConstantOfShape") {
    std::vector<int64_t> shape;
    if (const_input(c, 0) != nullptr) {
      shape = const_ints(c, 0, "input");
    } else {
      // A shape computed from other shapes (Shape -> Slice -> Sub ...): ONNX's data propagation
      // may know it; otherwise the output has no static shape and the node is refused.
      if (!inferred_static_shape(c, &shape)) {
        fail(c,
             "input 'input' must be a constant (or a shape computed from static shapes): "
             "Kiln needs static shapes");
      }
    }
    for (int64_t d : shape) {
      if (d < 0) fail(c, "input 'input' holds a negative dimension " + std::to_string(d));
    }
    runtime::NDArray value = runtime::NDArray::from_vector(std::vector<float>{0.0f}, {1});
    if (const AttributeProto* v = find_attr(*c.proto, "value")) {
      value = tensor_to_ndarray(v->t(), "'" + origin_ + "': " + c.where + " attribute 'value'");
    }
    data = runtime::NDArray::empty(shape, value.dtype());
    const int64_t elem = runtime::dtype_bytes(value.dtype());
    auto* dst = static_cast<char*>(data.data());
    for (int64_t i = 0; i < data.num_elements(); ++i) {
      std::memcpy(dst + i * elem, value.data(), static_cast<size_t>(elem));
    }
  } else {  // Range
    double v[3];
    const char* names[3] = {"start", "limit", "delta"};
    KilnDType t{};
    for (size_t i = 0; i < 3; ++i) {
      const runtime::NDArray& a = need_constant(c, i, names[i]);
      if (a.num_elements() != 1) fail(c, std::string("input '") + names[i] + "' must be a scalar");
      v[i] = element_as_double(a, 0);
      t = a.dtype();
    }
    if (v[2] == 0.0) fail(c, "input 'delta' is 0");
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((v[1] - v[0]) / v[2])));
    if (n > (int64_t{1} << 31)) fail(c, "the range has " + std::to_string(n) + " elements");
    data = runtime::NDArray::empty({n}, t);
    const int64_t elem = runtime::dtype_bytes(t);
    auto* dst = static_cast<char*>(data.data());
    for (int64_t i = 0; i < n; ++i) {
      const double x = v[0] + static_cast<double>(i) * v[2];
      char* p = dst + i * elem;
      if (t.code == kKilnFloat && t.bits == 32) {
        const float f = static_cast<float>(x);
        std::memcpy(p, &f, 4);
      } else if (t.code == kKilnFloat && t.bits == 64) {
        std::memcpy(p, &x, 8);
      } else if (t.code == kKilnInt) {
        const int64_t iv = static_cast<int64_t>(x);
        std::memcpy(p, &iv, static_cast<size_t>(elem));  // little-endian narrowing
      } else {
        fail(c, "Range of " + runtime::dtype_to_string(t) + " is not supported");
      }
    }
  }
  define(out_name, g_.add_constant(out_name, std::move(data)));
}

Graph Importer::run(const onnx::ModelProto& model) {
  const onnx::GraphProto& graph = model.graph();
  std::map<std::string, const TensorProto*> initializers;
  for (const TensorProto& t : graph.initializer()) initializers[t.name()] = &t;
  for (const auto& vi : graph.value_info()) types_[vi.name()] = vi.type();
  for (const auto& vi : graph.output()) types_[vi.name()] = vi.type();
  for (const auto& vi : graph.input()) types_[vi.name()] = vi.type();

  // Before IR version 4 every initializer had to be a graph input too: those are constants.
  const bool defaults = model.ir_version() >= 4;
  for (const TensorProto& t : graph.initializer()) {
    const bool input = std::any_of(graph.input().begin(), graph.input().end(),
                                   [&](const auto& vi) { return vi.name() == t.name(); });
    if (input && defaults) continue;
    define(t.name(),
           g_.add_constant(t.name(), tensor_to_ndarray(
                                         t, "'" + origin_ + "': initializer '" + t.name() + "'")));
  }
  for (const auto& input : graph.input()) {
    auto init = initializers.find(input.name());
    if (init != initializers.end()) {
      if (defaults) add_input_with_default(input, *init->second);
      continue;
    }
    const ValueId v = g_.add_input(input.name(), runtime::kFloat32, {});
    set_type(v, input.name(), "graph input");
    define(input.name(), v);
  }

  for (const NodeProto& original : graph.node()) {
    // Upsample (opset 9, deprecated since 10) is the Resize it became: asymmetric coordinates,
    // nearest rounding down, an empty roi.
    NodeProto as_resize;
    if (original.op_type() == "Upsample") {
      as_resize.set_name(original.name());
      as_resize.set_op_type("Resize");
      as_resize.add_input(original.input_size() > 0 ? original.input(0) : "");
      const std::string roi = original.name() + "/kiln_empty_roi";
      define(roi, g_.add_constant(roi, runtime::NDArray::from_vector(std::vector<float>{}, {0})));
      as_resize.add_input(roi);
      as_resize.add_input(original.input_size() > 1 ? original.input(1) : "");
      for (const std::string& o : original.output()) as_resize.add_output(o);
      std::string mode = "nearest";
      for (const AttributeProto& a : original.attribute()) {
        if (a.name() == "mode") mode = a.s();
        if (a.name() == "scales") {
          KILN_USER_ERROR() << "'" << origin_ << "': node '" << original.name()
                            << "' (Upsample): attribute 'scales' (Upsample before opset 9) is "
                               "not supported; re-export with opset 9 or later";
        }
      }
      auto set = [&](const std::string& name, const std::string& v) {
        AttributeProto* a = as_resize.add_attribute();
        a->set_name(name);
        a->set_type(AttributeProto::STRING);
        a->set_s(v);
      };
      set("mode", mode);
      set("coordinate_transformation_mode", "asymmetric");
      set("nearest_mode", "floor");
    }
    const NodeProto& n = original.op_type() == "Upsample" ? as_resize : original;
    Ctx c{&n, "node '" + n.name() + "' (" + n.op_type() + ")", {}};
    for (const std::string& name : n.input()) {
      if (name.empty()) {
        c.inputs.push_back(kNoValue);
        continue;
      }
      auto it = values_.find(name);
      if (it == values_.end()) {
        fail(c, "input '" + name + "' is not defined by a graph input, an initializer or an " +
                    "earlier node");
      }
      c.inputs.push_back(it->second);
    }
    if (std::all_of(n.output().begin(), n.output().end(),
                    [](const std::string& o) { return o.empty(); })) {
      fail(c, "the node has no (named) output");
    }
    std::vector<const Value*> input_values;
    for (ValueId v : c.inputs) input_values.push_back(v == kNoValue ? nullptr : &g_.value(v));
    validate_node(n, opset_, input_values, origin_);
    const std::string& op = n.op_type();
    if (op == "Constant") {
      const AttributeProto& attr = n.attribute(0);
      const std::string what = "'" + origin_ + "': " + c.where;
      runtime::NDArray data;
      if (attr.name() == "value") {
        data = tensor_to_ndarray(attr.t(), what);
      } else if (attr.name() == "value_float") {
        data = runtime::NDArray::from_vector(std::vector<float>{attr.f()}, {});
      } else if (attr.name() == "value_floats") {
        data = runtime::NDArray::from_vector(
            std::vector<float>(attr.floats().begin(), attr.floats().end()), {attr.floats_size()});
      } else if (attr.name() == "value_int") {
        data = runtime::NDArray::from_vector(std::vector<int64_t>{attr.i()}, {});
      } else if (attr.name() == "value_ints") {
        data = runtime::NDArray::from_vector(
            std::vector<int64_t>(attr.ints().begin(), attr.ints().end()), {attr.ints_size()});
      } else {
        fail(c, "Constant attribute '" + attr.name() + "' is not supported");
      }
      define(n.output(0), g_.add_constant(n.output(0), std::move(data)));
      continue;
    }
    if (op == "Identity" || op == "Dropout") {
      if (op == "Dropout" && in(c, 2) != kNoValue) {
        const runtime::NDArray* training = const_input(c, 2);
        if (training == nullptr) fail(c, "input 'training_mode' must be a constant");
        if (training->num_elements() != 1 || element_as_double(*training, 0) != 0.0) {
          fail(c, "training-mode Dropout is not supported");
        }
      }
      define(n.output(0), in(c, 0));  // an alias
      if (op == "Dropout" && n.output_size() > 1 && !n.output(1).empty()) {
        // In inference the mask keeps everything: a constant of trues.
        infer(c);
        const ValueId mask = output_value(n, 1);
        if (!runtime::dtype_equal(g_.value(mask).dtype, runtime::kBool))
          fail(c, "mask must be bool");
        runtime::NDArray ones = runtime::NDArray::empty(g_.value(mask).shape, g_.value(mask).dtype);
        std::memset(ones.data(), 1, static_cast<size_t>(ones.nbytes()));
        g_.value(mask).data = std::make_shared<const runtime::NDArray>(std::move(ones));
      }
      continue;
    }
    if ((op == "Shape" || op == "Size") && try_fold(c)) continue;
    if (op == "ConstantOfShape" || op == "Range") {
      generate(c);
      continue;
    }
    require_constant_inputs(c);
    infer(c);
    std::vector<ValueId> outs;
    for (int i = 0; i < n.output_size(); ++i) {
      outs.push_back(n.output(i).empty() ? kNoValue : output_value(n, i));
    }
    if (try_fold(c)) continue;
    if (op == "Pow" && is_constant_square(c)) {
      // x * x: the variance of a LayerNorm exported decomposed, Pow(x - mean, 2), where pow
      // would be a libm call per element.
      const std::string name =
          n.name().empty() ? "Pow_" + std::to_string(g_.nodes().size()) : n.name();
      g_.add_node(Node{"Mul", name, {c.inputs[0], c.inputs[0]}, {outs[0]}, {}});
      continue;
    }
    Attrs attrs = normalize(c);
    while (!outs.empty() && outs.back() == kNoValue) outs.pop_back();
    // A node name is unique in Kiln's graph even when the file leaves it empty.
    std::string name = n.name().empty() ? op + "_" + std::to_string(g_.nodes().size()) : n.name();
    g_.add_node(Node{op == "CastLike" ? "Cast" : op, std::move(name), std::move(c.inputs),
                     std::move(outs), std::move(attrs)});
  }

  for (const auto& out : graph.output()) {
    auto it = values_.find(out.name());
    KILN_USER_CHECK(it != values_.end())
        << "'" << origin_ << "': graph output '" << out.name() << "' is never defined";
    ValueId v = it->second;
    // Aliases (Identity, Dropout) may have made the output another value: a node's output is
    // renamed back to the output's name; a graph input, a constant, or a value already returned
    // under another name is copied by an Identity node, so every output is computed and named.
    const bool computed = g_.producer(v) >= 0;
    if (computed && (g_.value(v).name == out.name() || !g_.is_output(v))) {
      g_.value(v).name = out.name();
    } else {
      const Value& val = g_.value(v);
      v = g_.add_op("Identity", "return_" + out.name(), {v}, {}, val.dtype, val.shape);
      g_.value(v).name = out.name();
    }
    g_.add_output(v);
  }
  g_.remove_dead_nodes();
  g_.verify();
  return std::move(g_);
}

Graph import_model(onnx::ModelProto& model, const std::string& origin,
                   const OnnxImportOptions& options) {
  KILN_USER_CHECK(model.has_graph()) << "'" << origin << "' is not an ONNX model: it has no graph";
  bind_input_shapes(model, origin, options.input_shapes);
  bind_inputs(model, origin, options.constant_inputs);
  const int64_t opset = check_model(model, origin);
  expand_qlinear(model, origin);
  return Importer(model, origin, opset).run(model);
}

}  // namespace

const std::vector<std::string>& supported_onnx_ops() { return kSupported; }

std::pair<std::string, std::vector<int64_t>> parse_input_shape(const std::string& text) {
  const size_t eq = text.rfind('=');
  KILN_USER_CHECK(eq != std::string::npos && eq > 0)
      << "--input-shape needs NAME=D0,D1,... (such as x=1,3,224,224), got '" << text << "'";
  std::pair<std::string, std::vector<int64_t>> out{text.substr(0, eq), {}};
  const std::string dims = text.substr(eq + 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    if (comma == std::string::npos) comma = dims.size();
    const std::string item = dims.substr(pos, comma - pos);
    KILN_USER_CHECK(!item.empty() && item.size() <= 12 &&
                    item.find_first_not_of("0123456789") == std::string::npos &&
                    std::stoll(item) > 0)
        << "--input-shape '" << text << "': '" << item
        << "' is not a positive whole number (give NAME=D0,D1,..., such as x=1,3,224,224)";
    out.second.push_back(std::stoll(item));
    pos = comma + 1;
    KILN_USER_CHECK(comma == dims.size() || pos < dims.size())
        << "--input-shape '" << text << "' ends with a comma";
  }
  return out;
}

Graph import_onnx_bytes(const std::string& bytes, const std::string& origin,
                        const OnnxImportOptions& options) {
  onnx::ModelProto model;
  KILN_USER_CHECK(!bytes.empty()) << "cannot parse ONNX model '" << origin
                                  << "': the file is empty";
  KILN_USER_CHECK(model.ParseFromString(bytes))
      << "cannot parse ONNX model '" << origin << "': not a valid ModelProto (" << bytes.size()
      << " bytes; the file is truncated or not an ONNX model)";
  return import_model(model, origin, options);
}

Graph import_onnx(const std::string& path, const OnnxImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "cannot open ONNX model '" << path << "': " << std::strerror(errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  KILN_USER_CHECK(!in.bad()) << "cannot read ONNX model '" << path << "'";
  return import_onnx_bytes(ss.str(), path, options);
}

}  // namespace kiln::graph
