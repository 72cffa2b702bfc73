// How a GPU kernel is launched (docs/gpu.md section 1): blocks per grid and threads per block in
// x, y, z, and the bytes of dynamic shared memory per block. The compiler's split_host_device
// computes it, a DeviceProgram carries it, and the runtime's DeviceAPI launches with it (CUDA's
// grid of blocks; OpenCL's global size is grid x block per dimension and its local size block).
// On OpenCL, dynamic shared memory is one trailing `__local` pointer argument of that size,
// appended after the kernel's own arguments.
#pragma once

#include <array>
#include <cstdint>

namespace kiln {

struct LaunchConfig {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t dyn_shared_bytes = 0;
};

}  // namespace kiln
