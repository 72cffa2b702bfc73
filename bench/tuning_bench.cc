// Tuning curves of the twelve ResNet-18 convolution layers of the TVM paper (Table 2; batch 1,
// fp32, the blocked NCHW[x]c template conv2d_nchwc_x86 on "llvm -mcpu=native"): the cost model
// (XGBoost + simulated annealing, explorer "xgb") against random and genetic search ("random",
// "ga"), each with the same seed and the same trial budget, each into its own fresh record log
// (DIR/<explorer>/, removed first). Candidates are measured by the Tuner in a guarded child with
// ONE thread (TuneOptions.local.threads = 1: single-thread kernels are less noisy on a shared
// machine), and without the tuner's usual first measurement of the template's default, so that the
// curves show what each explorer finds by itself.
//
//   bench_tuning [--trials N (64)] [--batch B (16)] [--seed S (1)] [--layers C1,C2,...]
//                [--out DIR (build/release/bench-results/tuning)] [--no-plot]
//
// Writes DIR/tuning_curves.csv (layer,explorer,trial,best_gflops: the best GFLOP/s after each
// measurement, in the order measured) and DIR/tuning_curves.png (bench/plot_curves.py), and prints
//   case=curve_<layer> trials_to_95pct_xgb=<a> trials_to_95pct_random=<b> trials_to_95pct_ga=<c>
//        best_gflops=<g> space=<configs>
// where a trial count is the first measurement (1-based) at which the explorer's best reaches 95%
// of the best GFLOP/s found by ANY explorer on that layer; an explorer that never gets there
// prints budget + 1 (e.g. 65 for 64 trials). An explorer may stop before the budget when it has
// measured the whole space. Then, after training an XgbModel on one layer's xgb records:
//   case=predict_cost us_per_candidate=<t> features_us_per_candidate=<f> candidates=1000
// (predict alone, on 1000 candidates' precomputed loop features; features =
// Task::lower_for_features + loop_features per distinct config), and per layer the xgb explorer's
// time choosing each batch against measuring it (bench_opencl's line on the CPU):
//   case=search_cost_llvm_<layer> search_s_per_round=<s> measure_s_per_round=<m> rounds=<r>
//        scored=<k>
// Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/resnet_layers.h"
#include "bench/tuning_curve.h"
#include "compiler/autotune/features.h"
#include "compiler/autotune/tuner.h"
#include "compiler/autotune/xgb_model.h"
#include "records/record_log.h"

namespace {

using kiln::bench::trials_to;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kiln::autotune::Task;
using kiln::autotune::XgbModel;
using kiln::bench::ConvLayer;
using kiln::records::MeasureRecord;
using kiln::records::RecordLog;

const std::vector<std::string> kExplorers = {"xgb", "random", "ga"};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// The predict_cost case: a model trained on `records` of `task`, scoring 1000 candidates.
void time_predict(const Task& task, const std::vector<MeasureRecord>& records) {
  std::map<uint64_t, std::vector<float>> feats;
  double feature_s = 0;
  auto feature = [&](uint64_t index) -> const std::vector<float>& {
    auto it = feats.find(index);
    if (it != feats.end()) return it->second;
    auto t0 = Clock::now();
    std::vector<float> f =
        kiln::autotune::loop_features(task.lower_for_features(task.space.get(index)));
    feature_s += seconds_since(t0);
    return feats.emplace(index, std::move(f)).first->second;
  };
  std::vector<std::vector<float>> x;
  std::vector<double> y;
  for (const MeasureRecord& r : records) {
    x.push_back(feature(r.config_index));
    y.push_back(r.gflops);
  }
  XgbModel model;
  model.fit(x, y);
  // 1000 candidates drawn from the space (with repetition: the space has fewer configs).
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> pick(0, task.space.size() - 1);
  std::vector<std::vector<float>> cand;
  for (int i = 0; i < 1000; ++i) cand.push_back(feature(pick(rng)));
  const double features_us = feature_s / static_cast<double>(feats.size()) * 1e6;
  std::vector<double> times;
  model.predict(cand);  // warm-up
  for (int r = 0; r < 21; ++r) {
    auto t0 = Clock::now();
    std::vector<float> s = model.predict(cand);
    times.push_back(seconds_since(t0));
    if (s.size() != cand.size())
      std::fprintf(stderr, "bench_tuning: predict returned %zu scores\n", s.size());
  }
  std::sort(times.begin(), times.end());
  std::printf(
      "case=predict_cost us_per_candidate=%.3f features_us_per_candidate=%.1f "
      "candidates=1000 train_rows=%zu\n",
      times[times.size() / 2] / 1000 * 1e6, features_us, x.size());
  std::fflush(stdout);
}

const kiln::cli::Program kBench{
    .name = "bench_tuning",
    .summary = "Tuning curves of the ResNet-18 convolutions: xgb against random against ga.",
    .flags = {{"--trials", "N", "configs measured per layer and explorer (default: 64)"},
              {"--batch", "B", "configs measured per round (default: 16)"},
              {"--seed", "S", "the explorers' seed (default: 1)"},
              {"--layers", "C1,C2,...", "the layers to tune (default: all twelve)"},
              {"--out", "DIR", "where the curves go (default: build/release/bench-results/tuning)"},
              {"--no-plot", "", "do not draw the curves (python3 with numpy draws them)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using kiln::cli::positive_number;
  const int trials = args.has("--trials") ? positive_number(args.get("--trials"), "--trials") : 64;
  const int batch = args.has("--batch") ? positive_number(args.get("--batch"), "--batch") : 16;
  const uint64_t seed =
      args.has("--seed") ? kiln::cli::number_at_least(args.get("--seed"), "--seed", 0) : 1;
  const std::string layer_list = args.get("--layers");
  const std::string out_dir = args.get("--out", std::string(KILN_BENCH_RESULTS_DIR) + "/tuning");
  const bool plot = !args.has("--no-plot");
  const std::vector<ConvLayer> layers = kiln::bench::select_layers(layer_list);
  fs::create_directories(out_dir);
  std::fprintf(stderr,
               "bench_tuning: %zu layers x {xgb, random, ga}, %d trials, batch %d, seed %lu, "
               "1 thread per measurement, logs in %s\n",
               layers.size(), trials, batch, static_cast<unsigned long>(seed), out_dir.c_str());

  // Fresh logs: earlier runs' records would be resumed by the tuner, not re-measured.
  std::map<std::string, RecordLog> logs;
  for (const std::string& e : kExplorers) {
    fs::remove_all(fs::path(out_dir) / e);
    logs.emplace(e, RecordLog::open((fs::path(out_dir) / e).string()));
  }

  const std::string csv_path = (fs::path(out_dir) / "tuning_curves.csv").string();
  std::ofstream csv(csv_path);
  csv << "layer,explorer,trial,best_gflops\n";
  const auto start = Clock::now();
  bool predicted = false;
  int failures = 0;

  for (const ConvLayer& l : layers) {
    Task task = kiln::bench::layer_task(l);
    std::map<std::string, std::vector<double>> curves;
    for (const std::string& e : kExplorers) {
      kiln::autotune::TuneOptions o;
      o.trials = trials;
      o.batch = batch;
      o.explorer = e;
      o.seed = seed;
      o.local.threads = 1;
      o.default_first = false;  // the explorers alone, not seeded with the template's default
      const auto t0 = Clock::now();
      o.progress = [&](const kiln::autotune::TuneProgress& p) {
        std::fprintf(stderr, "  %s %-6s %3d/%d best %.2f GFLOP/s  %.0f s\n", l.name, e.c_str(),
                     p.trials_done, p.trials_total, p.best_gflops, p.elapsed_s);
      };
      kiln::autotune::Tuner tuner(logs.at(e), o);
      kiln::autotune::TaskResult r;
      try {
        r = tuner.tune(task);
      } catch (const std::exception& ex) {
        std::fprintf(stderr, "bench_tuning: %s %s: tune failed: %s\n", l.name, e.c_str(),
                     ex.what());
        ++failures;
        continue;
      }
      std::string errs;
      for (const auto& [kind, n] : r.errors) errs += " " + kind + "=" + std::to_string(n);
      std::fprintf(stderr,
                   "%s %s: %d measured (%d reused programs) of a space of %lu, best %.2f "
                   "GFLOP/s (config %lu), %.1f s%s%s\n",
                   l.name, e.c_str(), r.measured_now, r.reused,
                   static_cast<unsigned long>(task.space.size()), r.best_gflops,
                   static_cast<unsigned long>(r.best_config), seconds_since(t0),
                   errs.empty() ? "" : ", errors:", errs.c_str());
      for (size_t i = 0; i < r.curve.size(); ++i)
        csv << l.name << "," << e << "," << i + 1 << "," << r.curve[i] << "\n";
      csv.flush();
      curves[e] = r.curve;
      if (e == "xgb") {
        const double rounds = std::max(r.rounds, 1);
        std::printf(
            "case=search_cost_llvm_%s search_s_per_round=%.3f measure_s_per_round=%.3f "
            "rounds=%d scored=%d\n",
            l.name, r.search_s / rounds, r.measure_s / rounds, r.rounds, r.scored);
        std::fflush(stdout);
      }
    }
    double best = 0;
    for (const auto& [e, c] : curves)
      if (!c.empty()) best = std::max(best, c.back());
    auto t95 = [&](const std::string& e) {
      auto it = curves.find(e);
      if (it == curves.end() || best <= 0) return trials + 1;
      return trials_to(it->second, 0.95 * best, trials + 1);
    };
    std::printf(
        "case=curve_%s trials_to_95pct_xgb=%d trials_to_95pct_random=%d "
        "trials_to_95pct_ga=%d best_gflops=%.2f space=%lu\n",
        l.name, t95("xgb"), t95("random"), t95("ga"), best,
        static_cast<unsigned long>(task.space.size()));
    std::fflush(stdout);

    // The cost model's prediction time, once, on the first layer with enough xgb records.
    if (!predicted) {
      std::vector<MeasureRecord> recs = logs.at("xgb").records(task.key, task.target);
      if (recs.size() >= 2) {
        try {
          time_predict(task, recs);
          predicted = true;
        } catch (const std::exception& ex) {
          std::fprintf(stderr, "bench_tuning: predict_cost on %s failed: %s\n", l.name, ex.what());
        }
      }
    }
    std::fprintf(stderr, "bench_tuning: %s done, %.0f s so far\n", l.name, seconds_since(start));
  }
  csv.close();
  std::fprintf(stderr, "bench_tuning: wrote %s (%.0f s in all)\n", csv_path.c_str(),
               seconds_since(start));

  if (plot) {
    const std::string png = (fs::path(out_dir) / "tuning_curves.png").string();
    const std::string cmd = std::string("python3 '") + KILN_PLOT_SCRIPT + "' '" + csv_path + "' '" +
                            png + "' --trials " + std::to_string(trials);
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "bench_tuning: plotting failed: %s\n", cmd.c_str());
      ++failures;
    } else {
      std::fprintf(stderr, "bench_tuning: wrote %s\n", png.c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
