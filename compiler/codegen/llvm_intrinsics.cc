// Calls in generated code: pure math intrinsics (exp, log, sqrt, tanh, sigmoid, pow, fabs, fma,
// floor, ceil, ...), Kiln's own intrinsics, and extern C functions.
//
// exp, log, tanh, erf and sigmoid (1 / (1 + exp(-x)), which saturates correctly at both ends) use
// the polynomials of llvm_fast_math.cc for float32 and float16 (computed in float32), so they stay
// vectors. Other math maps to LLVM intrinsics where LLVM has one (llvm.sqrt, llvm.floor, ...: the
// back-end turns them into instructions or libm calls, lane by lane for vectors); tan, the
// inverse and hyperbolic trigonometric functions, and tanh and erf in float64, call libm per lane.
// dot4_u8s8, the int8 kernels' 4-deep byte dot product, is vpdpbusd where the target has VNNI and
// widening integer arithmetic elsewhere (never vpmaddubsw, whose 16-bit pair sums saturate). On
// AArch64 it works on 128-bit pieces of 4 lanes: usdot with i8mm; with the dot product alone
// (udot is u8 x u8) the signed bytes offset by 128 (b ^ 0x80 = b + 128, unsigned) and the excess
// 128 * sum(a) taken off the accumulator first, itself one udot of a with 128s: exact in int32;
// plain NEON widens to 16 bits (u8 * s8 fits: -32640..32385), multiplies, and sums the products
// pairwise into int32 (saddlp) and those pairs pairwise again (addp).
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Target/TargetMachine.h>

#include <array>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm_impl.h"
#include "compiler/ir/op.h"

namespace kiln::codegen::detail {
namespace {

/// Pure intrinsics that are one LLVM intrinsic of the operand type, by arity.
constexpr std::array<std::pair<std::string_view, llvm::Intrinsic::ID>, 12> kUnary = {{
    {"exp2", llvm::Intrinsic::exp2},
    {"log2", llvm::Intrinsic::log2},
    {"log10", llvm::Intrinsic::log10},
    {"sqrt", llvm::Intrinsic::sqrt},
    {"fabs", llvm::Intrinsic::fabs},
    {"floor", llvm::Intrinsic::floor},
    {"ceil", llvm::Intrinsic::ceil},
    {"trunc", llvm::Intrinsic::trunc},
    {"round", llvm::Intrinsic::round},
    {"roundeven", llvm::Intrinsic::roundeven},
    {"sin", llvm::Intrinsic::sin},
    {"cos", llvm::Intrinsic::cos},
}};

constexpr const char* kKnown =
    "exp, exp2, log, log2, log10, sqrt, fabs, floor, ceil, trunc, round, roundeven, sin, cos, "
    "tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, tanh, erf, "
    "sigmoid, pow, fma";

}  // namespace

llvm::Value* CodeGenLLVM::call_libm_per_lane(const std::string& name, llvm::Value* x) {
  llvm::Type* t = x->getType();
  llvm::Type* elem = t->getScalarType();
  // float16 has no libm function: compute in float.
  const bool half = elem->isHalfTy();
  llvm::Type* calc = half ? builder_.getFloatTy() : elem;
  const std::string fname = calc->isFloatTy() ? name + "f" : name;
  llvm::FunctionCallee fn = c_function(fname, calc, {calc});
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->setDoesNotAccessMemory();
    f->setWillReturn();
  }
  auto one = [&](llvm::Value* v) {
    if (half) v = builder_.CreateFPExt(v, calc);
    llvm::Value* r = builder_.CreateCall(fn, {v});
    return half ? builder_.CreateFPTrunc(r, elem) : r;
  };
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (vt == nullptr) return one(x);
  llvm::Value* out = llvm::PoisonValue::get(t);
  for (unsigned i = 0; i < vt->getNumElements(); ++i) {
    out = builder_.CreateInsertElement(out, one(builder_.CreateExtractElement(x, i)), i);
  }
  return out;
}

void CodeGenLLVM::detect_dot_product_features(llvm::TargetMachine* tm) {
  if (tm == nullptr) return;
  const llvm::MCSubtargetInfo* sti = tm->getMCSubtargetInfo();
  if (target_.is_aarch64) {
    neon_dotprod_ = sti->checkFeatures("+dotprod");
    neon_i8mm_ = sti->checkFeatures("+i8mm");
    return;
  }
  if (!target_.is_x86) return;
  vnni_512_ = sti->checkFeatures("+avx512vnni,+avx512bw");
  // The 256-bit form: AVX-VNNI's VEX encoding, or AVX512-VNNI's with AVX512VL.
  vnni_256_ = sti->checkFeatures("+avxvnni") || sti->checkFeatures("+avx512vnni,+avx512vl");
}

llvm::Value* CodeGenLLVM::emit_dot4_u8s8(const ir::CallNode* op) {
  KILN_USER_CHECK(op->args.size() == 3)
      << "codegen llvm: intrinsic 'dot4_u8s8' in function '" << func_name_
      << "' takes 3 arguments, got " << op->args.size();
  const int n = op->dtype.lanes();
  llvm::Value* acc = emit(op->args[0]);
  llvm::Value* a = emit(op->args[1]);
  llvm::Value* b = emit(op->args[2]);
  auto* bytes_t = llvm::FixedVectorType::get(i8_, 4 * n);
  auto* words_t = llvm::FixedVectorType::get(i32_, n);
  if (n == 1) acc = builder_.CreateBitCast(acc, words_t);  // i32 -> <1 x i32>
  if (op->args[1].dtype().lanes() == 4 && n > 1) {
    // The same four bytes for every lane: one 32-bit word, splat.
    a = builder_.CreateBitCast(splat(builder_.CreateBitCast(a, i32_), n), bytes_t);
  }
  // The widest VNNI form whose lanes divide n, pieces of it concatenated.
  const int piece = vnni_512_ && n % 16 == 0 ? 16 : vnni_256_ && n % 8 == 0 ? 8 : 0;
  llvm::Value* out = nullptr;
  if (piece > 0) {
    const llvm::Intrinsic::ID id = piece == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512
                                               : llvm::Intrinsic::x86_avx512_vpdpbusd_256;
    llvm::Function* fn = llvm::Intrinsic::getDeclaration(module_.get(), id);
    llvm::FunctionType* ft = fn->getFunctionType();
    auto slice = [&](llvm::Value* v, int first, int count) {
      const auto width = llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements();
      if (first == 0 && count == static_cast<int>(width)) return v;
      std::vector<int> mask(count);
      for (int i = 0; i < count; ++i) mask[i] = first + i;
      return builder_.CreateShuffleVector(v, mask);
    };
    auto* piece_t = llvm::FixedVectorType::get(i32_, piece);
    for (int p = 0; p < n; p += piece) {
      llvm::Value* args[3] = {slice(acc, p, piece), slice(a, 4 * p, 4 * piece),
                              slice(b, 4 * p, 4 * piece)};
      // LLVM 19 types the byte operands as i32 vectors (later versions as i8): cast to its type.
      for (unsigned k = 0; k < 3; ++k) {
        args[k] = builder_.CreateBitCast(args[k], ft->getParamType(k));
      }
      llvm::Value* r = builder_.CreateBitCast(builder_.CreateCall(fn, args), piece_t);
      if (piece == n) {
        out = r;
        break;
      }
      // Lanes [p, p + piece) of the result: r widened to n lanes, then blended in.
      std::vector<int> widen(n, -1), blend(n);
      for (int i = 0; i < piece; ++i) widen[i] = i;
      r = builder_.CreateShuffleVector(r, widen);
      for (int i = 0; i < n; ++i) blend[i] = i >= p && i < p + piece ? n + i - p : i;
      out = builder_.CreateShuffleVector(out ? out : llvm::PoisonValue::get(words_t), r, blend);
    }
  } else if (target_.is_aarch64 && n % 4 == 0) {
    out = emit_dot4_u8s8_neon(acc, a, b, op->args[1].dtype().lanes() == 4 && n > 1);
  } else {
    // Exact everywhere: bytes widened to int32, products summed by groups of four.
    auto* wide_t = llvm::FixedVectorType::get(i32_, 4 * n);
    llvm::Value* prod =
        builder_.CreateMul(builder_.CreateZExt(a, wide_t), builder_.CreateSExt(b, wide_t));
    out = acc;
    for (int j = 0; j < 4; ++j) {
      std::vector<int> mask(n);
      for (int i = 0; i < n; ++i) mask[i] = 4 * i + j;
      out = builder_.CreateAdd(out, builder_.CreateShuffleVector(prod, mask));
    }
  }
  if (n == 1) out = builder_.CreateExtractElement(out, uint64_t{0});
  return out;
}

llvm::Value* CodeGenLLVM::emit_dot4_u8s8_neon(llvm::Value* acc, llvm::Value* a, llvm::Value* b,
                                              bool a_uniform) {
  const int n =
      static_cast<int>(llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements());
  auto* v16i8 = llvm::FixedVectorType::get(i8_, 16);
  auto* v4i32 = llvm::FixedVectorType::get(i32_, 4);
  auto* v16i16 = llvm::FixedVectorType::get(builder_.getInt16Ty(), 16);
  auto* v8i16 = llvm::FixedVectorType::get(builder_.getInt16Ty(), 8);
  auto slice = [&](llvm::Value* v, int first, int count) {
    std::vector<int> mask(count);
    for (int i = 0; i < count; ++i) mask[i] = first + i;
    return builder_.CreateShuffleVector(v, mask);
  };
  auto intrinsic = [&](llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Type*> types) {
    return llvm::Intrinsic::getDeclaration(module_.get(), id, types);
  };
  // A uniform `a` (the same four bytes in every lane) is one 128-bit piece for all of them, and
  // what is derived from it alone (its widened form, the udot correction) is made once.
  llvm::Value* a_piece = a_uniform ? slice(a, 0, 16) : nullptr;
  llvm::Value* a_wide = nullptr;
  llvm::Value* excess = nullptr;
  std::vector<llvm::Value*> pieces;
  for (int p = 0; p < n; p += 4) {
    llvm::Value* acc4 = slice(acc, p, 4);
    llvm::Value* a16 = a_uniform ? a_piece : slice(a, 4 * p, 16);
    llvm::Value* b16 = slice(b, 4 * p, 16);
    llvm::Value* r = nullptr;
    if (neon_i8mm_) {
      r = builder_.CreateCall(intrinsic(llvm::Intrinsic::aarch64_neon_usdot, {v4i32, v16i8}),
                              {acc4, a16, b16});
    } else if (neon_dotprod_) {
      llvm::Function* udot = intrinsic(llvm::Intrinsic::aarch64_neon_udot, {v4i32, v16i8});
      llvm::Value* x80 = llvm::ConstantInt::get(v16i8, 0x80);
      llvm::Value* e = excess;
      if (e == nullptr)
        e = builder_.CreateCall(udot, {llvm::Constant::getNullValue(v4i32), a16, x80});
      if (a_uniform) excess = e;
      r = builder_.CreateCall(udot,
                              {builder_.CreateSub(acc4, e), a16, builder_.CreateXor(b16, x80)});
    } else {
      llvm::Value* aw = a_wide;
      if (aw == nullptr) aw = builder_.CreateZExt(a16, v16i16);
      if (a_uniform) a_wide = aw;
      llvm::Value* prod = builder_.CreateMul(aw, builder_.CreateSExt(b16, v16i16));
      llvm::Function* saddlp = intrinsic(llvm::Intrinsic::aarch64_neon_saddlp, {v4i32, v8i16});
      llvm::Value* lo = builder_.CreateCall(saddlp, {slice(prod, 0, 8)});
      llvm::Value* hi = builder_.CreateCall(saddlp, {slice(prod, 8, 8)});
      llvm::Value* sums =
          builder_.CreateCall(intrinsic(llvm::Intrinsic::aarch64_neon_addp, {v4i32}), {lo, hi});
      r = builder_.CreateAdd(acc4, sums);
    }
    pieces.push_back(r);
  }
  // The pieces concatenated, pairwise, into n lanes.
  while (pieces.size() > 1) {
    std::vector<llvm::Value*> next;
    for (size_t i = 0; i + 1 < pieces.size(); i += 2) {
      const int w = static_cast<int>(
          llvm::cast<llvm::FixedVectorType>(pieces[i]->getType())->getNumElements());
      const int w2 = static_cast<int>(
          llvm::cast<llvm::FixedVectorType>(pieces[i + 1]->getType())->getNumElements());
      llvm::Value* second = pieces[i + 1];
      if (w2 < w) {  // an odd piece out: widened with poison lanes to the first's width
        std::vector<int> widen(w, -1);
        for (int k = 0; k < w2; ++k) widen[k] = k;
        second = builder_.CreateShuffleVector(second, widen);
      }
      // The first's w lanes, then the second's w2 (lanes w.. of the pair).
      std::vector<int> mask(w + w2);
      for (int k = 0; k < w + w2; ++k) mask[k] = k;
      next.push_back(builder_.CreateShuffleVector(pieces[i], second, mask));
    }
    if (pieces.size() % 2 == 1) next.push_back(pieces.back());
    pieces = std::move(next);
  }
  return pieces[0];
}

llvm::Value* CodeGenLLVM::emit_pure_intrinsic(const ir::CallNode* op) {
  const std::string& name = op->name;
  if (name == ir::kDot4U8S8) return emit_dot4_u8s8(op);
  auto arity = [&](size_t n) {
    KILN_USER_CHECK(op->args.size() == n)
        << "codegen llvm: intrinsic '" << name << "' in function '" << func_name_ << "' takes " << n
        << (n == 1 ? " argument" : " arguments") << ", got " << op->args.size();
  };
  KILN_USER_CHECK(op->dtype.is_float())
      << "codegen llvm: intrinsic '" << name << "' in function '" << func_name_
      << "' needs a float type, got " << op->dtype.str();
  if (name == "exp" || name == "log" || name == "tanh" || name == "erf" || name == "sigmoid") {
    arity(1);
    llvm::Value* x = emit(op->args[0]);
    // float16 computes in float32; float64 keeps libm's precision.
    llvm::Type* t = x->getType();
    const bool half = t->getScalarType()->isHalfTy();
    if (half) x = builder_.CreateFPExt(x, t->getWithNewType(builder_.getFloatTy()));
    llvm::Value* r = nullptr;
    if (has_fast_math(x->getType())) {
      if (name == "exp") r = fast_exp(x);
      if (name == "log") r = fast_log(x);
      if (name == "tanh") r = fast_tanh(x);
      if (name == "erf") r = fast_erf(x);
      if (name == "sigmoid") {
        llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
        r = builder_.CreateFDiv(one, builder_.CreateFAdd(one, fast_exp(builder_.CreateFNeg(x))));
      }
    } else if (name == "tanh" || name == "erf") {
      r = call_libm_per_lane(name, x);
    } else if (name == "sigmoid") {
      llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
      llvm::Value* e = builder_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, builder_.CreateFNeg(x));
      r = builder_.CreateFDiv(one, builder_.CreateFAdd(one, e));
    } else {
      r = builder_.CreateUnaryIntrinsic(name == "exp" ? llvm::Intrinsic::exp : llvm::Intrinsic::log,
                                        x);
    }
    return half ? builder_.CreateFPTrunc(r, t) : r;
  }
  for (const auto& [n, id] : kUnary) {
    if (n == name) {
      arity(1);
      return builder_.CreateUnaryIntrinsic(id, emit(op->args[0]));
    }
  }
  if (name == "tan" || name == "acos" || name == "asin" || name == "atan" || name == "sinh" ||
      name == "cosh" || name == "asinh" || name == "acosh" || name == "atanh") {
    arity(1);
    return call_libm_per_lane(name, emit(op->args[0]));
  }
  if (name == "pow") {
    arity(2);
    return builder_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, emit(op->args[0]),
                                          emit(op->args[1]));
  }
  if (name == "fma") {
    arity(3);
    llvm::Value* a = emit(op->args[0]);
    llvm::Value* b = emit(op->args[1]);
    llvm::Value* c = emit(op->args[2]);
    return builder_.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  }
  KILN_USER_ERROR() << "codegen llvm: unknown pure intrinsic '" << name << "' in function '"
                    << func_name_ << "' (known: " << kKnown << ")";
}

llvm::Value* CodeGenLLVM::emit_call(const ir::CallNode* op) {
  switch (op->call_kind) {
    case ir::CallKind::kPureIntrinsic:
      if (is_bf16_intrinsic(op) && !target_.is_nvptx) return emit_bf16_intrinsic(op, nullptr);
      return target_.is_nvptx ? emit_device_math(op) : emit_pure_intrinsic(op);
    case ir::CallKind::kIntrinsic:
      if (op->name == "likely" && op->args.size() == 1) return emit(op->args[0]);
      if (op->name == ir::kPrefetch && op->args.size() == 2 && !target_.is_nvptx) {
        const auto* buffer = op->args[0].as<ir::VarNode>();
        KILN_ICHECK(buffer != nullptr) << "prefetch of a non-variable buffer";
        // Not inbounds: the address may lie past the buffer (the loop's last iterations).
        llvm::Value* p =
            builder_.CreateGEP(memory_type(op->dtype), lookup_var(buffer), emit(op->args[1]));
        builder_.CreateIntrinsic(llvm::Intrinsic::prefetch, {p->getType()},
                                 {p, builder_.getInt32(0), builder_.getInt32(3),
                                  builder_.getInt32(1)});  // read, keep in all levels, data
        return llvm::Constant::getNullValue(llvm_type(op->dtype));
      }
      if (target_.is_nvptx && op->name == "kiln.storage_sync") {
        emit_device_barrier(op);
        return builder_.getInt32(0);
      }
      KILN_USER_ERROR() << "codegen llvm: intrinsic '" << op->name << "' in function '"
                        << func_name_ << "' is not supported on CPUs (known: likely, "
                        << ir::kPrefetch << ")";
    case ir::CallKind::kExtern: {
      std::vector<llvm::Value*> args;
      std::vector<llvm::Type*> types;
      for (const ir::Expr& a : op->args) {
        llvm::Value* v = emit(a);
        // C has no i1: a bool argument is passed as a byte.
        if (a.dtype().is_bool()) v = builder_.CreateZExt(v, memory_type(a.dtype()));
        args.push_back(v);
        types.push_back(v->getType());
      }
      const bool ret_bool = op->dtype.is_bool();
      llvm::Type* ret = ret_bool ? memory_type(op->dtype) : llvm_type(op->dtype);
      llvm::FunctionCallee fn = c_function(op->name, ret, types);
      auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee());
      KILN_USER_CHECK(f != nullptr && f->getFunctionType() == fn.getFunctionType())
          << "codegen llvm: extern function '" << op->name << "' in function '" << func_name_
          << "' is called with different argument or result types";
      llvm::Value* r = builder_.CreateCall(fn, args);
      if (ret_bool) r = builder_.CreateICmpNE(r, llvm::Constant::getNullValue(ret));
      return r;
    }
  }
  KILN_UNREACHABLE();
}

}  // namespace kiln::codegen::detail
