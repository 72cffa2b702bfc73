// GPU kernels through LLVM's NVPTX back-end: the kernel-specific parts of the translator
// (kernel signature and annotations, thread indices, shared / local memory, barriers, libdevice
// math) and nvptx_compile, which links libdevice, optimizes and prints PTX.
#include "compiler/codegen/codegen_nvptx.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm.h"
#include "compiler/codegen/codegen_llvm_impl.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace kiln::codegen {
namespace detail {
namespace {

constexpr std::array<std::pair<std::string_view, llvm::Intrinsic::ID>, 6> kThreadIndex = {{
    {"threadIdx.x", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x},
    {"threadIdx.y", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_y},
    {"threadIdx.z", llvm::Intrinsic::nvvm_read_ptx_sreg_tid_z},
    {"blockIdx.x", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x},
    {"blockIdx.y", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y},
    {"blockIdx.z", llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z},
}};

/// Math NVPTX selects natively (or, for float16, by promotion): the CPU's LLVM intrinsics.
constexpr std::array<std::string_view, 6> kNativeMath = {"sqrt", "fabs",  "floor",
                                                         "ceil", "trunc", "fma"};
/// Math computed by libdevice's __nv_<name>[f], with its arity.
constexpr std::array<std::pair<std::string_view, int>, 22> kLibdeviceMath = {{
    {"exp", 1},   {"exp2", 1},      {"log", 1},   {"log2", 1},    {"log10", 1}, {"sin", 1},
    {"cos", 1},   {"tan", 1},       {"asin", 1},  {"acos", 1},    {"atan", 1},  {"sinh", 1},
    {"cosh", 1},  {"tanh", 1},      {"asinh", 1}, {"acosh", 1},   {"atanh", 1}, {"erf", 1},
    {"round", 1}, {"roundeven", 1}, {"pow", 2},   {"sigmoid", 1},
}};

/// Alignment assumed of tensor parameters (as the CUDA C printer assumes for float4 accesses).
constexpr int64_t kDeviceBufferAlignment = 16;

}  // namespace

void CodeGenLLVM::add_kernel(const ir::PrimFunc& f) {
  static const std::regex kIdentifier("[A-Za-z_][A-Za-z0-9_]*");
  KILN_USER_CHECK(std::regex_match(f.name, kIdentifier))
      << "codegen nvptx: kernel name '" << f.name << "' is not an identifier";
  KILN_USER_CHECK(module_->getNamedValue(f.name) == nullptr)
      << "codegen nvptx: two kernels are named '" << f.name << "'";
  KILN_USER_CHECK(f.body.defined()) << "codegen nvptx: kernel '" << f.name << "' has no body";
  func_name_ = f.name;
  thread_extents_.clear();

  std::vector<llvm::Type*> types;
  for (const ir::Param& p : f.params) {
    KILN_USER_CHECK(p.is_tensor() || p.var.dtype().is_scalar())
        << "codegen nvptx: parameter '" << p.var.name() << "' of kernel '" << f.name
        << "' is a vector (" << p.var.dtype().str() << ")";
    types.push_back(p.is_tensor() ? ptr_ : llvm_type(p.var.dtype()));
  }
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(builder_.getVoidTy(), types, false),
                                    llvm::GlobalValue::ExternalLinkage, f.name, module_.get());
  set_function_attributes(fn);
  fs_ = FunctionState{};
  fs_.function = fn;
  for (size_t i = 0; i < f.params.size(); ++i) {
    llvm::Argument* arg = fn->getArg(static_cast<unsigned>(i));
    arg->setName(f.params[i].var.name());
    fs_.vars[f.params[i].var.get()] = arg;
    if (f.params[i].is_tensor()) {
      // Distinct tensors, as `__restrict__` says in the CUDA C.
      arg->addAttr(llvm::Attribute::NoAlias);
      fs_.buffers[f.params[i].var.get()].alignment = kDeviceBufferAlignment;
    }
  }
  builder_.SetInsertPoint(llvm::BasicBlock::Create(*ctx_, "entry", fn));
  emit(f.body);
  builder_.CreateRetVoid();

  llvm::NamedMDNode* annotations = module_->getOrInsertNamedMetadata("nvvm.annotations");
  auto annotate = [&](const char* key, int64_t value) {
    llvm::Metadata* ops[] = {
        llvm::ValueAsMetadata::get(fn), llvm::MDString::get(*ctx_, key),
        llvm::ConstantAsMetadata::get(builder_.getInt32(static_cast<uint32_t>(value)))};
    annotations->addOperand(llvm::MDNode::get(*ctx_, ops));
  };
  annotate("kernel", 1);
  int64_t threads = 1;
  for (const auto& [tag, extent] : thread_extents_) threads = extent < 0 ? -1 : threads * extent;
  if (threads > 0) annotate("maxntidx", threads);
}

void CodeGenLLVM::emit_thread_extent(const ir::AttrStmtNode* op) {
  auto* iv = dynamic_cast<const ir::IterVarNode*>(op->node.get());
  auto it = std::find_if(kThreadIndex.begin(), kThreadIndex.end(),
                         [&](const auto& t) { return iv != nullptr && t.first == iv->thread_tag; });
  KILN_USER_CHECK(it != kThreadIndex.end())
      << "codegen nvptx: kernel '" << func_name_
      << "' has a thread_extent whose node is not an IterVar tagged blockIdx.x/y/z or "
         "threadIdx.x/y/z";
  if (iv->thread_tag.rfind("threadIdx", 0) == 0) {
    thread_extents_[iv->thread_tag] = ir::as_const_int(op->value).value_or(-1);
  }
  llvm::CallInst* index_call = builder_.CreateIntrinsic(it->second, {}, {});
  // The index's range lets LLVM prove floordiv / floormod operands non-negative and fold them
  // (the CUDA C printer does the same with its known ranges).
  if (auto extent = ir::as_const_int(op->value); extent && *extent > 0 && *extent < (1LL << 31)) {
    index_call->setMetadata(
        llvm::LLVMContext::MD_range,
        llvm::MDBuilder(*ctx_).createRange(llvm::APInt(32, 0),
                                           llvm::APInt(32, static_cast<uint64_t>(*extent))));
  }
  llvm::Value* index = index_call;
  index = builder_.CreateIntCast(index, llvm_type(iv->var.dtype()), /*isSigned=*/false);
  const ir::VarNode* v = iv->var.get();
  auto old = fs_.vars.find(v);
  llvm::Value* saved = old == fs_.vars.end() ? nullptr : old->second;
  fs_.vars[v] = index;
  emit(op->body);
  if (saved != nullptr) {
    fs_.vars[v] = saved;
  } else {
    fs_.vars.erase(v);
  }
}

void CodeGenLLVM::emit_device_allocate(const ir::AllocateNode* op) {
  const std::string& name = op->buffer_var.name();
  KILN_USER_CHECK(op->scope == "shared" || op->scope == "local")
      << "codegen nvptx: allocation '" << name << "' of kernel '" << func_name_ << "' in "
      << op->scope << " memory (a kernel allocates shared or local memory only)";
  int64_t count = 1;
  for (const ir::Expr& e : op->extents) {
    auto c = ir::as_const_int(e);
    KILN_USER_CHECK(c && *c >= 0) << "codegen nvptx: allocation '" << name << "' of kernel '"
                                  << func_name_ << "' has extent " << ir::to_string(e)
                                  << " (kernels allocate constant sizes)";
    count *= *c;
  }
  auto* type = llvm::ArrayType::get(memory_type(op->dtype),
                                    static_cast<uint64_t>(std::max<int64_t>(1, count)));
  llvm::Value* p = nullptr;
  if (op->scope == "shared") {
    auto* gv = new llvm::GlobalVariable(*module_, type, false, llvm::GlobalValue::InternalLinkage,
                                        llvm::UndefValue::get(type), func_name_ + "_" + name,
                                        nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    gv->setAlignment(llvm::Align(kDeviceBufferAlignment));
    p = llvm::ConstantExpr::getAddrSpaceCast(gv, ptr_);
  } else {
    p = entry_alloca(type, nullptr, kDeviceBufferAlignment, name);
  }
  const ir::VarNode* var = op->buffer_var.get();
  auto old = fs_.vars.find(var);
  llvm::Value* saved = old == fs_.vars.end() ? nullptr : old->second;
  fs_.vars[var] = p;
  fs_.buffers[var].alignment = kDeviceBufferAlignment;
  emit(op->body);
  if (saved != nullptr) {
    fs_.vars[var] = saved;
  } else {
    fs_.vars.erase(var);
  }
}

void CodeGenLLVM::emit_device_barrier(const ir::CallNode* op) {
  auto* scope = op->args.size() == 1 ? op->args[0].as<ir::StringImmNode>() : nullptr;
  KILN_USER_CHECK(scope != nullptr && (scope->value == "shared" || scope->value == "warp"))
      << "codegen nvptx: kernel '" << func_name_
      << "': kiln.storage_sync takes one scope, \"shared\" or \"warp\"";
  if (scope->value == "shared") {
    builder_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
  } else if (std::stoi(target_.cpu.substr(3)) >= 70) {
    // Before Volta a warp runs in lock step: nothing to wait for.
    builder_.CreateIntrinsic(llvm::Intrinsic::nvvm_bar_warp_sync, {},
                             {builder_.getInt32(0xffffffffu)});
  }
}

llvm::Value* CodeGenLLVM::emit_device_math(const ir::CallNode* op) {
  const std::string& name = op->name;
  if (std::find(kNativeMath.begin(), kNativeMath.end(), name) != kNativeMath.end()) {
    return emit_pure_intrinsic(op);
  }
  auto known = std::find_if(kLibdeviceMath.begin(), kLibdeviceMath.end(),
                            [&](const auto& m) { return m.first == name; });
  KILN_USER_CHECK(known != kLibdeviceMath.end())
      << "codegen nvptx: unknown pure intrinsic '" << name << "' in kernel '" << func_name_ << "'";
  KILN_USER_CHECK(op->dtype.is_float() && static_cast<int>(op->args.size()) == known->second)
      << "codegen nvptx: intrinsic '" << name << "' in kernel '" << func_name_ << "' takes "
      << known->second << " float argument(s), got " << op->args.size() << " giving "
      << op->dtype.str();
  std::vector<llvm::Value*> args;
  for (const ir::Expr& a : op->args) args.push_back(emit(a));
  llvm::Type* t = args[0]->getType();
  llvm::Type* elem = t->getScalarType();
  // float16 has no libdevice function: compute in float.
  llvm::Type* calc = elem->isHalfTy() ? builder_.getFloatTy() : elem;
  auto libdevice = [&](const std::string& base, std::vector<llvm::Value*> lane) {
    const std::string fname = "__nv_" + base + (calc->isFloatTy() ? "f" : "");
    llvm::FunctionCallee fn = c_function(fname, calc, std::vector<llvm::Type*>(lane.size(), calc));
    if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
      f->setDoesNotAccessMemory();
      f->setWillReturn();
    }
    return builder_.CreateCall(fn, lane);
  };
  auto one = [&](std::vector<llvm::Value*> lane) -> llvm::Value* {
    for (llvm::Value*& v : lane) v = builder_.CreateFPCast(v, calc);
    llvm::Value* r = nullptr;
    if (name == "sigmoid") {
      llvm::Value* unit = llvm::ConstantFP::get(calc, 1.0);
      r = builder_.CreateFDiv(
          unit, builder_.CreateFAdd(unit, libdevice("exp", {builder_.CreateFNeg(lane[0])})));
    } else {
      r = libdevice(name == "roundeven" ? "rint" : name, lane);
    }
    return builder_.CreateFPCast(r, elem);
  };
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (vt == nullptr) return one(args);
  llvm::Value* out = llvm::PoisonValue::get(t);
  for (unsigned i = 0; i < vt->getNumElements(); ++i) {
    std::vector<llvm::Value*> lane;
    for (llvm::Value* a : args) {
      lane.push_back(a->getType()->isVectorTy() ? builder_.CreateExtractElement(a, i) : a);
    }
    out = builder_.CreateInsertElement(out, one(lane), i);
  }
  return out;
}

}  // namespace detail

namespace {

/// The PTX ISA version to ask for: the oldest that knows the architecture (LLVM 19 defaults
/// to one too old for sm_75 and newer), so older drivers still load the module. sm_90a's
/// architecture-specific features need PTX 8.0.
int ptx_version(int sm, bool arch_specific) {
  if (arch_specific) return 80;
  if (sm < 70) return 60;
  if (sm < 75) return 61;
  if (sm < 80) return 63;
  if (sm < 86) return 70;
  if (sm < 87) return 71;
  if (sm < 89) return 74;
  return 78;
}

/// libdevice.10.bc of the CUDA toolkit, or "" when there is none.
std::string find_libdevice() {
  std::vector<std::string> roots;
  if (const char* home = std::getenv("CUDA_HOME")) roots.emplace_back(home);
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& r : roots) {
    const std::string p = r + "/nvvm/libdevice/libdevice.10.bc";
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

/// Links libdevice into `m` (only the functions `m` calls) and internalizes everything but the
/// kernels, so that the optimizer inlines the math and drops the rest.
void link_libdevice(llvm::Module* m, const std::set<std::string>& kernels) {
  bool uses = false;
  for (const llvm::Function& f : *m)
    uses = uses || (f.isDeclaration() && f.getName().starts_with("__nv_"));
  if (!uses) return;
  const std::string path = find_libdevice();
  KILN_USER_CHECK(!path.empty())
      << "codegen nvptx: the kernels use math and libdevice.10.bc is not found ($CUDA_HOME or "
         "/usr/local/cuda, nvvm/libdevice): install the CUDA toolkit";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  KILN_SYSTEM_CHECK(bool(buffer)) << "codegen nvptx: cannot read " << path;
  auto lib = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), m->getContext());
  KILN_SYSTEM_CHECK(bool(lib)) << "codegen nvptx: " << path
                               << " is not LLVM bitcode: " << llvm::toString(lib.takeError());
  (*lib)->setTargetTriple(m->getTargetTriple());
  (*lib)->setDataLayout(m->getDataLayout());
  KILN_ICHECK(!llvm::Linker::linkModules(*m, std::move(*lib), llvm::Linker::LinkOnlyNeeded))
      << "codegen nvptx: linking " << path << " failed";
  for (llvm::Function& f : *m) {
    if (!f.isDeclaration() && kernels.count(f.getName().str()) == 0) {
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
    }
  }
  for (llvm::GlobalVariable& g : m->globals()) {
    if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
}

}  // namespace

std::string nvptx_compile(const std::vector<ir::PrimFunc>& kernels, const std::string& sm_arch) {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  static const std::regex kSm(R"(sm_(\d+)(a?))");
  std::smatch match;
  KILN_USER_CHECK(std::regex_match(sm_arch, match, kSm))
      << "cuda: arch '" << sm_arch << "' is not of the form sm_XY (e.g. -arch=sm_61)";
  LLVMTarget target;
  target.triple = "nvptx64-nvidia-cuda";
  target.cpu = sm_arch;
  target.features = "+ptx" + std::to_string(ptx_version(std::stoi(match[1]), match[2] == "a"));
  target.is_nvptx = true;
  std::string err;
  const llvm::Target* nvptx = llvm::TargetRegistry::lookupTarget(target.triple, err);
  KILN_ICHECK(nvptx != nullptr) << "LLVM has no NVPTX back-end: " << err;
  std::unique_ptr<llvm::MCSubtargetInfo> sti(nvptx->createMCSubtargetInfo(target.triple, "", ""));
  KILN_USER_CHECK(sti->isCPUStringValid(sm_arch))
      << "cuda: LLVM 19's NVPTX back-end does not know " << sm_arch
      << " (see `llc-19 -mtriple=nvptx64-nvidia-cuda -mcpu=help`)";

  std::unique_ptr<llvm::TargetMachine> tm = create_target_machine(target);
  llvm::LLVMContext ctx;
  detail::CodeGenLLVM cg(target, tm.get(), &ctx);
  std::set<std::string> names;
  for (const ir::PrimFunc& k : kernels) {
    cg.add_kernel(k);
    names.insert(k.name);
  }
  std::unique_ptr<llvm::Module> m = cg.finish();
  link_libdevice(m.get(), names);
  optimize_module(m.get(), tm.get());

  llvm::SmallString<0> ptx;
  llvm::raw_svector_ostream os(ptx);
  llvm::legacy::PassManager pm;
  KILN_ICHECK(!tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
      << "the NVPTX back-end cannot print PTX";
  pm.run(*m);
  return std::string(ptx.str());
}

}  // namespace kiln::codegen
