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
  /// How the tasks are tuned (autotune/tune_tasks.h): the Tuner's options (trials, explorer,
  /// batch, seed, how the local measurer runs: its `device` is set here from the target), a
  /// budget and / or time limit for the TaskScheduler (else each task to its trials in turn),
  /// and the callbacks after every round and when a task gets no more trials.
  autotune::TasksTuneOptions tuning;
  /// The final build (fusion, layouts, progress); its `configs` is the log's best.
  BuildOptions build;
  /// Called once the tasks are known, with what one run of the model calls of each.
  std::function<void(const std::vector<autotune::Task>&, const std::vector<int>& calls)> on_tasks;
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
