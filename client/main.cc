// The `kiln` command line. Subcommands are added as the layers they drive land:
//   kiln example matmul [--n N] [--threads T] [--target TARGET]
// prints the paper's matrix-multiply example lowered before and after tiling, then compiles the
// hand-scheduled x86 matmul, checks it against a naive loop on sampled entries, and prints its speed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

int usage() {
  std::cerr << "usage: kiln example matmul [--n N] [--threads T] [--target TARGET]\n";
  return 2;
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
