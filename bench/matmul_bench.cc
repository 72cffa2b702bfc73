// The hand-scheduled Kiln matmul against OpenBLAS sgemm, in the same process and run:
//   case=matmul_<N>_t<threads> kiln_gflops=<x> ref_gflops=<y> ratio=<x/y>
// for N in {512, 1024, 2048} and 1 and 2 threads, then the time to lower and JIT the matmul:
//   case=compile_matmul ms=<median>
// Each figure is the median of several timed runs after a warm-up. Results are checked against
// OpenBLAS before timing, so a fast wrong kernel cannot pass.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "base/cli.h"
#include "compiler/lower.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

/// Median seconds per call of f, timing batches that last at least ~50 ms.
double median_seconds(const std::function<void()>& f, int repeats = 7) {
  f();  // warm-up
  auto t0 = Clock::now();
  f();
  double one = std::chrono::duration<double>(Clock::now() - t0).count();
  int number = std::max(1, static_cast<int>(0.05 / std::max(one, 1e-6)));
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    auto s = Clock::now();
    for (int i = 0; i < number; ++i) f();
    times.push_back(std::chrono::duration<double>(Clock::now() - s).count() / number);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

kiln::runtime::NDArray random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  auto a = kiln::runtime::NDArray::empty({rows, cols}, kiln::runtime::kFloat32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < rows * cols; ++i) a.data<float>()[i] = dist(rng);
  return a;
}

const kiln::cli::Program kBench{
    .name = "bench_matmul",
    .operands = "[N]",
    .summary =
        "Kiln's hand-scheduled N x N matmul against OpenBLAS sgemm (default N: 512, 1024 "
        "and 2048).",
};

int run_bench(const kiln::cli::Args& args) {
  std::vector<int> sizes = {512, 1024, 2048};
  if (args.operands.size() > 1) throw kiln::cli::UsageError("bench_matmul takes one N at most");
  if (!args.operands.empty()) sizes = {kiln::cli::positive_number(args.operands[0], "N")};
  const char* target = "llvm -mcpu=native";

  for (int n : sizes) {
    auto p = kiln::topi::packed_matmul_x86(n, n, n);
    auto mod = kiln::compiler::build(p.schedule, {p.a, p.b, p.c}, target, "matmul");
    auto f = mod.function("matmul");
    auto a = random_matrix(n, n, 1), b = random_matrix(n, n, 2);
    auto c = kiln::runtime::NDArray::empty({n, n}, kiln::runtime::kFloat32);
    auto ref = kiln::runtime::NDArray::empty({n, n}, kiln::runtime::kFloat32);
    auto run_ref = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                  b.data<float>(), n, 0.0f, ref.data<float>(), n);
    };
    auto run_kiln = [&] { f(a, b, c); };
    // Correctness first: within 1e-3 relative of OpenBLAS (summation orders differ).
    run_ref();
    run_kiln();
    for (int64_t i = 0; i < int64_t(n) * n; ++i) {
      float x = c.data<float>()[i], y = ref.data<float>()[i];
      if (std::fabs(x - y) > 1e-3f * (1.0f + std::fabs(y))) {
        std::fprintf(stderr, "matmul %d: wrong result at %ld: %f vs %f\n", n, long(i), x, y);
        return 1;
      }
    }
    const double flops = 2.0 * n * n * n;
    for (int threads : {1, 2}) {
      kiln::runtime::set_num_threads(threads);
      openblas_set_num_threads(threads);
      double tk = median_seconds(run_kiln);
      double tr = median_seconds(run_ref);
      double gk = flops / tk * 1e-9, gr = flops / tr * 1e-9;
      std::printf("case=matmul_%d_t%d kiln_gflops=%.1f ref_gflops=%.1f ratio=%.3f\n", n, threads,
                  gk, gr, gk / gr);
      std::fflush(stdout);
    }
  }

  // Compile speed: build the tuned 1024 matmul from its schedule, lowering + JIT.
  std::vector<double> ms;
  for (int i = 0; i < 15; ++i) {
    auto t0 = Clock::now();
    auto p = kiln::topi::packed_matmul_x86(1024, 1024, 1024);
    auto mod = kiln::compiler::build(p.schedule, {p.a, p.b, p.c}, target, "matmul");
    (void)mod.function("matmul");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("case=compile_matmul ms=%.1f\n", ms[ms.size() / 2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
