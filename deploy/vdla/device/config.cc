// Checks a VDLA configuration against the instruction set's field widths.
#include "deploy/vdla/device/config.h"

#include <sstream>

#include "base/error.h"

namespace kiln::vdla {

namespace {

void check_buffer(const char* name, int64_t bytes, int64_t row_bytes, int index_bits) {
  KILN_USER_CHECK(bytes > 0 && bytes % row_bytes == 0)
      << "vdla config: " << name << " buffer of " << bytes
      << " bytes is not a positive multiple of its " << row_bytes << "-byte rows";
  const int64_t depth = bytes / row_bytes;
  KILN_USER_CHECK(depth <= (int64_t{1} << index_bits))
      << "vdla config: " << name << " buffer of " << depth
      << " rows does not fit the instruction set's " << index_bits << "-bit index (at most "
      << (int64_t{1} << index_bits) << " rows)";
}

}  // namespace

void Config::validate() const {
  KILN_USER_CHECK(log_batch >= 0 && log_batch <= 4)
      << "vdla config: log_batch must be in [0, 4], got " << log_batch;
  KILN_USER_CHECK(log_block_in >= 0 && log_block_in <= 6)
      << "vdla config: log_block_in must be in [0, 6], got " << log_block_in;
  KILN_USER_CHECK(log_block_out >= 0 && log_block_out <= 6)
      << "vdla config: log_block_out must be in [0, 6], got " << log_block_out;
  check_buffer("INP", inp_bytes, inp_row_bytes(), 11);
  check_buffer("WGT", wgt_bytes, wgt_row_bytes(), 10);
  check_buffer("ACC", acc_bytes, acc_row_bytes(), 11);
  check_buffer("UOP", uop_bytes, kUopBytes, 13);
  KILN_USER_CHECK(clock_mhz > 0) << "vdla config: clock_mhz must be positive, got " << clock_mhz;
  KILN_USER_CHECK(bus_bytes > 0) << "vdla config: bus_bytes must be positive, got " << bus_bytes;
  KILN_USER_CHECK(dram_latency >= 0) << "vdla config: dram_latency must not be negative";
  KILN_USER_CHECK(gemm_fill >= 0) << "vdla config: gemm_fill must not be negative";
  KILN_USER_CHECK(alu_ii >= 1) << "vdla config: alu_ii must be at least 1, got " << alu_ii;
  KILN_USER_CHECK(token_depth >= 1 && token_depth <= 255)
      << "vdla config: token_depth must be in [1, 255], got " << token_depth;
}

std::string Config::describe() const {
  std::ostringstream os;
  os << batch() << "x" << block_in() << "x" << block_out() << " int8 GEMM, inp " << inp_bytes / 1024
     << " KiB (" << inp_depth() << " rows), wgt " << wgt_bytes / 1024 << " KiB (" << wgt_depth()
     << " rows), uop " << uop_bytes / 1024 << " KiB (" << uop_depth() << " micro-ops), acc "
     << acc_bytes / 1024 << " KiB (" << acc_depth() << " rows), " << clock_mhz << " MHz";
  return os.str();
}

}  // namespace kiln::vdla
