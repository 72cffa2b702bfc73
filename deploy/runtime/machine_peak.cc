// Measuring the machine's FMA rate and memory bandwidth (machine_peak.h).
#include "deploy/runtime/machine_peak.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "deploy/runtime/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kAccumulators = 12;

/// One FMA loop: `iters` rounds of kAccumulators independent FMAs; returns a value that depends on
/// every one, so that nothing is optimized away.
using FmaLoop = float (*)(int64_t iters);

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_set1_ps(0.001f * static_cast<float>(k));
  const __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  for (int k = 1; k < kAccumulators; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  float lanes[16];
  _mm512_storeu_ps(lanes, acc[0]);
  return lanes[0] + lanes[15];
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_set1_ps(0.001f * static_cast<float>(k));
  const __m256 a = _mm256_set1_ps(0.9999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  for (int k = 1; k < kAccumulators; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  return lanes[0] + lanes[7];
}

float mul_add_sse(int64_t iters) {  // x86-64's baseline: a multiply and an add, 4 lanes
  __m128 acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm_set1_ps(0.001f * static_cast<float>(k));
  const __m128 a = _mm_set1_ps(0.9999f), b = _mm_set1_ps(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = _mm_add_ps(_mm_mul_ps(acc[k], a), b);
  }
  for (int k = 1; k < kAccumulators; ++k) acc[0] = _mm_add_ps(acc[0], acc[k]);
  return _mm_cvtss_f32(acc[0]);
}
#elif defined(__aarch64__)
float fma_neon(int64_t iters) {
  float32x4_t acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = vdupq_n_f32(0.001f * static_cast<float>(k));
  const float32x4_t a = vdupq_n_f32(0.9999f), b = vdupq_n_f32(1e-4f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators; ++k) acc[k] = vfmaq_f32(b, acc[k], a);
  }
  for (int k = 1; k < kAccumulators; ++k) acc[0] = vaddq_f32(acc[0], acc[k]);
  return vaddvq_f32(acc[0]);
}
#else
float mul_add_scalar(int64_t iters) {
  float acc[kAccumulators];
  for (int k = 0; k < kAccumulators; ++k) acc[k] = 0.001f * static_cast<float>(k);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < kAccumulators; ++k) acc[k] = acc[k] * 0.9999f + 1e-4f;
  }
  float s = 0;
  for (int k = 0; k < kAccumulators; ++k) s += acc[k];
  return s;
}
#endif

struct FmaKernel {
  const char* isa;
  FmaLoop loop;
  int lanes;
};

/// The widest FMA loop this CPU runs.
FmaKernel widest_fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", fma_avx512, 16};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma", fma_avx2, 8};
  return {"sse", mul_add_sse, 4};
#elif defined(__aarch64__)
  return {"neon", fma_neon, 4};
#else
  return {"scalar", mul_add_scalar, 1};
#endif
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

volatile float sink;  // the loops' results go here, so that they are computed

/// FLOP/s of one core: warm-up, then the best of 8 chunks of about 3 ms.
double measure_core_flops(const FmaKernel& k) {
  int64_t iters = 1024;
  for (double t = 0; t < 2e-3; iters *= 2) {  // calibrate a chunk to >= 2 ms
    const auto t0 = Clock::now();
    sink = k.loop(iters);
    t = seconds_since(t0);
    if (t >= 2e-3) break;
  }
  for (const auto t0 = Clock::now(); seconds_since(t0) < 10e-3;) sink = k.loop(iters);
  double best = 0;
  for (int r = 0; r < 8; ++r) {
    const auto t0 = Clock::now();
    sink = k.loop(iters);
    best = std::max(best, static_cast<double>(iters) / seconds_since(t0));
  }
  return best * kAccumulators * k.lanes * 2;
}

/// The last-level cache's size in bytes (sysfs, else sysconf), or 32 MiB when neither says.
int64_t last_level_cache_bytes() {
  int64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream size_file(dir + "size");
    std::string size;
    if (!(size_file >> size) || size.empty()) continue;
    int64_t bytes = std::atoll(size.c_str());
    if (size.back() == 'K') bytes <<= 10;
    if (size.back() == 'M') bytes <<= 20;
    best = std::max(best, bytes);
  }
#if defined(_SC_LEVEL3_CACHE_SIZE)
  if (best == 0) best = std::max<int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
  return best > 0 ? best : int64_t{32} << 20;
}

/// Bytes read + written per second by dst = src * s over buffers far larger than the cache.
double measure_bandwidth() {
  // Each buffer twice the cache, so that together they are four times as large.
  const int64_t bytes =
      std::clamp<int64_t>(2 * last_level_cache_bytes(), int64_t{32} << 20, int64_t{128} << 20);
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::unique_ptr<float[]> src(new float[n]), dst(new float[n]);
  auto pass = [&](float scale) {
    parallel_launch([&](int32_t task, int32_t tasks) {
      const int64_t begin = n * task / tasks, end = n * (task + 1) / tasks;
      float* d = dst.get();
      const float* s = src.get();
      for (int64_t i = begin; i < end; ++i) d[i] = s[i] * scale;
      return 0;
    });
  };
  parallel_launch([&](int32_t task, int32_t tasks) {  // first touch, by the threads that stream
    const int64_t begin = n * task / tasks, end = n * (task + 1) / tasks;
    std::fill(src.get() + begin, src.get() + end, 1.0f);
    std::fill(dst.get() + begin, dst.get() + end, 0.0f);
    return 0;
  });
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    pass(1.0f + static_cast<float>(r));
    best = std::max(best, 2.0 * static_cast<double>(bytes) / seconds_since(t0));
  }
  sink = dst[n / 2];
  return best;
}

}  // namespace

MachinePeak machine_peak(int threads) {
  static std::mutex mu;
  static std::unique_ptr<std::pair<std::string, double>> core;  // isa, FLOP/s of one core
  static std::map<int, double> bandwidth;                       // by thread count
  std::lock_guard<std::mutex> lock(mu);
  if (threads <= 0) threads = num_threads();
  if (!core) {
    const FmaKernel k = widest_fma();
    core = std::make_unique<std::pair<std::string, double>>(k.isa, measure_core_flops(k));
  }
  auto bw = bandwidth.find(threads);
  if (bw == bandwidth.end()) {
    const int before = num_threads();
    if (before != threads) set_num_threads(threads);
    const double measured = measure_bandwidth();
    if (before != threads) set_num_threads(before);
    bw = bandwidth.emplace(threads, measured).first;
  }
  MachinePeak p;
  p.vector_isa = core->first;
  p.core_flops = core->second;
  p.threads = threads;
  p.flops = core->second * threads;
  p.bytes_per_s = bw->second;
  return p;
}

std::string describe(const MachinePeak& p) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "peak %.1f GFLOP/s (%d thread%s x %.1f, fp32 FMA, %s), memory %.1f GB/s, balance "
                "%.1f FLOP/byte",
                p.flops / 1e9, p.threads, p.threads == 1 ? "" : "s", p.core_flops / 1e9,
                p.vector_isa.c_str(), p.bytes_per_s / 1e9, p.balance());
  return buf;
}

}  // namespace kiln::runtime
