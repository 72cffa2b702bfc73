// The "xgb" cost model (cost_model.h): gradient-boosted trees (XGBoost's C API) that score
// candidates from their features (features.h), trained to rank (objective rank:pairwise): only the
// order of the scores means something, higher = faster. As in the paper, the model is retrained
// from scratch on all the records so far whenever new ones arrive (fit() again; there is no
// incremental update), which takes milliseconds for the few thousand records of a task.
//
// Transfer learning: records of earlier tasks on the same target are passed to fit() together with
// the new task's, each task its own group (pairs are only formed inside a group, so throughputs of
// different operators are never compared with each other); the features of the loop program are
// of one fixed length for every task, so what the trees learned about loop structure carries over.
//
// adapt() continues boosting a trained model on new rows (XGBoost's training continuation:
// adapt_rounds more trees, fitted to the ranking errors the model makes on them).
//
//   XgbModel m;
//   m.fit(x, gflops, task_ids);           // rows of features, their measured throughput, groups
//   std::vector<float> s = m.predict(candidates);
//   std::string blob = m.save();          // XGBoost's UBJSON model
//   XgbModel again = XgbModel::load(blob);
//
// Errors of the C API become kiln::Error carrying XGBGetLastError()'s text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/autotune/cost_model.h"

namespace kiln::autotune {

struct XgbModelOptions {
  int rounds = 100;       ///< boosting rounds (fixed: no early stop)
  int adapt_rounds = 30;  ///< trees adapt() adds
  int max_depth = 6;
  double eta = 0.3;
  double subsample = 0.8;  ///< rows sampled per tree
  double min_child_weight = 1;
  double gamma = 1e-4;
  double lambda = 1;
  int seed = 42;    ///< fixes the sampling: the same records give the same model
  int nthread = 1;  ///< XGBoost threads (1: deterministic and kind to shared machines)
};

class XgbModel final : public CostModel {
 public:
  explicit XgbModel(XgbModelOptions options = {});
  ~XgbModel() override;
  XgbModel(XgbModel&& o) noexcept;
  XgbModel& operator=(XgbModel&& o) noexcept;
  XgbModel(const XgbModel&) = delete;
  XgbModel& operator=(const XgbModel&) = delete;

  const char* kind() const override { return "xgb"; }
  void fit(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
           const std::vector<int>& group = {}) override;
  void adapt(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
             const std::vector<int>& group = {}) override;
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override;
  bool trained() const override { return booster_ != nullptr; }
  size_t num_features() const override { return num_features_; }
  /// XGBoost's UBJSON model.
  std::string save() const override;
  std::unique_ptr<CostModel> clone() const override;

  /// A model saved by save(); kiln::Error when the bytes are not one.
  static XgbModel load(const std::string& bytes, XgbModelOptions options = {});

 private:
  void set_params(void* booster) const;
  /// Boosts `rounds` trees on the rows: more on the current booster's, or on a new booster when
  /// there is none or `from_scratch`; the current booster is replaced only on success.
  void boost(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
             const std::vector<int>& group, int rounds, bool from_scratch, const char* who);
  void* booster_ = nullptr;  // BoosterHandle
  size_t num_features_ = 0;
  XgbModelOptions options_;
};

}  // namespace kiln::autotune
