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
// The sum is written out term by term (an injective compute), so that an elementwise epilogue
// inlines it and computes on it. The GEMM's register tile is [tile_w columns] x [tile_f weights],
// the weights the vectorized axis; the gather reads the column buffer once.
#include "compiler/topi/conv2d_transpose.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi {

using autotune::Config;
using autotune::ConfigSpace;
using ir::Expr;
using ir::IterVar;
using ir::Var;

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

te::Tensor conv2d_transpose_nchw(const te::Tensor& data, const te::Tensor& kernel, Ints2 stride,
                                 Ints4 padding, Ints2 output_padding, Ints2 dilation, int groups,
                                 const std::string& name) {
  const char* op = "conv2d_transpose_nchw";
  KILN_USER_CHECK(data.ndim() == 4 && kernel.ndim() == 4)
      << op << ": data and kernel must be 4-D, got " << data.ndim() << "-D '" << data->name()
      << "' and " << kernel.ndim() << "-D '" << kernel->name() << "'";
  KILN_USER_CHECK(stride[0] > 0 && stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0 &&
                  groups > 0)
      << op << ": stride, dilation and groups must be positive";
  for (int p : padding) KILN_USER_CHECK(p >= 0) << op << ": pads must not be negative";
  KILN_USER_CHECK(output_padding[0] >= 0 && output_padding[1] >= 0 &&
                  output_padding[0] < std::max(stride[0], dilation[0]) &&
                  output_padding[1] < std::max(stride[1], dilation[1]))
      << op << ": output_padding must be smaller than the stride or the dilation";
  int64_t n = const_dim(data, 0, op), c = const_dim(data, 1, op), h = const_dim(data, 2, op),
          w = const_dim(data, 3, op);
  int64_t kc = const_dim(kernel, 0, op), mg = const_dim(kernel, 1, op),
          kh = const_dim(kernel, 2, op), kw = const_dim(kernel, 3, op);
  KILN_USER_CHECK(kc == c && c % groups == 0)
      << op << ": kernel '" << kernel->name() << "' has " << kc << " input channels, '"
      << data->name() << "' " << c << " (in " << groups << " groups)";
  int64_t cg = c / groups, m = mg * groups, kk = kh * kw;
  int64_t oh = stride[0] * (h - 1) + output_padding[0] + (kh - 1) * dilation[0] + 1 - padding[0] -
               padding[2];
  int64_t ow = stride[1] * (w - 1) + output_padding[1] + (kw - 1) * dilation[1] + 1 - padding[1] -
               padding[3];
  KILN_USER_CHECK(oh > 0 && ow > 0) << op << ": the padding removes the whole output";

  // The GEMM: f = (m, kh, kw) of the kernel, the group's channels reduced.
  IterVar rc = te::reduce_axis({0, cg}, "rc");
  te::Tensor col = te::compute(
      {Expr(n), Expr(h), Expr(w), Expr(m * kk)},
      [&](Var b, Var iy, Var ix, Var f) {
        Expr fm = ir::floordiv(f, Expr(kk)), fk = ir::floormod(f, Expr(kk));
        Expr ch = rc;
        if (groups > 1) {
          ch = ir::floordiv(f, Expr(mg * kk)) * Expr(cg) + rc;
          fm = ir::floormod(fm, Expr(mg));
        }
        return te::sum(data(b, ch, iy, ix) *
                           kernel(ch, fm, ir::floordiv(fk, Expr(kw)), ir::floormod(fk, Expr(kw))),
                       {rc});
      },
      name + ".col", {"n", "ih", "iw", "f"});

  // The gather, term by term.
  return te::compute(
      {Expr(n), Expr(m), Expr(oh), Expr(ow)},
      [&](Var b, Var f, Var y, Var x) {
        std::vector<Tap> th = taps_of(y, h, kh, stride[0], dilation[0], padding[0]);
        std::vector<Tap> tw = taps_of(x, w, kw, stride[1], dilation[1], padding[1]);
        Expr acc;
        for (const Tap& a : th) {
          for (const Tap& e : tw) {
            Expr v = col(b, a.in, e.in, Expr(f) * Expr(kk) + a.k * Expr(kw) + e.k);
            Expr valid = and_(a.valid, e.valid);
            if (valid.defined()) v = ir::select(valid, v, ir::make_zero(data->dtype()));
            acc = acc.defined() ? acc + v : v;
          }
        }
        return acc;
      },
      name, {"n", "oc", "oh", "ow"});
}

ConfigSpace conv2d_transpose_nchw_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute())
      << "conv2d_transpose_nchw_x86_space: '" << out->name() << "' is not a 4-D computation";
  te::Tensor col = col_stage_of(out);
  ConfigSpace space;
  // The GEMM's register tile: weights (the vectorized axis) by input columns.
  space.define_split("tile_f", const_dim(col, 3, "conv2d_transpose"), 2,
                     autotune::SplitPolicy::kFactors, 128);
  space.define_split("tile_h", const_dim(col, 1, "conv2d_transpose"), 2,
                     autotune::SplitPolicy::kFactors, 4);
  space.define_split("tile_w", const_dim(col, 2, "conv2d_transpose"), 2,
                     autotune::SplitPolicy::kFactors, 8);
  // The GEMM's outer loops: 0 weight tiles outside rows (a weight panel stays in cache while
  // the rows pass), 1 rows outside.
  space.define_knob("f_outer", {0, 1});
  // The gather's vector width along the output row (0: scalar).
  space.define_knob("vec_ow", {16, 8, 0});
  return space;
}

Config conv2d_transpose_nchw_x86_default(const ConfigSpace& space) {
  // One vector of weights (16 lanes) against up to 8 x 2 input points: 16 accumulators, each
  // weight load feeding 16 FMAs, the input points broadcast from memory. Measured on the DCGAN
  // generator's layers (AVX-512) against 4 x 64 and 16 x 32 tiles and taller column tiles.
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "tile_f")] = split_position(space, "tile_f", 16);
  pos[knob_index(space, "tile_w")] = split_position(space, "tile_w", 8);
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

  // The GEMM: a register tile [w_t, f_t] accumulated over the channels.
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
  te::Stage so = epilogue_stage(s, out, output);
  IterVar b = so.axis(0), m = so.axis(1), y = so.axis(2), x = so.axis(3);
  so.parallel(so.fuse({b, m, y}));
  int64_t vec = cfg.knob("vec_ow");
  int64_t owe = const_dim(out, 3, "conv2d_transpose");
  if (vec > 0) {
    if (owe <= vec) {
      so.vectorize(x);
    } else {
      auto [xo, xi] = so.split(x, vec);
      so.vectorize(xi);
    }
  }
}

}  // namespace kiln::topi
