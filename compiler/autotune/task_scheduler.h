// Which task of a model gets the next trials (after Ansor's task scheduler, OSDI'20 section 6).
// A model's latency is the sum over its tasks of each task's time times the times the model calls
// it, and a budget of measurements spread evenly spends most of them where that sum no longer
// moves. The scheduler gives every task a first round (the Tuner measures the default config
// first), then each next round to the task whose expected drop of the model's latency per trial is
// largest: its calls times a blend of the recent slope of its best time and an optimistic guess
// (its best over its trials so far, or the gap to what similar tasks reach). A task whose best
// improved by no more than `min_gain` over its last `patience` trials gets no more, nor does a
// task past its trial cap or out of configs. It decides only; the caller measures
// (autotune::tune_tasks with the Tuner, or a test's fake timings) and reports back:
//
//   TaskScheduler s(tasks, {.budget = 600, .round = 16});
//   for (size_t i = 0; i < tasks.size(); ++i) s.add(i, seconds_in_the_log(i));  // resume
//   while (auto step = s.next()) {
//     TaskResult r = tuner.tune(task[step->task], history, step->trials);
//     s.add(step->task, r.costs_s);
//     if (r.trials < step->trials) s.exhausted(step->task);
//   }
//   s.estimated_latency_s();  // the model's, falling as the job runs
//
// Everything it decides follows from the measurements it was given, in order, so a run resumed
// from the record log continues where the killed one stopped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::autotune {

/// What the scheduler knows of a task before measuring it.
struct ScheduledTask {
  std::string key;
  /// Tasks of one group (the template) predict each other's speed: a task slower than its group's
  /// best by much is expected to gain much.
  std::string group;
  double flops = 0;    ///< per call
  int calls = 1;       ///< how many times one run of the model runs the task
  uint64_t space = 0;  ///< configs in its space: the most trials it can take
};

struct ScheduleOptions {
  /// Measurements over all tasks, those already in the log included. 0: no limit on the total
  /// (a run bounded by time, by early stopping and by the spaces).
  int budget = 0;
  /// false: the fixed split of `kiln tune --trials N`: each task in turn tuned to `trials` in one
  /// step, no early stopping.
  bool by_gain = true;
  /// by_gain: the most trials of one task (0: its space's size); fixed split: every task's.
  int trials = 0;
  int round = 16;  ///< trials per step and of each task's first round (the Tuner's batch)
  /// Each task's first round when not `round` (0): smaller when a pre-trained model chooses it.
  int first_round = 0;
  /// A task whose best time improved by at most `min_gain` (relative) over its last `patience`
  /// trials gets no more (0: never stop early).
  int patience = 32;
  double min_gain = 0.01;
  double alpha = 0.2;  ///< the weight of the recent slope against the optimistic guess
  /// A task whose throughput is below 1/beta of its group's best is expected to close that gap.
  double beta = 2;
};

/// One step: tune `task` until it has `trials` trials (the Tuner's `trials` for this call).
struct ScheduleStep {
  size_t task = 0;
  int trials = 0;
};

class TaskScheduler {
 public:
  /// kiln::Error for a negative budget or trial cap, a round or a task's calls below 1, or a task
  /// whose space is empty.
  TaskScheduler(std::vector<ScheduledTask> tasks, ScheduleOptions options);

  /// Task `task`'s next measurements, in order: each one's time in seconds, infinity for one that
  /// failed (first those of the record log, then each step's).
  void add(size_t task, const std::vector<double>& seconds);
  /// Task `task` cannot take more trials than it has (its explorer ran out of configs).
  void exhausted(size_t task);

  /// The next step, or none when the budget is spent or no task may take more trials.
  std::optional<ScheduleStep> next();

  /// The model's estimated latency: over tasks, calls times the best time, or, for a task without
  /// a successful measurement, its flops at the median throughput of its group's measured tasks
  /// (of all measured tasks when its group has none; 0 while nothing is measured).
  double estimated_latency_s() const;
  /// Tasks whose time in estimated_latency_s() is predicted, not measured.
  int predicted() const;
  int measurements() const { return measurements_; }  ///< over all tasks
  int trials(size_t task) const { return state_.at(task).trials; }
  double best_s(size_t task) const { return state_.at(task).best(); }
  /// Why the task takes no more trials ("" while it may): "stopped improving", "space
  /// exhausted", "trial cap".
  std::string done_reason(size_t task) const;
  const ScheduledTask& task(size_t task) const { return tasks_.at(task); }
  size_t size() const { return tasks_.size(); }
  const ScheduleOptions& options() const { return options_; }

 private:
  struct State {
    int trials = 0;
    /// best_after[k]: the best time after the task's first k + 1 trials (infinity before any
    /// success).
    std::vector<double> best_after;
    bool exhausted = false;
    double best() const;
    double best_at(int trials) const;  ///< after its first `trials` trials
  };
  int cap(size_t task) const;          ///< the most trials the task may have
  int first_round(size_t task) const;  ///< trials of its first round
  bool stopped_improving(size_t task) const;
  double predicted_s(size_t task) const;  ///< the task's time while it has no success
  double gain(size_t task) const;         ///< expected drop of the model's latency per trial

  std::vector<ScheduledTask> tasks_;
  ScheduleOptions options_;
  std::vector<State> state_;
  std::vector<size_t> first_order_;  ///< by calls x flops, largest first
  int first_ = 0;                    ///< the first round's trials (less when the budget is small)
  int measurements_ = 0;
};

}  // namespace kiln::autotune
