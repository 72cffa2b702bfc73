// The VDLA's driver: builds an instruction stream the way VTA's runtime does (after VTA's
// vta/runtime/runtime.cc; docs/architecture.md, "The VDLA") and runs it on a Device.
//
//  - load_buffer_2d / store_buffer_2d: DMA descriptors (x_size, y_size, x_stride, padding on the
//    four sides for loads) from byte addresses of the shared Dram.
//  - push_gemm / push_alu: a micro-kernel recorded once per signature (UopKernel), placed in the
//    UOP buffer as a ring (a kernel evicts those it overwrites) with a LOAD UOP when it is not
//    resident, then one GEMM or ALU instruction whose loops are the kernel's.
//  - dep_push(from, to): sets push_next (from < to) or push_prev on the last instruction when it
//    belongs to stage `from` and the flag is still clear; otherwise appends a no-op of stage `from`
//    carrying the push (LOAD INP x_size=0 for load, LOAD UOP x_size=0 for compute, STORE x_size=0
//    for store). Pending pops of `from` are first committed as a no-op.
//  - dep_pop(from, to): marks a pop pending on stage `to` (pop_prev when from < to, else
//    pop_next), carried by that stage's next instruction; a pending pop of the same kind is first
//    committed as a no-op.
//  - synchronize: store->compute and load->compute pushes, their pops in compute, FINISH; then the
//    stream is written to Dram and run. The queue is empty again afterwards; cached micro-kernels
//    stay, with the UOP buffer's contents, as on the board.
//
// Stages are numbered as VTA's compiler numbers its queues: load 1, compute 2, store 3.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/dram.h"
#include "deploy/vdla/driver/uop_kernel.h"

namespace kiln::vdla {

enum Stage : int { kLoadStage = 1, kComputeStage = 2, kStoreStage = 3 };
/// The stage of an instruction (the module that runs it, numbered as above).
Stage stage_of(const Insn& insn);

class CommandQueue {
 public:
  /// The queue issues to `device` and allocates in `dram`; both must outlive it.
  CommandQueue(Device& device, Dram& dram);

  /// Loads a y_size x x_size block of `mem` elements from DRAM (row y at element
  /// `dram_addr / elem + y * x_stride`) into rows [sram_index, ...) with zero padding around it.
  /// `dram_addr` is a byte address aligned to the element's size.
  void load_buffer_2d(MemType mem, uint32_t sram_index, uint64_t dram_addr, uint32_t x_size,
                      uint32_t y_size, uint32_t x_stride, uint32_t x_pad_before = 0,
                      uint32_t y_pad_before = 0, uint32_t x_pad_after = 0,
                      uint32_t y_pad_after = 0);
  /// Stores ACC rows [sram_index, + y_size * x_size), truncated to int8, to DRAM rows
  /// `dram_addr / out_row_bytes + y * x_stride + x`.
  void store_buffer_2d(uint32_t sram_index, uint64_t dram_addr, uint32_t x_size, uint32_t y_size,
                       uint32_t x_stride);

  /// A GEMM (or reset) micro-kernel: `record` fills it the first time `signature` is seen.
  void push_gemm(const std::string& signature, bool reset,
                 const std::function<void(UopKernel&)>& record);
  /// An ALU micro-kernel (signatures share one cache with GEMM kernels).
  void push_alu(const std::string& signature, AluOp op, bool use_imm, int32_t imm,
                const std::function<void(UopKernel&)>& record);

  void dep_push(int from, int to);
  void dep_pop(int from, int to);

  /// Finishes the stream (see above), runs it and returns the device's counters.
  Stats synchronize(const RunOptions& opt = {});

  const Config& config() const { return device_.config(); }

  /// The stream built so far (without the synchronize epilogue).
  const std::vector<Insn>& insns() const { return insns_; }
  /// Micro-kernels recorded, LOAD UOPs issued (misses of the UOP buffer).
  size_t kernels_recorded() const { return kernels_.size(); }
  size_t uop_loads() const { return uop_loads_; }

 private:
  struct CachedKernel {
    UopKernel kernel;
    uint64_t dram_addr = 0;   ///< its micro-ops' image in DRAM
    int64_t sram_begin = -1;  ///< where it sits in the UOP buffer, -1 when not resident
  };

  Insn& append(Stage stage, Insn insn);
  void push_noop(Stage stage, bool push_prev, bool push_next);
  void commit_pending_pop(int stage);
  CachedKernel& lookup(const std::string& signature, UopKernel&& fresh,
                       const std::function<void(UopKernel&)>& record);
  void issue_kernel(CachedKernel& k);

  Device& device_;
  Dram& dram_;
  std::vector<Insn> insns_;
  bool pending_pop_prev_[4] = {};
  bool pending_pop_next_[4] = {};
  std::map<std::string, std::unique_ptr<CachedKernel>> kernels_;
  uint32_t uop_ring_next_ = 0;  ///< next free row of the UOP buffer
  size_t uop_loads_ = 0;
};

}  // namespace kiln::vdla
