// The shape operators: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile, the
// LayoutTransform that alter_layout inserts, and those the importer computes into constants:
// Constant, Shape, Size, ConstantOfShape, Range.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/graph/tensor_limits.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/nn.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

/// Reshape, Flatten, Squeeze, Unsqueeze: the same elements in the output's shape.
LowerResult lower_reshape(const LowerCtx& c) {
  return injective_result(topi::reshape(c.input(0), c.out_value().shape, sanitize(c.node.op)));
}

LowerResult lower_transpose(const LowerCtx& c) {
  return injective_result(topi::transpose(c.input(0), c.node.ints("perm")));
}

LowerResult lower_layout_transform(const LowerCtx& c) {
  const Node& n = c.node;
  return injective_result(topi::layout_transform(c.input(0), static_cast<int>(n.i("src_block")),
                                                 static_cast<int>(n.i("dst_block")),
                                                 n.i("channels", 0)));
}

LowerResult lower_expand(const LowerCtx& c) {
  return injective_result(topi::broadcast_to(c.input(0), c.out_value().shape, "expand"));
}

LowerResult lower_tile(const LowerCtx& c) {
  return injective_result(topi::tile(c.input(0), c.node.ints("repeats"), "tile"));
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_reshape(const NodeCheck& nc) {
  const int64_t allowzero = nc.attr_i("allowzero", 0);
  if (allowzero != 0 && allowzero != 1) {
    nc.fail("attribute 'allowzero' is " + str(allowzero) + "; it must be 0 or 1");
  }
  const std::optional<std::vector<int64_t>> target = nc.const_ints(1);
  if (!target) return;  // the importer needs it constant and says so
  if (nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D");
  const std::vector<int64_t>& x = nc.shape(0);
  const std::vector<int64_t>& s = *target;
  const std::string what = nc.input(1) + " " + str(s);
  int64_t infer = -1, known = 1, total = 1;
  for (int64_t d : x) total *= d;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t d = s[i];
    if (d < -1) nc.fail(what + " holds " + str(d) + "; a dimension is -1, 0 or positive");
    if (d == -1) {
      if (infer >= 0) nc.fail(what + " holds -1 twice; at most one dimension can be inferred");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d == 0 && allowzero == 0) {
      if (i >= x.size()) {
        nc.fail(what + " holds 0 at index " + str(static_cast<int64_t>(i)) + ", which copies " +
                "dimension " + str(static_cast<int64_t>(i)) + " of " + nc.input_shaped(0) +
                ", but it has rank " + str(nc.rank(0)));
      }
      d = x[i];
    }
    known *= d;
  }
  if (allowzero == 1 && infer >= 0 && std::count(s.begin(), s.end(), 0) > 0) {
    nc.fail(what + " holds both -1 and 0, which allowzero = 1 forbids");
  }
  if (infer >= 0) {
    if (known == 0) {
      nc.fail(what + ": the -1 cannot be inferred, the other dimensions multiply to 0 (" +
              nc.input_shaped(0) + " has " + str(total) + " elements)");
    }
    if (total % known != 0) {
      nc.fail(what + ": " + nc.input_shaped(0) + " has " + str(total) +
              " elements, which the other " + "dimensions (" + str(known) +
              " elements) do not divide");
    }
    return;
  }
  if (known != total) {
    nc.fail(what + " has " + str(known) + " elements, but " + nc.input_shaped(0) + " has " +
            str(total));
  }
}

void check_transpose(const NodeCheck& nc) {
  const int64_t r = nc.rank(0);
  if (nc.attr("perm") == nullptr) return;
  const std::vector<int64_t> perm = nc.attr_ints("perm", {});
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int64_t>(perm.size()) == r;
  for (int64_t i = 0; ok && i < r; ++i) ok = sorted[static_cast<size_t>(i)] == i;
  if (!ok) {
    nc.fail("attribute 'perm' " + str(perm) + " is not a permutation of 0.." + str(r - 1) + " (" +
            nc.input_shaped(0) + " has rank " + str(r) + ")");
  }
}

void check_squeeze(const NodeCheck& nc, bool unsqueeze) {
  std::optional<std::vector<int64_t>> axes;
  std::string what = "attribute 'axes'";
  if (nc.opset() < 13) {
    if (nc.attr("axes") != nullptr) axes = nc.attr_ints("axes", {});
  } else if (nc.has(1)) {
    axes = nc.const_ints(1);
    what = nc.input(1);
    if (axes && nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D");
  }
  if (!axes) return;  // Squeeze: every dimension of size 1; Unsqueeze: the schema requires it
  const int64_t r = nc.rank(0) + (unsqueeze ? static_cast<int64_t>(axes->size()) : 0);
  const std::string against = unsqueeze ? "the output (" + nc.input_shaped(0) + " and " +
                                              str(int64_t(axes->size())) + " new dimensions)"
                                        : nc.input_shaped(0);
  const std::vector<int64_t> norm = nc.axes_in(*axes, r, what, against);
  if (unsqueeze) return;
  for (int64_t a : norm) {
    const int64_t d = nc.shape(0)[static_cast<size_t>(a)];
    if (d != 1) {
      nc.fail(what + " " + str(*axes) + " squeezes dimension " + str(a) + " of " +
              nc.input_shaped(0) + ", which has size " + str(d) + ", not 1");
    }
  }
}

void check_squeeze_op(const NodeCheck& nc) { check_squeeze(nc, false); }
void check_unsqueeze(const NodeCheck& nc) { check_squeeze(nc, true); }

/// Expand: input 1 a 1-D shape that input 0 broadcasts with.
void check_expand(const NodeCheck& nc) {
  if (nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D (a shape)");
  const auto dims = nc.const_ints(1);
  if (!dims) return;
  for (int64_t d : *dims) {
    if (d < 0) nc.fail(nc.input(1) + " is " + str(*dims) + "; a dimension must not be negative");
  }
  int64_t da = 0, db = 0;
  if (!broadcastable(nc.shape(0), *dims, &da, &db)) {
    nc.fail(nc.input_shaped(0) + " does not broadcast with the shape " + str(*dims) + " of " +
            nc.input(1) + ": " + str(da) + " against " + str(db));
  }
}

/// Tile: input 1 holds one non-negative repeat count per dimension of input 0.
void check_tile(const NodeCheck& nc) {
  if (nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D (one repeat count per axis)");
  if (nc.shape(1)[0] != nc.rank(0)) {
    nc.fail(nc.input_shaped(1) + " has " + str(nc.shape(1)[0]) + " repeat counts, but " +
            nc.input_shaped(0) + " has rank " + str(nc.rank(0)));
  }
  if (const auto reps = nc.const_ints(1)) {
    for (int64_t r : *reps) {
      if (r < 0)
        nc.fail(nc.input(1) + " is " + str(*reps) + "; a repeat count must not be negative");
    }
  }
}

/// ConstantOfShape: input 0 a 1-D shape of non-negative dimensions; value a single element.
void check_constant_of_shape(const NodeCheck& nc) {
  if (nc.rank(0) != 1) nc.fail(nc.input_shaped(0) + " must be 1-D (a shape)");
  if (const auto dims = nc.const_ints(0)) {
    for (int64_t d : *dims) {
      if (d < 0) nc.fail(nc.input(0) + " is " + str(*dims) + "; a dimension must not be negative");
    }
  }
  if (const onnx::AttributeProto* v = nc.attr("value")) {
    int64_t count = 1;
    for (int64_t d : v->t().dims()) count *= d;
    if (count != 1) {
      nc.fail("attribute 'value' holds " + str(count) + " elements; it must hold exactly one");
    }
  }
}

void check_range(const NodeCheck& nc) {
  for (size_t i = 0; i < 3; ++i) {
    if (nc.value(i).num_elements() != 1 || nc.rank(i) > 1) {
      nc.fail(nc.input_shaped(i) + " must be a scalar");
    }
  }
  return;
}

void check_flatten(const NodeCheck& nc) {
  nc.axis_in(nc.attr_i("axis", 1), nc.rank(0), "attribute 'axis'", nc.input(0), /*extra=*/1);
  return;
}

void check_constant(const NodeCheck& nc) {
  if (nc.node().attribute_size() != 1) {
    nc.fail("has " + str(nc.node().attribute_size()) +
            " attributes; a Constant holds exactly one " +
            "(value, value_float, value_floats, value_int, value_ints, ...)");
  }
  return;
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_reshape(ImportCtx& c) {
  Attrs a;
  // validate_node checked a constant shape; where the shape is computed and the output's type
  // comes from the file's declaration, the element counts are checked here.
  const Value& y = c.first_output();
  if (y.num_elements() != c.in_value(0).num_elements()) {
    c.fail("input 1 ('" + c.proto().input(1) + "') makes the output " + y.type_string() + " (" +
           std::to_string(y.num_elements()) + " elements), but input 0 ('" + c.proto().input(0) +
           "') is " + c.in_value(0).type_string() + " (" +
           std::to_string(c.in_value(0).num_elements()) + " elements)");
  }
  a["shape"] = y.shape;
  c.inputs.resize(1);
  return a;
}

Attrs import_flatten(ImportCtx& c) {
  Attrs a;
  a["axis"] = norm_axis(c.attr_i("axis", 1), c.in_rank(0));
  return a;
}

Attrs import_transpose(ImportCtx& c) {
  Attrs a;
  const int64_t rank = c.in_rank(0);
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = rank - 1 - i;
  a["perm"] = c.attr_ints("perm", perm);
  return a;
}

Attrs import_squeeze(ImportCtx& c) {
  Attrs a;
  const std::string& op = c.op();
  std::vector<int64_t> axes;
  const bool have = c.opset() < 13 ? c.attr("axes") != nullptr : c.in(1) != kNoValue;
  if (have) axes = c.opset() < 13 ? c.attr_ints("axes", {}) : c.const_ints(1, "axes");
  const int64_t rank = op == "Squeeze" ? c.in_rank(0) : c.in_rank(0) + int64_t(axes.size());
  if (op == "Squeeze" && !have) {
    const auto& s = c.in_value(0).shape;
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) axes.push_back(static_cast<int64_t>(d));
    }
  }
  for (int64_t& ax : axes) ax = norm_axis(ax, rank);
  std::sort(axes.begin(), axes.end());
  a["axes"] = axes;
  c.inputs.resize(1);
  return a;
}

Attrs import_expand(ImportCtx& c) {
  Attrs a;
  c.inputs.resize(1);  // the output's shape is the broadcast of the two
  return a;
}

Attrs import_tile(ImportCtx& c) {
  Attrs a;
  a["repeats"] = c.const_ints(1, "repeats");
  c.inputs.resize(1);
  return a;
}

/// Expand's shape and Tile's repeats are needed at compile time.
void need_shape(const ImportCtx& c) { c.need_constant(1, "shape"); }
void need_repeats(const ImportCtx& c) { c.need_constant(1, "repeats"); }

// --- evaluated at import (no graph node) ------------------------------------------------------

bool evaluate_constant(ImportCtx& c, ImportSink& sink) {
  const onnx::AttributeProto& attr = c.proto().attribute(0);
  const std::string what = "'" + c.origin() + "': " + c.where();
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
    c.fail("Constant attribute '" + attr.name() + "' is not supported");
  }
  sink.define_constant(c.proto().output(0), std::move(data));
  return true;
}

/// Shape (with opset 15's start and end) of input 0, whose shape is static.
bool evaluate_shape(ImportCtx& c, ImportSink& sink) {
  const std::string& out_name = c.proto().output(0);
  if (out_name.empty()) return false;
  const auto& s = c.in_value(0).shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  int64_t start = c.attr_i("start", 0), end = c.attr_i("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> dims(s.begin() + start, s.begin() + end);
  sink.define_constant(out_name,
                       runtime::NDArray::from_vector(dims, {static_cast<int64_t>(dims.size())}));
  return true;
}

bool evaluate_size(ImportCtx& c, ImportSink& sink) {
  const std::string& out_name = c.proto().output(0);
  if (out_name.empty()) return false;
  const int64_t count = c.in_value(0).num_elements();
  sink.define_constant(out_name, runtime::NDArray::from_vector(std::vector<int64_t>{count}, {}));
  return true;
}

/// ConstantOfShape, whose input decides the output's shape: computed into a constant; an error
/// naming the node and the input when its shape is not known at import.
bool evaluate_constant_of_shape(ImportCtx& c, ImportSink& sink) {
  std::vector<int64_t> shape;
  if (c.const_input(0) != nullptr) {
    shape = c.const_ints(0, "input");
  } else {
    // A shape computed from other shapes (Shape -> Slice -> Sub ...): ONNX's data propagation
    // may know it; otherwise the output has no static shape and the node is refused.
    if (!sink.infer_outputs(c, &shape)) {
      c.fail(
          "input 'input' must be a constant (or a shape computed from static shapes): "
          "Kiln needs static shapes");
    }
  }
  for (int64_t d : shape) {
    if (d < 0) c.fail("input 'input' holds a negative dimension " + std::to_string(d));
  }
  runtime::NDArray value = runtime::NDArray::from_vector(std::vector<float>{0.0f}, {1});
  if (const onnx::AttributeProto* v = c.attr("value")) {
    value = tensor_to_ndarray(v->t(), "'" + c.origin() + "': " + c.where() + " attribute 'value'");
  }
  if (std::string why = tensor_size_problem(shape, value.dtype()); !why.empty()) {
    c.fail("output '" + c.proto().output(0) + "' " + why);
  }
  runtime::NDArray data = runtime::NDArray::empty(shape, value.dtype());
  const int64_t elem = runtime::dtype_bytes(value.dtype());
  auto* dst = static_cast<char*>(data.data());
  for (int64_t i = 0; i < data.num_elements(); ++i) {
    std::memcpy(dst + i * elem, value.data(), static_cast<size_t>(elem));
  }
  sink.define_constant(c.proto().output(0), std::move(data));
  return true;
}

/// Range: computed into a constant; its inputs must be constant scalars.
bool evaluate_range(ImportCtx& c, ImportSink& sink) {
  double v[3];
  const char* names[3] = {"start", "limit", "delta"};
  KilnDType t{};
  for (size_t i = 0; i < 3; ++i) {
    const runtime::NDArray& a = c.need_constant(i, names[i]);
    if (a.num_elements() != 1) c.fail(std::string("input '") + names[i] + "' must be a scalar");
    v[i] = element_as_double(a, 0);
    t = a.dtype();
  }
  if (v[2] == 0.0) c.fail("input 'delta' is 0");
  // The count as a double first: a cast of one beyond int64's range would be undefined.
  const double count = std::max(0.0, std::ceil((v[1] - v[0]) / v[2]));
  if (!(count <= static_cast<double>(kMaxTensorElements))) {
    std::ostringstream os;
    os << "output '" << c.proto().output(0) << "' would hold " << count << " elements (from start "
       << v[0] << ", limit " << v[1] << ", delta " << v[2] << "), more than the "
       << kMaxTensorElements
       << " (2^31 - 1) a tensor may hold (kernels index with 32-bit integers)";
    c.fail(os.str());
  }
  const auto n = static_cast<int64_t>(count);
  runtime::NDArray data = runtime::NDArray::empty({n}, t);
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
      c.fail("Range of " + runtime::dtype_to_string(t) + " is not supported");
    }
  }
  sink.define_constant(c.proto().output(0), std::move(data));
  return true;
}

// --- folded at import (all inputs constant) ---------------------------------------------------

/// Reshape, Flatten, Squeeze, Unsqueeze: the same bytes, the inferred shape.
bool fold_reshape(const ImportCtx& c, const Value& ov, runtime::NDArray* result) {
  const runtime::NDArray& x = *c.const_input(0);
  check_folded(c, ov, runtime::dtype_equal(x.dtype(), ov.dtype));
  check_folded(c, ov, ov.num_elements() == x.num_elements());
  *result = runtime::NDArray::empty(ov.shape, ov.dtype);
  if (x.nbytes()) std::memcpy(result->data(), x.data(), static_cast<size_t>(x.nbytes()));
  return true;
}

/// Transpose of a constant: output axis d reads input axis perm[d].
bool fold_transpose(const ImportCtx& c, const Value& ov, runtime::NDArray* result) {
  ImportCtx copy = c;
  const auto perm = std::get<std::vector<int64_t>>(import_transpose(copy).at("perm"));
  return fold_strided_view(c, ov, perm, std::vector<int64_t>(perm.size(), 0),
                           std::vector<int64_t>(perm.size(), 1), result);
}

}  // namespace

void register_shape(Registry& r) {
  struct Reshape {
    const char* op;
    CheckFn check;
    ImportFn import;
  };
  const Reshape reshapes[] = {{"Flatten", check_flatten, import_flatten},
                              {"Reshape", check_reshape, import_reshape},
                              {"Squeeze", check_squeeze_op, import_squeeze},
                              {"Unsqueeze", check_unsqueeze, import_squeeze}};
  for (const auto& [op, check, import] : reshapes) {
    r.add({.name = op,
           .family = "tensor/shape",
           .pattern = OpPattern::kInjective,
           .check = check,
           .import = import,
           .import_fold = fold_reshape,
           .lower = lower_reshape,
           .gpu = GpuStrategy::kInjective});
  }
  r.add({.name = "Tile",
         .family = "tensor/shape",
         .pattern = OpPattern::kInjective,
         .check = check_tile,
         .import = import_tile,
         .constant_inputs = need_repeats,
         .lower = lower_tile,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "Transpose",
         .family = "tensor/shape",
         .pattern = OpPattern::kInjective,
         .check = check_transpose,
         .import = import_transpose,
         .import_fold = fold_transpose,
         .lower = lower_transpose,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "Expand",
         .family = "tensor/shape",
         .pattern = OpPattern::kBroadcast,
         .check = check_expand,
         .import = import_expand,
         .constant_inputs = need_shape,
         .lower = lower_expand,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "LayoutTransform",
         .family = "tensor/shape",
         .origin = Origin::kInternal,
         .internal_note = "alter_layout",
         .pattern = OpPattern::kInjective,
         .fold_constants = false,
         .lower = lower_layout_transform,
         .gpu = GpuStrategy::kInjective});
  struct Computed {
    const char* op;
    CheckFn check;
    EvaluateFn evaluate;
  };
  const Computed computed[] = {
      {"Constant", check_constant, evaluate_constant},
      {"ConstantOfShape", check_constant_of_shape, evaluate_constant_of_shape},
      {"Range", check_range, evaluate_range},
      {"Shape", nullptr, evaluate_shape},
      {"Size", nullptr, evaluate_size}};
  for (const auto& [op, check, evaluate] : computed) {
    r.add({.name = op,
           .family = "tensor/shape",
           .origin = Origin::kImportOnly,
           .import_note = "computed into a constant",
           .check = check,
           .schema_checks_suffice = check == nullptr,
           .evaluate = evaluate});
  }
}

}  // namespace kiln::graph::ops
