// dense_int8: its compute, the weight packing, and the x86 template around dot4_u8s8.
#include "compiler/topi/dense_int8.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/dot4_intrin.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;
using space::Config;
using space::ConfigSpace;

namespace {
constexpr const char* kOp = "dense_int8";
}  // namespace

te::Tensor pack_dense_weight_int8(const te::Tensor& w, bool trans_b, const std::string& name) {
  const char* op = "pack_dense_weight_int8";
  KILN_USER_CHECK(w.ndim() == 2 && w->dtype() == ir::kInt8)
      << op << ": '" << w->name() << "' must be a 2-D int8 weight, got " << w.ndim() << "-D "
      << w->dtype().str();
  const int64_t k = const_dim(w, trans_b ? 1 : 0, op), n = const_dim(w, trans_b ? 0 : 1, op);
  const int64_t nb = kInt8OutBlock;
  return te::compute({(n + nb - 1) / nb, (k + 3) / 4, nb, 4},
                     [&](Var jb, Var k4, Var ji, Var kc) {
                       const Expr col = jb * Expr(nb) + ji, row = k4 * 4 + kc;
                       const Expr c = ir::min(col, Expr(n - 1)), r = ir::min(row, Expr(k - 1));
                       return ir::select(col < Expr(n) && row < Expr(k),
                                         trans_b ? w(c, r) : w(r, c), ir::make_zero(ir::kInt8));
                     },
                     name, {"jb", "k4", "ji", "kc"});
}

te::Tensor dense_int8(const te::Tensor& x, const te::Tensor& packed, const std::string& name) {
  KILN_USER_CHECK((x.ndim() == 2 || x.ndim() == 3) && x->dtype() == ir::DataType::UInt(8))
      << kOp << ": '" << x->name() << "' must be 2-D or 3-D uint8, got " << x.ndim() << "-D "
      << x->dtype().str();
  KILN_USER_CHECK(packed.ndim() == 4 && packed->dtype() == ir::kInt8 &&
                  const_dim(packed, 2, kOp) == kInt8OutBlock && const_dim(packed, 3, kOp) == 4)
      << kOp << ": weight '" << packed->name()
      << "' must be int8 [N/16, K/4, 16, 4] (pack_dense_weight_int8)";
  const size_t lead = x.ndim() - 2;
  const int64_t k = const_dim(x, lead + 1, kOp), k4 = const_dim(packed, 1, kOp);
  KILN_USER_CHECK(k == 4 * k4) << kOp << ": '" << x->name() << "' reduces over " << k << " but '"
                               << packed->name() << "' packs " << 4 * k4
                               << " (K padded to a multiple of 4)";
  IterVar rk4 = te::reduce_axis({0, k4}, "rk4"), rkc = te::reduce_axis({0, 4}, "rkc");
  std::vector<Expr> shape(x->shape().begin(), x->shape().end() - 1);
  const int64_t nb = kInt8OutBlock;
  shape.push_back(Expr(const_dim(packed, 0, kOp) * nb));
  std::vector<std::string> names =
      lead ? std::vector<std::string>{"b", "i", "j"} : std::vector<std::string>{"i", "j"};
  const te::Tensor out = te::compute(
      shape,
      [&](const std::vector<Var>& v) {
        std::vector<Expr> xi(v.begin(), v.begin() + static_cast<long>(lead) + 1);
        xi.push_back(rk4 * 4 + rkc);
        const Expr j = v[lead + 1];
        const Expr b = packed(ir::floordiv(j, Expr(nb)), rk4, ir::floormod(j, Expr(nb)), rkc);
        return te::sum(ir::cast(ir::kInt32, x(xi)) * ir::cast(ir::kInt32, b), {rk4, rkc});
      },
      name, names);
  return with_workload(out, {kOp, {spec_of(x, kOp), spec_of(packed, kOp)}, {}});
}

ConfigSpace dense_int8_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK((out.ndim() == 2 || out.ndim() == 3) && out->is_compute() &&
                  out->reduce_axis.size() == 2 && out->dtype() == ir::kInt32)
      << "dense_int8_x86_space: '" << out->name() << "' is not an int8 dense product";
  const size_t lead = out.ndim() - 2;
  ConfigSpace space;
  space.define_split("tile_y", const_dim(out, lead, kOp), 2, space::SplitPolicy::kFactors, 32);
  // Column blocks of 16, the intrinsic's.
  space.define_split("tile_x", const_dim(out, lead + 1, kOp) / kInt8OutBlock, 2,
                     space::SplitPolicy::kFactors, 8);
  space.define_split("tile_k", *ir::as_const_int(out->reduce_axis[0]->dom.extent), 2,
                     space::SplitPolicy::kFactors, 8);
  return space;
}

Config dense_int8_x86_default(const te::Tensor& out, const ConfigSpace& space,
                              const target::Target& target) {
  const size_t lead = out.ndim() - 2;
  const bool wide = target.vector_bits >= 512;
  const int64_t per_block = std::max<int64_t>(1, 512 / std::max(target.vector_bits, 128));
  // AArch64: 16 of its 32 NEON registers (4 blocks of 4), as the convolution (not measured on a
  // board).
  const int64_t vectors = wide ? 24 : target.arch_name() == "aarch64" ? 16 : 12;
  const int64_t budget = std::max<int64_t>(1, vectors / per_block);
  const int64_t blocks = const_dim(out, lead + 1, kOp) / kInt8OutBlock;
  int64_t tile_x = 1;
  for (int64_t f : {int64_t{3}, int64_t{2}}) {
    if (blocks % f == 0 && f * 4 <= budget) {
      tile_x = f;
      break;
    }
  }
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "tile_x")] = split_position(space, "tile_x", tile_x);
  pos[knob_index(space, "tile_y")] = split_position(space, "tile_y", budget / tile_x);
  pos[knob_index(space, "tile_k")] = split_position(space, "tile_k", 4);
  return space.from_positions(pos);
}

void schedule_dense_int8_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                             const te::Tensor& output) {
  te::Tensor cl = s.cache_write(out, "local");
  te::Stage so = epilogue_stage(s, out, output);
  const size_t lead = out.ndim() - 2;
  IterVar i = so.axis(lead), j = so.axis(lead + 1);
  auto [io, ii] = so.split(i, cfg.split("tile_y").back());
  auto [jb, ji] = so.split(j, kInt8OutBlock);
  auto [jo, jt] = so.split(jb, cfg.split("tile_x").back());
  std::vector<IterVar> order;
  if (lead) order.push_back(so.axis(0));
  order.insert(order.end(), {jo, io, ii, jt, ji});
  so.reorder(order);
  std::vector<IterVar> outer(order.begin(), order.end() - 3);
  IterVar par = outer.size() > 1 ? so.fuse(outer) : outer[0];
  so.parallel(par);
  so.unroll(ii);
  so.unroll(jt);
  so.vectorize(ji);

  te::Stage sl = s[cl];
  sl.compute_at(so, par);
  auto [ko, ki] = sl.split(sl.reduce_axis(0), cfg.split("tile_k").back());
  auto [ljb, lji] = sl.split(sl.axis(lead + 1), kInt8OutBlock);
  std::vector<IterVar> lorder;
  for (size_t a = 0; a < lead; ++a) lorder.push_back(sl.axis(a));
  lorder.insert(lorder.end(), {ko, ki, sl.axis(lead), ljb, lji, sl.reduce_axis(1)});
  sl.reorder(lorder);
  sl.unroll(ki);
  sl.unroll(sl.axis(lead));
  sl.unroll(ljb);
  sl.tensorize(lji, dot4_u8s8_intrin(kInt8OutBlock));
}

}  // namespace kiln::topi
