// The back-ends behind DeviceAPI::get (device_api.cc): each loads its library once per process,
// counts its devices and opens one. Internal to the runtime.
#pragma once

#include <memory>
#include <string>

#include "deploy/runtime/device_api.h"

namespace kiln::runtime::detail {

/// The number of CUDA devices; 0, with the reason in `why`, when there is no driver or device.
int cuda_device_count(std::string* why) noexcept;
/// CUDA device `index` (its primary context); kiln::Error saying why not.
std::unique_ptr<DeviceAPI> open_cuda_device(int index);

/// The number of OpenCL devices on all platforms; 0, with the reason in `why`, when there is none.
int opencl_device_count(std::string* why) noexcept;
/// OpenCL device `index` in DeviceAPI::get's order; kiln::Error saying why not.
std::unique_ptr<DeviceAPI> open_opencl_device(int index);

}  // namespace kiln::runtime::detail
