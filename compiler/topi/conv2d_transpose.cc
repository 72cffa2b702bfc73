// Transposed convolution as a GEMM plus a gather ("col2im"), the way Caffe and ONNX Runtime
// compute it, with no multiply-add spent on the zeros of a dilated input:
//
//   col[n, ih, iw, f] = sum_c data[n, g*C/G + c, ih, iw] * kernel[g*C/G + c, f]
//
// where f runs over (m, kh, kw) of the IOHW kernel read as [C, M/G * KH * KW] (contiguous, no
// weight rearranging), then each output point adds up the (at most ceil(KH/s) * ceil(KW/s), or
// H * W for tiny inputs) column entries that scatter to it:
//
//   out[n, m, y, x] = sum over taps of col[n, ih, iw, m*KH*KW + kh*KW + kw]
//                     with ih*sh + kh*dh - pt == y and iw*sw + kw*dw - pl == x.
//
// The sum is written out term by term (an injective compute); an elementwise epilogue computes on
// each gathered row, which the gather fills in a row buffer. The GEMM's register tile is [tile_h x
// tile_w input points] x [tile_f weights], the weights the vectorized axis; the gather reads the
// column buffer once. conv2d_transpose_nchw_packed reads the kernel packed in panels (contiguous
// per panel) instead.
#include "compiler/topi/conv2d_transpose.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "base/error.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/workload.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;
using space::Config;
using space::ConfigSpace;

namespace {

Expr clamp(Expr v, int64_t hi) { return ir::min(ir::max(v, 0), Expr(hi)); }

/// One term of the gather along one dimension: the input index, the kernel tap, and when the
/// pair is valid (undefined: always).
struct Tap {
  Expr in, k, valid;
};

Expr and_(const Expr& a, const Expr& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a && b;
}

/// How many taps taps_of (below) makes.
int64_t tap_count(int64_t h, int64_t k, int64_t s, int64_t d) {
  int64_t phase_terms = d == 1 ? (k + s - 1) / s : k + 1;
  if (h <= phase_terms && h <= k) return h;
  return d == 1 ? (k + s - 1) / s : k;
}

/// The taps that reach output coordinate `y` along one dimension: input extent `h`, kernel
/// extent `k`, stride `s`, dilation `d`, leading pad `pad`. The fewest terms among: the kernel
/// taps of y's phase (dilation 1: ceil(k / s) terms), every input point (h terms), every tap
/// (k terms).
std::vector<Tap> taps_of(const Expr& y, int64_t h, int64_t k, int64_t s, int64_t d, int64_t pad) {
  std::vector<Tap> taps;
  Expr t = y + Expr(pad);  // = ih * s + kh * d
  int64_t phase_terms = d == 1 ? (k + s - 1) / s : k + 1;
  if (h <= phase_terms && h <= k) {
    for (int64_t ih = 0; ih < h; ++ih) {
      Expr num = t - Expr(ih * s);  // kh * d
      Expr kh = d == 1 ? num : ir::floordiv(num, Expr(d));
      Expr valid = num >= 0 && kh < Expr(k);
      if (d > 1) valid = valid && ir::floormod(num, Expr(d)) == 0;
      taps.push_back({Expr(ih), clamp(kh, k - 1), valid});
    }
  } else if (d == 1) {
    Expr q = s == 1 ? t : ir::floordiv(t, Expr(s));
    Expr r = s == 1 ? Expr(0) : ir::floormod(t, Expr(s));
    for (int64_t j = 0; j * s < k; ++j) {
      Expr kh = r + Expr(j * s);
      Expr ih = q - Expr(j);
      Expr valid = ih >= 0 && ih < Expr(h);
      if (j * s + s - 1 >= k) valid = valid && kh < Expr(k);
      taps.push_back({clamp(ih, h - 1), clamp(kh, k - 1), valid});
    }
  } else {
    for (int64_t kh = 0; kh < k; ++kh) {
      Expr num = t - Expr(kh * d);  // ih * s
      Expr ih = s == 1 ? num : ir::floordiv(num, Expr(s));
      Expr valid = num >= 0 && ih < Expr(h);
      if (s > 1) valid = valid && ir::floormod(num, Expr(s)) == 0;
      taps.push_back({clamp(ih, h - 1), Expr(kh), valid});
    }
  }
  return taps;
}

/// The column stage a transposed convolution reads.
te::Tensor col_stage_of(const te::Tensor& out) {
  for (const te::Tensor& t : out->inputs()) {
    const std::string& n = t->name();
    if (t->is_compute() && n.size() >= 4 && n.compare(n.size() - 4, 4, ".col") == 0) return t;
  }
  KILN_USER_ERROR() << "conv2d_transpose: '" << out->name()
                    << "' is not a transposed convolution (no column stage)";
}

/// The vector width of a tile of `f` weights: 16 or 8 lanes where they divide, else the tile.
int64_t lanes_of(int64_t f) {
  for (int64_t l : {int64_t{16}, int64_t{8}}) {
    if (f % l == 0) return l;
  }
  return f;
}

}  // namespace

namespace {

/// The most terms of the gather per output point (the expression is written out).
constexpr int64_t kMaxGatherTerms = 4096;

/// The shapes of a transposed convolution, checked.
struct Geometry {
  int64_t n, c, h, w, mg, kh, kw, cg, m, kk, oh, ow;
};

Geometry geometry(const char* op, const te::Tensor& data, int64_t kc, int64_t mg, int64_t kh,
                  int64_t kw, const std::string& kernel_name, Ints2 stride, Ints4 padding,
                  Ints2 output_padding, Ints2 dilation, int groups) {
  KILN_USER_CHECK(data.ndim() == 4)
      << op << ": data must be 4-D, got " << data.ndim() << "-D '" << data->name() << "'";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0 &&
                  groups > 0)
      << op << ": stride, dilation and groups must be positive";
  for (int p : padding) KILN_USER_CHECK(p >= 0) << op << ": pads must not be negative";
  KILN_USER_CHECK(output_padding[0] >= 0 && output_padding[1] >= 0 &&
                  output_padding[0] < std::max(stride[0], dilation[0]) &&
                  output_padding[1] < std::max(stride[1], dilation[1]))
      << op << ": output_padding must be smaller than the stride or the dilation";
  Geometry g;
  g.n = const_dim(data, 0, op);
  g.c = const_dim(data, 1, op);
  g.h = const_dim(data, 2, op);
  g.w = const_dim(data, 3, op);
  g.mg = mg;
  g.kh = kh;
  g.kw = kw;
  KILN_USER_CHECK(kc == g.c && g.c % groups == 0)
      << op << ": kernel '" << kernel_name << "' has " << kc << " input channels, '" << data->name()
      << "' " << g.c << " (in " << groups << " groups)";
  g.cg = g.c / groups;
  g.m = mg * groups;
  g.kk = kh * kw;
  g.oh = stride[0] * (g.h - 1) + output_padding[0] + (kh - 1) * dilation[0] + 1 - padding[0] -
         padding[2];
  g.ow = stride[1] * (g.w - 1) + output_padding[1] + (kw - 1) * dilation[1] + 1 - padding[1] -
         padding[3];
  KILN_USER_CHECK(g.oh > 0 && g.ow > 0) << op << ": the padding removes the whole output";
  // The gather is written out term by term: bound the expression.
  const int64_t terms =
      tap_count(g.h, kh, stride[0], dilation[0]) * tap_count(g.w, kw, stride[1], dilation[1]);
  KILN_USER_CHECK(terms <= kMaxGatherTerms)
      << op << ": a " << kh << "x" << kw << " kernel at stride " << stride[0] << "x" << stride[1]
      << " and dilation " << dilation[0] << "x" << dilation[1] << " adds " << terms
      << " terms per output point, more than the " << kMaxGatherTerms << " Kiln writes out";
  return g;
}

/// The GEMM ("<name>.col") and the gather. `weight(ch, f, rc)`: the kernel's element for input
/// channel ch (= g * cg + rc) and column f of [M * KH * KW].
te::Tensor gemm_and_gather(const te::Tensor& data, const Geometry& g,
                           const std::function<Expr(Expr, Expr, Expr)>& weight, Ints2 stride,
                           Ints4 padding, Ints2 dilation, int groups, const std::string& name) {
  IterVar rc = te::reduce_axis({0, g.cg}, "rc");
  te::Tensor col = te::compute(
      {Expr(g.n), Expr(g.h), Expr(g.w), Expr(g.m * g.kk)},
      [&](Var b, Var iy, Var ix, Var f) {
        Expr ch = groups == 1 ? Expr(rc) : ir::floordiv(f, Expr(g.mg * g.kk)) * Expr(g.cg) + rc;
        return te::sum(data(b, ch, iy, ix) * weight(ch, f, rc), {rc});
      },
      name + ".col", {"n", "ih", "iw", "f"});

  // The gather, term by term.
  return te::compute(
      {Expr(g.n), Expr(g.m), Expr(g.oh), Expr(g.ow)},
      [&](Var b, Var f, Var y, Var x) {
        std::vector<Tap> th = taps_of(y, g.h, g.kh, stride[0], dilation[0], padding[0]);
        std::vector<Tap> tw = taps_of(x, g.w, g.kw, stride[1], dilation[1], padding[1]);
        Expr acc;
        for (const Tap& a : th) {
          for (const Tap& e : tw) {
            Expr v = col(b, a.in, e.in, Expr(f) * Expr(g.kk) + a.k * Expr(g.kw) + e.k);
            Expr valid = and_(a.valid, e.valid);
            if (valid.defined()) v = ir::select(valid, v, ir::make_zero(data->dtype()));
            acc = acc.defined() ? acc + v : v;
          }
        }
        return acc;
      },
      name, {"n", "oc", "oh", "ow"});
}

}  // namespace

te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                 Ints4 padding, Ints2 output_padding, Ints2 dilation, int groups,
                                 const std::string& name) {
  const char* op = "conv2d_transpose_nchw";
  KILN_USER_CHECK(kernel.ndim() == 4)
      << op << ": kernel must be 4-D, got " << kernel.ndim() << "-D '" << kernel->name() << "'";
  Geometry g = geometry(op, data, const_dim(kernel, 0, op), const_dim(kernel, 1, op),
                        const_dim(kernel, 2, op), const_dim(kernel, 3, op), kernel->name(), stride,
                        padding, output_padding, dilation, groups);
  // f = (m, kh, kw): the kernel's own order, so the vectorized f reads it contiguously.
  auto weight = [&](Expr ch, Expr f, Expr) {
    Expr fm = ir::floordiv(f, Expr(g.kk)), fk = ir::floormod(f, Expr(g.kk));
    if (groups > 1) fm = ir::floormod(fm, Expr(g.mg));
    return kernel(ch, fm, ir::floordiv(fk, Expr(g.kw)), ir::floormod(fk, Expr(g.kw)));
  };
  return with_workload(gemm_and_gather(data, g, weight, stride, padding, dilation, groups, name),
                       {op,
                        {spec_of(data, op), spec_of(kernel, op)},
                        {{"dilations", ints_attr(dilation)},
                         {"groups", int64_t{groups}},
                         {"output_padding", ints_attr(output_padding)},
                         {"pads", ints_attr(padding)},
                         {"strides", ints_attr(stride)}}});
}

te::Tensor pack_conv2d_transpose_weight(const te::Tensor& kernel, int groups, int64_t bf,
                                        const std::string& name) {
  const char* op = "pack_conv2d_transpose_weight";
  KILN_USER_CHECK(kernel.ndim() == 4 && groups > 0 && bf > 0)
      << op << ": kernel '" << kernel->name() << "' must be 4-D, groups and bf positive";
  int64_t c = const_dim(kernel, 0, op), mg = const_dim(kernel, 1, op),
          kk = const_dim(kernel, 2, op) * const_dim(kernel, 3, op);
  KILN_USER_CHECK(c % groups == 0 && (mg * kk) % bf == 0)
      << op << ": " << mg << " x " << kk << " columns per group are not a multiple of the panel "
      << bf << " (or " << c << " channels not of the " << groups << " groups)";
  int64_t cg = c / groups, kw = const_dim(kernel, 3, op);
  return te::compute({Expr(groups * mg * kk / bf), Expr(cg), Expr(bf)},
                     [&](Var p, Var rc, Var j) {
                       Expr f = p * Expr(bf) + j;
                       Expr gi = ir::floordiv(f, Expr(mg * kk)),
                            fl = ir::floormod(f, Expr(mg * kk));
                       Expr fk = ir::floormod(fl, Expr(kk));
                       return kernel(gi * Expr(cg) + rc, ir::floordiv(fl, Expr(kk)),
                                     ir::floordiv(fk, Expr(kw)), ir::floormod(fk, Expr(kw)));
                     },
                     name, {"p", "c", "j"});
}

te::Tensor conv2d_transpose_nchw_packed(const te::Tensor& data, const te::Tensor& packed,
                                        Ints4 kernel_shape, Ints2 stride, Ints4 padding,
                                        Ints2 output_padding, Ints2 dilation, int groups,
                                        const std::string& name) {
  const char* op = "conv2d_transpose_nchw_packed";
  KILN_USER_CHECK(packed.ndim() == 3)
      << op << ": the packed kernel '" << packed->name() << "' must be 3-D";
  Geometry g =
      geometry(op, data, kernel_shape[0], kernel_shape[1], kernel_shape[2], kernel_shape[3],
               packed->name(), stride, padding, output_padding, dilation, groups);
  int64_t np = const_dim(packed, 0, op), pc = const_dim(packed, 1, op),
          bf = const_dim(packed, 2, op);
  KILN_USER_CHECK(np * bf == g.m * g.kk && pc == g.cg && (g.mg * g.kk) % bf == 0)
      << op << ": the packed kernel '" << packed->name() << "' is not [" << g.m << " * " << g.kk
      << " / bf, " << g.cg << ", bf] for a panel bf dividing " << g.mg * g.kk;
  auto weight = [&](Expr, Expr f, Expr rc) {
    return packed(ir::floordiv(f, Expr(bf)), rc, ir::floormod(f, Expr(bf)));
  };
  return with_workload(gemm_and_gather(data, g, weight, stride, padding, dilation, groups, name),
                       {op,
                        {spec_of(data, op), spec_of(packed, op)},
                        {{"dilations", ints_attr(dilation)},
                         {"groups", int64_t{groups}},
                         {"kernel_shape", ints_attr(kernel_shape)},
                         {"output_padding", ints_attr(output_padding)},
                         {"pads", ints_attr(padding)},
                         {"strides", ints_attr(stride)}}});
}

ConfigSpace conv2d_transpose_nchw_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute())
      << "conv2d_transpose_nchw_x86_space: '" << out->name() << "' is not a 4-D computation";
  te::Tensor col = col_stage_of(out);
  ConfigSpace space;
  // The GEMM's register tile: weights (the vectorized axis) by input columns.
  space.define_split("tile_f", const_dim(col, 3, "conv2d_transpose"), 2,
                     space::SplitPolicy::kFactors, 64);
  space.define_split("tile_h", const_dim(col, 1, "conv2d_transpose"), 2,
                     space::SplitPolicy::kFactors, 2);
  space.define_split("tile_w", const_dim(col, 2, "conv2d_transpose"), 2,
                     space::SplitPolicy::kFactors, 8);
  // The GEMM's outer loops: 0 weight tiles outside rows (a weight panel stays in cache while
  // the rows pass), 1 rows outside.
  space.define_knob("f_outer", {0, 1});
  // The gather's vector width along the output row (0: scalar).
  space.define_knob("vec_ow", {16, 8, 0});
  return space;
}

Config conv2d_transpose_nchw_x86_default(const ConfigSpace& space) {
  // 16 accumulators: where the columns allow, four weight vectors (64 columns, four panels read
  // side by side) against 2 x 2 input points, each load feeding 4 FMAs; else one vector (16
  // lanes) against up to 8 x 2 points. Measured on the DCGAN generator's layers (AVX-512, one
  // thread, packed weights): 512->256 0.324 -> 0.298 ms, 256->128 0.346 -> 0.31, 128->64
  // 0.408 -> 0.38; the 64->3 layer (48 columns) keeps the narrow tile (0.040 ms; 0.056 with
  // 48 x 2 x 2).
  std::vector<int> pos(space.knobs().size(), 0);
  const auto& f_cands = space.knob("tile_f").candidates;
  int64_t columns = 1;
  for (int64_t part : f_cands.front()) columns *= part;
  const bool wide = columns % 64 == 0;
  pos[knob_index(space, "tile_f")] = split_position(space, "tile_f", wide ? 64 : 16);
  pos[knob_index(space, "tile_w")] = split_position(space, "tile_w", wide ? 2 : 8);
  pos[knob_index(space, "tile_h")] = split_position(space, "tile_h", 2);
  pos[knob_index(space, "f_outer")] = knob_position(space, "f_outer", 0);
  pos[knob_index(space, "vec_ow")] = knob_position(space, "vec_ow", 16);
  return space.from_positions(pos);
}

void schedule_conv2d_transpose_nchw_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg,
                                        const te::Tensor& output) {
  te::Tensor col = col_stage_of(out);
  int64_t f_t = cfg.split("tile_f").back(), w_t = cfg.split("tile_w").back(),
          h_t = cfg.split("tile_h").back();
  int64_t lanes = lanes_of(f_t);

  // The GEMM: a register tile [h_t, w_t, f_t] accumulated over the channels.
  te::Tensor cl = s.cache_write(col, "local");
  te::Stage sc = s[col];
  IterVar n = sc.axis(0), ih = sc.axis(1), iw = sc.axis(2), f = sc.axis(3);
  auto [fo, fi] = sc.split(f, f_t);
  auto [iho, ihi] = sc.split(ih, h_t);
  auto [iwo, iwi] = sc.split(iw, w_t);
  auto [fv, fl] = sc.split(fi, lanes);
  if (cfg.knob("f_outer") == 0) {
    sc.reorder({n, fo, iho, iwo, ihi, iwi, fv, fl});
    sc.parallel(sc.fuse({n, fo, iho}));
  } else {
    sc.reorder({n, iho, fo, iwo, ihi, iwi, fv, fl});
    sc.parallel(sc.fuse({n, iho, fo}));
  }
  sc.unroll(ihi);
  sc.unroll(iwi);
  sc.unroll(fv);
  sc.vectorize(fl);

  te::Stage sl = s[cl];
  sl.compute_at(sc, iwo);
  IterVar ln = sl.axis(0), lh = sl.axis(1), lw = sl.axis(2), lf = sl.axis(3);
  auto [lfv, lfl] = sl.split(lf, lanes);
  sl.reorder({ln, sl.reduce_axis(0), lh, lw, lfv, lfl});
  sl.unroll(lh);
  sl.unroll(lw);
  sl.unroll(lfv);
  sl.vectorize(lfl);

  // The gather (and the epilogue on it): rows in parallel, the row vectorized.
  const bool epilogue = output.defined() && output != out;
  te::Stage so = epilogue ? s[output] : s[out];
  IterVar b = so.axis(0), m = so.axis(1), y = so.axis(2), x = so.axis(3);
  IterVar row = so.fuse({b, m, y});
  so.parallel(row);
  const int64_t vec = cfg.knob("vec_ow");
  const int64_t owe = const_dim(out, 3, "conv2d_transpose");
  auto vectorize_row = [&](te::Stage st, IterVar along) {
    if (vec <= 0) return;
    if (owe <= vec) {
      st.vectorize(along);
    } else {
      auto [xo, xi] = st.split(along, vec);
      st.vectorize(xi);
    }
  };
  vectorize_row(so, x);
  if (epilogue) {
    // The gather fills a row buffer and the epilogue runs over it: inlined, an epilogue such as
    // tanh sat in the gather's loop and stretched its load latencies (64->3, 4x4 stride 2:
    // conv + tanh 48 us fused that way against 41 + 3.5 us as two kernels).
    te::Stage sg = s[out];
    sg.compute_at(so, row);
    vectorize_row(sg, sg.axis(3));
  }
}

}  // namespace kiln::topi
