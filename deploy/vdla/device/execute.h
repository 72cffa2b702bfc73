// One instruction's semantics on the device's buffers (VTA's functional simulator's, after its
// sim_driver.cc), with the range checks that make a malformed instruction an error instead of a
// stray write. Used by device.cc.
#pragma once

#include <cstdint>
#include <ostream>
#include <span>
#include <string>

#include "deploy/vdla/device/device.h"

namespace kiln::vdla {

/// "vdla: instruction #12 (GEMM)", the start of every error about one instruction.
std::string insn_where(uint32_t index, const Insn& insn);

/// The same, streamed only when an error is raised.
struct InsnRef {
  uint32_t index;
  const Insn& insn;
};
std::ostream& operator<<(std::ostream& os, const InsnRef& where);

/// Checks `insn` (index `index` in the stream) against the buffers and DRAM, then executes it
/// (GEMM, ALU and data moves only when `execute`; micro-op loads always) and counts it in `stats`.
void execute_insn(const Config& cfg, std::vector<int8_t>& inp, std::vector<int8_t>& wgt,
                  std::vector<int32_t>& acc, std::vector<uint32_t>& uop, std::span<uint8_t> dram,
                  uint32_t index, const Insn& insn, bool execute, Stats& stats);

}  // namespace kiln::vdla
