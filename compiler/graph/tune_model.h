// Tuning a whole model on this machine: the loop behind `kiln tune` and the Python package's
// kiln.tune. It extracts the model's tuning tasks with how often the model runs each, tunes them
// into the record log (autotune::tune_tasks: each to --trials in turn, or a budget spread by the
// task scheduler; resuming what an earlier run left: nothing is measured twice), then builds the
// bundle with each task's best config. What to show the user goes through the callbacks, so the CLI
// draws its bars and Python its own.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "compiler/autotune/tune_tasks.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_build.h"
#include "deploy/runtime/bundle.h"

namespace kiln::graph {

struct ModelTuneOptions {
  std::string target = "llvm -mcpu=native";
  std::string records = "kiln-records";  ///< the record log's folder, created or resumed
  /// trials, explorer, batch, seed and how the local measurer runs (its `device` is set here from
  /// the target); its `progress` is replaced by `on_progress` below. Its `trials` is each task's
  /// without a budget or time limit (the fixed split).
  autotune::TuneOptions tune;
  /// A total budget of measurements and / or a time limit in seconds (0: none) spread over the
  /// tasks by the TaskScheduler (autotune/task_scheduler.h), each task capped at max_trials
  /// (0: its space) and stopped early after `patience` trials without a gain over 1% (0: never).
  int budget = 0;
  double time_s = 0;
  int max_trials = 0;
  int patience = 32;
  /// The final build (fusion, layouts, progress); its `configs` is the log's best.
  BuildOptions build;
  /// Called once the tasks are known, with what one run of the model calls of each.
  std::function<void(const std::vector<autotune::Task>&, const std::vector<int>& calls)> on_tasks;
  /// Called after every round of task `index` (of `total`), with the model's estimated latency.
  std::function<void(size_t index, size_t total, const autotune::Task&,
                     const autotune::TuneProgress&, const autotune::ScheduleStatus&)>
      on_progress;
  /// Called when task `index` gets no more trials (`why`: TaskScheduler::done_reason, or why the
  /// run ended), `result` summing its steps of this run.
  std::function<void(size_t index, size_t total, const autotune::Task&, const autotune::TaskResult&,
                     const std::string& why, const autotune::ScheduleStatus&)>
      on_task_done;
};

struct ModelTuneReport {
  size_t tasks = 0;
  autotune::TasksTuneReport tuning;
  int tuned = 0;     ///< tunable operators built with a measured config
  int defaults = 0;  ///< those built with their template's default
  BuildReport build;
};

/// Tunes `g`'s tasks for options.target into options.records, then builds the bundle with the
/// best configs. kiln::Error for a target that does not parse or a log that cannot be opened.
runtime::Bundle tune_model(const Graph& g, const ModelTuneOptions& options,
                           ModelTuneReport* report = nullptr);

}  // namespace kiln::graph
