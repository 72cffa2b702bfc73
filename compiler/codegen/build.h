// Turning lowered functions into running code with LLVM: a JIT-compiled module on this machine,
// an object file or shared object (as bytes) for any llvm target (x86-64, AArch64), and LLVM IR or
// assembly text for inspection. Every generated function follows deploy/runtime/c_abi.h, so the
// runtime calls a JIT module and a loaded library the same way.
//
// All entry points are thread-safe: each call uses its own LLVM context; JIT sessions are shared
// per target and guarded; links take turns (lld is one per process).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/target/target.h"
#include "deploy/runtime/module.h"

namespace kiln::codegen {

/// Where the time of a build() went, in milliseconds.
struct BuildTimings {
  double codegen_ms = 0;   ///< IR to LLVM IR
  double optimize_ms = 0;  ///< LLVM's O3 pipeline
  double jit_ms = 0;       ///< machine code generation and linking in the JIT
  double total_ms() const { return codegen_ms + optimize_ms + jit_ms; }
};

/// JIT-compiles `funcs` for `target` (which must run on this machine: an llvm target with the
/// host's triple) and returns a module whose functions are `funcs[i].name`. The module's
/// `__kiln_parallel_launch` points at the runtime's thread pool. Raises kiln::Error for a target
/// that cannot run here ("use link_shared_object"), a non-llvm target, or a mistake in the
/// functions. `optimize` false skips LLVM's O3 pipeline: for code that runs once (constant
/// folding), where optimizing costs more than it saves.
runtime::Module build(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                      BuildTimings* timings = nullptr, bool optimize = true);

/// The CPU features `t` enables (LLVM's names without the '+', sorted: "avx2", "avx512bf16",
/// ...): its CPU's (the host's for -mcpu=native) with -mattr's changes applied; empty for targets
/// other than x86-64 and AArch64 llvm ones.
std::vector<std::string> enabled_cpu_features(const target::Target& t);

/// An ELF relocatable object (position-independent) for any llvm target.
std::vector<uint8_t> emit_object(const std::vector<ir::PrimFunc>& funcs,
                                 const target::Target& target);

/// The objects of `funcs` split into parts compiled side by side, one thread per hardware thread:
/// each function (with its parallel bodies) in one part, the parts' objects together define every
/// function once and `__kiln_parallel_launch` once (in the first). For link_shared_object: LLVM
/// optimizes and emits one module on one core, and a network's hundreds of kernels are many.
std::vector<std::vector<uint8_t>> emit_objects(const std::vector<ir::PrimFunc>& funcs,
                                               const target::Target& target);

/// The ELF shared object of `funcs` for any llvm target, as bytes: their objects (emit_objects)
/// linked by lld inside this process, with no file written (link.cc). When the target is the host,
/// runtime::Module::load_library_bytes loads it. libc / libm symbols (aligned_alloc, expf, ...) are
/// left to the loading process. Raises kiln::Error for a mistake in the functions or the target,
/// kiln::InternalError if lld fails.
std::string link_shared_object(const std::vector<ir::PrimFunc>& funcs,
                               const target::Target& target);

/// Writes link_shared_object(funcs, target) to the file `path`, for a process that loads it by
/// path. Raises kiln::Error naming the path when it cannot be written.
void export_library(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                    const std::string& path);

/// The LLVM IR of `funcs`, after the O3 pipeline unless `optimize` is false.
std::string emit_llvm_ir(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                         bool optimize = true);

/// The optimized assembly of `funcs` for `target` (e.g. to look for zmm or fmla instructions).
std::string emit_assembly(const std::vector<ir::PrimFunc>& funcs, const target::Target& target);

}  // namespace kiln::codegen
