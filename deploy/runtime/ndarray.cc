// Allocation and copying for NDArray.
#include "deploy/runtime/ndarray.h"

#include <cstdlib>
#include <limits>

#include "base/shape_string.h"

namespace kiln::runtime {

NDArray::~NDArray() = default;

namespace {

/// The number of elements of `shape`, checked for negative dimensions and overflow.
int64_t count_elements(const std::vector<int64_t>& shape, int64_t elem, const char* what) {
  KILN_USER_CHECK(elem > 0) << what << ": dtype has no storage size";
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_USER_CHECK(shape[i] >= 0)
        << what << ": dimension " << i << " is " << shape[i] << ", must be non-negative";
    KILN_USER_CHECK(shape[i] == 0 || count <= std::numeric_limits<int64_t>::max() / elem / shape[i])
        << what << ": shape is too large";
    count *= shape[i];
  }
  return count;
}

}  // namespace

NDArray NDArray::owning(std::shared_ptr<void> memory, void* data, std::vector<int64_t> shape,
                        int64_t count, KilnDType dtype) {
  NDArray a;
  a.state_ = std::make_unique<State>();
  State& s = *a.state_;
  s.memory = std::move(memory);
  s.shape = std::move(shape);
  s.num_elements = count;
  s.tensor.data = data;
  s.tensor.shape = s.shape.data();
  s.tensor.strides = nullptr;
  s.tensor.ndim = static_cast<int32_t>(s.shape.size());
  s.tensor.dtype = dtype;
  return a;
}

int64_t NDArray::nbytes_for(const std::vector<int64_t>& shape, KilnDType dtype) {
  const int64_t elem = dtype_bytes(dtype);
  return count_elements(shape, elem, "NDArray::empty") * elem;
}

NDArray NDArray::empty(std::vector<int64_t> shape, KilnDType dtype) {
  const int64_t elem = dtype_bytes(dtype);
  const int64_t count = count_elements(shape, elem, "NDArray::empty");
  // aligned_alloc wants a size that is a multiple of the alignment; never allocate zero bytes so
  // that data() is never null.
  const size_t bytes = static_cast<size_t>(count * elem);
  const size_t alloc = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, alloc);
  if (data == nullptr) throw std::bad_alloc();
  std::memset(data, 0, alloc);

  return owning(std::shared_ptr<void>(data, std::free), data, std::move(shape), count, dtype);
}

NDArray NDArray::external(void* data, int64_t bytes, std::vector<int64_t> shape, KilnDType dtype,
                          std::shared_ptr<void> owner) {
  const int64_t elem = dtype_bytes(dtype);
  const int64_t count = count_elements(shape, elem, "NDArray::external");
  KILN_USER_CHECK(count * elem <= bytes)
      << "NDArray::external: " << count * elem << " bytes do not fit in " << bytes;
  return owning(std::move(owner), data, std::move(shape), count, dtype);
}

NDArray NDArray::view(const NDArray& base, int64_t byte_offset, std::vector<int64_t> shape,
                      KilnDType dtype) {
  const int64_t elem = dtype_bytes(dtype);
  const int64_t count = count_elements(shape, elem, "NDArray::view");
  KILN_USER_CHECK(byte_offset >= 0 && byte_offset % elem == 0)
      << "NDArray::view: offset " << byte_offset << " is not a multiple of the element size "
      << elem;
  // As a difference: an offset near 2^63 must not overflow the sum and pass.
  KILN_USER_CHECK(byte_offset <= base.nbytes() && count * elem <= base.nbytes() - byte_offset)
      << "NDArray::view: " << count * elem << " bytes at offset " << byte_offset
      << " do not fit in an array of " << base.nbytes() << " bytes";
  NDArray a;
  a.state_ = std::make_unique<State>();
  State& s = *a.state_;
  s.memory = base.state()->memory;
  s.shape = std::move(shape);
  s.num_elements = count;
  s.tensor.data = static_cast<char*>(base.state()->tensor.data) + byte_offset;
  s.tensor.shape = s.shape.data();
  s.tensor.strides = nullptr;
  s.tensor.ndim = static_cast<int32_t>(s.shape.size());
  s.tensor.dtype = dtype;
  return a;
}

NDArray NDArray::copy() const {
  NDArray a = empty(shape(), dtype());
  std::memcpy(a.data(), data(), static_cast<size_t>(nbytes()));
  return a;
}

void NDArray::copy_from_bytes(const void* src, size_t size) {
  KILN_USER_CHECK(static_cast<int64_t>(size) == nbytes())
      << "copy_from_bytes: array of shape " << shape_string() << " and dtype "
      << dtype_to_string(dtype()) << " holds " << nbytes() << " bytes, got " << size;
  if (size != 0) std::memcpy(data(), src, size);
}

std::string NDArray::shape_string() const { return kiln::shape_string(shape()); }

void NDArray::check_element_size(size_t size) const {
  KILN_USER_CHECK(static_cast<int64_t>(size) == dtype_bytes(dtype()))
      << "NDArray of dtype " << dtype_to_string(dtype()) << " has " << dtype_bytes(dtype())
      << "-byte elements, accessed as a " << size << "-byte type";
}

}  // namespace kiln::runtime
