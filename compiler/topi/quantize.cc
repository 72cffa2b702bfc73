#include "compiler/topi/quantize.h"

#include <vector>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/topi/elementwise.h"

namespace kiln::topi {
namespace {

using ir::Expr;

/// Element `i` of x's scale or zero point: the scalar, or the entry of i's position along `axis`.
Expr per_axis(const te::Tensor& t, const std::vector<ir::Var>& i, int axis) {
  if (t.ndim() == 0) return t(std::vector<Expr>{});
  return t(std::vector<Expr>{Expr(i.at(static_cast<size_t>(axis)))});
}

void check_params(const te::Tensor& x, const te::Tensor& scale, const te::Tensor& zero_point,
                  int axis, const char* op) {
  KILN_USER_CHECK(scale.ndim() <= 1)
      << op << ": the scale '" << scale->name() << "' must be a scalar or 1-D";
  KILN_USER_CHECK(scale.ndim() == 0 || (axis >= 0 && static_cast<size_t>(axis) < x.ndim()))
      << op << ": axis " << axis << " is out of range for '" << x->name() << "'";
  KILN_USER_CHECK(!zero_point.defined() || zero_point.ndim() == scale.ndim())
      << op << ": the zero point '" << zero_point->name() << "' must have the scale's rank";
}

constexpr int64_t kLanes = 16;  // fp32 lanes of an AVX-512 vector

/// x's range in one pass, float32 [2]: element 0 the negated minimum, element 1 the maximum of
/// every element of x, both as a maximum (of -x and of x: negation is exact, so -range[0] is x's
/// minimum bit for bit), so that each element of x is read once for both. With `lanes` and x's
/// last dimension a multiple of 16, x is first folded into [2, 16] lanes (`*lanes_out`), lane l
/// holding the elements whose last index is l modulo 16: one vector per end of the range.
te::Tensor range_of(const te::Tensor& x, bool lanes, const std::string& name,
                    te::Tensor* lanes_out) {
  const size_t n = x.ndim();
  auto signed_x = [&](const Expr& end, const std::vector<Expr>& at) {
    const Expr v = x(at);
    return ir::select(end == Expr(int64_t{0}), ir::make_zero(ir::kFloat32) - v, v);
  };
  if (n == 0) {
    return te::compute({Expr(int64_t{2})},
                       [&](const std::vector<ir::Var>& e) { return signed_x(e[0], {}); }, name,
                       {"end"});
  }
  std::vector<ir::IterVar> ks;
  for (size_t d = 0; d + 1 < n; ++d) {
    ks.push_back(te::reduce_axis({0, x->shape()[d]}, "k" + std::to_string(d)));
  }
  auto last = ir::as_const_int(x->shape()[n - 1]);
  if (lanes && last && *last % kLanes == 0) {
    ks.push_back(te::reduce_axis({0, *last / kLanes}, "ko"));
    *lanes_out = te::compute({Expr(int64_t{2}), Expr(kLanes)},
                             [&](const std::vector<ir::Var>& e) {
                               std::vector<Expr> at;
                               for (size_t d = 0; d + 1 < n; ++d) at.push_back(ks[d]->var);
                               at.push_back(ks.back()->var * Expr(kLanes) + e[1]);
                               return te::max(signed_x(e[0], at), ks);
                             },
                             name + ".lanes", {"end", "lane"});
    ir::IterVar l = te::reduce_axis({0, kLanes}, "l");
    const te::Tensor& folded = *lanes_out;
    return te::compute({Expr(int64_t{2})},
                       [&](const std::vector<ir::Var>& e) {
                         return te::max(folded({Expr(e[0]), Expr(l->var)}), {l});
                       },
                       name, {"end"});
  }
  ks.push_back(te::reduce_axis({0, x->shape()[n - 1]}, "k" + std::to_string(n - 1)));
  return te::compute({Expr(int64_t{2})},
                     [&](const std::vector<ir::Var>& e) {
                       std::vector<Expr> at;
                       for (const ir::IterVar& k : ks) at.push_back(k->var);
                       return te::max(signed_x(e[0], at), ks);
                     },
                     name, {"end"});
}

/// The lanes inside the reduction loops: per step, both ends' vectors from one load of x.
void schedule_lanes(te::Schedule& s, const te::Tensor& lanes) {
  if (!lanes.defined()) return;
  te::Stage st = s[lanes];
  std::vector<ir::IterVar> order;
  for (size_t k = 0; k < lanes->reduce_axis.size(); ++k) order.push_back(st.reduce_axis(k));
  ir::IterVar end = st.axis(0), lane = st.axis(1);
  order.insert(order.end(), {end, lane});
  st.reorder(order);
  st.unroll(end);
  st.vectorize(lane);
}

}  // namespace

te::Tensor quantize_linear(const te::Tensor& x, const te::Tensor& scale,
                           const te::Tensor& zero_point, int axis, ir::DataType qtype,
                           const std::string& name) {
  check_params(x, scale, zero_point, axis, "quantize_linear");
  KILN_USER_CHECK(qtype == ir::kInt8 || qtype == ir::DataType::UInt(8))
      << "quantize_linear: the quantized type must be int8 or uint8";
  const double lo = qtype == ir::kInt8 ? -128.0 : 0.0, hi = qtype == ir::kInt8 ? 127.0 : 255.0;
  return te::compute(
      x->shape(),
      [&](const std::vector<ir::Var>& i) {
        Expr v = x(std::vector<Expr>(i.begin(), i.end()));
        if (v.dtype() != ir::kFloat32) v = ir::cast(ir::kFloat32, v);
        Expr q = ir::call(ir::kFloat32, "roundeven", {v / per_axis(scale, i, axis)},
                          ir::CallKind::kPureIntrinsic);
        if (zero_point.defined()) q = q + ir::cast(ir::kFloat32, per_axis(zero_point, i, axis));
        // Saturated in float, where every value of the type is exact.
        q = ir::min(ir::max(q, ir::make_const(ir::kFloat32, lo)), ir::make_const(ir::kFloat32, hi));
        return ir::cast(qtype, q);
      },
      name);
}

te::Tensor dequantize_linear(const te::Tensor& x, const te::Tensor& scale,
                             const te::Tensor& zero_point, int axis, const std::string& name) {
  check_params(x, scale, zero_point, axis, "dequantize_linear");
  return te::compute(
      x->shape(),
      [&](const std::vector<ir::Var>& i) {
        Expr v = ir::cast(ir::kInt32, x(std::vector<Expr>(i.begin(), i.end())));
        if (zero_point.defined()) v = v - ir::cast(ir::kInt32, per_axis(zero_point, i, axis));
        return ir::cast(ir::kFloat32, v) * per_axis(scale, i, axis);
      },
      name);
}

te::Tensor integer_operand(const te::Tensor& x, const te::Tensor& zero_point, int axis,
                           const std::string& name) {
  if (!zero_point.defined()) return cast(x, ir::kInt32, name);
  const size_t zr = zero_point.ndim();
  auto dim = [](const te::Tensor& t, size_t d) { return ir::as_const_int(t->shape()[d]); };
  const bool scalar = zr == 0 || (zr == 1 && dim(zero_point, 0) && *dim(zero_point, 0) == 1);
  KILN_USER_CHECK(scalar || zr == 1 || zr == x.ndim())
      << "integer_operand: the zero point '" << zero_point->name() << "' has rank " << zr
      << "; it takes a scalar, a 1-D tensor or one of rank " << x.ndim() << " ('" << x->name()
      << "')";
  KILN_USER_CHECK(scalar || zr != 1 || (axis >= 0 && static_cast<size_t>(axis) < x.ndim()))
      << "integer_operand: axis " << axis << " is out of range for '" << x->name() << "'";
  return te::compute(
      x->shape(),
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> at;
        if (zr == 1) {
          at.push_back(scalar ? Expr(int64_t{0}) : Expr(i.at(static_cast<size_t>(axis))));
        } else if (zr > 1) {
          for (size_t d = 0; d < zr; ++d) {
            const auto extent = dim(zero_point, d);
            at.push_back(extent && *extent == 1 ? Expr(int64_t{0}) : Expr(i[d]));
          }
        }
        return ir::cast(ir::kInt32, x(std::vector<Expr>(i.begin(), i.end()))) -
               ir::cast(ir::kInt32, zero_point(at));
      },
      name);
}

DynamicQuantized dynamic_quantize_linear(const te::Tensor& x, bool vector_lanes,
                                         const std::string& name) {
  KILN_USER_CHECK(x->dtype() == ir::kFloat32)
      << name << ": '" << x->name() << "' must be float32, got " << x->dtype().str();
  DynamicQuantized q;
  q.range = range_of(x, vector_lanes, name + ".range", &q.range_lanes);
  const Expr zero = ir::make_const(ir::kFloat32, 0.0), qmax = ir::make_const(ir::kFloat32, 255.0);
  auto lo = [&] { return ir::min(zero - q.range(Expr(int64_t{0})), zero); };
  auto hi = [&] { return ir::max(q.range(Expr(int64_t{1})), zero); };
  q.scale = te::compute(
      {},
      [&](const std::vector<ir::Var>&) {
        // ONNX Runtime's choice where the range is empty (an all-zero x); ONNX divides by 0.
        return ir::select(hi() == lo(), ir::make_const(ir::kFloat32, 1.0), (hi() - lo()) / qmax);
      },
      name + ".scale");
  const ir::DataType u8 = ir::DataType::UInt(8);
  auto saturate = [&](const Expr& v) { return ir::min(ir::max(v, zero), qmax); };
  auto roundeven = [](const Expr& v) {
    return ir::call(ir::kFloat32, "roundeven", {v}, ir::CallKind::kPureIntrinsic);
  };
  q.zero_point = te::compute(
      {},
      [&](const std::vector<ir::Var>&) {
        return ir::cast(u8, roundeven(saturate(zero - lo() / q.scale(std::vector<Expr>{}))));
      },
      name + ".zero_point");
  q.y = te::compute(
      x->shape(),
      [&](const std::vector<ir::Var>& i) {
        Expr v = x(std::vector<Expr>(i.begin(), i.end())) / q.scale(std::vector<Expr>{});
        Expr zp = ir::cast(ir::kFloat32, q.zero_point(std::vector<Expr>{}));
        // Saturated in float, where every value of uint8 is exact.
        return ir::cast(u8, saturate(roundeven(v) + zp));
      },
      name);
  return q;
}

void schedule_dynamic_quantize_linear_x86(te::Schedule& s, const DynamicQuantized& q) {
  schedule_lanes(s, q.range_lanes);
  schedule_injective_x86(s, q.y);
}

}  // namespace kiln::topi
