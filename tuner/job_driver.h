// One farm job, driven to its bundle in a process of its own (kiln-tuner): the model is imported
// (and validated), its tasks extracted and tuned by autotune::tune_tasks through kilnd
// (FarmMeasurer, FarmRecords): each to the job's trials, or under its budget / time limit where
// the model gains most; then the bundle is built with each task's best config and uploaded.
// Every step is announced to kilnd as the job's phase first, so a crash in it is reported with
// where it happened ("the compiler crashed on this model (SIGSEGV) while folding constants").
//
//   FarmClient client(server, tls_ca, token, job, secret);
//   JobDriver(client).run();   // throws kiln::Error for the model's faults, Stopped, ...
#pragma once

#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/autotune/tune_tasks.h"
#include "tuner/farm_client.h"

namespace kiln::tuner {

class JobDriver {
 public:
  explicit JobDriver(FarmClient& client) : client_(client) {}
  /// Drives the job to an uploaded bundle. Throws kiln::Error when the model cannot be compiled
  /// (a refused operator or shape, no device took a request), Stopped when the job was cancelled
  /// or kilnd stops, kiln::SystemError / InternalError otherwise.
  void run();

 private:
  /// Announces `phase` to kilnd and enters it.
  void enter(const std::string& phase);
  /// The same for a phase that comes with other progress (`progress.phase()` is the phase).
  void enter(v1::DriverProgress progress);

  FarmClient& client_;
  std::string name_;  ///< the job's model name
};

/// How the job's tasks are tuned: the fixed split (each task to `trials`), or, with a budget or a
/// time left, the task scheduler with `trials` as each task's cap (0: none) and the job's early
/// stop; the explorer, batch and seed kilnd gives every job. `spent_s`: seconds since kilnd told
/// the time left (importing the model), which the tuning no longer has.
autotune::TasksTuneOptions tuning_options(const v1::DriverJob& job, double spent_s);

/// The progress that enters the tuning phase with the job's `tasks`, which kilnd then lets it tune.
v1::DriverProgress tuning_progress(const std::vector<autotune::Task>& tasks);

/// A test hook: KILN_DRIVER_FAULT="MODEL_NAME:ACTION:PHASE[;...]" makes the driver of the job whose
/// model is called MODEL_NAME, on entering a phase that starts with PHASE, "crash" (SIGSEGV),
/// "hang" (sleep until killed), "oom" (allocate until the memory limit) or "recurse" (recurse until
/// the stack overflows). Lets the farm's tests show what kilnd does when the compiler crashes,
/// hangs, runs out of memory or out of stack on a model.
void maybe_inject_fault(const std::string& model_name, const std::string& phase);

}  // namespace kiln::tuner
