// Winograd F(m x m, 3 x 3) for blocked convolutions (conv2d_winograd.h).
#include "compiler/topi/conv2d_winograd.h"

#include <algorithm>
#include <array>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::Var;
using space::Config;
using space::ConfigSpace;
using te::IterVar;

namespace {

constexpr const char* kOp = "conv2d_nchwc_winograd";

/// The transforms of one F(m x m, 3 x 3): B^T (alpha x alpha), G (alpha x 3), A^T (m x alpha),
/// at the points 0, +-1, +-2 and infinity (F(2x2): 0, +-1, infinity).
struct Transforms {
  int m = 0, alpha = 0;
  std::vector<std::vector<double>> bt, g, at;
};

const Transforms& transforms(int m) {
  static const Transforms f2{2,
                             4,
                             {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                             {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                             {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  static const Transforms f4{
      4,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  KILN_USER_CHECK(winograd_tile_supported(m))
      << kOp << ": output tiles of " << m << " x " << m << " are not supported (2 or 4)";
  return m == 2 ? f2 : f4;
}

/// sum_k row[k] * term(k) over the nonzero coefficients, in float32 (a 1 or -1 adds or subtracts).
Expr combination(const std::vector<double>& row, const std::function<Expr(int)>& term) {
  Expr r;
  for (size_t k = 0; k < row.size(); ++k) {
    if (row[k] == 0) continue;
    Expr t = term(static_cast<int>(k));
    if (row[k] == -1) {
      r = r.defined() ? r - t : ir::make_const(ir::kFloat32, 0.0) - t;
      continue;
    }
    if (row[k] != 1) t = t * ir::make_const(ir::kFloat32, row[k]);
    r = r.defined() ? r + t : t;
  }
  return r.defined() ? r : ir::make_const(ir::kFloat32, 0.0);
}

/// Row `index` of the transform `rows` applied to `term`: a select over the rows, which folds to
/// one row once the schedule unrolls the loop of `index` (each is unrolled).
Expr row_of(const std::vector<std::vector<double>>& rows, const Expr& index,
            const std::function<Expr(int)>& term) {
  Expr r = combination(rows.back(), term);
  for (size_t i = rows.size() - 1; i-- > 0;) {
    r = ir::select(index == Expr(static_cast<int>(i)), combination(rows[i], term), r);
  }
  return r;
}

/// `rows` applied along axis `axis` of `src`: element i of the result is row i[axis] of the
/// transform over src's elements that differ from i only there (`src`'s shape with that axis
/// `rows.size()` long).
te::Tensor rows_along(const std::vector<std::vector<double>>& rows, const te::Tensor& src,
                      size_t axis, const std::string& name, std::vector<std::string> axis_names) {
  std::vector<Expr> shape = src->shape();
  shape[axis] = Expr(static_cast<int>(rows.size()));
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        return row_of(rows, i[axis], [&](int k) {
          std::vector<Expr> at(i.begin(), i.end());
          at[axis] = Expr(k);
          return src(at);
        });
      },
      name, std::move(axis_names));
}

/// The stage of `t`'s inputs called `suffix` at the end of its name.
te::Tensor input_named(const te::Tensor& t, const std::string& suffix) {
  for (const te::Tensor& in : t->inputs()) {
    const std::string& n = in->name();
    if (n.size() >= suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      return in;
  }
  KILN_USER_ERROR() << kOp << ": '" << t->name() << "' reads no stage '*" << suffix
                    << "': not a Winograd convolution";
  return {};
}

/// A transform's half-way stage `rows` ([r, q, channel block, tile, channels]: .bt or .at) computed
/// at `consumer`'s loop `at`, one tile of one channel block: its r x q vectors, unrolled.
void compute_rows_at(te::Schedule& s, const te::Tensor& rows, const te::Stage& consumer,
                     const IterVar& at) {
  te::Stage sr = s[rows];
  sr.compute_at(consumer, at);
  IterVar r = sr.axis(0), q = sr.axis(1), block = sr.axis(2), tile = sr.axis(3), lanes = sr.axis(4);
  sr.reorder({block, tile, r, q, lanes});
  sr.unroll(r);
  sr.unroll(q);
  sr.vectorize(lanes);
}

}  // namespace

bool winograd_tile_supported(int m) { return m == 2 || m == 4; }

std::vector<float> winograd_kernel_transform(const float* oihw, int64_t o, int64_t c, int m, int ob,
                                             int64_t o_pad, int64_t c_pad) {
  const Transforms& t = transforms(m);
  KILN_ICHECK(ob > 0 && o_pad % ob == 0 && o <= o_pad && c <= c_pad)
      << "winograd_kernel_transform: " << o << " x " << c << " channels in blocks of " << ob
      << " padded to " << o_pad << " x " << c_pad;
  const int a = t.alpha;
  std::vector<float> u(static_cast<size_t>(a * a * o_pad * c_pad), 0.0f);
  for (int64_t f = 0; f < o; ++f) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* g = oihw + (f * c + ch) * 9;
      double gg[6][3];  // G g: alpha (at most 6) x 3
      for (int e = 0; e < a; ++e) {
        for (int k = 0; k < 3; ++k) {
          gg[e][k] = 0;
          for (int r = 0; r < 3; ++r) gg[e][k] += t.g[e][r] * g[r * 3 + k];
        }
      }
      for (int e = 0; e < a; ++e) {
        for (int nu = 0; nu < a; ++nu) {
          double v = 0;
          for (int k = 0; k < 3; ++k) v += gg[e][k] * t.g[nu][k];
          const int64_t at = (((e * a + nu) * (o_pad / ob) + f / ob) * c_pad + ch) * ob + f % ob;
          u[static_cast<size_t>(at)] = static_cast<float>(v);
        }
      }
    }
  }
  return u;
}

te::Tensor conv2d_nchwc_winograd(const te::Tensor& data, const te::Tensor& kernel, Ints4 padding,
                                 int m, const std::string& name) {
  const Transforms& t = transforms(m);
  KILN_USER_CHECK(data.ndim() == 5 && kernel.ndim() == 5)
      << kOp << ": data must be 5-D and the transformed kernel 5-D, got " << data.ndim() << "-D '"
      << data->name() << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  const int64_t n = const_dim(data, 0, kOp), cb = const_dim(data, 1, kOp),
                h = const_dim(data, 2, kOp), w = const_dim(data, 3, kOp),
                ic = const_dim(data, 4, kOp);
  const int alpha = t.alpha;
  const int64_t ob = const_dim(kernel, 2, kOp), oc = const_dim(kernel, 4, kOp);
  KILN_USER_CHECK(const_dim(kernel, 0, kOp) == alpha && const_dim(kernel, 1, kOp) == alpha &&
                  const_dim(kernel, 3, kOp) == cb * ic)
      << kOp << ": kernel '" << kernel->name() << "' is not a transform for F(" << m << "x" << m
      << ", 3x3) of " << cb * ic << " input channels ([" << alpha << ", " << alpha
      << ", output blocks, " << cb * ic << ", block])";
  for (int p : padding) KILN_USER_CHECK(p >= 0) << kOp << ": negative padding";
  const int64_t oh = h + padding[0] + padding[2] - 2, ow = w + padding[1] + padding[3] - 2;
  KILN_USER_CHECK(oh > 0 && ow > 0) << kOp << ": the 3x3 kernel is larger than the padded input";
  const int64_t th = (oh + m - 1) / m, tw = (ow + m - 1) / m, tiles = n * th * tw;
  // The input padded to whole tiles: (th * m + 2) x (tw * m + 2).
  const te::Tensor pad =
      pad_hw(data,
             {padding[0], padding[1], static_cast<int>(th * m + 2 - h - padding[0]),
              static_cast<int>(tw * m + 2 - w - padding[1])},
             Expr(), name + ".pad");
  // Tile p's image, tile row and tile column.
  auto image = [&](const Expr& p) { return ir::floordiv(p, Expr(th * tw)); };
  auto tile_row = [&](const Expr& p) { return ir::floormod(ir::floordiv(p, Expr(tw)), Expr(th)); };
  auto tile_col = [&](const Expr& p) { return ir::floormod(p, Expr(tw)); };
  const te::Tensor bt =
      te::compute({alpha, alpha, cb, tiles, ic},
                  [&](Var e, Var b, Var k, Var p, Var c) {
                    return row_of(t.bt, e, [&](int a) {
                      return pad(image(p), k, tile_row(p) * m + a, tile_col(p) * m + b, c);
                    });
                  },
                  name + ".bt", {"eps", "b", "icb", "p", "ic"});
  const te::Tensor v = rows_along(t.bt, bt, 1, name + ".v", {"eps", "nu", "icb", "p", "ic"});
  const IterVar rk = te::reduce_axis({0, cb}, "rk"), rc = te::reduce_axis({0, ic}, "rc");
  const te::Tensor prod = te::compute(
      {alpha, alpha, ob, tiles, oc},
      [&](Var e, Var nu, Var f, Var p, Var j) {
        return te::sum(kernel(e, nu, f, rk * Expr(ic) + rc, j) * v(e, nu, rk, p, rc), {rk, rc});
      },
      name + ".m", {"eps", "nu", "ocb", "p", "oc"});
  const te::Tensor at = rows_along(t.at, prod, 0, name + ".at", {"a", "nu", "ocb", "p", "oc"});
  Workload wl{kOp, {spec_of(data, kOp), spec_of(kernel, kOp)}, {}};
  wl.attrs = {{"pads", ints_attr(padding)}, {"tile", int64_t{m}}};
  return with_workload(te::compute({n, ob, oh, ow, oc},
                                   [&](Var b, Var f, Var y, Var x, Var j) {
                                     const Expr p =
                                         (b * Expr(th) + ir::floordiv(y, Expr(m))) * Expr(tw) +
                                         ir::floordiv(x, Expr(m));
                                     return row_of(t.at, ir::floormod(x, Expr(m)), [&](int nu) {
                                       return at(ir::floormod(y, Expr(m)), nu, f, p, j);
                                     });
                                   },
                                   name, {"n", "ocb", "oh", "ow", "oc"}),
                       wl);
}

ConfigSpace conv2d_nchwc_winograd_x86_space(const te::Tensor& out) {
  const te::Tensor at = input_named(out, ".at");
  const te::Tensor prod = input_named(at, ".m");
  ConfigSpace space;
  space.define_split("tile_p", const_dim(prod, 3, kOp), 2, space::SplitPolicy::kFactorsAndPower2,
                     16);
  space.define_split("tile_ob", const_dim(prod, 2, kOp), 2, space::SplitPolicy::kFactors, 4);
  space.define_knob("unroll_c", {0, 1});
  return space;
}

Config conv2d_nchwc_winograd_x86_default(const te::Tensor& out, const ConfigSpace& space,
                                         const target::Target& target) {
  // 8 accumulators, two channel blocks a tile where they split so (each broadcast element of V
  // feeds both). On AVX-512 16 (the direct convolution's) ran 10-40% slower: each tile's U panel,
  // all input channels of its blocks, then takes the whole of a 32 KiB L1 from C = 256 on (Zen 4,
  // VGG's and ResNet's 3x3s, `bench/` probe of the products alone: 4 x 2 at 190-225 GFLOP/s of
  // 236 on 2 cores, 8 x 2 at 125-180).
  const int64_t lanes = std::max(target.vector_bits, 128) / 32;
  const int64_t per_block = (const_dim(out, 4, kOp) + lanes - 1) / lanes;
  const int64_t budget = std::max<int64_t>(1, 8 / per_block);
  std::vector<int> pos(space.knobs().size(), 0);
  const int ob = split_position(space, "tile_ob", budget >= 4 ? 2 : 1);
  pos[knob_index(space, "tile_ob")] = ob;
  const int64_t tile_ob = space.knob("tile_ob").candidates[ob].back();
  pos[knob_index(space, "tile_p")] =
      nearest_split_position(space, "tile_p", {0, std::max<int64_t>(1, budget / tile_ob)});
  pos[knob_index(space, "unroll_c")] = knob_position(space, "unroll_c", 1);
  return space.from_positions(pos);
}

void schedule_conv2d_nchwc_winograd_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                                        const te::Tensor& output) {
  const te::Tensor at = input_named(out, ".at");
  const te::Tensor prod = input_named(at, ".m");
  const te::Tensor v = input_named(prod, ".v");
  const te::Tensor bt = input_named(v, ".bt");
  const te::Tensor pad = bt->inputs()[0];

  // The padding in a pass first (when there is any), rows in parallel.
  if (pad->is_compute()) schedule_layout_transform_x86(s, pad);

  // The input transform: per (channel block, tile), its alpha x alpha vectors of ic channels.
  te::Stage sv = s[v];
  {
    IterVar e = sv.axis(0), nu = sv.axis(1), k = sv.axis(2), p = sv.axis(3), c = sv.axis(4);
    sv.reorder({k, p, e, nu, c});
    const IterVar task = sv.fuse(k, p);
    sv.parallel(task);
    sv.unroll(e);
    sv.unroll(nu);
    sv.vectorize(c);
    compute_rows_at(s, bt, sv, task);
  }

  // The batched product: per (e, nu, tile of output blocks) in parallel, its tiles of P in turn
  // (the block's U panel stays in cache), a register tile of tile_p x tile_ob vectors.
  {
    const te::Tensor local = s.cache_write(prod, "local");
    te::Stage sm = s[prod];
    IterVar e = sm.axis(0), nu = sm.axis(1), f = sm.axis(2), p = sm.axis(3), j = sm.axis(4);
    auto [fo, fi] = sm.split(f, cfg.split("tile_ob").back());
    auto [po, pi] = sm.split(p, cfg.split("tile_p").back());
    sm.reorder({e, nu, fo, po, fi, pi, j});
    const IterVar task = sm.fuse({e, nu, fo});
    sm.parallel(task);
    sm.unroll(fi);
    sm.unroll(pi);
    sm.vectorize(j);
    te::Stage sl = s[local];
    sl.compute_at(sm, po);
    IterVar le = sl.axis(0), lnu = sl.axis(1), lf = sl.axis(2), lp = sl.axis(3), lj = sl.axis(4);
    IterVar rk = sl.reduce_axis(0), rc = sl.reduce_axis(1);
    sl.reorder({le, lnu, rk, rc, lf, lp, lj});
    if (cfg.knob("unroll_c") != 0) sl.unroll(rc);
    sl.unroll(lf);
    sl.unroll(lp);
    sl.vectorize(lj);
  }

  // The output transform with the epilogue: per (n, output block, tile row) in parallel, each
  // tile's A^T M rows (.at) computed, then its m x m outputs stored.
  {
    te::Stage so = epilogue_stage(s, out, output);
    const int64_t m = const_dim(at, 0, kOp);
    IterVar n = so.axis(0), f = so.axis(1), y = so.axis(2), x = so.axis(3), j = so.axis(4);
    auto [yo, yi] = so.split(y, m);
    auto [xo, xi] = so.split(x, m);
    so.reorder({n, f, yo, xo, yi, xi, j});
    const IterVar task = so.fuse({n, f, yo});
    so.parallel(task);
    so.unroll(yi);
    so.unroll(xi);
    so.vectorize(j);
    compute_rows_at(s, at, so, xo);
  }
}

}  // namespace kiln::topi
