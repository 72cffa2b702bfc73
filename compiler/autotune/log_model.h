// A cost model per target that learns from the whole record log: every record of the target (every
// task, every model, every job), read through the loop features of its config (features.h: one
// fixed length, whatever the task's space), each task its own ranking group. The log says how to
// rebuild each task (RecordStore::note_task, a TaskSource), so records measured for other models
// still yield features. The trained model is kept on the log's shelf (RecordStore::put_shelf:
// RocksDB beside the records locally, kilnd's log for the farm), with the number of records it
// learned from, and trained again once the target's records have grown past `retrain_growth`.
//
//   LogModelReport r;
//   auto prior = pretrained_model(log, "llvm -mcpu=znver4", {}, &r);  // kept, or trained and kept
//   TuneOptions o; o.prior = prior.get();   // the Tuner adapts it to each task
//   LogConfigSource source(log, prior.get());  // zero-shot: configs for tasks never measured
//
// What it costs: one lower_for_features per record used (~0.1 ms on the CPU templates, ~1 ms on
// GPU ones), at most max_rows_per_task of each task, and one fit.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/autotune/cost_model.h"
#include "compiler/autotune/task.h"
#include "records/record_store.h"

namespace kiln::autotune {

struct LogModelOptions {
  std::string kind = "xgb";  ///< cost_model.h's kinds
  /// Records of one task the model learns from, at most: its fastest quarter of them and an even
  /// spread of the rest (a task tuned for thousands of trials must not drown the others).
  size_t max_rows_per_task = 256;
  /// The kept model is trained again once the target has this fraction more records than it
  /// learned from (and at least min_new_records more).
  double retrain_growth = 0.1;
  size_t min_new_records = 16;
  /// Progress of reading the records' features: (records done, records to read).
  std::function<void(size_t, size_t)> on_features;
};

/// What the kept model learned from (its shelf entry's header).
struct LogModelInfo {
  std::string kind;
  std::string target;
  size_t records = 0;         ///< the target's records in the log when it was trained
  size_t rows = 0;            ///< of those, the ones it learned from
  size_t tasks = 0;           ///< tasks it learned from
  int64_t trained_at_ms = 0;  ///< milliseconds since the Unix epoch
  /// Per template, what tuning gained over its default config in the log: the median over its
  /// tasks (those with the default's record and a best) of default time / best time. Where it is
  /// small (the CPU templates' defaults are near their tuned configs) a zero-shot pick risks more
  /// than it can win; see kZeroShotMinGain.
  std::map<std::string, double> template_gains;
};

/// Zero-shot configs are chosen only for templates whose tuning gained at least this much over
/// their defaults in the log the model learned from (LogModelInfo::template_gains); elsewhere, and
/// for templates it never saw, the default stays.
inline constexpr double kZeroShotMinGain = 1.25;

struct LogModelReport {
  LogModelInfo info;         ///< the model returned (empty when none)
  bool trained_now = false;  ///< false: the kept model was current
  size_t skipped_tasks = 0;  ///< tasks whose source no longer rebuilds them (another Kiln's)
  double seconds = 0;        ///< spent training (features and fit)
  std::string why;           ///< what happened, for a progress line
};

/// The model of `target` kept on the store's shelf, and what it learned from; null when none is
/// kept. kiln::Error naming the shelf entry when it is not a model.
std::unique_ptr<CostModel> kept_model(const records::RecordStore& store, const std::string& target,
                                      const std::string& kind = "xgb",
                                      LogModelInfo* info = nullptr);

/// A model trained on `history` (records of `target`, grouped by task); null when fewer than two
/// of its records can be read. Tasks whose source does not rebuild them, or rebuilds another key
/// (the template's space changed since), are skipped and counted in report->skipped_tasks.
std::unique_ptr<CostModel> train_log_model(const std::vector<records::TaskHistory>& history,
                                           const std::string& target,
                                           const LogModelOptions& options = {},
                                           LogModelReport* report = nullptr);

/// The model of `target` pre-trained on every record the store holds: the kept one while it is
/// current, else one trained anew on the store's history and kept on its shelf. Null when the
/// store has nothing to learn from.
std::unique_ptr<CostModel> pretrained_model(records::RecordStore& store, const std::string& target,
                                            const LogModelOptions& options = {},
                                            LogModelReport* report = nullptr);

/// Zero-shot: the config `model` ranks best for `task` among those a short model-guided search
/// meets (and the default), trying the best few in order until one lowers. nullopt when none of
/// them does (the caller keeps the default).
std::optional<space::Config> predict_best_config(const Task& task, const CostModel& model);

}  // namespace kiln::autotune
