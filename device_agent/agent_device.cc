// probe_agent_device: the target's first word picks the device kind; a GPU must be there.
#include "device_agent/agent_device.h"

#include <sstream>

#include "base/error.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/vdla_run.h"

namespace kiln::agent {

AgentDevice probe_agent_device(const std::string& target) {
  std::istringstream words(target);
  std::string kind, word, arch;
  words >> kind;
  while (words >> word) {
    if (word.rfind("-arch=", 0) == 0) arch = word.substr(6);
  }
  AgentDevice d;
  d.kind = parse_target_kind(kind);
  if (d.kind == TargetKind::kVdla) {
    d.description = runtime::vdla_device_description();
    return d;
  }
  if (!is_gpu(d.kind)) return d;
  const char* name = d.kind == TargetKind::kCuda ? "CUDA" : "OpenCL";
  std::string why;
  KILN_USER_CHECK(runtime::DeviceAPI::available(d.kind, &why))
      << "target '" << target << "' needs a " << name
      << " device, and this machine has none: " << why;
  runtime::DeviceAPI& device = runtime::DeviceAPI::get(d.kind);
  d.description = device.description();
  if (d.kind == TargetKind::kCuda && !arch.empty()) {
    const runtime::DeviceInfo& info = device.info();
    const std::string has = "sm_" + std::to_string(info.compute_capability_major) +
                            std::to_string(info.compute_capability_minor);
    KILN_USER_CHECK(has == arch) << "target '" << target << "' builds for " << arch
                                 << ", but this machine's CUDA device is " << has << " ("
                                 << info.name << "); give -arch=" << has;
  }
  return d;
}

}  // namespace kiln::agent
