// A compiled GPU function as the runtime runs it: its device code (PTX for CUDA, OpenCL C for
// OpenCL) and how the host calls it: the tensors it takes, the scratch buffers between its
// kernels, and the kernel launches in order. The compiler makes one (codegen/build_device.h);
// bundles and the device agent carry it as JSON, which from_json validates at the door.
//
//   DeviceProgram p = DeviceProgram::from_json(Json::parse(text), "matmul.json");
//   DeviceAPI& gpu = DeviceAPI::get(TargetKind::kOpenCL);
//   LoadedDeviceProgram run(gpu, p);
//   run.launch({&a, &b, &c});   // device buffers, in p.params order
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/json.h"
#include "deploy/runtime/c_abi.h"
#include "deploy/runtime/device_api.h"

namespace kiln::runtime {

struct DeviceProgram {
  struct Tensor {
    std::string name;
    KilnDType dtype{kKilnFloat, 32, 1};
    std::vector<int64_t> shape;
    int64_t bytes() const;
  };
  struct Kernel {
    std::string name;
    LaunchConfig launch;
    /// Per kernel parameter: i >= 0 is the program's tensor i, -1 - w its workspace w.
    std::vector<int> args;
  };

  std::string name;    ///< the function
  std::string target;  ///< the target string it was built for ("cuda -arch=sm_90", "opencl")
  std::string format;  ///< "ptx" or "cl"
  std::string code;
  std::vector<Tensor> params;
  std::vector<int64_t> workspace_bytes;
  std::vector<Kernel> kernels;  ///< launched in this order

  Json to_json() const;
  /// Reads and checks one (every field present and well-typed, formats known, launch extents
  /// positive, arguments in range, shapes non-negative); kiln::Error naming `origin` and the
  /// field otherwise.
  static DeviceProgram from_json(const Json& j, const std::string& origin);
};

/// A DeviceProgram loaded on one device, its workspaces allocated: launch() runs it.
class LoadedDeviceProgram {
 public:
  /// Loads the code (kiln::Error if the device's format is not the program's, or it does not
  /// build) and finds every kernel.
  LoadedDeviceProgram(DeviceAPI& device, DeviceProgram program);

  /// Enqueues the kernels on `params` (device buffers in program().params order, each at least
  /// that tensor's bytes); returns before the device is done. kiln::Error naming the tensor for a
  /// missing or short buffer, or a buffer of another device.
  void launch(std::span<const DeviceBuffer* const> params);
  void launch(std::initializer_list<const DeviceBuffer*> params) {
    launch(std::span<const DeviceBuffer* const>(params.begin(), params.size()));
  }

  const DeviceProgram& program() const { return program_; }
  DeviceAPI& device() const { return *device_; }

 private:
  DeviceAPI* device_;
  DeviceProgram program_;
  DeviceModule module_;
  std::vector<DeviceKernelHandle> kernels_;
  std::vector<DeviceBuffer> workspaces_;
};

}  // namespace kiln::runtime
