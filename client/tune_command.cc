// `kiln tune`: extract the model's tuning tasks, tune each into the record log (resuming what an
// earlier run left), then build the bundle with each task's best config.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "client/cli.h"
#include "client/commands.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/tune_model.h"

const kiln::cli::Flag kBudgetFlag{"--budget", "N",
                                  "measurements over all tasks (default: none, --trials per task)"};
const kiln::cli::Flag kTimeFlag{"--time", "D",
                                "tune for at most D: 90s, 10m, 1h (default: no limit)"};
const kiln::cli::Flag kEarlyStopFlag{
    "--early-stop", "K", "stop a task after K trials without a 1% gain; 0: never (default: 32)"};

TuningBudget tuning_budget(const kiln::cli::Args& args) {
  using kiln::cli::UsageError;
  TuningBudget b;
  if (args.has("--budget")) b.budget = kiln::cli::positive_number(args.get("--budget"), "--budget");
  if (args.has("--time")) b.time_s = kiln::cli::duration_seconds(args.get("--time"), "--time");
  if (args.has("--early-stop")) {
    if (!b.scheduled()) throw UsageError("--early-stop needs --budget or --time");
    const long long k = kiln::cli::number_at_least(args.get("--early-stop"), "--early-stop", 0);
    if (k > std::numeric_limits<int>::max()) {
      throw UsageError("--early-stop is out of range: '" + args.get("--early-stop") + "'");
    }
    b.early_stop = static_cast<int>(k);
  }
  return b;
}

std::string duration_text(double s) {
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s / 3600),
                  static_cast<int>(s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ds", static_cast<int>(s));
  }
  return buf;
}

namespace {

/// The cost model kinds, comma-separated.
std::string cost_model_kinds() {
  std::string s;
  for (const char* k : kiln::autotune::kCostModelKinds)
    s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

int tune_main(const kiln::cli::Args& args) {
  using namespace kiln;
  using cli::UsageError;
  const std::string& model = args.only_operand("MODEL.onnx");
  const std::string target = args.get("--target", "llvm -mcpu=native");
  const std::string records = args.get("--records", "kiln-records");
  const std::string out = args.get("-o", default_bundle_path(model));
  autotune::TuneOptions options;
  if (args.has("--trials")) options.trials = cli::positive_number(args.get("--trials"), "--trials");
  if (args.has("--explorer")) options.explorer = args.get("--explorer");
  if (args.has("--cost-model")) {
    options.cost_model = args.get("--cost-model");
    const auto& kinds = autotune::kCostModelKinds;
    if (std::find(std::begin(kinds), std::end(kinds), options.cost_model) == std::end(kinds))
      throw UsageError("--cost-model: unknown cost model '" + options.cost_model +
                       "' (known: " + cost_model_kinds() + ")");
  }
  if (args.has("--batch")) options.batch = cli::positive_number(args.get("--batch"), "--batch");
  if (args.has("--seed")) {
    const long long seed = cli::whole_number(args.get("--seed"), "--seed");
    if (seed < 0) throw UsageError("--seed needs a number >= 0, got '" + args.get("--seed") + "'");
    options.seed = static_cast<uint64_t>(seed);
  }
  if (args.has("--threads")) {
    options.local.threads = cli::positive_number(args.get("--threads"), "--threads");
  }
  if (args.has("--repeat")) {
    options.local.repeat = cli::positive_number(args.get("--repeat"), "--repeat");
  }
  options.local.flush_cache = args.has("--flush-cache");
  graph::OnnxImportOptions import;
  import.input_shapes = input_shapes(args);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  graph::ModelTuneOptions tune;
  tune.target = target;
  tune.records = records;
  autotune::TasksTuneOptions& tuning = tune.tuning;
  tuning.tune = options;
  const TuningBudget budget = tuning_budget(args);
  tuning.budget = budget.budget;
  tuning.time_s = budget.time_s;
  const bool scheduled = budget.scheduled();
  if (scheduled && args.has("--trials")) tuning.max_trials = options.trials;
  if (budget.early_stop) tuning.patience = *budget.early_stop;
  tune.pretrained = !args.has("--no-transfer");
  const std::string precision = args.get("--precision", "fp32");
  if (precision != "fp32" && precision != "bf16") {
    throw cli::UsageError("--precision takes fp32 or bf16, got '" + precision + "'");
  }
  tune.build.precision = graph::parse_precision(precision);
  tune.build.winograd = !args.has("--no-winograd");
  tune.on_model = [&](const autotune::LogModelReport& r) {
    std::cerr << "cost model: " << r.why;
    if (r.trained_now) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " in %.1f s", r.seconds);
      std::cerr << buf;
    }
    if (r.skipped_tasks > 0)
      std::cerr << " (" << r.skipped_tasks << " tasks of the log skipped: their templates changed)";
    std::cerr << "\n";
  };
  size_t total = 0;  // tasks, once they are known
  auto head = [&](size_t i, const autotune::Task& task) {
    return "[task " + std::to_string(i + 1) + "/" + std::to_string(total) + "] " + task.key;
  };
  // The model's estimated latency: every task's best (or, unmeasured, a prediction from similar
  // tasks) times its calls.
  auto model_latency = [](const autotune::ScheduleStatus& s) {
    if (s.estimated_latency_s <= 0) return std::string();
    char buf[96];
    std::snprintf(buf, sizeof buf, ", model est. %.3f ms", s.estimated_latency_s * 1e3);
    std::string r = buf;
    if (s.predicted > 0) {
      r += " (" + std::to_string(s.predicted) + (s.predicted == 1 ? " task" : " tasks") +
           " predicted)";
    }
    return r;
  };
  tune.on_tasks = [&](const std::vector<autotune::Task>& tasks, const std::vector<int>& calls) {
    total = tasks.size();
    int operators = 0;
    for (int c : calls) operators += c;
    std::cerr << model << ": " << tasks.size() << " tuning tasks (" << operators << " operators), ";
    if (!scheduled) {
      std::cerr << options.trials << " trials each";
    } else {
      if (tuning.budget > 0) std::cerr << "a budget of " << tuning.budget << " measurements";
      if (tuning.budget > 0 && tuning.time_s > 0) std::cerr << " and ";
      if (tuning.time_s > 0) std::cerr << duration_text(tuning.time_s) << " of tuning";
      std::cerr << " given where the model gains most";
    }
    std::cerr << ", records in " << records << "\n";
  };
  bool line_open = false;  // a progress line without its newline (tty)
  tuning.on_progress = [&](size_t i, const autotune::Task& task, const autotune::TuneProgress& p,
                           const autotune::ScheduleStatus& s) {
    if (scheduled) {
      // The run's progress, and which task got the round.
      std::string budget = std::to_string(s.measurements);
      if (s.budget > 0) budget += "/" + std::to_string(s.budget);
      double eta = 0;
      if (s.budget > 0 && s.measured_now > 0) {
        eta = s.elapsed_s / s.measured_now * (s.budget - s.measurements);
      }
      if (tuning.time_s > 0)
        eta = eta > 0 ? std::min(eta, tuning.time_s - s.elapsed_s) : tuning.time_s - s.elapsed_s;
      std::fprintf(stderr, "%s[%s measured] %s: %d trials, best %.1f GFLOP/s%s, %s left%s",
                   tty ? "\r\033[K" : "", budget.c_str(), head(i, task).c_str(), p.trials_done,
                   p.best_gflops, model_latency(s).c_str(),
                   duration_text(std::max(0.0, eta)).c_str(), tty ? "" : "\n");
    } else {
      constexpr int kWidth = 20;
      const int filled = p.trials_total > 0 ? p.trials_done * kWidth / p.trials_total : kWidth;
      std::fprintf(stderr, "%s%s [%s%s] %d/%d best %.1f GFLOP/s%s, %s left%s",
                   tty ? "\r\033[K" : "", head(i, task).c_str(), std::string(filled, '#').c_str(),
                   std::string(kWidth - filled, ' ').c_str(), p.trials_done, p.trials_total,
                   p.best_gflops, model_latency(s).c_str(), duration_text(p.eta_s).c_str(),
                   tty ? "" : "\n");
    }
    std::fflush(stderr);
    line_open = tty;
  };
  tuning.on_task_done = [&](size_t i, const autotune::Task& task, const autotune::TaskResult& r,
                            const std::string& why, const autotune::ScheduleStatus&) {
    const std::string h = head(i, task);
    if (line_open) std::fprintf(stderr, "\n");
    line_open = false;
    std::string errors;
    for (const auto& [kind, n] : r.errors) errors += " " + kind + "=" + std::to_string(n);
    std::fprintf(stderr,
                 "%s: %d trials (%d now, %d equal programs reused), best %.1f GFLOP/s%s%s%s%s\n",
                 h.c_str(), r.trials, r.measured_now, r.reused, r.best_gflops,
                 errors.empty() ? "" : ", errors:", errors.c_str(), scheduled ? ": " : "",
                 scheduled ? why.c_str() : "");
    if (r.contended > 0) {
      std::fprintf(stderr,
                   "%s: warning: %d of %d measurements shared the CPU with other processes "
                   "(contended); their speeds may be understated: tune on an idle machine\n",
                   h.c_str(), r.contended, r.measured_now);
    }
  };
  try {
    const graph::Graph g = graph::import_onnx(model, import);
    graph::ModelTuneReport report;
    runtime::write_bundle(out, graph::tune_model(g, tune, &report));
    const autotune::ScheduleStatus& s = report.tuning.status;
    std::cerr << "tuning ended (" << report.tuning.ended << "): " << s.measurements
              << " measurements in the log (" << s.measured_now << " now)" << model_latency(s)
              << "\n";
    std::cerr << "wrote " << out << ": " << report.tuned << " tuned operators, ";
    if (report.predicted > 0) std::cerr << report.predicted << " with the model's configs, ";
    std::cerr << report.defaults << " with default configs\n";
  } catch (const std::exception& e) {
    return cli::report(e);
  }
  return 0;
}

}  // namespace

const kiln::cli::Command& tune_command() {
  static const kiln::cli::Command command = [] {
    const kiln::autotune::TuneOptions defaults;
    kiln::cli::Command c;
    c.name = "tune";
    c.operands = "MODEL.onnx";
    c.summary = "tune the model's operators on this machine, then build the bundle with the best";
    c.flags = {
        {"--target", "TARGET", "llvm ..., opencl, cuda or vdla (default: llvm -mcpu=native)"},
        {"--trials", "N",
         "configs measured per task, earlier runs' included (default: " +
             std::to_string(defaults.trials) + "); with --budget or --time, the most per task"},
        kBudgetFlag,
        kTimeFlag,
        kEarlyStopFlag,
        {"--records", "DIR", "the record log, created or resumed (default: kiln-records)"},
        {"--no-transfer", "",
         "learn from this model's records only, not from the cost model the log's records "
         "pre-trained"},
        {"-o", "FILE", "the bundle to write (default: MODEL.kiln beside the model)"},
        {"--no-winograd", "",
         "tune and build every 3x3 convolution direct, none by Winograd's F(m x m, 3 x 3)"},
        {"--precision", "fp32|bf16",
         "the products' arithmetic (default: fp32); bf16 tunes the bf16 kernels, as kiln "
         "compile's"},
        {"--explorer", "E",
         "xgb (a cost model guides the search), random, grid or ga (default: " + defaults.explorer +
             ")"},
        {"--cost-model", "M",
         "the xgb explorer's model: " + cost_model_kinds() + " (default: " + defaults.cost_model +
             ")"},
        {"--batch", "B",
         "configs measured per round; the model is refit after each (default: " +
             std::to_string(defaults.batch) + ")"},
        {"--seed", "S", "the explorer's seed (default: " + std::to_string(defaults.seed) + ")"},
        {"--threads", "T", "threads each candidate runs on (default: all CPUs)"},
        {"--repeat", "R",
         "timed repeats per candidate (default: " + std::to_string(defaults.local.repeat) + ")"},
        {"--flush-cache", "", "write past the last-level cache before each repeat (default: off)"},
        kInputShapeFlag,
    };
    c.notes =
        "Every measurement lands in the record log before the next; killed and run again, kiln "
        "tune continues from the log without measuring anything twice (a budget counts the "
        "log's measurements). With --budget or --time every task gets a first round (its "
        "default config first), then each round goes to the task whose expected drop of the "
        "model's latency (its best time x the times the model runs it, its recent gains) is "
        "largest; a task whose best gained no more than 1% over its last K trials "
        "(--early-stop K, 0: never) gets no more, and --trials caps each task. The progress "
        "shows the model's estimated latency. An opencl or cuda target is measured on this "
        "machine's GPU of that kind. The search starts from a cost model pre-trained on every "
        "record the log holds for the target (other models' and earlier runs' too), kept in the "
        "log and trained again as records arrive; the bundle's tasks with no successful "
        "measurement get the config that model ranks best.";
    c.main = tune_main;
    return c;
  }();
  return command;
}
