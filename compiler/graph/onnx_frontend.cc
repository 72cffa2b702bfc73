// ONNX ModelProto -> graph IR. import_model (at the end) is the script: check the model (opset,
// operators, static inputs, attributes libonnx divides by), rewrite opset-18 Pads for libonnx 1.12,
// run strict shape inference, then let an Importer walk the nodes in file order (ONNX requires
// topological order): each node is folded into a constant (try_fold), turned into an alias
// (Identity, Dropout) or emitted with normalized attributes (normalize). When a value has no
// static shape, the constants folded so far are baked into the model as initializers and shape
// inference runs again.
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

/// Normalizes a possibly negative axis against `rank`; kiln::Error naming `where` if out of range.
int64_t norm_axis(int64_t axis, int64_t rank, const std::string& where) {
  KILN_USER_CHECK(axis >= -rank && axis < rank)
      << where << ": axis " << axis << " is out of range for rank " << rank;
  return axis < 0 ? axis + rank : axis;
}

// The supported operators, sorted (std::binary_search looks them up).
// clang-format off
const std::vector<std::string> kSupported = {
    "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Constant",
    "Conv", "ConvTranspose", "Div", "Dropout", "Exp", "Flatten", "Gather", "Gemm",
    "GlobalAveragePool", "GlobalMaxPool", "Identity", "LSTM", "LeakyRelu", "Log", "LogSoftmax",
    "MatMul", "Max", "MaxPool", "Min", "Mul", "Neg", "Pad", "Pow", "Relu", "Reshape", "Shape",
    "Sigmoid", "Slice", "Softmax", "Sqrt", "Squeeze", "Sub", "Tanh", "Transpose", "Unsqueeze",
};
// clang-format on

/// A value ONNX shape inference left without a static type.
class MissingShape : public Error {
 public:
  using Error::Error;
};

/// The state of one import.
class Importer {
 public:
  Importer(std::string origin, int64_t opset) : origin_(std::move(origin)), opset_(opset) {}

  /// Builds the graph from a model that has been through shape inference. Throws MissingShape
  /// when a value has no static type, which folding constants may cure (see import_model).
  Graph run(const onnx::ModelProto& model);

  /// The constants found so far (initializers, Constant nodes, folded nodes), by ONNX name.
  const runtime::NDArray* constant(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end() || !g_.value(it->second).is_constant()) return nullptr;
    return g_.value(it->second).data.get();
  }

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
  /// An integer constant input (int32 or int64) as int64s; error if it is not a constant.
  std::vector<int64_t> const_ints(const Ctx& c, size_t i, const char* what) const {
    const runtime::NDArray* a = const_input(c, i);
    if (a == nullptr) fail(c, std::string("input '") + what + "' must be a constant");
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
    const runtime::NDArray* a = const_input(c, i);
    if (a == nullptr) fail(c, std::string("input '") + what + "' must be a constant");
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
  Attrs lstm(Ctx& c);
  Attrs normalize(Ctx& c);
  void check_positive(const Ctx& c, const std::vector<int64_t>& kernel,
                      const std::vector<int64_t>& strides,
                      const std::vector<int64_t>& dilations) const {
    for (size_t i = 0; i < kernel.size(); ++i) {
      if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0) {
        fail(c, "kernel_shape, strides and dilations must be positive");
      }
    }
  }
  /// Sets pads for auto_pad = SAME_UPPER/SAME_LOWER/VALID given output sizes.
  std::vector<int64_t> resolve_pads(const Ctx& c, const std::vector<int64_t>& in_sizes,
                                    const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& strides,
                                    const std::vector<int64_t>& dilations) const;

  /// Evaluates the node if it can be (returns true and defines its output as a constant).
  bool try_fold(const Ctx& c);

  void define(const std::string& name, ValueId v) { values_[name] = v; }
  ValueId output_value(const NodeProto& n, int i);
  void set_type(ValueId v, const std::string& name, const std::string& where);

  std::string origin_;
  int64_t opset_;
  Graph g_;
  std::unordered_map<std::string, ValueId> values_;
  std::unordered_map<std::string, const onnx::TypeProto*> types_;
};

void Importer::set_type(ValueId v, const std::string& name, const std::string& where) {
  auto it = types_.find(name);
  if (it == types_.end() || !it->second->has_tensor_type() ||
      !it->second->tensor_type().has_shape()) {
    throw MissingShape("error: '" + origin_ + "': ONNX shape inference gave no static shape for '" +
                       name + "' (" + where + ")");
  }
  const auto& tt = it->second->tensor_type();
  Value& val = g_.value(v);
  KILN_USER_CHECK(onnx_dtype(tt.elem_type(), &val.dtype))
      << "'" << origin_ << "': '" << name << "' (" << where << ") has element type "
      << onnx_dtype_name(tt.elem_type()) << ", which Kiln does not support";
  val.shape.clear();
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto& dim = tt.shape().dim(d);
    if (!dim.has_dim_value() || dim.dim_value() < 0) {
      throw MissingShape("error: '" + origin_ + "': '" + name + "' (" + where +
                         ") has a dynamic dimension " + std::to_string(d) +
                         (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : std::string()) +
                         "; Kiln needs static shapes");
    }
    val.shape.push_back(dim.dim_value());
  }
  val.typed = true;
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
  const size_t k = kernel.size();
  const std::string auto_pad = attr_s(c, "auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * k, 0);
  if (auto_pad == "NOTSET") {
    pads = attr_ints(c, "pads", pads);
    if (pads.size() != 2 * k) fail(c, "pads must have " + std::to_string(2 * k) + " values");
    return pads;
  }
  if (auto_pad == "VALID") return pads;
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    fail(c, "bad auto_pad '" + auto_pad + "'");
  for (size_t i = 0; i < k; ++i) {
    const int64_t out = (in_sizes[i] + strides[i] - 1) / strides[i];
    const int64_t total = std::max<int64_t>(
        0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in_sizes[i]);
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[i + k] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

Attrs Importer::conv(Ctx& c, bool transpose) {
  const Value& w = in_value(c, 1);
  const Value& x = in_value(c, 0);
  if (w.shape.size() < 3 || x.shape.size() != w.shape.size()) {
    fail(c, "input and weight must have the same rank, at least 3");
  }
  const size_t k = w.shape.size() - 2;
  std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  kernel = attr_ints(c, "kernel_shape", kernel);
  const std::vector<int64_t> ones(k, 1);
  Attrs a;
  a["kernel_shape"] = kernel;
  a["strides"] = attr_ints(c, "strides", ones);
  a["dilations"] = attr_ints(c, "dilations", ones);
  a["group"] = attr_i(c, "group", 1);
  const auto& strides = std::get<std::vector<int64_t>>(a["strides"]);
  const auto& dil = std::get<std::vector<int64_t>>(a["dilations"]);
  if (kernel.size() != k || strides.size() != k || dil.size() != k) {
    fail(c, "kernel_shape, strides and dilations must have " + std::to_string(k) + " values");
  }
  check_positive(c, kernel, strides, dil);
  std::vector<int64_t> in_sizes(x.shape.begin() + 2, x.shape.end());
  if (!transpose) {
    a["pads"] = resolve_pads(c, in_sizes, kernel, strides, dil);
    return a;
  }
  // ConvTranspose: out = stride*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end. With
  // auto_pad SAME or output_shape, solve for the pads from the inferred output shape.
  std::vector<int64_t> out_pad = attr_ints(c, "output_padding", std::vector<int64_t>(k, 0));
  if (out_pad.size() != k) fail(c, "output_padding must have " + std::to_string(k) + " values");
  a["output_padding"] = out_pad;
  const std::string auto_pad = attr_s(c, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" && !find_attr(*c.proto, "output_shape")) {
    std::vector<int64_t> pads = attr_ints(c, "pads", std::vector<int64_t>(2 * k, 0));
    if (pads.size() != 2 * k) fail(c, "pads must have " + std::to_string(2 * k) + " values");
    a["pads"] = pads;
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
  if (x.shape.size() < 3) fail(c, "input must have rank 3 or more");
  const size_t k = x.shape.size() - 2;
  const std::vector<int64_t> ones(k, 1);
  Attrs a;
  std::vector<int64_t> kernel = attr_ints(c, "kernel_shape", {});
  if (kernel.size() != k) fail(c, "kernel_shape must have " + std::to_string(k) + " values");
  a["kernel_shape"] = kernel;
  a["strides"] = attr_ints(c, "strides", ones);
  a["dilations"] = attr_ints(c, "dilations", ones);
  a["ceil_mode"] = attr_i(c, "ceil_mode", 0);
  if (!is_max) a["count_include_pad"] = attr_i(c, "count_include_pad", 0);
  const auto& strides = std::get<std::vector<int64_t>>(a["strides"]);
  const auto& dil = std::get<std::vector<int64_t>>(a["dilations"]);
  if (strides.size() != k || dil.size() != k) {
    fail(c, "strides and dilations must have " + std::to_string(k) + " values");
  }
  check_positive(c, kernel, strides, dil);
  a["pads"] = resolve_pads(c, std::vector<int64_t>(x.shape.begin() + 2, x.shape.end()), kernel,
                           strides, dil);
  return a;
}

Attrs Importer::lstm(Ctx& c) {
  const Value& w = in_value(c, 1);  // [num_directions, 4*hidden, input_size]
  if (w.shape.size() != 3) fail(c, "W must have rank 3");
  Attrs a;
  a["direction"] = attr_s(c, "direction", "forward");
  const std::string& dir = std::get<std::string>(a["direction"]);
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    fail(c, "bad direction '" + dir + "'");
  }
  a["hidden_size"] = attr_i(c, "hidden_size", w.shape[1] / 4);
  a["input_forget"] = attr_i(c, "input_forget", 0);
  a["layout"] = attr_i(c, "layout", 0);
  if (const AttributeProto* clip = find_attr(*c.proto, "clip")) a["clip"] = clip->f();
  if (const AttributeProto* act = find_attr(*c.proto, "activations")) {
    const int dirs = dir == "bidirectional" ? 2 : 1;
    for (int i = 0; i < act->strings_size(); ++i) {
      const char* expect = i % 3 == 0 ? "Sigmoid" : "Tanh";
      if (act->strings(i) != expect || act->strings_size() != 3 * dirs) {
        fail(c, "only the default activations (Sigmoid, Tanh, Tanh) are supported");
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
  if (op == "LSTM") return lstm(c);
  if (op == "Gemm") {
    a["alpha"] = attr_f(c, "alpha", 1.0f);
    a["beta"] = attr_f(c, "beta", 1.0f);
    a["transA"] = attr_i(c, "transA", 0);
    a["transB"] = attr_i(c, "transB", 0);
    const auto &sa = in_value(c, 0).shape, &sb = in_value(c, 1).shape;
    if (sa.size() != 2 || sb.size() != 2) fail(c, "A and B must be matrices");
    const int64_t ka = sa[std::get<int64_t>(a["transA"]) ? 0 : 1];
    const int64_t kb = sb[std::get<int64_t>(a["transB"]) ? 1 : 0];
    if (ka != kb) {
      fail(c, "inner dimensions differ: A gives " + std::to_string(ka) + ", B gives " +
                  std::to_string(kb));
    }
  } else if (op == "BatchNormalization") {
    if (attr_i(c, "training_mode", 0) != 0) fail(c, "training_mode=1 is not supported");
    for (int i = 1; i < c.proto->output_size(); ++i) {
      if (!c.proto->output(i).empty()) fail(c, "only the first output (Y) is supported");
    }
    a["epsilon"] = attr_f(c, "epsilon", 1e-5f);
  } else if (op == "LeakyRelu") {
    a["alpha"] = attr_f(c, "alpha", 0.01f);
  } else if (op == "Clip") {
    a["min"] = const_float(c, 1, "min", -std::numeric_limits<float>::infinity());
    a["max"] = const_float(c, 2, "max", std::numeric_limits<float>::infinity());
    c.inputs.resize(1);
  } else if (op == "Softmax" || op == "LogSoftmax") {
    const int64_t rank = in_rank(c, 0);
    const int64_t axis = norm_axis(attr_i(c, "axis", opset_ < 13 ? 1 : -1), rank, c.where);
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
    if (!find_attr(*c.proto, "axis")) fail(c, "attribute 'axis' is required");
    a["axis"] = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0), c.where);
  } else if (op == "Reshape") {
    a["shape"] = first_output(c).shape;
    c.inputs.resize(1);
  } else if (op == "Flatten") {
    const int64_t rank = in_rank(c, 0);
    const int64_t axis = attr_i(c, "axis", 1);
    if (axis < -rank || axis > rank) fail(c, "axis " + std::to_string(axis) + " is out of range");
    a["axis"] = axis < 0 ? axis + rank : axis;
  } else if (op == "Transpose") {
    const int64_t rank = in_rank(c, 0);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
    perm = attr_ints(c, "perm", perm);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < rank; ++i) {
      if (sorted.size() != static_cast<size_t>(rank) || sorted[static_cast<size_t>(i)] != i) {
        fail(c, "perm is not a permutation of 0.." + std::to_string(rank - 1));
      }
    }
    a["perm"] = perm;
  } else if (op == "Squeeze" || op == "Unsqueeze") {
    std::vector<int64_t> axes;
    const bool have = opset_ < 13 ? find_attr(*c.proto, "axes") != nullptr : in(c, 1) != kNoValue;
    if (have) axes = opset_ < 13 ? attr_ints(c, "axes", {}) : const_ints(c, 1, "axes");
    const int64_t rank = op == "Squeeze" ? in_rank(c, 0) : in_rank(c, 0) + int64_t(axes.size());
    if (op == "Unsqueeze" && !have) fail(c, "axes are required");
    if (op == "Squeeze" && !have) {
      const auto& s = in_value(c, 0).shape;
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] == 1) axes.push_back(static_cast<int64_t>(d));
      }
    }
    for (int64_t& ax : axes) ax = norm_axis(ax, rank, c.where);
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
    if (given.size() != 2 * axes.size()) fail(c, "pads must have 2 values per padded axis");
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t ax = norm_axis(axes[i], rank, c.where);
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
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size()) {
      fail(c, "starts, ends, axes and steps must have the same length");
    }
    // Normalized to every axis: start and end clamped as ONNX specifies, step non-zero.
    std::vector<int64_t> s(static_cast<size_t>(rank), 0), e(shape.begin(), shape.end()),
        st(static_cast<size_t>(rank), 1), all_axes;
    for (int64_t i = 0; i < rank; ++i) all_axes.push_back(i);
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t ax = static_cast<size_t>(norm_axis(axes[i], rank, c.where));
      const int64_t dim = shape[ax], step = steps[i];
      if (step == 0) fail(c, "steps must be non-zero");
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
    a["axis"] = norm_axis(attr_i(c, "axis", 0), in_rank(c, 0), c.where);
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
    const int64_t axis = norm_axis(attr_i(c, "axis", 0), op == "Gather" ? x.ndim() : rank, c.where);
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

Graph Importer::run(const onnx::ModelProto& model) {
  const onnx::GraphProto& graph = model.graph();
  std::set<std::string> initializer_names;
  for (const TensorProto& t : graph.initializer()) initializer_names.insert(t.name());
  for (const auto& vi : graph.input()) types_[vi.name()] = &vi.type();
  for (const auto& vi : graph.value_info()) types_[vi.name()] = &vi.type();
  for (const auto& vi : graph.output()) types_[vi.name()] = &vi.type();

  for (const TensorProto& t : graph.initializer()) {
    define(t.name(),
           g_.add_constant(t.name(), tensor_to_ndarray(
                                         t, "'" + origin_ + "': initializer '" + t.name() + "'")));
  }
  for (const auto& input : graph.input()) {
    if (initializer_names.count(input.name())) continue;
    const ValueId v = g_.add_input(input.name(), runtime::kFloat32, {});
    set_type(v, input.name(), "graph input");
    define(input.name(), v);
  }

  for (const NodeProto& n : graph.node()) {
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
    const std::string& op = n.op_type();
    if (op == "Constant") {
      if (n.attribute_size() != 1) fail(c, "a Constant needs exactly one attribute");
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
      if (in(c, 0) == kNoValue) fail(c, "input 0 is required");
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
        const ValueId mask = output_value(n, 1);
        if (!runtime::dtype_equal(g_.value(mask).dtype, runtime::kBool))
          fail(c, "mask must be bool");
        runtime::NDArray ones = runtime::NDArray::empty(g_.value(mask).shape, g_.value(mask).dtype);
        std::memset(ones.data(), 1, static_cast<size_t>(ones.nbytes()));
        g_.value(mask).data = std::make_shared<const runtime::NDArray>(std::move(ones));
      }
      continue;
    }
    if (op == "Shape" && try_fold(c)) continue;
    std::vector<ValueId> outs;
    for (int i = 0; i < n.output_size(); ++i) {
      outs.push_back(n.output(i).empty() ? kNoValue : output_value(n, i));
    }
    if (try_fold(c)) continue;
    Attrs attrs = normalize(c);
    while (!outs.empty() && outs.back() == kNoValue) outs.pop_back();
    // A node name is unique in Kiln's graph even when the file leaves it empty.
    std::string name = n.name().empty() ? op + "_" + std::to_string(g_.nodes().size()) : n.name();
    g_.add_node(Node{op, std::move(name), std::move(c.inputs), std::move(outs), std::move(attrs)});
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

/// Replaces every node whose outputs the importer evaluated by initializers holding them; returns
/// how many nodes it removed.
size_t bake_constants(onnx::ModelProto& model, const Importer& imp) {
  onnx::GraphProto* graph = model.mutable_graph();
  std::set<std::string> initializers;
  for (const TensorProto& t : graph->initializer()) initializers.insert(t.name());
  google::protobuf::RepeatedPtrField<NodeProto> kept;
  size_t removed = 0;
  for (NodeProto& n : *graph->mutable_node()) {
    bool all = n.output_size() > 0;
    for (const std::string& o : n.output()) all = all && (o.empty() || imp.constant(o) != nullptr);
    if (!all) {
      *kept.Add() = std::move(n);
      continue;
    }
    for (const std::string& o : n.output()) {
      if (!o.empty() && !initializers.count(o)) {
        *graph->add_initializer() = to_tensor_proto(o, *imp.constant(o));
        initializers.insert(o);
      }
    }
    ++removed;
  }
  graph->mutable_node()->Swap(&kept);
  graph->clear_value_info();
  return removed;
}


/// Shape inference and import, repeated while constants the importer folded (the shape
/// computations exporters emit: Shape -> Gather -> Unsqueeze -> Concat -> Reshape) let ONNX infer
/// shapes it could not infer before.
Graph import_model(onnx::ModelProto& model, const std::string& origin,
                   const OnnxImportOptions& options) {
  KILN_USER_CHECK(model.has_graph()) << "'" << origin << "' is not an ONNX model: it has no graph";
  bind_inputs(model, origin, options.constant_inputs);
  const int64_t opset = check_model(model, origin);
  if (opset >= 18) lower_opset18_pads(model);
  while (true) {
    infer_shapes(model, origin);
    Importer imp(origin, opset);
    try {
      return imp.run(model);
    } catch (const MissingShape&) {
      if (bake_constants(model, imp) == 0) throw;
    }
  }
}

}  // namespace

const std::vector<std::string>& supported_onnx_ops() { return kSupported; }

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
