// `kiln tune`: extract the model's tuning tasks, tune each into the record log (resuming what an
// earlier run left), then build the bundle with each task's best config.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "client/commands.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"

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

int usage() {
  std::cerr << "usage: kiln tune MODEL.onnx [--target TARGET] [--trials N] [--records DIR]\n"
               "                 [-o MODEL.kiln] [--explorer xgb|random|grid|ga] [--batch B]\n"
               "                 [--seed S] [--threads T] [--repeat R] [--flush-cache]\n"
               "  --threads: threads each candidate runs on (default: all CPUs); --repeat: timed\n"
               "  repeats per candidate; --flush-cache: write past the last-level cache before each\n"
               "  repeat\n";
  return 2;
}

}  // namespace

int tune_main(const std::vector<std::string>& args) {
  using namespace kiln;
  std::string model, out, records = "kiln-records", target = "llvm -mcpu=native";
  autotune::TuneOptions options;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool takes_value = a == "--target" || a == "--trials" || a == "--records" || a == "-o" ||
                             a == "--explorer" || a == "--batch" || a == "--seed" ||
                             a == "--threads" || a == "--repeat";
    if (takes_value && i + 1 >= args.size()) {
      std::cerr << "error: " << a << " needs a value\n";
      return 2;
    }
    auto positive = [&](const std::string& v) {
      const long n = std::strtol(v.c_str(), nullptr, 10);
      if (n <= 0) {
        std::cerr << "error: " << a << " needs a positive number, got '" << v << "'\n";
        std::exit(2);
      }
      return static_cast<int>(n);
    };
    if (a == "--target") {
      target = args[++i];
    } else if (a == "--trials") {
      options.trials = positive(args[++i]);
    } else if (a == "--records") {
      records = args[++i];
    } else if (a == "-o") {
      out = args[++i];
    } else if (a == "--explorer") {
      options.explorer = args[++i];
    } else if (a == "--batch") {
      options.batch = positive(args[++i]);
    } else if (a == "--seed") {
      options.seed = std::strtoull(args[++i].c_str(), nullptr, 10);
    } else if (a == "--threads") {
      options.local.threads = positive(args[++i]);
    } else if (a == "--repeat") {
      options.local.repeat = positive(args[++i]);
    } else if (a == "--flush-cache") {
      options.local.flush_cache = true;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "error: unknown option '" << a << "'\n";
      return usage();
    } else if (model.empty()) {
      model = a;
    } else {
      std::cerr << "error: more than one model given ('" << model << "', '" << a << "')\n";
      return usage();
    }
  }
  if (model.empty()) return usage();
  if (out.empty()) out = default_bundle_path(model);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  try {
    const graph::Graph g = graph::import_onnx(model);
    records::RecordLog log = records::RecordLog::open(records);
    const std::vector<autotune::Task> tasks = graph::extract_tasks(g, target);
    std::cerr << model << ": " << tasks.size() << " tuning tasks, " << options.trials
              << " trials each, records in " << records << "\n";
    std::vector<const autotune::Task*> history;
    autotune::Tuner tuner(log, options);  // one for all tasks: it keeps their features
    for (size_t i = 0; i < tasks.size(); ++i) {
      const autotune::Task& task = tasks[i];
      const std::string head = "[task " + std::to_string(i + 1) + "/" +
                               std::to_string(tasks.size()) + "] " + task.key;
      tuner.set_progress([&](const autotune::TuneProgress& p) {
        constexpr int kWidth = 20;
        const int filled = p.trials_total > 0 ? p.trials_done * kWidth / p.trials_total : kWidth;
        std::fprintf(stderr, "%s%s [%s%s] %d/%d best %.1f GFLOP/s, %s left%s",
                     tty ? "\r\033[K" : "", head.c_str(), std::string(filled, '#').c_str(),
                     std::string(kWidth - filled, ' ').c_str(), p.trials_done, p.trials_total,
                     p.best_gflops, duration(p.eta_s).c_str(), tty ? "" : "\n");
        std::fflush(stderr);
      });
      const autotune::TaskResult r = tuner.tune(task, history);
      if (tty && r.measured_now > 0) std::fprintf(stderr, "\n");
      std::string errors;
      for (const auto& [kind, n] : r.errors) errors += " " + kind + "=" + std::to_string(n);
      std::fprintf(stderr, "%s: %d trials (%d now, %d equal programs reused), best %.1f GFLOP/s%s%s\n",
                   head.c_str(), r.trials, r.measured_now, r.reused, r.best_gflops,
                   errors.empty() ? "" : ", errors:", errors.c_str());
      if (r.contended > 0) {
        std::fprintf(stderr,
                     "%s: warning: %d of %d measurements shared the CPU with other processes "
                     "(contended); their speeds may be understated: tune on an idle machine\n",
                     head.c_str(), r.contended, r.measured_now);
      }
      history.push_back(&task);
    }
    autotune::LogConfigSource source(log);
    graph::BuildOptions build;
    build.configs = &source;
    runtime::write_bundle(out, graph::build_graph(g, target, build));
    std::cerr << "wrote " << out << ": " << source.tuned() << " tuned operators, "
              << source.defaults() << " with default configs\n";
  } catch (const std::exception& e) {
    return report(e);
  }
  return 0;
}
