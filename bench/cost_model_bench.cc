// The cost model kinds (compiler/autotune/cost_model.h: "xgb", XGBoost's ranking trees, and
// "mlp", the small neural ranker) compared on the same ResNet-18 convolutions of the TVM paper
// (bench/resnet_layers.h; the blocked template conv2d_nchwc_x86 on "llvm -mcpu=native"), measured
// by the Tuner with ONE thread per candidate (TuneOptions.local.threads = 1, as bench_tuning).
// By default six of the twelve layers, two of each kind of convolution and none of the slowest
// to measure: C2, C3 (56x56; 3x3 and 1x1), C6, C8 (28x28; 3x3, and 1x1 stride 2), C9, C11
// (14x14; 3x3, and 1x1 stride 2); about 15 minutes on 2 cores.
//
//   bench_cost_models [--trials N (64)] [--batch B (16)] [--seed S (1)] [--layers C1,C2,...]
//                     [--out DIR (build/release/bench-results/cost_models)] [--reuse-records]
//                     [--no-tuning]
//
// Two measures, each on the same records for every kind:
//  (a) ranking on a held-out layer: each layer measured at N random configs (explorer "random",
//      DIR/random/); for each layer, a model trained on the other layers' records (one group per
//      layer; the loop features, failed candidates as throughput 0) ranks the held-out layer's
//      records: the Spearman rank correlation of its scores with the measured GFLOP/s.
//  (b) tuning: each layer tuned by the model-guided explorer ("xgb": simulated annealing on the
//      model's scores) with cost_model = <kind>, the same seed and budget of N trials, without the
//      template's default first, each kind into its own fresh log (DIR/tune_<kind>/), the kinds in
//      turn layer by layer; trials to 95% is the first trial (1-based) whose best reaches 95% of
//      the best GFLOP/s either kind found on that layer (N + 1: never).
// Prints per layer
//   case=cost_model_layer_<layer> spearman_<kind>=... trials_to_95pct_<kind>=... best_gflops=...
// then per kind (medians over the layers; of an even count, the mean of the middle two)
//   case=cost_model_<kind> spearman_heldout=<median> trials_to_95pct=<median>
//        fit_ms=<one fit on every layer's records> predict_us_per_candidate=<on 1000> layers=<n>
// --reuse-records keeps DIR/random/ from an earlier run (the tuner measures only what it lacks),
// to compare models again without measuring; the tuning logs are always fresh. --no-tuning skips
// (b) (its keys then print -1). Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/resnet_layers.h"
#include "bench/tuning_curve.h"
#include "compiler/autotune/cost_model.h"
#include "compiler/autotune/features.h"
#include "compiler/autotune/tuner.h"
#include "records/record_log.h"
#include "tests/common/rank_correlation.h"

namespace {

using kiln::bench::median;
using kiln::bench::trials_to;

using kiln::testing::spearman;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kiln::autotune::CostModel;
using kiln::autotune::Task;
using kiln::bench::ConvLayer;
using kiln::records::MeasureRecord;
using kiln::records::RecordLog;
using Rows = std::vector<std::vector<float>>;

constexpr const char* kDefaultLayers = "C2,C3,C6,C8,C9,C11";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The loop features of one config, as the Tuner computes them (zeros for one that does not
/// lower).
std::vector<float> features_of(const Task& task, uint64_t index) {
  try {
    return kiln::autotune::loop_features(task.lower_for_features(task.space.get(index)));
  } catch (const std::exception&) {
    return std::vector<float>(kiln::autotune::kLoopFeatureLength, 0.0f);
  }
}

/// One layer's measured records as model rows.
struct LayerRows {
  Rows x;
  std::vector<double> gflops;
};

kiln::autotune::TuneOptions tune_options(int trials, int batch, uint64_t seed) {
  kiln::autotune::TuneOptions o;
  o.trials = trials;
  o.batch = batch;
  o.seed = seed;
  o.local.threads = 1;
  o.default_first = false;  // what the search finds by itself
  return o;
}

const kiln::cli::Program kBench{
    .name = "bench_cost_models",
    .summary =
        "The cost model kinds (xgb, mlp) on the same ResNet-18 records: rank correlation "
        "on held-out layers and trials to 95% when guiding the search.",
    .flags = {{"--trials", "N",
               "random configs measured per layer, and the tuning budget "
               "per layer and kind (default: 64)"},
              {"--batch", "B", "configs measured per round (default: 16)"},
              {"--seed", "S", "the explorers' seed (default: 1)"},
              {"--layers", "C1,C2,...",
               std::string("the layers (default: ") + kDefaultLayers + ")"},
              {"--out", "DIR",
               "where the logs go (default: build/release/bench-results/cost_models)"},
              {"--reuse-records", "",
               "keep DIR/random/ from an earlier run: measure only what it lacks"},
              {"--no-tuning", "", "only the ranking on held-out layers, no tuning runs"}},
};

int run_bench(const kiln::cli::Args& args) {
  using kiln::cli::positive_number;
  const int trials = args.has("--trials") ? positive_number(args.get("--trials"), "--trials") : 64;
  const int batch = args.has("--batch") ? positive_number(args.get("--batch"), "--batch") : 16;
  const uint64_t seed =
      args.has("--seed") ? kiln::cli::number_at_least(args.get("--seed"), "--seed", 0) : 1;
  const std::vector<ConvLayer> layers =
      kiln::bench::select_layers(args.get("--layers", kDefaultLayers));
  const std::string out_dir =
      args.get("--out", std::string(KILN_BENCH_RESULTS_DIR) + "/cost_models");
  std::vector<std::string> kinds(std::begin(kiln::autotune::kCostModelKinds),
                                 std::end(kiln::autotune::kCostModelKinds));
  fs::create_directories(out_dir);
  std::fprintf(stderr,
               "bench_cost_models: %zu layers, %d trials, batch %d, seed %lu, 1 thread per "
               "measurement, logs in %s\n",
               layers.size(), trials, batch, static_cast<unsigned long>(seed), out_dir.c_str());
  const auto start = Clock::now();
  std::vector<Task> tasks;
  for (const ConvLayer& l : layers) tasks.push_back(kiln::bench::layer_task(l));

  // (a) The same records for every kind: N random configs per layer.
  const fs::path random_dir = fs::path(out_dir) / "random";
  if (!args.has("--reuse-records")) fs::remove_all(random_dir);
  std::vector<LayerRows> rows(layers.size());
  {
    RecordLog log = RecordLog::open(random_dir.string());
    kiln::autotune::TuneOptions o = tune_options(trials, batch, seed);
    o.explorer = "random";
    kiln::autotune::Tuner tuner(log, o);
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto t0 = Clock::now();
      const kiln::autotune::TaskResult r = tuner.tune(tasks[i]);
      for (const MeasureRecord& rec : log.records(tasks[i].key, tasks[i].target)) {
        rows[i].x.push_back(features_of(tasks[i], rec.config_index));
        rows[i].gflops.push_back(rec.gflops);
      }
      std::fprintf(stderr, "  random %s: %d measured now, %zu records, best %.2f GFLOP/s, %.0f s\n",
                   layers[i].name, r.measured_now, rows[i].x.size(), r.best_gflops,
                   seconds_since(t0));
    }
  }

  // Leave one layer out, per kind; then one fit on everything and the predict cost.
  std::map<std::string, std::vector<double>> rho;  // kind -> per layer
  std::map<std::string, double> fit_ms, predict_us;
  Rows candidates;  // 1000 configs of the first layer, drawn with repetition
  {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<uint64_t> pick(0, tasks[0].space.size() - 1);
    std::map<uint64_t, std::vector<float>> cache;
    for (int i = 0; i < 1000; ++i) {
      const uint64_t c = pick(rng);
      auto it = cache.find(c);
      if (it == cache.end()) it = cache.emplace(c, features_of(tasks[0], c)).first;
      candidates.push_back(it->second);
    }
  }
  for (const std::string& kind : kinds) {
    for (size_t h = 0; h < layers.size(); ++h) {
      Rows x;
      std::vector<double> y;
      std::vector<int> group;
      for (size_t i = 0; i < layers.size(); ++i) {
        if (i == h) continue;
        x.insert(x.end(), rows[i].x.begin(), rows[i].x.end());
        y.insert(y.end(), rows[i].gflops.begin(), rows[i].gflops.end());
        group.insert(group.end(), rows[i].x.size(), static_cast<int>(i));
      }
      std::unique_ptr<CostModel> m = kiln::autotune::make_cost_model(kind);
      m->fit(x, y, group);
      const std::vector<float> s = m->predict(rows[h].x);
      rho[kind].push_back(spearman(std::vector<double>(s.begin(), s.end()), rows[h].gflops));
    }
    Rows x;
    std::vector<double> y;
    std::vector<int> group;
    for (size_t i = 0; i < layers.size(); ++i) {
      x.insert(x.end(), rows[i].x.begin(), rows[i].x.end());
      y.insert(y.end(), rows[i].gflops.begin(), rows[i].gflops.end());
      group.insert(group.end(), rows[i].x.size(), static_cast<int>(i));
    }
    std::unique_ptr<CostModel> m = kiln::autotune::make_cost_model(kind);
    std::vector<double> fits, predicts;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = Clock::now();
      m->fit(x, y, group);
      fits.push_back(seconds_since(t0) * 1e3);
    }
    m->predict(candidates);  // warm-up
    for (int rep = 0; rep < 11; ++rep) {
      const auto t0 = Clock::now();
      m->predict(candidates);
      predicts.push_back(seconds_since(t0) * 1e6 / static_cast<double>(candidates.size()));
    }
    fit_ms[kind] = median(fits);
    predict_us[kind] = median(predicts);
    std::fprintf(stderr, "  %s: fit on %zu rows in %.1f ms\n", kind.c_str(), x.size(),
                 fit_ms[kind]);
  }

  // (b) Tuning guided by each kind, layer by layer, the kinds in turn.
  const bool tune = !args.has("--no-tuning");
  std::map<std::string, RecordLog> logs;
  for (const std::string& kind : tune ? kinds : std::vector<std::string>{}) {
    const fs::path dir = fs::path(out_dir) / ("tune_" + kind);
    fs::remove_all(dir);
    logs.emplace(kind, RecordLog::open(dir.string()));
  }
  std::map<std::string, std::vector<double>> t95;  // kind -> per layer
  int failures = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    std::map<std::string, std::vector<double>> curves;
    for (const std::string& kind : tune ? kinds : std::vector<std::string>{}) {
      kiln::autotune::TuneOptions o = tune_options(trials, batch, seed);
      o.explorer = "xgb";
      o.cost_model = kind;
      kiln::autotune::Tuner tuner(logs.at(kind), o);
      const auto t0 = Clock::now();
      try {
        const kiln::autotune::TaskResult r = tuner.tune(tasks[i]);
        curves[kind] = r.curve;
        std::fprintf(stderr, "  tune %s %s: %d measured, best %.2f GFLOP/s, %.0f s\n",
                     layers[i].name, kind.c_str(), r.measured_now, r.best_gflops,
                     seconds_since(t0));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cost_models: %s %s: tune failed: %s\n", layers[i].name,
                     kind.c_str(), e.what());
        ++failures;
      }
    }
    double best = 0;
    for (const auto& [kind, c] : curves)
      if (!c.empty()) best = std::max(best, c.back());
    std::string line = std::string("case=cost_model_layer_") + layers[i].name;
    for (const std::string& kind : kinds) {
      auto it = curves.find(kind);
      int t = it == curves.end() || best <= 0 ? trials + 1
                                              : trials_to(it->second, 0.95 * best, trials + 1);
      if (!tune) t = -1;
      t95[kind].push_back(t);
      char buf[96];
      std::snprintf(buf, sizeof buf, " spearman_%s=%.3f trials_to_95pct_%s=%d", kind.c_str(),
                    rho[kind][i], kind.c_str(), t);
      line += buf;
    }
    std::printf("%s best_gflops=%.2f\n", line.c_str(), best);
    std::fflush(stdout);
  }
  for (const std::string& kind : kinds) {
    std::printf(
        "case=cost_model_%s spearman_heldout=%.3f trials_to_95pct=%.1f fit_ms=%.1f "
        "predict_us_per_candidate=%.3f layers=%zu\n",
        kind.c_str(), median(rho[kind]), median(t95[kind]), fit_ms[kind], predict_us[kind],
        layers.size());
  }
  std::fprintf(stderr, "bench_cost_models: %.0f s in all\n", seconds_since(start));
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
