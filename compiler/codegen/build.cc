// Building with LLVM: the host JIT (ORC LLJIT), object files, and IR / assembly text (linking
// shared objects is link.cc).
//
// JIT sessions: one LLJIT per distinct (triple, CPU, features), made on first use and kept for
// the life of the process; each build() adds its module to a fresh JITDylib of that session, which
// is removed (and its memory freed) when the last runtime::Module / Function referring to it
// goes. Machine code is generated inside build() (the entry symbols are looked up there), under
// the session's lock, because the session's target machine is not safe to use from two threads
// at once. Target machines for the optimization pipeline are cached per thread.
#include "compiler/codegen/build.h"

#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "compiler/codegen/codegen_llvm.h"

namespace kiln::codegen {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string llvm_error_string(llvm::Error e) {
  std::string s;
  llvm::handleAllErrors(std::move(e), [&](const llvm::ErrorInfoBase& info) {
    if (!s.empty()) s += "; ";
    s += info.message();
  });
  return s;
}

/// This thread's target machine for `t` (target machines are not thread-safe).
llvm::TargetMachine* thread_target_machine(const LLVMTarget& t) {
  thread_local std::map<std::string, std::unique_ptr<llvm::TargetMachine>> cache;
  auto& tm = cache[t.key()];
  if (tm == nullptr) tm = create_target_machine(t);
  return tm.get();
}

/// One JIT per target configuration.
struct JitSession {
  std::mutex mu;  // held while code is generated (see the file comment)
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::atomic<uint64_t> next_id{0};
  // What ORC reported while materializing (e.g. "Symbols not found: [ foo ]"): lookups only say
  // that materialization failed, so build() quotes these.
  std::mutex errors_mu;
  std::string errors;
};

std::shared_ptr<JitSession> jit_session(const LLVMTarget& t) {
  static std::mutex mu;
  // Never destroyed: modules may outlive static destruction order at exit.
  static auto* sessions = new std::map<std::string, std::shared_ptr<JitSession>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& s = (*sessions)[t.key()];
  if (s != nullptr) return s;
  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(t.triple)};
  jtmb.setCPU(t.cpu);
  jtmb.setFeatures(t.features);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Fast;
  jtmb.getOptions().EmulatedTLS = false;
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  KILN_ICHECK(static_cast<bool>(jit))
      << "cannot start the LLVM JIT for " << t.key() << ": " << llvm_error_string(jit.takeError());
  s = std::make_shared<JitSession>();
  s->jit = std::move(*jit);
  JitSession* raw = s.get();  // sessions are never destroyed
  s->jit->getExecutionSession().setErrorReporter([raw](llvm::Error e) {
    const std::string msg = llvm_error_string(std::move(e));
    std::lock_guard<std::mutex> lock(raw->errors_mu);
    raw->errors += (raw->errors.empty() ? "" : "; ") + msg;
  });
  return s;
}

/// A module of JIT-compiled functions: one JITDylib of a session.
class JitModuleNode final : public runtime::ModuleNode {
 public:
  JitModuleNode(std::shared_ptr<JitSession> session, llvm::orc::JITDylib* jd, std::string names)
      : session_(std::move(session)), jd_(jd), names_(std::move(names)) {}

  ~JitModuleNode() override {
    if (llvm::Error e = session_->jit->getExecutionSession().removeJITDylib(*jd_)) {
      llvm::consumeError(std::move(e));
    }
  }

  void* symbol(const std::string& name) override {
    auto addr = session_->jit->lookup(*jd_, name);
    if (!addr) {
      llvm::consumeError(addr.takeError());
      return nullptr;
    }
    return addr->toPtr<void*>();
  }
  std::string kind() const override { return "llvm-jit"; }
  std::string name() const override { return "llvm-jit module (" + names_ + ")"; }

 private:
  std::shared_ptr<JitSession> session_;
  llvm::orc::JITDylib* jd_;
  std::string names_;
};

/// Generates and optimizes the module of `funcs`.
std::unique_ptr<llvm::Module> compile_module(const std::vector<ir::PrimFunc>& funcs,
                                             const LLVMTarget& lt, llvm::TargetMachine* tm,
                                             llvm::LLVMContext* ctx, bool optimize,
                                             BuildTimings* timings) {
  auto t0 = Clock::now();
  std::unique_ptr<llvm::Module> m = codegen_llvm(funcs, lt, tm, ctx);
  if (timings != nullptr) timings->codegen_ms = ms_since(t0);
  t0 = Clock::now();
  if (optimize) optimize_module(m.get(), tm);
  if (timings != nullptr) timings->optimize_ms = ms_since(t0);
  return m;
}

/// How a module's runtime pointers (`__kiln_parallel_launch`, `__kiln_workspace_alloc`,
/// `__kiln_workspace_free`: c_abi.h) are emitted when its functions are split between objects:
/// defined in one of them, referred to by the others.
enum class LaunchPointer { kAsGenerated, kDefine, kDeclare };

std::string emit_file(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                      llvm::CodeGenFileType type,
                      LaunchPointer launch = LaunchPointer::kAsGenerated) {
  const LLVMTarget lt = resolve_llvm_target(target);
  llvm::TargetMachine* tm = thread_target_machine(lt);
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = compile_module(funcs, lt, tm, &ctx, true, nullptr);
  constexpr const char* kPointers[] = {"__kiln_parallel_launch", "__kiln_workspace_alloc",
                                       "__kiln_workspace_free"};
  for (const char* name : kPointers) {
    llvm::GlobalVariable* gv = m->getGlobalVariable(name);
    if (launch == LaunchPointer::kDeclare && gv != nullptr) {
      gv->setInitializer(nullptr);  // a declaration: the first object defines it
    } else if (launch == LaunchPointer::kDefine && gv == nullptr) {
      llvm::PointerType* ptr = llvm::PointerType::get(ctx, 0);
      gv = new llvm::GlobalVariable(*m, ptr, /*isConstant=*/false,
                                    llvm::GlobalValue::ExternalLinkage,
                                    llvm::ConstantPointerNull::get(ptr), name);
      gv->setAlignment(llvm::Align(8));
    }
  }
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  KILN_ICHECK(!tm->addPassesToEmitFile(pm, os, nullptr, type))
      << "LLVM cannot emit this file type for " << lt.triple;
  pm.run(*m);
  return std::string(buf.begin(), buf.end());
}

}  // namespace

runtime::Module build(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                      BuildTimings* timings, bool optimize) {
  KILN_USER_CHECK(target.kind == TargetKind::kCpu)
      << "build: target '" << target.str() << "' is not an llvm target; the " << target.kind
      << " back-end builds its own kind of module";
  KILN_USER_CHECK(target.is_host())
      << "target '" << target.str() << "' cannot run on this machine (" << target::host_triple()
      << "); use link_shared_object";
  BuildTimings local;
  if (timings == nullptr) timings = &local;
  const LLVMTarget lt = resolve_llvm_target(target);
  llvm::TargetMachine* tm = thread_target_machine(lt);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> m = compile_module(funcs, lt, tm, ctx.get(), optimize, timings);

  const auto t0 = Clock::now();
  std::shared_ptr<JitSession> session = jit_session(lt);
  std::string names;
  for (const ir::PrimFunc& f : funcs) names += (names.empty() ? "" : ", ") + f.name;
  std::shared_ptr<JitModuleNode> node;
  {
    std::lock_guard<std::mutex> lock(session->mu);
    auto jd = session->jit->createJITDylib("kiln_module_" + std::to_string(session->next_id++));
    KILN_ICHECK(static_cast<bool>(jd)) << llvm_error_string(jd.takeError());
    node = std::make_shared<JitModuleNode>(session, &*jd, names);
    llvm::Error added =
        session->jit->addIRModule(*jd, llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx)));
    KILN_ICHECK(!added) << "JIT rejected the module: " << llvm_error_string(std::move(added));
    // Generate the machine code now (the first lookup compiles the whole module), so that a
    // missing external symbol is reported here and build() times the whole compilation.
    {
      std::lock_guard<std::mutex> errors_lock(session->errors_mu);
      session->errors.clear();
    }
    for (const ir::PrimFunc& f : funcs) {
      auto addr = session->jit->lookup(*jd, f.name);
      if (addr) continue;
      std::string why = llvm_error_string(addr.takeError());
      {
        std::lock_guard<std::mutex> errors_lock(session->errors_mu);
        if (!session->errors.empty()) why = session->errors;
      }
      KILN_USER_ERROR() << "build: JIT compilation of '" << f.name << "' failed: " << why;
    }
  }
  timings->jit_ms = ms_since(t0);
  return runtime::Module::from_node(std::move(node));
}

std::vector<uint8_t> emit_object(const std::vector<ir::PrimFunc>& funcs,
                                 const target::Target& target) {
  const std::string bytes = emit_file(funcs, target, llvm::CodeGenFileType::ObjectFile);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

std::vector<std::vector<uint8_t>> emit_objects(const std::vector<ir::PrimFunc>& funcs,
                                               const target::Target& target) {
  resolve_llvm_target(target);  // a bad target fails here, not in a worker thread
  const size_t threads =
      std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), funcs.size());
  if (threads <= 1) return {emit_object(funcs, target)};
  // Four parts per thread, taken in turn, so that one part of large kernels does not leave the
  // other threads idle at the end.
  const size_t parts = std::min(funcs.size(), threads * 4);
  std::vector<std::vector<ir::PrimFunc>> part(parts);
  for (size_t i = 0; i < funcs.size(); ++i) part[i * parts / funcs.size()].push_back(funcs[i]);
  std::vector<std::vector<uint8_t>> objects(parts);
  std::vector<std::exception_ptr> errors(parts);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < parts;) {
      try {
        const std::string bytes =
            emit_file(part[k], target, llvm::CodeGenFileType::ObjectFile,
                      k == 0 ? LaunchPointer::kDefine : LaunchPointer::kDeclare);
        objects[k].assign(bytes.begin(), bytes.end());
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);  // the first part's error, as one module would report it
  }
  return objects;
}

std::string emit_assembly(const std::vector<ir::PrimFunc>& funcs, const target::Target& target) {
  return emit_file(funcs, target, llvm::CodeGenFileType::AssemblyFile);
}

std::string emit_llvm_ir(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                         bool optimize) {
  const LLVMTarget lt = resolve_llvm_target(target);
  llvm::TargetMachine* tm = thread_target_machine(lt);
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = compile_module(funcs, lt, tm, &ctx, optimize, nullptr);
  std::string s;
  llvm::raw_string_ostream os(s);
  m->print(os, nullptr);
  return os.str();
}

}  // namespace kiln::codegen
