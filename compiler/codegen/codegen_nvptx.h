// CUDA kernels to PTX with LLVM's NVPTX back-end, for GPUs CUDA 13's NVRTC no longer compiles
// for (sm_52, sm_61: NVRTC takes compute_75 and newer only; docs/gpu.md section 7).
//
// The kernels (the `func` of each pass::DeviceKernel) go through the CPU translator
// (codegen_llvm_impl.h) in its nvptx64 mode: thread_extent IterVars read %ctaid / %tid,
// "shared" allocations are addrspace(3) arrays, "local" ones allocas, kiln.storage_sync is
// bar.sync 0, and math calls libdevice's __nv_* functions (libdevice.10.bc of the CUDA toolkit,
// linked and internalized). Expressions, loads and stores are the CPU codegen's, so floordiv /
// floormod and vector accesses mean exactly what they mean on the CPU.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/function.h"

namespace kiln::codegen {

/// The PTX of `kernels` for `sm_arch` ("sm_61"): one `.entry` per function, named as the
/// function, with `.maxntid` from constant threadIdx extents (as NVRTC's __launch_bounds__).
/// Tensor parameters are `noalias` pointers to global memory, 16-byte aligned. Raises
/// kiln::Error for an arch that is not sm_XY or that LLVM 19 does not know, for IR a kernel
/// cannot run (a symbolic or "global" allocation, a scalar vector parameter), and when a kernel
/// uses math and libdevice is not found ($CUDA_HOME or /usr/local/cuda, nvvm/libdevice).
std::string nvptx_compile(const std::vector<ir::PrimFunc>& kernels, const std::string& sm_arch);

}  // namespace kiln::codegen
