// A micro-kernel: the micro-ops of one GEMM or ALU instruction and its at most two loops, recorded
// once and cached by the command queue under a signature (VTA's UopKernel, filled by
// VTAUopLoopBegin / VTAUopPush / VTAUopLoopEnd). The instruction then runs
//
//   for i < loops[0].extent: for j < loops[1].extent: for u in uops:
//     dst = u.dst + i * loops[0].dst_factor + j * loops[1].dst_factor   (src, wgt alike)
//
// Recording checks what the hardware needs: loops nest and enclose every micro-op, at most two of
// them, every index fits its field, and an accumulating GEMM never names the same ACC row in two
// consecutive micro-ops (the II=1 pipeline's read-after-write hazard, VTA's VerifyDep).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/vdla/device/isa.h"

namespace kiln::vdla {

struct UopLoop {
  uint32_t extent = 1;
  uint32_t dst_factor = 0, src_factor = 0, wgt_factor = 0;
};

class UopKernel {
 public:
  /// A GEMM kernel (reset: zero the dst rows) or an ALU kernel (alu_op with an immediate or not).
  static UopKernel gemm(std::string signature, bool reset);
  static UopKernel alu(std::string signature, AluOp op, bool use_imm, int32_t imm);

  void loop_begin(uint32_t extent, uint32_t dst_factor, uint32_t src_factor,
                  uint32_t wgt_factor = 0);
  void loop_end();
  void push(uint32_t dst, uint32_t src, uint32_t wgt = 0);
  /// Checks that every loop was closed and there is at least one micro-op.
  void finish() const;

  const std::string& signature() const { return signature_; }
  Opcode opcode() const { return opcode_; }
  bool reset() const { return reset_; }
  AluOp alu_op() const { return alu_op_; }
  bool use_imm() const { return use_imm_; }
  int32_t imm() const { return imm_; }
  const std::vector<Uop>& uops() const { return uops_; }
  const std::vector<UopLoop>& loops() const { return loops_; }

 private:
  UopKernel() = default;

  std::string signature_;
  Opcode opcode_ = Opcode::kGemm;
  bool reset_ = false;
  AluOp alu_op_ = AluOp::kMin;
  bool use_imm_ = false;
  int32_t imm_ = 0;
  std::vector<Uop> uops_;
  std::vector<UopLoop> loops_;
  int open_loops_ = 0;
};

}  // namespace kiln::vdla
