// Every node the ONNX front end accepts is checked here against the ONNX specification before
// ONNX shape inference or anything after it sees the node: libonnx's inference functions index
// attribute vectors and input dimensions without bounds checks, and the passes after import trust
// the shapes they are given. First what the operator's schema says (how many inputs and outputs,
// which are required, which attributes exist, their types, which are required, the element types
// each input may have and which inputs must share one), then the rules of each operator: ranks,
// channel counts, inner dimensions, broadcasting, axes and permutations, attribute lengths and
// ranges, the output size a window leaves, the values of the constant inputs that are parameters.
// Each failure is a kiln::Error naming the node, the operator, the input or attribute, and both
// values that disagree.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/topi/einsum.h"

namespace kiln::graph::onnx_detail {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;

std::string str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string str(int64_t v) { return std::to_string(v); }

const char* attr_type_name(int t) {
  switch (t) {
    case AttributeProto::FLOAT:
      return "a float (FLOAT)";
    case AttributeProto::INT:
      return "an int (INT)";
    case AttributeProto::STRING:
      return "a string (STRING)";
    case AttributeProto::TENSOR:
      return "a tensor (TENSOR)";
    case AttributeProto::GRAPH:
      return "a graph (GRAPH)";
    case AttributeProto::FLOATS:
      return "a list of floats (FLOATS)";
    case AttributeProto::INTS:
      return "a list of ints (INTS)";
    case AttributeProto::STRINGS:
      return "a list of strings (STRINGS)";
    default:
      return "of another type";
  }
}

/// The type of an attribute: its `type` field, or (files older than IR version 2 leave it unset)
/// the field that holds its value.
int attr_type(const AttributeProto& a) {
  if (a.type() != AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return AttributeProto::FLOAT;
  if (a.has_i()) return AttributeProto::INT;
  if (a.has_s()) return AttributeProto::STRING;
  if (a.has_t()) return AttributeProto::TENSOR;
  if (a.has_g()) return AttributeProto::GRAPH;
  if (a.floats_size() > 0) return AttributeProto::FLOATS;
  if (a.ints_size() > 0) return AttributeProto::INTS;
  if (a.strings_size() > 0) return AttributeProto::STRINGS;
  return AttributeProto::UNDEFINED;
}

/// Whether `a` and `b` broadcast as NumPy does; if not, the two dimensions that disagree.
bool broadcastable(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t* da,
                   int64_t* db) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) {
      *da = x;
      *db = y;
      return false;
    }
  }
  return true;
}

/// floor(a / b) for b > 0, also for a negative a.
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The checks of one node. Input i is `in[i]`, null where the node omits it.
class NodeCheck {
 public:
  NodeCheck(const NodeProto& n, int64_t opset, const std::vector<const Value*>& in,
            const std::string& origin)
      : n_(n),
        opset_(opset),
        in_(in),
        origin_(origin),
        where_("node '" + n.name() + "' (" + n.op_type() + ")"),
        op_(n.op_type()) {}

  void run() {
    check_schema();
    check_element_types();
    check_operator();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("error: '" + origin_ + "': " + where_ + ": " + what);
  }

  // --- the node's inputs and attributes ---------------------------------------------------------
  /// The schema's name of input i ("X", "W"); variadic inputs share the last one's.
  std::string formal_name(size_t i) const {
    const auto& formals = schema_->inputs();
    if (op_ == "Pad" && i == 3) return "axes";  // opset 18, which libonnx 1.12 predates
    if (opset18_reduction() && i == 1) return "axes";
    if (formals.empty()) return "input";
    return formals[std::min(i, formals.size() - 1)].GetName();
  }
  /// "input 1 (W 'w')".
  std::string input(size_t i) const {
    const std::string name =
        i < static_cast<size_t>(n_.input_size()) ? n_.input(static_cast<int>(i)) : "";
    return "input " + str(static_cast<int64_t>(i)) + " (" + formal_name(i) + " '" + name + "')";
  }
  bool has(size_t i) const { return i < in_.size() && in_[i] != nullptr; }
  /// A reduction in its opset-18 form (axes as input 1, noop_with_empty_axes), which libonnx 1.12
  /// predates: its registry has the opset-13 schema with the axes attribute.
  bool opset18_reduction() const {
    return op_ != "ReduceSum" && op_.rfind("Reduce", 0) == 0 && axes_is_input(op_, opset_);
  }
  const Value& value(size_t i) const {
    if (!has(i)) fail(input(i) + " is required");
    return *in_[i];
  }
  const std::vector<int64_t>& shape(size_t i) const { return value(i).shape; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(shape(i).size()); }
  /// "input 0 (X 'x') of shape [1,3,8,8]".
  std::string input_shaped(size_t i) const { return input(i) + " of shape " + str(shape(i)); }
  /// The integers of constant input i (int32 or int64); nullopt when it is not a constant (the
  /// importer reports that where it needs one).
  std::optional<std::vector<int64_t>> const_ints(size_t i) const {
    if (!has(i) || !value(i).is_constant()) return std::nullopt;
    const runtime::NDArray& a = *value(i).data;
    if (runtime::dtype_equal(a.dtype(), runtime::kInt64)) return a.to_vector<int64_t>();
    if (!runtime::dtype_equal(a.dtype(), runtime::kInt32)) return std::nullopt;
    const std::vector<int32_t> v = a.to_vector<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }

  const AttributeProto* attr(const std::string& name) const {
    for (const AttributeProto& a : n_.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t attr_i(const std::string& name, int64_t dflt) const {
    const AttributeProto* a = attr(name);
    return a ? a->i() : dflt;
  }
  std::string attr_s(const std::string& name, const std::string& dflt) const {
    const AttributeProto* a = attr(name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt) const {
    const AttributeProto* a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : dflt;
  }

  /// A possibly negative axis in [-rank, rank - 1 + extra], made non-negative; `what` names it,
  /// `against` the input whose rank it indexes.
  int64_t axis_in(int64_t axis, int64_t rank, const std::string& what, const std::string& against,
                  int64_t extra = 0) const {
    if (axis < -rank || axis >= rank + extra) {
      fail(what + " is " + str(axis) + ", out of range [" + str(-rank) + ", " +
           str(rank - 1 + extra) + "] for " + against + " of rank " + str(rank));
    }
    return axis < 0 ? axis + rank : axis;
  }
  /// `axes` (named `what`) made non-negative, each in range for `rank` and none twice.
  std::vector<int64_t> axes_in(const std::vector<int64_t>& axes, int64_t rank,
                               const std::string& what, const std::string& against) const {
    std::vector<int64_t> out;
    for (int64_t ax : axes) {
      if (ax < -rank || ax >= rank) {
        fail(what + " " + str(axes) + " holds axis " + str(ax) + ", out of range [" + str(-rank) +
             ", " + str(rank - 1) + "] for " + against + " of rank " + str(rank));
      }
      const int64_t a = ax < 0 ? ax + rank : ax;
      if (std::find(out.begin(), out.end(), a) != out.end()) {
        fail(what + " " + str(axes) + " names dimension " + str(a) + " of " + against + " twice");
      }
      out.push_back(a);
    }
    return out;
  }

  // --- the schema -------------------------------------------------------------------------------
  void check_schema() {
    schema_ = onnx::OpSchemaRegistry::Schema(op_, static_cast<int>(opset_), "");
    if (schema_ == nullptr) fail("operator '" + op_ + "' does not exist at opset " + str(opset_));
    const int num_in = n_.input_size(), num_out = n_.output_size();
    const int max_in = op_ == "Pad" && opset_ >= 18 ? 4
                       : opset18_reduction()        ? 2
                                                    : schema_->max_input();
    if (num_in < schema_->min_input() || num_in > max_in) {
      fail("has " + str(num_in) + " inputs; " + op_ + " at opset " + str(opset_) + " takes " +
           count_range(schema_->min_input(), max_in));
    }
    if (num_out < schema_->min_output() || num_out > schema_->max_output()) {
      fail("has " + str(num_out) + " outputs; " + op_ + " at opset " + str(opset_) + " has " +
           count_range(schema_->min_output(), schema_->max_output()));
    }
    const auto& formal_in = schema_->inputs();
    for (int i = 0; i < num_in && !formal_in.empty(); ++i) {
      const auto& f = formal_in[std::min<size_t>(static_cast<size_t>(i), formal_in.size() - 1)];
      const bool beyond = static_cast<size_t>(i) >= formal_in.size();  // Pad's axes (opset 18)
      if (!beyond && f.GetOption() == onnx::OpSchema::Single && n_.input(i).empty()) {
        fail(input(static_cast<size_t>(i)) + " is required, but the node leaves it empty");
      }
    }
    const auto& formal_out = schema_->outputs();
    for (int i = 0; i < num_out && !formal_out.empty(); ++i) {
      const auto& f = formal_out[std::min<size_t>(static_cast<size_t>(i), formal_out.size() - 1)];
      if (f.GetOption() == onnx::OpSchema::Single && n_.output(i).empty()) {
        fail("output " + str(i) + " (" + f.GetName() +
             ") is required, but the node leaves it "
             "empty");
      }
    }
    std::set<std::string> seen;
    for (const AttributeProto& a : n_.attribute()) {
      if (!seen.insert(a.name()).second) fail("attribute '" + a.name() + "' is given twice");
      // Opset 18's attributes that libonnx 1.12's schemas lack, and the one it removed.
      if (opset18_reduction() && a.name() == "noop_with_empty_axes") {
        if (attr_type(a) != AttributeProto::INT) {
          fail("attribute 'noop_with_empty_axes' must be an int (INT), got " +
               std::string(attr_type_name(attr_type(a))));
        }
        continue;
      }
      if (opset18_reduction() && a.name() == "axes") {
        fail("attribute 'axes' is not an attribute of " + op_ + " at opset " + str(opset_) +
             " (from opset 18 the axes are input 1)");
      }
      if (op_ == "Resize" && opset_ >= 18 &&
          (a.name() == "axes" || a.name() == "keep_aspect_ratio_policy" ||
           a.name() == "antialias")) {
        // Opset 18's attributes, which libonnx 1.12's Resize-13 schema lacks.
        const int want = a.name() == "axes"        ? AttributeProto::INTS
                         : a.name() == "antialias" ? AttributeProto::INT
                                                   : AttributeProto::STRING;
        if (attr_type(a) != want) {
          fail("attribute '" + a.name() + "' must be " + attr_type_name(want) + ", got " +
               attr_type_name(attr_type(a)));
        }
        continue;
      }
      if (op_ == "Split" && opset_ >= 18 && a.name() == "num_outputs") {
        if (attr_type(a) != AttributeProto::INT) {
          fail("attribute 'num_outputs' must be an int (INT), got " +
               std::string(attr_type_name(attr_type(a))));
        }
        continue;
      }
      auto it = schema_->attributes().find(a.name());
      if (it == schema_->attributes().end()) {
        if (a.name().rfind("__", 0) == 0) continue;  // ONNX's internal attributes
        std::vector<std::string> known;
        for (const auto& [name, _] : schema_->attributes()) known.push_back(name);
        fail("attribute '" + a.name() + "' is not an attribute of " + op_ + " at opset " +
             str(opset_) + " (" + (known.empty() ? "it has none" : "it has " + join(known)) + ")");
      }
      if (attr_type(a) != it->second.type) {
        fail("attribute '" + a.name() + "' must be " + attr_type_name(it->second.type) + ", got " +
             attr_type_name(attr_type(a)));
      }
    }
    for (const auto& [name, spec] : schema_->attributes()) {
      if (spec.required && !seen.count(name)) fail("attribute '" + name + "' is required");
    }
  }

  static std::string count_range(int lo, int hi) {
    if (hi == INT_MAX) return str(lo) + " or more";
    if (lo == hi) return str(lo);
    return str(lo) + " to " + str(hi);
  }

  /// The element type of each input against the schema's type constraints, and inputs that
  /// share a type parameter against each other.
  void check_element_types() {
    const auto& formals = schema_->inputs();
    std::map<std::string, size_t> first;  // type parameter -> the first input of it
    for (size_t i = 0; i < in_.size(); ++i) {
      if (in_[i] == nullptr || formals.empty()) continue;
      if (i >= formals.size() && formals.back().GetOption() != onnx::OpSchema::Variadic) {
        // Pad's axes (opset 18): int32 or int64, like Slice's.
        const KilnDType t = in_[i]->dtype;
        if (!runtime::dtype_equal(t, runtime::kInt64) &&
            !runtime::dtype_equal(t, runtime::kInt32)) {
          fail(input(i) + " is " + runtime::dtype_to_string(t) + "; it must be int32 or int64");
        }
        continue;
      }
      const auto& f = formals[std::min(i, formals.size() - 1)];
      const std::string type = onnx_type_string(in_[i]->dtype);
      bool allowed = false;
      std::vector<std::string> names;
      for (const std::string* t : f.GetTypes()) {
        allowed = allowed || *t == type;
        names.push_back(*t);
      }
      if (!allowed) {
        std::sort(names.begin(), names.end());
        fail(input(i) + " is " + type + ", but " + op_ + " takes " + join(names) + " there (" +
             f.GetTypeStr() + ")");
      }
      if (f.GetOption() == onnx::OpSchema::Variadic && !f.GetIsHomogeneous()) continue;
      auto [it, fresh] = first.emplace(f.GetTypeStr(), i);
      if (!fresh && !runtime::dtype_equal(in_[it->second]->dtype, in_[i]->dtype)) {
        fail(input(i) + " is " + type + ", but " + input(it->second) + " is " +
             onnx_type_string(in_[it->second]->dtype) + "; both have type " + f.GetTypeStr() +
             " and must agree");
      }
    }
  }

  // --- the operators ----------------------------------------------------------------------------
  void check_operator() {
    static const std::set<std::string> kBroadcasting = {
        "Add",  "And",         "Div", "Equal", "Greater", "GreaterOrEqual",
        "Less", "LessOrEqual", "Max", "Mean",  "Min",     "Mul",
        "Or",   "Pow",         "Sub", "Sum",   "Where",   "Xor"};
    if (kBroadcasting.count(op_)) return broadcast();
    if (op_.rfind("Reduce", 0) == 0) return reduction();
    if (op_ == "ArgMax" || op_ == "ArgMin") return arg_reduction();
    if (op_ == "PRelu") return prelu();
    if (op_ == "Expand") return expand();
    if (op_ == "Tile") return tile();
    if (op_ == "Resize") return resize();
    if (op_ == "Split") return split();
    if (op_ == "ConstantOfShape") return constant_of_shape();
    if (op_ == "LayerNormalization") return layer_norm();
    if (op_ == "InstanceNormalization") return instance_norm();
    if (op_ == "Mod") {
      broadcast();
      const int64_t fmod = flag("fmod", 0);
      if (fmod == 0 && value(0).dtype.code == kKilnFloat) {
        fail("attribute 'fmod' is 0, but " + input(0) + " is " + onnx_type_string(value(0).dtype) +
             "; floating-point Mod needs fmod=1");
      }
      return;
    }
    if (op_ == "Einsum") return einsum();
    if (op_ == "Trilu") {
      if (rank(0) < 2)
        fail(input_shaped(0) + " has rank " + str(rank(0)) + "; Trilu needs 2 or more");
      flag("upper", 1);
      if (has(1) && value(1).num_elements() != 1) fail(input_shaped(1) + " must be a scalar");
      return;
    }
    if (op_ == "Range") {
      for (size_t i = 0; i < 3; ++i) {
        if (value(i).num_elements() != 1 || rank(i) > 1) {
          fail(input_shaped(i) + " must be a scalar");
        }
      }
      return;
    }
    if (op_ == "Conv" || op_ == "ConvTranspose") return conv(op_ == "ConvTranspose");
    if (op_ == "MaxPool" || op_ == "AveragePool") return pool();
    if (op_ == "GlobalAveragePool" || op_ == "GlobalMaxPool") {
      if (rank(0) < 2)
        fail(input_shaped(0) + " has rank " + str(rank(0)) + "; " + op_ +
             " takes N x C x D1 x ... (rank 2 or more)");
      return;
    }
    if (op_ == "BatchNormalization") return batch_norm();
    if (op_ == "Gemm") return gemm();
    if (op_ == "MatMul") return matmul();
    if (op_ == "LSTM" || op_ == "GRU") return recurrent();
    if (op_ == "Concat") return concat();
    if (op_ == "Reshape") return reshape();
    if (op_ == "Flatten") {
      axis_in(attr_i("axis", 1), rank(0), "attribute 'axis'", input(0), /*extra=*/1);
      return;
    }
    if (op_ == "GatherElements") return gather_elements();
    if (op_ == "CumSum") {
      if (value(1).num_elements() != 1 || rank(1) > 1) fail(input_shaped(1) + " must be a scalar");
      if (const auto axis = const_ints(1)) axis_in((*axis)[0], rank(0), input(1), input(0));
      flag("exclusive", 0);
      flag("reverse", 0);
      return;
    }
    if (op_ == "Softmax" || op_ == "LogSoftmax" || op_ == "Hardmax") {
      axis_in(attr_i("axis", opset_ < 13 ? 1 : -1), rank(0), "attribute 'axis'", input(0));
      return;
    }
    if (op_ == "Transpose") return transpose();
    if (op_ == "Squeeze" || op_ == "Unsqueeze") return squeeze(op_ == "Unsqueeze");
    if (op_ == "Slice") return slice();
    if (op_ == "Pad") return pad();
    if (op_ == "Gather") return gather();
    if (op_ == "Clip") {
      for (size_t i : {size_t{1}, size_t{2}}) {
        if (has(i) && value(i).num_elements() != 1) {
          fail(input_shaped(i) + " must be a scalar (Clip's bound)");
        }
      }
      return;
    }
    if (op_ == "Cast") {
      const int64_t to = attr_i("to", 0);
      if (to == onnx::TensorProto::UNDEFINED ||
          !onnx::TensorProto::DataType_IsValid(static_cast<int>(to))) {
        fail("attribute 'to' is " + str(to) + ", which is not an ONNX data type");
      }
      return;
    }
    if (op_ == "QuantizeLinear" || op_ == "DequantizeLinear") return quantize_linear();
    if (op_ == "Dropout") return dropout();
    if (op_ == "Constant") {
      if (n_.attribute_size() != 1) {
        fail("has " + str(n_.attribute_size()) + " attributes; a Constant holds exactly one " +
             "(value, value_float, value_floats, value_int, value_ints, ...)");
      }
      return;
    }
    // Abs, Cast, Exp, Identity, LeakyRelu, Log, Neg, Relu, Shape, Sigmoid, Sqrt, Tanh: any shape;
    // the schema checks cover them.
  }

  /// Add, Sub, Mul, Div, Pow (two inputs), Max, Min (one or more): NumPy broadcasting.
  void broadcast() {
    for (size_t i = 1; i < in_.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        int64_t di = 0, dj = 0;
        if (!broadcastable(shape(j), shape(i), &dj, &di)) {
          fail(input_shaped(i) + " does not broadcast with " + input_shaped(j) + ": " + str(di) +
               " against " + str(dj));
        }
      }
    }
  }

  /// One int attribute per spatial dimension (`count` of them) with its default; `min` the
  /// least value each may have.
  std::vector<int64_t> per_axis(const std::string& name, size_t count, int64_t dflt, int64_t min,
                                const std::string& spatial_of) const {
    const std::vector<int64_t> v = attr_ints(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count) {
      fail("attribute '" + name + "' has " + str(static_cast<int64_t>(v.size())) + " values " +
           str(v) + ", but " + spatial_of + " needs " + str(static_cast<int64_t>(count)));
    }
    for (int64_t x : v) {
      if (x < min) {
        fail("attribute '" + name + "' is " + str(v) + "; each value must be " +
             (min == 1 ? "positive" : "non-negative") + ", got " + str(x));
      }
    }
    return v;
  }

  /// auto_pad's value, checked; and explicit pads that contradict it.
  std::string auto_pad() const {
    const std::string ap = attr_s("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID") {
      fail("attribute 'auto_pad' is '" + ap +
           "'; it must be NOTSET, SAME_UPPER, SAME_LOWER or "
           "VALID");
    }
    return ap;
  }

  /// Conv, ConvTranspose, MaxPool, AveragePool: the window attributes against input 0's spatial
  /// dimensions; returns the pads in effect. `extent` receives the dilated kernel sizes.
  std::vector<int64_t> window(const std::vector<int64_t>& kernel, bool has_dilations,
                              std::vector<int64_t>* strides, std::vector<int64_t>* extent) const {
    const std::vector<int64_t>& x = shape(0);
    const size_t k = x.size() - 2;
    const std::string spatial = input_shaped(0) + " with " + str(static_cast<int64_t>(k)) +
                                " spatial dimension" + (k == 1 ? "" : "s");
    *strides = per_axis("strides", k, 1, 1, spatial);
    const std::vector<int64_t> dil =
        has_dilations ? per_axis("dilations", k, 1, 1, spatial) : std::vector<int64_t>(k, 1);
    extent->clear();
    for (size_t i = 0; i < k; ++i) extent->push_back((kernel[i] - 1) * dil[i] + 1);
    const std::vector<int64_t> pads = per_axis("pads", 2 * k, 0, 0,
                                               spatial +
                                                   " (a begin and an "
                                                   "end each)");
    const std::string ap = auto_pad();
    if (ap == "NOTSET") return pads;
    const std::vector<int64_t> in(x.begin() + 2, x.end());
    const std::vector<int64_t> implied = window_pads(ap, pads, in, *extent, *strides);
    if (attr("pads") != nullptr && pads != implied && op_ != "ConvTranspose") {
      fail("attribute 'pads' is " + str(pads) + ", but attribute 'auto_pad' '" + ap + "' gives " +
           str(implied) + "; the two cannot be used together");
    }
    return implied;
  }

  void conv(bool transpose) {
    const std::vector<int64_t>& x = shape(0);
    const std::vector<int64_t>& w = shape(1);
    if (x.size() < 3) {
      fail(input_shaped(0) + " has rank " + str(rank(0)) + "; " + op_ +
           " takes N x C x D1 x ... (rank 3 or more)");
    }
    if (w.size() != x.size()) {
      fail(input_shaped(1) + " has rank " + str(rank(1)) + ", but " + input_shaped(0) +
           " has rank " + str(rank(0)) + "; they must be equal");
    }
    const int64_t group = attr_i("group", 1);
    if (group < 1) fail("attribute 'group' must be positive, got " + str(group));
    int64_t out_channels = 0;
    if (!transpose) {
      if (w[1] * group != x[1]) {
        fail(input(1) + " has " + str(w[1]) + " input channels per group, but " + input(0) +
             " has " + str(x[1]) + " channels with group " + str(group));
      }
      if (w[0] % group != 0) {
        fail(input_shaped(1) + " has " + str(w[0]) + " output channels, which group " + str(group) +
             " does not divide");
      }
      out_channels = w[0];
    } else {
      if (w[0] != x[1]) {
        fail(input(1) + " has " + str(w[0]) + " input channels (its dimension 0), but " + input(0) +
             " has " + str(x[1]) + " channels");
      }
      if (x[1] % group != 0) {
        fail(input_shaped(0) + " has " + str(x[1]) + " channels, which group " + str(group) +
             " does not divide");
      }
      out_channels = w[1] * group;
    }
    if (has(2) && shape(2) != std::vector<int64_t>{out_channels}) {
      fail(input_shaped(2) + " must be [" + str(out_channels) + "]: " + input_shaped(1) +
           " with group " + str(group) + " makes " + str(out_channels) + " output channels");
    }
    const std::vector<int64_t> kernel(w.begin() + 2, w.end());
    if (attr("kernel_shape") != nullptr && attr_ints("kernel_shape", {}) != kernel) {
      fail("attribute 'kernel_shape' is " + str(attr_ints("kernel_shape", {})) + ", but " +
           input_shaped(1) + " has the kernel " + str(kernel));
    }
    for (int64_t d : kernel) {
      if (d < 1) fail(input_shaped(1) + " has an empty kernel");
    }
    std::vector<int64_t> strides, extent;
    const std::vector<int64_t> pads = window(kernel, /*has_dilations=*/true, &strides, &extent);
    const size_t k = kernel.size();
    if (!transpose) {
      for (size_t i = 0; i < k; ++i) check_fits(i, pads, extent[i], false, strides[i]);
      return;
    }
    const std::string spatial = input_shaped(0) + " with " + str(static_cast<int64_t>(k)) +
                                " spatial dimension" + (k == 1 ? "" : "s");
    const std::vector<int64_t> out_pad = per_axis("output_padding", k, 0, 0, spatial);
    const std::vector<int64_t> dil = attr_ints("dilations", std::vector<int64_t>(k, 1));
    for (size_t i = 0; i < k; ++i) {
      if (out_pad[i] >= std::max(strides[i], dil[i])) {
        fail("attribute 'output_padding' is " + str(out_pad) + ": " + str(out_pad[i]) +
             " in spatial dimension " + str(static_cast<int64_t>(i)) +
             " must be less than the stride " + str(strides[i]) + " or the dilation " +
             str(dil[i]));
      }
    }
    if (attr("output_shape") != nullptr) {
      per_axis("output_shape", k, 1, 1, spatial);
      return;
    }
    if (auto_pad() != "NOTSET") return;  // SAME: stride * input size; VALID: larger than input
    for (size_t i = 0; i < k; ++i) {
      const int64_t in = x[i + 2];
      const int64_t out = strides[i] * (in - 1) + out_pad[i] + extent[i] - pads[i] - pads[i + k];
      if (out < 1) {
        fail("attribute 'pads' " + str(pads) + " leave no output in spatial dimension " +
             str(static_cast<int64_t>(i)) + ": " + input_shaped(0) + " with stride " +
             str(strides[i]) + " and the kernel's extent " + str(extent[i]) + " give " +
             str(out + pads[i] + pads[i + k]) + " elements before padding is removed");
      }
    }
  }

  /// A window of `extent` (dilated kernel size) sliding by `stride` must fit spatial dimension i
  /// of input 0 padded by `pads` (with ceil_mode, a last window that starts inside is enough).
  void check_fits(size_t i, const std::vector<int64_t>& pads, int64_t extent, bool ceil_mode,
                  int64_t stride) const {
    const std::vector<int64_t>& x = shape(0);
    const size_t k = x.size() - 2;
    const int64_t padded = x[i + 2] + pads[i] + pads[i + k];
    const int64_t out = ceil_mode ? -floor_div(-(padded - extent), stride) + 1
                                  : floor_div(padded - extent, stride) + 1;
    if (out < 1) {
      fail(input_shaped(0) + " has " + str(x[i + 2]) + " elements in spatial dimension " +
           str(static_cast<int64_t>(i)) + " (" + str(padded) + " with pads " + str(pads) +
           "), fewer than the kernel's extent " + str(extent));
    }
  }

  void pool() {
    const std::vector<int64_t>& x = shape(0);
    if (x.size() < 3) {
      fail(input_shaped(0) + " has rank " + str(rank(0)) + "; " + op_ +
           " takes N x C x D1 x ... (rank 3 or more)");
    }
    const size_t k = x.size() - 2;
    const std::string spatial = input_shaped(0) + " with " + str(static_cast<int64_t>(k)) +
                                " spatial dimension" + (k == 1 ? "" : "s");
    const std::vector<int64_t> kernel = per_axis("kernel_shape", k, 1, 1, spatial);
    const bool has_dilations = schema_->attributes().count("dilations") != 0;
    std::vector<int64_t> strides, extent;
    const std::vector<int64_t> pads = window(kernel, has_dilations, &strides, &extent);
    if (op_ == "MaxPool") {
      const int64_t order = attr_i("storage_order", 0);
      if (order != 0 && order != 1) {
        fail("attribute 'storage_order' is " + str(order) +
             "; it must be 0 (row major) or 1 "
             "(column major)");
      }
    }
    const bool ceil_mode = attr_i("ceil_mode", 0) != 0;
    for (size_t i = 0; i < k; ++i) check_fits(i, pads, extent[i], ceil_mode, strides[i]);
  }

  void batch_norm() {
    const int64_t channels = rank(0) >= 2 ? shape(0)[1] : 1;
    for (size_t i = 1; i <= 4; ++i) {
      if (shape(i) != std::vector<int64_t>{channels}) {
        fail(input_shaped(i) + " must be [" + str(channels) + "]: " + input_shaped(0) + " has " +
             str(channels) + " channels");
      }
    }
    const int64_t training = attr_i("training_mode", 0);
    if (training != 0 && training != 1) {
      fail("attribute 'training_mode' is " + str(training) + "; it must be 0 or 1");
    }
  }

  void gemm() {
    const std::vector<int64_t>&a = shape(0), &b = shape(1);
    for (size_t i : {size_t{0}, size_t{1}}) {
      if (rank(i) != 2)
        fail(input_shaped(i) + " has rank " + str(rank(i)) + "; Gemm takes matrices");
    }
    const int64_t ta = attr_i("transA", 0) != 0, tb = attr_i("transB", 0) != 0;
    const int64_t ka = a[ta ? 0 : 1], kb = b[tb ? 1 : 0];
    if (ka != kb) {
      fail("inner dimensions differ: " + input_shaped(0) + " with transA " + str(ta) +
           " gives K = " + str(ka) + ", " + input_shaped(1) + " with transB " + str(tb) +
           " gives K = " + str(kb));
    }
    if (!has(2)) return;
    const std::vector<int64_t> out = {a[ta ? 1 : 0], b[tb ? 0 : 1]};
    const std::vector<int64_t>& c = shape(2);
    bool ok = c.size() <= 2;
    for (size_t i = 1; ok && i <= c.size(); ++i) {
      const int64_t d = c[c.size() - i];
      ok = d == 1 || d == out[2 - i];
    }
    if (!ok) {
      fail(input_shaped(2) + " does not broadcast to the output's shape " + str(out) + " (M = " +
           str(out[0]) + " from " + input(0) + ", N = " + str(out[1]) + " from " + input(1) + ")");
    }
  }

  void matmul() {
    const std::vector<int64_t>&a = shape(0), &b = shape(1);
    for (size_t i : {size_t{0}, size_t{1}}) {
      if (rank(i) < 1) fail(input(i) + " is a scalar; MatMul takes tensors of rank 1 or more");
    }
    const int64_t ka = a.back(), kb = b.size() == 1 ? b[0] : b[b.size() - 2];
    if (ka != kb) {
      fail("inner dimensions differ: " + input_shaped(0) + " gives K = " + str(ka) +
           " (its last dimension), " + input_shaped(1) + " gives K = " + str(kb) +
           (b.size() == 1 ? " (its only dimension)" : " (its second-to-last dimension)"));
    }
    const std::vector<int64_t> ba(a.begin(), a.end() - std::min<ptrdiff_t>(2, ptrdiff_t(a.size())));
    const std::vector<int64_t> bb(b.begin(), b.end() - std::min<ptrdiff_t>(2, ptrdiff_t(b.size())));
    int64_t da = 0, db = 0;
    if (!broadcastable(ba, bb, &da, &db)) {
      fail("the batch dimensions " + str(ba) + " of " + input_shaped(0) + " and " + str(bb) +
           " of " + input_shaped(1) + " do not broadcast: " + str(da) + " against " + str(db));
    }
  }

  /// LSTM and GRU: X [T, B, I] (or batch first), W [D, gates*H, I], R [D, gates*H, H], the bias,
  /// initial states and LSTM's peepholes against them, the activations' count and names.
  void recurrent() {
    const bool gru = op_ == "GRU";
    const int64_t gates = gru ? 3 : 4, acts = gru ? 2 : 3;
    const std::string gs = str(gates);
    const std::vector<int64_t>& x = shape(0);
    if (x.size() != 3)
      fail(input_shaped(0) + " has rank " + str(rank(0)) + "; " + op_ + " takes rank 3");
    const int64_t layout = attr_i("layout", 0);
    if (layout != 0 && layout != 1)
      fail("attribute 'layout' is " + str(layout) + "; it must be 0 or 1");
    const std::string dir = attr_s("direction", "forward");
    if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
      fail("attribute 'direction' is '" + dir + "'; it must be forward, reverse or bidirectional");
    }
    const int64_t dirs = dir == "bidirectional" ? 2 : 1;
    const int64_t batch = layout == 0 ? x[1] : x[0];
    const std::vector<int64_t>& w = shape(1);
    if (w.size() != 3)
      fail(input_shaped(1) + " has rank " + str(rank(1)) + "; W is [num_directions, " + gs +
           "*hidden_size, input_size]");
    int64_t hidden = 0;
    if (attr("hidden_size") != nullptr) {
      hidden = attr_i("hidden_size", 0);
      if (hidden < 1) fail("attribute 'hidden_size' must be positive, got " + str(hidden));
    } else {
      if (w[1] < gates || w[1] % gates != 0) {
        fail(input_shaped(1) + " has " + str(w[1]) + " rows in dimension 1, which is not " + gs +
             " * hidden_size");
      }
      hidden = w[1] / gates;
    }
    const std::string sizes = "num_directions " + str(dirs) + " (direction '" + dir +
                              "'), hidden_size " + str(hidden) + ", input_size " + str(x[2]) +
                              ", batch " + str(batch) + " from " + input_shaped(0);
    auto expect = [&](size_t i, const std::vector<int64_t>& want) {
      if (has(i) && shape(i) != want)
        fail(input_shaped(i) + " must be " + str(want) + " (" + sizes + ")");
    };
    const std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{dirs, batch, hidden}
                                                   : std::vector<int64_t>{batch, dirs, hidden};
    expect(1, {dirs, gates * hidden, x[2]});
    expect(2, {dirs, gates * hidden, hidden});
    expect(3, {dirs, 2 * gates * hidden});
    expect(4, {batch});
    expect(5, state);
    if (!gru) {
      expect(6, state);
      expect(7, {dirs, 3 * hidden});
    }
    if (const AttributeProto* act = attr("activations")) {
      static const std::set<std::string> kKnown = {
          "Affine",  "Elu",      "HardSigmoid", "LeakyRelu", "Relu",           "ScaledTanh",
          "Sigmoid", "Softplus", "Softsign",    "Tanh",      "ThresholdedRelu"};
      if (act->strings_size() != acts * dirs) {
        fail("attribute 'activations' has " + str(act->strings_size()) + " functions; direction '" +
             dir + "' needs " + str(acts * dirs) +
             (gru ? " (f, g per direction)" : " (f, g, h per direction)"));
      }
      for (const std::string& f : act->strings()) {
        if (!kKnown.count(f))
          fail("attribute 'activations' names '" + f + "', not an activation function of " + op_);
      }
    }
  }

  void concat() {
    const int64_t r = rank(0);
    if (r == 0) fail(input(0) + " is a scalar; Concat takes tensors of rank 1 or more");
    const int64_t axis = axis_in(attr_i("axis", 0), r, "attribute 'axis'", input(0));
    for (size_t i = 1; i < in_.size(); ++i) {
      if (rank(i) != r) {
        fail(input_shaped(i) + " has rank " + str(rank(i)) + ", but " + input_shaped(0) +
             " has rank " + str(r));
      }
      for (int64_t d = 0; d < r; ++d) {
        const int64_t a = shape(0)[static_cast<size_t>(d)], b = shape(i)[static_cast<size_t>(d)];
        if (d != axis && a != b) {
          fail(input_shaped(i) + " differs from " + input_shaped(0) + " in dimension " + str(d) +
               " (" + str(b) + " against " + str(a) + "); only dimension " + str(axis) +
               " (attribute 'axis') may differ");
        }
      }
    }
  }

  void reshape() {
    const int64_t allowzero = attr_i("allowzero", 0);
    if (allowzero != 0 && allowzero != 1) {
      fail("attribute 'allowzero' is " + str(allowzero) + "; it must be 0 or 1");
    }
    const std::optional<std::vector<int64_t>> target = const_ints(1);
    if (!target) return;  // the importer needs it constant and says so
    if (rank(1) != 1) fail(input_shaped(1) + " must be 1-D");
    const std::vector<int64_t>& x = shape(0);
    const std::vector<int64_t>& s = *target;
    const std::string what = input(1) + " " + str(s);
    int64_t infer = -1, known = 1, total = 1;
    for (int64_t d : x) total *= d;
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      if (d < -1) fail(what + " holds " + str(d) + "; a dimension is -1, 0 or positive");
      if (d == -1) {
        if (infer >= 0) fail(what + " holds -1 twice; at most one dimension can be inferred");
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (d == 0 && allowzero == 0) {
        if (i >= x.size()) {
          fail(what + " holds 0 at index " + str(static_cast<int64_t>(i)) + ", which copies " +
               "dimension " + str(static_cast<int64_t>(i)) + " of " + input_shaped(0) +
               ", but it has rank " + str(rank(0)));
        }
        d = x[i];
      }
      known *= d;
    }
    if (allowzero == 1 && infer >= 0 && std::count(s.begin(), s.end(), 0) > 0) {
      fail(what + " holds both -1 and 0, which allowzero = 1 forbids");
    }
    if (infer >= 0) {
      if (known == 0) {
        fail(what + ": the -1 cannot be inferred, the other dimensions multiply to 0 (" +
             input_shaped(0) + " has " + str(total) + " elements)");
      }
      if (total % known != 0) {
        fail(what + ": " + input_shaped(0) + " has " + str(total) + " elements, which the other " +
             "dimensions (" + str(known) + " elements) do not divide");
      }
      return;
    }
    if (known != total) {
      fail(what + " has " + str(known) + " elements, but " + input_shaped(0) + " has " +
           str(total));
    }
  }

  void transpose() {
    const int64_t r = rank(0);
    if (attr("perm") == nullptr) return;
    const std::vector<int64_t> perm = attr_ints("perm", {});
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    bool ok = static_cast<int64_t>(perm.size()) == r;
    for (int64_t i = 0; ok && i < r; ++i) ok = sorted[static_cast<size_t>(i)] == i;
    if (!ok) {
      fail("attribute 'perm' " + str(perm) + " is not a permutation of 0.." + str(r - 1) + " (" +
           input_shaped(0) + " has rank " + str(r) + ")");
    }
  }

  void squeeze(bool unsqueeze) {
    std::optional<std::vector<int64_t>> axes;
    std::string what = "attribute 'axes'";
    if (opset_ < 13) {
      if (attr("axes") != nullptr) axes = attr_ints("axes", {});
    } else if (has(1)) {
      axes = const_ints(1);
      what = input(1);
      if (axes && rank(1) != 1) fail(input_shaped(1) + " must be 1-D");
    }
    if (!axes) return;  // Squeeze: every dimension of size 1; Unsqueeze: the schema requires it
    const int64_t r = rank(0) + (unsqueeze ? static_cast<int64_t>(axes->size()) : 0);
    const std::string against = unsqueeze ? "the output (" + input_shaped(0) + " and " +
                                                str(int64_t(axes->size())) + " new dimensions)"
                                          : input_shaped(0);
    const std::vector<int64_t> norm = axes_in(*axes, r, what, against);
    if (unsqueeze) return;
    for (int64_t a : norm) {
      const int64_t d = shape(0)[static_cast<size_t>(a)];
      if (d != 1) {
        fail(what + " " + str(*axes) + " squeezes dimension " + str(a) + " of " + input_shaped(0) +
             ", which has size " + str(d) + ", not 1");
      }
    }
  }

  void slice() {
    const int64_t r = rank(0);
    const std::optional<std::vector<int64_t>> starts = const_ints(1), ends = const_ints(2);
    std::optional<std::vector<int64_t>> axes = const_ints(3), steps = const_ints(4);
    if (!starts || !ends || (has(3) && !axes) || (has(4) && !steps)) return;
    for (size_t i = 1; i <= 4; ++i) {
      if (has(i) && rank(i) != 1) fail(input_shaped(i) + " must be 1-D");
    }
    const int64_t n = static_cast<int64_t>(starts->size());
    for (size_t i = 2; i <= 4; ++i) {
      if (has(i) && value(i).num_elements() != n) {
        fail(input_shaped(i) + " has " + str(value(i).num_elements()) + " values, but " +
             input_shaped(1) + " has " + str(n));
      }
    }
    if (!axes) {
      if (n > r) {
        fail(input_shaped(1) + " has " + str(n) + " values, more than the " + str(r) +
             " dimensions of " + input_shaped(0));
      }
      return;
    }
    axes_in(*axes, r, input(3), input_shaped(0));
    for (size_t i = 0; steps && i < steps->size(); ++i) {
      if ((*steps)[i] == 0) fail(input(4) + " " + str(*steps) + " holds a step of 0");
    }
  }

  void pad() {
    const std::string mode = attr_s("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge") {
      fail("attribute 'mode' is '" + mode + "'; Pad at opset " + str(opset_) +
           " takes constant, reflect or edge");
    }
    if (has(2) && value(2).num_elements() > 1) {
      fail(input_shaped(2) + " must be a scalar (the padding value)");
    }
    const std::optional<std::vector<int64_t>> pads = const_ints(1);
    std::optional<std::vector<int64_t>> axes = const_ints(3);
    if (!pads || (has(3) && !axes)) return;
    if (rank(1) != 1) fail(input_shaped(1) + " must be 1-D");
    const int64_t r = rank(0);
    std::vector<int64_t> dims;
    if (axes) {
      if (rank(3) != 1) fail(input_shaped(3) + " must be 1-D");
      dims = axes_in(*axes, r, input(3), input_shaped(0));
    } else {
      for (int64_t i = 0; i < r; ++i) dims.push_back(i);
    }
    const size_t m = dims.size();
    if (pads->size() != 2 * m) {
      fail(input(1) + " " + str(*pads) + " has " + str(int64_t(pads->size())) + " values, but " +
           (axes ? input(3) + " names " + str(int64_t(m)) + " axes"
                 : input_shaped(0) + " has rank " + str(r)) +
           ": it needs " + str(int64_t(2 * m)) + " (a begin and an end per axis)");
    }
    for (size_t i = 0; i < m; ++i) {
      const int64_t d = shape(0)[static_cast<size_t>(dims[i])];
      const int64_t out = d + (*pads)[i] + (*pads)[i + m];
      if (out < 0) {
        fail(input(1) + " " + str(*pads) + " removes more than the " + str(d) + " elements of " +
             input_shaped(0) + " in dimension " + str(dims[i]));
      }
    }
  }

  /// An int attribute that is a flag: 0 or 1.
  /// QuantizeLinear / DequantizeLinear: the scale a scalar (per tensor) or, from opset 13, a 1-D
  /// tensor of x's size along `axis` (per axis); the zero point of the scale's shape; an int32 x
  /// (a bias) dequantized with a zero point of 0 only; a constant scale positive.
  void quantize_linear() {
    const bool per_axis = rank(1) == 1;
    if (rank(1) > 1 || (per_axis && opset_ < 13)) {
      fail(input_shaped(1) + " must be a scalar" +
           (opset_ < 13 ? " at opset " + str(opset_) + " (per-axis scales need opset 13)"
                        : std::string(" or a 1-D tensor (per axis)")));
    }
    if (per_axis) {
      const int64_t axis = axis_in(attr_i("axis", 1), rank(0), "attribute 'axis'", input(0));
      if (shape(1)[0] != shape(0)[static_cast<size_t>(axis)]) {
        fail(input_shaped(1) + " has " + str(shape(1)[0]) + " scales, but " + input_shaped(0) +
             " has " + str(shape(0)[static_cast<size_t>(axis)]) + " elements along axis " +
             str(axis));
      }
    }
    if (has(2) && shape(2) != shape(1)) {
      fail(input_shaped(2) + " must have the shape of " + input_shaped(1));
    }
    if (value(1).is_constant()) {
      const runtime::NDArray& s = *value(1).data;
      for (int64_t i = 0; i < s.num_elements(); ++i) {
        const double v = element_as_double(s, i);
        if (!(v > 0.0) || !std::isfinite(v)) {
          fail(input(1) + " holds " + std::to_string(v) + " at index " + str(i) +
               "; scales must be positive and finite");
        }
      }
    }
    if (op_ == "DequantizeLinear" && runtime::dtype_equal(value(0).dtype, runtime::kInt32) &&
        has(2) && value(2).is_constant()) {
      for (int64_t i = 0; i < value(2).num_elements(); ++i) {
        if (element_as_double(*value(2).data, i) != 0.0) {
          fail(input(2) + " must be 0 for an int32 " + input(0) +
               " (ONNX: int32 has no zero "
               "point)");
        }
      }
    }
  }

  int64_t flag(const std::string& name, int64_t dflt) const {
    const int64_t v = attr_i(name, dflt);
    if (v != 0 && v != 1) fail("attribute '" + name + "' is " + str(v) + "; it must be 0 or 1");
    return v;
  }

  /// The Reduce* operators: axes (attribute, or input 1 from opset 18 / ReduceSum 13) in range and
  /// none twice; keepdims and noop_with_empty_axes flags.
  void reduction() {
    flag("keepdims", 1);
    if (axes_is_input(op_, opset_)) {
      flag("noop_with_empty_axes", 0);
      if (!has(1)) return;
      if (rank(1) != 1) fail(input_shaped(1) + " must be 1-D (a list of axes)");
      if (const auto axes = const_ints(1)) axes_in(*axes, rank(0), input(1), input(0));
      return;
    }
    axes_in(attr_ints("axes", {}), rank(0), "attribute 'axes'", input(0));
  }

  void arg_reduction() {
    const int64_t ax = axis_in(attr_i("axis", 0), rank(0), "attribute 'axis'", input(0));
    flag("keepdims", 1);
    flag("select_last_index", 0);
    if (shape(0)[static_cast<size_t>(ax)] == 0) {
      fail(input_shaped(0) + " has no elements along axis " + str(ax) + "; " + op_ +
           " has no index to give");
    }
  }

  /// PRelu: the slope broadcasts to X in one direction (the output has X's shape).
  void prelu() {
    const auto &x = shape(0), &slope = shape(1);
    bool ok = slope.size() <= x.size();
    for (size_t i = 1; ok && i <= slope.size(); ++i) {
      const int64_t sd = slope[slope.size() - i], xd = x[x.size() - i];
      ok = sd == xd || sd == 1;
    }
    if (!ok) {
      fail(input_shaped(1) + " does not broadcast to " + input_shaped(0) +
           " (the slope must broadcast to X's shape)");
    }
  }

  /// Expand: input 1 a 1-D shape that input 0 broadcasts with.
  void expand() {
    if (rank(1) != 1) fail(input_shaped(1) + " must be 1-D (a shape)");
    const auto dims = const_ints(1);
    if (!dims) return;
    for (int64_t d : *dims) {
      if (d < 0) fail(input(1) + " is " + str(*dims) + "; a dimension must not be negative");
    }
    int64_t da = 0, db = 0;
    if (!broadcastable(shape(0), *dims, &da, &db)) {
      fail(input_shaped(0) + " does not broadcast with the shape " + str(*dims) + " of " +
           input(1) + ": " + str(da) + " against " + str(db));
    }
  }

  /// Resize: the modes Kiln does (nearest, linear, cubic; not tf_crop_and_resize, not
  /// antialias), exactly one of scales and sizes, a constant, one value per resized axis,
  /// positive.
  void resize() {
    const std::string mode = attr_s("mode", "nearest");
    if (mode != "nearest" && mode != "linear" && mode != "cubic") {
      fail("attribute 'mode' is '" + mode + "'; it must be nearest, linear or cubic");
    }
    const std::string coord = attr_s("coordinate_transformation_mode", "half_pixel");
    if (coord == "tf_crop_and_resize") {
      fail(
          "attribute 'coordinate_transformation_mode' is 'tf_crop_and_resize', which Kiln does "
          "not support (half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
          "tf_half_pixel_for_nearest)");
    }
    if (coord != "half_pixel" && coord != "pytorch_half_pixel" && coord != "align_corners" &&
        coord != "asymmetric" && coord != "tf_half_pixel_for_nearest") {
      fail("attribute 'coordinate_transformation_mode' is '" + coord +
           "'; it must be half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
           "tf_half_pixel_for_nearest or tf_crop_and_resize");
    }
    const std::string nearest = attr_s("nearest_mode", "round_prefer_floor");
    if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
        nearest != "ceil") {
      fail("attribute 'nearest_mode' is '" + nearest +
           "'; it must be round_prefer_floor, round_prefer_ceil, floor or ceil");
    }
    if (attr_i("antialias", 0) != 0) {
      fail("attribute 'antialias' is " + str(attr_i("antialias", 0)) +
           ", which Kiln does not support (only 0)");
    }
    const std::string policy = attr_s("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      fail("attribute 'keep_aspect_ratio_policy' is '" + policy +
           "'; it must be stretch, not_larger or not_smaller");
    }
    flag("exclude_outside", 0);
    if (mode != "nearest" && value(0).dtype.code != kKilnFloat) {
      fail(input(0) + " is " + onnx_type_string(value(0).dtype) + "; Kiln does " + mode +
           " Resize on floating-point tensors only");
    }
    const int64_t r = rank(0);
    std::vector<int64_t> axes;
    if (attr("axes") != nullptr) {
      axes = axes_in(attr_ints("axes", {}), r, "attribute 'axes'", input(0));
    } else {
      for (int64_t d = 0; d < r; ++d) axes.push_back(d);
    }
    const bool scales = has(2) && value(2).num_elements() > 0;
    const bool sizes = has(3) && value(3).num_elements() > 0;
    if (scales == sizes) {
      fail(scales ? "gives both input 2 (scales) and input 3 (sizes); Resize takes one of them"
                  : "gives neither input 2 (scales) nor input 3 (sizes); Resize needs one of them");
    }
    const size_t i = scales ? 2 : 3;
    if (!value(i).is_constant()) {
      fail(input(i) + " is not a constant, which Kiln does not support: it needs the " +
           (scales ? "scales" : "sizes") + " at compile time (static shapes)");
    }
    if (rank(i) != 1 || shape(i)[0] != static_cast<int64_t>(axes.size())) {
      fail(input_shaped(i) + " must hold one value per resized axis (" +
           str(static_cast<int64_t>(axes.size())) + ") of " + input_shaped(0));
    }
    for (int64_t k = 0; k < value(i).num_elements(); ++k) {
      const double v = element_as_double(*value(i).data, k);
      if (!(v > 0)) {
        std::ostringstream os;
        os << v;
        fail(input(i) + " holds " + os.str() + "; each " + (scales ? "scale" : "size") +
             " must be positive");
      }
    }
  }

  /// Tile: input 1 holds one non-negative repeat count per dimension of input 0.
  void tile() {
    if (rank(1) != 1) fail(input_shaped(1) + " must be 1-D (one repeat count per axis)");
    if (shape(1)[0] != rank(0)) {
      fail(input_shaped(1) + " has " + str(shape(1)[0]) + " repeat counts, but " + input_shaped(0) +
           " has rank " + str(rank(0)));
    }
    if (const auto reps = const_ints(1)) {
      for (int64_t r : *reps) {
        if (r < 0) fail(input(1) + " is " + str(*reps) + "; a repeat count must not be negative");
      }
    }
  }

  /// Split: the sizes (attribute before opset 13, input 1 after) sum to the axis and there is one
  /// per output; num_outputs (opset 18) at most the axis; without either, the axis divides evenly.
  void split() {
    const int64_t axis = axis_in(attr_i("axis", 0), rank(0), "attribute 'axis'", input(0));
    const int64_t dim = shape(0)[static_cast<size_t>(axis)];
    const int64_t outs = n_.output_size();
    const std::string along = "dimension " + str(axis) + " of " + input_shaped(0);
    std::optional<std::vector<int64_t>> sizes;
    std::string what;
    if (opset_ < 13 && attr("split") != nullptr) {
      sizes = attr_ints("split", {});
      what = "attribute 'split'";
    } else if (opset_ >= 13 && has(1)) {
      if (rank(1) != 1) fail(input_shaped(1) + " must be 1-D (one size per output)");
      sizes = const_ints(1);
      what = input(1);
      if (!sizes) return;
    }
    if (attr("num_outputs") != nullptr) {
      if (sizes) fail("attribute 'num_outputs' and " + what + " cannot be used together");
      const int64_t n = attr_i("num_outputs", 0);
      if (n < 1 || n != outs) {
        fail("attribute 'num_outputs' is " + str(n) + ", but the node has " + str(outs) +
             " outputs");
      }
      if (n > dim && dim > 0) fail("attribute 'num_outputs' is " + str(n) + ", more than " + along);
      return;
    }
    if (sizes) {
      if (static_cast<int64_t>(sizes->size()) != outs) {
        fail(what + " is " + str(*sizes) + ", " + str(static_cast<int64_t>(sizes->size())) +
             " sizes for " + str(outs) + " outputs");
      }
      int64_t total = 0;
      for (int64_t v : *sizes) {
        if (v < 0) fail(what + " is " + str(*sizes) + "; a size must not be negative");
        total += v;
      }
      if (total != dim)
        fail(what + " is " + str(*sizes) + ", which sums to " + str(total) + ", but " + along +
             " is " + str(dim));
      return;
    }
    if (opset_ >= 18) {
      fail(
          "gives neither input 1 (split) nor attribute 'num_outputs'; Split at opset 18 needs "
          "one of them");
    }
    if (dim % outs != 0) {
      fail(along + " does not split into " + str(outs) + " equal parts (" + str(dim) + " is not " +
           "a multiple of " + str(outs) + ")");
    }
  }

  /// LayerNormalization: axis in range; Scale and B broadcast to X's normalized dimensions
  /// (those from axis on).
  void layer_norm() {
    const int64_t axis = axis_in(attr_i("axis", -1), rank(0), "attribute 'axis'", input(0));
    const std::vector<int64_t> norm(shape(0).begin() + axis, shape(0).end());
    for (size_t i : {size_t{1}, size_t{2}}) {
      if (!has(i)) continue;
      const auto& p = shape(i);
      bool ok = p.size() <= norm.size();
      for (size_t k = 1; ok && k <= p.size(); ++k) {
        ok = p[p.size() - k] == norm[norm.size() - k] || p[p.size() - k] == 1;
      }
      if (!ok) {
        fail(input_shaped(i) + " does not broadcast to " + str(norm) + ", the dimensions of " +
             input_shaped(0) + " from axis " + str(axis) + " on");
      }
    }
  }

  /// InstanceNormalization: N x C x D1 x ... input, scale and B of C elements each.
  void instance_norm() {
    if (rank(0) < 3) {
      fail(input_shaped(0) + " has rank " + str(rank(0)) +
           "; InstanceNormalization takes N x C x D1 x ... (rank 3 or more)");
    }
    const int64_t ch = shape(0)[1];
    for (size_t i : {size_t{1}, size_t{2}}) {
      if (shape(i) != std::vector<int64_t>{ch}) {
        fail(input_shaped(i) + " must be 1-D of size C = " + str(ch) + " (the channels of " +
             input_shaped(0) + ")");
      }
    }
  }

  /// ConstantOfShape: input 0 a 1-D shape of non-negative dimensions; value a single element.
  void constant_of_shape() {
    if (rank(0) != 1) fail(input_shaped(0) + " must be 1-D (a shape)");
    if (const auto dims = const_ints(0)) {
      for (int64_t d : *dims) {
        if (d < 0) fail(input(0) + " is " + str(*dims) + "; a dimension must not be negative");
      }
    }
    if (const AttributeProto* v = attr("value")) {
      int64_t count = 1;
      for (int64_t d : v->t().dims()) count *= d;
      if (count != 1) {
        fail("attribute 'value' holds " + str(count) + " elements; it must hold exactly one");
      }
    }
  }

  /// Einsum: the equation parses for the operands' ranks and its axes' sizes agree
  /// (topi/einsum.h says what it accepts).
  void einsum() {
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i = 0; i < in_.size(); ++i) shapes.push_back(shape(i));
    try {
      topi::einsum_shape(attr_s("equation", ""), shapes);
    } catch (const Error& e) {
      std::string why = e.what();
      if (why.rfind("error: ", 0) == 0) why.erase(0, 7);
      fail("attribute 'equation': " + why);
    }
  }

  /// GatherElements: indices of data's rank, no larger than data off the axis (the output has
  /// the indices' shape and reads data at their coordinates), constant indices in range.
  void gather_elements() {
    const int64_t r = rank(0);
    if (r == 0) fail(input(0) + " is a scalar; GatherElements takes data of rank 1 or more");
    const int64_t axis = axis_in(attr_i("axis", 0), r, "attribute 'axis'", input(0));
    if (rank(1) != r) {
      fail(input_shaped(1) + " has rank " + str(rank(1)) + ", but " + input_shaped(0) +
           " has rank " + str(r) + "; they must agree");
    }
    for (int64_t d = 0; d < r; ++d) {
      const size_t du = static_cast<size_t>(d);
      if (d != axis && shape(1)[du] > shape(0)[du]) {
        fail(input_shaped(1) + " is larger than " + input_shaped(0) + " in dimension " + str(d) +
             " (" + str(shape(1)[du]) + " > " + str(shape(0)[du]) + ")");
      }
    }
    if (const auto idx = const_ints(1)) {
      const int64_t dim = shape(0)[static_cast<size_t>(axis)];
      for (int64_t j : *idx) {
        if (j < -dim || j >= dim) {
          fail(input(1) + " holds index " + str(j) + ", out of range [" + str(-dim) + ", " +
               str(dim - 1) + "] for dimension " + str(axis) + " of " + input_shaped(0));
        }
      }
    }
  }

  void gather() {
    const int64_t r = rank(0);
    if (r == 0) fail(input(0) + " is a scalar; Gather takes data of rank 1 or more");
    const int64_t axis = axis_in(attr_i("axis", 0), r, "attribute 'axis'", input(0));
    const std::optional<std::vector<int64_t>> indices = const_ints(1);
    if (!indices) return;
    const int64_t dim = shape(0)[static_cast<size_t>(axis)];
    for (int64_t j : *indices) {
      if (j < -dim || j >= dim) {
        fail(input(1) + " holds index " + str(j) + ", out of range [" + str(-dim) + ", " +
             str(dim - 1) + "] for dimension " + str(axis) + " of " + input_shaped(0));
      }
    }
  }

  void dropout() {
    for (size_t i : {size_t{1}, size_t{2}}) {
      if (has(i) && value(i).num_elements() != 1) fail(input_shaped(i) + " must be a scalar");
    }
    if (has(1) && value(1).is_constant()) {
      const double ratio = element_as_double(*value(1).data, 0);
      if (!(ratio >= 0.0 && ratio < 1.0)) {
        std::ostringstream os;
        os << ratio;
        fail(input(1) + " is " + os.str() + "; the ratio must be in [0, 1)");
      }
    }
  }

  const NodeProto& n_;
  const int64_t opset_;
  const std::vector<const Value*>& in_;
  const std::string& origin_;
  const std::string where_;
  const std::string op_;
  const onnx::OpSchema* schema_ = nullptr;
};

}  // namespace

std::vector<int64_t> window_pads(const std::string& auto_pad, const std::vector<int64_t>& pads,
                                 const std::vector<int64_t>& in, const std::vector<int64_t>& extent,
                                 const std::vector<int64_t>& strides) {
  const size_t k = in.size();
  if (auto_pad == "NOTSET") return pads;
  std::vector<int64_t> out(2 * k, 0);
  if (auto_pad == "VALID") return out;
  for (size_t i = 0; i < k; ++i) {
    const int64_t size = (in[i] + strides[i] - 1) / strides[i];
    const int64_t total = std::max<int64_t>(0, (size - 1) * strides[i] + extent[i] - in[i]);
    const int64_t small = total / 2, large = total - small;
    out[i] = auto_pad == "SAME_UPPER" ? small : large;
    out[i + k] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return out;
}

void validate_node(const NodeProto& node, int64_t opset, const std::vector<const Value*>& inputs,
                   const std::string& origin) {
  NodeCheck(node, opset, inputs, origin).run();
}

}  // namespace kiln::graph::onnx_detail
