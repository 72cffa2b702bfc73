// A model zoo (tests/models/make_zoo.py) untuned, Kiln against ONNX Runtime with the same threads,
// in the same run. Two sets (--set): `zoo`, the ten torchvision networks with a symbolic batch
// bound to 1, and `wide`, every torchvision classification network that exports, segmentation,
// video, detection backbones, optical flow and written-out text, audio, recurrent, UNet and GAN
// families (make_zoo.py's docstring), each with its own inputs. Per model:
//   case=<set>_<name>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> compile_s=<s>   threads 1, 2
// then
//   case=<set>_geomean_t2 ratio=<g> models=<n> ok=<k> worst=<name>:<ratio>
// and the 20 kernels across the set that lose the most time against their roofs (each model
// profiled at 1 thread after its timing; deploy/runtime/kernel_efficiency.h), the work list:
//   case=<set>_kernel_<rank> model= function= ops= ms= gflops= gbytes_per_s= bound= efficiency=
//   lost_ms= shapes=<d0xd1x...,...>
// and with --records DIR (a record log from `kiln tune` of these models, scripts/tune_zoo.sh),
// each model again built with the log's best configs (LogConfigSource; tasks never tuned keep
// their defaults):
//   case=<set>_<name>_tuned_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> tuned_ops=<n>
//   default_ops=<m>, case=<set>_tuned_geomean_t2 ratio=<g> models=<n> ok=<k> worst=...
// The geomean is over the models that compiled and matched (ok); one that did not prints nan with
// its error on stderr (worst names the lowest ratio among the ok ones). With --check-only each
// model is compiled and matched but not timed: `case=<set>_<name> ok=<0|1> compile_s=<s>
// functions=<n>` and `case=<set>_check models=<n> ok=<k>`.
//
// The models are exported into a temporary folder first (make_zoo.py under KILN_TORCH_PYTHON,
// zoo_reference.py and models_ref.py under python3), so nothing has to be built or run
// beforehand; --dir DIR keeps them in DIR instead and exports only the models DIR lacks (a model
// the exporter refuses is not ok, its error on stderr). Model by model, ONNX Runtime and Kiln's
// builds are timed in turn, R rounds of each (--rounds), and each side's median over the rounds
// makes the ratio, so that a burst of load on a shared machine falls on both sides or is dropped.
// ONNX Runtime runs in its own process (models_ref.py: CPU provider, intra_op_num_threads =
// threads, sequential, its default graph optimizations), so the two never share the cores. Kiln
// binds every input to the shape of its .npy (tests/models/model_inputs.h; the zoo's batch to 1),
// builds with the default BuildOptions for "llvm -mcpu=native", checks the first output against
// ONNX Runtime's within the zoo test's tolerance (max|diff| / max|ref| <= 1e-4), and is timed like
// the reference (bench/model_timing.h).
//
//   bench_zoo [--set zoo|wide] [--min-time S] [--rounds R] [--records DIR] [--dir DIR]
//             [--check-only] [NAME ...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/kernel_efficiency.h"
#include "deploy/runtime/machine_peak.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/temp_dir.h"
#include "tests/models/model_inputs.h"

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

/// The set's model names, as make_zoo.py lists them.
std::vector<std::string> set_names(const std::string& set) {
  std::istringstream in(run_command(std::string(KILN_TORCH_PYTHON) + " " +
                                    quote(KILN_MAKE_ZOO_SCRIPT) + " --set " + set + " --list"));
  std::vector<std::string> names;
  for (std::string n; in >> n;) names.push_back(n);
  return names;
}

/// Builds DIR/NAME.onnx with every input bound to its .npy's shape and checks its output.
kiln::bench::BuiltModel build_and_check(const std::string& dir, const std::string& name,
                                        const kiln::graph::BuildOptions& options = {}) {
  kiln::graph::OnnxImportOptions import_options;
  try {
    import_options = kiln::model_inputs::bind_shapes(kiln::model_inputs::load(dir, name));
  } catch (const std::exception& e) {
    kiln::bench::BuiltModel b;
    b.error = e.what();
    return b;
  }
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
double print_cases(const std::string& set, const Timed& k,
                   const std::map<int, std::vector<double>>& ref_ms) {
  double at_geomean = NAN;
  for (int t : kThreads) {
    auto kt = k.ms.find(t);
    auto rt = ref_ms.find(t);
    const double kiln_ms = kt == k.ms.end() ? NAN : median(kt->second);
    const double ref = rt == ref_ms.end() ? NAN : median(rt->second);
    std::printf("case=%s_%s_t%d kiln_ms=%.3f ref_ms=%.3f ratio=%.3f%s\n", set.c_str(),
                k.label.c_str(), t, kiln_ms, ref, ref / kiln_ms, k.extra.c_str());
    std::fflush(stdout);
    if (t == kGeomeanThreads && k.built->exec) at_geomean = ref / kiln_ms;
  }
  return at_geomean;
}

const kiln::cli::Program kBench{
    .name = "bench_zoo",
    .operands = "[NAME...]",
    .summary =
        "A model zoo (default: every model of the set) compiled by Kiln against ONNX Runtime.",
    .flags = {{"--set", "SET",
               "zoo (the ten torchvision networks) or wide (116 networks of every kind) "
               "(default: zoo)"},
              {"--min-time", "S",
               "seconds of timing per model and round (default: 1 for zoo, 0.3 for wide)"},
              {"--rounds", "R",
               "rounds of each side, timed in turn (default: 3 for zoo, 1 for wide)"},
              {"--records", "DIR",
               "also each model built with this record log's best configs "
               "(default: none)"},
              {"--dir", "DIR",
               "keep the exported models here, exporting only those it lacks (default: a "
               "temporary folder)"},
              {"--check-only", "", "compile and match each model, time nothing"}},
};

/// Exports `models` of `set` into `dir` (those without DIR/NAME.expected.npy when `missing_only`)
/// and writes ONNX Runtime's outputs; a model the exporter refuses is left without its files.
void export_models(const std::string& set, const std::vector<std::string>& models,
                   const std::string& dir, bool missing_only) {
  std::string only;
  for (const auto& m : models)
    if (!missing_only || !std::filesystem::exists(dir + "/" + m + ".expected.npy"))
      only += " --only " + m;
  if (only.empty()) return;
  // --keep-going: a model the exporter refuses is reported on stderr and is not ok below.
  const std::string export_cmd =
      std::string(KILN_TORCH_PYTHON) + " " + quote(KILN_MAKE_ZOO_SCRIPT) + " " + quote(dir) +
      " --set " + set + " --keep-going" + only + " 2>&1 >/dev/null | grep 'does not export' >&2";
  std::system(export_cmd.c_str());
  std::string reference_only;
  for (const auto& m : models)
    if (std::filesystem::exists(dir + "/" + m + ".onnx") &&
        !std::filesystem::exists(dir + "/" + m + ".expected.npy"))
      reference_only += " --only " + m;
  if (!reference_only.empty())
    run_command("python3 " + quote(KILN_ZOO_REFERENCE_SCRIPT) + " " + quote(dir) + reference_only +
                " >/dev/null");
}

/// The kernels of every timed model that lose the most time against their roofs (the measured
/// FMA peak or memory bandwidth of one core, kernel_efficiency.h), profiled at 1 thread after the
/// model's timing: the work list of the set.
class WorstKernels {
 public:
  static constexpr size_t kListed = 20;
  void add(const std::string& model, GraphExecutor& exec) {
    kiln::runtime::set_num_threads(1);
    const auto peak = kiln::runtime::machine_peak(1);
    // Enough runs for a median of the short kernels, without doubling a long model's time.
    std::vector<double> run_ms;
    exec.profile(1, &run_ms);
    const int runs = std::clamp(static_cast<int>(300 / std::max(run_ms.front(), 1e-3)), 3, 50);
    for (auto& k : kiln::runtime::kernel_efficiency(exec.profile(runs), peak))
      if (k.lost_ms) rows_.push_back({model, std::move(k)});
    kiln::runtime::set_num_threads(0);
  }
  void print(const std::string& set) {
    std::stable_sort(rows_.begin(), rows_.end(),
                     [](const Row& a, const Row& b) { return loses_more(a.kernel, b.kernel); });
    for (size_t i = 0; i < rows_.size() && i < kListed; ++i) {
      const auto& k = rows_[i].kernel;
      std::printf(
          "case=%s_kernel_%zu model=%s function=%s ops=%s ms=%.3f gflops=%.1f gbytes_per_s=%.1f "
          "bound=%s efficiency=%.3f lost_ms=%.3f shapes=%s\n",
          set.c_str(), i + 1, rows_[i].model.c_str(), k.func.c_str(),
          k.ops.empty() ? "-" : k.ops.c_str(), k.ms, k.gflops.value_or(NAN),
          k.gbytes_per_s.value_or(NAN), kiln::runtime::bound_name(k.bound),
          k.efficiency.value_or(NAN), k.lost_ms.value_or(NAN), compact_shapes(k).c_str());
    }
    std::fflush(stdout);
  }

 private:
  struct Row {
    std::string model;
    kiln::runtime::KernelEfficiency kernel;
  };
  /// "1x64x56x56,64x64x3x3,..." : one token for a key=value line.
  static std::string compact_shapes(const kiln::runtime::KernelEfficiency& k) {
    std::string out;
    for (const auto& shape : k.shapes) {
      if (!out.empty()) out += ',';
      for (size_t d = 0; d < shape.size(); ++d) out += (d ? "x" : "") + std::to_string(shape[d]);
    }
    return out.empty() ? "-" : out;
  }
  std::vector<Row> rows_;
};

int run_bench(const kiln::cli::Args& args) {
  const std::string set = args.has("--set") ? args.get("--set") : "zoo";
  if (set != "zoo" && set != "wide")
    throw kiln::cli::UsageError("--set must be zoo or wide, got '" + set + "'");
  const bool wide = set == "wide";
  const std::vector<std::string> known = set_names(set);
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                          : wide ? 0.3
                                 : 1.0;
  const int rounds = args.has("--rounds")
                         ? kiln::cli::positive_number(args.get("--rounds"), "--rounds")
                         : (wide ? 1 : 3);
  const bool check_only = args.has("--check-only");
  const std::string records = args.get("--records");
  std::vector<std::string> models;
  for (const std::string& a : args.operands) {
    if (std::find(known.begin(), known.end(), a) == known.end()) {
      std::string names;
      for (const auto& n : known) names += " " + n;
      throw kiln::cli::UsageError("bench_zoo's " + set + " set has no model '" + a +
                                  "' (names:" + names + ")");
    }
    models.push_back(a);
  }
  if (models.empty()) models = known;

  std::optional<kiln::testing::TempDir> temp;
  std::string d = args.get("--dir");
  if (d.empty()) {
    temp.emplace("kiln_bench_zoo");
    d = temp->path().string();
  } else {
    std::filesystem::create_directories(d);
  }
  export_models(set, models, d, !temp);

  // The log is opened once, before any model is timed (RocksDB's background threads stay idle).
  std::unique_ptr<kiln::records::RecordLog> log;
  if (!records.empty())
    log = std::make_unique<kiln::records::RecordLog>(kiln::records::RecordLog::open(records));
  kiln::bench::RatioGeomean untuned, tuned;
  WorstKernels worst_kernels;
  int checked_ok = 0;
  for (const auto& name : models) {
    kiln::bench::BuiltModel b = build_and_check(d, name);
    if (!b.error.empty())
      std::fprintf(stderr, "bench_zoo: %s: %s\n", name.c_str(), b.error.c_str());
    char compile[64];
    std::snprintf(compile, sizeof compile, " compile_s=%.1f", b.build_s);
    if (check_only) {
      std::printf("case=%s_%s ok=%d%s functions=%zu\n", set.c_str(), name.c_str(), b.exec ? 1 : 0,
                  compile, b.report.num_functions);
      std::fflush(stdout);
      checked_ok += b.exec ? 1 : 0;
      continue;
    }
    std::vector<Timed> timed{{name, compile, &b, {}}};
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
    const bool any_built = b.exec || t.exec;
    for (int r = 0; r < rounds && any_built; ++r) {
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
    untuned.add(name, print_cases(set, timed[0], ref_ms));
    if (log) tuned.add(name, print_cases(set, timed[1], ref_ms));
    if (b.exec) worst_kernels.add(name, *b.exec);
  }
  if (check_only) {
    std::printf("case=%s_check models=%zu ok=%d\n", set.c_str(), models.size(), checked_ok);
    return 0;
  }
  std::printf("case=%s_geomean_t%d %s\n", set.c_str(), kGeomeanThreads,
              untuned.text("models", models.size()).c_str());
  if (log)
    std::printf("case=%s_tuned_geomean_t%d %s\n", set.c_str(), kGeomeanThreads,
                tuned.text("models", models.size()).c_str());
  worst_kernels.print(set);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
