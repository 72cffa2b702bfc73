// Tuning a model's tasks under one budget: the TaskScheduler (task_scheduler.h) picks the task and
// the trial count of each step, the Tuner measures it into the record log. The loop of `kiln tune`
// and Python's kiln.tune (graph::tune_model), free of the graph so that a test drives it with a
// fake Measurer.
//
//   TasksTuneOptions o;
//   o.budget = 600;                         // measurements over all tasks; or o.time_s
//   TasksTuneReport r = tune_tasks(tasks, calls, log, o);
//
// With neither a budget nor a time limit it is the fixed split: each task tuned in turn to
// tune.trials, as `kiln tune --trials N`. Everything starts from the record log: a run that was
// killed resumes, counting the log's measurements against the budget, and measures nothing twice.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/autotune/task_scheduler.h"
#include "compiler/autotune/tuner.h"
#include "records/record_store.h"

namespace kiln::autotune {

/// Where the whole model stands, after each round.
struct ScheduleStatus {
  double estimated_latency_s = 0;  ///< TaskScheduler::estimated_latency_s
  int predicted = 0;               ///< tasks whose time in it is predicted, not measured
  int measurements = 0;            ///< in the log, over all tasks
  int measured_now = 0;            ///< of those, by this run
  int budget = 0;                  ///< 0: none
  double elapsed_s = 0;            ///< of this run
};

struct TasksTuneOptions {
  /// The Tuner's options. Its `trials`: each task's in the fixed split; ignored under a budget or
  /// a time limit (there, max_trials caps a task).
  TuneOptions tune;
  int budget = 0;      ///< measurements over all tasks, the log's included; 0: none
  double time_s = 0;   ///< no step starts after this many seconds of the run; 0: no limit
  int max_trials = 0;  ///< under a budget or time limit: the most trials of a task (0: its space)
  /// Under a budget or time limit, each task's first round: 0 is the batch, or a quarter of it
  /// (at least 1) when a pre-trained model (tune.prior) chooses it: its picks are good enough
  /// that a few show where a task stands, and the scheduler's later rounds go where gains are.
  int first_round = 0;
  /// Early stopping under a budget or time limit (ScheduleOptions::patience, min_gain).
  int patience = 32;
  double min_gain = 0.01;
  /// Before each step of task `index` (its next trials).
  std::function<void(size_t index, const Task&)> on_step;
  /// After every round of task `index`.
  std::function<void(size_t index, const Task&, const TuneProgress&, const ScheduleStatus&)>
      on_progress;
  /// When task `index` gets no more trials (at the latest when the run ends); `result` sums its
  /// steps of this run.
  std::function<void(size_t index, const Task&, const TaskResult& result, const std::string& why,
                     const ScheduleStatus&)>
      on_task_done;
};

struct TasksTuneReport {
  std::vector<TaskResult> results;  ///< per task, its steps of this run summed
  std::vector<std::string> why;     ///< per task, why it got no more trials (or "budget spent")
  ScheduleStatus status;            ///< at the end
  std::string ended;                ///< "budget spent", "time limit" or "every task done"
};

/// Tunes `tasks` (`calls[i]`: how many times one run of the model runs task i) into `log`.
/// Candidates are measured by `measurer` (null: the Tuner's LocalMeasurer). kiln::Error for bad
/// options or calls of another length than tasks.
TasksTuneReport tune_tasks(const std::vector<Task>& tasks, const std::vector<int>& calls,
                           records::RecordStore& log, const TasksTuneOptions& options,
                           Measurer* measurer = nullptr);

}  // namespace kiln::autotune
