// The tuner's cost model: what scores candidates from their features (features.h) to rank them
// (higher = predicted faster; only the order of the scores within one task means something). Two
// kinds share this interface: "xgb", gradient-boosted trees (xgb_model.h, the default) and "mlp",
// a small neural network (mlp_model.h). Training rows carry a group, the task they belong to: pairs
// are formed only inside a group, so throughputs of different operators are never compared.
//
//   std::unique_ptr<CostModel> m = make_cost_model("xgb");
//   m->fit(x, gflops, task_ids);            // rows of features, their throughput, their groups
//   std::vector<float> s = m->predict(candidates);
//   std::unique_ptr<CostModel> t = m->clone();
//   t->adapt(task_x, task_gflops, {});      // what m learned elsewhere, adapted to one task
//   std::string blob = m->save();
//   auto again = load_cost_model("xgb", blob);
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::autotune {

class CostModel {
 public:
  virtual ~CostModel() = default;
  /// One of kCostModelKinds.
  virtual const char* kind() const = 0;

  /// Trains a new model (replacing any previous one) on rows `x` (all of one length) with their
  /// throughput (higher = better; failed measurements as 0). `group[i]` is the task of row i
  /// (any integers; rows need not be sorted by it); empty = one task. kiln::Error on an empty set
  /// or inconsistent sizes.
  virtual void fit(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
                   const std::vector<int>& group = {}) = 0;
  /// Continues training a trained model on new rows, starting from what it learned (xgb: more
  /// trees fitted to its ranking errors on them; mlp: more epochs from its weights): how a model
  /// pre-trained on a whole log is adapted to the task being tuned. On an untrained model, fit().
  /// kiln::Error as fit, or when the rows' length differs from the model's.
  virtual void adapt(const std::vector<std::vector<float>>& x,
                     const std::vector<double>& throughput, const std::vector<int>& group = {}) = 0;

  /// Scores of the rows (higher = predicted faster); kiln::Error before fit/load or when a row's
  /// length differs from the training rows'.
  virtual std::vector<float> predict(const std::vector<std::vector<float>>& x) const = 0;

  virtual bool trained() const = 0;
  /// The number of features per row the model was trained on (0 before).
  virtual size_t num_features() const = 0;

  /// The model as bytes (load_cost_model reads them back); kiln::Error before fit.
  virtual std::string save() const = 0;
  /// An independent copy (to adapt without changing this one).
  virtual std::unique_ptr<CostModel> clone() const = 0;
};

/// The cost model kinds, the default first.
inline constexpr const char* kCostModelKinds[] = {"xgb", "mlp"};

/// What fit and adapt check of their rows, for every kind: kiln::Error ("cost model WHO: ...")
/// on no rows, sizes that differ, rows without features, or a throughput that is not finite.
void check_training_rows(const std::vector<std::vector<float>>& x,
                         const std::vector<double>& throughput, const std::vector<int>& group,
                         const char* who);

/// An untrained model of `kind`; kiln::Error naming the known kinds for another.
std::unique_ptr<CostModel> make_cost_model(std::string_view kind);
/// A model of `kind` saved by save(); kiln::Error naming the kind when the bytes are not one.
std::unique_ptr<CostModel> load_cost_model(std::string_view kind, const std::string& bytes);

}  // namespace kiln::autotune
