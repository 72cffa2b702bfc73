// 2-D convolution in NCHW and NCHW[x]c, the layout conversions, and their x86 schedules.
#include "compiler/topi/conv2d.h"

#include <algorithm>

#include "base/error.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"
#include "compiler/pass/inject_prefetch.h"
#include "compiler/topi/conv2d_cache_rules.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;
using space::Config;
using space::ConfigSpace;

namespace {

/// The largest factor of n not above limit.
int64_t largest_factor(int64_t n, int64_t limit) {
  for (int64_t f = std::min(n, limit); f > 1; --f) {
    if (n % f == 0) return f;
  }
  return 1;
}

/// The innermost factor a vectorized tile of `n` columns should take: a multiple of 8 lanes
/// where one divides, else the largest factor up to `limit`.
int64_t vector_tile(int64_t n, int64_t limit) {
  for (int64_t f : {int64_t{16}, int64_t{8}}) {
    if (f <= limit && n % f == 0) return f;
  }
  return largest_factor(n, limit);
}

/// The position of the split candidate of knob `name` whose innermost factor is `inner`.
int split_position_exact(const ConfigSpace& space, const std::string& name, int64_t inner) {
  const auto& cands = space.knob(name).candidates;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].back() == inner) return static_cast<int>(i);
  }
  return 0;
}

/// The padding stage a convolution reads (its first input when that is a compute named "*pad").
te::Tensor pad_stage_of(const te::Tensor& out) {
  auto inputs = out->inputs();
  if (inputs.empty()) return {};
  const te::Tensor& d = inputs[0];
  const std::string& n = d->name();
  if (d->is_compute() && n.size() >= 3 && n.compare(n.size() - 3, 3, "pad") == 0) return d;
  return {};
}

/// The stride of a convolution along its width: how far its read of `input` moves when the
/// output column (axis 3) moves by one (1 when it cannot tell).
int64_t width_stride(const te::Tensor& out, const te::Tensor& input) {
  Expr index;
  te::rewrite_reads(out->body, [&](const te::TensorNode* t, const std::vector<Expr>& idx) -> Expr {
    if (t == input.get() && idx.size() >= 4 && !index.defined()) index = idx[3];
    return Expr();
  });
  if (!index.defined()) return 1;
  auto at = [&](int64_t col) {
    ir::VarMap vmap;
    for (size_t i = 0; i < out->axis.size(); ++i)
      vmap[out->axis[i]->var.get()] = Expr(i == 3 ? col : 0);
    for (const auto& r : out->reduce_axis) vmap[r->var.get()] = Expr(0);
    return ir::as_const_int(ir::simplify(ir::substitute(index, vmap)));
  };
  auto a = at(0), b = at(1);
  return a && b && *b > *a ? *b - *a : 1;
}

Expr clamp(Expr v, int64_t hi) { return ir::min(ir::max(v, 0), Expr(hi)); }

/// Where the padding stage goes: 0 inlined into the convolution (clamped loads, often gathers),
/// 1 computed per register tile of `tile` (at its loop `at`) in local memory, 2 computed in full
/// before the convolution (rows in parallel, columns vectorized), so that the convolution reads
/// plain rows.
void schedule_pad(te::Schedule& s, const te::Tensor& pad, const te::Stage& tile, const IterVar& at,
                  int64_t pad_at) {
  if (!pad.defined()) return;
  if (pad_at == 0) {
    s[pad].compute_inline();
  } else if (pad_at == 1) {
    s[pad].compute_at(tile, at);
    s[pad].set_scope("local");
    // bf16 pairs (conv2d_bf16.h): a block's pairs converted as one vector.
    if (pad->dtype() == ir::kInt32) s[pad].vectorize(s[pad].axis(pad.ndim() - 1));
  } else {
    schedule_layout_transform_x86(s, pad);
  }
}

/// The shared NCHW template: `oc_knob` names the channel split knob.
void schedule_nchw_common(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                          const std::string& oc_knob, int reorder_inner, const te::Tensor& output) {
  te::Tensor pad = pad_stage_of(out);
  te::Tensor cl = s.cache_write(out, "local");
  te::Stage so = epilogue_stage(s, out, output);
  IterVar n = so.axis(0), oc = so.axis(1), oh = so.axis(2), ow = so.axis(3);
  auto [oco, oci] = so.split(oc, cfg.split(oc_knob).back());
  auto [owo, owi] = so.split(ow, cfg.split("tile_ow").back());
  so.reorder({n, oco, oh, owo, oci, owi});
  IterVar par = so.fuse({n, oco, oh});
  so.parallel(par);
  so.unroll(oci);
  so.vectorize(owi);

  te::Stage sl = s[cl];
  sl.compute_at(so, owo);
  IterVar ln = sl.axis(0), loc = sl.axis(1), loh = sl.axis(2), low = sl.axis(3);
  size_t nr = cl->reduce_axis.size();
  IterVar rc, rh = sl.reduce_axis(nr - 2), rw = sl.reduce_axis(nr - 1);
  if (nr == 3) rc = sl.reduce_axis(0);
  std::vector<IterVar> order{ln, loh};
  if (rc.defined()) order.push_back(rc);
  if (reorder_inner == 0) {
    order.insert(order.end(), {rh, rw, loc, low});
  } else {
    order.insert(order.end(), {loc, rh, rw, low});
  }
  sl.reorder(order);
  sl.unroll(loc);
  if (cfg.knob("unroll_kw") != 0) sl.unroll(rw);
  sl.vectorize(low);

  schedule_pad(s, pad, sl, ln, cfg.knob("pad_at"));
}

}  // namespace

te::Tensor pad_hw(const te::Tensor& t, const Ints4& pads, Expr value, const std::string& name) {
  KILN_USER_CHECK(t.ndim() >= 4) << "pad_hw: '" << t->name() << "' must have at least 4 dimensions";
  for (int p : pads) KILN_USER_CHECK(p >= 0) << "pad_hw: pads must not be negative, got " << p;
  if (pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0) return t;
  int64_t h = const_dim(t, 2, "pad_hw"), w = const_dim(t, 3, "pad_hw");
  std::vector<Expr> shape = t->shape();
  Expr fill = value.defined() ? ir::cast(t->dtype(), value) : ir::make_zero(t->dtype());
  shape[2] = Expr(h + pads[0] + pads[2]);
  shape[3] = Expr(w + pads[1] + pads[3]);
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        Expr y = i[2] - pads[0], x = i[3] - pads[1];
        std::vector<Expr> idx(i.begin(), i.end());
        idx[2] = clamp(y, h - 1);
        idx[3] = clamp(x, w - 1);
        Expr inside = y >= 0 && y < Expr(h) && x >= 0 && x < Expr(w);
        return ir::select(inside, t(idx), fill);
      },
      name);
}

te::Tensor conv2d_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                       Ints4 padding, Ints2 dilation, int groups, const std::string& name) {
  KILN_USER_CHECK(data.ndim() == 4 && kernel.ndim() == 4)
      << "conv2d_nchw: data and kernel must be 4-D, got " << data.ndim() << "-D '" << data->name()
      << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0 &&
                  groups > 0)
      << "conv2d_nchw: stride, dilation and groups must be positive";
  int64_t c = const_dim(data, 1, "conv2d_nchw"), h = const_dim(data, 2, "conv2d_nchw"),
          w = const_dim(data, 3, "conv2d_nchw");
  int64_t o = const_dim(kernel, 0, "conv2d_nchw"), cg = const_dim(kernel, 1, "conv2d_nchw"),
          kh = const_dim(kernel, 2, "conv2d_nchw"), kw = const_dim(kernel, 3, "conv2d_nchw");
  KILN_USER_CHECK(c % groups == 0 && o % groups == 0 && cg == c / groups)
      << "conv2d_nchw: " << c << " input and " << o << " output channels in " << groups
      << " groups need a kernel with " << c / groups << " input channels, '" << kernel->name()
      << "' has " << cg;
  int64_t ekh = (kh - 1) * dilation[0] + 1, ekw = (kw - 1) * dilation[1] + 1;
  KILN_USER_CHECK(h + padding[0] + padding[2] >= ekh && w + padding[1] + padding[3] >= ekw)
      << "conv2d_nchw: the kernel is larger than the padded input";
  int64_t oh = (h + padding[0] + padding[2] - ekh) / stride[0] + 1;
  int64_t ow = (w + padding[1] + padding[3] - ekw) / stride[1] + 1;
  te::Tensor p = pad_hw(data, padding, Expr(), name + ".pad");
  const Workload wl{"conv2d_nchw",
                    {spec_of(data, "conv2d_nchw"), spec_of(kernel, "conv2d_nchw")},
                    {{"dilations", ints_attr(dilation)},
                     {"groups", int64_t{groups}},
                     {"pads", ints_attr(padding)},
                     {"strides", ints_attr(stride)}}};
  int64_t og = o / groups;
  IterVar rh = te::reduce_axis({0, kh}, "rh"), rw = te::reduce_axis({0, kw}, "rw");
  if (cg == 1) {  // one input channel per group (depthwise when groups == C)
    return with_workload(te::compute({data->shape()[0], o, oh, ow},
                                     [&](Var n, Var f, Var y, Var x) {
                                       Expr ch = groups == 1 ? Expr(0) : ir::floordiv(f, Expr(og));
                                       return te::sum(p(n, ch, y * stride[0] + rh * dilation[0],
                                                        x * stride[1] + rw * dilation[1]) *
                                                          kernel(f, 0, rh, rw),
                                                      {rh, rw});
                                     },
                                     name, {"n", "oc", "oh", "ow"}),
                         wl);
  }
  IterVar rc = te::reduce_axis({0, cg}, "rc");
  return with_workload(
      te::compute({data->shape()[0], o, oh, ow},
                  [&](Var n, Var f, Var y, Var x) {
                    Expr ch = groups == 1 ? Expr(rc) : ir::floordiv(f, Expr(og)) * Expr(cg) + rc;
                    return te::sum(p(n, ch, y * stride[0] + rh * dilation[0],
                                     x * stride[1] + rw * dilation[1]) *
                                       kernel(f, rc, rh, rw),
                                   {rc, rh, rw});
                  },
                  name, {"n", "oc", "oh", "ow"}),
      wl);
}

namespace {

/// The knob of where an NCHW convolution's padding is computed (0 inlined, 1 per register
/// tile, 2 whole tensor first). The default takes the first choice: padding in full first reads
/// plain rows, best at stride 1; strided reads gather anyway, and then inlining saves the pass
/// over memory.
void define_pad_at(ConfigSpace* space, const te::Tensor& out) {
  te::Tensor pad = pad_stage_of(out);
  bool strided = pad.defined() && width_stride(out, pad) > 1;
  space->define_knob("pad_at",
                     strided ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{2, 0, 1});
}

}  // namespace

ConfigSpace conv2d_nchw_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute())
      << "conv2d_nchw_x86_space: '" << out->name() << "' is not a 4-D convolution";
  ConfigSpace space;
  space.define_split("tile_oc", const_dim(out, 1, "conv2d"), 2, space::SplitPolicy::kFactors, 16);
  space.define_split("tile_ow", const_dim(out, 3, "conv2d"), 2, space::SplitPolicy::kFactors, 32);
  space.define_knob("reorder_inner", {0, 1});
  space.define_knob("unroll_kw", {0, 1});
  define_pad_at(&space, out);
  return space;
}

Config conv2d_nchw_x86_default(const ConfigSpace& space) {
  std::vector<int> pos(space.knobs().size(), 0);
  int64_t ow = split_extent(space, "tile_ow");
  int64_t owi = vector_tile(ow, 16);
  pos[knob_index(space, "tile_ow")] = split_position_exact(space, "tile_ow", owi);
  pos[knob_index(space, "tile_oc")] = split_position(space, "tile_oc", owi >= 16 ? 4 : 8);
  pos[knob_index(space, "reorder_inner")] = knob_position(space, "reorder_inner", 0);
  pos[knob_index(space, "unroll_kw")] = knob_position(space, "unroll_kw", 1);
  pos[knob_index(space, "pad_at")] = 0;  // the space lists the better choice first
  return space.from_positions(pos);
}

void schedule_conv2d_nchw_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                              const te::Tensor& output) {
  schedule_nchw_common(s, out, cfg, "tile_oc", static_cast<int>(cfg.knob("reorder_inner")), output);
}

ConfigSpace depthwise_conv2d_nchw_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute() && out->reduce_axis.size() == 2)
      << "depthwise_conv2d_nchw_x86_space: '" << out->name() << "' is not a depthwise convolution";
  ConfigSpace space;
  space.define_split("tile_c", const_dim(out, 1, "conv2d"), 2, space::SplitPolicy::kFactors, 8);
  space.define_split("tile_ow", const_dim(out, 3, "conv2d"), 2, space::SplitPolicy::kFactors, 32);
  space.define_knob("unroll_kw", {0, 1});
  define_pad_at(&space, out);
  return space;
}

Config depthwise_conv2d_nchw_x86_default(const ConfigSpace& space) {
  std::vector<int> pos(space.knobs().size(), 0);
  int64_t ow = split_extent(space, "tile_ow");
  pos[knob_index(space, "tile_ow")] = split_position_exact(space, "tile_ow", vector_tile(ow, 16));
  pos[knob_index(space, "tile_c")] = split_position(space, "tile_c", 4);
  pos[knob_index(space, "unroll_kw")] = knob_position(space, "unroll_kw", 1);
  pos[knob_index(space, "pad_at")] = 0;  // the space lists the better choice first
  return space.from_positions(pos);
}

void schedule_depthwise_conv2d_nchw_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                                        const te::Tensor& output) {
  schedule_nchw_common(s, out, cfg, "tile_c", 1, output);
}

namespace {

/// conv2d_nchwc (groups == 1) and group_conv2d_nchwc: `op` names the compute in messages and in
/// its workload. With groups == 1 the program is conv2d_nchwc's as it always was (its tuning
/// records are keyed by the program's structure).
te::Tensor blocked_conv2d(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                          Ints4 padding, Ints2 dilation, int groups, const std::string& name,
                          const char* op) {
  KILN_USER_CHECK(data.ndim() == 5 && kernel.ndim() == 6)
      << op << ": data must be 5-D and kernel 6-D, got " << data.ndim() << "-D '" << data->name()
      << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  int64_t cb = const_dim(data, 1, op), h = const_dim(data, 2, op), w = const_dim(data, 3, op),
          ic = const_dim(data, 4, op);
  int64_t ob = const_dim(kernel, 0, op), kh = const_dim(kernel, 2, op),
          kw = const_dim(kernel, 3, op), oc = const_dim(kernel, 5, op);
  KILN_USER_CHECK(groups > 0 && cb % groups == 0 && ob % groups == 0)
      << op << ": " << cb << " input and " << ob << " output channel blocks do not split into "
      << groups << " groups";
  const int64_t icb_per_group = cb / groups, ob_per_group = ob / groups;
  KILN_USER_CHECK(const_dim(kernel, 1, op) == icb_per_group && const_dim(kernel, 4, op) == ic)
      << op << ": kernel '" << kernel->name() << "' does not match the channel blocks of '"
      << data->name() << "'";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0)
      << op << ": stride and dilation must be positive";
  int64_t ekh = (kh - 1) * dilation[0] + 1, ekw = (kw - 1) * dilation[1] + 1;
  KILN_USER_CHECK(h + padding[0] + padding[2] >= ekh && w + padding[1] + padding[3] >= ekw)
      << op << ": the kernel is larger than the padded input";
  int64_t oh = (h + padding[0] + padding[2] - ekh) / stride[0] + 1;
  int64_t ow = (w + padding[1] + padding[3] - ekw) / stride[1] + 1;
  te::Tensor p = pad_hw(data, padding, Expr(), name + ".pad");
  IterVar rco = te::reduce_axis({0, icb_per_group}, "rco"), rci = te::reduce_axis({0, ic}, "rci");
  IterVar rh = te::reduce_axis({0, kh}, "rh"), rw = te::reduce_axis({0, kw}, "rw");
  Workload wl{op, {spec_of(data, op), spec_of(kernel, op)}, {}};
  wl.attrs = {{"dilations", ints_attr(dilation)},
              {"pads", ints_attr(padding)},
              {"strides", ints_attr(stride)}};
  if (std::string(op) != "conv2d_nchwc") wl.attrs["groups"] = int64_t{groups};
  return with_workload(
      te::compute({data->shape()[0], ob, oh, ow, oc},
                  [&](Var n, Var f, Var y, Var x, Var fi) {
                    // The input block: the group's first plus rco.
                    Expr block =
                        groups == 1
                            ? Expr(rco->var)
                            : ir::floordiv(f, Expr(ob_per_group)) * Expr(icb_per_group) + rco->var;
                    return te::sum(p(n, block, y * stride[0] + rh * dilation[0],
                                     x * stride[1] + rw * dilation[1], rci) *
                                       kernel(f, rco, rh, rw, rci, fi),
                                   {rco, rh, rw, rci});
                  },
                  name, {"n", "ocb", "oh", "ow", "oc"}),
      wl);
}

}  // namespace

te::Tensor conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                        Ints4 padding, Ints2 dilation, const std::string& name) {
  return blocked_conv2d(data, kernel, stride, padding, dilation, 1, name, "conv2d_nchwc");
}

te::Tensor group_conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                              Ints4 padding, Ints2 dilation, int groups, const std::string& name) {
  return blocked_conv2d(data, kernel, stride, padding, dilation, groups, name,
                        "group_conv2d_nchwc");
}

namespace {

/// The NCHW[x]c register tile's other two dimensions: tile_oh output rows and tile_ob channel
/// blocks (each at most 4, dividing), with tile_ow the columns. The channel blocks' factors are
/// those of `blocks` (all of them when 0; a grouped convolution's per group).
void define_register_tile(ConfigSpace* space, const te::Tensor& out, int64_t blocks = 0) {
  space->define_split("tile_oh", const_dim(out, 2, "conv2d_nchwc"), 2, space::SplitPolicy::kFactors,
                      4);
  space->define_split("tile_ob", blocks > 0 ? blocks : const_dim(out, 1, "conv2d_nchwc"), 2,
                      space::SplitPolicy::kFactors, 4);
}

/// The default register tile of an NCHW[x]c convolution: about 8 vector accumulators where there
/// are 16 registers (AVX2 and below), 16 where there are 32 (AVX-512), leaving room for the
/// broadcasts and weights; a 16-channel block is one AVX-512 vector but two AVX2 ones, and a tile
/// that spills runs at half speed or worse. Columns first, then channel blocks; with
/// `pair_blocks` (a convolution that reduces over channels, not a depthwise one) on AVX-512, two
/// channel blocks where they split so, each input element broadcast once for both. Tuning the zoo
/// (ResNeXt-50, DenseNet-121, GoogLeNet, RegNet, ...) on AVX-512 picked 12-28 accumulators, mostly
/// 7-8 columns by 2 blocks, for nearly every layer, hence 16 there (`scripts/bench.sh zoo`).
void default_register_tile(const te::Tensor& out, const ConfigSpace& space, int vector_bits,
                           bool pair_blocks, std::vector<int>* pos) {
  const bool wide = vector_bits >= 512;
  const int64_t accumulators = wide ? 16 : 8;
  const int64_t lanes = std::max(vector_bits, 128) / 32;
  const int64_t per_block = (const_dim(out, 4, "conv2d_nchwc") + lanes - 1) / lanes;
  const int64_t budget = std::max<int64_t>(1, accumulators / per_block);
  const auto& ob_cands = space.knob("tile_ob").candidates;
  // A block of at most half a vector (8 channels on AVX-512: a 24-channel stem's 3 blocks) fills
  // half a register, and each broadcast input element feeds only it: such blocks go up to 4 a
  // tile, so that a broadcast feeds each of them (ShuffleNet's stem: 0.14 ms -> 0.12 ms).
  const bool narrow = 2 * const_dim(out, 4, "conv2d_nchwc") <= lanes;
  const int64_t paired =
      pair_blocks && wide ? ob_cands[split_position(space, "tile_ob", narrow ? 4 : 2)].back() : 1;
  const int64_t width_budget = std::max<int64_t>(1, budget / paired);
  // The widest tile within the budget that divides the width; a partial one (a power of two)
  // when that is under half the budget, as 1 of a 7-wide output is.
  const auto& cands = space.knob("tile_ow").candidates;
  const int64_t width = const_dim(out, 3, "conv2d_nchwc");
  int ow = -1;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int64_t f = cands[i].back();
    if (cands[i][0] * f == width && f <= width_budget && (ow < 0 || f > cands[ow].back())) {
      ow = static_cast<int>(i);
    }
  }
  if (ow < 0 || 2 * cands[ow].back() < width_budget)
    ow = split_position(space, "tile_ow", width_budget);
  (*pos)[knob_index(space, "tile_ow")] = ow;
  const int64_t tile_ow = cands[ow].back();
  // A narrow output (4 columns or fewer: a tiny map, or a region of one, lower_conv_by_regions)
  // takes rows rather than more than a pair of channel blocks: a task's weights (all input
  // channels and taps of its blocks) then stay in L2 for every row it computes.
  const int64_t rows = tile_ow * paired < budget && width <= 4
                           ? std::min<int64_t>(4, budget / (tile_ow * paired))
                           : 1;
  const int oh = split_position(space, "tile_oh", rows);
  (*pos)[knob_index(space, "tile_oh")] = oh;
  const int64_t tile_oh = space.knob("tile_oh").candidates[oh].back();
  (*pos)[knob_index(space, "tile_ob")] =
      split_position(space, "tile_ob", budget / (tile_ow * tile_oh));
}

/// Column chunks (col_chunk: column tiles per chunk; 0, the first: whole rows): the columns split
/// outside the parallel loop over channel blocks and rows, so that a task reads a chunk of its
/// input rows, not rows so long that they fall out of cache before the next task (of the
/// neighbouring rows or the other channel blocks) reads them again. Defined last, so that the
/// configs of the spaces without it keep their indices.
void define_column_chunk(ConfigSpace* space) {
  space->define_knob("col_chunk", {0, 4, 8, 16, 32, 64});
}

/// The space of conv2d_nchwc and group_conv2d_nchwc; `blocks` as for define_register_tile (a
/// grouped convolution's when positive).
ConfigSpace nchwc_space(const te::Tensor& out, int64_t blocks) {
  ConfigSpace space;
  // Columns: the factors of the width, and powers of two with a partial last tile (4 + 3 of a
  // 7-wide output: the only dividing tiles, 1 and 7, are too small or spill on AVX2).
  space.define_split("tile_ow", const_dim(out, 3, "conv2d_nchwc"), 2,
                     space::SplitPolicy::kFactorsAndPower2, 16);
  define_register_tile(&space, out, blocks);
  space.define_knob("reduce_order", {0, 1});
  space.define_knob("unroll_kw", {0, 1});
  // The default takes the first: padding in full first measured best at strides 1 and 2; a
  // grouped convolution, with a few channels a group, does too little work for each input
  // element to pay for a pass over memory (as a depthwise one): inlined, the kernel's columns
  // unrolled, its grouped 3x3s are faster than padded first (RegNet-Y-400MF, ResNeXt-50).
  space.define_knob("pad_at",
                    blocks > 0 ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{2, 1, 0});
  // The input channel blocks of the reduction in chunks (outer part: the number of chunks).
  space.define_split("tile_ic", *ir::as_const_int(out->reduce_axis[0]->dom.extent), 2);
  define_column_chunk(&space);
  // Register tiles of rows per task (0: all); defined last, as col_chunk.
  space.define_knob("task_rows", {1, 0, 2, 4, 8});
  // Prefetches of the next reduction chunk's weights (pass::inject_prefetch); defined last.
  space.define_knob("prefetch", {0, 1});
  // Prefetches of the next column tile's input (pass::inject_prefetch); defined last.
  space.define_knob("prefetch_input", {0, 1});
  return space;
}

}  // namespace

ConfigSpace conv2d_nchwc_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 5 && out->is_compute() && out->reduce_axis.size() == 4)
      << "conv2d_nchwc_x86_space: '" << out->name() << "' is not an NCHW[x]c convolution";
  return nchwc_space(out, 0);
}

namespace {

/// Whether a bf16 convolution (conv2d_bf16.h) converts its input to pairs best per register tile
/// (pad_at 1) rather than in a pass over memory first: a 1x1 one whose pairs stage is its output's
/// size (stride 1, or a strided one's subsampled input) and which at most 4 tiles of output
/// channel blocks read (each converts it again, in cache). ResNet-50's 256->64 and 512->128 1x1s
/// ran 10-28% faster so; at 8 tiles and more (1024->256), or with a kernel window, the pass first
/// was as fast or faster.
bool pairs_per_tile(const te::Tensor& out, const ConfigSpace& space, const std::vector<int>& pos) {
  const te::Tensor pad = pad_stage_of(out);
  if (!pad.defined() || pad->dtype() != ir::kInt32) return false;
  const te::Tensor kernel = input_of_rank(out, 6);
  const char* op = "conv2d_nchwc_bf16";
  if (!kernel.defined() || const_dim(kernel, 2, op) != 1 || const_dim(kernel, 3, op) != 1 ||
      const_dim(pad, 2, op) != const_dim(out, 2, op) ||
      const_dim(pad, 3, op) != const_dim(out, 3, op)) {
    return false;
  }
  const int64_t tile_ob =
      space.knob("tile_ob").candidates[pos[knob_index(space, "tile_ob")]].back();
  return const_dim(out, 1, op) <= 4 * tile_ob;
}

/// Whether a float convolution pads its input's rows only (a (K, 1) kernel's padding, as
/// Inception's 7x1s and the (KD, 1) convolutions over a video's frames have): its padding inlined
/// is a bounds check per row, outside the column and channel loops, where a pass over memory first
/// writes and reads the whole input again. Measured inlined against padded first: s3d's (7, 1) over
/// 64 channels of 16 x 12544 3.5x as fast, its (3, 1) over 192 channels 1.2x, Inception-v3's 7x1
/// over 160 channels of 17x17 and 3x1 over 384 of 8x8 1.1x.
bool pads_rows_only(const te::Tensor& out) {
  const te::Tensor pad = pad_stage_of(out);
  if (!pad.defined() || pad->dtype() != ir::kFloat32 || pad->inputs().empty()) return false;
  const te::Tensor data = pad->inputs()[0];
  return data.ndim() == 5 &&
         const_dim(pad, 3, "conv2d_nchwc") == const_dim(data, 3, "conv2d_nchwc");
}

/// The blocked convolutions' default: the register tile for the vector width, the reduction in
/// its first order and in chunks where the weights would not stay in cache, the kernel's columns
/// unrolled or not, the padding where the space prefers it.
Config nchwc_default(const te::Tensor& out, const ConfigSpace& space, const target::Target& target,
                     bool grouped) {
  const int64_t unroll_kw = grouped ? 1 : 0;
  std::vector<int> pos(space.knobs().size(), 0);
  default_register_tile(out, space, target.vector_bits, /*pair_blocks=*/true, &pos);
  pos[knob_index(space, "reduce_order")] = knob_position(space, "reduce_order", 0);
  pos[knob_index(space, "unroll_kw")] = knob_position(space, "unroll_kw", unroll_kw);
  // Padding inlined (pad_at 0) where only rows are padded (pads_rows_only), and for an input
  // block of fewer than 4 channels (an image's 3 colours): a padding pass first copies a few
  // floats a pixel in scalar code with its index arithmetic, as long as the convolution itself
  // takes (ShuffleNet's 3x3 stride-2 stem: 0.26 ms, 0.14 ms with the padding inlined). Otherwise
  // the space lists the better choice first.
  const te::Tensor kernel = input_of_rank(out, 6);
  const int64_t ib = kernel.defined() ? const_dim(kernel, 4, "conv2d_nchwc") : 0;
  pos[knob_index(space, "pad_at")] =
      pads_rows_only(out) || (ib > 0 && ib < 4) ? knob_position(space, "pad_at", 0) : 0;
  pos[knob_index(space, "tile_ic")] = default_ic_chunk(out, space, pos, target);
  pos[knob_index(space, "col_chunk")] = default_column_chunk(out, space, pos, target);
  default_task_rows(out, space, target, grouped, &pos);
  pos[knob_index(space, "prefetch")] = default_prefetch(out, space, pos, target, grouped);
  pos[knob_index(space, "prefetch_input")] = default_prefetch_input(out, space, target);
  if (pairs_per_tile(out, space, pos))
    pos[knob_index(space, "pad_at")] = knob_position(space, "pad_at", 1);
  return space.from_positions(pos);
}
}  // namespace

Config conv2d_nchwc_x86_default(const te::Tensor& out, const ConfigSpace& space,
                                const target::Target& target) {
  return nchwc_default(out, space, target, /*grouped=*/false);
}

void schedule_conv2d_nchwc_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                               const te::Tensor& output) {
  te::Tensor pad = pad_stage_of(out);
  te::Tensor cl = s.cache_write(out, "local");
  te::Stage so = epilogue_stage(s, out, output);
  IterVar n = so.axis(0), ob = so.axis(1), oh = so.axis(2), ow = so.axis(3), oc = so.axis(4);
  // The register tile: tile_ob channel blocks x tile_oh rows x tile_ow columns, oc vectorized.
  const bool depthwise = out->reduce_axis.size() == 2;
  const int64_t tile_oh = cfg.split("tile_oh").back();
  auto [obo, obi] = so.split(ob, cfg.split("tile_ob").back());
  auto [oho, ohi] = so.split(oh, tile_oh);
  auto [owo, owi] = so.split(ow, cfg.split("tile_ow").back());
  // task_rows: register tiles of rows per task (0: every row); the rows are a serial loop inside
  // the task, outside its column tiles.
  const int64_t row_tiles = (const_dim(out, 2, "conv2d_nchwc") + tile_oh - 1) / tile_oh;
  int64_t task_rows = depthwise ? 1 : cfg.knob("task_rows");
  if (task_rows == 0 || task_rows > row_tiles) task_rows = row_tiles;
  IterVar ohr;
  if (task_rows > 1) {
    const te::Stage::SplitResult rows = so.split(oho, task_rows);
    oho = rows.outer;
    ohr = rows.inner;
  }
  // The parallel loop: column chunks (col_chunk), channel blocks, rows; inside a task its rows
  // (task_rows), its column tiles, then the register tile.
  std::vector<IterVar> tasks{n};
  if (const int64_t chunk = cfg.knob("col_chunk"); chunk > 0) {
    auto [owc, owt] = so.split(owo, chunk);
    tasks.push_back(owc);
    owo = owt;
  }
  tasks.insert(tasks.end(), {obo, oho});
  std::vector<IterVar> order = tasks;
  if (ohr.defined()) order.push_back(ohr);
  order.insert(order.end(), {owo, obi, ohi, owi, oc});
  so.reorder(order);
  const IterVar par = so.fuse(tasks);
  so.parallel(par);
  so.unroll(obi);
  so.unroll(ohi);
  so.unroll(owi);
  so.vectorize(oc);
  const bool prefetch_input = !depthwise && cfg.knob("prefetch_input") != 0;

  te::Stage sl = s[cl];
  // tile_ic's outer part: chunks of the input channel blocks, each reduced over every column
  // tile of the task before the next (1: the whole reduction inside each register tile).
  const int64_t ic_chunks = depthwise ? 1 : cfg.split("tile_ic")[0];
  IterVar ln = sl.axis(0), lob = sl.axis(1), loh = sl.axis(2), low = sl.axis(3), loc = sl.axis(4);
  IterVar rw_unrolled = sl.reduce_axis(depthwise ? 1 : 2);
  if (depthwise) {  // the kernel window only
    sl.compute_at(so, owo);
    sl.reorder({ln, sl.reduce_axis(0), sl.reduce_axis(1), lob, loh, low, loc});
  } else {
    IterVar rco = sl.reduce_axis(0), rh = sl.reduce_axis(1), rw = sl.reduce_axis(2),
            rci = sl.reduce_axis(3);
    std::vector<IterVar> window = cfg.knob("reduce_order") == 0 ? std::vector<IterVar>{rh, rw, rci}
                                                                : std::vector<IterVar>{rci, rh, rw};
    std::vector<IterVar> order{ln};
    IterVar steps = rco;  // the reduction's steps over input channel blocks (or their chunks)
    if (ic_chunks == 1) {
      sl.compute_at(so, owo);
      if (prefetch_input) so.pragma(owo, pass::kPrefetchBroadcastsPragma, Expr(1));
      order.push_back(rco);
    } else {
      // The accumulators of the task's whole rows live in local memory; a chunk's weights stay
      // in cache over all its column tiles, instead of all the weights streaming through each.
      // With task_rows, the task's rows too: each chunk's weights serve every row of the task.
      sl.compute_at(so, par);
      auto [lowo, lowi] = sl.split(low, cfg.split("tile_ow").back());
      auto [rcoo, rcoi] = sl.split(rco, cfg.split("tile_ic").back());
      order.push_back(rcoo);
      steps = rcoo;
      if (task_rows > 1) {
        auto [loho, lohi] = sl.split(loh, tile_oh);
        order.push_back(loho);
        loh = lohi;
      }
      order.insert(order.end(), {lowo, rcoi});
      if (prefetch_input) sl.pragma(lowo, pass::kPrefetchBroadcastsPragma, Expr(1));
      low = lowi;
    }
    if (cfg.knob("prefetch") != 0) sl.pragma(steps, pass::kPrefetchStreamsPragma, Expr(1));
    order.insert(order.end(), window.begin(), window.end());
    order.insert(order.end(), {lob, loh, low, loc});
    sl.reorder(order);
  }
  sl.unroll(lob);
  sl.unroll(loh);
  sl.unroll(low);
  if (cfg.knob("unroll_kw") != 0) sl.unroll(rw_unrolled);
  sl.vectorize(loc);
  schedule_pad(s, pad, sl, ln, cfg.knob("pad_at"));
}

ConfigSpace group_conv2d_nchwc_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 5 && out->is_compute() && out->reduce_axis.size() == 4)
      << "group_conv2d_nchwc_x86_space: '" << out->name()
      << "' is not a grouped NCHW[x]c convolution";
  // The groups, from the inputs: the data's channel blocks over the kernel's per group.
  int64_t data_blocks = 0, kernel_blocks = 0;
  for (const te::Tensor& t : out->inputs()) {
    if (t.ndim() == 5) data_blocks = const_dim(t, 1, "group_conv2d_nchwc");
    if (t.ndim() == 6) kernel_blocks = const_dim(t, 1, "group_conv2d_nchwc");
  }
  KILN_USER_CHECK(data_blocks > 0 && kernel_blocks > 0 && data_blocks % kernel_blocks == 0)
      << "group_conv2d_nchwc_x86_space: '" << out->name() << "' reads no grouped data and kernel";
  const int64_t groups = data_blocks / kernel_blocks;
  return nchwc_space(out, const_dim(out, 1, "group_conv2d_nchwc") / groups);
}

Config group_conv2d_nchwc_x86_default(const te::Tensor& out, const ConfigSpace& space,
                                      const target::Target& target) {
  // As the depthwise template, the kernel's columns unrolled.
  return nchwc_default(out, space, target, /*grouped=*/true);
}

void schedule_group_conv2d_nchwc_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                                     const te::Tensor& output) {
  schedule_conv2d_nchwc_x86(s, out, cfg, output);
}

te::Tensor depthwise_conv2d_nchwc(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                  Ints4 padding, Ints2 dilation, const std::string& name) {
  KILN_USER_CHECK(data.ndim() == 5 && kernel.ndim() == 6)
      << "depthwise_conv2d_nchwc: data must be 5-D and kernel 6-D, got " << data.ndim() << "-D '"
      << data->name() << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  const char* op = "depthwise_conv2d_nchwc";
  int64_t cb = const_dim(data, 1, op), h = const_dim(data, 2, op), w = const_dim(data, 3, op),
          c = const_dim(data, 4, op);
  int64_t kh = const_dim(kernel, 2, op), kw = const_dim(kernel, 3, op);
  KILN_USER_CHECK(const_dim(kernel, 0, op) == cb && const_dim(kernel, 1, op) == 1 &&
                  const_dim(kernel, 4, op) == 1 && const_dim(kernel, 5, op) == c)
      << "depthwise_conv2d_nchwc: kernel '" << kernel->name() << "' must be [" << cb
      << ", 1, KH, KW, 1, " << c << "]";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0)
      << op << ": stride and dilation must be positive";
  int64_t ekh = (kh - 1) * dilation[0] + 1, ekw = (kw - 1) * dilation[1] + 1;
  KILN_USER_CHECK(h + padding[0] + padding[2] >= ekh && w + padding[1] + padding[3] >= ekw)
      << op << ": the kernel is larger than the padded input";
  int64_t oh = (h + padding[0] + padding[2] - ekh) / stride[0] + 1;
  int64_t ow = (w + padding[1] + padding[3] - ekw) / stride[1] + 1;
  te::Tensor p = pad_hw(data, padding, Expr(), name + ".pad");
  IterVar rh = te::reduce_axis({0, kh}, "rh"), rw = te::reduce_axis({0, kw}, "rw");
  return with_workload(te::compute({data->shape()[0], cb, oh, ow, c},
                                   [&](Var n, Var f, Var y, Var x, Var fi) {
                                     return te::sum(p(n, f, y * stride[0] + rh * dilation[0],
                                                      x * stride[1] + rw * dilation[1], fi) *
                                                        kernel(f, 0, rh, rw, 0, fi),
                                                    {rh, rw});
                                   },
                                   name, {"n", "cb", "oh", "ow", "c"}),
                       {op,
                        {spec_of(data, op), spec_of(kernel, op)},
                        {{"dilations", ints_attr(dilation)},
                         {"pads", ints_attr(padding)},
                         {"strides", ints_attr(stride)}}});
}

ConfigSpace depthwise_conv2d_nchwc_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 5 && out->is_compute() && out->reduce_axis.size() == 2)
      << "depthwise_conv2d_nchwc_x86_space: '" << out->name()
      << "' is not an NCHW[x]c depthwise convolution";
  ConfigSpace space;
  space.define_split("tile_ow", const_dim(out, 3, "depthwise_conv2d_nchwc"), 2,
                     space::SplitPolicy::kFactorsAndPower2, 16);
  define_register_tile(&space, out);
  space.define_knob("unroll_kw", {1, 0});
  // The default takes the first: inlined, the padding's bounds checks are scalar (the vector
  // lanes are channels), cheaper than a pass over memory for a convolution this light.
  space.define_knob("pad_at", {0, 2, 1});
  define_column_chunk(&space);
  return space;
}

Config depthwise_conv2d_nchwc_x86_default(const te::Tensor& out, const ConfigSpace& space,
                                          int vector_bits) {
  std::vector<int> pos(space.knobs().size(), 0);
  default_register_tile(out, space, vector_bits, /*pair_blocks=*/false, &pos);
  return space.from_positions(pos);  // unroll_kw = 1, pad_at: the space lists the better first
}

void schedule_depthwise_conv2d_nchwc_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                                         const te::Tensor& output) {
  schedule_conv2d_nchwc_x86(s, out, cfg, output);
}

namespace {

/// Channel ch of `t` (NCHW when src_block is 0, else blocks of src_block), zero from `channels` on
/// (the padding of a last block).
Expr channel_or_zero(const te::Tensor& t, int src_block, int64_t channels, const Expr& n,
                     const Expr& ch, const Expr& y, const Expr& x, bool padded) {
  Expr c = padded ? ir::min(ch, Expr(channels - 1)) : ch;
  Expr v = src_block == 0
               ? t(n, c, y, x)
               : t(n, ir::floordiv(c, Expr(src_block)), y, x, ir::floormod(c, Expr(src_block)));
  return padded ? ir::select(ch < Expr(channels), v, ir::make_zero(t->dtype())) : v;
}

}  // namespace

te::Tensor nchw_to_nchwc(const te::Tensor& t, int c_block, const std::string& name) {
  KILN_USER_CHECK(t.ndim() == 4) << "nchw_to_nchwc: '" << t->name() << "' must be 4-D";
  KILN_USER_CHECK(c_block > 0) << "nchw_to_nchwc: the block must be positive, got " << c_block;
  const int64_t c = const_dim(t, 1, "nchw_to_nchwc");
  const bool padded = c % c_block != 0;
  const auto& sh = t->shape();
  return te::compute({sh[0], (c + c_block - 1) / c_block, sh[2], sh[3], c_block},
                     [&](Var n, Var cb, Var y, Var x, Var ci) {
                       return channel_or_zero(t, 0, c, n, cb * c_block + ci, y, x, padded);
                     },
                     name, {"n", "cb", "h", "w", "c"});
}

te::Tensor nchwc_to_nchw(const te::Tensor& t, int64_t channels, const std::string& name) {
  KILN_USER_CHECK(t.ndim() == 5) << "nchwc_to_nchw: '" << t->name() << "' must be 5-D";
  int64_t cb = const_dim(t, 1, "nchwc_to_nchw"), ci = const_dim(t, 4, "nchwc_to_nchw");
  if (channels == 0) channels = cb * ci;
  KILN_USER_CHECK(channels > (cb - 1) * ci && channels <= cb * ci)
      << "nchwc_to_nchw: '" << t->name() << "' has " << cb << " blocks of " << ci << ", not "
      << channels << " channels";
  const auto& sh = t->shape();
  return te::compute({sh[0], channels, sh[2], sh[3]},
                     [&](Var n, Var c, Var y, Var x) {
                       return t(n, ir::floordiv(c, Expr(ci)), y, x, ir::floormod(c, Expr(ci)));
                     },
                     name, {"n", "c", "h", "w"});
}

te::Tensor layout_transform(const te::Tensor& t, int src_block, int dst_block, int64_t channels,
                            const std::string& name) {
  if (src_block == 0) return nchw_to_nchwc(t, dst_block, name);
  if (dst_block == 0) return nchwc_to_nchw(t, channels, name);
  KILN_USER_CHECK(t.ndim() == 5 && const_dim(t, 4, "layout_transform") == src_block)
      << "layout_transform: '" << t->name() << "' is not in blocks of " << src_block;
  KILN_USER_CHECK(dst_block > 0) << "layout_transform: the block must be positive, got "
                                 << dst_block;
  const int64_t blocks = const_dim(t, 1, "layout_transform");
  const int64_t c = channels == 0 ? blocks * src_block : channels;
  KILN_USER_CHECK(c > (blocks - 1) * src_block && c <= blocks * src_block)
      << "layout_transform: '" << t->name() << "' has " << blocks << " blocks of " << src_block
      << ", not " << c << " channels";
  const bool padded = c % dst_block != 0;
  const auto& sh = t->shape();
  return te::compute({sh[0], (c + dst_block - 1) / dst_block, sh[2], sh[3], dst_block},
                     [&](Var n, Var cb, Var y, Var x, Var ci) {
                       return channel_or_zero(t, src_block, c, n, cb * dst_block + ci, y, x,
                                              padded);
                     },
                     name, {"n", "cb", "h", "w", "c"});
}

te::Tensor pack_conv2d_kernel(const te::Tensor& kernel, int ic_block, int oc_block,
                              const std::string& name) {
  KILN_USER_CHECK(kernel.ndim() == 4)
      << "pack_conv2d_kernel: '" << kernel->name() << "' must be 4-D";
  int64_t o = const_dim(kernel, 0, "pack_conv2d_kernel"),
          c = const_dim(kernel, 1, "pack_conv2d_kernel");
  KILN_USER_CHECK(ic_block > 0 && oc_block > 0 && o % oc_block == 0 && c % ic_block == 0)
      << "pack_conv2d_kernel: " << o << "x" << c << " channels are not multiples of the blocks "
      << oc_block << "x" << ic_block;
  const auto& sh = kernel->shape();
  return te::compute({o / oc_block, c / ic_block, sh[2], sh[3], ic_block, oc_block},
                     [&](const std::vector<Var>& i) {
                       return kernel(i[0] * oc_block + i[5], i[1] * ic_block + i[4], i[2], i[3]);
                     },
                     name, {"ob", "cb", "kh", "kw", "ic", "oc"});
}

void schedule_layout_transform_x86(te::Schedule& s, const te::Tensor& out) {
  te::Stage st = s[out];
  size_t nd = out.ndim();
  if (nd >= 2) {
    std::vector<IterVar> outer;
    for (size_t i = 0; i + 1 < nd; ++i) outer.push_back(st.axis(i));
    IterVar f = outer.size() == 1 ? outer[0] : st.fuse(outer);
    st.parallel(f);
  }
  auto last = ir::as_const_int(out->shape()[nd - 1]);
  if (last && *last >= 4) {
    // A whole short row is one vector; longer rows split where a factor of 8 or more divides.
    int64_t f = vector_tile(*last, 16);
    if (f < 8 && *last <= 64) f = *last;
    auto [xo, xi] = st.split(st.axis(nd - 1), f);
    st.vectorize(xi);
  }
}

}  // namespace kiln::topi
