// Explorers on synthetic spaces with a hidden throughput function of the knobs: no config proposed
// twice, grid order, exhaustion of small spaces, determinism, and model-guided annealing finding
// near-optimal configs in far fewer trials than random search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

#include "compiler/autotune/explorer.h"
#include "tests/common/expect_error.h"

namespace kiln::autotune {
namespace {

using space::Config;
using space::ConfigSpace;

// 45 * 28 * 6 * 6 = 45360 points.
ConfigSpace big_space() {
  ConfigSpace s;
  s.define_split("tile_y", 256, 3);
  s.define_split("tile_x", 64, 3);
  s.define_knob("unroll", {0, 1, 2, 4, 8, 16});
  s.define_knob("vec", {1, 2, 4, 8, 16, 32});
  return s;
}

ConfigSpace small_space() {
  ConfigSpace s;
  s.define_knob("a", {1, 2, 3});
  s.define_knob("b", {10, 20, 30, 40});
  return s;
}

double sq(double x) { return x * x; }

// The hidden throughput of a config of big_space(): a smooth bump around one optimum (value 1),
// halved when the inner tiles overflow a "cache". Within 95% of the optimum: the optimum and about
// ten configs one step away from it in one knob.
double hidden(const ConfigSpace& s, uint64_t index) {
  Config c = s.get(index);
  auto y = c.split("tile_y");
  auto x = c.split("tile_x");
  double d = sq(std::log2(double(y[2])) - 3) + sq(std::log2(double(y[1])) - 2) +
             sq(std::log2(double(x[2])) - 3) + sq(std::log2(double(x[1])) - 1) +
             sq(c.positions()[2] - 3) + sq(std::log2(double(c.knob("vec"))) - 3);
  double f = std::exp(-0.05 * d);
  if (y[2] * x[2] > 64) f *= 0.5;
  return f;
}

// Deterministic noise in [-amp, amp] per config.
double noise(uint64_t index, uint64_t seed, double amp) {
  uint64_t z = index * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return amp * (2.0 * double(z >> 11) * 0x1.0p-53 - 1.0);
}

std::vector<double> measure(const ConfigSpace& s, const std::vector<uint64_t>& batch) {
  std::vector<double> out;
  for (uint64_t i : batch) out.push_back(hidden(s, i));
  return out;
}

ScoreFn model_of(const ConfigSpace& s, double noise_amp = 0, uint64_t noise_seed = 0) {
  return [s, noise_amp, noise_seed](const std::vector<uint64_t>& idx) {
    std::vector<float> out;
    for (uint64_t i : idx) out.push_back(float(hidden(s, i) + noise(i, noise_seed, noise_amp)));
    return out;
  };
}

// Runs the tuning loop until a config within 95% of the optimum (1) is measured; the trial count.
uint64_t trials_to_near_optimum(Explorer& ex, size_t batch_size = 64) {
  const ConfigSpace& s = ex.space();
  uint64_t trials = 0;
  while (true) {
    auto batch = ex.next_batch(batch_size);
    if (batch.empty()) return trials;
    auto t = measure(s, batch);
    for (double v : t) {
      ++trials;
      if (v >= 0.95) return trials;
    }
    ex.update(batch, t);
  }
}

// Runs `rounds` batches, checking that every batch is full and no config comes twice.
std::vector<uint64_t> run_rounds(Explorer& ex, int rounds, size_t n) {
  std::vector<uint64_t> all;
  std::set<uint64_t> seen;
  for (int r = 0; r < rounds; ++r) {
    auto batch = ex.next_batch(n);
    EXPECT_EQ(batch.size(), n) << "round " << r;
    for (uint64_t i : batch) {
      EXPECT_LT(i, ex.space().size());
      EXPECT_TRUE(seen.insert(i).second) << "config " << i << " proposed twice (round " << r << ")";
    }
    all.insert(all.end(), batch.begin(), batch.end());
    ex.update(batch, measure(ex.space(), batch));
  }
  return all;
}

TEST(Explorer, HiddenFunctionHasAFewNearOptimalConfigs) {
  ConfigSpace s = big_space();
  ASSERT_EQ(s.size(), 45360u);
  int near = 0;
  double best = 0;
  for (uint64_t i = 0; i < s.size(); ++i) {
    double f = hidden(s, i);
    best = std::max(best, f);
    near += f >= 0.95;
  }
  EXPECT_DOUBLE_EQ(best, 1.0);
  EXPECT_GE(near, 5);
  EXPECT_LE(near, 20);
}

TEST(GridExplorer, CoversTheSpaceInOrder) {
  ConfigSpace s = small_space();
  GridExplorer g(s);
  g.mark_visited(4);
  std::vector<uint64_t> all;
  for (int r = 0; r < 10; ++r) {
    auto b = g.next_batch(5);
    if (r < 2) {
      EXPECT_EQ(b.size(), 5u);
    }
    all.insert(all.end(), b.begin(), b.end());
  }
  std::vector<uint64_t> want = {0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_EQ(all, want);
  EXPECT_TRUE(g.exhausted());
  EXPECT_TRUE(g.next_batch(3).empty());
}

TEST(Explorer, NoConfigProposedTwiceAcrossBatches) {
  ConfigSpace s = big_space();
  RandomExplorer r(s, 1);
  run_rounds(r, 20, 64);
  GeneticExplorer ga(s, 1, /*population=*/64, /*elite=*/3, /*mutation_prob=*/0.1);
  run_rounds(ga, 20, 64);
  ModelExplorer m(s, 1, model_of(s));
  run_rounds(m, 6, 64);
  GridExplorer g(s);
  run_rounds(g, 5, 64);
}

TEST(Explorer, PreSeededVisitedConfigsAreNeverProposed) {
  ConfigSpace s = small_space();
  std::vector<std::unique_ptr<Explorer>> all;
  all.push_back(std::make_unique<RandomExplorer>(s, 3));
  all.push_back(std::make_unique<GridExplorer>(s));
  all.push_back(std::make_unique<GeneticExplorer>(s, 3, 4, 1, 0.2));
  all.push_back(std::make_unique<ModelExplorer>(s, 3, [](const std::vector<uint64_t>& idx) {
    return std::vector<float>(idx.begin(), idx.end());
  }));
  for (auto& ex : all) {
    for (uint64_t i : {0u, 5u, 7u}) ex->mark_visited(i);
    std::set<uint64_t> got;
    while (true) {
      auto b = ex->next_batch(2);
      if (b.empty()) break;
      for (uint64_t i : b) EXPECT_TRUE(got.insert(i).second);
      ex->update(b, std::vector<double>(b.size(), 1.0));
    }
    EXPECT_EQ(got.size(), 9u);
    EXPECT_FALSE(got.count(0) || got.count(5) || got.count(7));
    EXPECT_ERROR_CONTAINS(ex->mark_visited(12), "outside the space");
    EXPECT_ERROR_CONTAINS(ex->update({1}, {}), "throughputs");
  }
}

TEST(Explorer, SmallSpaceIsExhaustedExactly) {
  ConfigSpace s = small_space();
  std::vector<std::unique_ptr<Explorer>> all;
  all.push_back(std::make_unique<RandomExplorer>(s, 7));
  all.push_back(std::make_unique<GridExplorer>(s));
  all.push_back(std::make_unique<GeneticExplorer>(s, 7, 4, 2, 0.3));
  all.push_back(std::make_unique<ModelExplorer>(s, 7, [](const std::vector<uint64_t>& idx) {
    std::vector<float> out;
    for (uint64_t i : idx) out.push_back(float(i % 5));
    return out;
  }));
  for (auto& ex : all) {
    std::set<uint64_t> got;
    std::vector<size_t> sizes;
    for (int r = 0; r < 4; ++r) {
      auto b = ex->next_batch(5);
      sizes.push_back(b.size());
      for (uint64_t i : b) EXPECT_TRUE(got.insert(i).second);
      ex->update(b, std::vector<double>(b.size(), 2.0));
    }
    EXPECT_EQ(sizes, (std::vector<size_t>{5, 5, 2, 0}));
    EXPECT_EQ(got.size(), 12u);
    EXPECT_TRUE(ex->exhausted());
  }
}

TEST(Explorer, RandomAndGeneticReturnDistinctConfigsDeterministically) {
  ConfigSpace s = big_space();
  RandomExplorer r1(s, 42), r2(s, 42), r3(s, 43);
  auto a = run_rounds(r1, 5, 100);
  EXPECT_EQ(a, run_rounds(r2, 5, 100));
  EXPECT_NE(a, run_rounds(r3, 5, 100));
  GeneticExplorer g1(s, 42, 50, 2, 0.1), g2(s, 42, 50, 2, 0.1);
  EXPECT_EQ(run_rounds(g1, 8, 50), run_rounds(g2, 8, 50));
}

TEST(ModelExplorer, RandomUntilAModelExists) {
  ConfigSpace s = big_space();
  int calls = 0;
  ModelExplorer m(s, 5);
  auto b = m.next_batch(32);  // no score function: random
  EXPECT_EQ(b.size(), 32u);
  m.update(b, measure(s, b));
  EXPECT_EQ(m.next_batch(32).size(), 32u);
  ScoreFn f = model_of(s);
  m.set_score_fn([&](const std::vector<uint64_t>& idx) {
    ++calls;
    return f(idx);
  });
  auto c = m.next_batch(32);
  EXPECT_EQ(c.size(), 32u);
  EXPECT_GT(calls, 0);
  for (uint64_t i : c) EXPECT_FALSE(std::count(b.begin(), b.end(), i));

  // A model given before any measurement (one pre-trained on other tasks) chooses the first
  // batch already.
  int before = 0;
  ModelExplorer counted(s, 5, [&](const std::vector<uint64_t>& idx) {
    ++before;
    return f(idx);
  });
  EXPECT_EQ(counted.next_batch(16).size(), 16u);
  EXPECT_GT(before, 0);
}

TEST(ModelExplorer, DeterministicGivenTheSeed) {
  ConfigSpace s = big_space();
  ModelExplorer a(s, 11, model_of(s, 0.1, 3)), b(s, 11, model_of(s, 0.1, 3));
  EXPECT_EQ(run_rounds(a, 4, 48), run_rounds(b, 4, 48));
}

// Pairs among the model's picks of a batch (the random share left out) differing in < 2 knobs.
int close_pairs(int min_distance, double ratio = 2) {
  ConfigSpace s = big_space();
  ModelExplorerOptions o;
  o.min_distance = min_distance;
  o.candidate_ratio = ratio;
  ModelExplorer m(s, 2, model_of(s), o);
  auto first = m.next_batch(64);
  m.update(first, measure(s, first));
  auto b = m.next_batch(64);
  EXPECT_EQ(b.size(), 64u);
  int close = 0;
  for (size_t i = 0; i < 61 && i < b.size(); ++i) {  // the last 3 are the random share
    auto p = s.get(b[i]).positions();
    for (size_t j = 0; j < i; ++j) {
      auto q = s.get(b[j]).positions();
      int d = 0;
      for (size_t k = 0; k < p.size(); ++k) d += p[k] != q[k];
      close += d < 2;
    }
  }
  return close;
}

TEST(ModelExplorer, DiversityFilterSpreadsTheBatch) {
  int off = close_pairs(0), on = close_pairs(2), wide = close_pairs(2, 8);
  std::printf(
      "pairs of model picks one knob apart: %d without the diversity filter, %d with it, "
      "%d with it from 8n candidates\n",
      off, on, wide);
  EXPECT_LT(on, off / 2);
  EXPECT_EQ(wide, 0);
}

TEST(ModelExplorer, FindsNearOptimalConfigsFarFasterThanRandom) {
  ConfigSpace s = big_space();
  const uint64_t seeds[] = {1, 2, 3, 4, 5};
  double random_sum = 0, model_sum = 0, noisy_sum = 0, ga_sum = 0;
  for (uint64_t seed : seeds) {
    RandomExplorer r(s, seed);
    uint64_t tr = trials_to_near_optimum(r);
    ModelExplorer m(s, seed, model_of(s));
    uint64_t tm = trials_to_near_optimum(m);
    ModelExplorer noisy(s, seed, model_of(s, 0.3, seed));
    uint64_t tn = trials_to_near_optimum(noisy);
    GeneticExplorer ga(s, seed, 64, 3, 0.1);
    uint64_t tg = trials_to_near_optimum(ga);
    std::printf("seed %llu: random %llu, model %llu, noisy model %llu, genetic %llu trials\n",
                (unsigned long long)seed, (unsigned long long)tr, (unsigned long long)tm,
                (unsigned long long)tn, (unsigned long long)tg);
    random_sum += double(tr);
    model_sum += double(tm);
    noisy_sum += double(tn);
    ga_sum += double(tg);
  }
  double k = double(std::size(seeds));
  std::printf(
      "mean trials to within 95%% of the optimum: random %.0f, model %.0f, noisy model %.0f, "
      "genetic %.0f\n",
      random_sum / k, model_sum / k, noisy_sum / k, ga_sum / k);
  EXPECT_LT(model_sum, random_sum / 2);
  EXPECT_LT(noisy_sum, random_sum);
}

}  // namespace
}  // namespace kiln::autotune
