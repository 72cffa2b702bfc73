// What the whole-model benchmarks (bench_models, bench_zoo) share: Kiln's latency measured the way
// models_ref.py measures ONNX Runtime's (the median single run after two warm-ups, over at least
// min_time seconds and 10 runs), the check of an output against ONNX Runtime's, building a model
// and checking it (build_and_check), and running the python helpers that write the models and time
// the reference.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "tests/models/model_inputs.h"

namespace kiln::bench {

/// Median milliseconds of one call of f: two warm-ups, then single runs until at least min_time
/// seconds and 10 runs have passed.
inline double median_ms(const std::function<void()>& f, double min_time) {
  using Clock = std::chrono::steady_clock;
  f();
  f();
  std::vector<double> times;
  auto start = Clock::now();
  while (times.size() < 10 ||
         std::chrono::duration<double>(Clock::now() - start).count() < min_time) {
    auto t0 = Clock::now();
    f();
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Two callables timed in alternation (paired_times).
struct PairedTimes {
  double f_ms = 0, g_ms = 0;  ///< the median milliseconds of one call of each
  double g_over_f = 0;        ///< the median over pairs of g's time / f's time in the same pair
};

/// f and g timed in alternation (two warm-ups each, then pairs, f first in one pair and g first in
/// the next, until at least min_time seconds and 20 pairs have passed), so that a change of load
/// or clock during the measurement reaches both alike: for comparing two builds of one model,
/// where timing one after the other let a busy neighbour decide the ratio. The ratio is the median
/// of the pairs' own ratios: two threads on a shared machine swing by 2x between pairs of runs as
/// the other core comes and goes, and a pair sees one state of it.
inline PairedTimes paired_times(const std::function<void()>& f, const std::function<void()>& g,
                                double min_time) {
  using Clock = std::chrono::steady_clock;
  auto time = [](const std::function<void()>& h, std::vector<double>* out) {
    auto t0 = Clock::now();
    h();
    out->push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  };
  for (int i = 0; i < 2; ++i) {
    f();
    g();
  }
  std::vector<double> tf, tg, ratios;
  auto start = Clock::now();
  while (tf.size() < 20 || std::chrono::duration<double>(Clock::now() - start).count() < min_time) {
    if (tf.size() % 2 == 0) {
      time(f, &tf);
      time(g, &tg);
    } else {
      time(g, &tg);
      time(f, &tf);
    }
    ratios.push_back(tg.back() / tf.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(tf), median(tg), median(ratios)};
}

/// 'text', for a shell command line.
/// The geomean of a bench's finite ratios (Kiln against its reference; nan ones are the cases that
/// did not build or match) and the lowest of them, with its name.
struct RatioGeomean {
  double log_sum = 0;
  int ok = 0;
  std::string worst;
  double worst_ratio = INFINITY;
  void add(const std::string& name, double r) {
    if (!std::isfinite(r)) return;
    log_sum += std::log(r);
    ++ok;
    if (r < worst_ratio) worst_ratio = r, worst = name;
  }
  double value() const { return ok ? std::exp(log_sum / ok) : NAN; }
  /// "ratio=<g> <what>=<n> ok=<k> worst=<name>:<ratio>", the tail of a geomean case line.
  std::string text(const char* what, size_t n) const {
    char line[256];
    std::snprintf(line, sizeof line, "ratio=%.3f %s=%zu ok=%d worst=%s:%.3f", value(), what, n, ok,
                  ok ? worst.c_str() : "none", ok ? worst_ratio : NAN);
    return line;
  }
};

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

/// Runs a shell command, returning its stdout; exits the benchmark (naming `who` and the command)
/// if it cannot run or fails.
inline std::string run_command(const std::string& cmd, const char* who) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    std::fprintf(stderr, "%s: cannot run: %s\n", who, cmd.c_str());
    std::exit(1);
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (pclose(p) != 0) {
    std::fprintf(stderr, "%s: failed: %s\n", who, cmd.c_str());
    std::exit(1);
  }
  return out;
}

/// max|a - b| / max|b|, or infinity if the shapes differ or a holds a NaN.
inline double relative_error(const runtime::NDArray& a, const runtime::NDArray& b) {
  if (a.shape() != b.shape()) return INFINITY;
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    double x = a.data<float>()[i], y = b.data<float>()[i];
    if (!std::isfinite(x)) return INFINITY;
    diff = std::max(diff, std::fabs(x - y));
    ref = std::max(ref, std::fabs(y));
  }
  return ref > 0 ? diff / ref : diff;
}

/// A model built for `target`, run once on `device` on its inputs (DIR/NAME.<input>.npy,
/// tests/models/model_inputs.h) and checked against DIR/NAME.expected.npy (ONNX Runtime's first
/// output): its executor, or the error that stopped it.
struct BuiltModel {
  std::unique_ptr<runtime::GraphExecutor> exec;
  graph::BuildReport report;
  double build_s = NAN;  ///< import and build
  std::string error;
};

inline BuiltModel build_and_check(const std::string& dir, const std::string& name,
                                  const std::string& target, const graph::BuildOptions& options,
                                  const graph::OnnxImportOptions& import, double tolerance,
                                  TargetKind device = TargetKind::kCpu) {
  BuiltModel b;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    graph::Graph g = graph::import_onnx(dir + "/" + name + ".onnx", import);
    runtime::Bundle bundle = graph::build_graph(g, target, options, &b.report);
    b.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    b.exec = std::make_unique<runtime::GraphExecutor>(
        runtime::GraphExecutor::from_bundle(std::move(bundle), name, device));
    for (const auto& [input, value] : model_inputs::load(dir, name))
      b.exec->set_input(input, value);
    b.exec->run();
    const double err =
        relative_error(b.exec->output(0), runtime::load_npy(dir + "/" + name + ".expected.npy"));
    if (!(err <= tolerance)) {
      std::ostringstream os;
      os << "output differs from ONNX Runtime: max|diff|/max|ref| = " << err;
      b.error = os.str();
      b.exec.reset();
    }
  } catch (const std::exception& e) {
    b.error = e.what();
    b.exec.reset();
  }
  return b;
}

}  // namespace kiln::bench
