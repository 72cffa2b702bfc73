// Whole models (tests/models/make_models.py: ResNet-18, MobileNetV2, the Nature DQN, a DCGAN
// generator, an LSTM language model) at batch 1, Kiln against ONNX Runtime in the same run:
//   case=model_<name>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x>     threads 1 and 2
//   case=fusion_<name> speedup=<unfused/fused> fused_ms= unfused_ms=     2 threads, the two
//       builds run in turns for 3 x --min-time; speedup is the median of each pair's ratio
//   case=memplan_<name> bytes_before=<a> bytes_after=<b>                 intermediate bytes
// With --records DIR (a record log `kiln tune` wrote), also each model built with the best
// configs of that log against the same reference:
//   case=model_<name>_tuned_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x>
//   case=tuning_<name>_t<threads> speedup=<untuned_ms/tuned_ms> tuned_ops=<n> default_ops=<m>
// The models are generated into a temporary folder first (python3 make_models.py), so nothing has
// to be built or run beforehand. Kiln builds each model once with the default BuildOptions
// (batch norms folded, memory planned, fused) for "llvm -mcpu=native"; ONNX Runtime (bench/
// models_ref.py, run before any Kiln work so the two never share the cores) uses the CPU
// provider, intra_op_num_threads = threads, inter_op_num_threads = 1, sequential execution and its
// default graph optimizations. Latency is the median single run after two warm-ups, over at
// least --min-time seconds (default 1) and 10 runs, the same on both sides. Kiln's output is
// checked against ONNX Runtime's before timing (max|diff| / max|ref| <= 1e-3), so a fast wrong
// build cannot pass. A model Kiln cannot build or gets wrong prints nan and its error on stderr.
//
//   bench_models [--min-time S] [--records DIR] [NAME ...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/temp_dir.h"

namespace {

using kiln::bench::median_ms;
using kiln::bench::quote;
using kiln::bench::relative_error;
using kiln::runtime::GraphExecutor;
using kiln::runtime::NDArray;

std::string run_command(const std::string& cmd) {
  return kiln::bench::run_command(cmd, "bench_models");
}

const std::vector<std::string> kModels = {"resnet18", "mobilenetv2", "dqn", "dcgan", "lstm"};
const std::vector<int> kThreads = {1, 2};
constexpr int kFusionThreads = 2;
/// The fusion ablation times its two builds for this many times --min-time: the builds of a model
/// differ by a few percent (the LSTM LM's by one Add kernel, 1%), less than two threads on a shared
/// machine vary from run to run.
constexpr double kFusionTimeFactor = 3;
constexpr const char* kTarget = "llvm -mcpu=native";

using Built = kiln::bench::BuiltModel;

Built build_and_check(const std::string& dir, const std::string& name,
                      const kiln::graph::BuildOptions& options) {
  return kiln::bench::build_and_check(dir, name, kTarget, options, {}, 1e-3);
}

const kiln::cli::Program kBench{
    .name = "bench_models",
    .operands = "[NAME...]",
    .summary =
        "Whole models (resnet18 mobilenetv2 dqn dcgan lstm; default: all) compiled by Kiln "
        "against ONNX Runtime.",
    .flags = {{"--min-time", "S", "seconds of timing per model (default: 1)"},
              {"--records", "DIR",
               "also each model built with this record log's best configs (default: none)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                              : 1.0;
  const std::string records = args.get("--records");
  std::vector<std::string> models;
  for (const std::string& a : args.operands) {
    if (std::find(kModels.begin(), kModels.end(), a) == kModels.end()) {
      throw kiln::cli::UsageError("bench_models has no model '" + a +
                                  "' (resnet18 mobilenetv2 dqn dcgan lstm)");
    }
    models.push_back(a);
  }
  if (models.empty()) models = kModels;
  std::string only;
  for (const auto& m : models) only += " " + m;

  kiln::testing::TempDir dir("kiln_bench_models");
  std::string d = dir.path().string();
  std::string make_cmd = "python3 " + quote(KILN_MAKE_MODELS_SCRIPT) + " " + quote(d);
  for (const auto& m : models) make_cmd += " --only " + m;
  run_command(make_cmd + " 2>/dev/null");

  // ONNX Runtime first, in its own process, so it never competes with Kiln's thread pool.
  std::ostringstream ref_cmd;
  ref_cmd << "python3 " << quote(KILN_MODELS_REF_SCRIPT) << " " << quote(d) << " --min-time "
          << min_time << " --threads";
  for (int t : kThreads) ref_cmd << " " << t;
  ref_cmd << " --only" << only;
  std::map<std::pair<std::string, int>, double> ref_ms;
  {
    std::istringstream in(run_command(ref_cmd.str()));
    std::string name;
    int t;
    double ms;
    while (in >> name >> t >> ms) ref_ms[{name, t}] = ms;
  }

  for (const auto& name : models) {
    kiln::graph::BuildOptions fused;
    Built on = build_and_check(d, name, fused);
    if (!on.error.empty())
      std::fprintf(stderr, "bench_models: %s: %s\n", name.c_str(), on.error.c_str());
    std::map<int, double> untuned_ms;
    for (int t : kThreads) {
      double kiln_ms = NAN;
      if (on.exec) {
        kiln::runtime::set_num_threads(t);
        kiln_ms = median_ms([&] { on.exec->run(); }, min_time);
      }
      untuned_ms[t] = kiln_ms;
      auto it = ref_ms.find({name, t});
      double ref = it == ref_ms.end() ? NAN : it->second;
      std::printf("case=model_%s_t%d kiln_ms=%.3f ref_ms=%.3f ratio=%.3f\n", name.c_str(), t,
                  kiln_ms, ref, ref / kiln_ms);
      std::fflush(stdout);
    }
    if (!records.empty()) {
      // The same model with the best configs of the record log.
      kiln::records::RecordLog log = kiln::records::RecordLog::open(records);
      kiln::autotune::LogConfigSource source(log);
      kiln::graph::BuildOptions tuned_options;
      tuned_options.configs = &source;
      Built tuned = build_and_check(d, name, tuned_options);
      if (!tuned.error.empty())
        std::fprintf(stderr, "bench_models: %s (tuned): %s\n", name.c_str(), tuned.error.c_str());
      for (int t : kThreads) {
        double kiln_ms = NAN;
        if (tuned.exec) {
          kiln::runtime::set_num_threads(t);
          kiln_ms = median_ms([&] { tuned.exec->run(); }, min_time);
        }
        auto it = ref_ms.find({name, t});
        double ref = it == ref_ms.end() ? NAN : it->second;
        std::printf("case=model_%s_tuned_t%d kiln_ms=%.3f ref_ms=%.3f ratio=%.3f\n", name.c_str(),
                    t, kiln_ms, ref, ref / kiln_ms);
        std::printf("case=tuning_%s_t%d speedup=%.3f tuned_ops=%d default_ops=%d\n", name.c_str(),
                    t, untuned_ms[t] / kiln_ms, source.tuned(), source.defaults());
        std::fflush(stdout);
      }
    }

    double speedup = NAN, fused_ms = NAN, unfused_ms = NAN;
    if (on.exec) {
      kiln::graph::BuildOptions unfused;
      unfused.fuse = false;
      Built off = build_and_check(d, name, unfused);
      if (off.exec) {
        kiln::runtime::set_num_threads(kFusionThreads);
        const kiln::bench::PairedTimes t = kiln::bench::paired_times(
            [&] { on.exec->run(); }, [&] { off.exec->run(); }, kFusionTimeFactor * min_time);
        fused_ms = t.f_ms;
        unfused_ms = t.g_ms;
        speedup = t.g_over_f;
      } else {
        std::fprintf(stderr, "bench_models: %s (fuse=false): %s\n", name.c_str(),
                     off.error.c_str());
      }
    }
    std::printf("case=fusion_%s speedup=%.3f fused_ms=%.3f unfused_ms=%.3f\n", name.c_str(),
                speedup, fused_ms, unfused_ms);
    if (on.exec) {
      std::printf("case=memplan_%s bytes_before=%lld bytes_after=%lld\n", name.c_str(),
                  static_cast<long long>(on.report.intermediate_bytes_without_reuse),
                  static_cast<long long>(on.report.intermediate_bytes));
    } else {
      std::printf("case=memplan_%s bytes_before=nan bytes_after=nan\n", name.c_str());
    }
    std::fflush(stdout);
    kiln::runtime::set_num_threads(0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
