// The poolings: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (1-D as 2-D with a height
// of 1, as convolutions are; 3-D as two 2-D poolings; NCHW[x]c after alter_layout), lowered to
// topi's pooling computes.
#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/pooling.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using te::Tensor;

/// A 3-D pooling over frames as rows (rewrite_pool3d: x [N, C, D, H*W], or its NCHW[x]c blocks
/// [N, C/b, D, H*W, b] after alter_layout; frame_shape = [H, W]) as two 2-D ones, which is exact
/// because its window is a box: over H and W with the frames as channels, then over D:
///   y1 = pool2d(x as [N, C*D, H, W], KH x KW)          (blocked: [N, C/b*D, H, W, b], a view)
///   y  = pool2d(y1 as [N, C, D, OH*OW], KD x 1)         [N, C, OD, OH*OW]
/// A max of maxima is the max; a clipped window's size is the product of its clipped extents, so a
/// mean of means (either count_include_pad) is the mean. A step whose window is one element
/// (a (1, k, k) pool's over D, a (k, 1, 1) one's over H and W) is left out.
LowerResult lower_frames_pool(const LowerCtx& c, bool blocked) {
  const Node& n = c.node;
  const std::vector<int64_t> xs = c.in_shape(0);
  const std::vector<int64_t>& frame = n.ints("frame_shape");
  const int64_t batch = xs[0], ch = xs[1], d = xs[2], h = frame.at(0), w = frame.at(1);
  const int64_t b = blocked ? xs[4] : 0;
  auto view = [&](std::vector<int64_t> shape) {  // [N, C (blocks), rest...] (+ the block)
    if (blocked) shape.push_back(b);
    return shape;
  };
  for (int64_t dl : n.ints("dilations")) {
    if (dl != 1) c.fail("dilated pooling is not supported");
  }
  const auto& k = n.ints("kernel_shape");
  const auto& st = n.ints("strides");
  const auto& p = n.ints("pads");  // d0 h0 w0 d1 h1 w1
  const bool ceil = n.i("ceil_mode") != 0, is_max = n.op == "MaxPool";
  const bool include_pad = !is_max && n.i("count_include_pad") != 0;
  auto pool = [&](const Tensor& t, topi::Ints2 kernel, topi::Ints2 stride, topi::Ints4 pads,
                  const char* name) {
    return is_max ? topi::max_pool2d(t, kernel, stride, pads, ceil, name)
                  : topi::avg_pool2d(t, kernel, stride, pads, ceil, include_pad, name);
  };
  const bool over_hw = k[1] != 1 || k[2] != 1 || st[1] != 1 || st[2] != 1 || p[1] != 0 ||
                       p[2] != 0 || p[4] != 0 || p[5] != 0;
  const bool over_d = k[0] != 1 || st[0] != 1 || p[0] != 0 || p[3] != 0;
  Tensor x = c.input(0), frames, y1, rows, y;
  if (over_hw) {
    frames = topi::reshape(x, view({batch, ch * d, h, w}), "frames");
    y1 = pool(frames, ints2({k[1], k[2]}), ints2({st[1], st[2]}), ints4({p[1], p[2], p[4], p[5]}),
              "pool_hw");
    const int64_t oh = *ir::as_const_int(y1->shape()[2]), ow = *ir::as_const_int(y1->shape()[3]);
    rows = topi::reshape(y1, view({batch, ch, d, oh * ow}), "frames_as_rows");
    x = rows;
  }
  if (over_d || !over_hw) {  // a window of one element everywhere still copies
    y = pool(x, ints2({k[0], 1}), ints2({st[0], 1}), ints4({p[0], 0, p[3], 0}), "pool_d");
  }
  auto base = [tuning = c.tuning](te::Schedule& s, const Tensor& t) {
    tuning.schedule("pool2d_x86", s, t, t);
  };
  const Tensor out = y.defined() ? y : rows;
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            if (y1.defined()) {
              s[frames].compute_inline();
              base(s, y1);
              if (y.defined()) s[rows].compute_inline();
            }
            if (y.defined()) {
              base(s, y);
              then_injective(s, y, output);
            } else {
              if (rows != output) s[rows].compute_inline();
              injective(s, output);
            }
          }};
}

/// Pooling, 2-D, or 1-D as 2-D with a height of 1 (as convolutions are); 3-D: lower_frames_pool.
LowerResult lower_pool(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  const size_t rank = c.in_shape(0).size();
  const bool blocked = rank == 5 && n.has_attr("data_block");  // NCHW[x]c, from alter_layout
  if (n.has_attr("frame_shape")) return lower_frames_pool(c, blocked);
  if (rank != 4 && rank != 3 && !blocked) {
    c.fail("only 1-D, 2-D and 3-D pooling (NCW, NCHW, NCDHW input) is supported");
  }
  const bool one_d = rank == 3;
  auto lift = [&](const std::vector<int64_t>& v, int64_t fill) {
    return one_d ? std::vector<int64_t>{fill, v.at(0)} : v;
  };
  Tensor x = c.input(0);
  if (one_d) {
    std::vector<int64_t> shape = c.in_shape(0);
    shape.insert(shape.begin() + 2, 1);
    x = topi::reshape(x, shape, "data_2d");
  }
  Tensor y;
  if (op == "GlobalAveragePool") {
    y = topi::global_avg_pool2d(x);
  } else if (op == "GlobalMaxPool") {
    y = topi::global_max_pool2d(x);
  } else {
    for (int64_t d : n.ints("dilations")) {
      if (d != 1) c.fail("dilated pooling is not supported");
    }
    const auto k = ints2(lift(n.ints("kernel_shape"), 1)), st = ints2(lift(n.ints("strides"), 1));
    const std::vector<int64_t>& p = n.ints("pads");
    const auto pads = ints4(one_d ? std::vector<int64_t>{0, p.at(0), 0, p.at(1)} : p);
    const bool ceil = n.i("ceil_mode") != 0;
    y = op == "MaxPool" ? topi::max_pool2d(x, k, st, pads, ceil)
                        : topi::avg_pool2d(x, k, st, pads, ceil, n.i("count_include_pad") != 0);
  }
  auto base = [tuning = c.tuning](te::Schedule& s, const Tensor& t) {
    tuning.schedule("pool2d_x86", s, t, t);
  };
  if (!one_d) {
    return {{y},
            [=](te::Schedule& s, const Tensor& output) {
              base(s, y);
              then_injective(s, y, output);
            },
            blocked ? Tensor() : y};
  }
  Tensor out = topi::reshape(y, c.out_value().shape, "pool1d");
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            s[x].compute_inline();
            base(s, y);
            if (out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

std::string pool_gpu(const Node&, size_t) { return "pool2d_gpu"; }

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_pool(const NodeCheck& nc) {
  const std::vector<int64_t>& x = nc.shape(0);
  if (x.size() < 3) {
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) + "; " + nc.op() +
            " takes N x C x D1 x ... (rank 3 or more)");
  }
  const size_t k = x.size() - 2;
  const std::string spatial = nc.input_shaped(0) + " with " + str(static_cast<int64_t>(k)) +
                              " spatial dimension" + (k == 1 ? "" : "s");
  const std::vector<int64_t> kernel = nc.per_axis("kernel_shape", k, 1, 1, spatial);
  const bool has_dilations = nc.schema().attributes().count("dilations") != 0;
  std::vector<int64_t> strides, extent;
  const std::vector<int64_t> pads = nc.window(kernel, has_dilations, &strides, &extent);
  if (nc.op() == "MaxPool") {
    const int64_t order = nc.attr_i("storage_order", 0);
    if (order != 0 && order != 1) {
      nc.fail("attribute 'storage_order' is " + str(order) +
              "; it must be 0 (row major) or 1 "
              "(column major)");
    }
  }
  const bool ceil_mode = nc.attr_i("ceil_mode", 0) != 0;
  for (size_t i = 0; i < k; ++i) nc.check_fits(i, pads, extent[i], ceil_mode, strides[i]);
}

void check_global_pool(const NodeCheck& nc) {
  if (nc.rank(0) < 2)
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) + "; " + nc.op() +
            " takes N x C x D1 x ... (rank 2 or more)");
  return;
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_pool(ImportCtx& c, bool is_max) {
  const Value& x = c.in_value(0);
  const size_t k = x.shape.size() - 2;
  const std::vector<int64_t> ones(k, 1);
  Attrs a;
  const std::vector<int64_t> kernel = c.attr_ints("kernel_shape", {});
  a["kernel_shape"] = kernel;
  a["strides"] = c.attr_ints("strides", ones);
  a["dilations"] = c.attr_ints("dilations", ones);
  a["ceil_mode"] = c.attr_i("ceil_mode", 0);
  if (!is_max) a["count_include_pad"] = c.attr_i("count_include_pad", 0);
  const auto& strides = std::get<std::vector<int64_t>>(a["strides"]);
  const auto& dil = std::get<std::vector<int64_t>>(a["dilations"]);
  a["pads"] = resolve_pads(c, std::vector<int64_t>(x.shape.begin() + 2, x.shape.end()), kernel,
                           strides, dil);
  return a;
}

Attrs import_max_pool(ImportCtx& c) {
  if (c.proto().output_size() > 1 && !c.proto().output(1).empty()) {
    c.fail("the Indices output of MaxPool is not supported");
  }
  return import_pool(c, true);
}
Attrs import_average_pool(ImportCtx& c) { return import_pool(c, false); }

// --- rewritten at import -----------------------------------------------------------------------

/// A 3-D pooling (x [N, C, D, H, W]) over the frames as rows of H*W pixels, between reshapes that
/// keep the data's order:
///
///   y = Reshape(Pool(Reshape(x) [N, C, D, H*W]) [N, C, OD, OH*OW]) [N, C, OD, OH, OW]
///
/// the Pool keeping its 3-D window with frame_shape = [H, W] (lower_frames_pool). A 4-D value
/// there, it is blocked by alter_layout as the (KD, 1, 1) convolutions over the same rows are
/// (rewrite_conv3d), and the reshapes between them drop out (sink_frame_reshapes). The global
/// poolings are plain 2-D ones over [N, C, D, H*W].
bool rewrite_pool3d(const ImportCtx& c, const std::vector<ValueId>& outs, ImportSink& sink) {
  const Value& x0 = c.in_value(0);
  if (x0.shape.size() != 5 || outs.empty() || outs[0] == kNoValue) return false;
  const std::string& op = c.proto().op_type();
  const bool global = op.rfind("Global", 0) == 0;
  Attrs a;
  if (!global) {
    ImportCtx copy = c;
    a = op == "MaxPool" ? import_max_pool(copy) : import_average_pool(copy);
  }
  const std::vector<int64_t> xs = x0.shape, ys = c.first_output().shape;
  const std::string base = c.node_name();
  const std::vector<int64_t> rows{xs[0], xs[1], xs[2], xs[3] * xs[4]};
  const ValueId x = sink.add_value(base + "/frames_as_rows", x0.dtype, rows);
  Attrs ra;
  ra["shape"] = rows;
  sink.add_node(Node{"Reshape", base + "/frames_as_rows", {c.inputs[0]}, {x}, ra});
  const std::vector<int64_t> pooled{ys[0], ys[1], ys[2], ys[3] * ys[4]};
  if (!global) a["frame_shape"] = std::vector<int64_t>{xs[3], xs[4]};
  const ValueId y = sink.add_value(base + "/pool", x0.dtype,
                                   global ? std::vector<int64_t>{ys[0], ys[1], 1, 1} : pooled);
  sink.add_node(Node{op, base + "/pool", {x}, {y}, a});
  Attrs ya;
  ya["shape"] = ys;
  sink.add_node(Node{"Reshape", base, {y}, {outs[0]}, ya});
  return true;
}

}  // namespace

void register_pool(Registry& r) {
  for (const char* op : {"AveragePool", "GlobalAveragePool", "GlobalMaxPool", "MaxPool"}) {
    const bool global = std::string(op).rfind("Global", 0) == 0;
    r.add({.name = op,
           .family = "nn/pool",
           .pattern = OpPattern::kCommReduce,
           .check = global ? check_global_pool : check_pool,
           .import = global                         ? nullptr
                     : std::string(op) == "MaxPool" ? import_max_pool
                                                    : import_average_pool,
           .no_attributes = global,
           .rewrite = rewrite_pool3d,
           .lower = lower_pool,
           .gpu = GpuStrategy::kTemplate,
           .gpu_template = pool_gpu,
           .gpu_note = " in 1-D"});
  }
}

}  // namespace kiln::graph::ops
