// The "mlp" cost model (cost_model.h): a small neural network in plain C++ that scores candidates
// from their features (features.h), trained to rank them inside each task, as xgb_model.h's trees
// are (higher score = faster; only the order within one task means something).
//
// The network: each input clamped to its feature's range over the training rows (outside it the
// network is flat, as trees are, so the search does not chase a linear extrapolation into configs
// unlike any measured) and standardized by their mean and standard deviation (a feature constant
// there is ignored, so one that varies only in a new task meets no untrained weights); two hidden
// layers of kMlpHidden1 and kMlpHidden2 ReLU units, one linear output. Training: RankNet's pairwise
// logistic loss over the pairs of each minibatch, a minibatch being up to `batch` rows of one group
// (a group's rows shuffled each epoch), each pair weighted by its throughput difference over the
// group's range (max - min), so near-ties count little and failed candidates (throughput 0) are
// pushed below the rest; Adam. Everything random (initial weights, shuffles) comes from SplitMix64
// seeded by `seed`: the same rows give the same model, bit for bit.
//
// fit() trains `epochs` passes over the rows (more for a small set: at least `min_steps` Adam
// steps), from fresh weights; about 0.4 s for 5,000 rows of loop features on one core. adapt()
// trains `adapt_epochs` (at least `min_steps` steps) more from the current weights on the new rows,
// keeping the old ranges and standardization (so a prior pre-trained on a whole log is turned
// towards one task).
//
//   MlpModel m;
//   m.fit(x, gflops, task_ids);
//   std::vector<float> s = m.predict(candidates);
//   std::string blob = m.save();         // versioned binary, below
//   MlpModel again = MlpModel::load(blob);
//
// The saved bytes (little-endian): the magic "kiln-mlp", uint32 version (1), uint32 inputs n,
// uint32 hidden1, uint32 hidden2, then float32 arrays: mean[n], scale[n] (1/std, 0 for an ignored
// feature), lo[n], hi[n] (the range), w1[n][hidden1], b1[hidden1], w2[hidden1][hidden2],
// b2[hidden2], w3[hidden2], b3. load() checks every part (magic, version, sizes against this
// build's, length, finite values) and names what is wrong: a model file may come from disk.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/autotune/cost_model.h"

namespace kiln::autotune {

inline constexpr int kMlpHidden1 = 64;
inline constexpr int kMlpHidden2 = 32;

struct MlpModelOptions {
  int epochs = 20;        ///< passes over the rows in fit()
  int adapt_epochs = 20;  ///< passes over the new rows in adapt()
  int min_steps = 300;    ///< at least this many Adam steps per fit / adapt (small sets)
  int batch = 32;         ///< rows per minibatch, all of one group
  double learning_rate = 2e-3;
  uint64_t seed = 42;  ///< initial weights and shuffles: the same rows give the same model
};

class MlpModel final : public CostModel {
 public:
  explicit MlpModel(MlpModelOptions options = {});

  const char* kind() const override { return "mlp"; }
  void fit(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
           const std::vector<int>& group = {}) override;
  void adapt(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
             const std::vector<int>& group = {}) override;
  std::vector<float> predict(const std::vector<std::vector<float>>& x) const override;
  bool trained() const override { return inputs_ > 0; }
  size_t num_features() const override { return inputs_; }
  std::string save() const override;
  std::unique_ptr<CostModel> clone() const override;

  /// A model saved by save(); kiln::Error naming what is wrong when the bytes are not one.
  static MlpModel load(const std::string& bytes, MlpModelOptions options = {});

 private:
  /// The standardized inputs of the used features (those with scale != 0), row-major.
  std::vector<float> standardize(const std::vector<std::vector<float>>& x, const char* who) const;
  /// Minibatch training from the current weights: `epochs` passes (at least min_steps steps).
  void train(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
             const std::vector<int>& group, int epochs, uint64_t seed, const char* who);
  /// The indices of the used features, from scale_.
  void find_used();

  MlpModelOptions options_;
  size_t inputs_ = 0;           ///< features per row; 0 = untrained
  std::vector<float> mean_;     ///< per feature
  std::vector<float> scale_;    ///< per feature: 1 / std, 0 for a feature ignored
  std::vector<float> lo_, hi_;  ///< per feature: the training rows' range, where inputs are clamped
  std::vector<int> used_;       ///< features whose scale is not 0
  /// Weights, one array: w1 [inputs][h1], b1 [h1], w2 [h1][h2], b2 [h2], w3 [h2], b3.
  std::vector<float> params_;
};

}  // namespace kiln::autotune
