#include "tuner/farm_measurer.h"

#include "deploy/runtime/npy.h"

namespace kiln::tuner {
namespace {

v1::TensorSpec spec_of(const runtime::NDArray& a) {
  v1::TensorSpec s;
  s.set_dtype(runtime::dtype_to_string(a.dtype()));
  for (int64_t d : a.shape()) s.add_shape(d);
  return s;
}

}  // namespace

void FarmMeasurer::begin_task(const autotune::Task& task) {
  const autotune::TaskReference ref = autotune::compute_reference(task);
  batch_ = {};
  v1::TaskRef* t = batch_.mutable_task();
  t->set_task_key(task.key);
  t->set_target(task.target);
  t->set_template_name(task.template_name);
  t->set_workload(task.workload);
  batch_.set_flops(task.flops);
  for (size_t i = 0; i < ref.inputs.size(); ++i) {
    v1::TensorSpec s = spec_of(ref.inputs[i]);
    if (const auto& r = task.input_ranges[i]) {
      s.set_low(r->low);
      s.set_high(r->high);
    }
    *batch_.add_inputs() = std::move(s);
  }
  *batch_.mutable_output() = spec_of(ref.output);
  batch_.set_reference(runtime::serialize_npy(ref.output));
  batch_.set_input_seed(ref.input_seed);
  // The local tuner's check (TuneOptions rtol, atol_scale); an integer output (the VDLA's int8)
  // exactly: no tolerance at all is the runtime's default (atol 1e-5, rtol 1e-4), under which
  // integers that differ by one never pass.
  if (task.out->dtype().is_float()) {
    batch_.set_rtol(1e-3);
    batch_.set_atol(1e-4 * ref.max_abs + 1e-7);
  }
}

std::vector<records::MeasureRecord> FarmMeasurer::measure(
    const autotune::Task&, const std::vector<autotune::Candidate>& candidates, uint64_t seed) {
  v1::MeasureBatchRequest req = batch_;
  req.set_search_seed(seed);
  for (const autotune::Candidate& c : candidates) {
    v1::Config* cfg = req.add_configs();
    cfg->set_index(c.config_index);
    cfg->set_text(c.config);
  }
  return client_.measure(std::move(req));
}

}  // namespace kiln::tuner
