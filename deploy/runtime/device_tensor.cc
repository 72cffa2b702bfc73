// DeviceTensor: allocation from a shape, and checked copies to and from host arrays.
#include "deploy/runtime/device_tensor.h"

#include <string>
#include <utility>

#include "base/error.h"
#include "base/shape_string.h"
#include "deploy/runtime/dtype.h"

namespace kiln::runtime {

DeviceTensor DeviceTensor::empty(DeviceAPI& device, std::vector<int64_t> shape, KilnDType dtype) {
  const int64_t bytes = NDArray::nbytes_for(shape, dtype);
  return DeviceTensor(device.alloc(bytes), std::move(shape), dtype);
}

DeviceTensor DeviceTensor::from_host(DeviceAPI& device, const NDArray& host) {
  DeviceTensor tensor = empty(device, host.shape(), host.dtype());
  tensor.copy_from_host(host);
  return tensor;
}

void DeviceTensor::check_matches(const NDArray& host, const char* what) const {
  KILN_USER_CHECK(defined()) << what << ": null device tensor";
  KILN_USER_CHECK(host.shape() == shape_ && dtype_equal(host.dtype(), dtype_))
      << what << ": the host array is " << dtype_to_string(host.dtype()) << host.shape_string()
      << ", the device tensor " << dtype_to_string(dtype_) << shape_string(shape_);
}

void DeviceTensor::copy_from_host(const NDArray& host) {
  check_matches(host, "copy_from_host");
  device().copy_to_device(buffer_, host.data(), host.nbytes());
}

void DeviceTensor::copy_to_host(NDArray& host) const {
  check_matches(host, "copy_to_host");
  device().copy_to_host(host.data(), buffer_, host.nbytes());
}

NDArray DeviceTensor::to_host() const {
  NDArray host = NDArray::empty(shape_, dtype_);
  copy_to_host(host);
  return host;
}

}  // namespace kiln::runtime
