// The Measurer of `kiln tune`: builds a batch of candidates on this machine in parallel (each
// within a compile time limit), then measures them one at a time, so that no two measurements
// share the machine, each in a guarded kiln-runner child (deploy/runtime/measure_child.h) whose
// output is checked against the task's reference. A compile error, a build past its limit, a
// crash, a hang or a wrong answer is the candidate's record's error kind, never an exception.
//
//   records::RecordLog log = records::RecordLog::open("records/");
//   LocalMeasurer measurer(log, LocalMeasureOptions{.repeat = 5});
//   measurer.begin_task(task);                       // the reference, as .npy files
//   std::vector<records::MeasureRecord> recs = measurer.measure(task, candidates, /*seed=*/1);
//   // recs[i] is candidates[i]'s record, already in the log
//
// The reference's files and the candidates' libraries live in a work folder of this process per
// task, kept while the measurer lives (a task begun again reuses its reference) and removed with
// it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "compiler/autotune/measurer.h"
#include "compiler/autotune/task.h"
#include "records/record_log.h"

namespace kiln::autotune {

/// This machine as a record's device: the CPU model and the number of CPUs.
std::string host_device_fingerprint();

/// The device that measures for `target` on this machine, as a record's device: the host's
/// fingerprint for CPU targets, the GPU's description (runtime::DeviceAPI) for cuda and opencl
/// ones (kiln::Error, "no CUDA device: ...", where this machine has none), and for vdla the
/// VDLA's cycle model (runtime::vdla_device_description: the configuration, deterministic, one run
/// per measurement).
std::string local_device_fingerprint(const std::string& target);

/// How the LocalMeasurer builds and runs (the Tuner makes them from its TuneOptions).
struct LocalMeasureOptions {
  int build_threads = 0;        ///< candidates built at once; 0 = one per CPU
  double build_timeout_s = 60;  ///< per candidate build (past it: compile_timeout)
  // How each candidate runs (see deploy/runtime/kernel_runner.h).
  int repeat = 3;
  double min_repeat_ms = 20;
  double cooldown_ms = 0;
  bool flush_cache = false;
  int threads = 0;  ///< thread-pool size for the kernel; 0 = all CPUs
  /// Extra time a measurement may take to time disturbed repeats again (kernel_runner.h,
  /// "Contention"). After a contended measurement the next one gets only a tenth of it, until
  /// one comes clean: a build beside `kiln tune` slows it a little, not by this much per trial.
  double disturbed_retry_ms = 2000;
  double run_timeout_s = 10;  ///< per candidate, for the whole child
  /// Reference check: |out - ref| <= rtol * |ref| + atol_scale * max|ref| + 1e-7.
  double rtol = 1e-3;
  double atol_scale = 1e-4;
  std::string device = host_device_fingerprint();  ///< the records' device
};

class LocalMeasurer : public Measurer {
 public:
  /// Records are appended to `log`, which must outlive the measurer.
  LocalMeasurer(records::RecordStore& log, LocalMeasureOptions options);
  ~LocalMeasurer() override;
  LocalMeasurer(const LocalMeasurer&) = delete;
  LocalMeasurer& operator=(const LocalMeasurer&) = delete;

  void begin_task(const Task& task) override;
  /// kiln::InternalError when `task` is not the one of the last begin_task.
  std::vector<records::MeasureRecord> measure(const Task& task,
                                              const std::vector<Candidate>& candidates,
                                              uint64_t seed) override;

  const LocalMeasureOptions& options() const { return options_; }

 private:
  /// A task's reference on disk, in a folder of its own, where its candidates are built too.
  struct Reference {
    std::filesystem::path dir;
    std::vector<std::string> inputs;  ///< .npy files in dir
    std::string output;
    double max_abs = 0;
  };

  records::RecordStore& log_;
  LocalMeasureOptions options_;
  std::string task_key_;  ///< of the last begin_task ("" before the first)
  /// By task key: computed at a task's first begin_task and kept (removed with the measurer), so
  /// a task tuned in several steps (autotune::tune_tasks) computes its reference once.
  std::map<std::string, Reference> references_;
  const Reference* ref_ = nullptr;  ///< task_key_'s
  int next_file_ = 0;               ///< candidate libraries are named by a counter (never reused)
  bool last_contended_ = false;     ///< the last measurement ran out of its retry allowance
};

}  // namespace kiln::autotune
