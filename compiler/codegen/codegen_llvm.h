// Translation of lowered functions (ir::PrimFunc, after storage flattening) into an LLVM module
// that follows the calling convention of deploy/runtime/c_abi.h.
//
// For each PrimFunc `f` the module holds:
//   int32_t f(const KilnArg* args, int32_t num_args, const char** error)   (external: the entry)
//     checks the arguments (count, null, rank, dtype, shape, compact strides), binds symbolic
//     dimensions, then calls
//   int32_t f_compute(const char** error, <captured values>)                 (internal)
//     whose buffer-pointer parameters are `noalias`, so LLVM knows the tensors do not overlap;
//   char __kiln_sig_f[]                                                     (external: "tti...")
// and, for each parallel loop k (outlined, see codegen_llvm_parallel.cc),
//   int32_t f_parallel_k(int32_t task, int32_t num_tasks, void* closure)    (a KilnParallelBody)
//   int32_t f_parallel_k_impl(const char** error, task, num_tasks, min, extent, <captured>)
// plus, when any loop is parallel, the global `KilnParallelLaunch __kiln_parallel_launch = NULL`
// that the runtime's loader fills in (when it is still NULL the loop runs on the caller).
//
// Errors inside the generated code store a constant message in *error and return non-zero;
// heap allocations live at that point are freed first.
//
// Used by build.cc; nothing outside compiler/codegen should need it (build.h is the public
// interface). The translator itself is declared in codegen_llvm_impl.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/function.h"
#include "compiler/ir/stmt.h"
#include "compiler/target/target.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

/// A target as LLVM needs it: triple, CPU name and feature string resolved ("native" becomes the
/// host's CPU name and features), and the function attributes that steer vectorization.
struct LLVMTarget {
  std::string triple;     ///< normalized, e.g. "x86_64-unknown-linux-gnu"
  std::string cpu;        ///< e.g. "znver4", "cortex-a53", or "" for the generic CPU
  std::string features;   ///< e.g. "+avx2,+avx512f,..." (host features for native, then -mattr)
  int vector_bits = 128;  ///< widest vector width vectorizers should prefer
  bool is_x86 = false;
  bool is_aarch64 = false;
  bool is_nvptx = false;  ///< CUDA kernels (codegen_nvptx.h): cpu is "sm_XY", features "+ptxNN"
  /// x86 with AVX-512 BF16 (vdpbf16ps) and AVX-512VL (its 128/256-bit forms), by the CPU's
  /// features with -mattr's changes: bf16x2_dot's instruction (llvm_bf16.cc).
  bool has_avx512bf16 = false;
  bool has_avx512vl = false;

  /// A key for caches of target machines and JIT sessions.
  std::string key() const { return triple + "|" + cpu + "|" + features; }
};

/// Resolves `t` (kind "llvm"); raises kiln::Error for other kinds.
LLVMTarget resolve_llvm_target(const target::Target& t);

/// Initializes LLVM's X86 and AArch64 back-ends (and the host's) once per process.
void initialize_llvm();
/// Sets the LLVM options Kiln compiles with (tail merging off). initialize_llvm applies them;
/// lld resets every LLVM option to its default when it links, so each link applies them again.
void apply_llvm_options();

/// A new target machine for `t` (PIC, aggressive codegen optimization, FMA contraction allowed).
std::unique_ptr<llvm::TargetMachine> create_target_machine(const LLVMTarget& t);

/// Translates `funcs` into a new module in `ctx`, with triple and data layout of `tm`. Raises
/// kiln::Error for a user's mistake (a variable nothing binds, an unknown intrinsic, a duplicate or
/// malformed function name). The module is verified but not optimized.
std::unique_ptr<llvm::Module> codegen_llvm(const std::vector<ir::PrimFunc>& funcs,
                                           const LLVMTarget& target, llvm::TargetMachine* tm,
                                           llvm::LLVMContext* ctx);

/// Runs LLVM's O3 pipeline (new pass manager) on `m` for `tm`.
void optimize_module(llvm::Module* m, llvm::TargetMachine* tm);

}  // namespace kiln::codegen
