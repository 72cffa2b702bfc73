// The elementwise (unary) operators: activations, math functions, Cast, Clip, Identity; and the
// two the importer removes, Dropout (an alias in inference) and CastLike (a Cast).
#include "compiler/topi/elementwise.h"

#include <cmath>
#include <cstring>
#include <map>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/nn.h"
#include "compiler/topi/transform.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using ir::Expr;
using te::Tensor;

using Unary = Tensor (*)(const Tensor&, const std::string&);

const std::map<std::string, Unary>& unaries() {
  static const std::map<std::string, Unary> m = {
      {"Relu", &topi::relu},
      {"Sigmoid", &topi::sigmoid},
      {"Tanh", &topi::tanh},
      {"Exp", &topi::exp},
      {"Log", &topi::log},
      {"Sqrt", &topi::sqrt},
      {"Abs", &topi::abs},
      {"Neg", &topi::neg},
      // A copy: the front end inserts it where a graph returns an input or a constant.
      {"Identity",
       +[](const Tensor& x, const std::string& name) {
         return topi::elementwise(
             x, [](ir::Expr e) { return e; }, name);
       }},
  };
  return m;
}

/// The operators topi has a function for.
LowerResult lower_unary(const LowerCtx& c) {
  return injective_result(unaries().at(c.node.op)(c.input(0), sanitize(c.node.op)));
}

/// Unary operators with attributes or dtype rules of their own (ONNX's activations and math).
LowerResult lower_unary_math(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  const Tensor& x = c.input(0);
  const ir::DataType t = x->dtype();
  auto k = [t](double v) { return ir::make_const(t, v); };
  std::function<Expr(Expr)> f;
  static const std::map<std::string, std::string> kLibm = {
      {"Erf", "erf"},   {"Sin", "sin"},     {"Cos", "cos"},     {"Tan", "tan"},
      {"Asin", "asin"}, {"Acos", "acos"},   {"Atan", "atan"},   {"Sinh", "sinh"},
      {"Cosh", "cosh"}, {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"},
  };
  if (auto it = kLibm.find(op); it != kLibm.end()) {
    const std::string fn = it->second;
    f = [t, fn](Expr v) { return ir::call(t, fn, {v}, ir::CallKind::kPureIntrinsic); };
  } else if (op == "Floor") {
    f = [](Expr v) { return ir::floor(v); };
  } else if (op == "Ceil") {
    f = [](Expr v) { return ir::ceil(v); };
  } else if (op == "Round") {  // halves to even, as ONNX specifies
    f = [t](Expr v) { return ir::call(t, "roundeven", {v}, ir::CallKind::kPureIntrinsic); };
  } else if (op == "Reciprocal") {
    f = [k](Expr v) { return k(1.0) / v; };
  } else if (op == "Softsign") {
    f = [k](Expr v) { return v / (k(1.0) + ir::abs(v)); };
  } else if (op == "Softplus") {
    // log(1 + exp(x)), which is x itself in float32 once exp(x) dwarfs 1.
    f = [k](Expr v) { return ir::select(v > k(30.0), v, ir::log(k(1.0) + ir::exp(v))); };
  } else if (op == "Sign") {
    f = [t](Expr v) {
      const Expr zero = ir::make_zero(t);
      return ir::select(v > zero, ir::make_one(t),
                        ir::select(v < zero, zero - ir::make_one(t), zero));
    };
  } else if (op == "HardSigmoid") {
    const double alpha = n.f("alpha"), beta = n.f("beta");
    f = [=](Expr v) { return ir::max(k(0.0), ir::min(k(1.0), v * k(alpha) + k(beta))); };
  } else if (op == "HardSwish") {
    f = [=](Expr v) { return v * ir::max(k(0.0), ir::min(k(1.0), v * k(1.0 / 6.0) + k(0.5))); };
  } else if (op == "Elu") {
    const double alpha = n.f("alpha");
    f = [=](Expr v) { return ir::select(v < k(0.0), k(alpha) * (ir::exp(v) - k(1.0)), v); };
  } else if (op == "Selu") {
    const double alpha = n.f("alpha"), gamma = n.f("gamma");
    f = [=](Expr v) {
      return ir::select(v <= k(0.0), k(gamma) * (k(alpha) * ir::exp(v) - k(alpha)), k(gamma) * v);
    };
  } else if (op == "Not") {
    f = [](Expr v) { return !v; };
  } else if (op == "Celu") {
    const double alpha = n.f("alpha");
    f = [=](Expr v) {
      return ir::max(k(0.0), v) + ir::min(k(0.0), k(alpha) * (ir::exp(v / k(alpha)) - k(1.0)));
    };
  } else if (op == "ThresholdedRelu") {
    const double alpha = n.f("alpha");
    f = [=](Expr v) { return ir::select(v > k(alpha), v, k(0.0)); };
  } else if (op == "Shrink") {
    const double lambd = n.f("lambd"), bias = n.f("bias");
    f = [=](Expr v) {
      return ir::select(v < k(-lambd), v + k(bias), ir::select(v > k(lambd), v - k(bias), k(0.0)));
    };
  } else {
    c.fail("operator '" + op + "' has no lowering");
  }
  return injective_result(topi::elementwise(x, f, sanitize(op)));
}

LowerResult lower_clip(const LowerCtx& c) {
  const double lo = c.node.f("min"), hi = c.node.f("max");
  const Tensor& x = c.input(0);
  if (std::isfinite(lo) && std::isfinite(hi)) return injective_result(topi::clip(x, lo, hi));
  const ir::DataType t = x->dtype();
  return injective_result(topi::elementwise(
      x,
      [=](Expr e) {
        if (std::isfinite(lo)) e = ir::max(e, ir::cast(t, Expr(lo)));
        if (std::isfinite(hi)) e = ir::min(e, ir::cast(t, Expr(hi)));
        return e;
      },
      "clip"));
}

LowerResult lower_leaky_relu(const LowerCtx& c) {
  return injective_result(topi::leaky_relu(c.input(0), c.node.f("alpha")));
}

LowerResult lower_cast(const LowerCtx& c) {
  const KilnDType t = runtime::parse_dtype(c.node.s("to"));
  return injective_result(topi::cast(c.input(0), ir::DataType::parse(runtime::dtype_to_string(t))));
}

/// `check` null: the schema checks suffice.
/// `import` null: no attributes.
OpDef unary(const char* name, LowerFn lower, CheckFn check = nullptr, ImportFn import = nullptr) {
  return {.name = name,
          .family = "math/elementwise",
          .pattern = OpPattern::kElemWise,
          .check = check,
          .schema_checks_suffice = check == nullptr,
          .import = import,
          .no_attributes = import == nullptr,
          .lower = lower,
          .gpu = GpuStrategy::kInjective};
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_clip(const NodeCheck& nc) {
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (nc.has(i) && nc.value(i).num_elements() != 1) {
      nc.fail(nc.input_shaped(i) + " must be a scalar (Clip's bound)");
    }
  }
  return;
}

void check_cast(const NodeCheck& nc) {
  const int64_t to = nc.attr_i("to", 0);
  if (to == onnx::TensorProto::UNDEFINED ||
      !onnx::TensorProto::DataType_IsValid(static_cast<int>(to))) {
    nc.fail("attribute 'to' is " + str(to) + ", which is not an ONNX data type");
  }
  return;
}

void check_dropout(const NodeCheck& nc) {
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (nc.has(i) && nc.value(i).num_elements() != 1)
      nc.fail(nc.input_shaped(i) + " must be a scalar");
  }
  if (nc.has(1) && nc.value(1).is_constant()) {
    const double ratio = element_as_double(*nc.value(1).data, 0);
    if (!(ratio >= 0.0 && ratio < 1.0)) {
      std::ostringstream os;
      os << ratio;
      nc.fail(nc.input(1) + " is " + os.str() + "; the ratio must be in [0, 1)");
    }
  }
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_leaky_relu(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 0.01f);
  return a;
}

Attrs import_clip(ImportCtx& c) {
  Attrs a;
  a["min"] = c.const_float(1, "min", -std::numeric_limits<float>::infinity());
  a["max"] = c.const_float(2, "max", std::numeric_limits<float>::infinity());
  c.inputs.resize(1);
  return a;
}

Attrs import_cast(ImportCtx& c) {
  Attrs a;
  const int64_t to = c.attr_i("to", 0);
  KilnDType t;
  if (!onnx_dtype(static_cast<int>(to), &t)) c.fail("cannot cast to " + onnx_dtype_name(int(to)));
  a["to"] = runtime::dtype_to_string(t);
  return a;
}

Attrs import_hard_sigmoid(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 0.2f);
  a["beta"] = c.attr_f("beta", 0.5f);
  return a;
}

Attrs import_elu(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 1.0f);
  return a;
}

Attrs import_selu(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 1.67326319217681884765625f);
  a["gamma"] = c.attr_f("gamma", 1.05070102214813232421875f);
  return a;
}

Attrs import_celu(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 1.0f);
  return a;
}

Attrs import_thresholded_relu(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 1.0f);
  return a;
}

Attrs import_shrink(ImportCtx& c) {
  Attrs a;
  a["lambd"] = c.attr_f("lambd", 0.5f);
  a["bias"] = c.attr_f("bias", 0.0f);
  return a;
}

// a Cast to input 1's element type
Attrs import_cast_like(ImportCtx& c) {
  Attrs a;
  a["to"] = runtime::dtype_to_string(c.in_value(1).dtype);
  c.inputs.resize(1);
  return a;
}

/// The attributes of the unary math operators that have some.
ImportFn attributes_of(const std::string& op) {
  if (op == "Celu") return import_celu;
  if (op == "Elu") return import_elu;
  if (op == "HardSigmoid") return import_hard_sigmoid;
  if (op == "Selu") return import_selu;
  if (op == "Shrink") return import_shrink;
  if (op == "ThresholdedRelu") return import_thresholded_relu;
  return nullptr;
}

// --- aliased at import (no graph node) --------------------------------------------------------

bool evaluate_identity(ImportCtx& c, ImportSink& sink) {
  sink.define_alias(c.proto().output(0), c.in(0));
  return true;
}

/// Dropout in inference: its input; the mask, when asked for, a constant of trues. Also in
/// training mode with a constant ratio of 0 (torchvision's Swin passes `training` through with
/// p = 0): it drops nothing and scales by 1 / (1 - 0).
bool evaluate_dropout(ImportCtx& c, ImportSink& sink) {
  const onnx::NodeProto& n = c.proto();
  if (c.in(2) != kNoValue) {
    const runtime::NDArray* training = c.const_input(2);
    if (training == nullptr) c.fail("input 'training_mode' must be a constant");
    const runtime::NDArray* ratio = c.const_input(1);
    const bool drops_nothing =
        ratio != nullptr && ratio->num_elements() == 1 && element_as_double(*ratio, 0) == 0.0;
    if ((training->num_elements() != 1 || element_as_double(*training, 0) != 0.0) &&
        !drops_nothing) {
      c.fail("training-mode Dropout is not supported (only with a constant ratio of 0)");
    }
  }
  sink.define_alias(n.output(0), c.in(0));
  if (n.output_size() > 1 && !n.output(1).empty()) {
    std::vector<int64_t> shape;
    sink.infer_outputs(c, &shape);
    Value& mask = sink.value(sink.add_output(c, 1));
    if (!runtime::dtype_equal(mask.dtype, runtime::kBool)) c.fail("mask must be bool");
    runtime::NDArray ones = runtime::NDArray::empty(mask.shape, mask.dtype);
    std::memset(ones.data(), 1, static_cast<size_t>(ones.nbytes()));
    mask.data = std::make_shared<const runtime::NDArray>(std::move(ones));
  }
  return true;
}

// --- folded at import (all inputs constant) ---------------------------------------------------

/// Through double: exact for every integer Kiln meets in shape arithmetic and for float32.
bool fold_cast(const ImportCtx& c, const Value& ov, runtime::NDArray* result) {
  const runtime::NDArray& x = *c.const_input(0);
  check_folded(c, ov, ov.num_elements() == x.num_elements());
  const KilnDType t = ov.dtype;
  if (t.code == kKilnFloat && t.bits == 16) return false;
  *result = runtime::NDArray::empty(ov.shape, ov.dtype);
  const int64_t elem = runtime::dtype_bytes(ov.dtype);
  char* dst = static_cast<char*>(result->data());
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
  return true;
}

}  // namespace

void register_elementwise(Registry& r) {
  for (const auto& [name, fn] : unaries()) {
    OpDef def = unary(name.c_str(), lower_unary);
    // An Identity in the file is an alias; the graph's own (a graph output that is an input or a
    // constant, or returned twice) are copies.
    if (name == "Identity") def.evaluate = evaluate_identity;
    r.add(def);
  }
  for (const char* op :
       {"Acos",      "Acosh", "Asin",       "Asinh",    "Atan", "Atanh",          "Celu",
        "Ceil",      "Cos",   "Cosh",       "Elu",      "Erf",  "Floor",          "HardSigmoid",
        "HardSwish", "Not",   "Reciprocal", "Round",    "Selu", "Shrink",         "Sign",
        "Sin",       "Sinh",  "Softplus",   "Softsign", "Tan",  "ThresholdedRelu"}) {
    r.add(unary(op, lower_unary_math, nullptr, attributes_of(op)));
  }
  r.add(unary("Clip", lower_clip, check_clip, import_clip));
  r.add(unary("LeakyRelu", lower_leaky_relu, nullptr, import_leaky_relu));
  OpDef cast = unary("Cast", lower_cast, check_cast, import_cast);
  cast.import_fold = fold_cast;
  r.add(cast);
  r.add({.name = "CastLike",
         .family = "math/elementwise",
         .origin = Origin::kImportOnly,
         .import_note = "becomes Cast to input 1's type",
         .schema_checks_suffice = true,
         .import = import_cast_like,
         .node_op = "Cast"});
  r.add({.name = "Dropout",
         .family = "math/elementwise",
         .origin = Origin::kImportOnly,
         .import_note = "an alias of its input (inference; the mask a constant)",
         .check = check_dropout,
         .evaluate = evaluate_dropout});
}

}  // namespace kiln::graph::ops
