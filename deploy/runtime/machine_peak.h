// What this machine can do at most, measured, for the kernel-efficiency report
// (kernel_efficiency.h, `kiln run --profile`): the fp32 FMA rate of one core at the widest vector
// the CPU has, and the memory bandwidth of a streaming read and write.
//
// The FMA rate: a loop of independent fused multiply-adds (12 accumulators, enough to hide the FMA
// latency on every core we know: 4 cycles on 2 ports needs 8), chosen at run time by the CPU's
// features: AVX-512F, AVX2 + FMA, SSE (a multiply and an add), NEON on AArch64, else scalar. Never
// assumed: a Zen 4's double-pumped AVX-512 measures what it does. Warmed up for 10 ms (clocks),
// then the best of 8 chunks of about 3 ms (a chunk another process interrupted runs slower, never
// faster). The machine's peak is that rate times the threads the runtime uses.
//
// The bandwidth: dst[i] = src[i] * s over two buffers each twice the last-level cache (at least
// 32 MiB, at most 128 MiB: four times the cache together), split among the runtime's threads
// (parallel_launch), counted as read + written bytes (as STREAM counts, and as a kernel's bytes
// are: write-allocate traffic is not counted), the best of 3 passes after one that touches the
// pages.
//
// Each is measured once per process (per thread count, for the bandwidth) and cached; together
// they take about 0.1-0.2 s. Thread-safe.
#pragma once

#include <string>

namespace kiln::runtime {

struct MachinePeak {
  std::string vector_isa;  ///< what the FMA loop ran on: "avx512f", "avx2+fma", "sse", "neon", ...
  double core_flops = 0;   ///< fp32 FLOP/s of one core (an FMA counts 2)
  int threads = 1;         ///< threads the runtime uses (the peak counts each as a core)
  double flops = 0;        ///< core_flops * threads
  double bytes_per_s = 0;  ///< memory bandwidth with `threads` threads, bytes read + written
  /// FLOP per byte where the compute and memory roofs meet: a kernel doing more per byte it moves
  /// is compute-bound, one doing less memory-bound.
  double balance() const { return flops / bytes_per_s; }
};

/// The peak with `threads` threads (0: the runtime's num_threads()), measured on first use.
MachinePeak machine_peak(int threads = 0);

/// "peak 251.3 GFLOP/s (1 thread x 251.3, fp32 FMA, avx512f), memory 21.4 GB/s, balance 11.7
/// FLOP/byte": the report's header.
std::string describe(const MachinePeak& peak);

}  // namespace kiln::runtime
