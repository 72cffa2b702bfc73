// The broadcasting operators: arithmetic, comparisons, logic, Sum / Mean, PRelu, Where, Mod.
#include <bit>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using ir::Expr;
using te::Tensor;

using Binary = Tensor (*)(const Tensor&, const Tensor&, const std::string&);

const std::map<std::string, Binary>& binaries() {
  static const std::map<std::string, Binary> m = {
      {"Add", &topi::add}, {"Sub", &topi::sub},     {"Mul", &topi::mul},     {"Div", &topi::div},
      {"Pow", &topi::pow}, {"Max", &topi::maximum}, {"Min", &topi::minimum},
  };
  return m;
}

/// `f` over `ts` (at least one) as a balanced tree, f(f(a, b), f(c, d)): a Sum or Max of thousands
/// of inputs becomes an expression log2(n) deep, not n (the loop IR's passes recurse as deep).
/// Three inputs fold as f(f(a, b), c), left to right.
/// The tensors it makes go to `made`, the last one the result.
Tensor fold_balanced(std::vector<Tensor> ts, const std::function<Tensor(Tensor, Tensor)>& f,
                     std::vector<Tensor>* made) {
  while (ts.size() > 1) {
    std::vector<Tensor> next;
    for (size_t i = 0; i + 1 < ts.size(); i += 2) {
      next.push_back(f(ts[i], ts[i + 1]));
      made->push_back(next.back());
    }
    if (ts.size() % 2 != 0) next.push_back(ts.back());
    ts = std::move(next);
  }
  return ts.at(0);
}

/// `t`, the last of the stages `made`, scheduled as one injective kernel: the others inlined.
LowerResult folded_result(const Tensor& t, const std::vector<Tensor>& made) {
  return {{t}, [=](te::Schedule& s, const Tensor& output) {
            for (const Tensor& m : made) {
              if (m != output) s[m].compute_inline();
            }
            injective(s, output);
          }};
}

/// The node's inputs as tensors.
std::vector<Tensor> inputs_of(const LowerCtx& c) {
  std::vector<Tensor> ts;
  for (size_t i = 0; i < c.node.inputs.size(); ++i) ts.push_back(c.input(i));
  return ts;
}

/// Add, Sub, Mul, Div, Pow: two inputs; Max, Min: one input or more, folded as a balanced tree.
LowerResult lower_binary(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  if (op == "Pow" && n.inputs.size() == 2 && c.input(1)->dtype() != c.input(0)->dtype()) {
    // ONNX lets the exponent have another type than the base: it is converted to the base's.
    const Tensor& base = c.input(0);
    if (!base->dtype().is_float()) c.fail("Pow of an integer base is not supported");
    Tensor e = topi::cast(c.input(1), base->dtype(), "pow_exponent");
    Tensor p = topi::pow(base, e, "pow");
    return {{p}, [=](te::Schedule& s, const Tensor& output) {
              s[e].compute_inline();
              if (p != output) s[p].compute_inline();
              injective(s, output);
            }};
  }
  const Binary f = binaries().at(op);
  if (n.inputs.empty()) c.fail("at least one input is required");
  if (n.inputs.size() == 1) {
    return injective_result(topi::elementwise(
        c.input(0), [](Expr e) { return e; }, "copy"));
  }
  const std::string name = sanitize(op);
  std::vector<Tensor> made;
  const Tensor t = fold_balanced(
      inputs_of(c), [&](Tensor a, Tensor b) { return f(a, b, name); }, &made);
  return folded_result(t, made);
}

/// Comparisons (bool results), logic on bools, PRelu, Where, Sum and Mean: ONNX broadcasting.
LowerResult lower_broadcast_other(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  using F = std::function<Expr(Expr, Expr)>;
  static const std::map<std::string, F> kCompare = {
      {"Equal", [](Expr a, Expr b) { return a == b; }},
      {"Less", [](Expr a, Expr b) { return a < b; }},
      {"LessOrEqual", [](Expr a, Expr b) { return a <= b; }},
      {"Greater", [](Expr a, Expr b) { return a > b; }},
      {"GreaterOrEqual", [](Expr a, Expr b) { return a >= b; }},
      {"And", [](Expr a, Expr b) { return a && b; }},
      {"Or", [](Expr a, Expr b) { return a || b; }},
      {"Xor", [](Expr a, Expr b) { return a != b; }},
  };
  if (auto it = kCompare.find(op); it != kCompare.end()) {
    return injective_result(
        topi::broadcast_binary(c.input(0), c.input(1), it->second, sanitize(op)));
  }
  if (op == "PRelu") {
    const ir::DataType t = c.input(0)->dtype();
    return injective_result(topi::broadcast_binary(
        c.input(0), c.input(1),
        [t](Expr x, Expr slope) { return ir::select(x < ir::make_zero(t), slope * x, x); },
        "prelu"));
  }
  if (op == "Where") {
    return injective_result(topi::where(c.input(0), c.input(1), c.input(2), "where"));
  }
  if (op == "Sum" || op == "Mean") {
    std::vector<Tensor> made;
    Tensor t = c.input(0);
    if (n.inputs.size() == 1) {
      t = topi::elementwise(
          t, [](Expr e) { return e; }, "copy");
      made.push_back(t);
    } else {
      t = fold_balanced(
          inputs_of(c), [](Tensor a, Tensor b) { return topi::add(a, b, "sum"); }, &made);
    }
    if (op == "Mean") {
      const ir::DataType dt = t->dtype();
      const double count = static_cast<double>(n.inputs.size());
      t = topi::elementwise(
          t, [=](Expr e) { return e / ir::make_const(dt, count); }, "mean");
      made.push_back(t);
    }
    return folded_result(t, made);
  }
  c.fail("operator '" + op + "' has no lowering");
}

LowerResult lower_mod(const LowerCtx& c) {
  const Node& n = c.node;
  const ir::DataType t = c.input(0)->dtype();
  const bool fmod = n.i("fmod") != 0;
  return injective_result(topi::broadcast_binary(
      c.input(0), c.input(1),
      [=](Expr a, Expr b) -> Expr {
        if (t.is_float()) {  // C fmod: the sign of the dividend
          return a - ir::call(t, "trunc", {a / b}, ir::CallKind::kPureIntrinsic) * b;
        }
        if (fmod || !t.is_int()) return a % b;
        // Python's mod: the sign of the divisor.
        const Expr r = a % b, zero = ir::make_zero(t);
        return ir::select(r != zero && ((r < zero) != (b < zero)), r + b, r);
      },
      "mod"));
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

/// NumPy broadcasting of every input with every other.
void check_broadcast(const NodeCheck& nc) { nc.broadcast(); }

/// PRelu: the slope broadcasts to X in one direction (the output has X's shape).
void check_prelu(const NodeCheck& nc) {
  const auto &x = nc.shape(0), &slope = nc.shape(1);
  bool ok = slope.size() <= x.size();
  for (size_t i = 1; ok && i <= slope.size(); ++i) {
    const int64_t sd = slope[slope.size() - i], xd = x[x.size() - i];
    ok = sd == xd || sd == 1;
  }
  if (!ok) {
    nc.fail(nc.input_shaped(1) + " does not broadcast to " + nc.input_shaped(0) +
            " (the slope must broadcast to X's shape)");
  }
}

void check_mod(const NodeCheck& nc) {
  nc.broadcast();
  const int64_t fmod = nc.flag("fmod", 0);
  if (fmod == 0 && nc.value(0).dtype.code == kKilnFloat) {
    nc.fail("attribute 'fmod' is 0, but " + nc.input(0) + " is " +
            onnx_type_string(nc.value(0).dtype) + "; floating-point Mod needs fmod=1");
  }
  return;
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_mod(ImportCtx& c) {
  Attrs a;
  a["fmod"] = c.attr_i("fmod", 0);
  return a;
}

// --- rewritten at import -----------------------------------------------------------------------

/// The largest whole exponent rewrite_pow turns into products (at most 2 * log2 of it multiplies).
constexpr float kMaxProductPower = 16.0f;

/// Pow(x, n) with a constant float32 scalar exponent n, a whole number from 2 to
/// kMaxProductPower, and x's shape and dtype as its output's: products of x by square-and-multiply,
/// where pow would be a libm call per element (a decomposed LayerNorm's variance Pow(x - mean, 2)
/// becomes x * x; the tanh GELU's Pow(x, 3) of GPT-2 and BERT exports, x * x * x).
bool rewrite_pow(const ImportCtx& c, const std::vector<ValueId>& outs, ImportSink& sink) {
  if (c.inputs.size() != 2 || c.inputs[1] == kNoValue) return false;
  const Value& x = c.graph().value(c.inputs[0]);
  const Value& e = c.graph().value(c.inputs[1]);
  const Value& y = c.first_output();
  if (!(e.is_constant() && e.num_elements() == 1 &&
        runtime::dtype_equal(e.dtype, runtime::kFloat32) &&
        runtime::dtype_equal(x.dtype, runtime::kFloat32) && y.shape == x.shape)) {
    return false;
  }
  const float f = e.data->data<float>()[0];
  if (!(f >= 2.0f && f <= kMaxProductPower && f == std::floor(f))) return false;
  const auto n = static_cast<unsigned>(f);
  const std::string name = c.node_name();
  // The steps from n's second-highest bit down: square, then times x where the bit is set.
  std::vector<bool> times_x;
  for (int bit = static_cast<int>(std::bit_width(n)) - 2; bit >= 0; --bit) {
    times_x.push_back(false);
    if ((n >> bit) & 1u) times_x.push_back(true);
  }
  const ValueId base = c.inputs[0];
  ValueId acc = base;
  for (size_t i = 0; i < times_x.size(); ++i) {
    const bool last = i + 1 == times_x.size();
    const std::string step = last ? name : name + "/product_" + std::to_string(i);
    const ValueId out = last ? outs[0] : sink.add_value(step, x.dtype, x.shape);
    sink.add_node(Node{"Mul", step, {acc, times_x[i] ? base : acc}, {out}, {}});
    acc = out;
  }
  return true;
}

}  // namespace

void register_binary(Registry& r) {
  auto add = [&](const std::string& op, LowerFn lower, CheckFn check, ImportFn import,
                 RewriteFn rewrite = nullptr) {
    r.add({.name = op,
           .family = "math/binary",
           .pattern = OpPattern::kBroadcast,
           .check = check,
           .import = import,
           .no_attributes = import == nullptr,
           .rewrite = rewrite,
           .lower = lower,
           .gpu = GpuStrategy::kInjective});
  };
  for (const auto& [op, fn] : binaries()) {
    add(op, lower_binary, check_broadcast, nullptr, op == "Pow" ? rewrite_pow : nullptr);
  }
  for (const char* op : {"And", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Mean",
                         "Or", "PRelu", "Sum", "Where", "Xor"}) {
    add(op, lower_broadcast_other, std::string(op) == "PRelu" ? check_prelu : check_broadcast,
        nullptr);
  }
  add("Mod", lower_mod, check_mod, import_mod);
}

}  // namespace kiln::graph::ops
