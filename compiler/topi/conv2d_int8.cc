// conv2d_nchwc_int8: its compute, the weight packing, and the x86 template around dot4_u8s8.
#include "compiler/topi/conv2d_int8.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"
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

constexpr const char* kOp = "conv2d_nchwc_int8";

/// The padded data the convolution reads, where padding made a stage of it ("<name>.pad").
te::Tensor pad_stage(const te::Tensor& out) {
  const std::string suffix = ".pad";
  for (const te::Tensor& t : out->inputs()) {
    const std::string& n = t->name();
    if (t->is_compute() && n.size() > suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return t;
    }
  }
  return {};
}

/// How far the convolution's read of its data moves along the width when the output column moves
/// by one (1 when it cannot tell).
int64_t width_stride(const te::Tensor& out) {
  Expr index;
  te::rewrite_reads(out->body, [&](const te::TensorNode* t, const std::vector<Expr>& idx) -> Expr {
    if (t->dtype() == ir::DataType::UInt(8) && idx.size() == 5 && !index.defined()) index = idx[3];
    return Expr();
  });
  if (!index.defined()) return 1;
  auto at = [&](int64_t col) {
    ir::VarMap vmap;
    for (size_t i = 0; i < out->axis.size(); ++i) {
      vmap[out->axis[i]->var.get()] = Expr(i == 3 ? col : int64_t{0});
    }
    for (const auto& r : out->reduce_axis) vmap[r->var.get()] = Expr(int64_t{0});
    return ir::as_const_int(ir::simplify(ir::substitute(index, vmap)));
  };
  const auto a = at(0), b = at(1);
  return a && b && *b > *a ? *b - *a : 1;
}

}  // namespace

te::Tensor pack_conv2d_kernel_int8(const te::Tensor& kernel, int ic_block,
                                   const std::string& name) {
  const char* op = "pack_conv2d_kernel_int8";
  KILN_USER_CHECK(kernel.ndim() == 4 && kernel->dtype() == ir::kInt8)
      << op << ": '" << kernel->name() << "' must be a 4-D int8 OIHW kernel, got " << kernel.ndim()
      << "-D " << kernel->dtype().str();
  KILN_USER_CHECK(ic_block > 0 && ic_block % 4 == 0)
      << op << ": the input channel block must be a positive multiple of 4, got " << ic_block;
  const int64_t o = const_dim(kernel, 0, op), c = const_dim(kernel, 1, op);
  const int64_t kh = const_dim(kernel, 2, op), kw = const_dim(kernel, 3, op);
  const int64_t ob = kInt8OutBlock;
  return te::compute(
      {(o + ob - 1) / ob, (c + ic_block - 1) / ic_block, kh, kw, ic_block / 4, ob, 4},
      [&](const std::vector<Var>& i) {
        const Expr f = i[0] * Expr(ob) + i[5];
        const Expr ch = i[1] * Expr(int64_t{ic_block}) + i[4] * 4 + i[6];
        const Expr inside = f < Expr(o) && ch < Expr(c);
        return ir::select(inside,
                          kernel(ir::min(f, Expr(o - 1)), ir::min(ch, Expr(c - 1)), i[2], i[3]),
                          ir::make_zero(ir::kInt8));
      },
      name);
}

te::Tensor conv2d_nchwc_int8(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                             Ints4 padding, Ints2 dilation, int pad_value,
                             const std::string& name) {
  KILN_USER_CHECK(data.ndim() == 5 && data->dtype() == ir::DataType::UInt(8))
      << kOp << ": data '" << data->name() << "' must be 5-D uint8 [N, C/cb, H, W, cb], got "
      << data.ndim() << "-D " << data->dtype().str();
  KILN_USER_CHECK(kernel.ndim() == 7 && kernel->dtype() == ir::kInt8)
      << kOp << ": kernel '" << kernel->name()
      << "' must be 7-D int8 [O/16, C/cb, KH, KW, cb/4, 16, 4] (pack_conv2d_kernel_int8), got "
      << kernel.ndim() << "-D " << kernel->dtype().str();
  KILN_USER_CHECK(pad_value >= 0 && pad_value <= 255)
      << kOp << ": the pad value must be a uint8, got " << pad_value;
  const int64_t cb = const_dim(data, 1, kOp), h = const_dim(data, 2, kOp),
                w = const_dim(data, 3, kOp), ic = const_dim(data, 4, kOp);
  const int64_t ob = const_dim(kernel, 0, kOp), kh = const_dim(kernel, 2, kOp),
                kw = const_dim(kernel, 3, kOp);
  KILN_USER_CHECK(const_dim(kernel, 1, kOp) == cb && const_dim(kernel, 4, kOp) * 4 == ic &&
                  const_dim(kernel, 5, kOp) == kInt8OutBlock && const_dim(kernel, 6, kOp) == 4)
      << kOp << ": kernel '" << kernel->name() << "' does not pack " << cb << " blocks of " << ic
      << " input channels of '" << data->name() << "' as [O/16, " << cb << ", KH, KW, " << ic / 4
      << ", 16, 4]";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0)
      << kOp << ": stride and dilation must be positive";
  const int64_t ekh = (kh - 1) * dilation[0] + 1, ekw = (kw - 1) * dilation[1] + 1;
  KILN_USER_CHECK(h + padding[0] + padding[2] >= ekh && w + padding[1] + padding[3] >= ekw)
      << kOp << ": the kernel is larger than the padded input";
  const int64_t oh = (h + padding[0] + padding[2] - ekh) / stride[0] + 1;
  const int64_t ow = (w + padding[1] + padding[3] - ekw) / stride[1] + 1;
  te::Tensor p = pad_hw(data, padding, Expr(int64_t{pad_value}), name + ".pad");
  IterVar rco = te::reduce_axis({0, cb}, "rco"), rh = te::reduce_axis({0, kh}, "rh"),
          rw = te::reduce_axis({0, kw}, "rw"), rc4 = te::reduce_axis({0, ic / 4}, "rc4"),
          rci = te::reduce_axis({0, 4}, "rci");
  Workload wl{kOp, {spec_of(data, kOp), spec_of(kernel, kOp)}, {}};
  wl.attrs = {{"dilations", ints_attr(dilation)},
              {"pad_value", int64_t{pad_value}},
              {"pads", ints_attr(padding)},
              {"strides", ints_attr(stride)}};
  const te::Tensor out = te::compute(
      {data->shape()[0], ob, oh, ow, kInt8OutBlock},
      [&](const std::vector<Var>& i) {
        const Expr x = p(i[0], rco, i[2] * stride[0] + rh * dilation[0],
                         i[3] * stride[1] + rw * dilation[1], rc4 * 4 + rci);
        const Expr wt = kernel(i[1], rco, rh, rw, rc4, i[4], rci);
        return te::sum(ir::cast(ir::kInt32, x) * ir::cast(ir::kInt32, wt), {rco, rh, rw, rc4, rci});
      },
      name, {"n", "ocb", "oh", "ow", "oc"});
  return with_workload(out, wl);
}

te::Tensor depthwise_conv2d_nchwc_int8(const te::Tensor& data, const te::Tensor& kernel,
                                       Ints2 stride, Ints4 padding, Ints2 dilation, int pad_value,
                                       const std::string& name) {
  const char* op = "depthwise_conv2d_nchwc_int8";
  KILN_USER_CHECK(data.ndim() == 5 && data->dtype() == ir::DataType::UInt(8))
      << op << ": data '" << data->name() << "' must be 5-D uint8 [N, C/b, H, W, b], got "
      << data.ndim() << "-D " << data->dtype().str();
  KILN_USER_CHECK(kernel.ndim() == 6 && kernel->dtype() == ir::kInt8)
      << op << ": kernel '" << kernel->name() << "' must be 6-D int8 [C/b, 1, KH, KW, 1, b], got "
      << kernel.ndim() << "-D " << kernel->dtype().str();
  KILN_USER_CHECK(pad_value >= 0 && pad_value <= 255)
      << op << ": the pad value must be a uint8, got " << pad_value;
  const int64_t cb = const_dim(data, 1, op), h = const_dim(data, 2, op), w = const_dim(data, 3, op),
                c = const_dim(data, 4, op);
  const int64_t kh = const_dim(kernel, 2, op), kw = const_dim(kernel, 3, op);
  KILN_USER_CHECK(const_dim(kernel, 0, op) == cb && const_dim(kernel, 1, op) == 1 &&
                  const_dim(kernel, 4, op) == 1 && const_dim(kernel, 5, op) == c)
      << op << ": kernel '" << kernel->name() << "' must be [" << cb << ", 1, KH, KW, 1, " << c
      << "]";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0)
      << op << ": stride and dilation must be positive";
  const int64_t ekh = (kh - 1) * dilation[0] + 1, ekw = (kw - 1) * dilation[1] + 1;
  KILN_USER_CHECK(h + padding[0] + padding[2] >= ekh && w + padding[1] + padding[3] >= ekw)
      << op << ": the kernel is larger than the padded input";
  const int64_t oh = (h + padding[0] + padding[2] - ekh) / stride[0] + 1;
  const int64_t ow = (w + padding[1] + padding[3] - ekw) / stride[1] + 1;
  te::Tensor p = pad_hw(data, padding, Expr(int64_t{pad_value}), name + ".pad");
  IterVar rh = te::reduce_axis({0, kh}, "rh"), rw = te::reduce_axis({0, kw}, "rw");
  Workload wl{op, {spec_of(data, op), spec_of(kernel, op)}, {}};
  wl.attrs = {{"dilations", ints_attr(dilation)},
              {"pad_value", int64_t{pad_value}},
              {"pads", ints_attr(padding)},
              {"strides", ints_attr(stride)}};
  const te::Tensor out =
      te::compute({data->shape()[0], cb, oh, ow, c},
                  [&](const std::vector<Var>& i) {
                    const Expr x = p(i[0], i[1], i[2] * stride[0] + rh * dilation[0],
                                     i[3] * stride[1] + rw * dilation[1], i[4]);
                    const Expr wt = kernel(i[1], 0, rh, rw, 0, i[4]);
                    return te::sum(ir::cast(ir::kInt32, x) * ir::cast(ir::kInt32, wt), {rh, rw});
                  },
                  name, {"n", "cb", "oh", "ow", "c"});
  return with_workload(out, wl);
}

ConfigSpace conv2d_nchwc_int8_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 5 && out->is_compute() && out->reduce_axis.size() == 5 &&
                  out->dtype() == ir::kInt32)
      << "conv2d_nchwc_int8_x86_space: '" << out->name() << "' is not an int8 NCHW[x]c convolution";
  ConfigSpace space;
  space.define_split("tile_ow", const_dim(out, 3, kOp), 2, space::SplitPolicy::kFactorsAndPower2,
                     16);
  space.define_split("tile_oh", const_dim(out, 2, kOp), 2, space::SplitPolicy::kFactors, 4);
  space.define_split("tile_ob", const_dim(out, 1, kOp), 2, space::SplitPolicy::kFactors, 4);
  space.define_knob("reduce_order", {0, 1});
  space.define_knob("unroll_kw", {0, 1});
  space.define_knob("pad_at", {2, 1});
  space.define_split("tile_ic", *ir::as_const_int(out->reduce_axis[0]->dom.extent), 2);
  return space;
}

Config conv2d_nchwc_int8_x86_default(const te::Tensor& out, const ConfigSpace& space,
                                     const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  const bool wide = target.vector_bits >= 512;
  // About 16 accumulator vectors of AVX-512's 32 registers (measured on ResNet-18's layers on
  // Zen 5: 16 beat 24 and 12), 8 of AVX2's 16, 16 of AArch64's 32 (NEON, 4 int32 lanes each: not
  // measured on a board); a block of 16 int32 lanes takes 512 / vector_bits of them.
  const int64_t per_block = std::max<int64_t>(1, 512 / std::max(target.vector_bits, 128));
  const bool aarch64 = target.arch_name() == "aarch64";
  const int64_t budget = std::max<int64_t>(1, (wide || aarch64 ? 16 : 8) / per_block);
  const int64_t blocks = const_dim(out, 1, kOp), width = const_dim(out, 3, kOp);
  const int64_t height = const_dim(out, 2, kOp);
  const int64_t kw = *ir::as_const_int(out->reduce_axis[2]->dom.extent);
  const auto& cands = space.knob("tile_ow").candidates;
  auto ow_position = [&](int64_t inner) {
    for (size_t i = 0; i < cands.size(); ++i) {
      if (cands[i].back() == inner) return static_cast<int>(i);
    }
    return -1;
  };
  const int64_t stride = width_stride(out);
  if (kw > 1 && blocks % 4 == 0 && budget >= 16 && stride == 1 && width % 4 == 0) {
    // An unstrided window over a width 4 divides: 4 channel blocks by 4 columns, 8 vector loads
    // (4 data broadcasts, 4 weight rows) per 16 vpdpbusd where 2 blocks by 8 columns take 10
    // (ResNet-18's C2 and C6 on Zen 5, two runs: 2-3% faster; tuning picked it for C2).
    pos[knob_index(space, "tile_ob")] = split_position(space, "tile_ob", 4);
    pos[knob_index(space, "tile_ow")] = ow_position(4);
    pos[knob_index(space, "tile_oh")] = split_position(space, "tile_oh", 1);
  } else if (kw > 1 && blocks % 4 == 0 && budget >= 16 && width % 2 == 0 && height % 2 == 0) {
    // A strided window, or a width 4 does not divide: 4 channel blocks by 2 x 2 outputs (C4 and
    // C7 of ResNet-18 measured 20-30% faster than with 2 blocks by a row of 7; C9 as fast).
    pos[knob_index(space, "tile_ob")] = split_position(space, "tile_ob", 4);
    pos[knob_index(space, "tile_ow")] = ow_position(2);
    pos[knob_index(space, "tile_oh")] = split_position(space, "tile_oh", 2);
  } else {
    const int64_t tile_ob = budget >= 4 && blocks % 2 == 0 ? 2 : 1;
    pos[knob_index(space, "tile_ob")] = split_position(space, "tile_ob", tile_ob);
    // The widest dividing column tile within the budget; a partial power of two where that is
    // under half of it (1 of a prime width).
    const int64_t width_budget = std::max<int64_t>(1, budget / tile_ob);
    int ow = -1;
    for (size_t i = 0; i < cands.size(); ++i) {
      const int64_t f = cands[i].back();
      if (cands[i][0] * f == width && f <= width_budget && (ow < 0 || f > cands[ow].back())) {
        ow = static_cast<int>(i);
      }
    }
    if (ow < 0 || 2 * cands[ow].back() < width_budget) {
      ow = split_position(space, "tile_ow", width_budget);
    }
    pos[knob_index(space, "tile_ow")] = ow;
    // A narrow map takes rows as well.
    const int64_t tile_ow = cands[ow].back();
    const int64_t rows = width <= 4 ? std::max<int64_t>(1, width_budget / tile_ow) : 1;
    pos[knob_index(space, "tile_oh")] = split_position(space, "tile_oh", rows);
  }
  pos[knob_index(space, "reduce_order")] = knob_position(space, "reduce_order", 0);
  pos[knob_index(space, "unroll_kw")] = knob_position(space, "unroll_kw", 0);
  // Padding per register tile where the map is wide (in cache as the tile reads it: ResNet-18's
  // 3x3 layers at 56 and 28 columns, and the strided one at 14, measured 5-30% faster than padded
  // in full first); a small map pads in full (C9, 14 columns, and the 7-column ones: 3-8%).
  const bool pad_per_tile = width >= 28 || (stride > 1 && width >= 14);
  pos[knob_index(space, "pad_at")] = knob_position(space, "pad_at", pad_per_tile ? 1 : 2);
  pos[knob_index(space, "tile_ic")] =
      split_position(space, "tile_ic", *ir::as_const_int(out->reduce_axis[0]->dom.extent));
  return space.from_positions(pos);
}

void schedule_conv2d_nchwc_int8_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                                    const te::Tensor& output) {
  te::Tensor pad = pad_stage(out);
  te::Tensor cl = s.cache_write(out, "local");
  te::Stage so = epilogue_stage(s, out, output);
  IterVar n = so.axis(0), ob = so.axis(1), oh = so.axis(2), ow = so.axis(3), oc = so.axis(4);
  auto [obo, obi] = so.split(ob, cfg.split("tile_ob").back());
  auto [oho, ohi] = so.split(oh, cfg.split("tile_oh").back());
  auto [owo, owi] = so.split(ow, cfg.split("tile_ow").back());
  so.reorder({n, obo, oho, owo, obi, ohi, owi, oc});
  IterVar par = so.fuse({n, obo, oho});
  so.parallel(par);
  so.unroll(obi);
  so.unroll(ohi);
  so.unroll(owi);
  so.vectorize(oc);

  te::Stage sl = s[cl];
  const int64_t ic_chunks = cfg.split("tile_ic")[0];
  IterVar ln = sl.axis(0), lob = sl.axis(1), loh = sl.axis(2), low = sl.axis(3), loc = sl.axis(4);
  IterVar rco = sl.reduce_axis(0), rh = sl.reduce_axis(1), rw = sl.reduce_axis(2),
          rc4 = sl.reduce_axis(3), rci = sl.reduce_axis(4);
  std::vector<IterVar> window = cfg.knob("reduce_order") == 0 ? std::vector<IterVar>{rh, rw, rc4}
                                                              : std::vector<IterVar>{rc4, rh, rw};
  std::vector<IterVar> order{ln};
  if (ic_chunks == 1) {
    sl.compute_at(so, owo);
    order.push_back(rco);
  } else {
    // As conv2d_nchwc_x86: the task's rows keep their sums in local memory while each chunk of
    // input channel blocks runs over all of their column tiles.
    sl.compute_at(so, par);
    auto [lowo, lowi] = sl.split(low, cfg.split("tile_ow").back());
    auto [rcoo, rcoi] = sl.split(rco, cfg.split("tile_ic").back());
    order.insert(order.end(), {rcoo, lowo, rcoi});
    low = lowi;
  }
  order.insert(order.end(), window.begin(), window.end());
  order.insert(order.end(), {lob, loh, low, loc, rci});
  sl.reorder(order);
  sl.unroll(lob);
  sl.unroll(loh);
  sl.unroll(low);
  if (cfg.knob("unroll_kw") != 0) sl.unroll(rw);
  sl.tensorize(loc, dot4_u8s8_intrin(kInt8OutBlock));
  if (pad.defined()) {
    if (cfg.knob("pad_at") == 1) {
      s[pad].compute_at(sl, ln);
      s[pad].set_scope("local");
    } else {
      schedule_layout_transform_x86(s, pad);
    }
  }
}

}  // namespace kiln::topi
