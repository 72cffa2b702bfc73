// The tuning loop (the paper's section 5): for one task, an explorer proposes a batch of configs,
// each is lowered, the distinct programs of the batch go to a Measurer (measurer.h), which builds
// and measures them (its output checked against the task's reference) and appends each
// measurement to the record log, and the cost model is refit on everything measured so far before
// the next batch. The default Measurer is a LocalMeasurer (local_measurer.h): parallel builds with
// a compile time limit, then one guarded child process per measurement on this machine.
//
//   records::RecordLog log = records::RecordLog::open("records/");
//   Tuner tuner(log, TuneOptions{.trials = 200});
//   TaskResult r = tuner.tune(task);   // resumes from the log; never measures a config twice
//
//   FarmMeasurer farm(...);              // or any other Measurer, which then appends the records
//   Tuner farm_tuner(log, options, &farm);
//
// Identical lowered programs (equal structural hash) are sent to the measurer once; a config whose
// program equals one already measured gets that measurement, recorded by the Tuner. Nothing a
// candidate does (a compile error, a crash, a hang, a wrong answer) stops the loop: it becomes the
// record's error kind. Every record of a tune() call is appended exactly once, by the measurer or
// (for configs that do not lower, and reused measurements) by the Tuner.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/autotune/cost_model.h"
#include "compiler/autotune/local_measurer.h"
#include "compiler/autotune/measurer.h"
#include "compiler/autotune/task.h"
#include "records/record_log.h"

namespace kiln::autotune {

struct TuneOptions {
  int trials = 200;  ///< measured configs per task (counting those already in the log)
  int batch = 16;    ///< configs per round (the model is refit between rounds)
  /// "xgb" (the cost model guiding simulated annealing), "random", "grid" or "ga".
  std::string explorer = "xgb";
  /// The model's features: "loop" (of the lowered loop program) or "knob" (the config's values).
  std::string features = "loop";
  /// The kind of cost model the "xgb" explorer's search is guided by (cost_model.h's kinds).
  std::string cost_model = "xgb";
  /// A model pre-trained on the log's other records (log_model.h; loop features; must outlive
  /// the Tuner): each task starts from a copy of it, adapted to the task's records as they come,
  /// so even the first round is chosen by a model. Null: every task's model learns from its own
  /// records and those of the `history` tasks alone.
  const CostModel* prior = nullptr;
  uint64_t seed = 1;  ///< of the explorer; recorded with every measurement
  /// Measure the template's default config first (so the best is never worse than an untuned
  /// build); off only to study the explorers alone (bench/tuning_bench.cc).
  bool default_first = true;
  /// How the Tuner's own LocalMeasurer builds and runs each candidate; unused when the Tuner is
  /// given a Measurer.
  LocalMeasureOptions local;
  /// Called after every round.
  std::function<void(const struct TuneProgress&)> progress;
};

struct TuneProgress {
  std::string task_key;
  int trials_done = 0;  ///< measured configs of the task, earlier runs included
  int trials_total = 0;
  double best_gflops = 0;  ///< best so far (0 before any success)
  double elapsed_s = 0;    ///< of this call
  double eta_s = 0;        ///< at the pace of this call
  /// Each measurement's time of this round in seconds, in order; infinity for one that failed.
  std::vector<double> costs_s;
};

struct TaskResult {
  std::string task_key;
  int trials = 0;        ///< measured configs in the log after the call
  int measured_now = 0;  ///< measured by this call
  int reused = 0;        ///< of those, programs equal to one already measured (not run again)
  double best_gflops = 0;
  uint64_t best_config = 0;
  bool has_best = false;
  std::map<std::string, int> errors;  ///< error kind -> count, of this call
  int contended = 0;  ///< of this call's measurements, those timed while the CPU was shared
  /// Best GFLOP/s after each measurement of this call, in order (the tuning curve).
  std::vector<double> curve;
  /// Where this call's time went, over its `rounds` batches: choosing the configs (the search:
  /// the explorer, with the features of every config the model scores, and learning: the
  /// features of what was measured, the model's refits) against measuring them (lowering each
  /// config of the batch, and the measurer's builds and runs).
  double search_s = 0, measure_s = 0;
  int rounds = 0;
  int scored = 0;  ///< configs the cost model scored (the search's features), repeats included
};

class Tuner {
 public:
  /// Candidates are measured by `measurer` (which must outlive the Tuner and append to `log`);
  /// null: by a LocalMeasurer made from `options`, owned by the Tuner.
  Tuner(records::RecordStore& log, TuneOptions options, Measurer* measurer = nullptr);
  /// The callback after every round (replaces options.progress), e.g. to name the next task.
  void set_progress(std::function<void(const TuneProgress&)> progress) {
    options_.progress = std::move(progress);
  }

  /// Tunes `task` until the log holds `trials` measurements of it (0: options.trials), or its
  /// space is exhausted. Records of the tasks in `history` (other tasks on the same target)
  /// warm-start the cost model (transfer learning); they must outlive the call. A call resumes
  /// from the log: a task can be tuned in steps of a growing `trials` (autotune::tune_tasks), each
  /// step rebuilding the explorer's visited set and refitting the model from the records (their
  /// features are kept by the Tuner, so a step costs one model fit more than a round).
  TaskResult tune(const Task& task, const std::vector<const Task*>& history = {}, int trials = 0);

 private:
  records::RecordStore& log_;
  TuneOptions options_;
  std::unique_ptr<Measurer> owned_measurer_;  ///< the LocalMeasurer, when none was given
  Measurer* measurer_;
  /// Feature vectors by task key and config, across tune() calls: each config is lowered for
  /// its features at most once, also when later tasks read its records for transfer.
  std::unordered_map<std::string, std::unordered_map<uint64_t, std::vector<float>>> features_;
};

/// The graph build's ConfigSource from a record log: each task's best measured config for the
/// target; for a task never measured (or measured only with errors) the config `model` (a model
/// pre-trained on the log, log_model.h; null: none) predicts best (zero-shot) where the log shows
/// tuning gains much over the template's defaults (`template_gains`, the model's
/// LogModelInfo's, at least kZeroShotMinGain), else the template's default (also when none of the
/// model's picks lowers).
class LogConfigSource : public ConfigSource {
 public:
  explicit LogConfigSource(const records::RecordStore& log, const CostModel* model = nullptr,
                           std::map<std::string, double> template_gains = {})
      : log_(log), model_(model), gains_(std::move(template_gains)) {}
  /// With the model of `target` kept on the log's shelf (log_model.h's kept_model), when there is
  /// one: what `kiln compile --records DIR` builds with.
  static LogConfigSource with_kept_model(const records::RecordStore& log,
                                         const std::string& target);
  space::Config choose(const Task& task) override;
  int tuned() const { return tuned_; }          ///< tasks that got a measured config
  int predicted() const { return predicted_; }  ///< tasks that got the model's choice
  int defaults() const { return defaults_; }    ///< tasks that fell back to the default

 private:
  const records::RecordStore& log_;
  std::shared_ptr<const CostModel> owned_;  ///< with_kept_model's
  const CostModel* model_;
  std::map<std::string, double> gains_;
  int tuned_ = 0, predicted_ = 0, defaults_ = 0;
};

}  // namespace kiln::autotune
