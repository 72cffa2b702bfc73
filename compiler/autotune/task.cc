// Tasks: rebuilt from the workload; the key from the naive program's structural hash, the flop
// count from the compute.
#include "compiler/autotune/task.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/fnv1a.h"
#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/topi/tunable.h"
#include "compiler/topi/workload.h"
#include "compiler/vdla/conv2d_template.h"

namespace kiln::autotune {
namespace {

/// The placeholders `out` reads through its producers, in order of first appearance.
std::vector<te::Tensor> placeholders_of(const te::Tensor& out) {
  std::vector<te::Tensor> result, todo{out};
  std::set<const te::TensorNode*> seen;
  while (!todo.empty()) {
    te::Tensor t = todo.front();
    todo.erase(todo.begin());
    if (!seen.insert(t.get()).second) continue;
    if (!t->is_compute()) {
      result.push_back(t);
      continue;
    }
    for (const te::Tensor& in : t->inputs()) todo.push_back(in);
  }
  return result;
}

int64_t extent_of(const ir::Expr& e, const std::string& what) {
  auto v = ir::as_const_int(e);
  KILN_USER_CHECK(v.has_value()) << "tuning task: " << what << " must have a constant extent";
  return *v;
}

/// FNV-1a over the space's knob names and candidates: a config index means the same config
/// exactly when this is equal.
uint64_t space_hash(const space::ConfigSpace& space) {
  uint64_t h = kFnv1a64Basis;
  auto mix = [&](uint64_t v) { h = fnv1a64(&v, sizeof v, h); };
  for (const space::Knob& k : space.knobs()) {
    for (char c : k.name) mix(static_cast<unsigned char>(c));
    mix(k.candidates.size());
    for (const auto& c : k.candidates) {
      mix(c.size());
      for (int64_t v : c) mix(static_cast<uint64_t>(v));
    }
  }
  return h;
}

/// The template called `name`: topi's own, or one a back-end above topi registers there (the
/// VDLA's, which are registered here first).
const topi::TunableTemplate& template_named(const std::string& name) {
  vdla_compiler::register_templates();
  return topi::tunable_template(name);
}

}  // namespace

Task Task::make(const std::string& template_name, const te::Tensor& out,
                const std::string& target) {
  KILN_ICHECK(out.defined()) << "tuning task '" << template_name << "': undefined output";
  const std::optional<std::string> workload = topi::workload_of(out);
  KILN_ICHECK(workload.has_value())
      << "tuning task '" << template_name << "': '" << out->name()
      << "' carries no workload; a task is made from the output of a tunable topi compute";
  return from_workload(template_name, *workload, target);
}

Task Task::from_workload(const std::string& template_name, const std::string& workload_json,
                         const std::string& target) {
  const topi::TunableTemplate& tmpl = template_named(template_name);
  const topi::Workload w = topi::Workload::parse(workload_json);
  topi::check_template_compute(tmpl, w.compute);
  const target::Target tgt = target::Target::parse(target);
  Task t;
  t.template_name = template_name;
  t.workload = w.json();
  t.target = target;
  t.out = topi::compute_from_workload(w);
  t.inputs = placeholders_of(t.out);
  t.input_ranges = topi::input_ranges(w, t.inputs);
  t.space = tmpl.space(t.out);
  t.default_config = tmpl.default_config(t.out, t.space, tgt);
  double points = 1;
  std::string shape;
  for (const ir::Expr& d : t.out->shape()) {
    const int64_t n = extent_of(d, "'" + t.out->name() + "'");
    points *= static_cast<double>(n);
    shape += (shape.empty() ? "" : "x") + std::to_string(n);
  }
  // The reduction's stage: the output, or (an output that is an epilogue, as vdla_conv2d's clip
  // and cast) the first producer that reduces.
  te::Tensor reducer = t.out;
  for (std::vector<te::Tensor> todo{t.out}; !todo.empty() && reducer->reduce_axis.empty();) {
    te::Tensor x = todo.front();
    todo.erase(todo.begin());
    if (!x->is_compute()) continue;
    if (!x->reduce_axis.empty()) reducer = x;
    for (const te::Tensor& in : x->inputs()) todo.push_back(in);
  }
  double reduce_points = 1, reduce = 1;
  for (const ir::Expr& d : reducer->shape())
    reduce_points *= static_cast<double>(extent_of(d, "'" + reducer->name() + "'"));
  for (const auto& r : reducer->reduce_axis)
    reduce *= static_cast<double>(extent_of(r->dom.extent, "a reduction"));
  t.flops = 2 * (reducer->reduce_axis.empty() ? points : reduce_points) * reduce;
  const ir::PrimFunc naive = compiler::lower(t.reference_schedule(), t.args(), "task");
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(ir::structural_hash(naive) ^ space_hash(t.space)));
  t.key = template_name + ":" + shape + ":" + hash;
  return t;
}

std::vector<te::Tensor> Task::args() const {
  std::vector<te::Tensor> a = inputs;
  a.push_back(out);
  return a;
}

te::Schedule Task::schedule(const space::Config& config) const {
  te::Schedule s = te::create_schedule({out});
  template_named(template_name).schedule(s, out, config, out);
  return s;
}

bool Task::on_gpu() const { return target::Target::parse(target).is_gpu(); }

bool Task::on_vdla() const { return target::Target::parse(target).kind == TargetKind::kVdla; }

ir::PrimFunc Task::lower(const space::Config& config) const {
  if (on_vdla()) return compiler::lower_vdla(schedule(config), args(), "candidate");
  if (!on_gpu()) return compiler::lower(schedule(config), args(), "candidate");
  return compiler::lower_device_program(schedule(config), args(), "candidate",
                                        target::Target::parse(target));
}

ir::PrimFunc Task::lower_for_features(const space::Config& config) const {
  if (on_vdla()) return lower(config);
  return compiler::lower_for_analysis(schedule(config), args(), "candidate",
                                      target::Target::parse(target));
}

te::Schedule Task::reference_schedule() const { return te::create_schedule({out}); }

}  // namespace kiln::autotune
