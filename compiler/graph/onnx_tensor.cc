// Converting tensors between ONNX's TensorProto and Kiln's NDArray.
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"
#include "base/shape_string.h"
#include "compiler/graph/onnx_detail.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph::onnx_detail {

using onnx::TensorProto;

/// ONNX element type → runtime dtype; false for types Kiln has no use for (string, complex, ...).
bool onnx_dtype(int elem_type, KilnDType* out) {
  switch (elem_type) {
    case TensorProto::FLOAT:
      *out = runtime::kFloat32;
      return true;
    case TensorProto::FLOAT16:
      *out = runtime::kFloat16;
      return true;
    case TensorProto::DOUBLE:
      *out = runtime::kFloat64;
      return true;
    case TensorProto::INT8:
      *out = runtime::kInt8;
      return true;
    case TensorProto::INT16:
      *out = runtime::kInt16;
      return true;
    case TensorProto::INT32:
      *out = runtime::kInt32;
      return true;
    case TensorProto::INT64:
      *out = runtime::kInt64;
      return true;
    case TensorProto::UINT8:
      *out = runtime::kUInt8;
      return true;
    case TensorProto::UINT16:
      *out = KilnDType{kKilnUInt, 16, 1};
      return true;
    case TensorProto::UINT32:
      *out = KilnDType{kKilnUInt, 32, 1};
      return true;
    case TensorProto::UINT64:
      *out = KilnDType{kKilnUInt, 64, 1};
      return true;
    case TensorProto::BOOL:
      *out = runtime::kBool;
      return true;
    default:
      return false;
  }
}

std::string onnx_dtype_name(int elem_type) {
  return TensorProto::DataType_IsValid(elem_type)
             ? TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elem_type))
             : "type " + std::to_string(elem_type);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

/// Element `i` of a numeric constant as a double.
double element_as_double(const runtime::NDArray& a, int64_t i) {
  const KilnDType t = a.dtype();
  const void* p = static_cast<const char*>(a.data()) + i * runtime::dtype_bytes(t);
  auto load = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  if (t.code == kKilnFloat) {
    if (t.bits == 16) return half_to_float(load(uint16_t{}));
    if (t.bits == 32) return load(float{});
    return load(double{});
  }
  if (t.code == kKilnInt) {
    if (t.bits == 8) return load(int8_t{});
    if (t.bits == 16) return load(int16_t{});
    if (t.bits == 32) return load(int32_t{});
    return static_cast<double>(load(int64_t{}));
  }
  if (t.bits <= 8) return load(uint8_t{});
  if (t.bits == 16) return load(uint16_t{});
  if (t.bits == 32) return load(uint32_t{});
  return static_cast<double>(load(uint64_t{}));
}

/// Converts an initializer or a Constant's tensor; `what` names it in messages.
runtime::NDArray tensor_to_ndarray(const TensorProto& t, const std::string& what) {
  KilnDType dtype;
  KILN_USER_CHECK(onnx_dtype(t.data_type(), &dtype))
      << what << " has element type " << onnx_dtype_name(t.data_type())
      << ", which Kiln does not support";
  KILN_USER_CHECK(t.data_location() != TensorProto::EXTERNAL)
      << what << " keeps its data in an external file, which Kiln does not read (save the model "
      << "with all tensors inside it)";
  KILN_USER_CHECK(!t.has_segment()) << what << " is a segmented tensor, which Kiln does not read";
  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  const int64_t elem = runtime::dtype_bytes(dtype);
  int64_t n = 1;
  for (int64_t d : shape) {
    KILN_USER_CHECK(d >= 0) << what << " has a negative dimension " << d;
    KILN_USER_CHECK(d == 0 || n <= std::numeric_limits<int64_t>::max() / elem / d)
        << what << " has a shape too large to hold";
    n *= d;
  }
  // Check what the file holds against the shape before allocating: a corrupt shape must not
  // allocate (or fail to allocate) terabytes.
  const std::string shape_str = shape_string(shape);
  if (t.has_raw_data()) {
    KILN_USER_CHECK(static_cast<int64_t>(t.raw_data().size()) == n * elem)
        << what << " holds " << t.raw_data().size() << " bytes of raw data, its shape " << shape_str
        << " of " << runtime::dtype_to_string(dtype) << " needs " << n * elem;
  } else {
    int64_t have = 0;
    switch (t.data_type()) {
      case TensorProto::FLOAT:
        have = t.float_data_size();
        break;
      case TensorProto::DOUBLE:
        have = t.double_data_size();
        break;
      case TensorProto::INT64:
        have = t.int64_data_size();
        break;
      case TensorProto::UINT32:
      case TensorProto::UINT64:
        have = t.uint64_data_size();
        break;
      default:
        have = t.int32_data_size();
        break;
    }
    KILN_USER_CHECK(have == n) << what << " holds " << have << " values, its shape " << shape_str
                               << " needs " << n;
  }
  runtime::NDArray a = runtime::NDArray::empty(shape, dtype);
  if (t.has_raw_data()) {
    if (n != 0) std::memcpy(a.data(), t.raw_data().data(), static_cast<size_t>(a.nbytes()));
    return a;
  }
  char* out = static_cast<char*>(a.data());
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      if (n) std::memcpy(out, t.float_data().data(), static_cast<size_t>(n) * 4);
      break;
    case TensorProto::DOUBLE:
      if (n) std::memcpy(out, t.double_data().data(), static_cast<size_t>(n) * 8);
      break;
    case TensorProto::INT64:
      if (n) std::memcpy(out, t.int64_data().data(), static_cast<size_t>(n) * 8);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = t.uint64_data(static_cast<int>(i));
        std::memcpy(out + i * elem, &v, static_cast<size_t>(elem));  // little-endian narrowing
      }
      break;
    default:  // int32, int16, int8, uint16, uint8, bool, float16 (bits): one int32 per element
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        std::memcpy(out + i * elem, &v, static_cast<size_t>(elem));  // little-endian narrowing
      }
      break;
  }
  return a;
}

int onnx_elem_type(KilnDType dtype) {
  for (int type = TensorProto::FLOAT; type <= TensorProto::UINT64; ++type) {
    KilnDType d;
    if (onnx_dtype(type, &d) && runtime::dtype_equal(d, dtype)) return type;
  }
  return TensorProto::UNDEFINED;
}

std::string onnx_type_string(KilnDType dtype) {
  std::string name = onnx_dtype_name(onnx_elem_type(dtype));
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return "tensor(" + name + ")";
}

/// The TensorProto holding `a` (raw data), for constants given to shape inference.
TensorProto to_tensor_proto(const std::string& name, const runtime::NDArray& a) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx_elem_type(a.dtype()));
  for (int64_t d : a.shape()) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(a.data()), static_cast<size_t>(a.nbytes())));
  return t;
}

}  // namespace kiln::graph::onnx_detail
