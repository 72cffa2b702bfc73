// A VDLA program: the driver calls (command_queue.h) that build one function's instruction stream,
// with DRAM addresses relative to the function's tensors. The compiler records it
// (compiler/vdla/program.h, build_program) from a lowered function; bundles carry it as JSON, and
// a runtime replays it for the tensors' addresses with `emit`, then `synchronize` runs it.
//
// Recording calls rather than instructions keeps the driver's micro-kernel cache, UOP ring and
// token rules in one place, the driver. `from_json` checks every field at the door (a program
// comes from a bundle or over the wire): kinds, ranges, argument indices, micro-op fields that fit
// the instruction set; what it cannot check without the device's buffers (rows in range, a
// balanced token stream) the simulator refuses with an error naming the instruction.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "base/json.h"
#include "deploy/vdla/device/isa.h"
#include "deploy/vdla/driver/command_queue.h"
#include "deploy/vdla/driver/uop_kernel.h"

namespace kiln::vdla {

/// A LOAD (into INP, WGT or ACC) or a STORE, its DRAM side as a row of argument `arg`.
struct DmaCall {
  bool store = false;
  MemType mem = MemType::kInp;
  uint32_t sram = 0;
  int arg = 0;
  uint64_t dram_row = 0;  ///< in rows of the buffer's element (16 int8 for INP and OUT, 256 for
                          ///< WGT, 16 int32 for ACC)
  uint32_t x_size = 0, y_size = 0, x_stride = 0;
  uint32_t x_pad0 = 0, y_pad0 = 0, x_pad1 = 0, y_pad1 = 0;
};

/// A GEMM or ALU micro-kernel and its instruction.
struct KernelCall {
  bool gemm = true;
  bool reset = false;
  AluOp op = AluOp::kAdd;
  bool use_imm = false;
  int32_t imm = 0;
  std::vector<UopLoop> loops;
  std::vector<Uop> uops;
  std::string signature;  ///< derived from the contents (kernel_signature): equal kernels share the
                          ///< driver's cache
};

struct TokenCall {
  bool push = true;
  int from = 0, to = 0;
};

using DriverCall = std::variant<DmaCall, KernelCall, TokenCall>;

/// The driver's cache key of a kernel, from everything that makes its micro-ops and instruction.
std::string kernel_signature(const KernelCall& k);

struct VdlaProgram {
  std::string name;
  std::vector<std::string> arg_names;
  std::vector<int64_t> arg_bytes;
  std::vector<DriverCall> calls;

  /// Issues the calls to `q`, argument i at byte address `addrs[i]`, which must be aligned to the
  /// tensor's DMA rows (kiln::Error naming it otherwise). The stream is balanced:
  /// q.synchronize() runs it.
  void emit(CommandQueue& q, const std::vector<uint64_t>& addrs) const;
  /// "loads=.. stores=.. gemm=.. alu=.. tokens=.." for logs.
  std::string summary() const;
  /// One line per call, for reading a program.
  std::string to_string() const;

  kiln::Json to_json() const;
  /// kiln::Error naming `origin`, the call's index and the field for anything malformed.
  static VdlaProgram from_json(const kiln::Json& j, const std::string& origin);
};

}  // namespace kiln::vdla
