// The tuner on the OpenCL device: each ResNet-18 convolution layer of the TVM paper (Table 2;
// batch 1, fp32, NCHW) as a conv2d_nchw_gpu task for target "opencl", its default config measured
// and then tuned (XGBoost explorer, the default measured first) on this machine's OpenCL device
// (PoCL on a CPU here, a Mali or any GPU elsewhere), each layer into a fresh record log under DIR.
// Then the fusion ablation on the same device: the five models built for OpenCL with and without
// operator fusion, each checked against ONNX Runtime (1e-4) and timed.
//
//   bench_opencl [--trials N (64)] [--layers C1,C2,... (all twelve; "none")] [--out DIR]
//                [--models NAME,... (resnet18,mobilenetv2,dqn,dcgan,lstm; "none")]
//
// Prints, per layer and then over the layers measured,
//   case=search_cost_opencl_<layer> search_s_per_round=<s> measure_s_per_round=<m> rounds=<r>
//        scored=<k>   (the tuner's time choosing each batch against measuring it; k: candidates
//        the cost model scored)
//   case=opencl_conv_<layer> default_gflops=<a> tuned_gflops=<b> speedup=<b/a> trials=<n>
//   case=opencl_geomean speedup=<g> layers=<k>
// then per model
//   case=fusion_<model>_opencl fused_ms=<a> unfused_ms=<b> speedup=<b/a>
// Progress goes to stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "bench/resnet_layers.h"
#include "compiler/autotune/local_measurer.h"
#include "compiler/autotune/tuner.h"
#include "records/record_log.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using kiln::bench::ConvLayer;

constexpr const char* kTarget = kiln::bench::kOpenClTarget;

/// The tuner's time on a layer: searching (the explorer scoring candidates, the model's refits)
/// against measuring (lowering, building and running the batch), per round.
void print_search_cost(const char* layer, const kiln::autotune::TaskResult& r) {
  const double rounds = std::max(r.rounds, 1);
  std::printf(
      "case=search_cost_opencl_%s search_s_per_round=%.3f measure_s_per_round=%.3f rounds=%d "
      "scored=%d\n",
      layer, r.search_s / rounds, r.measure_s / rounds, r.rounds, r.scored);
}

/// `name` in the comma-separated `list` (everything when the list is empty).
bool listed(const std::string& list, const std::string& name) {
  return list.empty() || ("," + list + ",").find("," + name + ",") != std::string::npos;
}

/// The fusion ablation: each model built for OpenCL fused and unfused, checked, and timed.
void fusion_ablation(const std::string& models_arg) {
  using namespace kiln;
  const std::vector<std::string> all = {"resnet18", "mobilenetv2", "dqn", "dcgan", "lstm"};
  std::vector<std::string> models;
  for (const std::string& m : all)
    if (listed(models_arg, m)) models.push_back(m);
  if (models.empty()) return;
  testing::TempDir dir("kiln_bench_opencl_models");
  const std::string d = dir.path().string();
  std::string make = "python3 " + bench::quote(KILN_MAKE_MODELS_SCRIPT) + " " + bench::quote(d);
  for (const std::string& m : models) make += " --only " + m;
  bench::run_command(make + " 2>/dev/null", "bench_opencl");
  for (const std::string& name : models) {
    double ms[2] = {NAN, NAN};
    std::string error;
    for (int fuse = 0; fuse < 2 && error.empty(); ++fuse) {
      graph::BuildOptions options;
      options.fuse = fuse == 1;
      std::cerr << "bench_opencl: " << name << (fuse ? " fused" : " unfused") << "\n";
      bench::BuiltModel b =
          bench::build_and_check(d, name, kTarget, options, {}, 1e-4, TargetKind::kOpenCL);
      if (!b.exec) {
        error = b.error;
        break;
      }
      ms[fuse] = bench::median_ms([&] { b.exec->run(); }, 2.0);
    }
    if (!error.empty()) {
      std::printf("case=fusion_%s_opencl error=\"%s\"\n", name.c_str(), error.c_str());
    } else {
      std::printf("case=fusion_%s_opencl fused_ms=%.3f unfused_ms=%.3f speedup=%.3f\n",
                  name.c_str(), ms[1], ms[0], ms[0] / ms[1]);
    }
    std::fflush(stdout);
  }
}

const kiln::cli::Program kBench{
    .name = "bench_opencl",
    .summary =
        "The ResNet-18 convolutions tuned on this machine's OpenCL device against their "
        "default configs, then the models with and without fusion on it.",
    .flags = {{"--trials", "N", "configs measured per layer (default: 64)"},
              {"--layers", "C1,C2,...", "the layers to tune, or none (default: all twelve)"},
              {"--models", "NAME,...",
               "the models of the fusion ablation, or none (default: resnet18,mobilenetv2,dqn,"
               "dcgan,lstm)"},
              {"--out", "DIR", "the record logs (default: build/release/bench-results/opencl)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using namespace kiln;
  const int trials =
      args.has("--trials") ? cli::positive_number(args.get("--trials"), "--trials") : 64;
  const std::string layers_arg = args.get("--layers"), models_arg = args.get("--models");
  const std::string out_dir = args.get("--out", std::string(KILN_BENCH_RESULTS_DIR) + "/opencl");
  std::vector<ConvLayer> layers;
  for (const ConvLayer& l : bench::resnet18_layers()) {
    if (listed(layers_arg, l.name)) layers.push_back(l);
  }
  if (layers.empty() && layers_arg != "none") {
    throw cli::UsageError("--layers names no layer of ResNet-18 (C1 to C12), got '" + layers_arg +
                          "'");
  }
  try {
    autotune::TuneOptions options;
    options.trials = trials;
    options.local.device = autotune::local_device_fingerprint(kTarget);
    // A candidate that needs more than this to compile and measure is not one to keep.
    options.local.run_timeout_s = 10;
    std::cerr << "bench_opencl: measuring on " << options.local.device << "\n";
    double log_sum = 0;
    int measured = 0;
    for (const ConvLayer& l : layers) {
      const autotune::Task task = bench::opencl_layer_task(l);
      const std::string dir = out_dir + "/" + l.name;
      fs::remove_all(dir);
      fs::create_directories(dir);
      records::RecordLog log = records::RecordLog::open(dir);
      autotune::Tuner tuner(log, options);
      const autotune::TaskResult r = tuner.tune(task, {});
      double default_gflops = 0;
      for (const records::MeasureRecord& rec : log.records(task.key, kTarget)) {
        if (rec.config_index == task.default_config.index()) default_gflops = rec.gflops;
      }
      std::cerr << "bench_opencl: " << l.name << ": " << r.trials << " trials, errors:";
      for (const auto& [kind, n] : r.errors) std::cerr << " " << kind << "=" << n;
      std::cerr << "\n";
      print_search_cost(l.name, r);
      if (default_gflops <= 0 || !r.has_best) {
        std::printf(
            "case=opencl_conv_%s default_gflops=%.2f tuned_gflops=%.2f speedup=nan "
            "trials=%d\n",
            l.name, default_gflops, r.best_gflops, r.trials);
        continue;
      }
      const double speedup = r.best_gflops / default_gflops;
      std::printf(
          "case=opencl_conv_%s default_gflops=%.2f tuned_gflops=%.2f speedup=%.2f "
          "trials=%d\n",
          l.name, default_gflops, r.best_gflops, speedup, r.trials);
      std::fflush(stdout);
      log_sum += std::log(speedup);
      ++measured;
    }
    if (!layers.empty()) {
      std::printf("case=opencl_geomean speedup=%.2f layers=%d\n",
                  measured > 0 ? std::exp(log_sum / measured) : NAN, measured);
      std::fflush(stdout);
    }
    if (models_arg != "none") fusion_ablation(models_arg);
  } catch (const std::exception& e) {
    std::cerr << "bench_opencl: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
