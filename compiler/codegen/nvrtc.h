// CUDA C to PTX with NVRTC, and what ptxas says a kernel needs (registers, shared memory).
//
// libnvrtc is loaded with dlopen on first use, so Kiln builds and runs where no CUDA toolkit is
// installed; only compiling CUDA then fails, with a message saying what to install. CUDA 13's
// NVRTC makes code for compute_75 (Turing) and newer only; older GPUs (sm_52, sm_61) get PTX from
// LLVM's NVPTX back-end (codegen_nvptx.h), which build_device is handed by its caller.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/target/target.h"

namespace kiln::codegen {

/// Whether libnvrtc (libnvrtc.so.13) can be loaded here.
bool nvrtc_available();

/// Whether CUDA 13's NVRTC compiles for `sm_arch` (sm_75 and newer). Raises kiln::Error for an
/// arch that is not sm_XY.
bool nvrtc_accepts(const std::string& sm_arch);

/// "compute_90" for "sm_90" ("sm_90a" gives "compute_90a"). Raises kiln::Error for an arch that
/// is not sm_XY, or one older than sm_75 (CUDA 13 compiles nothing older).
std::string nvrtc_virtual_arch(const std::string& sm_arch);

/// The PTX of CUDA C `source` compiled for `sm_arch` ("sm_90", from Target::arch) with
/// --gpu-architecture=compute_XY. `program` names the source in messages (the function being
/// built). Raises kiln::Error when NVRTC is not found ("NVRTC not found (libnvrtc.so.13):
/// install the CUDA toolkit"), for an unsupported arch, and for a compile error: then the message
/// carries the kernel the first error is in and NVRTC's log.
std::string nvrtc_compile(const std::string& source, const std::string& sm_arch,
                          const std::string& program = "kiln_device.cu");

/// What one kernel of a PTX module needs, as ptxas reports it (`ptxas -v`).
struct KernelResources {
  std::string kernel;
  int registers = 0;         ///< per thread
  int64_t shared_bytes = 0;  ///< static shared memory per block
  int64_t stack_bytes = 0;   ///< stack frame per thread
  int64_t spill_bytes = 0;   ///< bytes of spill stores per thread
};

/// The ptxas executable ($CUDA_HOME/bin, /usr/local/cuda/bin or PATH), or "" when there is none.
std::string find_ptxas();

/// Assembles `ptx` for `sm_arch` with `ptxas -arch=sm_XY -v` and returns each kernel's resources
/// in the order ptxas lists them. Raises kiln::Error when ptxas is missing or rejects the PTX
/// (with its output).
std::vector<KernelResources> ptxas_resources(const std::string& ptx, const std::string& sm_arch);

/// Raises kiln::Error naming the kernel when one needs more than a CUDA thread may have (255
/// registers) or more shared memory than `target` gives a block (max_shared_memory_per_block).
void check_kernel_resources(const std::vector<KernelResources>& resources,
                            const target::Target& target);

}  // namespace kiln::codegen
