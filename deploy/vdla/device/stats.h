// What one run of the VDLA reports: the simulator's counters (named as VTA's profiler names them)
// and the cycle model's time.
#pragma once

#include <cstdint>
#include <string>

#include "deploy/vdla/device/config.h"

namespace kiln::vdla {

struct Stats {
  // Bytes moved by DMA, padding excluded (x_size * y_size * element bytes).
  uint64_t inp_load_nbytes = 0;
  uint64_t wgt_load_nbytes = 0;
  uint64_t acc_load_nbytes = 0;  ///< ACC and ACC_8BIT loads
  uint64_t uop_load_nbytes = 0;
  uint64_t out_store_nbytes = 0;
  /// GEMM micro-op executions, iter_out * iter_in * (uop_end - uop_bgn); reset GEMMs do not count.
  uint64_t gemm_counter = 0;
  uint64_t alu_counter = 0;
  uint64_t reset_counter = 0;  ///< rows zeroed by reset GEMMs

  /// Instructions executed by each module (no-ops included) and their summed costs in cycles.
  uint64_t load_insns = 0, compute_insns = 0, store_insns = 0;
  uint64_t load_busy = 0, compute_busy = 0, store_busy = 0;
  /// Cycles the one DRAM port spent transferring.
  uint64_t dram_busy = 0;
  /// The cycle model's time from launch to the end of FINISH.
  uint64_t cycles = 0;

  /// GEMM utilization: gemm_counter / cycles (1.0 = the GEMM unit busy every cycle).
  double utilization() const {
    return cycles == 0 ? 0.0 : static_cast<double>(gemm_counter) / static_cast<double>(cycles);
  }
  /// 2 * BATCH * BLOCK_IN * BLOCK_OUT * gemm_counter * f / cycles, in GOPS.
  double gops(const Config& cfg) const {
    return cycles == 0 ? 0.0 : utilization() * cfg.peak_gops();
  }
  /// Adds `o`'s counters and cycles (runs one after the other).
  void add(const Stats& o);
  /// One line of key=value pairs.
  std::string to_string() const;
};

}  // namespace kiln::vdla
