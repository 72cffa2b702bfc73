// The host/device split: a lowered GPU function becomes the kernels it launches, in order, plus the
// global scratch buffers they pass each other (docs/gpu.md, section 1).
//
//  - Each top-level thread_extent region is outlined into one DeviceKernel named
//    "<function>_kernel<i>". Its parameters are the global buffers it uses (the function's
//    parameters in their order, then workspaces) followed by the scalars it uses; `args` says
//    where each comes from. Its launch grid and block are the blockIdx / threadIdx extents.
//  - Inside a kernel, every thread tag has one variable (the first axis bound to it), and an
//    attribute binding a tag that an enclosing attribute already binds is dropped (a cooperative
//    fetch bound to the threadIdx axes of its consumer). Shared allocations are moved to the top of
//    the kernel, right inside its leading thread_extent attributes (OpenCL declares __local
//    memory at kernel scope).
//  - A global Allocate at host level, around kernels, becomes a Workspace the runtime allocates.
//  - Anything else at host level (a loop, a store, a condition) would run on the host: that is a
//    kiln::Error naming the stage it computes ("stage 'C' is not bound to GPU threads").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/launch_config.h"
#include "compiler/ir/function.h"

namespace kiln::pass {

struct DeviceKernel {
  ir::PrimFunc
      func;  ///< params: tensors (global buffers) then scalars; body under thread_extent attrs
  LaunchConfig launch;
  std::vector<int>
      args;  ///< per func param: index >= 0 into DeviceFunction::params, or -1 - w for workspace w
};

struct Workspace {
  std::string name;
  ir::DataType dtype;
  int64_t elements;
};

/// One lowered function for a GPU target.
struct DeviceFunction {
  std::string name;
  std::vector<ir::Param> params;      ///< what the caller passes, as lower() gives them
  std::vector<Workspace> workspaces;  ///< global scratch between kernels, allocated by the runtime
  std::vector<DeviceKernel> kernels;  ///< launched in order
};

DeviceFunction split_host_device(const ir::PrimFunc& f);

}  // namespace kiln::pass
