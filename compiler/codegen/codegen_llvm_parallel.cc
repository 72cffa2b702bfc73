// Parallel loops. `for (i = min; i < min + extent; ++i) body` with ForKind::kParallel becomes
//
//   struct Closure { const char** error; T min; T extent; <captured values, in order of use> };
//   int32_t f_parallel_k(int32_t task, int32_t num_tasks, void* closure)   // a KilnParallelBody
//     { unpack; return f_parallel_k_impl(error, task, num_tasks, min, extent, captured...); }
//   int32_t f_parallel_k_impl(...)  // runs its contiguous chunk of [min, min + extent)
//
// The loop itself fills a Closure on the stack and calls `__kiln_parallel_launch(body, &closure)`,
// or the body directly as one task when the runtime has not set that pointer. The captured values
// are every variable the body uses that is bound outside it (buffer pointers, shape variables,
// enclosing loop variables, let values); the impl takes them as parameters so that buffer
// pointers are `noalias` again. Chunk k of n is [k * c, min((k + 1) * c, extent)) with
// c = ceil(extent / n). A parallel loop inside a parallel body runs serially. A failing task
// stores its message in *error (atomically) and returns non-zero; the launch returns the first
// such code and the enclosing function returns it too.
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>

#include <algorithm>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm_impl.h"

namespace kiln::codegen::detail {

llvm::GlobalVariable* CodeGenLLVM::parallel_launch_global() {
  if (parallel_launch_ == nullptr) {
    parallel_launch_ = new llvm::GlobalVariable(
        *module_, ptr_, /*isConstant=*/false, llvm::GlobalValue::ExternalLinkage,
        llvm::ConstantPointerNull::get(ptr_), "__kiln_parallel_launch");
    parallel_launch_->setAlignment(llvm::Align(8));
  }
  return parallel_launch_;
}

void CodeGenLLVM::emit_parallel_for(const ir::ForNode* op) {
  const ir::DataType vt = op->loop_var.dtype();
  KILN_USER_CHECK(vt.is_int() && vt.is_scalar())
      << "codegen llvm: loop variable '" << op->loop_var.name() << "' of function '" << func_name_
      << "' must be a signed integer, got " << vt.str();
  const std::string name = func_name_ + "_parallel_" + std::to_string(parallel_count_++);
  llvm::Type* t = llvm_type(vt);
  llvm::Value* min = builder_.CreateIntCast(emit(op->min), t, op->min.dtype().is_int());
  llvm::Value* extent = builder_.CreateIntCast(emit(op->extent), t, op->extent.dtype().is_int());
  std::vector<const ir::VarNode*> captures = captured_vars(op->body);
  captures.erase(std::remove(captures.begin(), captures.end(), op->loop_var.get()), captures.end());

  // The impl: runs one chunk with the captured values as parameters.
  SavedState saved;
  llvm::Function* impl = begin_outlined(name + "_impl", {i32_, i32_, t, t}, captures,
                                        /*in_parallel=*/true, &saved);
  {
    llvm::Value* task = builder_.CreateSExt(impl->getArg(1), i64_);
    llvm::Value* ntasks = builder_.CreateSExt(impl->getArg(2), i64_);
    llvm::Value* lo = impl->getArg(3);
    llvm::Value* n = builder_.CreateSExt(impl->getArg(4), i64_);
    n = builder_.CreateSelect(builder_.CreateICmpSGT(n, builder_.getInt64(0)), n,
                              builder_.getInt64(0));
    ntasks = builder_.CreateSelect(builder_.CreateICmpSGT(ntasks, builder_.getInt64(0)), ntasks,
                                   builder_.getInt64(1));
    llvm::Value* chunk = builder_.CreateSDiv(
        builder_.CreateAdd(n, builder_.CreateSub(ntasks, builder_.getInt64(1))), ntasks);
    auto smin = [&](llvm::Value* a, llvm::Value* b) {
      return builder_.CreateSelect(builder_.CreateICmpSLT(a, b), a, b);
    };
    llvm::Value* begin = smin(builder_.CreateMul(task, chunk), n);
    llvm::Value* end = smin(builder_.CreateAdd(begin, chunk), n);
    begin = builder_.CreateNSWAdd(lo, builder_.CreateTrunc(begin, t));
    end = builder_.CreateNSWAdd(lo, builder_.CreateTrunc(end, t));
    emit_serial_loop(op->loop_var, begin, end, op->body, ir::ForKind::kSerial);
    builder_.CreateRet(builder_.getInt32(0));
  }
  end_outlined(&saved);

  // The closure type and the KilnParallelBody that unpacks it.
  std::vector<llvm::Type*> fields{ptr_, t, t};
  std::vector<llvm::Value*> values{fs_.error, min, extent};
  for (const ir::VarNode* v : captures) {
    values.push_back(fs_.vars.at(v));
    fields.push_back(values.back()->getType());
  }
  auto* closure_type = llvm::StructType::get(*ctx_, fields);
  auto* body_type = llvm::FunctionType::get(i32_, {i32_, i32_, ptr_}, false);
  auto* body =
      llvm::Function::Create(body_type, llvm::GlobalValue::InternalLinkage, name, module_.get());
  set_function_attributes(body);
  {
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(*ctx_, "entry", body));
    llvm::Value* closure = body->getArg(2);
    std::vector<llvm::Value*> args;
    for (unsigned i = 0; i < fields.size(); ++i) {
      llvm::Value* p = b.CreateStructGEP(closure_type, closure, i);
      args.push_back(b.CreateLoad(fields[i], p));
      if (i == 0) {
        args.push_back(body->getArg(0));
        args.push_back(body->getArg(1));
      }
    }
    b.CreateRet(b.CreateCall(impl, args));
  }

  // The launch, from the current function.
  llvm::Value* closure = entry_alloca(closure_type, nullptr, 8, name + ".closure");
  for (unsigned i = 0; i < fields.size(); ++i) {
    builder_.CreateStore(values[i], builder_.CreateStructGEP(closure_type, closure, i));
  }
  llvm::Value* launch =
      builder_.CreateAlignedLoad(ptr_, parallel_launch_global(), llvm::Align(8), "launch");
  llvm::BasicBlock* pool_bb = llvm::BasicBlock::Create(*ctx_, "parallel.pool", fs_.function);
  llvm::BasicBlock* inline_bb = llvm::BasicBlock::Create(*ctx_, "parallel.inline", fs_.function);
  llvm::BasicBlock* join_bb = llvm::BasicBlock::Create(*ctx_, "parallel.join", fs_.function);
  builder_.CreateCondBr(builder_.CreateIsNull(launch), inline_bb, pool_bb);
  builder_.SetInsertPoint(pool_bb);
  auto* launch_type = llvm::FunctionType::get(i32_, {ptr_, ptr_}, false);
  llvm::Value* rc_pool = builder_.CreateCall(launch_type, launch, {body, closure});
  builder_.CreateBr(join_bb);
  builder_.SetInsertPoint(inline_bb);
  llvm::Value* rc_inline =
      builder_.CreateCall(body, {builder_.getInt32(0), builder_.getInt32(1), closure});
  builder_.CreateBr(join_bb);
  builder_.SetInsertPoint(join_bb);
  llvm::PHINode* rc = builder_.CreatePHI(i32_, 2, "rc");
  rc->addIncoming(rc_pool, pool_bb);
  rc->addIncoming(rc_inline, inline_bb);

  llvm::BasicBlock* ok_bb = llvm::BasicBlock::Create(*ctx_, "parallel.ok", fs_.function);
  llvm::BasicBlock* fail_bb = llvm::BasicBlock::Create(*ctx_, "parallel.fail", fs_.function);
  builder_.CreateCondBr(builder_.CreateICmpEQ(rc, builder_.getInt32(0)), ok_bb, fail_bb);
  builder_.SetInsertPoint(fail_bb);
  emit_error_return(rc);  // the failing task stored the message
  builder_.SetInsertPoint(ok_bb);
}

}  // namespace kiln::codegen::detail
