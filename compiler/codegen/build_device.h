// A lowered GPU function compiled into what the runtime runs: its kernels printed as CUDA C and
// compiled to PTX by NVRTC (cuda targets sm_75 and newer), or compiled to PTX by a given
// compiler (cuda targets NVRTC refuses: LLVM's NVPTX back-end, codegen_nvptx.h, which this
// library does not link so that it stays free of LLVM), or printed as OpenCL C (built by the
// device's driver when loaded), with the launches and the tensors as a runtime::DeviceProgram.
// Where ptxas is installed and takes the arch, every CUDA kernel's registers and shared memory
// are checked against the target.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/pass/split_host_device.h"
#include "compiler/target/target.h"
#include "deploy/runtime/device_program.h"

namespace kiln::codegen {

/// The PTX of device kernels for an arch ("sm_61"): codegen::nvptx_compile.
using PtxCompiler =
    std::function<std::string(const std::vector<ir::PrimFunc>& kernels, const std::string& arch)>;

/// kiln::Error for a non-GPU target, a scalar parameter (device programs take tensors only), a
/// kernel the device compiler refuses (with its log) or one over the target's resources, and for
/// a cuda arch older than sm_75 when no `older_arch_ptx` is given. With KILN_CUDA_PTX=nvptx in
/// the environment, `older_arch_ptx` (when given) compiles for every arch: to compare the two
/// paths on one GPU.
runtime::DeviceProgram build_device(const pass::DeviceFunction& f, const target::Target& target,
                                    const PtxCompiler& older_arch_ptx = {});

/// The device source of `f` (CUDA C or OpenCL C by the target's kind), for reading and golden
/// tests.
std::string device_source(const pass::DeviceFunction& f, const target::Target& target);

}  // namespace kiln::codegen
