// Where the tuning loop's candidates are built and measured. The Tuner (tuner.h) explores,
// lowers, dedupes and learns; a Measurer turns distinct lowered programs into records:
//
//   LocalMeasurer   (local_measurer.h)  builds on this machine in parallel and measures each
//                                       candidate in a guarded kiln-runner child (`kiln tune`);
//   FarmMeasurer    (server/)           hands builds to compiler workers and measurements to
//                                       device agents through the tracker (`kilnd`).
//
// Both check every candidate's output against the task's reference (TaskReference below: inputs
// generated from a seed, so a board makes the same ones without receiving them) and append each
// record to the record log themselves, durably, before measure() returns it: on the farm the
// tracker appends a result before acknowledging it to the agent, so an acknowledged measurement
// is never lost and never measured again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/ir/function.h"
#include "deploy/runtime/ndarray.h"
#include "records/record_log.h"

namespace kiln::autotune {

/// A task's inputs and the output of its naive schedule on them: what every candidate's output
/// must match. Input i is runtime::fill_input(input_seed + i, task.input_ranges[i]): uniform in
/// [-1, 1) for a float32 input, integers uniform in the input's range for an int8 / int32 one
/// (the VDLA's tasks, whose int8 output must match exactly).
struct TaskReference {
  uint64_t input_seed = 0;  ///< runtime::seed_of(task.key)
  std::vector<runtime::NDArray> inputs;
  runtime::NDArray output;
  double max_abs = 0;  ///< max |output|, scales the absolute tolerance
};

/// Computes the reference of `task` by JIT-compiling its reference schedule on this machine.
TaskReference compute_reference(const Task& task);

/// The tolerance of the reference check: |out - ref| <= rtol * |ref| + atol.
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

/// Completes a record whose error kind and costs are set: on success its GFLOP/s (task.flops
/// over the record's cost), on an error no costs; the timestamp is now.
void finish_record(records::MeasureRecord& record, const Task& task);

/// One distinct program to build and measure.
struct Candidate {
  uint64_t config_index = 0;
  std::string config;  ///< Config::str()
  ir::PrimFunc func;   ///< lowered, entry name "candidate"
};

/// The Tuner (tuner.h) sends each distinct program of a tune() call once and appends the other
/// records itself (configs that do not lower: compile_error; configs whose program equals one
/// measured: that measurement), so a Measurer sees only the candidates it must record.
class Measurer {
 public:
  virtual ~Measurer() = default;
  /// Called once by Tuner::tune before the first measure() of `task` (computes the reference).
  virtual void begin_task(const Task& task) = 0;
  /// Builds and measures each candidate, checks its output, and appends its record (target,
  /// device, task key, config, costs or error kind and message, gflops = task.flops / cost,
  /// timestamp, search_seed = `seed`) to the log before returning the records, in order. A
  /// candidate's failure is its record's error kind; only a failure of the measurer itself (a
  /// cancelled job, a lost log) throws.
  virtual std::vector<records::MeasureRecord> measure(const Task& task,
                                                      const std::vector<Candidate>& candidates,
                                                      uint64_t seed) = 0;
};

}  // namespace kiln::autotune
