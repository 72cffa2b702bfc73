// The cycle-approximate model's costs: Kiln's own (VTA's functional simulator models no time),
// built on the pipelining pragmas of VTA's HLS sources (GEMM II=1, ALU II=2, one DRAM port). The
// device (device.h) runs the same token semantics as the functional simulator and gives each module
// a clock: an instruction starts when its module is free and every token it pops has been pushed,
// ends `cost` later, and time-stamps the tokens it pushes with its end. Every DMA (LOAD and STORE
// with x_size > 0) also holds the one DRAM port, shared by all three modules, for its transfer:
//
//   GEMM (and reset)   gemm_fill + iter_out * iter_in * #uops      (PIPELINE II=1)
//   ALU                gemm_fill + alu_ii * iter_out * iter_in * #uops (II=2)
//   LOAD / STORE       dram_latency, then y_size * ceil(x_size * element bytes / bus_bytes) on the
//                      port, then one cycle per padded SRAM row
//   no-op, FINISH      1
//
// Instruction fetch is not modelled: the stream is taken to be fetched ahead of every module.
#pragma once

#include <cstdint>

#include "deploy/vdla/device/config.h"
#include "deploy/vdla/device/isa.h"

namespace kiln::vdla {

/// Bytes of one DRAM element of a memory type: an INP row, a WGT row, one micro-op, an ACC row
/// (int32), an OUT or ACC_8BIT row (int8).
int64_t dram_elem_bytes(const Config& cfg, MemType m);

/// A DMA's cost split where the model needs it.
struct DmaCost {
  uint64_t latency = 0;   ///< before the transfer starts
  uint64_t transfer = 0;  ///< cycles on the DRAM port
  uint64_t pad = 0;       ///< padded SRAM rows written after the transfer
};
DmaCost dma_cost(const Config& cfg, const Insn& insn);

/// Cycles of a GEMM or ALU instruction, or of a no-op or FINISH.
uint64_t compute_cost(const Config& cfg, const Insn& insn);

}  // namespace kiln::vdla
