// The cost models (compiler/autotune/cost_model.h), every kind (XGBoost's trees, the MLP): each
// learns a hidden ranking, transfers across tasks, adapts a prior to a new task, is deterministic,
// round-trips through save/load and reports misuse clearly; each ranks real schedules of a matmul
// by the features of their loop programs and predicts in microseconds per candidate. The MLP's
// loader refuses every kind of junk, and it trains on 5,000 rows of real length.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>

#include "base/error.h"
#include "compiler/autotune/features.h"
#include "compiler/autotune/mlp_model.h"
#include "compiler/autotune/xgb_model.h"
#include "compiler/lower.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/matmul.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/rank_correlation.h"

namespace kiln {
namespace {

using testing::spearman;

using autotune::MlpModel;
using autotune::XgbModel;
using Rows = std::vector<std::vector<float>>;

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// A hidden nonlinear throughput of 12 uniform features (the last 6 are noise).
double hidden(const std::vector<float>& x) {
  return std::sin(4.0 * x[0]) + 2.0 * x[1] * x[1] + x[2] * x[3] + (x[4] > 0.5f ? 0.7 : 0.0) -
         0.5 * std::abs(x[5] - 0.3);
}

Rows random_rows(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Rows x(n, std::vector<float>(12));
  for (auto& r : x)
    for (auto& v : r) v = u(rng);
  return x;
}

/// The tests every kind must pass, run once per kind of kCostModelKinds.
class EveryCostModel : public ::testing::TestWithParam<const char*> {
 protected:
  std::unique_ptr<autotune::CostModel> make() const {
    return autotune::make_cost_model(GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(Kinds, EveryCostModel, ::testing::ValuesIn(autotune::kCostModelKinds),
                         [](const auto& info) { return std::string(info.param); });

TEST_P(EveryCostModel, RanksAHiddenFunction) {
  Rows train = random_rows(600, 1), test = random_rows(300, 2);
  std::vector<double> y, truth;
  for (auto& r : train) y.push_back(hidden(r));
  for (auto& r : test) truth.push_back(hidden(r));
  auto m = make();
  EXPECT_STREQ(m->kind(), GetParam());
  EXPECT_FALSE(m->trained());
  auto t0 = std::chrono::steady_clock::now();
  m->fit(train, y);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  double rho = spearman(as_double(m->predict(test)), truth);
  std::cout << "case=synthetic_rank kind=" << GetParam() << " train=600 test=300 fit_ms=" << ms
            << " spearman=" << rho << "\n";
  EXPECT_GT(rho, 0.8);
  EXPECT_TRUE(m->trained());
  EXPECT_EQ(m->num_features(), 12u);
}

TEST_P(EveryCostModel, SameRecordsSameModel) {
  Rows x = random_rows(200, 3);
  std::vector<double> y;
  std::vector<int> group;
  for (auto& r : x) y.push_back(hidden(r)), group.push_back(int(y.size() % 3));
  auto a = make(), b = make();
  a->fit(x, y, group);
  b->fit(x, y, group);
  EXPECT_EQ(a->predict(x), b->predict(x));
  EXPECT_EQ(a->save(), b->save());
  // So is an adaptation of equal models to equal rows.
  Rows more = random_rows(40, 14);
  std::vector<double> more_y;
  for (auto& r : more) more_y.push_back(hidden(r));
  a->adapt(more, more_y);
  b->adapt(more, more_y);
  EXPECT_EQ(a->predict(x), b->predict(x));
}

TEST_P(EveryCostModel, SaveLoadRoundTrip) {
  Rows x = random_rows(200, 4), test = random_rows(100, 5);
  std::vector<double> y;
  for (auto& r : x) y.push_back(hidden(r));
  auto m = make();
  m->fit(x, y);
  std::string blob = m->save();
  EXPECT_FALSE(blob.empty());
  auto again = autotune::load_cost_model(GetParam(), blob);
  EXPECT_STREQ(again->kind(), GetParam());
  EXPECT_EQ(again->num_features(), 12u);
  EXPECT_EQ(m->predict(test), again->predict(test));
  EXPECT_EQ(again->save(), blob);
  // A clone is the same model.
  EXPECT_EQ(m->clone()->predict(test), m->predict(test));
}

TEST_P(EveryCostModel, Misuse) {
  auto m = make();
  EXPECT_ERROR_CONTAINS(m->fit({}, {}), "no training records");
  EXPECT_ERROR_CONTAINS(m->predict({{1.0f}}), "not trained");
  EXPECT_ERROR_CONTAINS(m->save(), "not trained");
  EXPECT_ERROR_CONTAINS(m->fit({{1.0f, 2.0f}, {1.0f}}, {1.0, 2.0}), "row 1 has 1 features");
  EXPECT_ERROR_CONTAINS(m->fit({{1.0f}}, {1.0, 2.0}), "1 rows but 2 throughputs");
  EXPECT_ERROR_CONTAINS(m->fit({{1.0f}, {2.0f}}, {1.0, 2.0}, {0}), "2 rows but 1 group ids");
  EXPECT_ERROR_CONTAINS(m->fit({{1.0f}, {2.0f}}, {1.0, std::nan("")}),
                        "throughput of row 1 is not finite");
  EXPECT_FALSE(m->trained());
  m->fit({{1.0f, 0.0f}, {2.0f, 1.0f}, {3.0f, 0.5f}}, {1.0, 2.0, 3.0});
  EXPECT_ERROR_CONTAINS(m->predict({{1.0f}}), "expected 2");
  // A failed fit leaves the model it had.
  const std::vector<float> before = m->predict({{1.5f, 0.2f}});
  EXPECT_ERROR_CONTAINS(m->fit({{1.0f}}, {1.0, 2.0}), "1 rows but 2 throughputs");
  EXPECT_EQ(m->predict({{1.5f, 0.2f}}), before);
}

TEST_P(EveryCostModel, TransferAcrossTasks) {
  // Two tasks whose throughputs differ in scale but share the hidden ranking: a model trained on
  // many records of task 0 and a few of task 1 (as groups) ranks task 1's held-out points well,
  // better than the few task-1 records alone.
  Rows old_x = random_rows(500, 6), new_x = random_rows(30, 7), test = random_rows(300, 8);
  Rows x;
  std::vector<double> y;
  std::vector<int> group;
  // Interleave the tasks: fit() must group the rows itself.
  for (size_t i = 0; i < old_x.size(); ++i) {
    x.push_back(old_x[i]);
    y.push_back(1000.0 * hidden(old_x[i]));
    group.push_back(0);
    if (i < new_x.size()) {
      x.push_back(new_x[i]);
      y.push_back(hidden(new_x[i]) + 5.0);
      group.push_back(1);
    }
  }
  std::vector<double> truth, new_y;
  for (auto& r : test) truth.push_back(hidden(r));
  for (auto& r : new_x) new_y.push_back(hidden(r) + 5.0);
  auto warm = make(), cold = make();
  warm->fit(x, y, group);
  cold->fit(new_x, new_y);
  double rho_warm = spearman(as_double(warm->predict(test)), truth);
  double rho_cold = spearman(as_double(cold->predict(test)), truth);
  std::cout << "case=transfer kind=" << GetParam() << " spearman_warm=" << rho_warm
            << " spearman_cold=" << rho_cold << "\n";
  EXPECT_GT(rho_warm, 0.8);
  EXPECT_GT(rho_warm, rho_cold);
}

TEST_P(EveryCostModel, AdaptTurnsAPriorTowardsANewTask) {
  // A prior trained on one hidden ranking, adapted on a few rows of a task whose ranking differs
  // in part (feature 1's sign flipped): it ranks the new task better than before adapting, and
  // adapting a clone leaves the prior as it was.
  auto other = [](const std::vector<float>& r) { return hidden(r) - 4.0 * r[1] * r[1]; };
  Rows old_x = random_rows(500, 11), new_x = random_rows(40, 12), test = random_rows(300, 13);
  std::vector<double> old_y, new_y, truth;
  for (auto& r : old_x) old_y.push_back(hidden(r));
  for (auto& r : new_x) new_y.push_back(other(r));
  for (auto& r : test) truth.push_back(other(r));
  std::unique_ptr<autotune::CostModel> prior = make();
  prior->fit(old_x, old_y);
  const std::vector<float> before = prior->predict(test);
  std::unique_ptr<autotune::CostModel> adapted = prior->clone();
  adapted->adapt(new_x, new_y);
  double rho_prior = spearman(as_double(before), truth);
  double rho_adapted = spearman(as_double(adapted->predict(test)), truth);
  std::cout << "case=adapt kind=" << GetParam() << " spearman_prior=" << rho_prior
            << " spearman_adapted=" << rho_adapted << "\n";
  EXPECT_GT(rho_adapted, rho_prior + 0.1);
  EXPECT_EQ(prior->predict(test), before);
  // The adapted model saves and loads with what it learned since.
  auto again = autotune::load_cost_model(GetParam(), adapted->save());
  EXPECT_EQ(again->predict(test), adapted->predict(test));
  // Rows of another length are refused; adapt on an untrained model is fit.
  EXPECT_ERROR_CONTAINS(adapted->adapt({{1.0f}}, {1.0}), "rows have 1 features, the model 12");
  std::unique_ptr<autotune::CostModel> fresh = make();
  fresh->adapt(new_x, new_y);
  EXPECT_TRUE(fresh->trained());
  EXPECT_ERROR_CONTAINS(autotune::load_cost_model(GetParam(), "junk"), "cost model");
}

TEST(AutotuneCostModel, Kinds) {
  EXPECT_STREQ(autotune::kCostModelKinds[0], "xgb");  // the default
  EXPECT_ERROR_CONTAINS(autotune::make_cost_model("forest"),
                        "unknown cost model 'forest' (known: xgb, mlp)");
  EXPECT_ERROR_CONTAINS(autotune::load_cost_model("forest", "x"), "unknown cost model 'forest'");
}

TEST(AutotuneCostModel, XgbSpecifics) {
  Rows x = random_rows(200, 4), test = random_rows(100, 5);
  std::vector<double> y;
  for (auto& r : x) y.push_back(hidden(r));
  XgbModel m;
  m.fit(x, y);
  // Moving keeps the model.
  XgbModel moved = std::move(m);
  EXPECT_EQ(moved.predict(test), XgbModel::load(moved.save()).predict(test));
  // XGBoost's own errors come through with its message.
  EXPECT_ERROR_CONTAINS(XgbModel::load("not a model"), "XGBoost");
}

TEST(AutotuneCostModel, MlpLoadRefusesJunk) {
  Rows x = random_rows(100, 9);
  std::vector<double> y;
  for (auto& r : x) y.push_back(hidden(r));
  MlpModel m;
  m.fit(x, y);
  const std::string good = m.save();
  // The layout of mlp_model.h: magic, version, inputs, hidden sizes, then the floats.
  const size_t header = 8 + 4 * 4, floats = good.size() - header;
  EXPECT_EQ(floats % 4, 0u);
  auto patched = [&](size_t at, uint32_t v) {
    std::string b = good;
    std::memcpy(b.data() + at, &v, 4);
    return b;
  };
  EXPECT_ERROR_CONTAINS(MlpModel::load(""), "empty model");
  EXPECT_ERROR_CONTAINS(MlpModel::load("kiln"), "ends inside its magic");
  EXPECT_ERROR_CONTAINS(MlpModel::load(std::string("kiln-xyz") + good.substr(8)),
                        "not an mlp model");
  EXPECT_ERROR_CONTAINS(MlpModel::load(patched(8, 2)),
                        "format version 2, this build reads version 1");
  EXPECT_ERROR_CONTAINS(MlpModel::load(patched(12, 0)), "has 0 inputs");
  EXPECT_ERROR_CONTAINS(
      MlpModel::load(patched(12, 13)),
      "needs " + std::to_string(floats + 4 * (4 + autotune::kMlpHidden1)) + " bytes");
  EXPECT_ERROR_CONTAINS(MlpModel::load(patched(16, 128)), "hidden layers are 128x32");
  EXPECT_ERROR_CONTAINS(MlpModel::load(good.substr(0, 20)), "ends inside its hidden sizes");
  EXPECT_ERROR_CONTAINS(MlpModel::load(good.substr(0, good.size() - 4)),
                        "it has " + std::to_string(floats - 4));
  EXPECT_ERROR_CONTAINS(MlpModel::load(good + "x"), "it has " + std::to_string(floats + 1));
  const float nan = std::nanf(""), negative = -1.0f;
  std::string b = good;
  std::memcpy(b.data() + header + 4 * 3, &nan, 4);  // mean[3]
  EXPECT_ERROR_CONTAINS(MlpModel::load(b), "mean[3] is not finite");
  b = good;
  std::memcpy(b.data() + header + 4 * (12 + 5), &negative, 4);  // scale[5]
  EXPECT_ERROR_CONTAINS(MlpModel::load(b), "scale[5] is negative");
  b = good;
  const float huge = 1e30f;
  std::memcpy(b.data() + header + 4 * (24 + 2), &huge, 4);  // lo[2]
  EXPECT_ERROR_CONTAINS(MlpModel::load(b), "lo[2] (1e+30) is above its hi");
  b = good;
  std::memcpy(b.data() + good.size() - 4, &nan, 4);  // the output bias
  EXPECT_ERROR_CONTAINS(MlpModel::load(b), "weights[" + std::to_string(floats / 4 - 49) + "]");
  EXPECT_EQ(MlpModel::load(good).predict(x), m.predict(x));
}

TEST(AutotuneCostModel, MlpFitsFiveThousandRows) {
  // The size of a whole log's pre-training: 5,000 rows of 80 tasks, features of the real length;
  // it trains in well under a second on one core (printed, not asserted: sanitizer builds are
  // slower) and ranks a held-out task.
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Rows x;
  std::vector<double> y;
  std::vector<int> group;
  for (int t = 0; t < 80; ++t) {
    for (int i = 0; i < 64; ++i) {
      std::vector<float> r(autotune::kLoopFeatureLength, 0.0f);
      for (int f = 0; f < 100; ++f) r[size_t(f)] = u(rng);
      r[100] = float(t);  // a task constant: useless for ranking inside the task
      x.push_back(r);
      y.push_back((t + 1) * hidden(r));
      group.push_back(t);
    }
  }
  Rows test = random_rows(300, 22);
  std::vector<double> truth;
  for (auto& r : test) {
    truth.push_back(hidden(r));
    r.resize(autotune::kLoopFeatureLength, 0.0f);
  }
  MlpModel m;
  const std::clock_t c0 = std::clock();  // CPU time: the machine may be shared
  m.fit(x, y, group);
  const double cpu_ms = 1e3 * double(std::clock() - c0) / CLOCKS_PER_SEC;
  double rho = spearman(as_double(m.predict(test)), truth);
  std::cout << "case=mlp_fit rows=" << x.size() << " features=" << autotune::kLoopFeatureLength
            << " fit_cpu_ms=" << cpu_ms << " spearman=" << rho << "\n";
  EXPECT_GT(rho, 0.8);
}

// ---- real programs: a 2-D tiled, vectorized matmul with three split knobs ----

constexpr int kN = 128;

struct Candidate {
  std::vector<float> features;
  double gflops = 0;
};

Candidate measure(const space::Config& cfg) {
  te::Tensor a = te::placeholder({kN, kN}, ir::kFloat32, "A");
  te::Tensor b = te::placeholder({kN, kN}, ir::kFloat32, "B");
  te::Tensor c = topi::matmul(a, b);
  te::Schedule s = te::create_schedule({c});
  auto st = s[c];
  auto [yo, yi] = st.split(st.axis(0), int(cfg.split("tile_y")[1]));
  auto [xo, xi] = st.split(st.axis(1), int(cfg.split("tile_x")[1]));
  auto [ko, ki] = st.split(st.reduce_axis(0), int(cfg.split("tile_k")[1]));
  st.reorder({yo, xo, ko, yi, ki, xi});
  st.vectorize(xi);
  Candidate cand;
  cand.features = autotune::loop_features(compiler::lower(s, {a, b, c}, "f"));
  auto f = compiler::build(s, {a, b, c}, "llvm -mcpu=native", "f").function("f");
  auto A = testing::random_array({kN, kN}, 1), B = testing::random_array({kN, kN}, 2);
  auto C = testing::zeros({kN, kN});
  f(A, B, C);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    f(A, B, C);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  cand.gflops = 2.0 * kN * kN * kN / best * 1e-9;
  return cand;
}

TEST(AutotuneCostModel, RanksRealMatmulSchedules) {
  space::ConfigSpace space;
  space.define_split("tile_y", kN, 2);
  space.define_split("tile_x", kN, 2, space::SplitPolicy::kFactors, 64);
  space.define_split("tile_k", kN, 2);
  std::mt19937_64 rng(11);
  std::vector<uint64_t> picks;
  while (picks.size() < 40) {
    uint64_t i = rng() % space.size();
    if (std::find(picks.begin(), picks.end(), i) == picks.end()) picks.push_back(i);
  }
  std::vector<Candidate> cands;
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i : picks) cands.push_back(measure(space.get(i)));
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double lo = 1e30, hi = 0;
  for (auto& c : cands) lo = std::min(lo, c.gflops), hi = std::max(hi, c.gflops);
  std::cout << "measured " << cands.size() << " configs in " << s << " s, GFLOP/s from " << lo
            << " to " << hi << "\n";

  // Every kind, on the same measurements.
  for (const char* kind : autotune::kCostModelKinds) {
    // Two-fold cross-validation: train on one half, rank the other.
    double sum = 0;
    for (int fold = 0; fold < 2; ++fold) {
      Rows train_x, test_x;
      std::vector<double> train_y, test_y;
      for (size_t i = 0; i < cands.size(); ++i) {
        bool in_test = int(i % 2) == fold;
        (in_test ? test_x : train_x).push_back(cands[i].features);
        (in_test ? test_y : train_y).push_back(cands[i].gflops);
      }
      auto m = autotune::make_cost_model(kind);
      m->fit(train_x, train_y);
      double rho = spearman(as_double(m->predict(test_x)), test_y);
      std::cout << "case=real_matmul kind=" << kind << " fold=" << fold << " spearman=" << rho
                << "\n";
      sum += rho;
    }
    std::cout << "case=real_matmul kind=" << kind << " mean_spearman=" << sum / 2 << "\n";
    EXPECT_GT(sum / 2, 0.3) << kind;

    // Predict cost per candidate for a batch of 1000 (the paper: 0.67 ms).
    Rows all_x;
    std::vector<double> all_y;
    for (auto& c : cands) all_x.push_back(c.features), all_y.push_back(c.gflops);
    auto m = autotune::make_cost_model(kind);
    m->fit(all_x, all_y);
    Rows batch;
    for (int i = 0; i < 1000; ++i) batch.push_back(cands[size_t(i) % cands.size()].features);
    m->predict(batch);  // warm up
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      auto p0 = std::chrono::steady_clock::now();
      auto scores = m->predict(batch);
      best = std::min(
          best,
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - p0).count());
      ASSERT_EQ(scores.size(), batch.size());
    }
    std::cout << "case=predict_cost kind=" << kind << " us_per_candidate=" << best / 1000 << "\n";
    EXPECT_LT(best / 1000, 670.0) << kind;
  }
}

}  // namespace
}  // namespace kiln
