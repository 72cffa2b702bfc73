// Max and average pooling (windowed and global) in NCHW and NCHW[x]c, and their x86 schedules.
#include "compiler/topi/pooling.h"

#include <algorithm>

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

/// ONNX's output extent of a pooling window.
int64_t pool_out_dim(int64_t in, int k, int s, int p0, int p1, bool ceil_mode) {
  int64_t span = in + p0 + p1 - k;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p0) --o;  // the last window must start inside
  return o;
}

/// The output shape of a pooling of `data`: its own with (oh, ow) at dimensions 2 and 3.
std::vector<Expr> pooled_shape(const te::Tensor& data, int64_t oh, int64_t ow) {
  std::vector<Expr> shape = data->shape();
  shape[2] = Expr(oh);
  shape[3] = Expr(ow);
  return shape;
}

/// The output's axis names: NCHW, or NCHW[x]c with the channel block last.
std::vector<std::string> pooled_axes(const te::Tensor& data) {
  if (data.ndim() == 5) return {"n", "cb", "oh", "ow", "c"};
  return {"n", "c", "oh", "ow"};
}

/// `i` (an output index) with the window's offsets at dimensions 2 and 3.
std::vector<Expr> window_index(const std::vector<Var>& i, Expr y, Expr x) {
  std::vector<Expr> idx(i.begin(), i.end());
  idx[2] = y;
  idx[3] = x;
  return idx;
}

void check_layout(const te::Tensor& data, const char* op) {
  KILN_USER_CHECK(data.ndim() == 4 || data.ndim() == 5)
      << op << ": '" << data->name() << "' must be 4-D (NCHW) or 5-D (NCHW[x]c)";
}

struct Window {
  int64_t h, w, oh, ow;
  Ints4 pads;  ///< the padding, grown at the bottom and right to hold ceil_mode's last windows
};

Window check_window(const te::Tensor& data, Ints2 kernel, Ints2 stride, Ints4 padding,
                    bool ceil_mode, const char* op) {
  check_layout(data, op);
  KILN_USER_CHECK(kernel[0] > 0 && kernel[1] > 0 && stride[0] > 0 && stride[1] > 0)
      << op << ": kernel and stride must be positive";
  for (int p : padding) KILN_USER_CHECK(p >= 0) << op << ": pads must not be negative, got " << p;
  KILN_USER_CHECK(padding[0] < kernel[0] && padding[2] < kernel[0] && padding[1] < kernel[1] &&
                  padding[3] < kernel[1])
      << op << ": pads must be smaller than the kernel";
  Window w{const_dim(data, 2, op), const_dim(data, 3, op), 0, 0, {}};
  w.oh = pool_out_dim(w.h, kernel[0], stride[0], padding[0], padding[2], ceil_mode);
  w.ow = pool_out_dim(w.w, kernel[1], stride[1], padding[1], padding[3], ceil_mode);
  KILN_USER_CHECK(w.oh > 0 && w.ow > 0) << op << ": the window is larger than the padded input";
  int64_t extra_h = (w.oh - 1) * stride[0] + kernel[0] - (w.h + padding[0] + padding[2]);
  int64_t extra_w = (w.ow - 1) * stride[1] + kernel[1] - (w.w + padding[1] + padding[3]);
  w.pads = {padding[0], padding[1], padding[2] + int(std::max<int64_t>(extra_h, 0)),
            padding[3] + int(std::max<int64_t>(extra_w, 0))};
  return w;
}

}  // namespace

te::Tensor max_pool2d(const te::Tensor& data, Ints2 kernel, Ints2 stride, Ints4 padding,
                      bool ceil_mode, const std::string& name) {
  Window win = check_window(data, kernel, stride, padding, ceil_mode, "max_pool2d");
  // Padded points hold the lowest value, so that they never win.
  te::Tensor p = pad_hw(data, win.pads, ir::min_value(data->dtype()), name + ".pad");
  IterVar rh = te::reduce_axis({0, kernel[0]}, "rh"), rw = te::reduce_axis({0, kernel[1]}, "rw");
  return with_workload(te::compute(
                           pooled_shape(data, win.oh, win.ow),
                           [&](const std::vector<Var>& i) {
                             return te::max(
                                 p(window_index(i, i[2] * stride[0] + rh, i[3] * stride[1] + rw)),
                                 {rh, rw});
                           },
                           name, pooled_axes(data)),
                       {"max_pool2d",
                        {spec_of(data, "max_pool2d")},
                        {{"ceil_mode", ceil_mode},
                         {"kernel_shape", ints_attr(kernel)},
                         {"pads", ints_attr(padding)},
                         {"strides", ints_attr(stride)}}});
}

te::Tensor avg_pool2d(const te::Tensor& data, Ints2 kernel, Ints2 stride, Ints4 padding,
                      bool ceil_mode, bool count_include_pad, const std::string& name) {
  Window win = check_window(data, kernel, stride, padding, ceil_mode, "avg_pool2d");
  te::Tensor p = pad_hw(data, win.pads, Expr(), name + ".pad");
  IterVar rh = te::reduce_axis({0, kernel[0]}, "rh"), rw = te::reduce_axis({0, kernel[1]}, "rw");
  te::Tensor sum = te::compute(
      pooled_shape(data, win.oh, win.ow),
      [&](const std::vector<Var>& i) {
        return te::sum(p(window_index(i, i[2] * stride[0] + rh, i[3] * stride[1] + rw)), {rh, rw});
      },
      name + ".sum", pooled_axes(data));
  const Workload wl{"avg_pool2d",
                    {spec_of(data, "avg_pool2d")},
                    {{"ceil_mode", ceil_mode},
                     {"count_include_pad", count_include_pad},
                     {"kernel_shape", ints_attr(kernel)},
                     {"pads", ints_attr(padding)},
                     {"strides", ints_attr(stride)}}};
  return with_workload(te::compute(
                           pooled_shape(data, win.oh, win.ow),
                           [&](const std::vector<Var>& i) {
                             Expr hs = i[2] * stride[0] - padding[0],
                                  ws = i[3] * stride[1] - padding[1];
                             Expr ch, cw;
                             if (count_include_pad) {
                               ch = ir::min(hs + kernel[0], Expr(win.h + padding[2])) - hs;
                               cw = ir::min(ws + kernel[1], Expr(win.w + padding[3])) - ws;
                             } else {
                               ch = ir::min(hs + kernel[0], Expr(win.h)) - ir::max(hs, 0);
                               cw = ir::min(ws + kernel[1], Expr(win.w)) - ir::max(ws, 0);
                             }
                             Expr count = ir::cast(data->dtype(), ir::max(ch * cw, 1));
                             return sum(std::vector<Expr>(i.begin(), i.end())) / count;
                           },
                           name, pooled_axes(data)),
                       wl);
}

te::Tensor global_max_pool2d(const te::Tensor& data, const std::string& name) {
  check_layout(data, "global_max_pool2d");
  IterVar rh = te::reduce_axis({0, data->shape()[2]}, "rh"),
          rw = te::reduce_axis({0, data->shape()[3]}, "rw");
  return with_workload(te::compute(
                           pooled_shape(data, 1, 1),
                           [&](const std::vector<Var>& i) {
                             return te::max(data(window_index(i, rh, rw)), {rh, rw});
                           },
                           name, pooled_axes(data)),
                       {"global_max_pool2d", {spec_of(data, "global_max_pool2d")}, {}});
}

te::Tensor global_avg_pool2d(const te::Tensor& data, const std::string& name) {
  check_layout(data, "global_avg_pool2d");
  int64_t h = const_dim(data, 2, "global_avg_pool2d"), w = const_dim(data, 3, "global_avg_pool2d");
  IterVar rh = te::reduce_axis({0, h}, "rh"), rw = te::reduce_axis({0, w}, "rw");
  te::Tensor sum = te::compute(
      pooled_shape(data, 1, 1),
      [&](const std::vector<Var>& i) {
        return te::sum(data(window_index(i, rh, rw)), {rh, rw});
      },
      name + ".sum", pooled_axes(data));
  return with_workload(te::compute(
                           pooled_shape(data, 1, 1),
                           [&](const std::vector<Var>& i) {
                             return sum(std::vector<Expr>(i.begin(), i.end())) *
                                    ir::make_const(data->dtype(), 1.0 / double(h * w));
                           },
                           name, pooled_axes(data)),
                       {"global_avg_pool2d", {spec_of(data, "global_avg_pool2d")}, {}});
}

ConfigSpace pool2d_x86_space(const te::Tensor& out) {
  KILN_USER_CHECK((out.ndim() == 4 || out.ndim() == 5) && out->is_compute())
      << "pool2d_x86_space: '" << out->name() << "' is not a 4-D or 5-D pooling";
  ConfigSpace space;
  if (out.ndim() == 5) {
    space.define_knob("unroll_kw", {1, 0});
    space.define_knob("pad_at", {0, 1});
    return space;
  }
  space.define_split("tile_c", const_dim(out, 1, "pool2d"), 2, space::SplitPolicy::kFactors, 16);
  space.define_split("tile_ow", const_dim(out, 3, "pool2d"), 2, space::SplitPolicy::kFactors, 32);
  space.define_knob("fuse_rows", {1, 0});
  space.define_knob("unroll_kw", {1, 0});
  space.define_knob("pad_at", {1, 0});
  return space;
}

Config pool2d_x86_default(const ConfigSpace& space) {
  std::vector<int> pos(space.knobs().size(), 0);
  if (space.knobs().size() == 2) return space.from_positions(pos);  // NCHW[x]c: first choices
  const auto& ow = space.knob("tile_ow").candidates;
  int pw = split_position(space, "tile_ow", 16);
  pos[knob_index(space, "tile_ow")] = pw;
  // Narrow outputs (global pooling) vectorize over channels instead, leaving at least two
  // channel blocks to run in parallel.
  const auto& c = space.knob("tile_c").candidates[0];
  int64_t channels = c[0] * c[1];
  int64_t c_limit =
      ow[pw].back() >= 4 ? 1 : std::min<int64_t>(16, std::max<int64_t>(1, channels / 2));
  pos[knob_index(space, "tile_c")] = split_position(space, "tile_c", c_limit);
  return space.from_positions(pos);
}

namespace {

/// The padding stage of a windowed pooling's reduction (null when unpadded or global).
te::Tensor pool_pad_stage(const te::Tensor& red) {
  te::Tensor pad = red->inputs()[0];
  const std::string& pn = pad->name();
  if (pad->is_compute() && pn.size() >= 4 && pn.compare(pn.size() - 4, 4, ".pad") == 0) return pad;
  return {};
}

/// The padding of a windowed pooling (if any): computed in full first (pad_at 1), or inlined.
void schedule_pool_pad(te::Schedule& s, const te::Tensor& red, const Config& cfg) {
  if (te::Tensor pad = pool_pad_stage(red); pad.defined()) {
    if (cfg.knob("pad_at") == 1) {
      schedule_layout_transform_x86(s, pad);
    } else {
      s[pad].compute_inline();
    }
  }
}

/// NCHW[x]c: parallel over (n, channel blocks, output rows), the channel block vectorized and
/// accumulated in registers over the window.
void schedule_pool2d_nchwc(te::Schedule& s, const te::Tensor& out, const te::Tensor& red,
                           const Config& cfg) {
  te::Stage so = s[out];
  IterVar par = so.fuse({so.axis(0), so.axis(1), so.axis(2)});
  so.parallel(par);
  so.vectorize(so.axis(4));
  te::Stage sr = s[red];
  sr.compute_at(so, so.axis(3));
  sr.set_scope("local");
  IterVar kw = sr.reduce_axis(1);
  sr.reorder({sr.axis(0), sr.axis(1), sr.axis(2), sr.axis(3), sr.reduce_axis(0), kw, sr.axis(4)});
  sr.vectorize(sr.axis(4));
  auto kw_extent = ir::as_const_int(red->reduce_axis[1]->dom.extent);
  if (cfg.knob("unroll_kw") != 0 && kw_extent && *kw_extent <= 16) sr.unroll(kw);
  schedule_pool_pad(s, red, cfg);
}

}  // namespace

void schedule_pool2d_x86(te::Schedule& s, const te::Tensor& out, const Config& cfg) {
  // The reduction: the output itself (max) or the sum it divides (average).
  te::Tensor red;
  if (out->reduce_axis.empty()) {
    red = out->inputs()[0];
  } else {
    red = s.cache_write(out, "local");
  }
  if (out.ndim() == 5) {
    schedule_pool2d_nchwc(s, out, red, cfg);
    return;
  }
  int64_t ci_extent = cfg.split("tile_c").back(), owi_extent = cfg.split("tile_ow").back();
  bool vector_w = owi_extent > 1 || ci_extent == 1;
  te::Stage so = s[out];
  IterVar n = so.axis(0), c = so.axis(1), oh = so.axis(2), ow = so.axis(3);
  auto [co, ci] = so.split(c, ci_extent);
  auto [owo, owi] = so.split(ow, owi_extent);
  if (vector_w) {
    so.reorder({n, co, oh, owo, ci, owi});
  } else {
    so.reorder({n, co, oh, owo, owi, ci});
  }
  IterVar par = cfg.knob("fuse_rows") != 0 ? so.fuse({n, co, oh}) : so.fuse(n, co);
  so.parallel(par);
  so.vectorize(vector_w ? owi : ci);

  te::Stage sr = s[red];
  sr.compute_at(so, owo);
  sr.set_scope("local");
  IterVar rn = sr.axis(0), rc = sr.axis(1), rh = sr.axis(2), rw = sr.axis(3);
  IterVar kh = sr.reduce_axis(0), kw = sr.reduce_axis(1);
  if (vector_w) {
    sr.reorder({rn, rh, kh, kw, rc, rw});
    sr.vectorize(rw);
  } else {
    sr.reorder({rn, rh, kh, kw, rw, rc});
    sr.vectorize(rc);
  }
  auto kw_extent = ir::as_const_int(red->reduce_axis[1]->dom.extent);
  if (cfg.knob("unroll_kw") != 0 && kw_extent && *kw_extent <= 16) sr.unroll(kw);
  schedule_pool_pad(s, red, cfg);
}

}  // namespace kiln::topi
