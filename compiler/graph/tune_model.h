// Tuning a whole model on this machine: the loop behind `kiln tune` and the Python package's
// kiln.tune. It extracts the model's tuning tasks with how often the model runs each, tunes them
// into the record log (autotune::tune_tasks: each to --trials in turn, or a budget spread by the
// task scheduler; resuming what an earlier run left: nothing is measured twice), starting from the
// cost model pre-trained on the whole log (autotune/log_model.h; kept beside it and trained again
// after the run once the records grew), then builds the bundle with each task's best config (or
// the model's zero-shot pick for a task with no successful measurement). What to show the user goes
// through the callbacks, so the CLI draws its bars and Python its own.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "compiler/autotune/log_model.h"
#include "compiler/autotune/tune_tasks.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_build.h"
#include "deploy/runtime/bundle.h"

namespace kiln::graph {

struct ModelTuneOptions {
  std::string target = "llvm -mcpu=native";
  std::string records = "kiln-records";  ///< the record log's folder, created or resumed
  /// How the tasks are tuned (autotune/tune_tasks.h): the Tuner's options (trials, explorer,
  /// batch, seed, how the local measurer runs: its `device` is set here from the target), a
  /// budget and / or time limit for the TaskScheduler (else each task to its trials in turn),
  /// and the callbacks after every round and when a task gets no more trials.
  autotune::TasksTuneOptions tuning;
  /// The final build (fusion, layouts, progress); its `configs` is the log's best.
  BuildOptions build;
  /// Start from the cost model pre-trained on the log's records of the target (off: each task's
  /// model learns only from this model's records). Its kind is tuning.tune.cost_model.
  bool pretrained = true;
  /// Called with the pre-trained model's state before tuning (kept, trained now, or none).
  std::function<void(const autotune::LogModelReport&)> on_model;
  /// Called once the tasks are known, with what one run of the model calls of each.
  std::function<void(const std::vector<autotune::Task>&, const std::vector<int>& calls)> on_tasks;
};

struct ModelTuneReport {
  size_t tasks = 0;
  autotune::LogModelReport model;  ///< the pre-trained model tuning started from
  autotune::LogModelReport after;  ///< the model after the run (trained again when it grew)
  autotune::TasksTuneReport tuning;
  int tuned = 0;      ///< tunable operators built with a measured config
  int predicted = 0;  ///< those built with the model's zero-shot config
  int defaults = 0;   ///< those built with their template's default
  BuildReport build;
};

/// Tunes `g`'s tasks for options.target into options.records, then builds the bundle with the
/// best configs. kiln::Error for a target that does not parse or a log that cannot be opened.
runtime::Bundle tune_model(const Graph& g, const ModelTuneOptions& options,
                           ModelTuneReport* report = nullptr);

}  // namespace kiln::graph
