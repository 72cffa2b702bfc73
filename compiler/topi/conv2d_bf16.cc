// bf16 blocked convolution and dense layer (compiler/ir/bf16.h's pairs).
#include "compiler/topi/conv2d_bf16.h"

#include "base/error.h"
#include "compiler/ir/bf16.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;

te::Tensor conv2d_nchwc_bf16(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                             Ints4 padding, Ints2 dilation, const std::string& name) {
  const char* op = "conv2d_nchwc_bf16";
  KILN_USER_CHECK(data.ndim() == 5 && kernel.ndim() == 6)
      << op << ": data must be 5-D and kernel 6-D, got " << data.ndim() << "-D '" << data->name()
      << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  KILN_USER_CHECK(data->dtype() == ir::kFloat32 && kernel->dtype() == ir::kInt32)
      << op << ": data '" << data->name() << "' must be float32 and kernel '" << kernel->name()
      << "' int32 (bf16 pairs), got " << data->dtype().str() << " and " << kernel->dtype().str();
  const int64_t cb = const_dim(data, 1, op), h = const_dim(data, 2, op), w = const_dim(data, 3, op),
                ic = const_dim(data, 4, op);
  const int64_t ob = const_dim(kernel, 0, op), kh = const_dim(kernel, 2, op),
                kw = const_dim(kernel, 3, op), oc = const_dim(kernel, 5, op);
  KILN_USER_CHECK(ic % 2 == 0) << op << ": the channel block of '" << data->name()
                               << "' must be even (pairs), got " << ic;
  KILN_USER_CHECK(const_dim(kernel, 1, op) == cb && const_dim(kernel, 4, op) == ic / 2)
      << op << ": kernel '" << kernel->name() << "' does not match the channel blocks of '"
      << data->name() << "' (" << cb << " blocks of " << ic / 2 << " pairs)";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0)
      << op << ": stride and dilation must be positive";
  for (int p : padding) KILN_USER_CHECK(p >= 0) << op << ": pads must not be negative, got " << p;
  const int64_t ekh = (kh - 1) * dilation[0] + 1, ekw = (kw - 1) * dilation[1] + 1;
  KILN_USER_CHECK(h + padding[0] + padding[2] >= ekh && w + padding[1] + padding[3] >= ekw)
      << op << ": the kernel is larger than the padded input";
  const int64_t oh = (h + padding[0] + padding[2] - ekh) / stride[0] + 1;
  const int64_t ow = (w + padding[1] + padding[3] - ekw) / stride[1] + 1;
  // The padded input as bf16 pairs: the template's padding stage (its name ends in "pad"). A
  // strided 1x1 without padding (a residual block's downsampling) reads every stride-th pixel
  // only: the stage holds just those, so a pass converting it first converts no others.
  const bool subsample =
      kh == 1 && kw == 1 && (stride[0] > 1 || stride[1] > 1) && padding == Ints4{0, 0, 0, 0};
  const auto& sh = data->shape();
  const Ints2 step = subsample ? stride : Ints2{1, 1};
  te::Tensor pairs = te::compute(
      {sh[0], cb, subsample ? oh : h + padding[0] + padding[2],
       subsample ? ow : w + padding[1] + padding[3], ic / 2},
      [&](Var n, Var c, Var y, Var x, Var k) {
        Expr yy = y * step[0] - padding[0], xx = x * step[1] - padding[1];
        Expr cy = ir::min(ir::max(yy, 0), Expr(h - 1)), cx = ir::min(ir::max(xx, 0), Expr(w - 1));
        Expr v = ir::bf16x2_pack(data(n, c, cy, cx, k * 2), data(n, c, cy, cx, k * 2 + 1));
        Expr inside = yy >= 0 && yy < Expr(h) && xx >= 0 && xx < Expr(w);
        return ir::select(inside, v, ir::make_zero(ir::kInt32));
      },
      name + ".pad", {"n", "cb", "h", "w", "k"});
  IterVar rco = te::reduce_axis({0, cb}, "rco"), rci = te::reduce_axis({0, ic / 2}, "rci");
  IterVar rh = te::reduce_axis({0, kh}, "rh"), rw = te::reduce_axis({0, kw}, "rw");
  Workload wl{op, {spec_of(data, op), spec_of(kernel, op)}, {}};
  wl.attrs = {{"dilations", ints_attr(dilation)},
              {"pads", ints_attr(padding)},
              {"strides", ints_attr(stride)}};
  return with_workload(
      te::compute({sh[0], ob, oh, ow, oc},
                  [&](Var n, Var f, Var y, Var x, Var fi) {
                    Expr py = subsample ? Expr(y) : y * stride[0] + rh * dilation[0];
                    Expr px = subsample ? Expr(x) : x * stride[1] + rw * dilation[1];
                    return te::sum(
                        ir::bf16x2_dot(pairs(n, rco, py, px, rci), kernel(f, rco, rh, rw, rci, fi)),
                        {rco, rh, rw, rci});
                  },
                  name, {"n", "ocb", "oh", "ow", "oc"}),
      wl);
}

te::Tensor pack_conv2d_kernel_bf16(const te::Tensor& kernel, int ic_block, int oc_block,
                                   const std::string& name) {
  const char* op = "pack_conv2d_kernel_bf16";
  KILN_USER_CHECK(kernel.ndim() == 4 && kernel->dtype() == ir::kFloat32)
      << op << ": '" << kernel->name() << "' must be 4-D float32";
  const int64_t o = const_dim(kernel, 0, op), c = const_dim(kernel, 1, op);
  KILN_USER_CHECK(ic_block > 0 && ic_block % 2 == 0 && oc_block > 0 && o % oc_block == 0 &&
                  c % ic_block == 0)
      << op << ": " << o << "x" << c << " channels are not multiples of the blocks " << oc_block
      << "x" << ic_block << " (the input block even)";
  const auto& sh = kernel->shape();
  return te::compute({o / oc_block, c / ic_block, sh[2], sh[3], ic_block / 2, oc_block},
                     [&](const std::vector<Var>& i) {
                       Expr out = i[0] * oc_block + i[5], in = i[1] * ic_block + i[4] * 2;
                       return ir::bf16x2_pack(kernel(out, in, i[2], i[3]),
                                              kernel(out, in + 1, i[2], i[3]));
                     },
                     name, {"ob", "cb", "kh", "kw", "k", "oc"});
}

te::Tensor dense_packed_bf16(const te::Tensor& x, const te::Tensor& packed, int64_t n,
                             const std::string& name) {
  const char* op = "dense_packed_bf16";
  KILN_USER_CHECK(x.ndim() == 2 && packed.ndim() == 3 && x->dtype() == ir::kFloat32 &&
                  packed->dtype() == ir::kInt32)
      << op << ": '" << x->name() << "' must be 2-D float32 and '" << packed->name()
      << "' 3-D int32 (bf16 pairs)";
  const int64_t k = const_dim(x, 1, op), bn = const_dim(packed, 2, op);
  const int64_t pairs_k = (k + 1) / 2;
  KILN_USER_CHECK(const_dim(packed, 1, op) == pairs_k && const_dim(packed, 0, op) * bn >= n)
      << op << ": '" << packed->name() << "' does not pack a " << n << "x" << k << " weight";
  te::Tensor pairs = te::compute(
      {x->shape()[0], pairs_k},
      [&](Var i, Var kk) {
        Expr lo = x(i, kk * 2);
        // An odd K's last pair: its upper half reads the last element and packs zero instead.
        Expr hi = k % 2 == 0 ? x(i, kk * 2 + 1)
                             : ir::select(kk * 2 + 1 < Expr(k), x(i, ir::min(kk * 2 + 1, k - 1)),
                                          ir::make_zero(ir::kFloat32));
        return ir::bf16x2_pack(lo, hi);
      },
      name + ".pairs", {"i", "k"});
  IterVar r = te::reduce_axis({0, pairs_k}, "k");
  return with_workload(
      te::compute({x->shape()[0], n},
                  [&](Var i, Var j) {
                    return te::sum(ir::bf16x2_dot(pairs(i, r), packed(ir::floordiv(j, Expr(bn)), r,
                                                                      ir::floormod(j, Expr(bn)))),
                                   {r});
                  },
                  name, {"i", "j"}),
      {op, {spec_of(x, op), spec_of(packed, op)}, {{"n", n}}});
}

te::Tensor pack_dense_weight_bf16(const te::Tensor& w, int bn, const std::string& name) {
  const char* op = "pack_dense_weight_bf16";
  KILN_USER_CHECK(w.ndim() == 2 && bn > 0 && w->dtype() == ir::kFloat32)
      << op << ": '" << w->name() << "' must be 2-D float32 and the block positive";
  const int64_t n = const_dim(w, 0, op), k = const_dim(w, 1, op);
  return te::compute({(n + bn - 1) / bn, (k + 1) / 2, bn},
                     [&](Var jo, Var kk, Var ji) {
                       Expr col = jo * bn + ji, c = ir::min(col, Expr(n - 1));
                       Expr lo = w(c, kk * 2);
                       Expr hi = w(c, ir::min(kk * 2 + 1, Expr(k - 1)));
                       if (k % 2 != 0) {
                         hi = ir::select(kk * 2 + 1 < Expr(k), hi, ir::make_zero(ir::kFloat32));
                       }
                       return ir::select(col < Expr(n), ir::bf16x2_pack(lo, hi),
                                         ir::make_zero(ir::kInt32));
                     },
                     name, {"jo", "k", "ji"});
}

}  // namespace kiln::topi
