// DeviceTensor: a tensor that lives in a device's memory — a DeviceBuffer with a shape and a
// dtype, row-major compact like NDArray — and the copies between it and a host NDArray. What the
// graph executor keeps on a GPU between kernels; move-only, like the buffer it owns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/runtime/c_abi.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

class DeviceTensor {
 public:
  /// A null tensor (defined() is false).
  DeviceTensor() = default;

  /// An uninitialized tensor of `shape` and `dtype` on `device`. kiln::Error as NDArray::empty.
  static DeviceTensor empty(DeviceAPI& device, std::vector<int64_t> shape, KilnDType dtype);
  /// A tensor on `device` holding a copy of `host`.
  static DeviceTensor from_host(DeviceAPI& device, const NDArray& host);

  /// Copies `host` in; kiln::Error unless its shape and dtype are this tensor's.
  void copy_from_host(const NDArray& host);
  /// Copies this tensor out into `host`; kiln::Error unless its shape and dtype are this tensor's.
  void copy_to_host(NDArray& host) const;
  /// A new host array holding this tensor's elements.
  NDArray to_host() const;

  bool defined() const { return buffer_.defined(); }
  DeviceAPI& device() const { return *buffer_.device(); }
  const DeviceBuffer& buffer() const { return buffer_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  KilnDType dtype() const { return dtype_; }
  int64_t nbytes() const { return buffer_.bytes(); }

 private:
  DeviceTensor(DeviceBuffer buffer, std::vector<int64_t> shape, KilnDType dtype)
      : buffer_(std::move(buffer)), shape_(std::move(shape)), dtype_(dtype) {}
  void check_matches(const NDArray& host, const char* what) const;

  DeviceBuffer buffer_;
  std::vector<int64_t> shape_;
  KilnDType dtype_{};
};

}  // namespace kiln::runtime
