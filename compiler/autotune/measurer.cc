// The task's reference: seeded inputs (runtime::fill_uniform) and the output of its naive
// schedule, JIT-compiled on this machine, all in memory.
#include "compiler/autotune/measurer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/error.h"
#include "compiler/lower.h"
#include "deploy/runtime/random_fill.h"

namespace kiln::autotune {
namespace {

std::vector<int64_t> const_shape(const te::Tensor& t) {
  std::vector<int64_t> shape;
  for (const ir::Expr& d : t->shape()) shape.push_back(*ir::as_const_int(d));
  return shape;
}

}  // namespace

TaskReference compute_reference(const Task& task) {
  TaskReference ref;
  ref.input_seed = runtime::seed_of(task.key);
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const te::Tensor& t = task.inputs[i];
    KILN_USER_CHECK(t->dtype() == ir::kFloat32)
        << "tuning task '" << task.key << "': input '" << t->name() << "' is " << t->dtype().str()
        << "; the tuner measures float32 workloads";
    runtime::NDArray a = runtime::NDArray::empty(const_shape(t), runtime::kFloat32);
    runtime::fill_uniform(a, ref.input_seed + i);
    ref.inputs.push_back(std::move(a));
  }
  ref.output = runtime::NDArray::empty(const_shape(task.out), runtime::kFloat32);
  runtime::Function f = compiler::build(task.reference_schedule(), task.args(), "llvm", "reference")
                            .function("reference");
  std::vector<runtime::Arg> args(ref.inputs.begin(), ref.inputs.end());
  args.emplace_back(ref.output);
  f.call(args);
  const float* out = ref.output.data<float>();
  for (int64_t k = 0; k < ref.output.num_elements(); ++k)
    ref.max_abs = std::max<double>(ref.max_abs, std::fabs(out[k]));
  return ref;
}

void finish_record(records::MeasureRecord& record, const Task& task) {
  if (record.error == ErrorKind::kNone && !record.costs_s.empty()) {
    record.gflops = task.flops / record.cost() / 1e9;
  } else {
    record.costs_s.clear();
    record.gflops = 0;
    record.contended = false;
  }
  record.timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
}

}  // namespace kiln::autotune
