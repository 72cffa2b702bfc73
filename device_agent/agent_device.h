// The device an agent's target asks of this machine: a CPU target ("llvm ...") measures shared
// objects on the host; "opencl ..." and "cuda ..." targets measure DevicePrograms on this
// machine's OpenCL or CUDA device, which must exist (and, for cuda with -arch=sm_XX, have that
// compute capability) before the agent registers: a farm must never send GPU kernels to a device
// that cannot run them. A "vdla" target measures VdlaPrograms on the VDLA's simulator, timed by
// its cycle model (deploy/runtime/vdla_run.h), which every machine has. The agent links no
// compiler, so the target's kind and -arch are read here from its words.
//
//   AgentDevice d = probe_agent_device("cuda -arch=sm_61");
//   // kiln::Error: "target 'cuda -arch=sm_61' needs a CUDA device: no CUDA device: libcuda.so.1
//   //               not found (...)"
#pragma once

#include <string>

#include "base/target_kind.h"

namespace kiln::agent {

struct AgentDevice {
  /// The target's kind, which is the runner's device: kCpu (shared objects), kCuda or kOpenCL
  /// (DevicePrograms), kVdla (VdlaPrograms run by kiln-runner's device "vdla").
  TargetKind kind = TargetKind::kCpu;
  /// The GPU's (DeviceAPI::description()), the VDLA's (runtime::vdla_device_description());
  /// empty for the CPU
  std::string description;
};

/// The device `target` measures on; kiln::Error naming the target and the reason when its kind is
/// unknown, this machine has no such device, or a CUDA device of another architecture than -arch.
AgentDevice probe_agent_device(const std::string& target);

}  // namespace kiln::agent
