// What scoring one candidate costs the tuner's search, on the CPU template (conv2d_nchwc_x86,
// "llvm -mcpu=native") and the GPU template for OpenCL (conv2d_nchw_gpu) of the ResNet-18
// convolutions: the features the cost model reads (Task::lower_for_features + loop_features)
// against the same features of the full lowering a measurement needs (Task::lower), on the same
// random configs of each layer. With --records DIR (a bench_opencl --out DIR, or a bench_tuning
// DIR/xgb), also the model's ranking with either program's features on the measured records.
//
//   bench_search_cost [--layers C1,C2,... (all twelve)] [--candidates N (20 per layer)]
//                     [--seed S (1)] [--records DIR] [--target llvm|opencl (both)]
//
// Prints, per target,
//   case=features_<target> us_per_candidate=<a> full_lowering_us_per_candidate=<b> ratio=<b/a>
//        candidates=<n>
// (means over the candidates that lower; those that do not are counted and timed as well), and
// with --records, per layer whose log in DIR/<layer> (or DIR itself) holds at least 16 successful
// records of the target's task,
//   case=rank_<target>_<layer> spearman_features=<a> spearman_full_lowering=<b> records=<n>
// the mean Spearman rank correlation between the predicted scores and the measured GFLOP/s over
// 4 folds (a model fit on three quarters, scoring the fourth). Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/resnet_layers.h"
#include "compiler/autotune/features.h"
#include "compiler/autotune/xgb_model.h"
#include "records/record_log.h"
#include "tests/common/rank_correlation.h"

namespace {

using kiln::testing::spearman;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kiln::autotune::Task;
using kiln::bench::ConvLayer;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The loop features of `program()`, zeros when it does not lower (as the tuner scores it).
template <typename Lower>
std::vector<float> features_of(Lower program) {
  try {
    return kiln::autotune::loop_features(program());
  } catch (const std::exception&) {
    return std::vector<float>(kiln::autotune::kLoopFeatureLength, 0.0f);
  }
}

/// The mean Spearman correlation over 4 folds of a model fit on `x` (measured `y`).
double cross_validated_rank(const std::vector<std::vector<float>>& x, const std::vector<double>& y,
                            uint64_t seed) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  constexpr int kFolds = 4;
  double sum = 0;
  for (int f = 0; f < kFolds; ++f) {
    std::vector<std::vector<float>> tx, vx;
    std::vector<double> ty, vy;
    for (size_t i = 0; i < order.size(); ++i) {
      const bool held = static_cast<int>(i % kFolds) == f;
      (held ? vx : tx).push_back(x[order[i]]);
      (held ? vy : ty).push_back(y[order[i]]);
    }
    kiln::autotune::XgbModel model;
    model.fit(tx, ty, std::vector<int>(tx.size(), 0));
    const std::vector<float> s = model.predict(vx);
    sum += spearman(std::vector<double>(s.begin(), s.end()), vy);
  }
  return sum / kFolds;
}

/// The record log of `layer` under `dir`: DIR/<layer> when it exists, else DIR itself.
std::string log_dir(const std::string& dir, const ConvLayer& l) {
  const fs::path p = fs::path(dir) / l.name;
  return fs::is_directory(p) ? p.string() : dir;
}

void run_target(const std::string& target, const std::vector<ConvLayer>& layers, int candidates,
                uint64_t seed, const std::string& records_dir) {
  using namespace kiln;
  std::mt19937_64 rng(seed);
  double cheap_s = 0, full_s = 0;
  int n = 0;
  for (const ConvLayer& l : layers) {
    const Task task = target == "opencl" ? bench::opencl_layer_task(l) : bench::layer_task(l);
    std::uniform_int_distribution<uint64_t> pick(0, task.space.size() - 1);
    for (int c = 0; c < candidates; ++c) {
      const space::Config cfg = task.space.get(pick(rng));
      auto t0 = Clock::now();
      features_of([&] { return task.lower_for_features(cfg); });
      cheap_s += seconds_since(t0);
      t0 = Clock::now();
      features_of([&] { return task.lower(cfg); });
      full_s += seconds_since(t0);
      ++n;
    }
    std::cerr << "bench_search_cost: " << target << " " << l.name << ": " << n
              << " candidates so far\n";
  }
  if (n > 0) {
    const double a = cheap_s / n * 1e6, b = full_s / n * 1e6;
    std::printf(
        "case=features_%s us_per_candidate=%.0f full_lowering_us_per_candidate=%.0f ratio=%.1f "
        "candidates=%d\n",
        target.c_str(), a, b, b / a, n);
    std::fflush(stdout);
  }
  if (records_dir.empty()) return;
  for (const ConvLayer& l : layers) {
    const Task task = target == "opencl" ? bench::opencl_layer_task(l) : bench::layer_task(l);
    const std::string dir = log_dir(records_dir, l);
    if (!fs::is_directory(dir)) continue;
    records::RecordLog log = records::RecordLog::open(dir);
    std::vector<std::vector<float>> cheap, full;
    std::vector<double> y;
    for (const records::MeasureRecord& r : log.records(task.key, task.target)) {
      if (r.gflops <= 0 || r.config_index >= task.space.size()) continue;
      const space::Config cfg = task.space.get(r.config_index);
      cheap.push_back(features_of([&] { return task.lower_for_features(cfg); }));
      full.push_back(features_of([&] { return task.lower(cfg); }));
      y.push_back(r.gflops);
    }
    if (y.size() < 16) continue;
    std::printf("case=rank_%s_%s spearman_features=%.3f spearman_full_lowering=%.3f records=%zu\n",
                target.c_str(), l.name, cross_validated_rank(cheap, y, seed),
                cross_validated_rank(full, y, seed), y.size());
    std::fflush(stdout);
  }
}

const kiln::cli::Program kBench{
    .name = "bench_search_cost",
    .summary =
        "What scoring a candidate costs the tuner's search: the cost model's features "
        "against a full lowering's, on the CPU and OpenCL templates of ResNet-18's "
        "convolutions.",
    .flags = {{"--layers", "C1,C2,...", "the layers (default: all twelve)"},
              {"--candidates", "N", "random configs per layer and target (default: 20)"},
              {"--seed", "S", "of the configs and folds (default: 1)"},
              {"--records", "DIR", "record logs to compare the model's ranking on (DIR/<layer>)"},
              {"--target", "T", "llvm or opencl (default: both)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using namespace kiln;
  const std::vector<ConvLayer> layers = bench::select_layers(args.get("--layers"));
  const int candidates = args.has("--candidates")
                             ? cli::positive_number(args.get("--candidates"), "--candidates")
                             : 20;
  const uint64_t seed =
      args.has("--seed") ? static_cast<uint64_t>(cli::positive_number(args.get("--seed"), "--seed"))
                         : 1;
  const std::string target = args.get("--target");
  if (!target.empty() && target != "llvm" && target != "opencl")
    throw cli::UsageError("--target must be llvm or opencl, got '" + target + "'");
  try {
    for (const char* t : {"llvm", "opencl"}) {
      if (target.empty() || target == t)
        run_target(t, layers, candidates, seed, args.get("--records"));
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_search_cost: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
