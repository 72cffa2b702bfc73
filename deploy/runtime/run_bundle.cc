// Running a bundle from a command line (kiln run, kiln-run).
#include "deploy/runtime/run_bundle.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/shape_string.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/kernel_efficiency.h"
#include "deploy/runtime/machine_peak.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

/// A message of kiln::Error without its "error: " prefix.
std::string message_of(const Error& e) {
  std::string m = e.what();
  return m.rfind("error: ", 0) == 0 ? m.substr(7) : m;
}

/// Reads `file` and copies it into input `index`; kiln::Error naming the input and the file.
void bind(GraphExecutor& g, size_t index, const std::string& file) {
  NDArray a;
  try {
    a = load_npy(file);  // its errors name the file
  } catch (const Error& e) {
    KILN_USER_ERROR() << "input '" << g.input_name(index) << "': " << message_of(e);
  }
  try {
    g.set_input(index, a);
  } catch (const Error& e) {
    // A bundle runs only the shapes it was compiled for; another batch needs another bundle.
    const bool other_shape = a.shape() != g.input_shape(index);
    KILN_USER_ERROR() << message_of(e) << " (in '" << file << "')"
                      << (other_shape ? "; the bundle was built for that shape (compile it again "
                                        "with --input-shape " +
                                            g.input_name(index) + "=D0,D1,... for another)"
                                      : std::string());
  }
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

/// "N runs: median M, min A, max B" (and the first run's time when it was not a warm-up).
void print_run_times(std::ostream& out, std::vector<double> ms, bool after_warm_up) {
  const double first = ms.front();
  std::sort(ms.begin(), ms.end());
  out << ms.size() << (ms.size() == 1 ? " run" : " runs")
      << (after_warm_up ? " after a warm-up run" : "") << ", time per run: median "
      << ms_text(ms[ms.size() / 2]) << ", min " << ms_text(ms.front()) << ", max "
      << ms_text(ms.back());
  if (!after_warm_up && ms.size() > 1) out << " (the first: " << ms_text(first) << ")";
  out << "\n";
}

/// A figure of the profile's table, or "-" when the bundle does not give what it needs.
std::string figure(const std::optional<double>& v, const char* format, double scale = 1) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, *v * scale);
  return buf;
}

/// The nodes by time, slowest first, with their share of the whole run; on the host CPU also each
/// kernel against the machine's measured roofs (kernel_efficiency.h), after a header that states
/// them.
void print_profile(std::ostream& out, const GraphExecutor& g,
                   std::vector<GraphExecutor::NodeTime> times, int runs) {
  double total = 0;
  for (const auto& t : times) total += t.median_ms;
  std::stable_sort(times.begin(), times.end(),
                   [](const auto& a, const auto& b) { return a.median_ms > b.median_ms; });
  char line[512];
  // On a device the machine's CPU roofs say nothing of the kernels.
  const bool host = g.device() == nullptr;
  const MachinePeak peak = host ? machine_peak() : MachinePeak{};
  if (host) out << "machine: " << describe(peak) << "\n";
  std::snprintf(line, sizeof line, "%zu kernels, %.3f ms in all (sum of medians over %d runs)\n",
                times.size(), total, runs);
  out << line;
  if (!host) {
    std::snprintf(line, sizeof line, "%10s %6s  %s\n", "ms", "share", "function");
    out << line;
    for (const auto& t : times) {
      std::snprintf(line, sizeof line, "%10.3f %5.1f%%  ", t.median_ms,
                    total > 0 ? 100 * t.median_ms / total : 0.0);
      out << line << t.func << "\n";
    }
    return;
  }
  std::snprintf(line, sizeof line, "%10s %6s %8s %6s %8s %6s %8s %9s  %s\n", "ms", "share",
                "GFLOP/s", "%peak", "GB/s", "%bw", "bound", "lost_ms", "function");
  out << line;
  for (const KernelEfficiency& k : kernel_efficiency(times, peak)) {
    std::snprintf(
        line, sizeof line, "%10.3f %5.1f%% %8s %6s %8s %6s %8s %9s  ", k.ms, 100 * k.share,
        figure(k.gflops, "%.1f").c_str(), figure(k.peak_fraction, "%.1f%%", 100).c_str(),
        figure(k.gbytes_per_s, "%.1f").c_str(), figure(k.bandwidth_fraction, "%.1f%%", 100).c_str(),
        bound_name(k.bound), figure(k.lost_ms, "%.3f").c_str());
    out << line << k.func << "\n";
  }
}

/// The VDLA nodes of the last run: each one's cycles on the cycle model, its time at the
/// configuration's clock, GEMM utilization and DRAM bytes; then their sum.
void print_vdla_stats(std::ostream& out, const GraphExecutor& g) {
  const vdla::Config cfg;
  char line[512];
  auto row = [&](const vdla::Stats& s, const std::string& what) {
    const uint64_t bytes = s.inp_load_nbytes + s.wgt_load_nbytes + s.acc_load_nbytes +
                           s.uop_load_nbytes + s.out_store_nbytes;
    std::snprintf(line, sizeof line, "%12llu %10.3f %6.3f %12llu  ",
                  static_cast<unsigned long long>(s.cycles),
                  static_cast<double>(s.cycles) / (cfg.clock_mhz * 1e3), s.utilization(),
                  static_cast<unsigned long long>(bytes));
    out << line << what << "\n";
  };
  const auto nodes = g.vdla_stats();
  std::snprintf(line, sizeof line, "%zu VDLA nodes (cycle model, %.0f MHz, last run):\n",
                nodes.size(), static_cast<double>(cfg.clock_mhz));
  out << line;
  std::snprintf(line, sizeof line, "%12s %10s %6s %12s  %s\n", "cycles", "vdla_ms", "util",
                "dram_bytes", "node");
  out << line;
  for (const auto& n : nodes) row(n.stats, n.name + " (" + n.func + ")");
  row(g.vdla_total(), "all VDLA nodes");
}

}  // namespace

InputFile parse_input_file(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  return {text.substr(0, eq), text.substr(eq + 1)};
}

std::string file_safe(const std::string& name) {
  std::string s;
  for (char c : name) {
    s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  }
  if (!s.empty() && s[0] == '.') s[0] = '_';
  return s.empty() ? "output" : s;
}

std::vector<std::string> output_paths(const GraphExecutor& g, const std::string& dir) {
  std::vector<std::string> paths;
  std::set<std::string> taken;
  for (size_t i = 0; i < g.num_outputs(); ++i) {
    const std::string base = file_safe(g.output_name(i));
    std::string name = base;
    for (int k = 2; taken.count(name); ++k) name = base + "_" + std::to_string(k);
    taken.insert(name);
    paths.push_back((fs::path(dir) / (name + ".npy")).string());
  }
  return paths;
}

PreparedRun prepare_run(const RunOptions& o) {
  KILN_USER_CHECK(o.runs > 0) << "the number of runs must be positive, got " << o.runs;
  KILN_USER_CHECK(o.threads >= 0) << "the number of threads must be positive, got " << o.threads;
  if (o.threads > 0) set_num_threads(o.threads);
  PreparedRun p{GraphExecutor::load(o.bundle, o.device), {}};
  GraphExecutor& g = p.graph;
  std::vector<bool> bound(g.num_inputs(), false);
  size_t next_position = 0;
  for (const InputFile& in : o.inputs) {
    if (!in.name.empty()) continue;
    KILN_USER_CHECK(next_position < g.num_inputs())
        << "'" << o.bundle << "' takes " << g.num_inputs() << " input(s), more given by position ('"
        << in.path << "' is one too many)";
    bind(g, next_position, in.path);
    bound[next_position++] = true;
  }
  for (const InputFile& in : o.inputs) {
    if (in.name.empty()) continue;
    size_t idx = g.num_inputs();
    std::string known;
    for (size_t i = 0; i < g.num_inputs(); ++i) {
      if (g.input_name(i) == in.name) idx = i;
      known += (i ? ", " : "") + g.input_name(i);
    }
    KILN_USER_CHECK(idx < g.num_inputs()) << "'" << o.bundle << "' has no input named '" << in.name
                                          << "' (its inputs: " << known << ")";
    KILN_USER_CHECK(!bound[idx]) << "input '" << in.name << "' is given twice";
    bind(g, idx, in.path);
    bound[idx] = true;
  }
  for (size_t i = 0; i < g.num_inputs(); ++i) {
    if (g.input_has_default(i)) continue;  // runs with the model's default unless given
    KILN_USER_CHECK(bound[i]) << "input '" << g.input_name(i) << "' ("
                              << dtype_to_string(g.input_dtype(i))
                              << shape_string(g.input_shape(i), ",")
                              << ") is not given (use --input " << g.input_name(i) << "=FILE.npy)";
  }
  if (!o.output_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.output_dir, ec);
    KILN_USER_CHECK(fs::is_directory(o.output_dir))
        << "-o '" << o.output_dir << "': cannot create that folder for the outputs"
        << (ec                         ? " (" + ec.message() + ")"
            : fs::exists(o.output_dir) ? " (a file has that name)"
                                       : "");
    p.output_paths = output_paths(g, o.output_dir);
  }
  return p;
}

void execute_run(PreparedRun& p, const RunOptions& o, std::ostream& out) {
  GraphExecutor& g = p.graph;
  if (g.device() != nullptr) out << "running on " << g.device()->description() << "\n";
  if (o.profile) {
    std::vector<double> run_ms;
    print_profile(out, g, g.profile(o.runs, &run_ms), o.runs);
    print_run_times(out, run_ms, /*after_warm_up=*/true);
    if (g.has_vdla()) print_vdla_stats(out, g);
  } else {
    std::vector<double> run_ms;
    for (int r = 0; r < o.runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      g.run();
      run_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    if (o.runs > 1) print_run_times(out, run_ms, /*after_warm_up=*/false);
  }
  for (size_t i = 0; i < g.num_outputs(); ++i) {
    const NDArray& a = g.output(i);
    out << "output '" << g.output_name(i) << "': " << dtype_to_string(a.dtype())
        << a.shape_string();
    if (!p.output_paths.empty()) {
      save_npy(p.output_paths[i], a);
      out << " -> " << p.output_paths[i] << "\n";
      continue;
    }
    if (dtype_equal(a.dtype(), kFloat32)) {
      out << " = [";
      const int64_t n = std::min<int64_t>(a.num_elements(), 8);
      for (int64_t k = 0; k < n; ++k) out << (k ? ", " : "") << a.data<float>()[k];
      out << (a.num_elements() > n ? ", ...]" : "]");
    }
    out << "\n";
  }
  out.flush();
}

}  // namespace kiln::runtime
