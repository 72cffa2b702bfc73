// Tuning a whole model on this machine: the loop behind `kiln tune` and the Python package's
// kiln.tune. It extracts the model's tuning tasks, tunes each into the record log (resuming what
// an earlier run left: nothing is measured twice), then builds the bundle with each task's best
// config. What to show the user goes through the callbacks, so the CLI draws its bars and Python
// its own.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_build.h"
#include "deploy/runtime/bundle.h"

namespace kiln::graph {

struct ModelTuneOptions {
  std::string target = "llvm -mcpu=native";
  std::string records = "kiln-records";  ///< the record log's folder, created or resumed
  /// trials, explorer, batch, seed and how the local measurer runs (its `device` is set here from
  /// the target); its `progress` is replaced by `on_progress` below.
  autotune::TuneOptions tune;
  /// The final build (fusion, layouts, progress); its `configs` is the log's best.
  BuildOptions build;
  /// Called once the tasks are known.
  std::function<void(size_t total)> on_tasks;
  /// Called after every round of task `index` (of `total`).
  std::function<void(size_t index, size_t total, const autotune::Task&,
                     const autotune::TuneProgress&)>
      on_progress;
  /// Called when task `index` is done.
  std::function<void(size_t index, size_t total, const autotune::Task&,
                     const autotune::TaskResult&)>
      on_task_done;
};

struct ModelTuneReport {
  size_t tasks = 0;
  int tuned = 0;     ///< tunable operators built with a measured config
  int defaults = 0;  ///< those built with their template's default
  BuildReport build;
};

/// Tunes `g`'s tasks for options.target into options.records, then builds the bundle with the
/// best configs. kiln::Error for a target that does not parse or a log that cannot be opened.
runtime::Bundle tune_model(const Graph& g, const ModelTuneOptions& options,
                           ModelTuneReport* report = nullptr);

}  // namespace kiln::graph
