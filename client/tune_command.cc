// `kiln tune`: extract the model's tuning tasks, tune each into the record log (resuming what an
// earlier run left), then build the bundle with each task's best config.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "client/cli.h"
#include "client/commands.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/tune_model.h"

namespace {

std::string duration(double s) {
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
  tune.tune = options;
  auto head = [](size_t i, size_t total, const autotune::Task& task) {
    return "[task " + std::to_string(i + 1) + "/" + std::to_string(total) + "] " + task.key;
  };
  tune.on_tasks = [&](size_t total) {
    std::cerr << model << ": " << total << " tuning tasks, " << options.trials
              << " trials each, records in " << records << "\n";
  };
  tune.on_progress = [&](size_t i, size_t total, const autotune::Task& task,
                         const autotune::TuneProgress& p) {
    constexpr int kWidth = 20;
    const int filled = p.trials_total > 0 ? p.trials_done * kWidth / p.trials_total : kWidth;
    std::fprintf(stderr, "%s%s [%s%s] %d/%d best %.1f GFLOP/s, %s left%s", tty ? "\r\033[K" : "",
                 head(i, total, task).c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, ' ').c_str(), p.trials_done, p.trials_total,
                 p.best_gflops, duration(p.eta_s).c_str(), tty ? "" : "\n");
    std::fflush(stderr);
  };
  tune.on_task_done = [&](size_t i, size_t total, const autotune::Task& task,
                          const autotune::TaskResult& r) {
    const std::string h = head(i, total, task);
    if (tty && r.measured_now > 0) std::fprintf(stderr, "\n");
    std::string errors;
    for (const auto& [kind, n] : r.errors) errors += " " + kind + "=" + std::to_string(n);
    std::fprintf(stderr,
                 "%s: %d trials (%d now, %d equal programs reused), best %.1f GFLOP/s%s%s\n",
                 h.c_str(), r.trials, r.measured_now, r.reused, r.best_gflops,
                 errors.empty() ? "" : ", errors:", errors.c_str());
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
    std::cerr << "wrote " << out << ": " << report.tuned << " tuned operators, " << report.defaults
              << " with default configs\n";
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
             std::to_string(defaults.trials) + ")"},
        {"--records", "DIR", "the record log, created or resumed (default: kiln-records)"},
        {"-o", "FILE", "the bundle to write (default: MODEL.kiln beside the model)"},
        {"--explorer", "E",
         "xgb (a cost model guides the search), random, grid or ga (default: " + defaults.explorer +
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
        "tune continues from the log without measuring anything twice. An opencl or cuda target "
        "is measured on this machine's GPU of that kind.";
    c.main = tune_main;
    return c;
  }();
  return command;
}
