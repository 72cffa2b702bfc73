// Memory in generated code: loads and stores (scalar, contiguous vectors from stride-1 Ramp
// indices, broadcast indices, interleaved contiguous reads for an index (l % k) * s + b + l / k,
// gathers / scatters for any other vector index, masked forms for predicates) and Allocate
// (entry-block allocas for small constant sizes, aligned heap memory otherwise). Bool elements
// are bytes in memory and i1 in registers.
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm_impl.h"
#include "compiler/ir/analysis.h"
#include "compiler/ir/op.h"

namespace kiln::codegen::detail {

using ir::DataType;
using ir::Expr;
using ir::ExprKind;

namespace {

/// Widens an index to the pointer width the way its type says (unsigned ones zero-extend).
llvm::Value* index_value(llvm::IRBuilder<>& b, llvm::Value* v, DataType t) {
  if (t.is_uint() && t.bits() < 64) {
    llvm::Type* ty = b.getInt64Ty();
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType())) {
      ty = llvm::FixedVectorType::get(ty, vt->getNumElements());
    }
    return b.CreateZExt(v, ty);
  }
  return v;
}

/// The terms of a sum x + y + ...
void sum_terms(const Expr& e, std::vector<Expr>* out) {
  if (const auto* a = e.as<ir::AddNode>()) {
    sum_terms(a->a, out);
    sum_terms(a->b, out);
  } else {
    out->push_back(e);
  }
}

/// Whether e is ramp(0, 1, lanes), the lane number.
bool is_lane(const Expr& e, int lanes) {
  const auto* r = e.as<ir::RampNode>();
  return r != nullptr && r->lanes == lanes && ir::is_const_int(r->base, 0) &&
         ir::is_const_int(r->stride, 1);
}

/// k where e is a broadcast of the constant k.
std::optional<int64_t> broadcast_const(const Expr& e) {
  const auto* b = e.as<ir::BroadcastNode>();
  return b == nullptr ? std::nullopt : ir::as_const_int(b->value);
}

/// An interleaving index: lane l reads (l % k) * stride + base + l / k, the form NCHW -> NCHW[k]c
/// takes with k channels a block (16 pixels of each of the 3 colours, interleaved). Gives k and
/// the scalar stride and base; false for any other form.
bool interleaved_index(const Expr& index, int lanes, int64_t* k, Expr* stride, Expr* base) {
  std::vector<Expr> terms;
  sum_terms(index, &terms);
  std::optional<int64_t> k_mod, k_div;
  for (const Expr& t : terms) {
    if (const auto* m = t.as<ir::MulNode>()) {
      for (auto [mod, s] : {std::pair{m->a, m->b}, std::pair{m->b, m->a}}) {
        const auto* fm = mod.as<ir::FloorModNode>();
        const auto* sb = s.as<ir::BroadcastNode>();
        if (fm != nullptr && sb != nullptr && is_lane(fm->a, lanes) && !k_mod) {
          k_mod = broadcast_const(fm->b);
          *stride = sb->value;
          break;
        }
      }
      if (!k_mod) return false;
    } else if (const auto* fd = t.as<ir::FloorDivNode>(); fd != nullptr && is_lane(fd->a, lanes)) {
      if (k_div) return false;
      k_div = broadcast_const(fd->b);
    } else if (const auto* b = t.as<ir::BroadcastNode>()) {
      *base = base->defined() ? *base + b->value : b->value;
    } else {
      return false;
    }
  }
  if (!k_mod || !k_div || *k_mod != *k_div || *k_mod < 2 || lanes % *k_mod != 0) return false;
  *k = *k_mod;
  if (!base->defined()) *base = ir::make_zero(stride->dtype());
  return true;
}

}  // namespace

uint64_t CodeGenLLVM::access_alignment(const ir::VarNode* buffer, const Expr& index,
                                       DataType elem) {
  const int64_t elem_bytes = std::max(1, elem.bytes());
  auto it = fs_.buffers.find(buffer);
  const int64_t base =
      it == fs_.buffers.end() ? elem_bytes : std::max(elem_bytes, it->second.alignment);
  const int64_t offset = ir::known_multiple(index) * elem_bytes;
  const int64_t offset_align = offset & -offset;  // lowest set bit
  return static_cast<uint64_t>(std::max<int64_t>(1, std::min(base, offset_align)));
}

llvm::Value* CodeGenLLVM::emit_interleaved_load(const ir::LoadNode* op) {
  const int lanes = op->dtype.lanes();
  int64_t k = 0;
  Expr stride, start;
  if (!interleaved_index(op->index, lanes, &k, &stride, &start)) return nullptr;
  // k contiguous reads of lanes / k elements, one per lane % k, interleaved: where the gather
  // read every element apart.
  const DataType elem = op->dtype.element_of();
  llvm::Type* mem_elem = memory_type(elem);
  const int n = lanes / static_cast<int>(k);
  llvm::Type* part_type = llvm::FixedVectorType::get(mem_elem, n);
  const llvm::Align elem_align(std::max(1, elem.bytes()));
  llvm::Value* buffer = lookup_var(op->buffer_var.get());
  llvm::Value* s = emit(stride);
  llvm::Value* at = emit(start);
  llvm::Value* result = nullptr;
  for (int c = 0; c < k; ++c) {
    if (c > 0) at = builder_.CreateAdd(at, s);
    llvm::Value* part = builder_.CreateAlignedLoad(
        part_type,
        builder_.CreateInBoundsGEP(mem_elem, buffer, index_value(builder_, at, stride.dtype())),
        elem_align);
    // Widened to all lanes, lane l = m * k + c taking the part's element m, then merged.
    std::vector<int> widen(static_cast<size_t>(lanes), -1), merge(static_cast<size_t>(lanes));
    for (int l = 0; l < lanes; ++l) {
      widen[static_cast<size_t>(l)] = l % k == c ? l / static_cast<int>(k) : -1;
      merge[static_cast<size_t>(l)] = l % k == c ? lanes + l : l;
    }
    llvm::Value* wide = builder_.CreateShuffleVector(part, widen);
    result = c == 0 ? wide : builder_.CreateShuffleVector(result, wide, merge);
  }
  return result;
}

llvm::Value* CodeGenLLVM::entry_alloca(llvm::Type* t, llvm::Value* count, int64_t align,
                                       const std::string& name) {
  llvm::BasicBlock& entry = fs_.function->getEntryBlock();
  llvm::IRBuilder<> b(&entry, entry.getFirstInsertionPt());
  llvm::AllocaInst* a = b.CreateAlloca(t, count, name);
  a->setAlignment(llvm::Align(static_cast<uint64_t>(align)));
  return a;
}

llvm::Value* CodeGenLLVM::emit_load(const ir::LoadNode* op) {
  const DataType t = op->dtype;
  const int lanes = t.lanes();
  const DataType elem = t.element_of();
  llvm::Type* mem_elem = memory_type(elem);
  llvm::Type* mem_type = memory_type(t);
  llvm::Value* base = lookup_var(op->buffer_var.get());
  const bool predicated = op->predicate.defined() && !ir::is_const_int(op->predicate, 1);
  KILN_ICHECK(op->index.dtype().lanes() == lanes || op->index.dtype().lanes() == 1)
      << "load of " << t.str() << " with an index of " << op->index.dtype().str();
  const llvm::Align align(access_alignment(op->buffer_var.get(), op->index, elem));
  llvm::Value* result = nullptr;

  auto* ramp = op->index.as<ir::RampNode>();
  auto* bcast = op->index.as<ir::BroadcastNode>();
  if (lanes == 1 && !predicated) {
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(op->index), op->index.dtype()));
    result = builder_.CreateAlignedLoad(mem_elem, p, align);
  } else if (lanes == 1) {
    // A scalar predicated load: read only when the predicate holds, else zero.
    llvm::Value* pred = emit(op->predicate);
    llvm::BasicBlock* from = builder_.GetInsertBlock();
    llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "load.then", fs_.function);
    llvm::BasicBlock* end_bb = llvm::BasicBlock::Create(*ctx_, "load.end", fs_.function);
    builder_.CreateCondBr(pred, then_bb, end_bb);
    builder_.SetInsertPoint(then_bb);
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(op->index), op->index.dtype()));
    llvm::Value* v = builder_.CreateAlignedLoad(mem_elem, p, align);
    llvm::BasicBlock* then_end = builder_.GetInsertBlock();
    builder_.CreateBr(end_bb);
    builder_.SetInsertPoint(end_bb);
    llvm::PHINode* phi = builder_.CreatePHI(mem_elem, 2);
    phi->addIncoming(v, then_end);
    phi->addIncoming(llvm::Constant::getNullValue(mem_elem), from);
    result = phi;
  } else if (ramp != nullptr && ramp->lanes == lanes && ir::is_const_int(ramp->stride, 1)) {
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(ramp->base), ramp->base.dtype()));
    if (predicated) {
      result = builder_.CreateMaskedLoad(mem_type, p, align, emit(op->predicate),
                                         llvm::Constant::getNullValue(mem_type));
    } else {
      result = builder_.CreateAlignedLoad(mem_type, p, align);
    }
  } else if (ramp != nullptr && ramp->lanes == lanes && !predicated &&
             ir::is_const_int(ramp->stride, 2)) {
    // Stride 2 (the even or odd elements of bf16 pairs, a stride-2 window's columns): one
    // contiguous read of the span, no further than its last element, and a shuffle, where a
    // gather reads each.
    const int s = 2;
    llvm::Type* span = llvm::FixedVectorType::get(mem_elem, (lanes - 1) * s + 1);
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(ramp->base), ramp->base.dtype()));
    llvm::Value* all = builder_.CreateAlignedLoad(span, p, align);
    std::vector<int> pick(static_cast<size_t>(lanes));
    for (int l = 0; l < lanes; ++l) pick[static_cast<size_t>(l)] = l * s;
    result = builder_.CreateShuffleVector(all, pick);
  } else if (bcast != nullptr && !predicated) {
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(bcast->value), bcast->value.dtype()));
    result = splat(builder_.CreateAlignedLoad(mem_elem, p, align), lanes);
  } else if (llvm::Value* v = predicated ? nullptr : emit_interleaved_load(op)) {
    result = v;
  } else {
    // Any other vector index: a gather (LLVM scalarizes it where the target has none).
    llvm::Value* idx = emit(op->index);
    if (op->index.dtype().lanes() == 1) idx = splat(idx, lanes);
    llvm::Value* ptrs =
        builder_.CreateInBoundsGEP(mem_elem, base, index_value(builder_, idx, op->index.dtype()));
    llvm::Value* mask =
        predicated ? emit(op->predicate)
                   : llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(i1_, lanes));
    const llvm::Align elem_align(std::max(1, elem.bytes()));
    result = builder_.CreateMaskedGather(mem_type, ptrs, elem_align, mask,
                                         llvm::Constant::getNullValue(mem_type));
  }
  if (t.is_bool()) result = builder_.CreateICmpNE(result, llvm::Constant::getNullValue(mem_type));
  return result;
}

void CodeGenLLVM::emit_store(const ir::StoreNode* op) {
  const DataType t = op->value.dtype();
  const int lanes = t.lanes();
  const DataType elem = t.element_of();
  llvm::Type* mem_elem = memory_type(elem);
  llvm::Type* mem_type = memory_type(t);
  llvm::Value* base = lookup_var(op->buffer_var.get());
  llvm::Value* value = emit(op->value);
  if (t.is_bool()) value = builder_.CreateZExt(value, mem_type);
  const bool predicated = op->predicate.defined() && !ir::is_const_int(op->predicate, 1);
  KILN_ICHECK(op->index.dtype().lanes() == lanes || op->index.dtype().lanes() == 1)
      << "store of " << t.str() << " with an index of " << op->index.dtype().str();
  const llvm::Align align(access_alignment(op->buffer_var.get(), op->index, elem));
  auto* ramp = op->index.as<ir::RampNode>();

  if (lanes == 1) {
    llvm::BasicBlock* end_bb = nullptr;
    if (predicated) {
      llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(*ctx_, "store.then", fs_.function);
      end_bb = llvm::BasicBlock::Create(*ctx_, "store.end", fs_.function);
      builder_.CreateCondBr(emit(op->predicate), then_bb, end_bb);
      builder_.SetInsertPoint(then_bb);
    }
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(op->index), op->index.dtype()));
    builder_.CreateAlignedStore(value, p, align);
    if (end_bb != nullptr) {
      builder_.CreateBr(end_bb);
      builder_.SetInsertPoint(end_bb);
    }
  } else if (ramp != nullptr && ramp->lanes == lanes && ir::is_const_int(ramp->stride, 1)) {
    llvm::Value* p = builder_.CreateInBoundsGEP(
        mem_elem, base, index_value(builder_, emit(ramp->base), ramp->base.dtype()));
    if (predicated) {
      builder_.CreateMaskedStore(value, p, align, emit(op->predicate));
    } else {
      builder_.CreateAlignedStore(value, p, align);
    }
  } else {
    // A scatter (lanes with equal addresses are written in lane order).
    llvm::Value* idx = emit(op->index);
    if (op->index.dtype().lanes() == 1) idx = splat(idx, lanes);
    llvm::Value* ptrs =
        builder_.CreateInBoundsGEP(mem_elem, base, index_value(builder_, idx, op->index.dtype()));
    llvm::Value* mask =
        predicated ? emit(op->predicate)
                   : llvm::Constant::getAllOnesValue(llvm::FixedVectorType::get(i1_, lanes));
    builder_.CreateMaskedScatter(value, ptrs, llvm::Align(std::max(1, elem.bytes())), mask);
  }
}

void CodeGenLLVM::emit_allocate(const ir::AllocateNode* op) {
  if (target_.is_nvptx) return emit_device_allocate(op);
  llvm::Type* elem = memory_type(op->dtype);
  const int64_t elem_bytes = std::max(1, op->dtype.bytes()) * op->dtype.lanes();
  std::optional<int64_t> count = 1;
  for (const Expr& e : op->extents) {
    auto c = ir::as_const_int(e);
    if (!c) {
      count.reset();
      break;
    }
    KILN_USER_CHECK(*c >= 0) << "codegen llvm: allocation '" << op->buffer_var.name()
                             << "' in function '" << func_name_ << "' has a negative extent " << *c;
    *count *= *c;
  }
  const ir::VarNode* var = op->buffer_var.get();
  llvm::Value* p = nullptr;
  llvm::Value* heap = nullptr;
  if (count && *count * elem_bytes <= kMaxAllocaBytes &&
      fs_.stack_bytes + *count * elem_bytes <= kMaxStackBytes) {
    // In the entry block, so that SROA / mem2reg can turn a small tile into registers.
    const int64_t bytes = *count * elem_bytes;
    fs_.stack_bytes += bytes;
    p = entry_alloca(
        llvm::ArrayType::get(elem, static_cast<uint64_t>(std::max<int64_t>(1, *count))), nullptr,
        kAllocAlignment, op->buffer_var.name());
  } else {
    llvm::Value* n = llvm::ConstantInt::get(i64_, static_cast<uint64_t>(elem_bytes));
    for (const Expr& e : op->extents) {
      n = builder_.CreateMul(n, builder_.CreateIntCast(emit(e), i64_, e.dtype().is_int()));
    }
    // aligned_alloc wants a multiple of the alignment; never ask for zero bytes.
    llvm::Value* rounded =
        builder_.CreateAnd(builder_.CreateAdd(n, builder_.getInt64(kAllocAlignment - 1)),
                           builder_.getInt64(~(kAllocAlignment - 1)));
    rounded = builder_.CreateSelect(builder_.CreateICmpSGT(rounded, builder_.getInt64(0)), rounded,
                                    builder_.getInt64(kAllocAlignment));
    heap =
        builder_.CreateCall(workspace_function(/*alloc=*/true), {rounded}, op->buffer_var.name());
    check_or_fail(builder_.CreateIsNotNull(heap),
                  "out of memory allocating '" + op->buffer_var.name() + "'", kOutOfMemory);
    p = heap;
    fs_.heap.push_back(heap);
  }
  auto old_var = fs_.vars.find(var);
  llvm::Value* saved = old_var == fs_.vars.end() ? nullptr : old_var->second;
  fs_.vars[var] = p;
  fs_.buffers[var].alignment = kAllocAlignment;
  emit(op->body);
  if (saved != nullptr) {
    fs_.vars[var] = saved;
  } else {
    fs_.vars.erase(var);
  }
  if (heap != nullptr) {
    fs_.heap.pop_back();
    builder_.CreateCall(workspace_function(/*alloc=*/false), {heap});
  }
}

llvm::Function* CodeGenLLVM::workspace_function(bool alloc) {
  llvm::Function*& f = alloc ? workspace_alloc_ : workspace_free_;
  if (f != nullptr) return f;
  // The runtime's pointer, exported for the loader to set.
  const char* pointer_name = alloc ? "__kiln_workspace_alloc" : "__kiln_workspace_free";
  llvm::GlobalVariable* pointer = module_->getGlobalVariable(pointer_name);
  if (pointer == nullptr) {
    pointer = new llvm::GlobalVariable(*module_, ptr_, /*isConstant=*/false,
                                       llvm::GlobalValue::ExternalLinkage,
                                       llvm::ConstantPointerNull::get(ptr_), pointer_name);
    pointer->setAlignment(llvm::Align(8));
  }
  llvm::Type* ret = alloc ? ptr_ : builder_.getVoidTy();
  llvm::Type* param = alloc ? static_cast<llvm::Type*>(i64_) : ptr_;
  auto* fty = llvm::FunctionType::get(ret, {param}, /*isVarArg=*/false);
  f = llvm::Function::Create(fty, llvm::GlobalValue::InternalLinkage,
                             alloc ? "kiln.workspace_alloc" : "kiln.workspace_free", *module_);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  // A fresh block, as aligned_alloc's: alias analysis must know it aliases nothing else, and the
  // call must stay a call to keep that (inlined, the indirect call's result would not say so;
  // LSTM kernels with hundreds of stages then took LLVM 20x as long).
  f->addFnAttr(llvm::Attribute::NoInline);
  if (alloc) f->addRetAttr(llvm::Attribute::NoAlias);
  llvm::IRBuilder<> b(*ctx_);
  auto* entry = llvm::BasicBlock::Create(*ctx_, "entry", f);
  auto* runtime = llvm::BasicBlock::Create(*ctx_, "runtime", f);
  auto* system = llvm::BasicBlock::Create(*ctx_, "system", f);
  b.SetInsertPoint(entry);
  llvm::Value* fn = b.CreateAlignedLoad(ptr_, pointer, llvm::Align(8), "fn");
  b.CreateCondBr(b.CreateIsNull(fn), system, runtime);
  llvm::Value* arg = f->getArg(0);
  b.SetInsertPoint(runtime);
  llvm::Value* r = b.CreateCall(fty, fn, {arg});
  alloc ? b.CreateRet(r) : b.CreateRetVoid();
  b.SetInsertPoint(system);
  if (alloc) {
    llvm::FunctionCallee aligned_alloc = c_function("aligned_alloc", ptr_, {i64_, i64_});
    b.CreateRet(b.CreateCall(aligned_alloc, {b.getInt64(kAllocAlignment), arg}));
  } else {
    b.CreateCall(c_function("free", b.getVoidTy(), {ptr_}), {arg});
    b.CreateRetVoid();
  }
  return f;
}

}  // namespace kiln::codegen::detail
