// The cycle model's per-instruction costs (see cycle_model.h for the table).
#include "deploy/vdla/device/cycle_model.h"

namespace kiln::vdla {

int64_t dram_elem_bytes(const Config& cfg, MemType m) {
  switch (m) {
    case MemType::kUop:
      return Config::kUopBytes;
    case MemType::kWgt:
      return cfg.wgt_row_bytes();
    case MemType::kInp:
      return cfg.inp_row_bytes();
    case MemType::kAcc:
      return cfg.acc_row_bytes();
    case MemType::kOut:
    case MemType::kAcc8:
      return cfg.out_row_bytes();
  }
  return 1;
}

DmaCost dma_cost(const Config& cfg, const Insn& insn) {
  DmaCost c;
  if (insn.x_size == 0) return c;
  const uint64_t row_bytes =
      static_cast<uint64_t>(insn.x_size) * dram_elem_bytes(cfg, insn.mem_type);
  const uint64_t beats = (row_bytes + cfg.bus_bytes - 1) / cfg.bus_bytes;
  c.latency = cfg.dram_latency;
  c.transfer = beats * insn.y_size;
  const uint64_t rows = uint64_t{insn.y_pad_0 + insn.y_size + insn.y_pad_1} *
                        (insn.x_pad_0 + insn.x_size + insn.x_pad_1);
  c.pad = rows - uint64_t{insn.y_size} * insn.x_size;
  return c;
}

uint64_t compute_cost(const Config& cfg, const Insn& insn) {
  if (insn.opcode != Opcode::kGemm && insn.opcode != Opcode::kAlu) return 1;
  const uint64_t n = uint64_t{insn.iter_out} * insn.iter_in * (insn.uop_end - insn.uop_bgn);
  const uint64_t ii = insn.opcode == Opcode::kAlu ? cfg.alu_ii : 1;
  return cfg.gemm_fill + ii * n;
}

}  // namespace kiln::vdla
