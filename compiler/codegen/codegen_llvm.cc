// The core of the LLVM translator: types, expressions (scalar and vector), loops, conditionals,
// asserts and the error path. Memory accesses and allocation are in codegen_llvm_memory.cc. See
// codegen_llvm.h for the shape of the generated module.
#include "compiler/codegen/codegen_llvm.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm_impl.h"
#include "compiler/ir/bf16.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::codegen {
namespace detail {

using ir::DataType;
using ir::Expr;
using ir::ExprKind;
using ir::Stmt;
using ir::StmtKind;

namespace {

/// A self-referencing llvm.loop node carrying `props`.
llvm::MDNode* loop_metadata(llvm::LLVMContext& ctx, std::vector<llvm::Metadata*> props) {
  std::vector<llvm::Metadata*> ops{nullptr};
  ops.insert(ops.end(), props.begin(), props.end());
  llvm::MDNode* node = llvm::MDNode::getDistinct(ctx, ops);
  node->replaceOperandWith(0, node);
  return node;
}

/// Whether `e` reads memory.
bool reads_memory(const Expr& e) {
  bool found = false;
  ir::post_order_visit(e, [&](const ir::Object* n) {
    found = found || dynamic_cast<const ir::LoadNode*>(n) != nullptr;
  });
  return found;
}

}  // namespace

llvm::Value* CodeGenLLVM::emit_select(const ir::SelectNode* op) {
  // A choice between two memory reads on a condition that is the same for every lane (a
  // concatenation's input, chosen by an outer index while the inner one is vectorized) is a
  // branch: a select evaluates both sides, so a Concat of k inputs read all k for each element.
  // Otherwise (a lane-dependent condition, or a side that reads nothing: padding) a select.
  const Expr* scalar_cond = &op->condition;
  if (auto* b = op->condition.as<ir::BroadcastNode>()) scalar_cond = &b->value;
  if (scalar_cond->dtype().lanes() == 1 && reads_memory(op->true_value) &&
      reads_memory(op->false_value)) {
    llvm::Value* c = emit(*scalar_cond);
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "select.true", fs_.function);
    llvm::BasicBlock* else_bb = llvm::BasicBlock::Create(*ctx_, "select.false", fs_.function);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "select.end", fs_.function);
    builder_.CreateCondBr(c, then_bb, else_bb);
    builder_.SetInsertPoint(then_bb);
    llvm::Value* t = emit(op->true_value);
    llvm::BasicBlock* then_end = builder_.GetInsertBlock();
    builder_.CreateBr(end_bb);
    builder_.SetInsertPoint(else_bb);
    llvm::Value* f = emit(op->false_value);
    llvm::BasicBlock* else_end = builder_.GetInsertBlock();
    builder_.CreateBr(end_bb);
    builder_.SetInsertPoint(end_bb);
    llvm::PHINode* phi = builder_.CreatePHI(t->getType(), 2);
    phi->addIncoming(t, then_end);
    phi->addIncoming(f, else_end);
    return phi;
  }
  llvm::Value* c = emit(op->condition);
  llvm::Value* t = emit(op->true_value);
  llvm::Value* f = emit(op->false_value);
  return builder_.CreateSelect(c, t, f);
}

CodeGenLLVM::CodeGenLLVM(const LLVMTarget& target, llvm::TargetMachine* tm, llvm::LLVMContext* ctx)
    : target_(target),
      ctx_(ctx),
      module_(std::make_unique<llvm::Module>("kiln", *ctx)),
      builder_(*ctx) {
  module_->setTargetTriple(target.triple);
  if (tm != nullptr) module_->setDataLayout(tm->createDataLayout());
  detect_dot_product_features(tm);
  i1_ = builder_.getInt1Ty();
  i8_ = builder_.getInt8Ty();
  i16_ = builder_.getInt16Ty();
  i32_ = builder_.getInt32Ty();
  i64_ = builder_.getInt64Ty();
  ptr_ = builder_.getPtrTy();
  // FMA contraction is allowed; reassociation and the other fast-math liberties are not, so that
  // results stay close to a naive reference.
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);
  builder_.setFastMathFlags(fmf);
}

std::unique_ptr<llvm::Module> CodeGenLLVM::finish() {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  const bool broken = llvm::verifyModule(*module_, &os);
  KILN_ICHECK(!broken) << "codegen produced invalid LLVM IR: " << os.str();
  return std::move(module_);
}

// ---- types ----

llvm::Type* CodeGenLLVM::llvm_type(DataType t) {
  llvm::Type* elem = nullptr;
  switch (t.code()) {
    case ir::TypeCode::kInt:
    case ir::TypeCode::kUInt:
      elem = builder_.getIntNTy(t.bits());
      break;
    case ir::TypeCode::kBool:
      elem = i1_;
      break;
    case ir::TypeCode::kFloat:
      if (t.bits() == 16) {
        elem = builder_.getHalfTy();
      } else if (t.bits() == 32) {
        elem = builder_.getFloatTy();
      } else if (t.bits() == 64) {
        elem = builder_.getDoubleTy();
      } else {
        KILN_USER_ERROR() << "codegen llvm: function '" << func_name_ << "' uses float" << t.bits()
                          << ", which has no LLVM type (known: float16, 32, 64)";
      }
      break;
    case ir::TypeCode::kHandle:
      if (t.is_void()) return builder_.getVoidTy();
      elem = ptr_;
      break;
  }
  if (t.lanes() > 1) return llvm::FixedVectorType::get(elem, t.lanes());
  return elem;
}

llvm::Type* CodeGenLLVM::memory_type(DataType t) {
  if (t.is_bool()) return t.lanes() > 1 ? llvm::FixedVectorType::get(i8_, t.lanes()) : i8_;
  return llvm_type(t);
}

llvm::Value* CodeGenLLVM::splat(llvm::Value* v, int lanes) {
  if (lanes == 1) return v;
  return builder_.CreateVectorSplat(lanes, v);
}

llvm::Value* CodeGenLLVM::lookup_var(const ir::VarNode* v) {
  auto it = fs_.vars.find(v);
  KILN_USER_CHECK(it != fs_.vars.end())
      << "codegen llvm: function '" << func_name_ << "' uses variable '" << v->name
      << "', which nothing binds (not a parameter, shape variable, loop variable, let or "
         "allocation)";
  return it->second;
}

// ---- expressions ----

llvm::Value* CodeGenLLVM::emit(const Expr& e) {
  KILN_ICHECK(e.defined()) << "codegen of an undefined expression";
  switch (e.kind()) {
    case ExprKind::kIntImm: {
      auto* op = e.as<ir::IntImmNode>();
      if (op->dtype.is_bool()) return builder_.getInt1(op->value != 0);
      auto* t = llvm::cast<llvm::IntegerType>(llvm_type(op->dtype));
      return op->dtype.is_int() ? llvm::ConstantInt::getSigned(t, op->value)
                                : llvm::ConstantInt::get(t, static_cast<uint64_t>(op->value));
    }
    case ExprKind::kFloatImm: {
      auto* op = e.as<ir::FloatImmNode>();
      return llvm::ConstantFP::get(llvm_type(op->dtype), op->value);
    }
    case ExprKind::kStringImm:
      return string_constant(e.as<ir::StringImmNode>()->value);
    case ExprKind::kVar:
      return lookup_var(e.as<ir::VarNode>());
    case ExprKind::kCast: {
      auto* op = e.as<ir::CastNode>();
      return emit_cast(op->dtype, op->value.dtype(), emit(op->value));
    }
#define KILN_BINARY(T)                                                              \
  case ExprKind::k##T: {                                                            \
    auto* op = e.as<ir::T##Node>();                                                 \
    return emit_binary(ExprKind::k##T, op->dtype, emit(op->a), emit(op->b), op->b); \
  }
    case ExprKind::kAdd: {
      // acc + bf16x2_dot(a, b): one vdpbf16ps where the target has it (llvm_bf16.cc).
      auto* op = e.as<ir::AddNode>();
      for (auto [acc, call] : {std::pair{op->a, op->b}, std::pair{op->b, op->a}}) {
        if (auto* c = call.as<ir::CallNode>();
            c != nullptr && c->name == ir::kBf16x2Dot && is_bf16_intrinsic(c)) {
          return emit_bf16_intrinsic(c, emit(acc));
        }
      }
      return emit_binary(ExprKind::kAdd, op->dtype, emit(op->a), emit(op->b), op->b);
    }
      KILN_BINARY(Sub)
      KILN_BINARY(Mul)
      KILN_BINARY(Div)
      KILN_BINARY(Mod)
      KILN_BINARY(FloorDiv)
      KILN_BINARY(FloorMod)
      KILN_BINARY(Shr)
      KILN_BINARY(Min)
      KILN_BINARY(Max)
#undef KILN_BINARY
#define KILN_COMPARE(T)                                                           \
  case ExprKind::k##T: {                                                          \
    auto* op = e.as<ir::T##Node>();                                               \
    return emit_compare(ExprKind::k##T, op->a.dtype(), emit(op->a), emit(op->b)); \
  }
      KILN_COMPARE(EQ)
      KILN_COMPARE(NE)
      KILN_COMPARE(LT)
      KILN_COMPARE(LE)
      KILN_COMPARE(GT)
      KILN_COMPARE(GE)
#undef KILN_COMPARE
    case ExprKind::kAnd: {
      auto* op = e.as<ir::AndNode>();
      return builder_.CreateAnd(emit(op->a), emit(op->b));
    }
    case ExprKind::kOr: {
      auto* op = e.as<ir::OrNode>();
      return builder_.CreateOr(emit(op->a), emit(op->b));
    }
    case ExprKind::kNot:
      return builder_.CreateNot(emit(e.as<ir::NotNode>()->a));
    case ExprKind::kSelect:
      return emit_select(e.as<ir::SelectNode>());
    case ExprKind::kLoad:
      return emit_load(e.as<ir::LoadNode>());
    case ExprKind::kRamp:
      return emit_ramp(e.as<ir::RampNode>());
    case ExprKind::kBroadcast: {
      auto* op = e.as<ir::BroadcastNode>();
      return splat(emit(op->value), op->lanes);
    }
    case ExprKind::kLet: {
      auto* op = e.as<ir::LetNode>();
      llvm::Value* v = emit(op->value);
      const ir::VarNode* var = op->var.get();
      auto old = fs_.vars.find(var);
      llvm::Value* saved = old == fs_.vars.end() ? nullptr : old->second;
      fs_.vars[var] = v;
      llvm::Value* body = emit(op->body);
      if (saved != nullptr) {
        fs_.vars[var] = saved;
      } else {
        fs_.vars.erase(var);
      }
      return body;
    }
    case ExprKind::kCall:
      return emit_call(e.as<ir::CallNode>());
    case ExprKind::kProducerLoad:
    case ExprKind::kReduce:
      KILN_USER_ERROR() << "codegen llvm: function '" << func_name_ << "' still contains "
                        << ir::to_string(e)
                        << "; lower the schedule (storage flattening) before code generation";
  }
  KILN_UNREACHABLE();
}

llvm::Value* CodeGenLLVM::emit_cast(DataType to, DataType from, llvm::Value* v) {
  if (to == from) return v;
  llvm::Type* t = llvm_type(to);
  if (from.lanes() != to.lanes()) {
    KILN_ICHECK(from.lanes() == 1) << "cast from " << from.str() << " to " << to.str();
    v = splat(emit_cast(to.element_of(), from, v), to.lanes());
    return v;
  }
  if (to.is_bool()) {
    if (from.is_float())
      return builder_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
    if (from.is_handle()) return builder_.CreateIsNotNull(v);
    return builder_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
  }
  if (from.is_bool()) {
    if (to.is_float()) return builder_.CreateUIToFP(v, t);
    return builder_.CreateZExt(v, t);
  }
  if (to.is_handle()) return builder_.CreateIntToPtr(v, t);
  if (from.is_handle()) return builder_.CreatePtrToInt(v, t);
  if (from.is_float() && to.is_float()) return builder_.CreateFPCast(v, t);
  if (from.is_float())
    return to.is_int() ? builder_.CreateFPToSI(v, t) : builder_.CreateFPToUI(v, t);
  if (to.is_float())
    return from.is_int() ? builder_.CreateSIToFP(v, t) : builder_.CreateUIToFP(v, t);
  return builder_.CreateIntCast(v, t, from.is_int());
}

llvm::Value* CodeGenLLVM::emit_binary(ExprKind kind, DataType t, llvm::Value* a, llvm::Value* b,
                                      const Expr& b_expr) {
  const bool is_float = t.is_float();
  const bool is_signed = t.is_int();
  // Index arithmetic is int32/int64: no signed wrap there lets LLVM widen and vectorize it (as
  // TVM does). Narrow integers (int8 data) wrap as the machine does.
  const bool nsw = is_signed && t.bits() >= 32;
  // A vector divisor may hold zeros in lanes that a predicate masked off (their loads read 0):
  // those lanes divide by 1 instead of trapping; their results are never stored.
  auto safe_divisor = [&](llvm::Value* d) -> llvm::Value* {
    if (is_float || !d->getType()->isVectorTy() || llvm::isa<llvm::Constant>(d)) return d;
    llvm::Value* zero = llvm::Constant::getNullValue(d->getType());
    return builder_.CreateSelect(builder_.CreateICmpEQ(d, zero),
                                 llvm::ConstantInt::get(d->getType(), 1), d);
  };
  if (kind == ExprKind::kDiv || kind == ExprKind::kMod || kind == ExprKind::kFloorDiv ||
      kind == ExprKind::kFloorMod) {
    b = safe_divisor(b);
  }
  switch (kind) {
    case ExprKind::kAdd:
      if (is_float) return builder_.CreateFAdd(a, b);
      return nsw ? builder_.CreateNSWAdd(a, b) : builder_.CreateAdd(a, b);
    case ExprKind::kSub:
      if (is_float) return builder_.CreateFSub(a, b);
      return nsw ? builder_.CreateNSWSub(a, b) : builder_.CreateSub(a, b);
    case ExprKind::kMul:
      if (is_float) return builder_.CreateFMul(a, b);
      return nsw ? builder_.CreateNSWMul(a, b) : builder_.CreateMul(a, b);
    case ExprKind::kDiv:
      if (is_float) return builder_.CreateFDiv(a, b);
      return is_signed ? builder_.CreateSDiv(a, b) : builder_.CreateUDiv(a, b);
    case ExprKind::kMod:
      if (is_float) return builder_.CreateFRem(a, b);
      return is_signed ? builder_.CreateSRem(a, b) : builder_.CreateURem(a, b);
    case ExprKind::kShr:
      return is_signed ? builder_.CreateAShr(a, b) : builder_.CreateLShr(a, b);
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod: {
      const bool div = kind == ExprKind::kFloorDiv;
      if (is_float) {
        llvm::Value* q =
            builder_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, builder_.CreateFDiv(a, b));
        return div ? q : builder_.CreateFSub(a, builder_.CreateFMul(q, b));
      }
      if (!is_signed) return div ? builder_.CreateUDiv(a, b) : builder_.CreateURem(a, b);
      // A positive power of two: an arithmetic shift / a mask round toward minus infinity.
      if (auto c = ir::as_const_int(b_expr); c && *c > 0 && (*c & (*c - 1)) == 0) {
        const int64_t shift = 63 - __builtin_clzll(static_cast<uint64_t>(*c));
        llvm::Type* ty = a->getType();
        if (div) return builder_.CreateAShr(a, llvm::ConstantInt::get(ty, shift));
        return builder_.CreateAnd(a, llvm::ConstantInt::get(ty, *c - 1));
      }
      // q = a / b (truncating); when the remainder is non-zero and its sign differs from b's,
      // the floor is one less (and the floor remainder is r + b).
      llvm::Value* q = builder_.CreateSDiv(a, b);
      llvm::Value* r = builder_.CreateSRem(a, b);
      llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
      llvm::Value* adjust = builder_.CreateAnd(
          builder_.CreateICmpNE(r, zero), builder_.CreateICmpSLT(builder_.CreateXor(r, b), zero));
      if (div) return builder_.CreateSub(q, builder_.CreateZExt(adjust, q->getType()));
      return builder_.CreateAdd(r, builder_.CreateSelect(adjust, b, zero));
    }
    case ExprKind::kMin:
    case ExprKind::kMax: {
      const bool is_min = kind == ExprKind::kMin;
      llvm::Value* lt = is_float    ? builder_.CreateFCmpOLT(a, b)
                        : is_signed ? builder_.CreateICmpSLT(a, b)
                                    : builder_.CreateICmpULT(a, b);
      return is_min ? builder_.CreateSelect(lt, a, b) : builder_.CreateSelect(lt, b, a);
    }
    default:
      KILN_UNREACHABLE();
  }
}

llvm::Value* CodeGenLLVM::emit_compare(ExprKind kind, DataType t, llvm::Value* a, llvm::Value* b) {
  using P = llvm::CmpInst::Predicate;
  if (t.is_float()) {
    P p = P::FCMP_OEQ;
    switch (kind) {
      case ExprKind::kEQ:
        p = P::FCMP_OEQ;
        break;
      case ExprKind::kNE:
        p = P::FCMP_UNE;
        break;
      case ExprKind::kLT:
        p = P::FCMP_OLT;
        break;
      case ExprKind::kLE:
        p = P::FCMP_OLE;
        break;
      case ExprKind::kGT:
        p = P::FCMP_OGT;
        break;
      case ExprKind::kGE:
        p = P::FCMP_OGE;
        break;
      default:
        KILN_UNREACHABLE();
    }
    return builder_.CreateFCmp(p, a, b);
  }
  const bool s = t.is_int();
  P p = P::ICMP_EQ;
  switch (kind) {
    case ExprKind::kEQ:
      p = P::ICMP_EQ;
      break;
    case ExprKind::kNE:
      p = P::ICMP_NE;
      break;
    case ExprKind::kLT:
      p = s ? P::ICMP_SLT : P::ICMP_ULT;
      break;
    case ExprKind::kLE:
      p = s ? P::ICMP_SLE : P::ICMP_ULE;
      break;
    case ExprKind::kGT:
      p = s ? P::ICMP_SGT : P::ICMP_UGT;
      break;
    case ExprKind::kGE:
      p = s ? P::ICMP_SGE : P::ICMP_UGE;
      break;
    default:
      KILN_UNREACHABLE();
  }
  return builder_.CreateICmp(p, a, b);
}

llvm::Value* CodeGenLLVM::emit_ramp(const ir::RampNode* op) {
  llvm::Value* base = emit(op->base);
  llvm::Value* stride = emit(op->stride);
  llvm::Type* et = base->getType();
  std::vector<llvm::Constant*> steps;
  for (int i = 0; i < op->lanes; ++i) steps.push_back(llvm::ConstantInt::get(et, i));
  llvm::Value* offsets =
      builder_.CreateMul(splat(stride, op->lanes), llvm::ConstantVector::get(steps));
  const bool nsw = op->base.dtype().is_int() && op->base.dtype().bits() >= 32;
  return nsw ? builder_.CreateNSWAdd(splat(base, op->lanes), offsets)
             : builder_.CreateAdd(splat(base, op->lanes), offsets);
}

// ---- statements ----

void CodeGenLLVM::emit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StmtKind::kLetStmt: {
      auto* op = s.as<ir::LetStmtNode>();
      llvm::Value* v = emit(op->value);
      const ir::VarNode* var = op->var.get();
      auto old = fs_.vars.find(var);
      llvm::Value* saved = old == fs_.vars.end() ? nullptr : old->second;
      fs_.vars[var] = v;
      if (auto* src = op->value.as<ir::VarNode>(); src && fs_.buffers.count(src)) {
        fs_.buffers[var] = fs_.buffers[src];
      }
      emit(op->body);
      if (saved != nullptr) {
        fs_.vars[var] = saved;
      } else {
        fs_.vars.erase(var);
      }
      return;
    }
    case StmtKind::kAttrStmt: {
      // Only GPU kernels read an attribute (thread_extent); unknown keys pass through.
      auto* op = s.as<ir::AttrStmtNode>();
      if (target_.is_nvptx && op->key == ir::attr::kThreadExtent) return emit_thread_extent(op);
      return emit(op->body);
    }
    case StmtKind::kAssertStmt:
      return emit_assert(s.as<ir::AssertStmtNode>());
    case StmtKind::kFor:
      return emit_for(s.as<ir::ForNode>());
    case StmtKind::kStore:
      return emit_store(s.as<ir::StoreNode>());
    case StmtKind::kAllocate:
      return emit_allocate(s.as<ir::AllocateNode>());
    case StmtKind::kIfThenElse:
      return emit_if(s.as<ir::IfThenElseNode>());
    case StmtKind::kSeq:
      return emit_seq(s);
    case StmtKind::kEvaluate: {
      const Expr& v = s.as<ir::EvaluateNode>()->value;
      if (v.as<ir::IntImmNode>() == nullptr) emit(v);
      return;
    }
    case StmtKind::kProducerStore:
    case StmtKind::kProducerRealize:
      KILN_USER_ERROR() << "codegen llvm: function '" << func_name_
                        << "' still contains tensor-level statements (ProducerStore / "
                           "ProducerRealize); lower the schedule (storage flattening) first";
  }
}

namespace {

/// How many stores `s` holds, its loops' bodies counted once (unrolled loops are copies by
/// now): the size of the machine code it becomes, without walking its expressions.
size_t store_count(const ir::Stmt& s) {
  if (!s.defined()) return 0;
  switch (s.kind()) {
    case StmtKind::kStore:
      return 1;
    case StmtKind::kSeq: {
      size_t n = 0;
      for (const Stmt& st : s.as<ir::SeqNode>()->seq) n += store_count(st);
      return n;
    }
    case StmtKind::kFor:
      return store_count(s.as<ir::ForNode>()->body);
    case StmtKind::kLetStmt:
      return store_count(s.as<ir::LetStmtNode>()->body);
    case StmtKind::kAttrStmt:
      return store_count(s.as<ir::AttrStmtNode>()->body);
    case StmtKind::kAssertStmt:
      return store_count(s.as<ir::AssertStmtNode>()->body);
    case StmtKind::kAllocate:
      return store_count(s.as<ir::AllocateNode>()->body);
    case StmtKind::kIfThenElse: {
      auto* op = s.as<ir::IfThenElseNode>();
      return store_count(op->then_case) + store_count(op->else_case);
    }
    default:
      return 0;
  }
}

}  // namespace

void CodeGenLLVM::emit_seq(const ir::Stmt& s) {
  const auto* op = s.as<ir::SeqNode>();
  // A sequence this large (a recurrent network's time steps, unrolled) would be one function
  // whose register allocation grows faster than its size: most of a build's time. Its large
  // statements become functions of their own (noinline), each called once, as parallel bodies
  // are; a kernel of ordinary size is emitted as it is.
  constexpr size_t kOutlineAbove = 4096, kOutlineEach = 32;
  const bool outline = !target_.is_nvptx && op->seq.size() > 1 && store_count(s) > kOutlineAbove;
  for (const Stmt& st : op->seq) {
    // A part larger than the threshold is walked into instead, so that no outlined part holds
    // another (finding each part's values walks it once).
    const size_t stores = outline ? store_count(st) : 0;
    if (stores >= kOutlineEach && stores <= kOutlineAbove) {
      emit_outlined_call(st);
    } else {
      emit(st);
    }
  }
}

void CodeGenLLVM::emit_outlined_call(const ir::Stmt& s) {
  const std::vector<const ir::VarNode*> captures = captured_vars(s);
  std::vector<llvm::Value*> args{fs_.error};
  for (const ir::VarNode* v : captures) args.push_back(fs_.vars.at(v));
  SavedState saved;
  llvm::Function* fn = begin_outlined(func_name_ + "_part_" + std::to_string(outlined_count_++), {},
                                      captures, fs_.in_parallel, &saved);
  fn->addFnAttr(llvm::Attribute::NoInline);
  emit(s);
  builder_.CreateRet(builder_.getInt32(0));
  end_outlined(&saved);
  llvm::Value* rc = builder_.CreateCall(fn, args);
  llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "part.ok", fs_.function);
  llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "part.fail", fs_.function);
  builder_.CreateCondBr(builder_.CreateICmpEQ(rc, builder_.getInt32(0)), ok_bb, fail_bb);
  builder_.SetInsertPoint(fail_bb);
  emit_error_return(rc);  // the part stored the message
  builder_.SetInsertPoint(ok_bb);
}

void CodeGenLLVM::emit_for(const ir::ForNode* op) {
  // A GPU kernel has no thread pool: a parallel loop there runs serially in its thread.
  if (op->for_kind == ir::ForKind::kParallel && !fs_.in_parallel && !target_.is_nvptx) {
    return emit_parallel_for(op);
  }
  llvm::Type* t = llvm_type(op->loop_var.dtype());
  KILN_USER_CHECK(op->loop_var.dtype().is_int() && op->loop_var.dtype().is_scalar())
      << "codegen llvm: loop variable '" << op->loop_var.name() << "' of function '" << func_name_
      << "' must be a signed integer, got " << op->loop_var.dtype().str();
  llvm::Value* begin = builder_.CreateIntCast(emit(op->min), t, op->min.dtype().is_int());
  llvm::Value* extent = builder_.CreateIntCast(emit(op->extent), t, op->extent.dtype().is_int());
  llvm::Value* end = builder_.CreateNSWAdd(begin, extent);
  emit_serial_loop(op->loop_var, begin, end, op->body, op->for_kind);
}

void CodeGenLLVM::emit_serial_loop(const ir::Var& var, llvm::Value* begin, llvm::Value* end,
                                   const Stmt& body, ir::ForKind kind) {
  llvm::BasicBlock* pre = builder_.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(*ctx_, "for.header", fs_.function);
  llvm::BasicBlock* body_bb = llvm::BasicBlock::Create(*ctx_, "for.body", fs_.function);
  llvm::BasicBlock* exit_bb = llvm::BasicBlock::Create(*ctx_, "for.end", fs_.function);
  builder_.CreateBr(header);
  builder_.SetInsertPoint(header);
  llvm::PHINode* i = builder_.CreatePHI(begin->getType(), 2, var.name());
  i->addIncoming(begin, pre);
  builder_.CreateCondBr(builder_.CreateICmpSLT(i, end), body_bb, exit_bb);

  builder_.SetInsertPoint(body_bb);
  const ir::VarNode* v = var.get();
  auto old = fs_.vars.find(v);
  llvm::Value* saved = old == fs_.vars.end() ? nullptr : old->second;
  fs_.vars[v] = i;
  emit(body);
  if (saved != nullptr) {
    fs_.vars[v] = saved;
  } else {
    fs_.vars.erase(v);
  }
  llvm::Value* next = builder_.CreateNSWAdd(i, llvm::ConstantInt::get(begin->getType(), 1));
  llvm::BranchInst* latch = builder_.CreateBr(header);
  i->addIncoming(next, builder_.GetInsertBlock());
  // Loops the unroll / vectorize passes did not handle still carry the schedule's wish.
  if (kind == ir::ForKind::kUnrolled) {
    latch->setMetadata(
        "llvm.loop",
        loop_metadata(*ctx_, {llvm::MDNode::get(
                                 *ctx_, llvm::MDString::get(*ctx_, "llvm.loop.unroll.full"))}));
  } else if (kind == ir::ForKind::kVectorized) {
    llvm::Metadata* enable[] = {llvm::MDString::get(*ctx_, "llvm.loop.vectorize.enable"),
                                llvm::ConstantAsMetadata::get(builder_.getTrue())};
    latch->setMetadata("llvm.loop", loop_metadata(*ctx_, {llvm::MDNode::get(*ctx_, enable)}));
  }
  builder_.SetInsertPoint(exit_bb);
}

void CodeGenLLVM::emit_if(const ir::IfThenElseNode* op) {
  llvm::Value* cond = emit(op->condition);
  llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "if.then", fs_.function);
  llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "if.end", fs_.function);
  llvm::BasicBlock* else_bb =
      op->else_case.defined() ? llvm::BasicBlock::Create(*ctx_, "if.else", fs_.function) : end_bb;
  builder_.CreateCondBr(cond, then_bb, else_bb);
  builder_.SetInsertPoint(then_bb);
  emit(op->then_case);
  builder_.CreateBr(end_bb);
  if (op->else_case.defined()) {
    builder_.SetInsertPoint(else_bb);
    emit(op->else_case);
    builder_.CreateBr(end_bb);
  }
  builder_.SetInsertPoint(end_bb);
}

void CodeGenLLVM::emit_assert(const ir::AssertStmtNode* op) {
  llvm::Value* cond = emit(op->condition);
  if (cond->getType()->isVectorTy()) cond = builder_.CreateAndReduce(cond);
  if (target_.is_nvptx) {
    // A kernel has no error channel: a failed assertion traps, as CUDA C's assert does.
    llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "assert.ok", fs_.function);
    llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "assert.fail", fs_.function);
    builder_.CreateCondBr(cond, ok_bb, fail_bb, llvm::MDBuilder(*ctx_).createLikelyBranchWeights());
    builder_.SetInsertPoint(fail_bb);
    builder_.CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
    builder_.CreateUnreachable();
    builder_.SetInsertPoint(ok_bb);
  } else {
    check_or_fail(cond, op->message, kAssertError);
  }
  emit(op->body);
}

// ---- helpers ----

llvm::Constant* CodeGenLLVM::string_constant(const std::string& s) {
  auto it = strings_.find(s);
  if (it != strings_.end()) return it->second;
  llvm::Constant* data = llvm::ConstantDataArray::getString(*ctx_, s, /*AddNull=*/true);
  auto* gv = new llvm::GlobalVariable(*module_, data->getType(), /*isConstant=*/true,
                                      llvm::GlobalValue::PrivateLinkage, data, ".str");
  gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  gv->setAlignment(llvm::Align(1));
  strings_[s] = gv;
  return gv;
}

void CodeGenLLVM::store_error(llvm::Value* message) {
  llvm::StoreInst* st = builder_.CreateAlignedStore(message, fs_.error, llvm::Align(8));
  // Several tasks of a parallel loop may fail at once; any one message will do.
  if (fs_.in_parallel) st->setAtomic(llvm::AtomicOrdering::Monotonic);
}

void CodeGenLLVM::emit_error_return(llvm::Value* code) {
  for (auto it = fs_.heap.rbegin(); it != fs_.heap.rend(); ++it) {
    builder_.CreateCall(workspace_function(/*alloc=*/false), {*it});
  }
  builder_.CreateRet(code);
}

void CodeGenLLVM::check_or_fail(llvm::Value* ok, const std::string& message, int32_t code) {
  llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "check.ok", fs_.function);
  llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "check.fail", fs_.function);
  builder_.CreateCondBr(ok, ok_bb, fail_bb, llvm::MDBuilder(*ctx_).createLikelyBranchWeights());
  builder_.SetInsertPoint(fail_bb);
  store_error(string_constant(message));
  emit_error_return(builder_.getInt32(static_cast<uint32_t>(code)));
  builder_.SetInsertPoint(ok_bb);
}

void CodeGenLLVM::set_function_attributes(llvm::Function* f) {
  f->addFnAttr(llvm::Attribute::NoUnwind);
  if (!target_.cpu.empty()) f->addFnAttr("target-cpu", target_.cpu);
  if (!target_.features.empty()) f->addFnAttr("target-features", target_.features);
  if (target_.is_x86 && target_.vector_bits >= 256) {
    // Without these, LLVM's cost model splits vectors to 256 bits on some AVX-512 CPUs.
    const std::string bits = std::to_string(target_.vector_bits);
    f->addFnAttr("prefer-vector-width", bits);
    f->addFnAttr("min-legal-vector-width", bits);
  }
  f->addFnAttr("no-trapping-math", "true");
  f->addFnAttr("frame-pointer", "none");
}

llvm::FunctionCallee CodeGenLLVM::c_function(const std::string& name, llvm::Type* ret,
                                             const std::vector<llvm::Type*>& params) {
  auto* fty = llvm::FunctionType::get(ret, params, /*isVarArg=*/false);
  llvm::FunctionCallee callee = module_->getOrInsertFunction(name, fty);
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
  }
  return callee;
}

}  // namespace detail

std::unique_ptr<llvm::Module> codegen_llvm(const std::vector<ir::PrimFunc>& funcs,
                                           const LLVMTarget& target, llvm::TargetMachine* tm,
                                           llvm::LLVMContext* ctx) {
  detail::CodeGenLLVM cg(target, tm, ctx);
  for (const ir::PrimFunc& f : funcs) cg.add_function(f);
  return cg.finish();
}

}  // namespace kiln::codegen
