// The `kiln` command line. Subcommands are added as the layers they drive land:
//   kiln example matmul [--n N] [--threads T] [--target TARGET]
// prints the paper's matrix-multiply example lowered before and after tiling, then compiles the
// hand-scheduled x86 matmul, checks it against a naive loop on sampled entries, and prints its speed.
//   kiln compile MODEL.onnx [--target TARGET] [-o MODEL.kiln] [--no-fuse] [--no-layout]
// compiles an ONNX model into a bundle (a progress bar on stderr); --no-fuse and --no-layout turn
// operator fusion and the NCHW[x]c layout off (for comparisons).
//   kiln run MODEL.kiln --input x.npy [--input NAME=y.npy ...] [-o OUT] [--profile RUNS]
// runs a bundle: inputs bound by position or by name; each output is written to OUT/<name>.npy
// when OUT is a folder (or ends with '/'), to OUT<name>.npy otherwise, or, without -o, its shape
// and first values are printed; --profile times RUNS runs and prints each kernel's median time.
//   kiln tune MODEL.onnx [--target T] [--trials N] [--records DIR] [-o MODEL.kiln] ...
// tunes every tunable operator of the model into the record log (tune_command.cc), then writes
// the bundle built with the best configs. Every failure prints "error: ..." and exits with 1.
//   kiln submit | jobs | watch | fetch | devices | cancel ...
// talk to a tuning farm (kilnd) through its public service (farm_commands.cc).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "client/commands.h"
#include "compiler/graph/graph_build.h"
#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

int usage() {
  std::cerr << "usage: kiln example matmul [--n N] [--threads T] [--target TARGET]\n"
               "       kiln compile MODEL.onnx [--target TARGET] [-o MODEL.kiln] [--no-fuse]\n"
               "                [--no-layout]\n"
               "       kiln run MODEL.kiln --input X.npy [--input NAME=Y.npy ...] [-o OUT]\n"
               "                [--profile RUNS]\n"
               "       kiln tune MODEL.onnx [--target TARGET] [--trials N] [--records DIR]\n"
               "                [-o MODEL.kiln] [--explorer xgb|random|grid|ga] [--batch B] [--seed S]\n"
               "  on a tuning farm (kilnd):\n"
               "       kiln submit MODEL.onnx --target T --device-key KEY --trials N [--name NAME]\n"
               "                [--priority P] [--owner O] [--watch]\n"
               "       kiln jobs [--owner O] [--state S]...\n"
               "       kiln watch JOB\n"
               "       kiln fetch JOB [-o OUT.kiln]\n"
               "       kiln devices [--key KEY]\n"
               "       kiln cancel JOB [--reason R]\n"
               "  farm commands take [--server HOST:PORT] [--token-file F] [--tls-ca F]\n";
  return 2;
}

/// Prints a kiln::Error (or any exception) as one "error: ..." line; returns the exit code 1.
}  // namespace

int report(const std::exception& e) {
  std::string msg = e.what();
  if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
  std::cerr << "error: " << msg << "\n";
  return 1;
}

std::string default_bundle_path(const std::string& onnx_path) {
  std::filesystem::path p(onnx_path);
  return p.replace_extension(".kiln").string();
}

namespace {

int compile_main(const std::vector<std::string>& args) {
  std::string model, out, target = "llvm -mcpu=native";
  kiln::graph::BuildOptions options;
  for (size_t i = 1; i < args.size(); ++i) {
    if ((args[i] == "--target" || args[i] == "-o") && i + 1 >= args.size()) {
      std::cerr << "error: " << args[i] << " needs a value\n";
      return 2;
    }
    if (args[i] == "--target") {
      target = args[++i];
    } else if (args[i] == "-o") {
      out = args[++i];
    } else if (args[i] == "--no-fuse") {
      options.fuse = false;
    } else if (args[i] == "--no-layout") {
      options.alter_layout = false;
    } else if (!args[i].empty() && args[i][0] == '-') {
      std::cerr << "error: unknown option '" << args[i] << "'\n";
      return usage();
    } else if (model.empty()) {
      model = args[i];
    } else {
      std::cerr << "error: more than one model given ('" << model << "', '" << args[i] << "')\n";
      return usage();
    }
  }
  if (model.empty()) return usage();
  if (out.empty()) out = default_bundle_path(model);
  bool drawn = false;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  options.progress = [&](size_t index, size_t total, const std::string& what) {
    constexpr size_t kWidth = 10;
    const size_t filled = total == 0 ? kWidth : index * kWidth / total;
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, ' ');
    // On a terminal the bar redraws in place; elsewhere (a log) each step is a line.
    std::fprintf(stderr, "%s[%s] %zu/%zu %s%s%s", tty ? "\r\033[K" : "", bar.c_str(), index, total,
                 index < total ? "compiling " : "", what.c_str(), tty ? "" : "\n");
    std::fflush(stderr);
    drawn = tty;
  };
  auto t0 = Clock::now();
  kiln::graph::BuildReport build;
  try {
    kiln::graph::compile_onnx(model, target, out, options, &build);
  } catch (const std::exception& e) {
    if (drawn) std::fprintf(stderr, "\n");
    return report(e);
  }
  if (drawn) std::fprintf(stderr, "\n");
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "wrote " << out << " (" << secs << " s): " << build.num_functions
            << " kernels from " << build.num_operators << " operators, "
            << build.constants_folded << " constant nodes and " << build.batch_norms_folded
            << " batch norms folded, " << build.convolutions_blocked
            << " convolutions in NCHW[x]c (" << build.layout_conversions
            << " layout conversions), intermediates in " << build.intermediate_bytes << " bytes ("
            << build.intermediate_bytes_without_reuse << " without memory reuse)\n";
  return 0;
}

/// A file-name-safe form of an output name.
std::string file_safe(const std::string& name) {
  std::string s;
  for (char c : name) {
    s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  }
  return s.empty() ? "output" : s;
}

/// The kernels by time, slowest first, with their share of the whole run.
void print_profile(std::vector<kiln::runtime::GraphExecutor::NodeTime> times, int runs) {
  double total = 0;
  for (const auto& t : times) total += t.median_ms;
  std::sort(times.begin(), times.end(),
            [](const auto& a, const auto& b) { return a.median_ms > b.median_ms; });
  std::printf("%zu kernels, %.3f ms in all (sum of medians over %d runs)\n", times.size(), total,
              runs);
  std::printf("%10s %6s  %s\n", "ms", "share", "function");
  for (const auto& t : times) {
    std::printf("%10.3f %5.1f%%  %s\n", t.median_ms, total > 0 ? 100 * t.median_ms / total : 0.0,
                t.func.c_str());
  }
}

int run_main(const std::vector<std::string>& args) {
  using namespace kiln;
  std::string bundle, out;
  int profile_runs = 0;
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> named;
  for (size_t i = 1; i < args.size(); ++i) {
    if ((args[i] == "--input" || args[i] == "-o" || args[i] == "--profile") &&
        i + 1 >= args.size()) {
      std::cerr << "error: " << args[i] << " needs a value\n";
      return 2;
    }
    if (args[i] == "--input") {
      const std::string v = args[++i];
      const size_t eq = v.find('=');
      if (eq == std::string::npos) {
        positional.push_back(v);
      } else {
        named.emplace_back(v.substr(0, eq), v.substr(eq + 1));
      }
    } else if (args[i] == "-o") {
      out = args[++i];
    } else if (args[i] == "--profile") {
      profile_runs = std::atoi(args[++i].c_str());
      if (profile_runs <= 0) {
        std::cerr << "error: --profile needs a positive number of runs, got '" << args[i] << "'\n";
        return 2;
      }
    } else if (!args[i].empty() && args[i][0] == '-') {
      std::cerr << "error: unknown option '" << args[i] << "'\n";
      return usage();
    } else if (bundle.empty()) {
      bundle = args[i];
    } else {
      std::cerr << "error: more than one bundle given ('" << bundle << "', '" << args[i] << "')\n";
      return usage();
    }
  }
  if (bundle.empty()) return usage();
  try {
    runtime::GraphExecutor g = runtime::GraphExecutor::load(bundle);
    KILN_USER_CHECK(positional.size() <= g.num_inputs())
        << "'" << bundle << "' takes " << g.num_inputs() << " input(s), " << positional.size()
        << " given by position";
    std::vector<bool> bound(g.num_inputs(), false);
    for (size_t i = 0; i < positional.size(); ++i) {
      runtime::NDArray a = runtime::load_npy(positional[i]);
      g.set_input(i, a);
      bound[i] = true;
    }
    for (const auto& [name, path] : named) {
      size_t idx = g.num_inputs();
      for (size_t i = 0; i < g.num_inputs(); ++i) {
        if (g.input_name(i) == name) idx = i;
      }
      KILN_USER_CHECK(idx < g.num_inputs())
          << "'" << bundle << "' has no input named '" << name << "'";
      KILN_USER_CHECK(!bound[idx]) << "input '" << name << "' is given twice";
      runtime::NDArray a = runtime::load_npy(path);
      g.set_input(idx, a);
      bound[idx] = true;
    }
    for (size_t i = 0; i < g.num_inputs(); ++i) {
      std::string shape;
      for (int64_t d : g.input_shape(i)) shape += (shape.empty() ? "" : ",") + std::to_string(d);
      KILN_USER_CHECK(bound[i]) << "input '" << g.input_name(i) << "' ("
                                << runtime::dtype_to_string(g.input_dtype(i)) << "[" << shape
                                << "]) is not given (use --input " << g.input_name(i)
                                << "=FILE.npy)";
    }
    if (profile_runs > 0) {
      print_profile(g.profile(profile_runs), profile_runs);
    } else {
      g.run();
    }
    namespace fs = std::filesystem;
    const bool to_dir = !out.empty() && (out.back() == '/' || fs::is_directory(out));
    if (to_dir) fs::create_directories(out);
    for (size_t i = 0; i < g.num_outputs(); ++i) {
      const runtime::NDArray& o = g.output(i);
      const std::string& name = g.output_name(i);
      if (!out.empty()) {
        const std::string path = to_dir ? (fs::path(out) / (file_safe(name) + ".npy")).string()
                                        : out + file_safe(name) + ".npy";
        runtime::save_npy(path, o);
        std::cout << "output '" << name << "': " << runtime::dtype_to_string(o.dtype())
                  << o.shape_string() << " -> " << path << "\n";
        continue;
      }
      std::cout << "output '" << name << "': " << runtime::dtype_to_string(o.dtype())
                << o.shape_string();
      if (runtime::dtype_equal(o.dtype(), runtime::kFloat32)) {
        std::cout << " = [";
        const int64_t n = std::min<int64_t>(o.num_elements(), 8);
        for (int64_t k = 0; k < n; ++k) std::cout << (k ? ", " : "") << o.data<float>()[k];
        std::cout << (o.num_elements() > n ? ", ...]" : "]");
      }
      std::cout << "\n";
    }
  } catch (const std::exception& e) {
    return report(e);
  }
  return 0;
}

int example_matmul(int n, int threads, const std::string& target) {
  using namespace kiln;
  std::cout << "== The paper's example: C[y][x] = sum_k A[k][y] * B[k][x], " << n << "x" << n << "\n\n";
  te::Tensor A = te::placeholder({n, n}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({n, n}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul_transposed_a(A, B);
  te::Schedule s = te::create_schedule({C});
  std::cout << "-- lowered, default schedule:\n" << compiler::lower_loops(s) << "\n";
  auto st = s[C];
  st.tile(st.axis(0), st.axis(1), st.reduce_axis(0), 8, 8, 8);
  std::cout << "-- after tile(y, x, k, 8, 8, 8):\n" << compiler::lower_loops(s) << "\n";

  std::cout << "== Hand-scheduled x86 matmul (packing, register tile, vectorize, unroll, parallel)\n";
  auto t0 = Clock::now();
  auto p = topi::packed_matmul_x86(n, n, n);
  auto mod = compiler::build(p.schedule, {p.a, p.b, p.c}, target, "matmul");
  auto f = mod.function("matmul");
  double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::cout << "compiled for '" << target << "' in " << compile_ms << " ms\n";

  runtime::set_num_threads(threads);
  auto a = runtime::NDArray::empty({n, n}, runtime::kFloat32);
  auto b = runtime::NDArray::empty({n, n}, runtime::kFloat32);
  auto c = runtime::NDArray::empty({n, n}, runtime::kFloat32);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < int64_t(n) * n; ++i) {
    a.data<float>()[i] = dist(rng);
    b.data<float>()[i] = dist(rng);
  }
  f(a, b, c);
  // Check 256 sampled entries against a naive dot product (1e-3 relative: summation order differs).
  std::uniform_int_distribution<int> pick(0, n - 1);
  for (int t = 0; t < 256; ++t) {
    int i = pick(rng), j = pick(rng);
    double acc = 0;
    for (int k = 0; k < n; ++k) acc += double(a.data<float>()[i * n + k]) * b.data<float>()[k * n + j];
    float got = c.data<float>()[i * n + j];
    if (std::abs(got - acc) > 1e-3 * (1 + std::abs(acc))) {
      std::cerr << "error: wrong result at C[" << i << "][" << j << "]: " << got << " vs " << acc << "\n";
      return 1;
    }
  }
  std::cout << "result checked against a naive dot product on 256 sampled entries\n";
  const int runs = 10;
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    auto s0 = Clock::now();
    f(a, b, c);
    times.push_back(std::chrono::duration<double>(Clock::now() - s0).count());
    std::fprintf(stderr, "\r  measuring [%-10s] %d/%d", std::string(r + 1, '#').c_str(), r + 1, runs);
  }
  std::fprintf(stderr, "\n");
  std::sort(times.begin(), times.end());
  double med = times[runs / 2];
  std::printf("matmul %dx%dx%d on %d thread(s): %.3f ms, %.1f GFLOP/s\n", n, n, n, threads, med * 1e3,
              2.0 * n * n * n / med * 1e-9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "compile") return compile_main(args);
  if (!args.empty() && args[0] == "run") return run_main(args);
  if (!args.empty() && args[0] == "tune") return tune_main(args);
  if (!args.empty() && args[0] == "submit") return submit_main(args);
  if (!args.empty() && args[0] == "jobs") return jobs_main(args);
  if (!args.empty() && args[0] == "watch") return watch_main(args);
  if (!args.empty() && args[0] == "fetch") return fetch_main(args);
  if (!args.empty() && args[0] == "devices") return devices_main(args);
  if (!args.empty() && args[0] == "cancel") return cancel_main(args);
  if (args.size() < 2 || args[0] != "example" || args[1] != "matmul") return usage();
  int n = 1024, threads = kiln::runtime::default_num_threads();
  std::string target = "llvm -mcpu=native";
  for (size_t i = 2; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) {
        std::cerr << "error: " << args[i] << " needs a value\n";
        std::exit(2);
      }
      return args[++i];
    };
    if (args[i] == "--n") {
      n = std::atoi(value().c_str());
    } else if (args[i] == "--threads") {
      threads = std::atoi(value().c_str());
    } else if (args[i] == "--target") {
      target = value();
    } else {
      std::cerr << "error: unknown option '" << args[i] << "'\n";
      return usage();
    }
  }
  if (n <= 0 || threads <= 0) {
    std::cerr << "error: --n and --threads must be positive\n";
    return 2;
  }
  try {
    return example_matmul(n, threads, target);
  } catch (const kiln::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
