// The VDLA conv2d template: stages from the output, the space of named knobs, the default, the
// schedule at a point.
#include "compiler/vdla/conv2d_template.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "base/error.h"
#include "compiler/topi/workload.h"

namespace kiln::vdla_compiler {

using topi::VdlaConv2d;
using topi::VdlaConv2dShape;
using topi::Workload;
using topi::workload_of;

namespace {

/// The VDLA a vdla target is: the paper's prototype.
const vdla::Config& prototype() {
  static const vdla::Config cfg{};
  return cfg;
}

/// The knobs in the space's order, with each config's value of it.
struct KnobDef {
  const char* name;
  int64_t (*get)(const VdlaConv2dConfig&);
};
const std::vector<KnobDef>& knob_defs() {
  static const std::vector<KnobDef> defs = {
      {"tile_oc", [](const VdlaConv2dConfig& c) { return int64_t{c.tile_oc}; }},
      {"tile_ic", [](const VdlaConv2dConfig& c) { return int64_t{c.tile_ic}; }},
      {"tile_h", [](const VdlaConv2dConfig& c) { return int64_t{c.tile_h}; }},
      {"tile_w", [](const VdlaConv2dConfig& c) { return int64_t{c.tile_w}; }},
      {"vthreads", [](const VdlaConv2dConfig& c) { return int64_t{c.vthreads}; }},
      {"vthread_axis", [](const VdlaConv2dConfig& c) { return int64_t{c.vthread_h ? 1 : 0}; }},
      {"wgt_resident", [](const VdlaConv2dConfig& c) { return int64_t{c.wgt_resident ? 1 : 0}; }},
  };
  return defs;
}

}  // namespace

VdlaConv2d vdla_conv2d_stages(const te::Tensor& out) {
  const std::optional<std::string> text = workload_of(out);
  KILN_ICHECK(text.has_value()) << "vdla_conv2d template: '" << out->name()
                                << "' carries no workload";
  const Workload w = Workload::parse(*text);
  KILN_ICHECK(w.compute == "vdla_conv2d") << "vdla_conv2d template: '" << out->name() << "' is a "
                                          << w.compute << ", not a vdla_conv2d";
  std::map<std::string, te::Tensor> by_name;
  std::vector<te::Tensor> todo{out};
  while (!todo.empty()) {
    te::Tensor t = todo.back();
    todo.pop_back();
    if (!by_name.emplace(t->name(), t).second || !t->is_compute()) continue;
    for (const te::Tensor& in : t->inputs()) todo.push_back(in);
  }
  auto stage = [&](const char* name) {
    auto it = by_name.find(name);
    KILN_ICHECK(it != by_name.end())
        << "vdla_conv2d template: no stage '" << name << "' under '" << out->name() << "'";
    return it->second;
  };
  VdlaConv2d op;
  op.data = stage("data");
  op.kernel = stage("kernel");
  op.bias = stage("bias");
  op.shift = stage("shift");
  op.data_pad = stage("data_pad");
  op.conv = stage("conv");
  op.biased = stage("biased");
  op.shr = stage("shr");
  op.clip_lo = stage("clip_lo");
  op.clip_hi = stage("clip_hi");
  op.out = out;
  const auto& d = w.inputs[0].shape;
  const auto& k = w.inputs[1].shape;
  op.shape.ic = int(d[0]) * 16;
  op.shape.h = int(d[1]);
  op.shape.w = int(d[2]);
  op.shape.oc = int(k[0]) * 16;
  op.shape.k = int(k[2]);
  op.shape.stride = int(std::get<int64_t>(w.attrs.at("stride")));
  op.shape.pad = int(std::get<int64_t>(w.attrs.at("pad")));
  op.relu = std::get<bool>(w.attrs.at("relu"));
  return op;
}

space::ConfigSpace vdla_conv2d_config_space(const te::Tensor& out) {
  const VdlaConv2d op = vdla_conv2d_stages(out);
  std::vector<VdlaConv2dConfig> fits = vdla_conv2d_space(op, 1, prototype());
  for (const VdlaConv2dConfig& c : vdla_conv2d_space(op, 2, prototype())) fits.push_back(c);
  const VdlaConv2dShape& s = op.shape;
  KILN_USER_CHECK(!fits.empty()) << "vdla_conv2d: no config of " << s.ic << "x" << s.h << "x" << s.w
                                 << " -> " << s.oc << " (kernel " << s.k << ", stride " << s.stride
                                 << ", pad " << s.pad << ") fits " << prototype().describe();
  space::ConfigSpace space;
  for (const KnobDef& k : knob_defs()) {
    std::set<int64_t> values;
    for (const VdlaConv2dConfig& c : fits) values.insert(k.get(c));
    // Both thread counts and both axes stay knobs of every space, so the space's shape (and the
    // cost model's knob features) is the same for every layer.
    if (std::string(k.name) == "vthreads") values = {1, 2};
    if (std::string(k.name) == "vthread_axis" || std::string(k.name) == "wgt_resident")
      values = {0, 1};
    space.define_knob(k.name, std::vector<int64_t>(values.begin(), values.end()));
  }
  return space;
}

VdlaConv2dConfig vdla_conv2d_config_of(const space::Config& config) {
  VdlaConv2dConfig c;
  c.tile_oc = int(config.knob("tile_oc"));
  c.tile_ic = int(config.knob("tile_ic"));
  c.tile_h = int(config.knob("tile_h"));
  c.tile_w = int(config.knob("tile_w"));
  c.vthreads = int(config.knob("vthreads"));
  c.vthread_h = config.knob("vthread_axis") == 1;
  c.wgt_resident = config.knob("wgt_resident") == 1;
  return c;
}

space::Config vdla_conv2d_point(const space::ConfigSpace& space, const VdlaConv2dConfig& c) {
  std::vector<int> positions;
  for (const KnobDef& k : knob_defs()) {
    const std::vector<std::vector<int64_t>>& cands = space.knob(k.name).candidates;
    const int64_t v = k.get(c);
    const auto it = std::find(cands.begin(), cands.end(), std::vector<int64_t>{v});
    KILN_USER_CHECK(it != cands.end()) << "vdla_conv2d: config " << c.to_string() << ": knob "
                                       << k.name << " has no value " << v << " in this space";
    positions.push_back(static_cast<int>(it - cands.begin()));
  }
  return space.from_positions(positions);
}

space::Config vdla_conv2d_default(const te::Tensor& out, const space::ConfigSpace& space,
                                  const target::Target&) {
  const VdlaConv2d op = vdla_conv2d_stages(out);
  for (int threads : {2, 1}) {
    const std::vector<VdlaConv2dConfig> cands = vdla_conv2d_candidates(op, threads, prototype());
    if (!cands.empty()) return vdla_conv2d_point(space, cands.front());
  }
  KILN_USER_ERROR() << "vdla_conv2d: no config fits " << prototype().describe();
  KILN_UNREACHABLE();
}

void schedule_vdla_conv2d_config(te::Schedule& s, const te::Tensor& out,
                                 const space::Config& config, const te::Tensor& output) {
  KILN_ICHECK(!output.defined() || output == out)
      << "vdla_conv2d takes no epilogue ('" << output->name() << "')";
  s = schedule_vdla_conv2d(vdla_conv2d_stages(out), vdla_conv2d_config_of(config), prototype());
}

topi::TunableTemplate conv2d_template() {
  return {"vdla_conv2d",
          {"vdla_conv2d"},
          vdla_conv2d_config_space,
          vdla_conv2d_default,
          schedule_vdla_conv2d_config};
}

void register_templates() {
  static std::once_flag once;
  std::call_once(once, [] { topi::register_tunable_template(conv2d_template()); });
}

}  // namespace kiln::vdla_compiler
