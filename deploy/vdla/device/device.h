// The VDLA in software: its four on-chip buffers and the decoupled access-execute pipeline that
// runs an instruction stream (docs/architecture.md, "The VDLA").
//
// `run` decodes the stream from DRAM, routes every instruction to its module (STORE to store;
// LOAD INP/WGT to load; LOAD UOP/ACC/ACC_8BIT, GEMM, ALU and FINISH to compute), and lets each
// module execute its own queue in order against the four token queues:
//
//   l2c  load  push_next  -> compute pop_prev   (RAW: an INP/WGT tile is ready)
//   c2l  compute push_prev -> load pop_next     (WAR: a tile was consumed)
//   c2s  compute push_next -> store pop_prev    (RAW: an ACC result is ready)
//   s2c  store push_prev  -> compute pop_next   (WAR: a result was stored)
//
// Pops happen before an instruction runs (it waits for a token), pushes after it; a push to a
// full queue (Config::token_depth) waits for room, as the hardware FIFO does. The same pass is the
// functional simulator (every instruction executed on the buffers and DRAM, VTA's fsim) and the
// cycle model (device/cycle_model.h): modules run in the order of their instructions' start times,
// so the one DRAM port is granted first come, first served.
//
// Every malformed stream is a kiln::Error naming the instruction (its index in the stream and
// kind) and the problem, never a hang or a crash: an unknown opcode or memory type, a buffer row
// or DRAM byte outside its range (also through a micro-op), a STORE with padding, the same ACC row
// in two consecutive micro-ops of an accumulating GEMM, a flag a module does not have, a
// deadlock (naming each blocked module, its instruction and the queue it waits on, empty or full),
// instructions left when FINISH runs or after it, tokens left in a queue at the end, no FINISH.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "deploy/vdla/device/config.h"
#include "deploy/vdla/device/isa.h"
#include "deploy/vdla/device/stats.h"

namespace kiln::vdla {

struct RunOptions {
  /// False: check and time the stream without executing GEMM, ALU and data loads and stores
  /// (VTA's profiler_debug_mode); micro-op loads still run, since they decide what GEMMs read.
  bool execute = true;
};

/// Which module executes an instruction.
enum class Module : uint8_t { kLoad = 0, kCompute = 1, kStore = 2 };
const char* module_name(Module m);
Module module_of(const Insn& insn);

/// Not thread-safe: one run at a time. The buffers keep their contents between runs, as the
/// board's SRAM does.
class Device {
 public:
  /// Raises kiln::Error when the configuration is invalid (Config::validate).
  explicit Device(const Config& cfg);

  const Config& config() const { return cfg_; }

  /// Runs `count` instructions of 16 bytes stored at byte `insn_addr` of `dram` (VTADeviceRun).
  /// LOADs read and STOREs write `dram`, whose bytes are the device's whole address space.
  Stats run(std::span<uint8_t> dram, uint64_t insn_addr, uint32_t count,
            const RunOptions& opt = {});
  /// Runs decoded instructions (each encoded first, so that its fields are checked).
  Stats run(std::span<uint8_t> dram, std::span<const Insn> program, const RunOptions& opt = {});

  // The buffers, row-major: INP [depth][batch][block_in], WGT [depth][block_out][block_in],
  // ACC [depth][batch][block_out], UOP [depth].
  std::vector<int8_t>& inp() { return inp_; }
  std::vector<int8_t>& wgt() { return wgt_; }
  std::vector<int32_t>& acc() { return acc_; }
  std::vector<uint32_t>& uop() { return uop_; }

 private:
  Stats run_decoded(std::span<uint8_t> dram, const std::vector<Insn>& program,
                    const RunOptions& opt);
  friend class Pipeline;

  Config cfg_;
  std::vector<int8_t> inp_, wgt_;
  std::vector<int32_t> acc_;
  std::vector<uint32_t> uop_;
};

}  // namespace kiln::vdla
