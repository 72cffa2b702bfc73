// Recording a micro-kernel, with the checks of VTA's UopKernel.
#include "deploy/vdla/driver/uop_kernel.h"

#include "base/error.h"

namespace kiln::vdla {

UopKernel UopKernel::gemm(std::string signature, bool reset) {
  UopKernel k;
  k.signature_ = std::move(signature);
  k.opcode_ = Opcode::kGemm;
  k.reset_ = reset;
  return k;
}

UopKernel UopKernel::alu(std::string signature, AluOp op, bool use_imm, int32_t imm) {
  UopKernel k;
  k.signature_ = std::move(signature);
  k.opcode_ = Opcode::kAlu;
  k.alu_op_ = op;
  k.use_imm_ = use_imm;
  k.imm_ = imm;
  KILN_USER_CHECK(imm >= -32768 && imm <= 32767)
      << "vdla: micro-kernel '" << k.signature_ << "': immediate " << imm
      << " does not fit 16 signed bits";
  return k;
}

void UopKernel::loop_begin(uint32_t extent, uint32_t dst_factor, uint32_t src_factor,
                           uint32_t wgt_factor) {
  KILN_USER_CHECK(uops_.empty())
      << "vdla: micro-kernel '" << signature_
      << "': a loop begins after micro-ops; the loops must enclose them all";
  KILN_USER_CHECK(loops_.size() < 2) << "vdla: micro-kernel '" << signature_
                                     << "': a third loop; the GEMM and ALU instructions have two";
  KILN_USER_CHECK(extent >= 1 && extent < (1u << 14))
      << "vdla: micro-kernel '" << signature_ << "': loop extent " << extent
      << " is not in [1, 16383]";
  KILN_USER_CHECK(dst_factor < (1u << 11) && src_factor < (1u << 11) && wgt_factor < (1u << 10))
      << "vdla: micro-kernel '" << signature_ << "': loop factors (dst " << dst_factor << ", src "
      << src_factor << ", wgt " << wgt_factor << ") do not fit their 11, 11 and 10 bits";
  loops_.push_back(UopLoop{extent, dst_factor, src_factor, wgt_factor});
  ++open_loops_;
}

void UopKernel::loop_end() {
  KILN_USER_CHECK(open_loops_ > 0)
      << "vdla: micro-kernel '" << signature_ << "': loop_end without loop_begin";
  --open_loops_;
}

void UopKernel::push(uint32_t dst, uint32_t src, uint32_t wgt) {
  KILN_USER_CHECK(open_loops_ == static_cast<int>(loops_.size()))
      << "vdla: micro-kernel '" << signature_
      << "': a micro-op after a loop ended; the loops must enclose them all";
  const Uop u{dst, src, wgt};
  encode_uop(u);  // checks the field widths
  // An accumulating GEMM issues one micro-op per cycle: the same ACC row in two consecutive
  // micro-ops reads it before the first write lands.
  if (opcode_ == Opcode::kGemm && !reset_ && !uops_.empty()) {
    KILN_USER_CHECK(uops_.back().dst != dst)
        << "vdla: micro-kernel '" << signature_ << "': micro-ops " << uops_.size() - 1 << " and "
        << uops_.size() << " both accumulate into ACC row " << dst
        << " (a read-after-write hazard of the II=1 pipeline)";
  }
  uops_.push_back(u);
}

void UopKernel::finish() const {
  KILN_USER_CHECK(open_loops_ == 0)
      << "vdla: micro-kernel '" << signature_ << "': " << open_loops_ << " loop(s) not ended";
  KILN_USER_CHECK(!uops_.empty()) << "vdla: micro-kernel '" << signature_ << "' has no micro-ops";
}

}  // namespace kiln::vdla
