// The convolutions: Conv, ConvTranspose and ConvInteger (1-D as 2-D with a height of 1; a Conv
// in NCHW[x]c after alter_layout), lowered to topi's conv2d computes and their x86 templates; a
// 3-D Conv is rewritten at import into a 2-D one between reshapes (rewrite_conv3d). ConvInteger
// convolves its 8-bit operands widened to int32 less their zero points (topi::integer_operand):
// padding reads the input's zero point, a real 0; where pack_weights packed its int8 weight, the
// VNNI kernel topi::conv2d_nchwc_int8 computes it (a depthwise one
// topi::depthwise_conv2d_nchwc_int8).
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_bf16.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/conv2d_winograd.h"
#include "compiler/topi/conv_taps.h"
#include "compiler/topi/quantize.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using ir::Expr;
using te::Tensor;

Tensor add_channel_bias(const Tensor& y, const Tensor& bias) {
  return te::compute(
      y->shape(),
      [&](const std::vector<ir::Var>& i) {
        return y(std::vector<Expr>(i.begin(), i.end())) + bias(i[1]);
      },
      "bias_add");
}

/// A plain blocked convolution that would mostly multiply padding (a dilated 3x3 on a map not
/// much larger than its rate, as an atrous pyramid's rate 12 on 16x16, which multiplies padding
/// three times in four), computed region by region of its output (topi/conv_taps.h): each region
/// a convolution of its live taps only over the input it reads, without padding; the output stage
/// gathers the regions (an output that reads only padding is 0) and adds the bias. Nothing when it
/// does not pay: padding under a tenth of the multiplications (a rate-4 3x3 on 32x32 has 16%, and
/// runs 10% faster by regions), a region one output thick, or more than 25 regions.
std::optional<LowerResult> lower_conv_by_regions(const LowerCtx& c, const Tensor& x,
                                                 const Tensor& w, topi::Ints2 stride,
                                                 topi::Ints4 pads, topi::Ints2 dil,
                                                 const Template& base) {
  const auto xs = c.in_shape(0), ws = c.in_shape(1);
  const std::vector<int64_t>& ys = c.out_value().shape;
  const auto rows = topi::tap_regions(xs[2], ys[2], ws[2], stride[0], dil[0], pads[0]);
  const auto cols = topi::tap_regions(xs[3], ys[3], ws[3], stride[1], dil[1], pads[1]);
  auto live = [](const std::vector<topi::TapRegion>& rs) {
    int64_t n = 0;
    for (const auto& r : rs) n += (r.end - r.begin) * r.taps();
    return n;
  };
  // Regions one output thick (a plain 3x3's border, padding 1) would make register tiles too
  // small to pay for the taps they save.
  auto thick = [](const std::vector<topi::TapRegion>& rs) {
    for (const auto& r : rs) {
      if (r.end - r.begin < 2) return false;
    }
    return true;
  };
  const int64_t all = ys[2] * ws[2] * ys[3] * ws[3];
  if (live(rows) * live(cols) * 10 > all * 9 || rows.size() * cols.size() > 25 || !thick(rows) ||
      !thick(cols)) {
    return std::nullopt;
  }
  // One convolution per region with live taps, on views of the input and the packed kernel.
  std::vector<std::vector<Tensor>> parts(rows.size(), std::vector<Tensor>(cols.size()));
  std::vector<Tensor> views;
  for (size_t a = 0; a < rows.size(); ++a) {
    for (size_t b = 0; b < cols.size(); ++b) {
      const topi::TapRegion &r = rows[a], &q = cols[b];
      if (r.taps() == 0 || q.taps() == 0) continue;
      const int64_t y0 = r.begin * stride[0] + r.tap_lo * dil[0] - pads[0],
                    x0 = q.begin * stride[1] + q.tap_lo * dil[1] - pads[1];
      const int64_t h = (r.end - r.begin - 1) * stride[0] + (r.taps() - 1) * dil[0] + 1,
                    wd = (q.end - q.begin - 1) * stride[1] + (q.taps() - 1) * dil[1] + 1;
      const std::string tag = "_r" + std::to_string(a) + std::to_string(b);
      Tensor xv = te::compute(
          {xs[0], xs[1], h, wd, xs[4]},
          [&](const std::vector<ir::Var>& i) { return x(i[0], i[1], i[2] + y0, i[3] + x0, i[4]); },
          "conv_in" + tag);
      Tensor wv = te::compute(
          {ws[0], ws[1], r.taps(), q.taps(), ws[4], ws[5]},
          [&](const std::vector<ir::Var>& i) {
            return w(i[0], i[1], i[2] + r.tap_lo, i[3] + q.tap_lo, i[4], i[5]);
          },
          "conv_kernel" + tag);
      parts[a][b] = topi::conv2d_nchwc(xv, wv, stride, {0, 0, 0, 0}, dil, "conv2d_nchwc" + tag);
      views.insert(views.end(), {xv, wv});
    }
  }
  const int ob = static_cast<int>(c.node.i("out_block"));
  std::vector<Expr> shape;
  for (int64_t d : ys) shape.push_back(Expr(d));
  Tensor gathered = te::compute(
      shape,
      [&](const std::vector<ir::Var>& i) {
        auto in = [](const ir::Var& v, const topi::TapRegion& r) {
          return ir::min(ir::max(v - Expr(r.begin), 0), Expr(r.end - r.begin - 1));
        };
        // The last region of each axis is the select's fallback.
        Expr value;
        for (size_t a = rows.size(); a-- > 0;) {
          Expr row;
          for (size_t b = cols.size(); b-- > 0;) {
            const Tensor& p = parts[a][b];
            Expr v = p.defined() ? p(i[0], i[1], in(i[2], rows[a]), in(i[3], cols[b]), i[4])
                                 : ir::make_zero(x->dtype());
            row = row.defined() ? ir::select(i[3] < Expr(cols[b].end), v, row) : v;
          }
          value = value.defined() ? ir::select(i[2] < Expr(rows[a].end), row, value) : row;
        }
        Expr y = value;
        if (c.has(2)) y = y + c.in[2](i[1] * ob + i[4]);
        return y;
      },
      "conv2d_nchwc_regions");
  return LowerResult{{gathered}, [=](te::Schedule& s, const Tensor& output) {
                       for (const Tensor& v : views) s[v].compute_inline();
                       for (const auto& row : parts) {
                         for (const Tensor& p : row) {
                           if (p.defined()) base(s, p, p);
                         }
                       }
                       if (gathered != output) s[gathered].compute_inline();
                       injective(s, output);
                     }};
}

/// Conv and ConvTranspose, 2-D, or 1-D as 2-D with a height of 1.
/// A Conv that alter_layout blocked: data [N, C/ib, H, W, ib], kernel packed (6-D), out
/// [N, O/ob, OH, OW, ob], bias [O].
LowerResult lower_conv_nchwc(const LowerCtx& c) {
  const Node& n = c.node;
  const Tensor &x = c.input(0), &w = c.input(1);
  const auto stride = ints2(n.ints("strides")), dil = ints2(n.ints("dilations"));
  const auto pads = ints4(n.ints("pads"));
  // alter_layout's groups: 1, the input channels (depthwise), or grouped, each group whole
  // channel blocks (groups it merged counted as one).
  const int groups = static_cast<int>(n.i("group"));
  const int64_t channels = c.in_shape(0).at(1) * c.in_shape(0).at(4);
  const bool depthwise = groups != 1 && groups == channels;
  const int ob = static_cast<int>(n.i("out_block"));
  Tensor y;
  const char* tmpl = "conv2d_nchwc_x86";
  if (depthwise) {
    y = topi::depthwise_conv2d_nchwc(x, w, stride, pads, dil, "conv2d_nchwc");
    tmpl = "depthwise_conv2d_nchwc_x86";
  } else if (groups != 1) {
    y = topi::group_conv2d_nchwc(x, w, stride, pads, dil, groups, "conv2d_nchwc");
    tmpl = "group_conv2d_nchwc_x86";
  } else if (n.has_attr("winograd")) {
    // alter_layout transformed the kernel for F(m x m, 3 x 3) (topi/conv2d_winograd.h).
    y = topi::conv2d_nchwc_winograd(x, w, pads, static_cast<int>(n.i("winograd")),
                                    "conv2d_nchwc_winograd");
    tmpl = "conv2d_nchwc_winograd_x86";
  } else if (n.has_attr("bf16")) {
    // alter_layout packed the kernel in bf16 pairs (BuildOptions::precision); the same template.
    y = topi::conv2d_nchwc_bf16(x, w, stride, pads, dil, "conv2d_nchwc_bf16");
  } else {
    if (auto regions = lower_conv_by_regions(c, x, w, stride, pads, dil, c.tuning.of(tmpl)))
      return *regions;
    y = topi::conv2d_nchwc(x, w, stride, pads, dil, "conv2d_nchwc");
  }
  Tensor out = y;
  if (c.has(2)) {
    const Tensor& bias = c.in[2];
    out = te::compute(
        y->shape(),
        [&](const std::vector<ir::Var>& i) {
          return y(std::vector<Expr>(i.begin(), i.end())) + bias(i[1] * ob + i[4]);
        },
        "bias_add");
  }
  return with_epilogue(y, c.tuning.of(tmpl), out);
}

/// ConvInteger with its weight packed for the VNNI kernel (pack_weights: packed_int8 = cb),
/// topi::conv2d_nchwc_int8 padding with the data zero point, less the zero point's share (input
/// 3). Blocked by alter_layout (data_block): x is uint8 NCHW[cb]c and the output int32 NCHW16c,
/// the share and the group's epilogue (the requantization to uint8) on the kernel's register
/// tile. Else x is blocked by cb (its own stage) and the NCHW result, with the epilogue, is one
/// injective stage reading the kernel's NCHW16c sums.
LowerResult lower_conv_integer_packed(const LowerCtx& c) {
  const Node& n = c.node;
  const int cb = static_cast<int>(n.i("packed_int8"));
  const bool blocked = n.has_attr("data_block");
  const Tensor xb = blocked ? c.input(0) : topi::nchw_to_nchwc(c.input(0), cb, "data_blocked");
  // Depthwise (pack_weights packed a group per channel) or one group.
  const bool depthwise = n.i("group") != 1;
  const auto stride = ints2(n.ints("strides")), dil = ints2(n.ints("dilations"));
  const auto pads = ints4(n.ints("pads"));
  const int zx = static_cast<int>(n.i("data_zero_point"));
  const Tensor y = depthwise
                       ? topi::depthwise_conv2d_nchwc_int8(xb, c.input(1), stride, pads, dil, zx)
                       : topi::conv2d_nchwc_int8(xb, c.input(1), stride, pads, dil, zx);
  const char* tmpl = depthwise ? "depthwise_conv2d_nchwc_x86" : "conv2d_nchwc_int8_x86";
  const Tensor share = c.has(3) ? c.in[3] : Tensor();
  if (blocked) {
    Tensor out = y;
    if (share.defined()) {
      out = te::compute(
          y->shape(),
          [&](const std::vector<ir::Var>& i) {
            return y(std::vector<Expr>(i.begin(), i.end())) -
                   share(i[1] * topi::kInt8OutBlock + i[4]);
          },
          "conv_integer");
    }
    return with_epilogue(y, c.tuning.of(tmpl), out);
  }
  const Tensor out = te::compute(
      {y->shape()[0], Expr(c.out_value().shape.at(1)), y->shape()[2], y->shape()[3]},
      [&](const std::vector<ir::Var>& i) {
        const Expr o = i[1];
        const Expr v = y(i[0], ir::floordiv(o, 16), i[2], i[3], ir::floormod(o, 16));
        return share.defined() ? v - share(o) : v;
      },
      "conv_integer");
  return {{out}, [=, tuning = c.tuning](te::Schedule& s, const Tensor& output) {
            topi::schedule_layout_transform_x86(s, xb);
            tuning.schedule(tmpl, s, y, y);
            if (out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

LowerResult lower_conv(const LowerCtx& c, bool transpose) {
  const Node& n = c.node;
  if (!transpose && n.has_attr("packed_int8")) return lower_conv_integer_packed(c);
  if (!transpose && n.has_attr("data_block")) return lower_conv_nchwc(c);
  const size_t k = n.ints("kernel_shape").size();
  if (k != 1 && k != 2) c.fail("only 1-D and 2-D convolutions are supported");
  const bool one_d = k == 1;
  // 1-D: [N, C, L] -> [N, C, 1, L], the same for the kernel; the attributes get a unit height.
  auto lift = [&](const std::vector<int64_t>& v, int64_t fill) {
    return one_d ? std::vector<int64_t>{fill, v.at(0)} : v;
  };
  auto lift_pads = [&](const std::vector<int64_t>& p) {
    return one_d ? std::vector<int64_t>{0, p.at(0), 0, p.at(1)} : p;
  };
  auto lift_tensor = [&](const Tensor& t, std::vector<int64_t> shape, const char* name) {
    if (!one_d) return t;
    shape.insert(shape.begin() + 2, 1);
    return topi::reshape(t, shape, name);
  };
  // ConvInteger: the operands in int32 less their zero points (its inputs 2 and 3), inlined.
  const bool integer = n.op == "ConvInteger";
  const Tensor x0 =
      integer ? topi::integer_operand(c.input(0), c.has(2) ? c.in[2] : Tensor(), 1, "data_int32")
              : c.input(0);
  const Tensor w0 =
      integer ? topi::integer_operand(c.input(1), c.has(3) ? c.in[3] : Tensor(), 0, "kernel_int32")
              : c.input(1);
  const Tensor x = lift_tensor(x0, c.in_shape(0), "data_2d");
  // A ConvTranspose weight packed by pack_weights (packed_bf) is 3-D whatever the rank.
  const bool packed = transpose && n.has_attr("packed_bf");
  const Tensor w = packed ? c.input(1) : lift_tensor(w0, c.in_shape(1), "kernel_2d");
  const int groups = static_cast<int>(n.i("group"));
  const auto stride = ints2(lift(n.ints("strides"), 1)), dil = ints2(lift(n.ints("dilations"), 1));
  const auto pads = ints4(lift_pads(n.ints("pads")));
  Tensor y;
  Template base;
  if (packed) {
    const auto kernel = lift(n.ints("kernel_shape"), 1);
    const int64_t channels = c.in_shape(0).at(1), taps = kernel[0] * kernel[1];
    const int64_t per_group = c.in_shape(1).at(0) * c.in_shape(1).at(2) / groups / taps;
    y = topi::conv2d_transpose_nchw_packed(
        x, w,
        {static_cast<int>(channels), static_cast<int>(per_group), static_cast<int>(kernel[0]),
         static_cast<int>(kernel[1])},
        stride, pads, ints2(lift(n.ints("output_padding"), 0)), dil, groups, "conv2d_transpose");
    base = c.tuning.of("conv2d_transpose_nchw_x86");
  } else if (transpose) {
    y = topi::conv2d_transpose_nchw(x, w, stride, pads, ints2(lift(n.ints("output_padding"), 0)),
                                    dil, groups, "conv2d_transpose");
    base = c.tuning.of("conv2d_transpose_nchw_x86");
  } else {
    y = topi::conv2d_nchw(x, w, stride, pads, dil, groups, "conv2d");
    const auto xs = c.in_shape(0), ws = c.in_shape(1);
    const bool depthwise = groups > 1 && groups == xs[1] && ws[0] == xs[1] && ws[1] == 1;
    base = c.tuning.of(depthwise ? "depthwise_conv2d_nchw_x86" : "conv2d_nchw_x86");
    if (integer) {
      base = [=](te::Schedule& s, const Tensor& t, const Tensor& output) {
        s[x0].compute_inline();
        s[w0].compute_inline();
        base(s, t, output);
      };
    }
  }
  Tensor biased = c.has(2) && !integer ? add_channel_bias(y, c.in[2]) : y;
  if (!one_d) return with_epilogue(y, base, biased);
  // 1-D: the bias in the tile, the reshape back to 3-D (and any epilogue) a stage of its own.
  Tensor out = topi::reshape(biased, c.out_value().shape, "conv1d");
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            s[x].compute_inline();
            if (!packed) s[w].compute_inline();
            base(s, y, biased);
            if (out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

LowerResult lower_conv2d(const LowerCtx& c) { return lower_conv(c, false); }
LowerResult lower_conv2d_transpose(const LowerCtx& c) { return lower_conv(c, true); }

std::string conv_gpu(const Node& n, size_t) {
  if (n.op == "ConvTranspose") return "conv2d_transpose_nchw_gpu";
  return n.i("group") == 1 ? "conv2d_nchw_gpu" : "depthwise_conv2d_nchw_gpu";
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_conv(const NodeCheck& nc, bool transpose, bool has_bias = true) {
  const std::vector<int64_t>& x = nc.shape(0);
  const std::vector<int64_t>& w = nc.shape(1);
  if (x.size() < 3) {
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) + "; " + nc.op() +
            " takes N x C x D1 x ... (rank 3 or more)");
  }
  if (w.size() != x.size()) {
    nc.fail(nc.input_shaped(1) + " has rank " + str(nc.rank(1)) + ", but " + nc.input_shaped(0) +
            " has rank " + str(nc.rank(0)) + "; they must be equal");
  }
  const int64_t group = nc.attr_i("group", 1);
  if (group < 1) nc.fail("attribute 'group' must be positive, got " + str(group));
  int64_t out_channels = 0;
  if (!transpose) {
    if (w[1] * group != x[1]) {
      nc.fail(nc.input(1) + " has " + str(w[1]) + " input channels per group, but " + nc.input(0) +
              " has " + str(x[1]) + " channels with group " + str(group));
    }
    if (w[0] % group != 0) {
      nc.fail(nc.input_shaped(1) + " has " + str(w[0]) + " output channels, which group " +
              str(group) + " does not divide");
    }
    out_channels = w[0];
  } else {
    if (w[0] != x[1]) {
      nc.fail(nc.input(1) + " has " + str(w[0]) + " input channels (its dimension 0), but " +
              nc.input(0) + " has " + str(x[1]) + " channels");
    }
    if (x[1] % group != 0) {
      nc.fail(nc.input_shaped(0) + " has " + str(x[1]) + " channels, which group " + str(group) +
              " does not divide");
    }
    out_channels = w[1] * group;
  }
  if (has_bias && nc.has(2) && nc.shape(2) != std::vector<int64_t>{out_channels}) {
    nc.fail(nc.input_shaped(2) + " must be [" + str(out_channels) + "]: " + nc.input_shaped(1) +
            " with group " + str(group) + " makes " + str(out_channels) + " output channels");
  }
  const std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (nc.attr("kernel_shape") != nullptr && nc.attr_ints("kernel_shape", {}) != kernel) {
    nc.fail("attribute 'kernel_shape' is " + str(nc.attr_ints("kernel_shape", {})) + ", but " +
            nc.input_shaped(1) + " has the kernel " + str(kernel));
  }
  for (int64_t d : kernel) {
    if (d < 1) nc.fail(nc.input_shaped(1) + " has an empty kernel");
  }
  std::vector<int64_t> strides, extent;
  const std::vector<int64_t> pads = nc.window(kernel, /*has_dilations=*/true, &strides, &extent);
  const size_t k = kernel.size();
  if (!transpose) {
    for (size_t i = 0; i < k; ++i) nc.check_fits(i, pads, extent[i], false, strides[i]);
    return;
  }
  const std::string spatial = nc.input_shaped(0) + " with " + str(static_cast<int64_t>(k)) +
                              " spatial dimension" + (k == 1 ? "" : "s");
  const std::vector<int64_t> out_pad = nc.per_axis("output_padding", k, 0, 0, spatial);
  const std::vector<int64_t> dil = nc.attr_ints("dilations", std::vector<int64_t>(k, 1));
  for (size_t i = 0; i < k; ++i) {
    if (out_pad[i] >= std::max(strides[i], dil[i])) {
      nc.fail("attribute 'output_padding' is " + str(out_pad) + ": " + str(out_pad[i]) +
              " in spatial dimension " + str(static_cast<int64_t>(i)) +
              " must be less than the stride " + str(strides[i]) + " or the dilation " +
              str(dil[i]));
    }
  }
  if (nc.attr("output_shape") != nullptr) {
    nc.per_axis("output_shape", k, 1, 1, spatial);
    return;
  }
  if (nc.auto_pad() != "NOTSET") return;  // SAME: stride * input size; VALID: larger than input
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = x[i + 2];
    const int64_t out = strides[i] * (in - 1) + out_pad[i] + extent[i] - pads[i] - pads[i + k];
    if (out < 1) {
      nc.fail("attribute 'pads' " + str(pads) + " leave no output in spatial dimension " +
              str(static_cast<int64_t>(i)) + ": " + nc.input_shaped(0) + " with stride " +
              str(strides[i]) + " and the kernel's extent " + str(extent[i]) + " give " +
              str(out + pads[i] + pads[i + k]) + " elements before padding is removed");
    }
  }
}

void check_conv2d(const NodeCheck& nc) { check_conv(nc, false); }
void check_conv2d_transpose(const NodeCheck& nc) { check_conv(nc, true); }

/// ConvInteger: a convolution's shapes; x's zero point one value (a scalar or [1]), w's one or one
/// per output channel.
void check_conv_integer(const NodeCheck& nc) {
  check_conv(nc, false, /*has_bias=*/false);
  auto one_value = [&](size_t i) {
    return nc.rank(i) == 0 || (nc.rank(i) == 1 && nc.shape(i)[0] == 1);
  };
  if (nc.has(2) && !one_value(2)) {
    nc.fail(nc.input_shaped(2) + " must be a scalar: ConvInteger's input has one zero point");
  }
  const int64_t m = nc.shape(1)[0];
  if (nc.has(3) && !one_value(3) && nc.shape(3) != std::vector<int64_t>{m}) {
    nc.fail(nc.input_shaped(3) + " must be a scalar or [" + str(m) +
            "], one per output channel of " + nc.input_shaped(1));
  }
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_conv(ImportCtx& c, bool transpose) {
  const Value& w = c.in_value(1);
  const Value& x = c.in_value(0);
  const size_t k = w.shape.size() - 2;
  const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  const std::vector<int64_t> ones(k, 1);
  Attrs a;
  a["kernel_shape"] = kernel;
  a["strides"] = c.attr_ints("strides", ones);
  a["dilations"] = c.attr_ints("dilations", ones);
  a["group"] = c.attr_i("group", 1);
  const auto& strides = std::get<std::vector<int64_t>>(a["strides"]);
  const auto& dil = std::get<std::vector<int64_t>>(a["dilations"]);
  std::vector<int64_t> in_sizes(x.shape.begin() + 2, x.shape.end());
  if (!transpose) {
    a["pads"] = resolve_pads(c, in_sizes, kernel, strides, dil);
    return a;
  }
  // ConvTranspose: out = stride*(in-1) + output_padding + (k-1)*d + 1 - pad_begin - pad_end. With
  // auto_pad SAME or output_shape, solve for the pads from the inferred output shape.
  std::vector<int64_t> out_pad = c.attr_ints("output_padding", std::vector<int64_t>(k, 0));
  a["output_padding"] = out_pad;
  const std::string auto_pad = c.attr_s("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" && !c.attr("output_shape")) {
    a["pads"] = c.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
    return a;
  }
  const Value& y = c.first_output();
  std::vector<int64_t> pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i) {
    const int64_t total =
        strides[i] * (in_sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1 - y.shape[i + 2];
    if (total < 0) {  // output_shape asks for more than the kernel covers: extra rows at the end
      out_pad[i] -= total;
      continue;
    }
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[i + k] = auto_pad == "SAME_UPPER" ? large : small;
  }
  a["pads"] = pads;
  a["output_padding"] = out_pad;
  return a;
}

Attrs import_conv2d(ImportCtx& c) { return import_conv(c, false); }
Attrs import_conv2d_transpose(ImportCtx& c) { return import_conv(c, true); }

// --- rewritten at import -----------------------------------------------------------------------

/// A 3-D convolution (video networks: x [N, C, D, H, W], w [O, C/g, KD, KH, KW]) as a 2-D one,
/// exactly: the depth window unfolded into the channels and the output depths into the batch,
///
///   xp = Pad(x) along D                          (the depth pads, when there are any)
///   u  = Gather(xp, idx, axis 2)                 [N, C, OD, KD, H, W], idx[od][kd] = od*sd + kd*dd
///   u2 = Reshape(Transpose(u, 0 2 3 1 4 5))      [N*OD, KD*C, H, W]
///   w2 = Reshape(Transpose(w, 0 2 1 3 4))        [O, KD*C, KH, KW]
///   y2 = Conv(u2, w2, b)                         2-D: strides, dilations, pads of H and W
///   y  = Transpose(Reshape(y2) [N, OD, O, OH, OW], 0 2 1 3 4)
///
/// so that it runs on the 2-D convolution's blocked layout, packed weights, fusion and tuning.
/// The channel index kd * C + c takes whole frames in turn: in the blocked layout each channel
/// block of u2 is a block of one frame of x, and the unfold copies vectors. (In the kernel's own
/// order, c * KD + kd, a block gathered from five channels of three frames lane by lane: MC3-18's
/// unfolds ran at 5 GB/s, the network 11% slower.) A grouped one keeps c * KD + kd, so that its
/// groups stay whole. The input is
/// read KD / sd times over (3x for the usual 3x3x3), small against the convolution's work; a
/// (1, KH, KW) kernel over every frame in order transposes the frames into the batch without the
/// unfold. A (KD, 1, 1) kernel without spatial strides or pads is a 2-D convolution over the
/// frames as rows, [N, C, D, H*W], with a (KD, 1) kernel, between two reshapes.
bool rewrite_conv3d(const ImportCtx& c, const std::vector<ValueId>& outs, ImportSink& sink) {
  const Value& x0 = c.in_value(0);
  const Value& w0 = c.in_value(1);
  if (w0.shape.size() != 5 || outs.empty() || outs[0] == kNoValue) return false;
  ImportCtx copy = c;
  const Attrs a = import_conv(copy, false);
  const auto& stride = std::get<std::vector<int64_t>>(a.at("strides"));
  const auto& dil = std::get<std::vector<int64_t>>(a.at("dilations"));
  const auto& pads = std::get<std::vector<int64_t>>(a.at("pads"));  // d0 h0 w0 d1 h1 w1
  const int64_t group = std::get<int64_t>(a.at("group"));
  const KilnDType dtype = x0.dtype;
  const std::vector<int64_t> xs = x0.shape, ws = w0.shape, ys = c.first_output().shape;
  const int64_t n = xs[0], ch = xs[1], h = xs[3], w = xs[4];
  const int64_t o = ws[0], kd = ws[2], od = ys[2], oh = ys[3], ow = ys[4];
  const std::string base = c.node_name();
  auto node = [&](const std::string& op, const std::string& suffix, std::vector<ValueId> in,
                  Attrs attrs, std::vector<int64_t> shape, KilnDType type) {
    const ValueId out = sink.add_value(base + "/" + suffix, type, std::move(shape));
    sink.add_node(Node{op, base + "/" + suffix, std::move(in), {out}, std::move(attrs)});
    return out;
  };
  if (ws[3] == 1 && ws[4] == 1 && stride[1] == 1 && stride[2] == 1 && pads[1] == 0 &&
      pads[2] == 0 && pads[4] == 0 && pads[5] == 0) {
    // A (KD, 1, 1) kernel (temporal, or 1x1x1) reads each pixel's own column of frames: it is a
    // 2-D convolution over [N, C, D, H*W] with a (KD, 1) kernel, between two free reshapes, so
    // the data keeps its order and the blocked layout converts it as any 4-D tensor.
    Attrs fa;
    fa["shape"] = std::vector<int64_t>{n, ch, xs[2], h * w};
    const ValueId x2 =
        node("Reshape", "frames_as_rows", {c.inputs[0]}, fa, {n, ch, xs[2], h * w}, dtype);
    Attrs wa;
    const std::vector<int64_t> w2s{o, ws[1], kd, 1};
    wa["shape"] = w2s;
    const ValueId w2 = node("Reshape", "kernel_2d", {c.inputs[1]}, wa, w2s, w0.dtype);
    Attrs ca;
    ca["kernel_shape"] = std::vector<int64_t>{kd, 1};
    ca["strides"] = std::vector<int64_t>{stride[0], 1};
    ca["dilations"] = std::vector<int64_t>{dil[0], 1};
    ca["pads"] = std::vector<int64_t>{pads[0], 0, pads[3], 0};
    ca["group"] = group;
    std::vector<ValueId> conv_in{x2, w2};
    if (c.in(2) != kNoValue) conv_in.push_back(c.inputs[2]);
    const ValueId y2 = node("Conv", "conv_2d", conv_in, ca, {n, o, od, h * w}, dtype);
    Attrs ya;
    ya["shape"] = ys;
    sink.add_node(Node{"Reshape", base, {y2}, {outs[0]}, ya});
    return true;
  }
  ValueId u2;
  const bool frames_first = group == 1 && kd > 1;
  if (kd == 1 && stride[0] == 1 && pads[0] == 0 && pads[3] == 0) {
    // Every frame once, in order (a (1, KH, KW) kernel): the frames into the batch directly.
    Attrs ta;
    ta["perm"] = std::vector<int64_t>{0, 2, 1, 3, 4};
    const ValueId ut =
        node("Transpose", "depth_to_batch", {c.inputs[0]}, ta, {n, od, ch, h, w}, dtype);
    Attrs ra;
    ra["shape"] = std::vector<int64_t>{n * od, ch, h, w};
    u2 = node("Reshape", "as_2d", {ut}, ra, {n * od, ch, h, w}, dtype);
  } else {
    ValueId x = c.inputs[0];
    if (pads[0] != 0 || pads[3] != 0) {
      Attrs pa;
      pa["mode"] = std::string("constant");
      pa["pads"] = std::vector<int64_t>{0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0};
      pa["value"] = 0.0f;
      x = node("Pad", "pad_depth", {x}, pa, {n, ch, xs[2] + pads[0] + pads[3], h, w}, dtype);
    }
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < od; ++i)
      for (int64_t k = 0; k < kd; ++k) idx.push_back(i * stride[0] + k * dil[0]);
    const ValueId windows =
        sink.add_constant(base + "/depth_windows", runtime::NDArray::from_vector(idx, {od, kd}));
    Attrs ga;
    ga["axis"] = int64_t{2};
    const ValueId u =
        node("Gather", "unfold_depth", {x, windows}, ga, {n, ch, od, kd, h, w}, dtype);
    Attrs ta;
    ta["perm"] = frames_first ? std::vector<int64_t>{0, 2, 3, 1, 4, 5}
                              : std::vector<int64_t>{0, 2, 1, 3, 4, 5};
    const ValueId ut = node("Transpose", "depth_to_batch", {u}, ta,
                            frames_first ? std::vector<int64_t>{n, od, kd, ch, h, w}
                                         : std::vector<int64_t>{n, od, ch, kd, h, w},
                            dtype);
    Attrs ra;
    ra["shape"] = std::vector<int64_t>{n * od, ch * kd, h, w};
    u2 = node("Reshape", "as_2d", {ut}, ra, {n * od, ch * kd, h, w}, dtype);
  }
  ValueId wk = c.inputs[1];
  if (frames_first) {
    Attrs ta;
    ta["perm"] = std::vector<int64_t>{0, 2, 1, 3, 4};
    wk = node("Transpose", "kernel_frames_first", {wk}, ta, {o, kd, ws[1], ws[3], ws[4]}, w0.dtype);
  }
  Attrs wa;
  const std::vector<int64_t> w2s{o, ws[1] * kd, ws[3], ws[4]};
  wa["shape"] = w2s;
  const ValueId w2 = node("Reshape", "kernel_2d", {wk}, wa, w2s, w0.dtype);
  Attrs ca;
  ca["kernel_shape"] = std::vector<int64_t>{ws[3], ws[4]};
  ca["strides"] = std::vector<int64_t>{stride[1], stride[2]};
  ca["dilations"] = std::vector<int64_t>{dil[1], dil[2]};
  ca["pads"] = std::vector<int64_t>{pads[1], pads[2], pads[4], pads[5]};
  ca["group"] = group;
  std::vector<ValueId> conv_in{u2, w2};
  if (c.in(2) != kNoValue) conv_in.push_back(c.inputs[2]);
  const ValueId y2 = node("Conv", "conv_2d", conv_in, ca, {n * od, o, oh, ow}, dtype);
  Attrs ya;
  ya["shape"] = std::vector<int64_t>{n, od, o, oh, ow};
  const ValueId y5 = node("Reshape", "batch_to_depth", {y2}, ya, {n, od, o, oh, ow}, dtype);
  Attrs yt;
  yt["perm"] = std::vector<int64_t>{0, 2, 1, 3, 4};
  sink.add_node(Node{"Transpose", base, {y5}, {outs[0]}, yt});
  return true;
}

}  // namespace

void register_conv(Registry& r) {
  r.add({.name = "Conv",
         .family = "nn/conv",
         .pattern = OpPattern::kOutEWiseFusable,
         .check = check_conv2d,
         .import = import_conv2d,
         .rewrite = rewrite_conv3d,
         .lower = lower_conv2d,
         .gpu = GpuStrategy::kTemplate,
         .gpu_template = conv_gpu,
         .gpu_note = " in 1-D"});
  r.add({.name = "ConvInteger",
         .family = "nn/conv",
         .pattern = OpPattern::kOutEWiseFusable,
         .check = check_conv_integer,
         .import = import_conv2d,
         .lower = lower_conv2d,
         .gpu = GpuStrategy::kRefused,
         .gpu_note = "no GPU schedule yet"});
  r.add({.name = "ConvTranspose",
         .family = "nn/conv",
         .pattern = OpPattern::kOutEWiseFusable,
         .check = check_conv2d_transpose,
         .import = import_conv2d_transpose,
         .lower = lower_conv2d_transpose,
         .gpu = GpuStrategy::kTemplate,
         .gpu_template = conv_gpu,
         .gpu_note = " in 1-D"});
}

}  // namespace kiln::graph::ops
