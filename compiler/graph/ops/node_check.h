// NodeCheck: the checks of one ONNX node against the ONNX specification, and the accessors the
// family files' operator checks (ops/*) use to name what they find wrong. run() checks what the
// operator's schema says (onnx_validate.cc: input and output counts, attributes and their types,
// element types), then the operator's own rules, its registry entry's `check`. Each failure is a
// kiln::Error naming the node, the operator, the input or attribute, and both values that
// disagree: "node 'conv1' (Conv): input 1 (W 'w') of shape [8,4,3,3] has 4 input channels ...".
#pragma once

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/ops/registry.h"

namespace kiln::graph::ops {

/// "[1,3,8,8]".
inline std::string str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

inline std::string str(int64_t v) { return std::to_string(v); }

/// Whether `a` and `b` broadcast as NumPy does; if not, the two dimensions that disagree.
inline bool broadcastable(const std::vector<int64_t>& a, const std::vector<int64_t>& b, int64_t* da,
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
inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The checks of one node. Input i is `in[i]`, null where the node omits it.
class NodeCheck {
 public:
  NodeCheck(const onnx::NodeProto& n, int64_t opset, const std::vector<const Value*>& in,
            const std::string& origin)
      : n_(n),
        opset_(opset),
        in_(in),
        origin_(origin),
        where_("node '" + n.name() + "' (" + n.op_type() + ")"),
        op_(n.op_type()) {}

  /// The schema's checks, the element types, then the operator's own (its registry entry's).
  void run();

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("error: '" + origin_ + "': " + where_ + ": " + what);
  }

  const std::string& op() const { return op_; }
  int64_t opset() const { return opset_; }
  const onnx::NodeProto& node() const { return n_; }
  /// How many inputs the node lists (omitted ones included).
  size_t num_inputs() const { return in_.size(); }
  /// The operator's schema at the model's opset (run() has found it).
  const onnx::OpSchema& schema() const { return *schema_; }

  /// The schema's name of input i ("X", "W"); variadic inputs share the last one's.
  std::string formal_name(size_t i) const {
    const auto& formals = schema_->inputs();
    if (const Opset18Form* f = opset18();
        f != nullptr && i >= formals.size() && i - formals.size() < f->extra_inputs.size()) {
      return f->extra_inputs[i - formals.size()];
    }
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
  /// The operator's opset-18 form where the model is at opset 18 and libonnx's schema predates
  /// it (the reductions' axes input, Pad's axes, Resize's and Split's new attributes); else null.
  const Opset18Form* opset18() const {
    return opset_ >= 18 && def_ != nullptr && def_->opset18 ? &*def_->opset18 : nullptr;
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

  const onnx::AttributeProto* attr(const std::string& name) const {
    for (const onnx::AttributeProto& a : n_.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  int64_t attr_i(const std::string& name, int64_t dflt) const {
    const onnx::AttributeProto* a = attr(name);
    return a ? a->i() : dflt;
  }
  std::string attr_s(const std::string& name, const std::string& dflt) const {
    const onnx::AttributeProto* a = attr(name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> attr_ints(const std::string& name, std::vector<int64_t> dflt) const {
    const onnx::AttributeProto* a = attr(name);
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
  // --- rules several operators share -----------------------------------------------------------
  /// Add, Sub, Mul, Div, Pow (two inputs), Max, Min (one or more): NumPy broadcasting.
  void broadcast() const {
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
    const std::vector<int64_t> implied = onnx_detail::window_pads(ap, pads, in, *extent, *strides);
    if (attr("pads") != nullptr && pads != implied && op_ != "ConvTranspose") {
      fail("attribute 'pads' is " + str(pads) + ", but attribute 'auto_pad' '" + ap + "' gives " +
           str(implied) + "; the two cannot be used together");
    }
    return implied;
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

  /// An int attribute that is a flag: 0 or 1.
  int64_t flag(const std::string& name, int64_t dflt) const {
    const int64_t v = attr_i(name, dflt);
    if (v != 0 && v != 1) fail("attribute '" + name + "' is " + str(v) + "; it must be 0 or 1");
    return v;
  }

 private:
  void check_schema();
  /// The element type of each input against the schema's type constraints, and inputs that
  /// share a type parameter against each other.
  void check_element_types();

  const onnx::NodeProto& n_;
  const int64_t opset_;
  const std::vector<const Value*>& in_;
  const std::string& origin_;
  const std::string where_;
  const std::string op_;
  const onnx::OpSchema* schema_ = nullptr;
  const OpDef* def_ = nullptr;  ///< the operator's registry entry
};

}  // namespace kiln::graph::ops
