// Explorers: which configs of a space the tuner measures next.
//
// The tuning loop asks an explorer for a batch, measures it and reports the throughputs back:
//
//   ModelExplorer ex(space, /*seed=*/1, score_fn);   // score_fn: features + CostModel::predict
//   while (trials < budget) {
//     std::vector<uint64_t> batch = ex.next_batch(64);
//     if (batch.empty()) break;                      // the space is exhausted
//     std::vector<double> gflops = measure(batch);   // 0 for failed measurements
//     ex.update(batch, gflops);                      // (then the loop refits its model)
//   }
//
// Configs are identified by their index in the space. An explorer never proposes a config twice,
// nor one that was measured (update) or marked visited (mark_visited: records of an earlier run),
// and returns fewer than n only when every config of the space has been visited. Spaces may be
// huge: only GridExplorer walks through the indices; the others sample them. Every explorer is
// deterministic given its seed (and, for ModelExplorer, its score function).
//
//  - RandomExplorer: uniform samples.
//  - GridExplorer: indices in order.
//  - GeneticExplorer: uniform crossover on knob positions of the fittest measured configs and
//    mutation of positions; random until a population has been measured.
//  - ModelExplorer: simulated annealing over the space guided by a cost model's scores (parallel
//    chains, Metropolis acceptance, linear cooling), then a diversity-aware pick of the batch from
//    the best candidates seen, and an eps-greedy share of random configs. Random until a model is
//    available. As AutoTVM's ModelBasedTuner with SimulatedAnnealingOptimizer.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/space/space.h"

namespace kiln::autotune {

class Explorer {
 public:
  virtual ~Explorer() = default;

  /// Up to n configs never proposed, measured or marked visited before (they are visited from now
  /// on); fewer only when the space is exhausted.
  virtual std::vector<uint64_t> next_batch(size_t n) = 0;
  /// The throughputs measured for `configs` (higher = better; 0 for failed measurements). The
  /// configs become visited. kiln::Error on mismatched sizes or an index outside the space.
  virtual void update(const std::vector<uint64_t>& configs, const std::vector<double>& throughput);

  /// Never propose `index` (e.g. measured in an earlier run); kiln::Error outside the space.
  void mark_visited(uint64_t index);
  bool visited(uint64_t index) const { return visited_.count(index) != 0; }
  uint64_t num_visited() const { return visited_.size(); }
  bool exhausted() const { return visited_.size() >= size_; }
  const space::ConfigSpace& space() const { return space_; }

 protected:
  explicit Explorer(space::ConfigSpace space, uint64_t seed);

  /// Marks `index` visited; false when it already was.
  bool visit(uint64_t index) { return visited_.insert(index).second; }
  /// Up to n distinct random unvisited configs, marked visited (fewer only when exhausted).
  std::vector<uint64_t> take_random(size_t n);
  /// A uniform integer in [0, n) (n > 0), and a uniform double in [0, 1).
  uint64_t below(uint64_t n);
  double unit();
  /// The k best measured configs (best throughput per config), best first; ties by index.
  std::vector<std::pair<uint64_t, double>> best_measured(size_t k) const;
  size_t num_measured() const { return measured_.size(); }

  space::ConfigSpace space_;
  uint64_t size_;
  std::mt19937_64 rng_;

 private:
  std::unordered_set<uint64_t> visited_;
  std::unordered_map<uint64_t, double> measured_;  ///< the best throughput of each measured config
};

/// Uniformly random unvisited configs.
class RandomExplorer : public Explorer {
 public:
  explicit RandomExplorer(space::ConfigSpace space, uint64_t seed = 0)
      : Explorer(std::move(space), seed) {}
  std::vector<uint64_t> next_batch(size_t n) override { return take_random(n); }
};

/// The indices in order, skipping visited ones.
class GridExplorer : public Explorer {
 public:
  explicit GridExplorer(space::ConfigSpace space) : Explorer(std::move(space), 0) {}
  std::vector<uint64_t> next_batch(size_t n) override;

 private:
  uint64_t cursor_ = 0;
};

/// A genetic algorithm over knob positions. Once `population` distinct configs are measured, each
/// batch breeds from the `population` fittest: `elite` children are mutations of the best configs
/// (one to a few knobs changed), the others take each knob from one of two parents chosen with
/// probability proportional to throughput (uniform crossover) and then mutate each knob with
/// probability `mutation_prob` to a random position. Before that, and to fill a batch when the
/// children keep landing on visited configs, random.
class GeneticExplorer : public Explorer {
 public:
  GeneticExplorer(space::ConfigSpace space, uint64_t seed = 0, size_t population = 100,
                  size_t elite = 3, double mutation_prob = 0.1);
  std::vector<uint64_t> next_batch(size_t n) override;

 private:
  std::vector<int> mutate(std::vector<int> pos, double prob);
  size_t population_;
  size_t elite_;
  double mutation_prob_;
};

/// Scores of candidate configs (higher = predicted faster), one per index, in order.
using ScoreFn = std::function<std::vector<float>(const std::vector<uint64_t>&)>;

struct ModelExplorerOptions {
  int parallel_size = 128;  ///< annealing chains
  int n_iter = 500;         ///< annealing steps (at most)
  int early_stop = 50;      ///< stop when the best candidates did not change for this many steps
  double temp_start = 1.0;  ///< temperature, cooled linearly from start to end over n_iter
  double temp_end = 0.0;
  double random_step = 0.25;   ///< a step sets the knob to a random position instead of a neighbor
  double eps_greedy = 0.05;    ///< the share of each batch that is random
  double candidate_ratio = 2;  ///< the annealing keeps the best ceil(ratio * n) candidates
  /// Diversity: the batch is taken from the candidates greedily, each time the one close (fewer
  /// than min_distance knobs apart) to the fewest picks so far, the best-scoring among equals;
  /// <= 1: simply the best candidates.
  int min_distance = 2;
  bool persistent = true;  ///< chains go on from where the previous batch left them
};

/// Simulated annealing on a cost model's scores. Scores only need to rank: the acceptance rule
/// exp(delta / (t * scale)) normalizes them by the spread of the chains' starting scores.
class ModelExplorer : public Explorer {
 public:
  ModelExplorer(space::ConfigSpace space, uint64_t seed, ScoreFn score_fn = {},
                ModelExplorerOptions options = {});

  std::vector<uint64_t> next_batch(size_t n) override;
  /// Records the measurements and forgets the scores of the current model (it is to be refit).
  void update(const std::vector<uint64_t>& configs, const std::vector<double>& throughput) override;
  /// Replaces the score function (an empty one: random picks).
  void set_score_fn(ScoreFn score_fn);
  const ModelExplorerOptions& options() const { return options_; }

 private:
  struct Chain {
    std::vector<int> pos;
    uint64_t index = 0;
    float score = 0;
  };
  /// Scores through the cache; non-finite scores become the lowest float.
  std::vector<float> score(const std::vector<uint64_t>& indices);
  /// The best `k` distinct unvisited configs the annealing met, best first.
  std::vector<std::pair<float, uint64_t>> anneal(size_t k);
  /// Proposes a neighbor of `pos` (one knob changed).
  std::vector<int> step(const std::vector<int>& pos);

  ScoreFn score_fn_;
  ModelExplorerOptions options_;
  std::vector<size_t> movable_;  ///< knobs with more than one candidate
  std::vector<Chain> chains_;    ///< where the chains stopped (persistent)
  std::unordered_map<uint64_t, float> cache_;
};

}  // namespace kiln::autotune
