// The VDLA's instruction set: 128-bit instructions (LOAD, STORE, GEMM, FINISH, ALU) and 32-bit
// micro-ops, with their exact bit positions (VTA's hw_spec.h), drawn below.
//
//   all kinds  [2:0] opcode  [3] pop_prev  [4] pop_next  [5] push_prev  [6] push_next
//   LOAD/STORE [9:7] memory_type [25:10] sram_base [57:26] dram_base [79:64] y_size [95:80] x_size
//              [111:96] x_stride [115:112] y_pad_0 [119:116] y_pad_1 [123:120] x_pad_0 [127:124]
//              x_pad_1
//   GEMM       [7] reset [20:8] uop_bgn [34:21] uop_end [48:35] iter_out [62:49] iter_in
//              [74:64] dst_factor_out [85:75] dst_factor_in [96:86] src_factor_out
//              [107:97] src_factor_in [117:108] wgt_factor_out [127:118] wgt_factor_in
//   ALU        as GEMM up to bit 107, then [110:108] alu_opcode [111] use_imm [127:112] imm (int16)
//   micro-op   [10:0] dst (ACC row) [21:11] src (INP row for GEMM, ACC row for ALU) [31:22] wgt
//
// `Insn` is the decoded form, one struct for every kind (only the fields of its kind are used);
// `encode` refuses a value that does not fit its field, `decode` refuses an unknown opcode, memory
// type or ALU opcode. Every index counts rows of the buffer it names; dram_base counts rows of the
// memory type's DRAM element (16 bytes for INP, 256 for WGT, 4 for UOP, 64 for ACC, ...).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace kiln::vdla {

enum class Opcode : uint8_t { kLoad = 0, kStore = 1, kGemm = 2, kFinish = 3, kAlu = 4 };
enum class MemType : uint8_t { kUop = 0, kWgt = 1, kInp = 2, kAcc = 3, kOut = 4, kAcc8 = 5 };
enum class AluOp : uint8_t { kMin = 0, kMax = 1, kAdd = 2, kShr = 3, kMul = 4 };

const char* opcode_name(Opcode op);
const char* mem_type_name(MemType m);
const char* alu_op_name(AluOp op);

/// The dependence flags every instruction carries: pop a token from the previous or the next
/// module's queue before it runs, push one to either after it (device.h).
struct DepFlags {
  bool pop_prev = false;
  bool pop_next = false;
  bool push_prev = false;
  bool push_next = false;
  bool operator==(const DepFlags&) const = default;
};

/// One decoded instruction.
struct Insn {
  Opcode opcode = Opcode::kFinish;
  DepFlags dep;
  // LOAD / STORE
  MemType mem_type = MemType::kUop;
  uint32_t sram_base = 0;                         ///< 16 bits
  uint32_t dram_base = 0;                         ///< 32 bits, in DRAM elements of mem_type
  uint32_t y_size = 0, x_size = 0, x_stride = 0;  ///< 16 bits each; x_size 0 is a no-op
  uint32_t y_pad_0 = 0, y_pad_1 = 0, x_pad_0 = 0, x_pad_1 = 0;  ///< 4 bits each
  // GEMM / ALU: for i < iter_out, j < iter_in, u in [uop_bgn, uop_end)
  bool reset = false;
  uint32_t uop_bgn = 0;                            ///< 13 bits
  uint32_t uop_end = 0;                            ///< 14 bits, exclusive
  uint32_t iter_out = 0, iter_in = 0;              ///< 14 bits each
  uint32_t dst_factor_out = 0, dst_factor_in = 0;  ///< 11 bits each
  uint32_t src_factor_out = 0, src_factor_in = 0;  ///< 11 bits each
  uint32_t wgt_factor_out = 0, wgt_factor_in = 0;  ///< 10 bits each (GEMM only)
  // ALU only
  AluOp alu_op = AluOp::kMin;
  bool use_imm = false;
  int32_t imm = 0;  ///< signed 16 bits

  bool operator==(const Insn&) const = default;

  /// LOAD or STORE with x_size 0: only moves tokens.
  bool is_noop() const {
    return (opcode == Opcode::kLoad || opcode == Opcode::kStore) && x_size == 0;
  }
};

/// 128 bits, little-endian: words[0] holds bits 63..0.
struct EncodedInsn {
  std::array<uint64_t, 2> words{};
  bool operator==(const EncodedInsn&) const = default;
};

/// One micro-op: row indices into ACC (dst), INP or ACC (src) and WGT.
struct Uop {
  uint32_t dst = 0;  ///< 11 bits
  uint32_t src = 0;  ///< 11 bits
  uint32_t wgt = 0;  ///< 10 bits
  bool operator==(const Uop&) const = default;
};

/// Raises kiln::Error naming the field when a value does not fit it.
/// `where` starts the message ("vdla: instruction #3 (GEMM)"); empty: "vdla: <kind>".
EncodedInsn encode(const Insn& insn, const std::string& where = "");
/// Raises kiln::Error for an unknown opcode, memory type or ALU opcode. Only the fields of the
/// instruction's kind are decoded; the others keep their defaults.
Insn decode(const EncodedInsn& bits, const std::string& where = "vdla");

uint32_t encode_uop(const Uop& uop);
Uop decode_uop(uint32_t bits);

/// The instruction's kind for messages: "LOAD INP", "STORE", "GEMM", "GEMM reset", "ALU SHR",
/// "FINISH".
std::string insn_kind(const Insn& insn);
/// Every field of the kind, for dumps: "LOAD INP sram=0 dram=64 y=3 x=58 stride=56 pad=(1,1,1,1)
/// pop_next".
std::string describe(const Insn& insn);

/// Constructors of the kinds with their fields in order, for tests and the driver.
Insn make_load(MemType m, uint32_t sram_base, uint32_t dram_base, uint32_t y_size, uint32_t x_size,
               uint32_t x_stride, uint32_t y_pad_0 = 0, uint32_t y_pad_1 = 0, uint32_t x_pad_0 = 0,
               uint32_t x_pad_1 = 0);
Insn make_store(uint32_t sram_base, uint32_t dram_base, uint32_t y_size, uint32_t x_size,
                uint32_t x_stride);
Insn make_gemm(bool reset, uint32_t uop_bgn, uint32_t uop_end, uint32_t iter_out, uint32_t iter_in,
               uint32_t dst_fo, uint32_t dst_fi, uint32_t src_fo, uint32_t src_fi, uint32_t wgt_fo,
               uint32_t wgt_fi);
Insn make_alu(AluOp op, uint32_t uop_bgn, uint32_t uop_end, uint32_t iter_out, uint32_t iter_in,
              uint32_t dst_fo, uint32_t dst_fi, uint32_t src_fo, uint32_t src_fi, bool use_imm,
              int32_t imm);
Insn make_finish();

}  // namespace kiln::vdla
