// LLVM's side of a target: back-end initialization (once per process), resolving "-mcpu=native"
// to the host's CPU name and features, checking CPU and feature names against what LLVM knows,
// making target machines, and the O3 optimization pipeline.
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/codegen/codegen_llvm.h"

extern "C" {
void LLVMInitializeX86TargetInfo();
void LLVMInitializeX86Target();
void LLVMInitializeX86TargetMC();
void LLVMInitializeX86AsmPrinter();
void LLVMInitializeAArch64TargetInfo();
void LLVMInitializeAArch64Target();
void LLVMInitializeAArch64TargetMC();
void LLVMInitializeAArch64AsmPrinter();
}

namespace kiln::codegen {
namespace {

std::vector<std::string> split_features(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool has_feature(const std::vector<std::string>& features, const std::string& name) {
  bool on = false;
  for (const std::string& f : features) {  // the last mention wins
    if (f.substr(1) == name) on = f[0] == '+';
  }
  return on;
}

}  // namespace

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Only the back-ends Kiln targets: initializing all of libLLVM's costs start-up time.
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64Target();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64AsmPrinter();
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    apply_llvm_options();
  });
}

void apply_llvm_options() {
  // Tail merging (the branch folder) compares the tails of every pair of blocks that end
  // alike: quadratic in a kernel's blocks, it took most of the code generation of the unrolled
  // recurrent kernels (40 s of a GRU classifier's 52). It only shrinks code; kernels are
  // straight loop nests whose speed does not depend on it.
  llvm::StringMap<llvm::cl::Option*>& options = llvm::cl::getRegisteredOptions();
  auto tail_merge = options.find("enable-tail-merge");
  KILN_ICHECK(tail_merge != options.end()) << "LLVM has no option 'enable-tail-merge'";
  tail_merge->second->addOccurrence(0, "enable-tail-merge", "false");
}

LLVMTarget resolve_llvm_target(const target::Target& t) {
  KILN_USER_CHECK(t.kind == TargetKind::kCpu)
      << "target '" << t.str() << "' is not an llvm target; the " << t.kind
      << " back-end does not go through LLVM codegen";
  initialize_llvm();
  LLVMTarget out;
  out.triple = llvm::Triple::normalize(t.llvm_triple());
  const llvm::Triple triple(out.triple);
  out.is_x86 = triple.getArch() == llvm::Triple::x86_64;
  out.is_aarch64 = triple.getArch() == llvm::Triple::aarch64;

  std::vector<std::string> features;
  if (t.cpu == "native") {
    out.cpu = llvm::sys::getHostCPUName().str();
    for (const auto& kv : llvm::sys::getHostCPUFeatures()) {
      features.push_back((kv.second ? "+" : "-") + kv.first().str());
    }
    std::sort(features.begin(), features.end());
  } else {
    out.cpu = t.cpu;
  }
  const std::vector<std::string> mattr = split_features(t.mattr);
  features.insert(features.end(), mattr.begin(), mattr.end());
  for (size_t i = 0; i < features.size(); ++i) out.features += (i ? "," : "") + features[i];

  // Names LLVM does not know would only be warned about on stderr and ignored: refuse them.
  std::string err;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(out.triple, err);
  KILN_USER_CHECK(llvm_target != nullptr)
      << "target '" << t.str() << "': LLVM has no back-end for triple '" << out.triple
      << "': " << err;
  std::unique_ptr<llvm::MCSubtargetInfo> sti(
      llvm_target->createMCSubtargetInfo(out.triple, "", ""));
  KILN_USER_CHECK(out.cpu.empty() || sti->isCPUStringValid(out.cpu))
      << "unknown CPU '" << out.cpu << "' in target '" << t.str() << "' for " << out.triple
      << " (see `llc-19 -mtriple=" << out.triple << " -mcpu=help`)";
  for (const std::string& f : mattr) {
    const std::string name = f.substr(1);
    const auto& all = sti->getAllProcessorFeatures();
    const bool known = std::any_of(
        all.begin(), all.end(), [&](const llvm::SubtargetFeatureKV& kv) { return name == kv.Key; });
    KILN_USER_CHECK(known) << "unknown CPU feature '" << name << "' in -mattr of target '"
                           << t.str() << "' (see `llc-19 -mtriple=" << out.triple
                           << " -mattr=help`)";
  }

  std::unique_ptr<llvm::MCSubtargetInfo> cpu_sti(
      llvm_target->createMCSubtargetInfo(out.triple, out.cpu, out.features));
  out.has_avx512bf16 = out.is_x86 && cpu_sti->checkFeatures("+avx512bf16");
  out.has_avx512vl = out.is_x86 && cpu_sti->checkFeatures("+avx512vl");

  if (out.is_aarch64) {
    out.vector_bits = 128;
  } else if (t.cpu == "native") {
    out.vector_bits = has_feature(features, "avx512f") ? 512
                      : has_feature(features, "avx2")  ? 256
                                                       : 128;
  } else {
    out.vector_bits = t.vector_bits > 0 ? t.vector_bits : 128;
  }
  return out;
}

std::unique_ptr<llvm::TargetMachine> create_target_machine(const LLVMTarget& t) {
  initialize_llvm();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(t.triple, err);
  KILN_USER_CHECK(target != nullptr)
      << "LLVM has no back-end for triple '" << t.triple << "': " << err;
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // FMA contraction; no other fast-math
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(t.triple, t.cpu, t.features, options, llvm::Reloc::PIC_,
                                  std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  KILN_ICHECK(tm != nullptr) << "cannot create an LLVM target machine for " << t.key();
  return tm;
}

void optimize_module(llvm::Module* m, llvm::TargetMachine* tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  pto.LoopUnrolling = true;
  llvm::PassBuilder pb(tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(*m, mam);
}

std::vector<std::string> enabled_cpu_features(const target::Target& t) {
  const LLVMTarget lt = resolve_llvm_target(t);
  if (!lt.is_x86 && !lt.is_aarch64) return {};
  std::string err;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(lt.triple, err);
  KILN_ICHECK(llvm_target != nullptr) << err;
  std::unique_ptr<llvm::MCSubtargetInfo> sti(
      llvm_target->createMCSubtargetInfo(lt.triple, lt.cpu, lt.features));
  std::vector<std::string> on;
  for (const llvm::SubtargetFeatureKV& kv : sti->getAllProcessorFeatures()) {
    if (sti->checkFeatures("+" + std::string(kv.Key))) on.emplace_back(kv.Key);
  }
  std::sort(on.begin(), on.end());
  return on;
}

}  // namespace kiln::codegen
