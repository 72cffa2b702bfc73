// Transposed convolution as dilation + padding + a convolution with the flipped kernel.
#include "compiler/topi/conv2d_transpose.h"

#include <algorithm>

#include "base/error.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;

namespace {

Expr clamp(Expr v, int64_t hi) { return ir::min(ir::max(v, 0), Expr(hi)); }

}  // namespace

te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                 Ints4 padding, Ints2 output_padding, Ints2 dilation, int groups,
                                 const std::string& name) {
  KILN_USER_CHECK(data.ndim() == 4 && kernel.ndim() == 4)
      << "conv2d_transpose_nchw: data and kernel must be 4-D, got " << data.ndim() << "-D '"
      << data->name() << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0 &&
                  groups > 0)
      << "conv2d_transpose_nchw: stride, dilation and groups must be positive";
  for (int p : padding)
    KILN_USER_CHECK(p >= 0) << "conv2d_transpose_nchw: pads must not be negative";
  KILN_USER_CHECK(output_padding[0] >= 0 && output_padding[1] >= 0 &&
                  output_padding[0] < std::max(stride[0], dilation[0]) &&
                  output_padding[1] < std::max(stride[1], dilation[1]))
      << "conv2d_transpose_nchw: output_padding must be smaller than the stride or the dilation";
  int64_t c = const_dim(data, 1, "conv2d_transpose_nchw"), h = const_dim(data, 2, "conv2d_transpose_nchw"), w = const_dim(data, 3, "conv2d_transpose_nchw");
  int64_t kc = const_dim(kernel, 0, "conv2d_transpose_nchw"), mg = const_dim(kernel, 1, "conv2d_transpose_nchw"), kh = const_dim(kernel, 2, "conv2d_transpose_nchw"),
          kw = const_dim(kernel, 3, "conv2d_transpose_nchw");
  KILN_USER_CHECK(kc == c && c % groups == 0)
      << "conv2d_transpose_nchw: kernel '" << kernel->name() << "' has " << kc
      << " input channels, '" << data->name() << "' " << c << " (in " << groups << " groups)";
  int64_t cg = c / groups, m = mg * groups;
  int64_t oh = stride[0] * (h - 1) + output_padding[0] + (kh - 1) * dilation[0] + 1 - padding[0] -
               padding[2];
  int64_t ow = stride[1] * (w - 1) + output_padding[1] + (kw - 1) * dilation[1] + 1 - padding[1] -
               padding[3];
  KILN_USER_CHECK(oh > 0 && ow > 0)
      << "conv2d_transpose_nchw: the padding removes the whole output";
  // P[n, c, y, x] = data[n, c, (y - off_h) / sh, (x - off_w) / sw] where that is an input point.
  int64_t off_h = (kh - 1) * dilation[0] - padding[0], off_w = (kw - 1) * dilation[1] - padding[1];
  int64_t ph = oh + (kh - 1) * dilation[0], pw = ow + (kw - 1) * dilation[1];
  te::Tensor p = te::compute(
      {data->shape()[0], c, ph, pw},
      [&](Var n, Var ch, Var y, Var x) {
        Expr dy = y - Expr(off_h), dx = x - Expr(off_w);
        Expr iy = ir::floordiv(dy, Expr(stride[0])), ix = ir::floordiv(dx, Expr(stride[1]));
        Expr inside = dy >= 0 && dx >= 0 && iy < Expr(h) && ix < Expr(w);
        if (stride[0] > 1) inside = inside && ir::floormod(dy, Expr(stride[0])) == 0;
        if (stride[1] > 1) inside = inside && ir::floormod(dx, Expr(stride[1])) == 0;
        return ir::select(inside, data(n, ch, clamp(iy, h - 1), clamp(ix, w - 1)),
                          ir::make_zero(data->dtype()));
      },
      name + ".pad", {"n", "c", "y", "x"});
  IterVar rc = te::reduce_axis({0, cg}, "rc");
  IterVar rh = te::reduce_axis({0, kh}, "rh"), rw = te::reduce_axis({0, kw}, "rw");
  return te::compute({data->shape()[0], m, oh, ow},
                     [&](Var n, Var f, Var y, Var x) {
                       Expr ch = groups == 1 ? Expr(rc) : ir::floordiv(f, Expr(mg)) * Expr(cg) + rc;
                       Expr fm = groups == 1 ? Expr(f) : ir::floormod(f, Expr(mg));
                       return te::sum(p(n, ch, y + rh * dilation[0], x + rw * dilation[1]) *
                                          kernel(ch, fm, Expr(kh - 1) - rh, Expr(kw - 1) - rw),
                                      {rc, rh, rw});
                     },
                     name, {"n", "oc", "oh", "ow"});
}

autotune::ConfigSpace conv2d_transpose_nchw_x86_space(const te::Tensor& out) {
  return conv2d_nchw_x86_space(out);
}

autotune::Config conv2d_transpose_nchw_x86_default(const autotune::ConfigSpace& space) {
  return conv2d_nchw_x86_default(space);
}

void schedule_conv2d_transpose_nchw_x86(te::Schedule& s, const te::Tensor& out,
                                        const autotune::Config& cfg, const te::Tensor& output) {
  schedule_conv2d_nchw_x86(s, out, cfg, output);
}

}  // namespace kiln::topi
