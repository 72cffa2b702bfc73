// The tuner on the OpenCL device: each ResNet-18 convolution layer of the TVM paper (Table 2;
// batch 1, fp32, NCHW) as a conv2d_nchw_gpu task for target "opencl", its default config measured
// and then tuned (XGBoost explorer, the default measured first) on this machine's OpenCL device
// (PoCL on a CPU here, a Mali or any GPU elsewhere), each layer into a fresh record log under DIR.
//
//   bench_opencl [--trials N (64)] [--layers C1,C2,... (all twelve)] [--out DIR]
//
// Prints, per layer and then over the layers measured,
//   case=opencl_conv_<layer> default_gflops=<a> tuned_gflops=<b> speedup=<b/a> trials=<n>
//   case=opencl_geomean speedup=<g> layers=<k>
// Progress goes to stderr.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/resnet_layers.h"
#include "compiler/autotune/local_measurer.h"
#include "compiler/autotune/tuner.h"
#include "records/record_log.h"

namespace {

namespace fs = std::filesystem;
using kiln::bench::ConvLayer;

constexpr const char* kTarget = "opencl";

/// The layer's NCHW convolution as the GPU template's task.
kiln::autotune::Task opencl_task(const ConvLayer& l) {
  using namespace kiln;
  te::Tensor data = te::placeholder({1, l.ic, l.hw, l.hw}, ir::kFloat32, "data");
  te::Tensor kernel = te::placeholder({l.oc, l.ic, l.k, l.k}, ir::kFloat32, "kernel");
  const int p = l.pad();
  te::Tensor out = topi::conv2d_nchw(data, kernel, {l.stride, l.stride}, {p, p, p, p});
  return autotune::Task::make("conv2d_nchw_gpu", out, kTarget);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  int trials = 64;
  std::string layers_arg, out_dir = std::string(KILN_BENCH_RESULTS_DIR) + "/opencl";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--trials" && i + 1 < argc) {
      trials = std::atoi(argv[++i]);
    } else if (a == "--layers" && i + 1 < argc) {
      layers_arg = argv[++i];
    } else if (a == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else {
      std::cerr << "usage: bench_opencl [--trials N] [--layers C1,C2,...] [--out DIR]\n";
      return 2;
    }
  }
  std::vector<ConvLayer> layers;
  for (const ConvLayer& l : bench::resnet18_layers()) {
    if (layers_arg.empty() || ("," + layers_arg + ",").find("," + std::string(l.name) + ",") !=
                                  std::string::npos)
      layers.push_back(l);
  }
  if (layers.empty() || trials < 1) {
    std::cerr << "bench_opencl: no layer named in '" << layers_arg << "' or no trials\n";
    return 2;
  }
  try {
    autotune::TuneOptions options;
    options.trials = trials;
    options.local.device = autotune::local_device_fingerprint(kTarget);
    options.local.run_timeout_s = 60;
    std::cerr << "bench_opencl: measuring on " << options.local.device << "\n";
    double log_sum = 0;
    int measured = 0;
    for (const ConvLayer& l : layers) {
      const autotune::Task task = opencl_task(l);
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
      if (default_gflops <= 0 || !r.has_best) {
        std::printf("case=opencl_conv_%s default_gflops=%.2f tuned_gflops=%.2f speedup=nan "
                    "trials=%d\n",
                    l.name, default_gflops, r.best_gflops, r.trials);
        continue;
      }
      const double speedup = r.best_gflops / default_gflops;
      std::printf("case=opencl_conv_%s default_gflops=%.2f tuned_gflops=%.2f speedup=%.2f "
                  "trials=%d\n",
                  l.name, default_gflops, r.best_gflops, speedup, r.trials);
      std::fflush(stdout);
      log_sum += std::log(speedup);
      ++measured;
    }
    std::printf("case=opencl_geomean speedup=%.2f layers=%d\n",
                measured > 0 ? std::exp(log_sum / measured) : NAN, measured);
  } catch (const std::exception& e) {
    std::cerr << "bench_opencl: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
