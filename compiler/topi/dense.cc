// Dense, packed dense and batch_matmul, and their x86 register-tile schedules.
#include "compiler/topi/dense.h"

#include <algorithm>
#include <optional>

#include "base/error.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/transform.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;
using space::Config;
using space::ConfigSpace;

bool batch_matmul_epilogue_fits(const te::Tensor& out, const te::Tensor& output) {
  if (output.ndim() < 2) return false;
  const std::vector<int64_t> o = const_shape(out, "batch_matmul"),
                             e = const_shape(output, "batch_matmul");
  int64_t batch = 1;
  for (size_t a = 0; a + 2 < e.size(); ++a) batch *= e[a];
  const size_t r = e.size() - 2;
  return batch == o[0] && e[r] <= o[1] && e[r + 1] <= o[2];
}

namespace {

/// The knobs of a [.., M, N] product reducing over K.
ConfigSpace matmul_space(int64_t m, int64_t n, int64_t k, int64_t max_x = 64) {
  ConfigSpace space;
  space.define_split("tile_y", m, 2, space::SplitPolicy::kFactors, 8);
  space.define_split("tile_x", n, 2, space::SplitPolicy::kFactors, max_x);
  space.define_split("tile_k", k, 2, space::SplitPolicy::kFactors, 16);
  return space;
}

Config matmul_default(const ConfigSpace& space) {
  std::vector<int> pos(space.knobs().size(), 0);
  size_t ix = knob_index(space, "tile_x");
  pos[ix] = split_position(space, "tile_x", 32);
  int64_t x = space.knobs()[ix].candidates[pos[ix]].back();
  // About 12 vector accumulators of 8 lanes: 4 rows of 24-32 columns, more rows when narrow.
  pos[knob_index(space, "tile_y")] = split_position(space, "tile_y", x >= 24 ? 4 : x >= 16 ? 6 : 8);
  pos[knob_index(space, "tile_k")] = split_position(space, "tile_k", 4);
  return space.from_positions(pos);
}

/// tile_x = the candidate `x`, tile_y the largest factor of M keeping the register tile within
/// about 25 vectors of 16 lanes (AVX-512's 32 registers less the operands), tile_k = 4.
Config tile_config(const ConfigSpace& space, size_t x_pos) {
  std::vector<int> pos(space.knobs().size(), 0);
  size_t ix = knob_index(space, "tile_x");
  pos[ix] = static_cast<int>(x_pos);
  int64_t x = space.knobs()[ix].candidates[x_pos].back();
  int64_t vectors = (x + 15) / 16;
  pos[knob_index(space, "tile_y")] =
      split_position(space, "tile_y", std::max<int64_t>(1, 25 / vectors));
  pos[knob_index(space, "tile_k")] = split_position(space, "tile_k", 4);
  return space.from_positions(pos);
}

/// The register tile: `lead` are the leading (batch) axes of the output, fused into the parallel
/// loop with the row and column blocks. Without leading axes (dense) the column blocks are the
/// outer loop: one block of the weight (tile_x columns) stays in cache while every row block
/// reads it, so a weight larger than the caches is read from memory once. A batched product
/// (lead 1) stores its tile through `output` where batch_matmul_epilogue_fits: a reshape of the
/// batch and a crop of the padding cost no pass over memory (the product of an attention's scores,
/// 54 MB for 6 heads of 1500 tokens, would otherwise be written, read and written again, missing
/// the caches); the last row and column blocks of a crop are guarded.
void schedule_tile(te::Schedule& s, const te::Tensor& out, const Config& cfg, size_t lead,
                   const te::Tensor& output) {
  te::Tensor cl = s.cache_write(out, "local");
  const bool batched_epilogue = lead == 1 && output.defined() && output != out;
  if (batched_epilogue) {
    s[out].compute_inline();
    lead = output.ndim() - 2;
  }
  te::Stage so = batched_epilogue ? s[output] : epilogue_stage(s, out, output);
  IterVar i = so.axis(lead), j = so.axis(lead + 1);
  auto [io, jo, ii, ji] = so.tile(i, j, cfg.split("tile_y").back(), cfg.split("tile_x").back());
  std::vector<IterVar> outer;
  for (size_t a = 0; a < lead; ++a) outer.push_back(so.axis(a));
  if (lead == 0) {
    so.reorder({jo, io, ii, ji});
    outer.insert(outer.end(), {jo, io});
  } else {
    outer.insert(outer.end(), {io, jo});
  }
  IterVar par = so.fuse(outer);
  so.parallel(par);
  so.unroll(ii);
  // Columns wider than a vector register are split into register-wide vectors (16 lanes, else
  // 8) and unrolled: LLVM widens a vector of another length than a power of two (40, 80 lanes)
  // to the next power of two, wasting registers and loads.
  const int64_t tx = cfg.split("tile_x").back();
  const int64_t lanes = tx > 16 && tx % 16 == 0 ? 16 : tx > 8 && tx % 8 == 0 ? 8 : tx;
  if (lanes < tx) {
    auto [jv, jl] = so.split(ji, lanes);
    so.unroll(jv);
    so.vectorize(jl);
  } else {
    so.vectorize(ji);
  }

  te::Stage sl = s[cl];
  sl.compute_at(so, par);
  // The local stage has out's axes, whatever the output's.
  const size_t cl_lead = cl.ndim() - 2;
  auto [ko, ki] = sl.split(sl.reduce_axis(0), cfg.split("tile_k").back());
  std::vector<IterVar> order;
  for (size_t a = 0; a < cl_lead; ++a) order.push_back(sl.axis(a));
  order.insert(order.end(), {ko, ki, sl.axis(cl_lead)});
  if (lanes < tx) {
    auto [jv, jl] = sl.split(sl.axis(cl_lead + 1), lanes);
    order.insert(order.end(), {jv, jl});
    sl.reorder(order);
    sl.unroll(jv);
    sl.vectorize(jl);
  } else {
    order.push_back(sl.axis(cl_lead + 1));
    sl.reorder(order);
    sl.vectorize(sl.axis(cl_lead + 1));
  }
  sl.unroll(ki);
  sl.unroll(sl.axis(cl_lead));
}

}  // namespace

te::Tensor dense(const te::Tensor& x, const te::Tensor& w, bool trans_a, bool trans_b,
                 const std::string& name) {
  KILN_USER_CHECK(x.ndim() == 2 && w.ndim() == 2)
      << "dense: operands must be 2-D, got " << x.ndim() << "-D '" << x->name() << "' and "
      << w.ndim() << "-D '" << w->name() << "'";
  int64_t m = const_dim(x, trans_a ? 1 : 0, "dense"), k = const_dim(x, trans_a ? 0 : 1, "dense");
  int64_t n = const_dim(w, trans_b ? 0 : 1, "dense"), wk = const_dim(w, trans_b ? 1 : 0, "dense");
  KILN_USER_CHECK(k == wk) << "dense: '" << x->name() << "' reduces over " << k << " but '"
                           << w->name() << "' over " << wk;
  IterVar r = te::reduce_axis({0, k}, "k");
  return with_workload(te::compute({m, n},
                                   [&](Var i, Var j) {
                                     Expr a = trans_a ? x(r, i) : x(i, r);
                                     Expr b = trans_b ? w(j, r) : w(r, j);
                                     return te::sum(a * b, {r});
                                   },
                                   name, {"i", "j"}),
                       {"dense",
                        {spec_of(x, "dense"), spec_of(w, "dense")},
                        {{"trans_a", trans_a}, {"trans_b", trans_b}}});
}

te::Tensor pack_dense_weight(const te::Tensor& w, int bn, const std::string& name) {
  KILN_USER_CHECK(w.ndim() == 2 && bn > 0)
      << "pack_dense_weight: '" << w->name() << "' must be 2-D and the block positive";
  int64_t n = const_dim(w, 0, "pack_dense_weight"), k = const_dim(w, 1, "pack_dense_weight");
  return te::compute({(n + bn - 1) / bn, k, bn},
                     [&](Var jo, Var kk, Var ji) {
                       Expr col = jo * bn + ji;
                       return ir::select(col < Expr(n), w(ir::min(col, Expr(n - 1)), kk),
                                         ir::make_zero(w->dtype()));
                     },
                     name, {"jo", "k", "ji"});
}

te::Tensor dense_packed(const te::Tensor& x, const te::Tensor& packed, int64_t n,
                        const std::string& name) {
  KILN_USER_CHECK(x.ndim() == 2 && packed.ndim() == 3)
      << "dense_packed: '" << x->name() << "' must be 2-D and '" << packed->name() << "' 3-D";
  int64_t k = const_dim(x, 1, "dense_packed"), bn = const_dim(packed, 2, "dense_packed");
  KILN_USER_CHECK(const_dim(packed, 1, "dense_packed") == k &&
                  const_dim(packed, 0, "dense_packed") * bn >= n)
      << "dense_packed: '" << packed->name() << "' does not pack a " << n << "x" << k << " weight";
  IterVar r = te::reduce_axis({0, k}, "k");
  return with_workload(
      te::compute({x->shape()[0], n},
                  [&](Var i, Var j) {
                    return te::sum(
                        x(i, r) * packed(ir::floordiv(j, Expr(bn)), r, ir::floormod(j, Expr(bn))),
                        {r});
                  },
                  name, {"i", "j"}),
      {"dense_packed", {spec_of(x, "dense_packed"), spec_of(packed, "dense_packed")}, {{"n", n}}});
}

ConfigSpace dense_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 2 && out->is_compute() && out->reduce_axis.size() == 1)
      << "dense_x86_space: '" << out->name() << "' is not a dense product";
  auto k = ir::as_const_int(out->reduce_axis[0]->dom.extent);
  KILN_USER_CHECK(k.has_value()) << "dense_x86_space: the reduction of '" << out->name()
                                 << "' must have a constant extent";
  // dense_packed: the panel width, a knob of one choice, so that the default tiles whole panels
  // (tile_x may then be as wide as a panel).
  std::optional<int64_t> panel;
  for (const te::Tensor& in : out->inputs()) {
    auto bn = in.ndim() == 3 ? ir::as_const_int(in->shape()[2]) : std::nullopt;
    if (bn) panel = bn;
  }
  ConfigSpace space = matmul_space(const_dim(out, 0, "dense"), const_dim(out, 1, "dense"), *k,
                                   std::max<int64_t>(64, panel.value_or(0)));
  if (panel) space.define_knob("panel", {*panel});
  return space;
}

Config dense_x86_default(const ConfigSpace& space) {
  Config cfg = matmul_default(space);
  bool packed = false;
  for (const auto& knob : space.knobs()) packed = packed || knob.name == "panel";
  if (!packed) return cfg;
  // Columns in whole panels: one panel when it divides N (the pass picks such panels: each
  // register tile then streams one contiguous [K, bn] block), else the widest multiple of the
  // panel up to 32 that divides N.
  int64_t bn = cfg.knob("panel");
  size_t ix = knob_index(space, "tile_x");
  const auto& cands = space.knobs()[ix].candidates;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].back() == bn) {
      Config tiled = tile_config(space, i);
      std::vector<int> pos = tiled.positions();
      pos[knob_index(space, "panel")] = 0;
      return space.from_positions(pos);
    }
  }
  std::vector<int> pos = cfg.positions();
  for (size_t i = 0; i < cands.size(); ++i) {
    int64_t x = cands[i].back();
    int64_t cur = cands[pos[ix]].back();
    bool good = x % bn == 0 && x <= std::max<int64_t>(bn, 32);
    if (good && (cur % bn != 0 || x > cur)) pos[ix] = static_cast<int>(i);
  }
  return space.from_positions(pos);
}

void schedule_dense_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                        const te::Tensor& output) {
  // dense_packed_bf16's input converted to bf16 pairs: once, before the product.
  for (const te::Tensor& in : out->inputs()) {
    const std::string& name = in->name();
    if (in->is_compute() && name.size() > 6 && name.compare(name.size() - 6, 6, ".pairs") == 0)
      schedule_layout_transform_x86(s, in);
  }
  schedule_tile(s, out, cfg, 0, output);
}

te::Tensor batch_matmul(const te::Tensor& a, const te::Tensor& b, bool trans_a, bool trans_b,
                        const std::string& name) {
  KILN_USER_CHECK(a.ndim() == 3 && b.ndim() == 3)
      << "batch_matmul: operands must be 3-D, got " << a.ndim() << "-D '" << a->name() << "' and "
      << b.ndim() << "-D '" << b->name() << "'";
  int64_t ba = const_dim(a, 0, "batch_matmul"), bb = const_dim(b, 0, "batch_matmul");
  KILN_USER_CHECK(ba == bb || ba == 1 || bb == 1)
      << "batch_matmul: batches " << ba << " and " << bb << " do not broadcast";
  int64_t m = const_dim(a, trans_a ? 2 : 1, "batch_matmul"),
          k = const_dim(a, trans_a ? 1 : 2, "batch_matmul");
  int64_t n = const_dim(b, trans_b ? 1 : 2, "batch_matmul"),
          bk = const_dim(b, trans_b ? 2 : 1, "batch_matmul");
  KILN_USER_CHECK(k == bk) << "batch_matmul: '" << a->name() << "' reduces over " << k << " but '"
                           << b->name() << "' over " << bk;
  IterVar r = te::reduce_axis({0, k}, "k");
  return with_workload(te::compute({std::max(ba, bb), m, n},
                                   [&](Var bi, Var i, Var j) {
                                     Expr ab = ba == 1 ? Expr(0) : Expr(bi),
                                          bbi = bb == 1 ? Expr(0) : Expr(bi);
                                     Expr x = trans_a ? a(ab, r, i) : a(ab, i, r);
                                     Expr y = trans_b ? b(bbi, j, r) : b(bbi, r, j);
                                     return te::sum(x * y, {r});
                                   },
                                   name, {"b", "i", "j"}),
                       {"batch_matmul",
                        {spec_of(a, "batch_matmul"), spec_of(b, "batch_matmul")},
                        {{"trans_a", trans_a}, {"trans_b", trans_b}}});
}

ConfigSpace batch_matmul_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 3 && out->is_compute() && out->reduce_axis.size() == 1)
      << "batch_matmul_x86_space: '" << out->name() << "' is not a batched product";
  auto k = ir::as_const_int(out->reduce_axis[0]->dom.extent);
  KILN_USER_CHECK(k.has_value()) << "batch_matmul_x86_space: the reduction of '" << out->name()
                                 << "' must have a constant extent";
  return matmul_space(const_dim(out, 1, "batch_matmul"), const_dim(out, 2, "batch_matmul"), *k);
}

Config batch_matmul_x86_default(const te::Tensor&, const ConfigSpace& space, int vector_bits) {
  // 32 columns; rows for about 16 accumulators of the target's vectors (AVX-512's 32
  // registers: 8 rows of 2 vectors; AVX2's 16: 4 rows of 4 vectors, as matmul_default).
  if (vector_bits < 512) return matmul_default(space);
  std::vector<int> pos = matmul_default(space).positions();
  const size_t ix = knob_index(space, "tile_x");
  const int64_t lanes = vector_bits / 32;
  const int64_t vectors = (space.knobs()[ix].candidates[pos[ix]].back() + lanes - 1) / lanes;
  pos[knob_index(space, "tile_y")] =
      split_position(space, "tile_y", std::max<int64_t>(1, 16 / vectors));
  return space.from_positions(pos);
}

void schedule_batch_matmul_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                               const te::Tensor& output) {
  KILN_ICHECK(!output.defined() || output == out || batch_matmul_epilogue_fits(out, output))
      << "epilogue '" << output->name() << "' of '" << out->name()
      << "' is not a reshape of its batch or a crop of its rows and columns";
  schedule_tile(s, out, cfg, 1, output);
}

int64_t batch_matmul_padded_rows(int64_t m) { return m < 4 ? m : (m + 3) / 4 * 4; }

int64_t batch_matmul_padded_cols(int64_t n) {
  if (n <= 8 || n % 8 == 0) return n;
  const int64_t to = n < 32 ? 16 : 32;
  return (n + to - 1) / to * to;
}

}  // namespace kiln::topi
