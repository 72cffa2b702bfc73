// Single layers the wide zoo found slow (tests/models/make_layers.py: dilated 3x3 convolutions,
// 1-D convolutions, MatMul against a constant weight) at batch 1, untuned, Kiln against ONNX
// Runtime with the same threads, in the same run:
//   case=layer_<name>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> kiln_gflops=<g>   threads 1, 2
//   case=layer_geomean_t<threads> ratio=<g> layers=<n> ok=<k> worst=<name>:<ratio>
// where GFLOP/s counts the layer's 2 x multiply-adds (padded taps included, as the reference
// computes them), and the geomean is over the layers that built and matched. The layers are
// written into a temporary folder first (python3 make_layers.py), so nothing has to be built or
// run beforehand. As bench_zoo does, layer by layer ONNX Runtime (bench/models_ref.py, in its own
// process) and Kiln are timed in turn, R rounds each (--rounds, default 3), and each side's median
// over the rounds makes the ratio, so that a burst of load on a shared machine falls on both sides
// or is dropped. Kiln builds with the default BuildOptions for "llvm -mcpu=native" and checks its
// output against ONNX Runtime's (max|diff| / max|ref| <= 1e-4) before timing.
//
//   bench_layers [--min-time S] [--rounds R] [NAME ...]
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "bench/tuning_curve.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/temp_dir.h"

namespace {

using kiln::bench::median;
using kiln::bench::quote;

const std::vector<int> kThreads = {1, 2};
constexpr double kTolerance = 1e-4;
constexpr const char* kTarget = "llvm -mcpu=native";

std::string run_command(const std::string& cmd) {
  return kiln::bench::run_command(cmd, "bench_layers");
}

/// The layers as make_layers.py lists them: name -> flops (2 x multiply-adds).
std::vector<std::pair<std::string, double>> layer_list() {
  std::istringstream in(run_command("python3 " + quote(KILN_MAKE_LAYERS_SCRIPT) + " --list"));
  std::vector<std::pair<std::string, double>> layers;
  std::string name;
  double flops;
  while (in >> name >> flops) layers.emplace_back(name, flops);
  return layers;
}

const kiln::cli::Program kBench{
    .name = "bench_layers",
    .operands = "[NAME...]",
    .summary =
        "Single layers (tests/models/make_layers.py; default: every one) compiled by Kiln "
        "against ONNX Runtime.",
    .flags = {{"--min-time", "S", "seconds of timing per layer and round (default: 0.5)"},
              {"--rounds", "R", "rounds of each side, timed in turn (default: 3)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const auto known = layer_list();
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                              : 0.5;
  const int rounds =
      args.has("--rounds") ? kiln::cli::positive_number(args.get("--rounds"), "--rounds") : 3;
  std::vector<std::pair<std::string, double>> layers;
  for (const std::string& a : args.operands) {
    bool found = false;
    for (const auto& l : known) {
      if (l.first == a) {
        layers.push_back(l);
        found = true;
      }
    }
    if (!found) {
      std::string names;
      for (const auto& l : known) names += " " + l.first;
      throw kiln::cli::UsageError("bench_layers has no layer '" + a + "' (names:" + names + ")");
    }
  }
  if (layers.empty()) layers = known;

  kiln::testing::TempDir dir("kiln_bench_layers");
  const std::string d = dir.path().string();
  std::string make_cmd = "python3 " + quote(KILN_MAKE_LAYERS_SCRIPT) + " " + quote(d);
  for (const auto& l : layers) make_cmd += " --only " + l.first;
  run_command(make_cmd + " >/dev/null");

  std::map<int, kiln::bench::RatioGeomean> summary;
  for (const auto& [name, flops] : layers) {
    kiln::bench::BuiltModel b = kiln::bench::build_and_check(d, name, kTarget, {}, {}, kTolerance);
    if (!b.error.empty())
      std::fprintf(stderr, "bench_layers: %s: %s\n", name.c_str(), b.error.c_str());
    std::ostringstream ref_cmd;
    ref_cmd << "python3 " << quote(KILN_MODELS_REF_SCRIPT) << " " << quote(d) << " --min-time "
            << min_time << " --threads";
    for (int t : kThreads) ref_cmd << " " << t;
    ref_cmd << " --only " << name;
    std::map<int, std::vector<double>> ref_ms, kiln_ms;
    for (int r = 0; r < rounds; ++r) {
      std::istringstream in(run_command(ref_cmd.str()));
      std::string ref_name;
      int t;
      double ms;
      while (in >> ref_name >> t >> ms) ref_ms[t].push_back(ms);
      if (!b.exec) continue;
      for (int threads : kThreads) {
        kiln::runtime::set_num_threads(threads);
        kiln_ms[threads].push_back(kiln::bench::median_ms([&] { b.exec->run(); }, min_time));
      }
      kiln::runtime::set_num_threads(0);
    }
    for (int t : kThreads) {
      const double k = median(kiln_ms[t]), ref = median(ref_ms[t]);
      std::printf("case=layer_%s_t%d kiln_ms=%.3f ref_ms=%.3f ratio=%.3f kiln_gflops=%.1f\n",
                  name.c_str(), t, k, ref, ref / k, flops / k * 1e-6);
      std::fflush(stdout);
      summary[t].add(name, ref / k);
    }
  }
  for (int t : kThreads) {
    std::printf("case=layer_geomean_t%d %s\n", t, summary[t].text("layers", layers.size()).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
