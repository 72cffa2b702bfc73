// The tuner's cost model: gradient-boosted trees (XGBoost's C API) that score candidates from their
// features (features.h), trained to rank (objective rank:pairwise): only the order of the scores
// means something, higher = faster. As in the paper, the model is retrained from scratch on all the
// records so far whenever new ones arrive (fit() again; there is no incremental update), which
// takes milliseconds for the few thousand records of a task.
//
// Transfer learning: records of earlier tasks on the same target are passed to fit() together with
// the new task's, each task its own group (pairs are only formed inside a group, so throughputs of
// different operators are never compared with each other); the features of the loop program are
// of one fixed length for every task, so what the trees learned about loop structure carries over.
//
//   CostModel m;
//   m.fit(x, gflops, task_ids);           // rows of features, their measured throughput, groups
//   std::vector<float> s = m.predict(candidates);
//   std::string blob = m.save();          // XGBoost's UBJSON model
//   CostModel again = CostModel::load(blob);
//
// Errors of the C API become kiln::Error carrying XGBGetLastError()'s text.
#pragma once

#include <string>
#include <vector>

namespace kiln::autotune {

struct CostModelOptions {
  int rounds = 100;  ///< boosting rounds (fixed: no early stop)
  int max_depth = 6;
  double eta = 0.3;
  double subsample = 0.8;  ///< rows sampled per tree
  double min_child_weight = 1;
  double gamma = 1e-4;
  double lambda = 1;
  int seed = 42;    ///< fixes the sampling: the same records give the same model
  int nthread = 1;  ///< XGBoost threads (1: deterministic and kind to shared machines)
};

class CostModel {
 public:
  explicit CostModel(CostModelOptions options = {});
  ~CostModel();
  CostModel(CostModel&& o) noexcept;
  CostModel& operator=(CostModel&& o) noexcept;
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  /// Trains a new model (replacing any previous one) on rows `x` (all of one length) with their
  /// throughput (higher = better; failed measurements as 0). `group[i]` is the task of row i
  /// (any integers; rows need not be sorted by it); empty = one task. kiln::Error on an empty set
  /// or inconsistent sizes.
  void fit(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
           const std::vector<int>& group = {});

  /// Scores of the rows (higher = predicted faster); kiln::Error before fit/load or when a row's
  /// length differs from the training rows'.
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const;

  bool trained() const { return booster_ != nullptr; }
  /// The number of features per row the model was trained on (0 before).
  size_t num_features() const { return num_features_; }

  /// The model as bytes (XGBoost's UBJSON); kiln::Error before fit.
  std::string save() const;
  /// A model saved by save(); kiln::Error when the bytes are not one.
  static CostModel load(const std::string& bytes, CostModelOptions options = {});

 private:
  void set_params() const;
  void* booster_ = nullptr;  // BoosterHandle
  size_t num_features_ = 0;
  CostModelOptions options_;
};

}  // namespace kiln::autotune
