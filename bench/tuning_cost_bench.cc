// What tuning costs, with and without what the tuner learned elsewhere and with and without the
// task scheduler, on the five models of tests/models/make_models.py (ResNet-18, MobileNetV2, the
// Nature DQN, a DCGAN generator, an LSTM language model; batch 1):
//
//  transfer (the CPU, "llvm -mcpu=native"): each model tuned from scratch, every task to --trials
//    (default 64) in turn, each into its own log; then, leaving each model out in turn, a cost
//    model trained on the other models' logs (autotune::train_log_model, every record of theirs)
//    guides the held-out model's tuning under the task scheduler, into a fresh log, until the
//    model's estimated latency (every task measured: each task's best x its calls) is within 5%
//    of the scratch run's final estimate:
//      case=transfer_<model> measurements=<n> scratch_measurements=<m> ratio=<n/m>
//           scratch_to_95pct=<k> no_transfer_measurements=<c> est_ms=<t> scratch_est_ms=<s>
//    (k: when the scratch run itself first got within 5% of its final estimate, every task
//    measured; c: the same scheduled run, first rounds as short, without the pre-trained model,
//    the control that tells transfer from good defaults; n or c = budget + 1 when the run never
//    gets there within m measurements).
//  scheduler ("opencl", this machine's OpenCL device): ResNet-18 tuned with every task to
//    --trials in turn against the task scheduler (no transfer in either; fresh logs), the
//    measurements each needed to come within 5% of the fixed split's final estimate:
//      case=scheduler_resnet18_opencl with=<n> without=<m> ratio=<n/m> fixed_measurements=<f>
//  zeroshot ("opencl"): DQN never tuned, built with the configs a cost model trained on the
//    ResNet-18 OpenCL records predicts (LogConfigSource on an empty log), against its defaults and
//    against it tuned (every task to --trials); each build checked against ONNX Runtime (1e-4)
//    and timed on the device:
//      case=zeroshot_dqn_opencl speedup_over_default=<default_ms/zeroshot_ms>
//           fraction_of_tuned=<tuned_ms/zeroshot_ms> predicted=<tasks>
//    and, where the transfer case left its scratch logs, the same on the CPU for each model held
//    out in turn (the model trained on the other models' records; tuned: its scratch log; timed
//    on one thread, as the configs were measured):
//      case=zeroshot_<model>_cpu ...
//
//  curves ("opencl"): the ResNet-18 convolutions' large GPU spaces (conv2d_nchw_gpu), each tuned
//    by the cost model (xgb) and by random search with the same budget (--trials) and seed,
//    neither measuring the default first, each into a fresh log; a count is the first trial at
//    which an explorer's best reaches 95% of the best either found (budget + 1: never):
//      case=opencl_curve_<layer> space=<configs> trials_to_95pct_xgb=<a> trials_to_95pct_random=<b>
//      case=opencl_curves median_xgb=<a> median_random=<b> ratio=<a/b> layers=<n>
//
//   bench_tuning_cost [--cases transfer,scheduler,zeroshot,curves] [--trials N (64)]
//                     [--models resnet18,mobilenetv2,dqn,dcgan,lstm] [--layers C2,C6,C9,C12]
//                     [--out DIR]
//
// Measurements are the tuner's own (LocalMeasurer, one thread per candidate); the logs stay under
// DIR (default build/release/bench-results/tuning-cost) and are reused by a later run with the
// same trials (a log resumes), so the cases can be run one at a time. Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "bench/resnet_layers.h"
#include "bench/tuning_curve.h"
#include "compiler/autotune/local_measurer.h"
#include "compiler/autotune/log_model.h"
#include "compiler/autotune/tune_tasks.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/thread_pool.h"
#include "records/record_log.h"
#include "tests/common/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using namespace kiln;

constexpr const char* kCpu = "llvm -mcpu=native";
constexpr const char* kOpenCl = "opencl";

/// A model's tasks and how often one run calls each.
struct ModelTasks {
  std::vector<autotune::Task> tasks;
  std::vector<int> calls;
};

ModelTasks tasks_of(const std::string& dir, const std::string& name, const std::string& target) {
  ModelTasks m;
  const graph::Graph g = graph::import_onnx(dir + "/" + name + ".onnx");
  m.tasks = graph::extract_tasks(g, target, {}, &m.calls);
  return m;
}

autotune::TuneOptions tune_options(const std::string& target, int trials) {
  autotune::TuneOptions o;
  o.trials = trials;
  o.local.threads = 1;  // single-thread kernels: less noise on a shared machine
  o.local.device = autotune::local_device_fingerprint(target);
  return o;
}

/// Thrown from a progress callback to end a run once it reached its goal.
struct Reached {};

/// One tuning run's curve: (measurements, estimated latency) after each round with every task
/// measured.
struct Run {
  std::vector<std::pair<int, double>> curve;
  int measurements = 0;
  double final_s = 0;
};

/// Tunes `m` into `log` (a fixed split to `trials` per task without a budget, else the scheduler
/// under `budget`, free to give one task more than `trials`), from `prior` when given; stops early
/// once the estimate is <= `goal_s` (every task measured).
Run tune(const ModelTasks& m, records::RecordLog& log, const std::string& target, int trials,
         int budget, const autotune::CostModel* prior, double goal_s, const std::string& label,
         int first_round = 0) {
  autotune::TasksTuneOptions o;
  o.tune = tune_options(target, trials);
  o.tune.prior = prior;
  o.budget = budget;
  o.first_round = first_round;  // (under a budget no task is capped but by its space)
  Run run;
  const auto t0 = std::chrono::steady_clock::now();
  o.on_progress = [&](size_t, const autotune::Task&, const autotune::TuneProgress&,
                      const autotune::ScheduleStatus& s) {
    run.measurements = s.measurements;
    if (s.predicted == 0 && s.estimated_latency_s > 0) {
      run.curve.emplace_back(s.measurements, s.estimated_latency_s);
      run.final_s = s.estimated_latency_s;
    }
    std::fprintf(stderr, "\r\033[K%s: %d measured, est %.3f ms, %.0f s", label.c_str(),
                 s.measurements, s.estimated_latency_s * 1e3,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (s.predicted == 0 && goal_s > 0 && s.estimated_latency_s <= goal_s) throw Reached{};
  };
  try {
    const autotune::TasksTuneReport r = autotune::tune_tasks(m.tasks, m.calls, log, o);
    run.measurements = r.status.measurements;
    if (r.status.predicted == 0) run.final_s = r.status.estimated_latency_s;
  } catch (const Reached&) {
  }
  std::fprintf(stderr, "\n");
  return run;
}

/// The first measurement count of `run` whose estimate is within 5% of `reference_s`; `never`
/// when none is.
int first_within(const Run& run, double reference_s, int never) {
  for (const auto& [n, est] : run.curve)
    if (est <= reference_s / 0.95) return n;
  return never;
}

std::string log_dir(const std::string& out, const std::string& kind, const std::string& name,
                    int trials) {
  return out + "/" + kind + "-t" + std::to_string(trials) + "/" + name;
}

void transfer(const std::string& models_dir, const std::vector<std::string>& names,
              const std::string& out, int trials) {
  std::map<std::string, ModelTasks> tasks;
  std::map<std::string, Run> scratch;
  for (const std::string& n : names) {
    tasks[n] = tasks_of(models_dir, n, kCpu);
    records::RecordLog log = records::RecordLog::open(log_dir(out, "scratch-cpu", n, trials));
    scratch[n] = tune(tasks[n], log, kCpu, trials, 0, nullptr, 0, "scratch " + n);
  }
  for (const std::string& held : names) {
    std::vector<records::TaskHistory> others;
    for (const std::string& n : names) {
      if (n == held) continue;
      records::RecordLog log = records::RecordLog::open(log_dir(out, "scratch-cpu", n, trials));
      for (records::TaskHistory& h : log.history(kCpu)) others.push_back(std::move(h));
    }
    autotune::LogModelReport mr;
    std::unique_ptr<autotune::CostModel> prior = autotune::train_log_model(others, kCpu, {}, &mr);
    std::cerr << "transfer " << held << ": model from " << mr.info.rows << " records of "
              << mr.info.tasks << " tasks of the other models (" << mr.seconds << " s)\n";
    const std::string dir = log_dir(out, "transfer-cpu", held, trials);
    fs::remove_all(dir);
    records::RecordLog log = records::RecordLog::open(dir);
    const Run& s = scratch[held];
    const Run t = tune(tasks[held], log, kCpu, trials, s.measurements, prior.get(),
                       s.final_s / 0.95, "transfer " + held);
    const int n = first_within(t, s.final_s, s.measurements + 1);
    // The control: the same run (scheduler, first rounds as short) without the pre-trained model.
    const std::string control_dir = log_dir(out, "control-cpu", held, trials);
    fs::remove_all(control_dir);
    records::RecordLog control_log = records::RecordLog::open(control_dir);
    const Run c = tune(tasks[held], control_log, kCpu, trials, s.measurements, nullptr,
                       s.final_s / 0.95, "control " + held, autotune::TuneOptions{}.batch / 4);
    const int without = first_within(c, s.final_s, s.measurements + 1);
    // (A scratch log an earlier run completed has no curve of this run: its k is unknown.)
    const std::string k = s.curve.empty()
                              ? "unknown"
                              : std::to_string(first_within(s, s.final_s, s.measurements + 1));
    std::printf(
        "case=transfer_%s measurements=%d scratch_measurements=%d ratio=%.4f "
        "scratch_to_95pct=%s no_transfer_measurements=%d est_ms=%.4f scratch_est_ms=%.4f\n",
        held.c_str(), n, s.measurements, double(n) / s.measurements, k.c_str(), without,
        t.final_s * 1e3, s.final_s * 1e3);
    std::fflush(stdout);
  }
}

void scheduler(const std::string& models_dir, const std::string& out, int trials) {
  const ModelTasks m = tasks_of(models_dir, "resnet18", kOpenCl);
  records::RecordLog fixed_log =
      records::RecordLog::open(log_dir(out, "fixed-opencl", "resnet18", trials));
  const Run fixed = tune(m, fixed_log, kOpenCl, trials, 0, nullptr, 0, "fixed resnet18 opencl");
  const std::string dir = log_dir(out, "scheduled-opencl", "resnet18", trials);
  fs::remove_all(dir);
  records::RecordLog log = records::RecordLog::open(dir);
  const Run with = tune(m, log, kOpenCl, trials, fixed.measurements, nullptr, fixed.final_s / 0.95,
                        "scheduled resnet18 opencl");
  const int n = first_within(with, fixed.final_s, fixed.measurements + 1);
  // A fixed log an earlier run completed has no curve of this run: run with a fresh --out.
  if (fixed.curve.empty()) {
    std::printf("case=scheduler_resnet18_opencl with=%d without=unknown fixed_measurements=%d\n", n,
                fixed.measurements);
  } else {
    const int without = first_within(fixed, fixed.final_s, fixed.measurements + 1);
    std::printf(
        "case=scheduler_resnet18_opencl with=%d without=%d ratio=%.4f fixed_measurements=%d\n", n,
        without, double(n) / without, fixed.measurements);
  }
  std::fflush(stdout);
}

/// Model `name` built with each config source and timed (checked against ONNX Runtime first);
/// its milliseconds by label (NaN for a build that failed or is wrong).
std::map<std::string, double> time_builds(
    const std::string& models_dir, const std::string& name, const std::string& target,
    TargetKind device,
    const std::vector<std::pair<std::string, autotune::ConfigSource*>>& sources) {
  std::map<std::string, double> ms;
  for (const auto& [label, source] : sources) {
    graph::BuildOptions o;
    o.configs = source;
    bench::BuiltModel b = bench::build_and_check(models_dir, name, target, o, {}, 1e-4, device);
    if (!b.exec) {
      std::cerr << "zeroshot: " << name << " " << label << ": " << b.error << "\n";
      ms[label] = NAN;
      continue;
    }
    ms[label] = bench::median_ms([&] { b.exec->run(); }, 2.0);
    std::cerr << "zeroshot: " << name << " " << label << " " << ms[label] << " ms\n";
  }
  return ms;
}

void print_zeroshot(const std::string& name, std::map<std::string, double> ms, int predicted) {
  std::printf(
      "case=zeroshot_%s speedup_over_default=%.3f fraction_of_tuned=%.3f predicted=%d "
      "default_ms=%.3f zeroshot_ms=%.3f tuned_ms=%.3f",
      name.c_str(), ms["default"] / ms["zeroshot"], ms["tuned"] / ms["zeroshot"], predicted,
      ms["default"], ms["zeroshot"], ms["tuned"]);
  if (ms.count("forced")) std::printf(" forced_zeroshot_ms=%.3f", ms["forced"]);
  std::printf("\n");
  std::fflush(stdout);
}

void zeroshot(const std::string& models_dir, const std::vector<std::string>& names,
              const std::string& out, int trials) {
  testing::TempDir empty_dir("kiln_bench_zeroshot");
  records::RecordLog empty = records::RecordLog::open(empty_dir.file("log"));
  // The CPU, when the transfer case left its scratch logs: each model held out in turn, its
  // zero-shot configs from a model trained on the other models' records. Timed on one thread,
  // as its configs were measured (and a thread pool waiting on a busy core times nothing).
  runtime::set_num_threads(1);
  for (const std::string& held : names) {
    if (!fs::exists(log_dir(out, "scratch-cpu", held, trials))) continue;
    std::vector<records::TaskHistory> others;
    for (const std::string& n : names) {
      const std::string dir = log_dir(out, "scratch-cpu", n, trials);
      if (n == held || !fs::exists(dir)) continue;
      records::RecordLog log = records::RecordLog::open(dir);
      for (records::TaskHistory& h : log.history(kCpu)) others.push_back(std::move(h));
    }
    autotune::LogModelReport mr;
    std::unique_ptr<autotune::CostModel> model = autotune::train_log_model(others, kCpu, {}, &mr);
    if (!model) continue;
    records::RecordLog tuned_log =
        records::RecordLog::open(log_dir(out, "scratch-cpu", held, trials));
    // Zero-shot as the build does it (only where the log shows tuning gains much over the
    // defaults), and forced for every template, to show what the guard avoids.
    std::map<std::string, double> always;
    for (const auto& [name, gain] : mr.info.template_gains) always[name] = 1e9;
    autotune::LogConfigSource none(empty), zero(empty, model.get(), mr.info.template_gains),
        forced(empty, model.get(), always), tuned(tuned_log);
    const std::map<std::string, double> ms = time_builds(
        models_dir, held, kCpu, TargetKind::kCpu,
        {{"default", &none}, {"zeroshot", &zero}, {"forced", &forced}, {"tuned", &tuned}});
    print_zeroshot(held + "_cpu", ms, zero.predicted());  // (predicted: once built)
  }
  // OpenCL: the DQN with a model trained on ResNet-18's OpenCL records.
  const std::string source = log_dir(out, "fixed-opencl", "resnet18", trials);
  if (!fs::exists(source)) {
    std::cerr << "zeroshot: needs the scheduler case's ResNet-18 OpenCL log (" << source
              << "): run --cases scheduler first\n";
    return;
  }
  std::unique_ptr<autotune::CostModel> model;
  autotune::LogModelInfo model_info;
  {
    records::RecordLog log = records::RecordLog::open(source);
    autotune::LogModelReport mr;
    model = autotune::train_log_model(log.history(kOpenCl), kOpenCl, {}, &mr);
    model_info = mr.info;
    std::cerr << "zeroshot: model from " << mr.info.rows << " ResNet-18 records\n";
  }
  const ModelTasks m = tasks_of(models_dir, "dqn", kOpenCl);
  records::RecordLog tuned_log =
      records::RecordLog::open(log_dir(out, "fixed-opencl", "dqn", trials));
  tune(m, tuned_log, kOpenCl, trials, 0, nullptr, 0, "tuned dqn opencl");
  autotune::LogConfigSource none(empty), zero(empty, model.get(), model_info.template_gains),
      tuned(tuned_log);
  const std::map<std::string, double> ms =
      time_builds(models_dir, "dqn", kOpenCl, TargetKind::kOpenCL,
                  {{"default", &none}, {"zeroshot", &zero}, {"tuned", &tuned}});
  print_zeroshot("dqn_opencl", ms, zero.predicted());
}

void curves(const std::vector<bench::ConvLayer>& layers, const std::string& out, int trials) {
  std::vector<double> xgb_counts, random_counts;
  for (const bench::ConvLayer& l : layers) {
    const autotune::Task task = bench::opencl_layer_task(l);
    std::map<std::string, std::vector<double>> curve;
    for (const char* explorer : {"xgb", "random"}) {
      const std::string dir = out + "/curves-opencl-t" + std::to_string(trials) + "/" +
                              std::string(l.name) + "-" + explorer;
      fs::remove_all(dir);
      records::RecordLog log = records::RecordLog::open(dir);
      autotune::TuneOptions o = tune_options(kOpenCl, trials);
      o.explorer = explorer;
      o.default_first = false;  // what each explorer finds by itself
      o.progress = [&](const autotune::TuneProgress& p) {
        std::fprintf(stderr, "\r\033[K%s %s: %d/%d, best %.1f GFLOP/s", l.name, explorer,
                     p.trials_done, p.trials_total, p.best_gflops);
      };
      curve[explorer] = autotune::Tuner(log, o).tune(task).curve;
      std::fprintf(stderr, "\n");
    }
    double best = 0;
    for (const auto& [e, c] : curve)
      if (!c.empty()) best = std::max(best, c.back());
    const int a = bench::trials_to(curve["xgb"], 0.95 * best, trials + 1);
    const int b = bench::trials_to(curve["random"], 0.95 * best, trials + 1);
    xgb_counts.push_back(a);
    random_counts.push_back(b);
    std::printf(
        "case=opencl_curve_%s space=%llu trials_to_95pct_xgb=%d trials_to_95pct_random=%d\n",
        l.name, static_cast<unsigned long long>(task.space.size()), a, b);
    std::fflush(stdout);
  }
  const double mx = bench::median(xgb_counts), mr = bench::median(random_counts);
  std::printf("case=opencl_curves median_xgb=%.1f median_random=%.1f ratio=%.3f layers=%zu\n", mx,
              mr, mx / mr, layers.size());
  std::fflush(stdout);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

const kiln::cli::Program kBench{
    .name = "bench_tuning_cost",
    .summary = "what tuning costs: transfer from other models, the task scheduler, zero-shot",
    .flags = {{"--cases", "LIST", "transfer,scheduler,zeroshot,curves (default: all four)"},
              {"--layers", "LIST", "the curves case's layers (default: C2,C6,C9,C12)"},
              {"--trials", "N", "trials per task of the fixed split (default: 64)"},
              {"--models", "LIST",
               "the transfer case's models (default: resnet18,mobilenetv2,dqn,dcgan,lstm)"},
              {"--out", "DIR", "where the record logs stay (default: bench-results/tuning-cost)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const std::vector<std::string> cases =
      split(args.get("--cases", "transfer,scheduler,zeroshot,curves"));
  for (const std::string& c : cases) {
    if (c != "transfer" && c != "scheduler" && c != "zeroshot" && c != "curves")
      throw cli::UsageError("--cases: unknown case '" + c +
                            "' (known: transfer, scheduler, zeroshot, curves)");
  }
  const std::vector<bench::ConvLayer> layers =
      bench::select_layers(args.get("--layers", "C2,C6,C9,C12"));
  const int trials =
      args.has("--trials") ? cli::positive_number(args.get("--trials"), "--trials") : 64;
  const std::vector<std::string> names =
      split(args.get("--models", "resnet18,mobilenetv2,dqn,dcgan,lstm"));
  const std::string out = args.get("--out", std::string(KILN_BENCH_RESULTS_DIR) + "/tuning-cost");
  testing::TempDir models("kiln_bench_tuning_cost_models");
  const std::string d = models.path().string();
  bench::run_command(
      "python3 " + bench::quote(KILN_MAKE_MODELS_SCRIPT) + " " + bench::quote(d) + " 2>/dev/null",
      "bench_tuning_cost");
  try {
    for (const std::string& c : cases) {
      if (c == "transfer") transfer(d, names, out, trials);
      if (c == "scheduler") scheduler(d, out, trials);
      if (c == "zeroshot") zeroshot(d, names, out, trials);
      if (c == "curves") curves(layers, out, trials);
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_tuning_cost: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
