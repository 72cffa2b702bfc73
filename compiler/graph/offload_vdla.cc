// The VDLA offload pass (offload_vdla.h).
#include "compiler/graph/offload_vdla.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "compiler/graph/alter_layout.h"
#include "compiler/vdla/conv2d.h"
#include "compiler/vdla/conv2d_template.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph {
namespace {

std::string shape_text(const topi::VdlaConv2dShape& s) {
  std::ostringstream os;
  os << s.ic << "x" << s.h << "x" << s.w << " -> " << s.oc << " k" << s.k << " s" << s.stride
     << " p" << s.pad;
  return os.str();
}

/// [OC, IC, K, K] -> [OC/16][IC/16][K][K][16 out][16 in].
runtime::NDArray pack_kernel(const runtime::NDArray& w) {
  const auto& d = w.shape();
  const int64_t oc = d[0], ic = d[1], k = d[2];
  runtime::NDArray p = runtime::NDArray::empty({oc / 16, ic / 16, k, k, 16, 16}, runtime::kInt8);
  const int8_t* src = w.data<int8_t>();
  int8_t* dst = p.data<int8_t>();
  for (int64_t o = 0; o < oc; ++o) {
    for (int64_t c = 0; c < ic; ++c) {
      for (int64_t y = 0; y < k; ++y) {
        for (int64_t x = 0; x < k; ++x) {
          const int64_t to =
              ((((o / 16 * (ic / 16) + c / 16) * k + y) * k + x) * 16 + o % 16) * 16 + c % 16;
          dst[to] = src[((o * ic + c) * k + y) * k + x];
        }
      }
    }
  }
  return p;
}

/// [OC] int32 -> [OC/16][1][16] (the same bytes).
runtime::NDArray pack_rows(const runtime::NDArray& v) {
  const int64_t oc = v.shape()[0];
  runtime::NDArray p = runtime::NDArray::empty({oc / 16, 1, 16}, runtime::kInt32);
  p.copy_from_bytes(v.data(), static_cast<size_t>(v.nbytes()));
  return p;
}

/// The config the tuner's log holds for `op` when `configs` answers for the vdla_conv2d template
/// with another config than the template's default.
std::optional<vdla_compiler::VdlaConv2dConfig> config_from_source(const topi::VdlaConv2d& op,
                                                                  autotune::ConfigSource* configs) {
  if (configs == nullptr) return std::nullopt;
  const autotune::Task task = autotune::Task::make("vdla_conv2d", op.out, "vdla");
  const space::Config c = configs->choose(task);
  // A source answers an untuned task with the template's default, a cheap rule; the config
  // chosen on the cycle model is better there.
  if (c.index() == task.default_config.index()) return std::nullopt;
  return vdla_compiler::vdla_conv2d_config_of(c);
}

}  // namespace

std::string vdla_qconv_problem(const Graph& g, const Node& n, topi::VdlaConv2dShape* shape) {
  const Value& x = g.value(n.inputs[0]);
  const Value& w = g.value(n.inputs[1]);
  if (x.shape.size() != 4) return "its input is not NCHW";
  if (x.shape[0] != 1)
    return "batch " + std::to_string(x.shape[0]) + " (the VDLA template runs batch 1)";
  if (n.i("group") != 1)
    return "group " + std::to_string(n.i("group")) + " (the VDLA runs group 1)";
  for (int64_t d : n.ints("dilations")) {
    if (d != 1) return "dilation " + std::to_string(d) + " (the VDLA runs dilation 1)";
  }
  if (w.shape.size() != 4 || w.shape[2] != w.shape[3]) return "a kernel that is not square";
  const auto& st = n.ints("strides");
  if (st.size() != 2 || st[0] != st[1]) return "strides that differ between the axes";
  const auto& pads = n.ints("pads");
  if (pads.size() != 4 ||
      std::adjacent_find(pads.begin(), pads.end(), std::not_equal_to<>()) != pads.end()) {
    return "pads that are not equal on every side";
  }
  if (pads[0] > 15) return "padding " + std::to_string(pads[0]) + " beyond the DMA's 15";
  const int64_t ic = x.shape[1], oc = w.shape[0];
  if (ic % 16 != 0) return std::to_string(ic) + " input channels (the VDLA needs multiples of 16)";
  if (oc % 16 != 0) return std::to_string(oc) + " output channels (the VDLA needs multiples of 16)";
  for (size_t i = 1; i < 4; ++i) {
    if (!g.value(n.inputs[i]).is_constant()) return "its weights, bias or shift are not constants";
  }
  *shape = topi::VdlaConv2dShape{static_cast<int>(x.shape[2]), static_cast<int>(x.shape[3]),
                                 static_cast<int>(ic),         static_cast<int>(oc),
                                 static_cast<int>(w.shape[2]), static_cast<int>(st[0]),
                                 static_cast<int>(pads[0])};
  return "";
}

topi::VdlaConv2d vdla_qconv_compute(const Node& n) {
  const topi::VdlaConv2dShape s{static_cast<int>(n.i("h")),  static_cast<int>(n.i("w")),
                                static_cast<int>(n.i("ic")), static_cast<int>(n.i("oc")),
                                static_cast<int>(n.i("k")),  static_cast<int>(n.i("stride")),
                                static_cast<int>(n.i("pad"))};
  return topi::vdla_conv2d(s, n.i("relu") != 0);
}

vdla_compiler::VdlaConv2dConfig vdla_qconv_config(const Node& n) {
  vdla_compiler::VdlaConv2dConfig c;
  c.tile_oc = static_cast<int>(n.i("tile_oc"));
  c.tile_ic = static_cast<int>(n.i("tile_ic"));
  c.tile_h = static_cast<int>(n.i("tile_h"));
  c.tile_w = static_cast<int>(n.i("tile_w"));
  c.vthreads = static_cast<int>(n.i("vthreads"));
  c.vthread_h = n.i("vthread_h") != 0;
  c.wgt_resident = n.i("wgt_resident") != 0;
  return c;
}

VdlaOffloadReport offload_vdla(Graph& g, autotune::ConfigSource* configs) {
  VdlaOffloadReport rep;
  const vdla::Config cfg;
  std::vector<Node> out;
  // An offloaded convolution's NCHW output -> its blocked output (to keep consecutive ones
  // blocked).
  std::map<ValueId, ValueId> blocked_of;
  auto conversion = [&](ValueId from, ValueId to, int src, int dst) {
    out.push_back(layout_transform_node(g, from, to, src, dst));
    ++rep.layout_conversions;
  };
  for (Node& n : g.nodes()) {
    if (n.op != "QConv") {
      out.push_back(std::move(n));
      continue;
    }
    ++rep.convolutions;
    topi::VdlaConv2dShape s;
    std::string problem = vdla_qconv_problem(g, n, &s);
    topi::VdlaConv2d op;
    vdla_compiler::VdlaConv2dConfig c;
    if (problem.empty()) {
      op = topi::vdla_conv2d(s, n.i("relu") != 0);
      try {
        if (auto tuned = config_from_source(op, configs)) {
          c = *tuned;
          const std::string p = vdla_compiler::vdla_conv2d_problem(op, c, cfg);
          if (!p.empty()) problem = "the tuner's config " + c.to_string() + " does not fit: " + p;
        } else {
          try {
            c = vdla_compiler::choose_conv2d_config(op, 2, cfg);
          } catch (const Error&) {
            c = vdla_compiler::choose_conv2d_config(op, 1, cfg);
          }
        }
      } catch (const Error& e) {
        problem = e.what();
      }
    }
    if (!problem.empty()) {
      rep.kept_on_cpu.push_back(n.name + " stays on the CPU: " + problem);
      out.push_back(std::move(n));
      continue;
    }
    const ValueId x = n.inputs[0], y = n.outputs[0];
    ValueId xb;
    if (auto it = blocked_of.find(x); it != blocked_of.end()) {
      xb = it->second;
    } else {
      const Value& xv = g.value(x);
      xb = g.add_value(xv.name + "_vdla", xv.dtype, {1, s.ic / 16, s.h, s.w, 16});
      conversion(x, xb, 0, 16);
    }
    Node v;
    v.op = "VdlaQConv";
    v.name = n.name;
    v.inputs = {xb,
                g.add_constant(n.name + "_vdla_kernel", pack_kernel(*g.value(n.inputs[1]).data)),
                g.add_constant(n.name + "_vdla_bias", pack_rows(*g.value(n.inputs[2]).data)),
                g.add_constant(n.name + "_vdla_shift", pack_rows(*g.value(n.inputs[3]).data))};
    const Value& yv = g.value(y);
    const ValueId yb = g.add_value(yv.name + "_vdla", yv.dtype, {1, s.oc / 16, s.oh(), s.ow(), 16});
    v.outputs = {yb};
    v.attrs = {{"h", int64_t{s.h}},
               {"w", int64_t{s.w}},
               {"ic", int64_t{s.ic}},
               {"oc", int64_t{s.oc}},
               {"k", int64_t{s.k}},
               {"stride", int64_t{s.stride}},
               {"pad", int64_t{s.pad}},
               {"relu", n.i("relu")},
               {"tile_oc", int64_t{c.tile_oc}},
               {"tile_ic", int64_t{c.tile_ic}},
               {"tile_h", int64_t{c.tile_h}},
               {"tile_w", int64_t{c.tile_w}},
               {"vthreads", int64_t{c.vthreads}},
               {"vthread_h", int64_t{c.vthread_h}},
               {"wgt_resident", int64_t{c.wgt_resident}}};
    out.push_back(std::move(v));
    conversion(yb, y, 16, 0);
    blocked_of[y] = yb;
    ++rep.offloaded;
    rep.placed.push_back(n.name + ": on the VDLA (" + shape_text(s) + ", " + c.to_string() + ")");
  }
  g.nodes() = std::move(out);
  return rep;
}

}  // namespace kiln::graph
