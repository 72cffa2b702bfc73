// The task's reference: seeded inputs (runtime::fill_uniform) and the output of its naive
// schedule, JIT-compiled on this machine, all in memory.
#include "compiler/autotune/measurer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/error.h"
#include "compiler/lower.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/random_fill.h"

namespace kiln::autotune {
namespace {

std::vector<int64_t> const_shape(const te::Tensor& t) {
  std::vector<int64_t> shape;
  for (const ir::Expr& d : t->shape()) shape.push_back(*ir::as_const_int(d));
  return shape;
}

/// The runtime dtype of a tensor's element type.
KilnDType runtime_dtype(const te::Tensor& t) { return runtime::parse_dtype(t->dtype().str()); }

/// |a[k]| as a double, for the element types a task's output may have.
double abs_at(const runtime::NDArray& a, int64_t k) {
  const KilnDType t = a.dtype();
  if (t.code == kKilnFloat && t.bits == 32) return std::fabs(a.data<float>()[k]);
  if (t.code == kKilnInt && t.bits == 8) return std::fabs(double(a.data<int8_t>()[k]));
  if (t.code == kKilnInt && t.bits == 32) return std::fabs(double(a.data<int32_t>()[k]));
  KILN_USER_ERROR() << "a tuning task's output is float32, int8 or int32, not "
                    << runtime::dtype_to_string(t);
  KILN_UNREACHABLE();
}

}  // namespace

TaskReference compute_reference(const Task& task) {
  TaskReference ref;
  ref.input_seed = runtime::seed_of(task.key);
  KILN_ICHECK(task.input_ranges.size() == task.inputs.size())
      << "tuning task '" << task.key << "': one input range per input";
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const te::Tensor& t = task.inputs[i];
    // Integer inputs (an int8 convolution's uint8 data, its int8 weights) are generated in
    // their task's value ranges.
    const ir::DataType dt = t->dtype();
    const bool ok =
        dt == ir::kFloat32 || ((dt.is_int() || dt.is_uint()) && dt.bits() <= 32 && dt.lanes() == 1);
    KILN_USER_CHECK(ok)
        << "tuning task '" << task.key << "': input '" << t->name() << "' is " << dt.str()
        << "; the tuner measures float32 workloads and integer ones (up to 32 bits)";
    runtime::NDArray a = runtime::NDArray::empty(const_shape(t), runtime_dtype(t));
    runtime::fill_input(a, ref.input_seed + i, task.input_ranges[i]);
    ref.inputs.push_back(std::move(a));
  }
  ref.output = runtime::NDArray::empty(const_shape(task.out), runtime_dtype(task.out));
  runtime::Function f = compiler::build(task.reference_schedule(), task.args(), "llvm", "reference")
                            .function("reference");
  std::vector<runtime::Arg> args(ref.inputs.begin(), ref.inputs.end());
  args.emplace_back(ref.output);
  f.call(args);
  for (int64_t k = 0; k < ref.output.num_elements(); ++k)
    ref.max_abs = std::max(ref.max_abs, abs_at(ref.output, k));
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
