// The kernel-efficiency report's arithmetic (kernel_efficiency.h) on figures chosen by hand, and
// the machine's measured peak (machine_peak.h): positive, plausible, measured once.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "deploy/runtime/kernel_efficiency.h"
#include "deploy/runtime/machine_peak.h"

namespace kiln::runtime {
namespace {

using NodeTime = GraphExecutor::NodeTime;

NodeTime kernel(const std::string& func, double ms, std::optional<double> flops,
                std::optional<double> bytes) {
  NodeTime t{func + "_node", func, ms, {}};
  t.work.flops = flops;
  t.work.bytes = bytes;
  t.work.ops = "Conv+Relu";
  t.work.shapes = {{1, 8}, {8}};
  return t;
}

// A machine of 100 GFLOP/s and 10 GB/s: its balance point is 10 FLOP per byte.
MachinePeak machine() {
  MachinePeak p;
  p.vector_isa = "test";
  p.core_flops = 50e9;
  p.threads = 2;
  p.flops = 100e9;
  p.bytes_per_s = 10e9;
  return p;
}

TEST(KernelEfficiency, RooflineFiguresByHand) {
  const std::vector<NodeTime> times = {
      // 1 GFLOP over 1 MB (1000 FLOP/byte): compute-bound, 10 ms at the roof, took 20.
      kernel("conv", 20, 1e9, 1e6),
      // 1 MFLOP over 100 MB: memory-bound, 10 ms at the roof, took 20.
      kernel("copy", 20, 1e6, 1e8),
      // a cache-resident kernel beats the DRAM roof: 1 MB in 0.05 ms (0.1 ms at the roof).
      kernel("small", 0.05, 1e3, 1e6),
      // an older bundle: no work given.
      kernel("old", 9.95, std::nullopt, std::nullopt),
  };
  const std::vector<KernelEfficiency> k = kernel_efficiency(times, machine());
  ASSERT_EQ(k.size(), 4u);

  EXPECT_EQ(k[0].func, "conv");
  EXPECT_EQ(k[0].node, "conv_node");
  EXPECT_EQ(k[0].ops, "Conv+Relu");
  EXPECT_EQ(shapes_text(k[0]), "[1, 8] [8]");
  EXPECT_DOUBLE_EQ(k[0].share, 0.4);
  EXPECT_DOUBLE_EQ(*k[0].gflops, 50);
  EXPECT_DOUBLE_EQ(*k[0].peak_fraction, 0.5);
  EXPECT_DOUBLE_EQ(*k[0].gbytes_per_s, 0.05);
  EXPECT_DOUBLE_EQ(*k[0].bandwidth_fraction, 0.005);
  EXPECT_EQ(k[0].bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(*k[0].roof_ms, 10);
  EXPECT_DOUBLE_EQ(*k[0].efficiency, 0.5);
  EXPECT_DOUBLE_EQ(*k[0].lost_ms, 10);

  EXPECT_EQ(k[1].bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(*k[1].gbytes_per_s, 5);
  EXPECT_DOUBLE_EQ(*k[1].bandwidth_fraction, 0.5);
  EXPECT_DOUBLE_EQ(*k[1].roof_ms, 10);
  EXPECT_DOUBLE_EQ(*k[1].efficiency, 0.5);
  EXPECT_DOUBLE_EQ(*k[1].lost_ms, 10);

  EXPECT_EQ(k[2].bound, Bound::kMemory);
  EXPECT_DOUBLE_EQ(*k[2].efficiency, 2);
  EXPECT_DOUBLE_EQ(*k[2].lost_ms, -0.05);

  EXPECT_DOUBLE_EQ(k[3].ms, 9.95);
  EXPECT_EQ(k[3].bound, Bound::kUnknown);
  EXPECT_STREQ(bound_name(k[3].bound), "-");
  EXPECT_FALSE(k[3].gflops || k[3].gbytes_per_s || k[3].efficiency || k[3].lost_ms);
}

TEST(KernelEfficiency, RankedByTheTimeTheyLose) {
  std::vector<KernelEfficiency> k = kernel_efficiency(
      {kernel("unknown", 50, std::nullopt, std::nullopt), kernel("loses_1ms", 11, 1e9, 1e6),
       kernel("loses_10ms", 20, 1e9, 1e6), kernel("beats_roof", 0.05, 1e3, 1e6)},
      machine());
  std::stable_sort(k.begin(), k.end(), loses_more);
  std::vector<std::string> order;
  for (const auto& r : k) order.push_back(r.func);
  EXPECT_EQ(order, (std::vector<std::string>{"loses_10ms", "loses_1ms", "beats_roof", "unknown"}));
}

TEST(KernelEfficiency, OnlyBytesGivesBandwidthButNoBound) {
  const auto k = kernel_efficiency({kernel("t", 1, std::nullopt, 1e7)}, machine());
  EXPECT_DOUBLE_EQ(*k[0].gbytes_per_s, 10);
  EXPECT_FALSE(k[0].gflops);
  EXPECT_EQ(k[0].bound, Bound::kUnknown);
  EXPECT_FALSE(k[0].lost_ms);
}

TEST(MachinePeak, MeasuredOnceAndPlausible) {
  const auto t0 = std::chrono::steady_clock::now();
  const MachinePeak p = machine_peak(1);
  const double first_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << describe(p) << ", measured in " << first_s << " s\n";
  EXPECT_FALSE(p.vector_isa.empty());
  EXPECT_EQ(p.threads, 1);
  // One core does more than 1 GFLOP/s of fp32 FMAs (a 2010 laptop's SSE core: ~10) and less than
  // 10 TFLOP/s; memory moves more than 100 MB/s and less than 10 TB/s.
  EXPECT_GT(p.core_flops, 1e9);
  EXPECT_LT(p.core_flops, 1e13);
  EXPECT_DOUBLE_EQ(p.flops, p.core_flops);
  EXPECT_GT(p.bytes_per_s, 1e8);
  EXPECT_LT(p.bytes_per_s, 1e13);
  EXPECT_GT(p.balance(), 0);
  EXPECT_NE(describe(p).find("GFLOP/s (1 thread x "), std::string::npos) << describe(p);
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(p.vector_isa, "avx512f");
  }
#endif
  // Well under a second even on a busy machine (about 0.1-0.2 s on an idle one).
  EXPECT_LT(first_s, 2.0);

  // Cached: the same core figure again at once; two threads count the core twice.
  const auto t1 = std::chrono::steady_clock::now();
  const MachinePeak again = machine_peak(1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 0.01);
  EXPECT_EQ(again.core_flops, p.core_flops);
  EXPECT_EQ(again.bytes_per_s, p.bytes_per_s);
  const MachinePeak two = machine_peak(2);
  EXPECT_EQ(two.threads, 2);
  EXPECT_DOUBLE_EQ(two.flops, 2 * p.core_flops);
  EXPECT_GT(two.bytes_per_s, 1e8);
}

}  // namespace
}  // namespace kiln::runtime
