// The VDLA's sizes and the cycle model's costs. The defaults are the TVM paper's prototype (section
// 6.4): a 16x16 int8 GEMM unit accumulating into int32, 32 kB of input, 32 kB of weights, 32 kB of
// micro-ops and a 128 kB register file, at 200 MHz. (The open-source VTA's default keeps 256 KiB
// of weights and runs at 100 MHz; only the sizes differ, the instruction set is the same.)
// Every buffer index counts rows of its buffer, so the depths follow from the sizes.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::vdla {

struct Config {
  // The GEMM unit: BATCH x BLOCK_IN times BLOCK_IN x BLOCK_OUT per cycle, as log2.
  int log_batch = 0;
  int log_block_in = 4;
  int log_block_out = 4;
  // On-chip buffers in bytes.
  int64_t inp_bytes = 32 * 1024;
  int64_t wgt_bytes = 32 * 1024;
  int64_t uop_bytes = 32 * 1024;
  int64_t acc_bytes = 128 * 1024;
  double clock_mhz = 200.0;

  // The cycle-approximate model (device/cycle_model.h).
  int bus_bytes = 8;      ///< bytes the one DRAM port moves per cycle (64-bit AXI on PYNQ)
  int dram_latency = 64;  ///< cycles from a DMA's issue to its first beat
  int gemm_fill = 4;      ///< pipeline fill of a GEMM or ALU instruction
  int alu_ii = 2;         ///< the ALU's initiation interval (the HLS design's II=2)
  int token_depth = 8;    ///< depth of each dependence-token FIFO (HLS STREAM_IN_DEPTH)

  int batch() const { return 1 << log_batch; }
  int block_in() const { return 1 << log_block_in; }
  int block_out() const { return 1 << log_block_out; }

  // Bytes of one row of each buffer.
  int64_t inp_row_bytes() const { return int64_t{batch()} * block_in(); }
  int64_t wgt_row_bytes() const { return int64_t{block_out()} * block_in(); }
  int64_t acc_row_bytes() const { return int64_t{batch()} * block_out() * 4; }
  int64_t out_row_bytes() const { return int64_t{batch()} * block_out(); }
  static constexpr int64_t kUopBytes = 4;

  // Rows of each buffer.
  int64_t inp_depth() const { return inp_bytes / inp_row_bytes(); }
  int64_t wgt_depth() const { return wgt_bytes / wgt_row_bytes(); }
  int64_t acc_depth() const { return acc_bytes / acc_row_bytes(); }
  int64_t uop_depth() const { return uop_bytes / kUopBytes; }

  /// Multiply-adds of one GEMM micro-op.
  int64_t macs_per_gemm() const { return int64_t{batch()} * block_in() * block_out(); }
  /// 2 * macs_per_gemm * clock: 102.4 GOPS for the paper's prototype.
  double peak_gops() const { return 2.0 * static_cast<double>(macs_per_gemm()) * clock_mhz / 1e3; }

  /// Raises kiln::Error naming the field when a size is not a whole number of rows, or a depth does
  /// not fit the instruction set's index fields (micro-op: 11 bits of ACC and INP, 10 of WGT; GEMM:
  /// 13 bits of UOP).
  void validate() const;

  /// "16x16 int8, inp 32 KiB (2048 rows), wgt 32 KiB (128 rows), ..." for logs.
  std::string describe() const;
};

}  // namespace kiln::vdla
