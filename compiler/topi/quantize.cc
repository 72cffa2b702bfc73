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

}  // namespace kiln::topi
