#include "compiler/topi/qconv2d.h"

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/topi/elementwise.h"

namespace kiln::topi {
using ir::Expr;

QConv2d qconv2d_nchw(const te::Tensor& x_q, const te::Tensor& w_q, const te::Tensor& bias,
                     const te::Tensor& shift, Ints2 stride, Ints4 padding, Ints2 dilation,
                     int groups, bool relu, const std::string& name) {
  KILN_USER_CHECK(x_q->dtype() == ir::kInt8 && w_q->dtype() == ir::kInt8)
      << "qconv2d_nchw: data '" << x_q->name() << "' and kernel '" << w_q->name()
      << "' must be int8";
  KILN_USER_CHECK(bias->dtype() == ir::kInt32 && shift->dtype() == ir::kInt32 && bias.ndim() == 1 &&
                  shift.ndim() == 1)
      << "qconv2d_nchw: bias '" << bias->name() << "' and shift '" << shift->name()
      << "' must be 1-D int32";
  QConv2d q;
  q.data = cast(x_q, ir::kInt32, name + ".data");
  q.kernel = cast(w_q, ir::kInt32, name + ".kernel");
  q.acc = conv2d_nchw(q.data, q.kernel, stride, padding, dilation, groups, name + ".acc");
  const Expr lo = ir::make_const(ir::kInt32, int64_t{relu ? 0 : -128});
  const Expr hi = ir::make_const(ir::kInt32, int64_t{127});
  const te::Tensor acc = q.acc;
  q.out = te::compute(
      acc->shape(),
      [&](ir::Var n, ir::Var o, ir::Var y, ir::Var x) {
        // int32 >> int32: an arithmetic shift (LLVM's ashr), floor division by 2^shift.
        const Expr v = ir::shift_right(acc(n, o, y, x) + bias(o), shift(o));
        return ir::cast(ir::kInt8, ir::min(ir::max(v, lo), hi));
      },
      name);
  return q;
}

void schedule_qconv2d_nchw_x86(te::Schedule& s, const QConv2d& q, const te::Tensor& output) {
  s[q.data].compute_inline();
  s[q.kernel].compute_inline();
  const te::Tensor out = output.defined() ? output : q.out;
  if (out != q.out) s[q.out].compute_inline();
  const space::ConfigSpace space = conv2d_nchw_x86_space(q.acc);
  schedule_conv2d_nchw_x86(s, q.acc, conv2d_nchw_x86_default(space), out);
}

}  // namespace kiln::topi
