// The entry function of each PrimFunc: unpacks the KilnArg array, checks every argument against
// what the function was compiled for (count, null, rank, dtype, shape, compact strides), binds
// symbolic dimensions, exports the signature string, and calls the compute function — an
// outlined copy of the body whose buffer pointers are `noalias` parameters. Also the outlining
// machinery that parallel loops reuse.
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm_impl.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::codegen::detail {

using ir::DataType;
using ir::Expr;

namespace {

// Layout of KilnTensor (c_abi.h) on LP64 targets: data, shape, strides, ndim, dtype.
constexpr uint64_t kTensorData = 0;
constexpr uint64_t kTensorShape = 8;
constexpr uint64_t kTensorStrides = 16;
constexpr uint64_t kTensorNdim = 24;
constexpr uint64_t kTensorDTypeCode = 28;
constexpr uint64_t kTensorDTypeBits = 29;
constexpr uint64_t kTensorDTypeLanes = 30;
constexpr uint64_t kArgSize = 8;  // sizeof(KilnArg)

/// Collects variables in order of first use.
class VarCollector final : public ir::IRVisitor {
 public:
  std::vector<const ir::VarNode*> vars;
  void visit_(const ir::VarNode* op) override {
    if (seen_.insert(op).second) vars.push_back(op);
  }

 private:
  std::unordered_set<const ir::VarNode*> seen_;
};

bool valid_symbol(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

/// The runtime's (code, bits, lanes) of an IR element type; bool is uint1 (c_abi.h).
struct AbiDType {
  uint8_t code, bits;
  uint16_t lanes;
};

AbiDType abi_dtype(DataType t) {
  switch (t.code()) {
    case ir::TypeCode::kInt:
      return {0, static_cast<uint8_t>(t.bits()), static_cast<uint16_t>(t.lanes())};
    case ir::TypeCode::kUInt:
      return {1, static_cast<uint8_t>(t.bits()), static_cast<uint16_t>(t.lanes())};
    case ir::TypeCode::kFloat:
      return {2, static_cast<uint8_t>(t.bits()), static_cast<uint16_t>(t.lanes())};
    case ir::TypeCode::kBool:
      return {1, 1, static_cast<uint16_t>(t.lanes())};
    case ir::TypeCode::kHandle:
      break;
  }
  KILN_UNREACHABLE();
}

}  // namespace

std::vector<const ir::VarNode*> CodeGenLLVM::captured_vars(const ir::Stmt& body) {
  VarCollector c;
  c.visit(body);
  std::vector<const ir::VarNode*> out;
  for (const ir::VarNode* v : c.vars) {
    if (fs_.vars.count(v)) out.push_back(v);
  }
  return out;
}

llvm::Function* CodeGenLLVM::begin_outlined(const std::string& name,
                                            const std::vector<llvm::Type*>& extra,
                                            const std::vector<const ir::VarNode*>& captures,
                                            bool in_parallel, SavedState* saved) {
  std::vector<llvm::Type*> params{ptr_};
  params.insert(params.end(), extra.begin(), extra.end());
  std::vector<llvm::Value*> values;
  for (const ir::VarNode* v : captures) {
    values.push_back(fs_.vars.at(v));
    params.push_back(values.back()->getType());
  }
  auto* fty = llvm::FunctionType::get(i32_, params, false);
  auto* fn = llvm::Function::Create(fty, llvm::GlobalValue::InternalLinkage, name, module_.get());
  set_function_attributes(fn);
  fn->getArg(0)->setName("error");
  const size_t first = 1 + extra.size();
  for (size_t i = 0; i < captures.size(); ++i) {
    llvm::Argument* a = fn->getArg(static_cast<unsigned>(first + i));
    a->setName(captures[i]->name);
    if (!a->getType()->isPointerTy()) continue;
    // Distinct buffers do not overlap (the runtime's contract); a pointer passed twice might.
    if (std::count(values.begin(), values.end(), values[i]) == 1) {
      a->addAttr(llvm::Attribute::NoAlias);
    }
  }

  saved->fs = std::move(fs_);
  saved->ip = builder_.saveIP();
  fs_ = FunctionState{};
  fs_.function = fn;
  fs_.error = fn->getArg(0);
  fs_.in_parallel = in_parallel;
  for (size_t i = 0; i < captures.size(); ++i) {
    fs_.vars[captures[i]] = fn->getArg(static_cast<unsigned>(first + i));
    auto b = saved->fs.buffers.find(captures[i]);
    if (b != saved->fs.buffers.end()) fs_.buffers[captures[i]] = b->second;
  }
  builder_.SetInsertPoint(llvm::BasicBlock::Create(*ctx_, "entry", fn));
  return fn;
}

void CodeGenLLVM::end_outlined(SavedState* saved) {
  fs_ = std::move(saved->fs);
  builder_.restoreIP(saved->ip);
}

void CodeGenLLVM::add_function(const ir::PrimFunc& f) {
  KILN_USER_CHECK(valid_symbol(f.name))
      << "codegen llvm: function name '" << f.name
      << "' is not a valid symbol (letters, digits and '_', not starting with a digit)";
  KILN_USER_CHECK(module_->getNamedValue(f.name) == nullptr)
      << "codegen llvm: two functions are named '" << f.name << "'";
  KILN_USER_CHECK(f.body.defined()) << "codegen llvm: function '" << f.name << "' has no body";
  func_name_ = f.name;
  parallel_count_ = 0;
  outlined_count_ = 0;

  // The signature string the runtime checks calls against.
  std::string sig;
  for (const ir::Param& p : f.params) {
    if (p.is_tensor()) {
      sig += 't';
    } else {
      KILN_USER_CHECK(!p.var.dtype().is_handle())
          << "codegen llvm: parameter '" << p.var.name() << "' of function '" << f.name
          << "' is a handle without a buffer; pass tensors as buffers";
      KILN_USER_CHECK(p.var.dtype().is_scalar())
          << "codegen llvm: parameter '" << p.var.name() << "' of function '" << f.name
          << "' is a vector (" << p.var.dtype().str() << "); scalar parameters must be scalars";
      sig += p.var.dtype().is_float() ? 'f' : 'i';
    }
  }
  llvm::Constant* sig_data = llvm::ConstantDataArray::getString(*ctx_, sig, true);
  auto* sig_gv = new llvm::GlobalVariable(*module_, sig_data->getType(), true,
                                          llvm::GlobalValue::ExternalLinkage, sig_data,
                                          "__kiln_sig_" + f.name);
  sig_gv->setAlignment(llvm::Align(1));

  auto* fty = llvm::FunctionType::get(i32_, {ptr_, i32_, ptr_}, false);
  auto* entry =
      llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, f.name, module_.get());
  set_function_attributes(entry);
  entry->getArg(0)->setName("args");
  entry->getArg(1)->setName("num_args");
  entry->getArg(2)->setName("error");
  fs_ = FunctionState{};
  fs_.function = entry;
  fs_.error = entry->getArg(2);
  builder_.SetInsertPoint(llvm::BasicBlock::Create(*ctx_, "entry", entry));

  emit_argument_checks(f);

  // The compute function: the body with every value it uses as a parameter.
  const std::vector<const ir::VarNode*> captures = captured_vars(f.body);
  std::vector<llvm::Value*> call_args{fs_.error};
  for (const ir::VarNode* v : captures) call_args.push_back(fs_.vars.at(v));
  SavedState saved;
  llvm::Function* compute = begin_outlined(f.name + "_compute", {}, captures, false, &saved);
  emit(f.body);
  builder_.CreateRet(builder_.getInt32(0));
  end_outlined(&saved);
  builder_.CreateRet(builder_.CreateCall(compute, call_args));
  fs_ = FunctionState{};
}

void CodeGenLLVM::emit_argument_checks(const ir::PrimFunc& f) {
  llvm::Value* args = fs_.function->getArg(0);
  const size_t n = f.params.size();
  {
    std::ostringstream msg;
    msg << "expects " << n << (n == 1 ? " argument (" : " arguments (");
    for (size_t i = 0; i < n; ++i) {
      const ir::Param& p = f.params[i];
      msg << (i ? ", " : "") << (p.is_tensor() ? p.buffer->name : p.var.name());
    }
    msg << ")";
    check_or_fail(
        builder_.CreateICmpEQ(fs_.function->getArg(1), builder_.getInt32(static_cast<uint32_t>(n))),
        msg.str(), kArgumentError);
  }

  auto field = [&](llvm::Value* base, uint64_t offset, llvm::Type* t, const std::string& name) {
    llvm::Value* p = builder_.CreateConstInBoundsGEP1_64(i8_, base, offset);
    return builder_.CreateAlignedLoad(t, p, module_->getDataLayout().getABITypeAlign(t), name);
  };

  struct TensorArg {
    const ir::Param* param;
    std::string name;
    std::vector<llvm::Value*> dims;  // i64 shape entries
    llvm::Value* strides;
  };
  std::vector<TensorArg> tensors;
  // Where each shape variable was bound, for messages.
  std::unordered_map<const ir::VarNode*, std::string> bound_at;

  for (size_t i = 0; i < n; ++i) {
    const ir::Param& p = f.params[i];
    llvm::Value* slot = builder_.CreateConstInBoundsGEP1_64(i8_, args, i * kArgSize);
    if (!p.is_tensor()) {
      const DataType t = p.var.dtype();
      const std::string who = "argument '" + p.var.name() + "'";
      llvm::Value* v = nullptr;
      if (t.is_float()) {
        v = builder_.CreateAlignedLoad(builder_.getDoubleTy(), slot, llvm::Align(8), p.var.name());
        v = builder_.CreateFPCast(v, llvm_type(t));
      } else {
        llvm::Value* raw = builder_.CreateAlignedLoad(i64_, slot, llvm::Align(8), p.var.name());
        if (t.is_bool()) {
          v = builder_.CreateICmpNE(raw, builder_.getInt64(0));
        } else if (t.bits() < 64) {
          int64_t lo = 0, hi = 0;
          if (t.is_int()) {
            lo = -(int64_t{1} << (t.bits() - 1));
            hi = (int64_t{1} << (t.bits() - 1)) - 1;
          } else {
            hi = (int64_t{1} << t.bits()) - 1;
          }
          llvm::Value* fits =
              builder_.CreateAnd(builder_.CreateICmpSGE(raw, builder_.getInt64(lo)),
                                 builder_.CreateICmpSLE(raw, builder_.getInt64(hi)));
          check_or_fail(fits, who + " does not fit in " + t.str(), kArgumentError);
          v = builder_.CreateTrunc(raw, llvm_type(t));
        } else {
          v = raw;
        }
      }
      fs_.vars[p.var.get()] = v;
      continue;
    }

    const ir::Buffer& buf = *p.buffer;
    const std::string who = "argument '" + buf.name + "'";
    KILN_USER_CHECK(!buf.dtype.is_handle() && !buf.dtype.is_void())
        << "codegen llvm: buffer '" << buf.name << "' of function '" << f.name
        << "' has element type " << buf.dtype.str();
    llvm::Value* tensor =
        builder_.CreateAlignedLoad(ptr_, slot, llvm::Align(8), buf.name + ".tensor");
    check_or_fail(builder_.CreateIsNotNull(tensor), who + " is a null tensor", kArgumentError);

    const size_t ndim = buf.shape.size();
    llvm::Value* nd = field(tensor, kTensorNdim, i32_, "ndim");
    check_or_fail(
        builder_.CreateICmpEQ(nd, builder_.getInt32(static_cast<uint32_t>(ndim))),
        who + " must have " + std::to_string(ndim) + (ndim == 1 ? " dimension" : " dimensions"),
        kArgumentError);

    const AbiDType want = abi_dtype(buf.dtype);
    llvm::Value* code = field(tensor, kTensorDTypeCode, i8_, "dtype.code");
    llvm::Value* bits = field(tensor, kTensorDTypeBits, i8_, "dtype.bits");
    llvm::Value* lanes = field(tensor, kTensorDTypeLanes, i16_, "dtype.lanes");
    llvm::Value* dtype_ok = builder_.CreateAnd(
        builder_.CreateAnd(builder_.CreateICmpEQ(code, builder_.getInt8(want.code)),
                           builder_.CreateICmpEQ(bits, builder_.getInt8(want.bits))),
        builder_.CreateICmpEQ(lanes, builder_.getInt16(want.lanes)));
    check_or_fail(dtype_ok, who + " must have dtype " + buf.dtype.str(), kArgumentError);

    llvm::Value* data = field(tensor, kTensorData, ptr_, buf.name + ".data");
    fs_.vars[buf.data.get()] = data;
    fs_.vars[p.var.get()] = data;
    // Only element alignment is assumed: callers may pass views into larger arrays.
    fs_.buffers[buf.data.get()].alignment = std::max(1, buf.dtype.bytes()) * buf.dtype.lanes();
    fs_.buffers[p.var.get()] = fs_.buffers[buf.data.get()];

    TensorArg ta{&p, who, {}, nullptr};
    if (ndim > 0) {
      llvm::Value* shape = field(tensor, kTensorShape, ptr_, "shape");
      for (size_t d = 0; d < ndim; ++d) {
        llvm::Value* sp = builder_.CreateConstInBoundsGEP1_64(i64_, shape, d);
        ta.dims.push_back(builder_.CreateAlignedLoad(i64_, sp, llvm::Align(8),
                                                     buf.name + ".shape" + std::to_string(d)));
      }
      ta.strides = field(tensor, kTensorStrides, ptr_, "strides");
    }
    tensors.push_back(std::move(ta));
  }

  // Pass 1: a dimension that is a not-yet-bound variable binds it.
  std::vector<std::vector<bool>> binds(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    const ir::Buffer& buf = *tensors[t].param->buffer;
    binds[t].assign(buf.shape.size(), false);
    for (size_t d = 0; d < buf.shape.size(); ++d) {
      auto* v = buf.shape[d].as<ir::VarNode>();
      if (v == nullptr || fs_.vars.count(v)) continue;
      const DataType vt = v->dtype;
      KILN_USER_CHECK(vt.is_int() || vt.is_uint())
          << "codegen llvm: shape variable '" << v->name << "' of buffer '" << buf.name
          << "' must be an integer, got " << vt.str();
      const std::string where = tensors[t].name + " dimension " + std::to_string(d);
      llvm::Value* dim = tensors[t].dims[d];
      llvm::Value* value = dim;
      if (vt.bits() < 64) {
        const int64_t hi =
            vt.is_int() ? (int64_t{1} << (vt.bits() - 1)) - 1 : (int64_t{1} << vt.bits()) - 1;
        check_or_fail(builder_.CreateICmpSLE(dim, builder_.getInt64(hi)),
                      where + " (" + v->name + ") does not fit in " + vt.str(), kArgumentError);
        value = builder_.CreateTrunc(dim, llvm_type(vt), v->name);
      }
      fs_.vars[v] = value;
      bound_at[v] = where;
      binds[t][d] = true;
    }
  }

  // Pass 2: every other dimension must equal its expression.
  for (size_t t = 0; t < tensors.size(); ++t) {
    const ir::Buffer& buf = *tensors[t].param->buffer;
    for (size_t d = 0; d < buf.shape.size(); ++d) {
      if (binds[t][d]) continue;
      const Expr& e = buf.shape[d];
      std::vector<std::string> notes;
      bool unbound = false;
      std::string unbound_name;
      ir::post_order_visit(e, [&](const ir::Object* o) {
        auto* ex = dynamic_cast<const ir::ExprNode*>(o);
        if (ex == nullptr || ex->kind != ir::ExprKind::kVar) return;
        auto* v = static_cast<const ir::VarNode*>(ex);
        if (!fs_.vars.count(v)) {
          unbound = true;
          unbound_name = v->name;
        } else if (bound_at.count(v)) {
          notes.push_back(v->name + " is " + bound_at[v]);
        }
      });
      KILN_USER_CHECK(!unbound) << "codegen llvm: dimension " << d << " of buffer '" << buf.name
                                << "' in function '" << f.name << "' uses variable '"
                                << unbound_name << "', which no argument binds";
      std::string msg = tensors[t].name + " dimension " + std::to_string(d);
      if (auto c = ir::as_const_int(e)) {
        msg += " must be " + std::to_string(*c);
      } else {
        msg += " must equal " + ir::to_string(e);
        if (!notes.empty()) {
          msg += " (";
          for (size_t k = 0; k < notes.size(); ++k) msg += (k ? ", " : "") + notes[k];
          msg += ")";
        }
      }
      llvm::Value* want = builder_.CreateIntCast(emit(e), i64_, e.dtype().is_int());
      check_or_fail(builder_.CreateICmpEQ(tensors[t].dims[d], want), msg, kArgumentError);
    }
  }

  // Strides: NULL, or those of a compact row-major array (a dimension of extent 1 may have any).
  for (const TensorArg& ta : tensors) {
    if (ta.dims.empty()) continue;
    llvm::BasicBlock* check_bb = llvm::BasicBlock::Create(*ctx_, "strides.check", fs_.function);
    llvm::BasicBlock* done_bb = llvm::BasicBlock::Create(*ctx_, "strides.done", fs_.function);
    builder_.CreateCondBr(builder_.CreateIsNull(ta.strides), done_bb, check_bb);
    builder_.SetInsertPoint(check_bb);
    llvm::Value* expected = builder_.getInt64(1);
    llvm::Value* ok = builder_.getTrue();
    for (size_t d = ta.dims.size(); d-- > 0;) {
      llvm::Value* sp = builder_.CreateConstInBoundsGEP1_64(i64_, ta.strides, d);
      llvm::Value* s = builder_.CreateAlignedLoad(i64_, sp, llvm::Align(8));
      llvm::Value* good =
          builder_.CreateOr(builder_.CreateICmpEQ(s, expected),
                            builder_.CreateICmpEQ(ta.dims[d], builder_.getInt64(1)));
      ok = builder_.CreateAnd(ok, good);
      expected = builder_.CreateMul(expected, ta.dims[d]);
    }
    check_or_fail(ok, ta.name + " must be compact row-major (its strides are not)", kArgumentError);
    builder_.CreateBr(done_bb);
    builder_.SetInsertPoint(done_bb);
  }
}

}  // namespace kiln::codegen::detail
