// NDArray: an owning n-dimensional array in host memory, the tensor type the runtime hands to
// compiled functions. Its buffer is 64-byte aligned and row-major compact; tensor() gives the C
// view (KilnTensor) that generated code reads. An array moves but does not copy implicitly (copy()
// makes a deep copy); view() makes an array over part of another's buffer, sharing ownership. Not
// thread-safe for concurrent mutation, like any container; distinct arrays may be used from
// distinct threads.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/c_abi.h"
#include "deploy/runtime/dtype.h"

namespace kiln::runtime {

class NDArray {
 public:
  /// Alignment in bytes of every buffer the runtime allocates.
  static constexpr size_t kAlignment = 64;

  /// A null array (defined() is false); only assignment and defined() may be used on it.
  NDArray() = default;
  NDArray(NDArray&&) noexcept = default;
  NDArray& operator=(NDArray&&) noexcept = default;
  NDArray(const NDArray&) = delete;
  NDArray& operator=(const NDArray&) = delete;
  ~NDArray();

  /// A new array of the given shape and dtype, filled with zero bytes. Throws kiln::Error if a
  /// dimension is negative or the size overflows.
  static NDArray empty(std::vector<int64_t> shape, KilnDType dtype);

  /// The bytes an array of `shape` and `dtype` holds, computed without allocating (for checking
  /// a size a file announces against the bytes it has). kiln::Error as empty().
  static int64_t nbytes_for(const std::vector<int64_t>& shape, KilnDType dtype);

  /// An array of `shape` and `dtype` over the bytes of `base` starting at `byte_offset`, sharing
  /// (and keeping alive) base's memory: the graph executor places many tensors in one pool.
  static NDArray view(const NDArray& base, int64_t byte_offset, std::vector<int64_t> shape,
                      KilnDType dtype);

  /// An array of `shape` and `dtype` over `bytes` bytes at `data`, memory the array does not own:
  /// `owner` keeps it alive (the graph executor places tensors in the VDLA's shared DRAM).
  static NDArray external(void* data, int64_t bytes, std::vector<int64_t> shape, KilnDType dtype,
                          std::shared_ptr<void> owner);

  /// A new array holding `values`, whose count must match the shape; dtype is dtype_of<T>().
  template <typename T>
  static NDArray from_vector(const std::vector<T>& values, std::vector<int64_t> shape) {
    NDArray a = empty(std::move(shape), dtype_of<T>());
    a.copy_from(values);
    return a;
  }

  /// A deep copy: same shape and dtype, its own buffer.
  NDArray copy() const;

  bool defined() const { return state_ != nullptr; }
  void* data() { return state()->tensor.data; }
  const void* data() const { return state()->tensor.data; }

  /// The buffer as T*; throws kiln::Error if sizeof(T) differs from the element size.
  template <typename T>
  T* data() {
    check_element_size(sizeof(T));
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data() const {
    check_element_size(sizeof(T));
    return static_cast<const T*>(data());
  }

  const std::vector<int64_t>& shape() const { return state()->shape; }
  int32_t ndim() const { return static_cast<int32_t>(shape().size()); }
  KilnDType dtype() const { return state()->tensor.dtype; }
  int64_t num_elements() const { return state()->num_elements; }
  int64_t nbytes() const { return num_elements() * dtype_bytes(dtype()); }

  /// The C view for calling compiled code. It points into this array's heap state, so it stays
  /// valid (same address) after the NDArray is moved, until the array that owns it is destroyed.
  const KilnTensor* tensor() const { return &state()->tensor; }

  /// Copies `values` in; throws kiln::Error unless there are num_elements() of them and sizeof(T)
  /// is the element size.
  template <typename T>
  void copy_from(const std::vector<T>& values) {
    static_assert(!std::is_same_v<T, bool>, "std::vector<bool> is packed; use uint8_t");
    check_element_size(sizeof(T));
    KILN_USER_CHECK(static_cast<int64_t>(values.size()) == num_elements())
        << "copy_from: array of shape " << shape_string() << " has " << num_elements()
        << " elements, got " << values.size() << " values";
    if (nbytes() != 0) std::memcpy(data(), values.data(), static_cast<size_t>(nbytes()));
  }

  /// Copies exactly nbytes() bytes in from `src`; throws kiln::Error if `size` is different.
  void copy_from_bytes(const void* src, size_t size);

  /// The elements as a vector; throws kiln::Error if sizeof(T) is not the element size.
  template <typename T>
  std::vector<T> to_vector() const {
    static_assert(!std::is_same_v<T, bool>, "std::vector<bool> is packed; use uint8_t");
    check_element_size(sizeof(T));
    std::vector<T> out(static_cast<size_t>(num_elements()));
    if (nbytes() != 0) std::memcpy(out.data(), data(), static_cast<size_t>(nbytes()));
    return out;
  }

  /// "[2, 3]" — for messages.
  std::string shape_string() const;

 private:
  // Everything lives on the heap so that tensor() and its shape pointer survive moves.
  struct State {
    std::shared_ptr<void> memory;  ///< the allocation, shared by the arrays that view it
    std::vector<int64_t> shape;
    int64_t num_elements = 0;
    KilnTensor tensor{};
  };

  /// An array of `count` elements at `data`, contiguous, kept alive by `memory`.
  static NDArray owning(std::shared_ptr<void> memory, void* data, std::vector<int64_t> shape,
                        int64_t count, KilnDType dtype);

  const State* state() const {
    KILN_ICHECK(state_ != nullptr) << "use of a null NDArray";
    return state_.get();
  }
  State* state() {
    KILN_ICHECK(state_ != nullptr) << "use of a null NDArray";
    return state_.get();
  }
  void check_element_size(size_t size) const;

  std::unique_ptr<State> state_;
};

}  // namespace kiln::runtime
