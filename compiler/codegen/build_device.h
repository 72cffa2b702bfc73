// A lowered GPU function compiled into what the runtime runs: its kernels printed as CUDA C and
// compiled to PTX by NVRTC (cuda targets), or printed as OpenCL C (built by the device's driver
// when loaded), with the launches and the tensors as a runtime::DeviceProgram. Where ptxas is
// installed, every CUDA kernel's registers and shared memory are checked against the target.
#pragma once

#include "compiler/pass/split_host_device.h"
#include "compiler/target/target.h"
#include "deploy/runtime/device_program.h"

namespace kiln::codegen {

/// kiln::Error for a non-GPU target, a scalar parameter (device programs take tensors only), a
/// kernel the device compiler refuses (with its log) or one over the target's resources.
runtime::DeviceProgram build_device(const pass::DeviceFunction& f, const target::Target& target);

/// The device source of `f` (CUDA C or OpenCL C by the target's kind), for reading and golden
/// tests.
std::string device_source(const pass::DeviceFunction& f, const target::Target& target);

}  // namespace kiln::codegen
