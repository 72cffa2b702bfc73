// The VDLA's int8 conv2d compute (vdla_conv2d.h).
#include "compiler/topi/vdla_conv2d.h"

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::Var;

VdlaConv2d vdla_conv2d(const VdlaConv2dShape& s, bool relu) {
  KILN_USER_CHECK(s.ic > 0 && s.oc > 0 && s.ic % 16 == 0 && s.oc % 16 == 0)
      << "vdla conv2d: channels " << s.ic << " -> " << s.oc << " must be positive multiples of 16";
  KILN_USER_CHECK(s.k >= 1 && s.stride >= 1 && s.pad >= 0 && s.oh() >= 1 && s.ow() >= 1)
      << "vdla conv2d: kernel " << s.k << ", stride " << s.stride << ", padding " << s.pad
      << " out of range";
  VdlaConv2d op;
  op.shape = s;
  op.relu = relu;
  const int icb = s.ic / 16, ocb = s.oc / 16, p = s.pad, st = s.stride;
  op.data = te::placeholder({icb, s.h, s.w, 1, 16}, ir::kInt8, "data");
  op.kernel = te::placeholder({ocb, icb, s.k, s.k, 16, 16}, ir::kInt8, "kernel");
  op.bias = te::placeholder({ocb, 1, 16}, ir::kInt32, "bias");
  op.shift = te::placeholder({ocb, 1, 16}, ir::kInt32, "shift");
  const te::Tensor data = op.data, kernel = op.kernel, bias = op.bias, shift = op.shift;
  op.data_pad = te::compute(
      {icb, s.h + 2 * p, s.w + 2 * p, 1, 16},
      [&](Var c, Var y, Var x, Var b, Var i) {
        Expr in = data({c, y - p, x - p, b, i});
        if (p == 0) return in;
        return ir::select(y >= p && y < s.h + p && x >= p && x < s.w + p, in,
                          ir::make_zero(ir::kInt8));
      },
      "data_pad");
  const te::Tensor pad = op.data_pad;
  te::IterVar rc = te::reduce_axis({0, icb}, "ic_block");
  te::IterVar ky = te::reduce_axis({0, s.k}, "ky");
  te::IterVar kx = te::reduce_axis({0, s.k}, "kx");
  te::IterVar ri = te::reduce_axis({0, 16}, "ic");
  op.conv = te::compute(
      {ocb, s.oh(), s.ow(), 1, 16},
      [&](const std::vector<Var>& v) {
        return te::sum(ir::cast(ir::kInt32, pad({rc, v[1] * st + ky, v[2] * st + kx, v[3], ri})) *
                           ir::cast(ir::kInt32, kernel({v[0], rc, ky, kx, v[4], ri})),
                       {rc, ky, kx, ri});
      },
      "conv", {"oc_block", "y", "x", "b", "oc"});
  const te::Tensor conv = op.conv;
  op.biased = te::compute(
      {ocb, s.oh(), s.ow(), 1, 16},
      [&](const std::vector<Var>& v) {
        return conv({v[0], v[1], v[2], v[3], v[4]}) + bias({v[0], v[3], v[4]});
      },
      "biased");
  const te::Tensor biased = op.biased;
  op.shr = te::compute(
      {ocb, s.oh(), s.ow(), 1, 16},
      [&](const std::vector<Var>& v) {
        return ir::shift_right(biased({v[0], v[1], v[2], v[3], v[4]}), shift({v[0], v[3], v[4]}));
      },
      "shr");
  const te::Tensor shifted = op.shr;
  const int lo_bound = relu ? 0 : -128;
  op.clip_lo = te::compute(
      {ocb, s.oh(), s.ow(), 1, 16},
      [&](const std::vector<Var>& v) {
        return ir::max(shifted({v[0], v[1], v[2], v[3], v[4]}), Expr(lo_bound));
      },
      "clip_lo");
  const te::Tensor lo = op.clip_lo;
  op.clip_hi = te::compute(
      {ocb, s.oh(), s.ow(), 1, 16},
      [&](const std::vector<Var>& v) {
        return ir::min(lo({v[0], v[1], v[2], v[3], v[4]}), Expr(127));
      },
      "clip_hi");
  const te::Tensor hi = op.clip_hi;
  op.out = te::compute(
      {ocb, s.oh(), s.ow(), 1, 16},
      [&](const std::vector<Var>& v) {
        return ir::cast(ir::kInt8, hi({v[0], v[1], v[2], v[3], v[4]}));
      },
      "out");
  // The workload (workload.h), so that a tuning task can be made from the output.
  Workload w;
  w.compute = "vdla_conv2d";
  for (const te::Tensor& t : {op.data, op.kernel, op.bias, op.shift})
    w.inputs.push_back(spec_of(t, "vdla_conv2d"));
  w.attrs = {{"stride", int64_t{s.stride}}, {"pad", int64_t{s.pad}}, {"relu", relu}};
  op.out = with_workload(op.out, w);
  return op;
}

}  // namespace kiln::topi
