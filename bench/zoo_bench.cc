// The model zoo (tests/models/make_zoo.py: torchvision networks with a symbolic batch) at batch 1,
// untuned, Kiln against ONNX Runtime with the same threads, in the same run:
//   case=zoo_<name>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> build_s=<s>   threads 1 and 2
//   case=zoo_geomean_t2 ratio=<g> models=<n> ok=<k>
// and with --records DIR (a record log from `kiln tune` of these models), each model again built
// with the log's best configs (LogConfigSource; tasks never tuned keep their defaults):
//   case=zoo_<name>_tuned_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> tuned_ops=<n>
//   default_ops=<m> case=zoo_tuned_geomean_t2 ratio=<g> models=<n> ok=<k>
// where the geomean is over the models that compiled and matched (ok) and a model that did not
// prints nan with its error on stderr. The models are exported into a temporary folder first
// (make_zoo.py under KILN_TORCH_PYTHON, zoo_reference.py and models_ref.py under python3), so
// nothing has to be built or run beforehand. Model by model, ONNX Runtime and Kiln's builds are
// timed in turn, R rounds of each (--rounds, default 3), and each side's median over the rounds
// makes the ratio, so that a burst of load on a shared machine falls on both sides or is dropped.
// ONNX Runtime runs in its own process (models_ref.py: CPU provider, intra_op_num_threads =
// threads, sequential, its default graph optimizations), so the two never share the cores. Kiln
// binds the batch to 1 (--input-shape
// input=1,3,224,224), builds with the default BuildOptions for "llvm -mcpu=native", checks the
// output against ONNX Runtime's within the zoo test's tolerance (max|diff| / max|ref| <= 1e-4), and
// is timed like the reference (bench/model_timing.h).
//
//   bench_zoo [--min-time S] [--rounds R] [--records DIR] [NAME ...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
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

using kiln::bench::quote;
using kiln::runtime::GraphExecutor;

const std::vector<int> kThreads = {1, 2};
constexpr int kGeomeanThreads = 2;
constexpr double kTolerance = 1e-4;
constexpr const char* kTarget = "llvm -mcpu=native";

std::string run_command(const std::string& cmd) {
  return kiln::bench::run_command(cmd, "bench_zoo");
}

/// The zoo's model names, as make_zoo.py lists them.
std::vector<std::string> zoo_names() {
  std::istringstream in(
      run_command(std::string(KILN_TORCH_PYTHON) + " " + quote(KILN_MAKE_ZOO_SCRIPT) + " --list"));
  std::vector<std::string> names;
  for (std::string n; in >> n;) names.push_back(n);
  return names;
}

kiln::bench::BuiltModel build_and_check(const std::string& dir, const std::string& name,
                                        const kiln::graph::BuildOptions& options = {}) {
  kiln::graph::OnnxImportOptions import_options;
  import_options.input_shapes["input"] = {1, 3, 224, 224};
  return kiln::bench::build_and_check(dir, name, kTarget, options, import_options, kTolerance);
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// A build of one model and what its rounds measured: milliseconds per thread count.
struct Timed {
  std::string label, extra;
  kiln::bench::BuiltModel* built;
  std::map<int, std::vector<double>> ms;
};

/// Prints one case per thread count (medians over the rounds against ONNX Runtime's); returns
/// the ratio at kGeomeanThreads (nan when it did not build or match).
double print_cases(const Timed& k, const std::map<int, std::vector<double>>& ref_ms) {
  double at_geomean = NAN;
  for (int t : kThreads) {
    auto kt = k.ms.find(t);
    auto rt = ref_ms.find(t);
    const double kiln_ms = kt == k.ms.end() ? NAN : median(kt->second);
    const double ref = rt == ref_ms.end() ? NAN : median(rt->second);
    std::printf("case=zoo_%s_t%d kiln_ms=%.3f ref_ms=%.3f ratio=%.3f%s\n", k.label.c_str(), t,
                kiln_ms, ref, ref / kiln_ms, k.extra.c_str());
    std::fflush(stdout);
    if (t == kGeomeanThreads && k.built->exec) at_geomean = ref / kiln_ms;
  }
  return at_geomean;
}

/// Accumulates a geomean over the finite ratios.
struct Geomean {
  double log_sum = 0;
  int ok = 0;
  void add(double r) {
    if (!std::isfinite(r)) return;
    log_sum += std::log(r);
    ++ok;
  }
  double value() const { return ok ? std::exp(log_sum / ok) : NAN; }
};

const kiln::cli::Program kBench{
    .name = "bench_zoo",
    .operands = "[NAME...]",
    .summary =
        "The torchvision model zoo (default: every model) compiled by Kiln against ONNX "
        "Runtime.",
    .flags = {{"--min-time", "S", "seconds of timing per model and round (default: 1)"},
              {"--rounds", "R", "rounds of each side, timed in turn (default: 3)"},
              {"--records", "DIR",
               "also each model built with this record log's best configs "
               "(default: none)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const std::vector<std::string> known = zoo_names();
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                              : 1.0;
  const int rounds =
      args.has("--rounds") ? kiln::cli::positive_number(args.get("--rounds"), "--rounds") : 3;
  const std::string records = args.get("--records");
  std::vector<std::string> models;
  for (const std::string& a : args.operands) {
    if (std::find(known.begin(), known.end(), a) == known.end()) {
      std::string names;
      for (const auto& n : known) names += " " + n;
      throw kiln::cli::UsageError("bench_zoo has no model '" + a + "' (names:" + names + ")");
    }
    models.push_back(a);
  }
  if (models.empty()) models = known;

  kiln::testing::TempDir dir("kiln_bench_zoo");
  const std::string d = dir.path().string();
  std::string export_cmd =
      std::string(KILN_TORCH_PYTHON) + " " + quote(KILN_MAKE_ZOO_SCRIPT) + " " + quote(d);
  for (const auto& m : models) export_cmd += " --only " + m;
  run_command(export_cmd + " >/dev/null 2>&1");
  run_command("python3 " + quote(KILN_ZOO_REFERENCE_SCRIPT) + " " + quote(d) + " >/dev/null");

  // The log is opened once, before any model is timed (RocksDB's background threads stay idle).
  std::unique_ptr<kiln::records::RecordLog> log;
  if (!records.empty())
    log = std::make_unique<kiln::records::RecordLog>(kiln::records::RecordLog::open(records));
  Geomean untuned, tuned;
  for (const auto& name : models) {
    kiln::bench::BuiltModel b = build_and_check(d, name);
    if (!b.error.empty())
      std::fprintf(stderr, "bench_zoo: %s: %s\n", name.c_str(), b.error.c_str());
    std::ostringstream build;
    build << " build_s=" << std::fixed;
    build.precision(1);
    build << b.build_s;
    std::vector<Timed> timed{{name, build.str(), &b, {}}};
    kiln::bench::BuiltModel t;
    if (log) {
      kiln::autotune::LogConfigSource source(*log);  // per model: its counts are this model's
      kiln::graph::BuildOptions options;
      options.configs = &source;
      t = build_and_check(d, name, options);
      if (!t.error.empty())
        std::fprintf(stderr, "bench_zoo: %s (tuned): %s\n", name.c_str(), t.error.c_str());
      std::ostringstream ops;
      ops << " tuned_ops=" << source.tuned() << " default_ops=" << source.defaults();
      timed.push_back({name + "_tuned", ops.str(), &t, {}});
    }
    // Rounds of ONNX Runtime, then each build, then again: a burst of load on a shared machine
    // (minutes long) falls on both sides of a ratio, and the medians over the rounds drop it.
    // ONNX Runtime runs in its own process, so it never competes with Kiln's thread pool.
    std::ostringstream ref_cmd;
    ref_cmd << "python3 " << quote(KILN_MODELS_REF_SCRIPT) << " " << quote(d) << " --min-time "
            << min_time << " --threads";
    for (int th : kThreads) ref_cmd << " " << th;
    ref_cmd << " --only " << name;
    std::map<int, std::vector<double>> ref_ms;
    for (int r = 0; r < rounds; ++r) {
      std::istringstream in(run_command(ref_cmd.str()));
      std::string ref_name;
      int th;
      double ms;
      while (in >> ref_name >> th >> ms) ref_ms[th].push_back(ms);
      for (Timed& k : timed) {
        if (!k.built->exec) continue;
        for (int threads : kThreads) {
          kiln::runtime::set_num_threads(threads);
          k.ms[threads].push_back(kiln::bench::median_ms([&] { k.built->exec->run(); }, min_time));
        }
        kiln::runtime::set_num_threads(0);
      }
    }
    untuned.add(print_cases(timed[0], ref_ms));
    if (log) tuned.add(print_cases(timed[1], ref_ms));
  }
  std::printf("case=zoo_geomean_t%d ratio=%.3f models=%zu ok=%d\n", kGeomeanThreads,
              untuned.value(), models.size(), untuned.ok);
  if (log) {
    std::printf("case=zoo_tuned_geomean_t%d ratio=%.3f models=%zu ok=%d\n", kGeomeanThreads,
                tuned.value(), models.size(), tuned.ok);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
