// The bf16 pair intrinsics (compiler/ir/bf16.h) in LLVM IR:
// - bf16x2_pack as integer arithmetic (round to nearest even, exact on every target); a pack of
//   the even and odd elements of 2n contiguous floats (a blocked layout's channel pairs) as one
//   vector read and, on avx512bf16, one vcvtneps2bf16 (the same rounding, denormals flushed to
//   zero as vdpbf16ps flushes them);
// - an accumulator plus bf16x2_dot as vdpbf16ps where the target has avx512bf16 and the
//   accumulator is 4, 8 or 16 floats, else the same sum in plain float32 (the two products are
//   exact, so it differs from the instruction only for denormals).
//
// LLVM 19's llvm.x86.avx512bf16.dpbf16ps.{128,256,512} take (<N x float> acc, <2N x bfloat> a,
// <2N x bfloat> b); the packed int32 pairs are bitcast to the declaration's operand types, so the
// code holds whatever types the declaration has.
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm_impl.h"
#include "compiler/ir/bf16.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"

namespace kiln::codegen::detail {

bool CodeGenLLVM::is_bf16_intrinsic(const ir::CallNode* op) {
  return op->call_kind == ir::CallKind::kPureIntrinsic &&
         (op->name == ir::kBf16x2Pack || op->name == ir::kBf16x2Dot);
}

llvm::Value* CodeGenLLVM::emit_bf16_pack_contiguous(const ir::CallNode* op) {
  // lo = buf[b], buf[b+2], ..., hi = buf[b+1], buf[b+3], ...: together the 2n contiguous floats
  // from b, converted in one vector.
  const int lanes = op->dtype.lanes();
  const auto* lo = op->args[0].as<ir::LoadNode>();
  const auto* hi = op->args[1].as<ir::LoadNode>();
  if (lanes < 2 || lo == nullptr || hi == nullptr || lo->buffer_var.get() != hi->buffer_var.get())
    return nullptr;
  for (const ir::LoadNode* l : {lo, hi}) {
    if (l->predicate.defined() && !ir::is_const_int(l->predicate, 1)) return nullptr;
  }
  const auto* rlo = lo->index.as<ir::RampNode>();
  const auto* rhi = hi->index.as<ir::RampNode>();
  if (rlo == nullptr || rhi == nullptr || rlo->lanes != lanes || rhi->lanes != lanes ||
      !ir::is_const_int(rlo->stride, 2) || !ir::is_const_int(rhi->stride, 2) ||
      !ir::is_const_int(ir::simplify(rhi->base - rlo->base), 1)) {
    return nullptr;
  }
  llvm::Type* f32 = builder_.getFloatTy();
  llvm::Type* span = llvm::FixedVectorType::get(f32, 2 * lanes);
  const ir::Expr index =
      ir::ramp(rlo->base, ir::make_const(rlo->base.dtype(), int64_t{1}), 2 * lanes);
  const llvm::Align align(access_alignment(lo->buffer_var.get(), index, ir::kFloat32));
  if (!rlo->base.dtype().is_int()) return nullptr;  // (a signed index: the GEP sign-extends it)
  llvm::Value* p =
      builder_.CreateInBoundsGEP(f32, lookup_var(lo->buffer_var.get()), emit(rlo->base));
  llvm::Value* x = builder_.CreateAlignedLoad(span, p, align);
  llvm::Type* out = llvm_type(op->dtype);
  // vcvtneps2bf16: 16 (or, with avx512vl, 8) floats to as many bf16 in order, that is the pairs.
  llvm::Intrinsic::ID id = llvm::Intrinsic::not_intrinsic;
  if (target_.has_avx512bf16 && 2 * lanes == 16)
    id = llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_512;
  if (target_.has_avx512bf16 && target_.has_avx512vl && 2 * lanes == 8)
    id = llvm::Intrinsic::x86_avx512bf16_cvtneps2bf16_256;
  if (id != llvm::Intrinsic::not_intrinsic) {
    llvm::Function* fn = llvm::Intrinsic::getDeclaration(module_.get(), id);
    return builder_.CreateBitCast(builder_.CreateCall(fn, {x}), out);
  }
  // Elsewhere the same rounding on all 2n lanes, each result's 16 bits kept in order.
  llvm::Type* it = llvm::FixedVectorType::get(i32_, 2 * lanes);
  auto int_const = [&](uint64_t v) { return llvm::ConstantInt::get(it, v); };
  llvm::Value* bits = builder_.CreateBitCast(x, it);
  llvm::Value* top = builder_.CreateLShr(bits, int_const(16));
  llvm::Value* odd = builder_.CreateAnd(top, int_const(1));
  llvm::Value* rounded = builder_.CreateLShr(
      builder_.CreateAdd(builder_.CreateAdd(bits, int_const(0x7fff)), odd), int_const(16));
  llvm::Value* quiet = builder_.CreateOr(top, int_const(0x40));
  llvm::Value* r = builder_.CreateSelect(builder_.CreateFCmpUNO(x, x), quiet, rounded);
  return builder_.CreateBitCast(
      builder_.CreateTrunc(r, llvm::FixedVectorType::get(i16_, 2 * lanes)), out);
}

llvm::Value* CodeGenLLVM::emit_bf16_intrinsic(const ir::CallNode* op, llvm::Value* acc) {
  KILN_USER_CHECK(op->args.size() == 2)
      << "codegen llvm: intrinsic '" << op->name << "' in function '" << func_name_
      << "' takes 2 arguments, got " << op->args.size();
  const int lanes = op->dtype.lanes();
  auto operand = [&](size_t i) {
    llvm::Value* v = emit(op->args[i]);
    return op->args[i].dtype().lanes() == 1 ? splat(v, lanes) : v;
  };
  auto int_const = [&](llvm::Type* t, uint64_t v) { return llvm::ConstantInt::get(t, v); };
  if (op->name == ir::kBf16x2Pack) {
    if (llvm::Value* v = emit_bf16_pack_contiguous(op)) return v;
    llvm::Type* it = llvm_type(op->dtype);
    // float32 -> bf16 bits in the lower 16 bits of an int32: round to nearest even, NaNs quiet.
    auto round = [&](llvm::Value* x) {
      llvm::Value* bits = builder_.CreateBitCast(x, it);
      llvm::Value* odd =
          builder_.CreateAnd(builder_.CreateLShr(bits, int_const(it, 16)), int_const(it, 1));
      llvm::Value* rounded = builder_.CreateLShr(
          builder_.CreateAdd(builder_.CreateAdd(bits, int_const(it, 0x7fff)), odd),
          int_const(it, 16));
      llvm::Value* quiet =
          builder_.CreateOr(builder_.CreateLShr(bits, int_const(it, 16)), int_const(it, 0x40));
      return builder_.CreateSelect(builder_.CreateFCmpUNO(x, x), quiet, rounded);
    };
    llvm::Value* lo = round(operand(0));
    llvm::Value* hi = round(operand(1));
    return builder_.CreateOr(lo, builder_.CreateShl(hi, int_const(it, 16)));
  }
  llvm::Type* ft = llvm_type(op->dtype);
  if (acc == nullptr) acc = llvm::Constant::getNullValue(ft);
  llvm::Value* a = operand(0);
  llvm::Value* b = operand(1);
  llvm::Intrinsic::ID id = llvm::Intrinsic::not_intrinsic;
  if (target_.has_avx512bf16) {
    if (lanes == 16) id = llvm::Intrinsic::x86_avx512bf16_dpbf16ps_512;
    if (lanes == 8 && target_.has_avx512vl) id = llvm::Intrinsic::x86_avx512bf16_dpbf16ps_256;
    if (lanes == 4 && target_.has_avx512vl) id = llvm::Intrinsic::x86_avx512bf16_dpbf16ps_128;
  }
  if (id != llvm::Intrinsic::not_intrinsic) {
    llvm::Function* fn = llvm::Intrinsic::getDeclaration(module_.get(), id);
    llvm::FunctionType* fty = fn->getFunctionType();
    return builder_.CreateCall(fn, {acc, builder_.CreateBitCast(a, fty->getParamType(1)),
                                    builder_.CreateBitCast(b, fty->getParamType(2))});
  }
  llvm::Type* it = a->getType();
  auto high = [&](llvm::Value* v) {
    return builder_.CreateBitCast(builder_.CreateAnd(v, int_const(it, 0xffff0000u)), ft);
  };
  auto low = [&](llvm::Value* v) {
    return builder_.CreateBitCast(builder_.CreateShl(v, int_const(it, 16)), ft);
  };
  llvm::Value* r = builder_.CreateFAdd(acc, builder_.CreateFMul(high(a), high(b)));
  return builder_.CreateFAdd(r, builder_.CreateFMul(low(a), low(b)));
}

}  // namespace kiln::codegen::detail
