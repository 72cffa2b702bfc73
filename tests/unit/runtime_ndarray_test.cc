// Tests for the runtime's element types and NDArray: parsing, allocation, alignment, copies, and
// the C view staying valid across moves.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {
namespace {

TEST(DTypeTest, ParsesAndPrintsNames) {
  for (const char* name : {"float16", "float32", "float64", "int8", "int16", "int32", "int64",
                           "uint8", "uint16", "uint32", "uint64", "bool", "float32x4", "int8x16"}) {
    EXPECT_EQ(dtype_to_string(parse_dtype(name)), name);
  }
  EXPECT_TRUE(dtype_equal(parse_dtype("float32"), kFloat32));
  EXPECT_TRUE(dtype_equal(parse_dtype("int8"), kInt8));
  EXPECT_TRUE(dtype_equal(parse_dtype("uint8"), kUInt8));
  EXPECT_TRUE(dtype_equal(parse_dtype("bool"), kBool));
  EXPECT_FALSE(dtype_equal(kInt32, kFloat32));
  KilnDType v = parse_dtype("float32x8");
  EXPECT_EQ(v.code, kKilnFloat);
  EXPECT_EQ(v.bits, 32);
  EXPECT_EQ(v.lanes, 8);
}

TEST(DTypeTest, BytesPerElement) {
  EXPECT_EQ(dtype_bytes(kFloat32), 4);
  EXPECT_EQ(dtype_bytes(kFloat16), 2);
  EXPECT_EQ(dtype_bytes(kInt8), 1);
  EXPECT_EQ(dtype_bytes(kInt64), 8);
  EXPECT_EQ(dtype_bytes(kBool), 1);
  EXPECT_EQ(dtype_bytes(parse_dtype("float32x4")), 16);
}

TEST(DTypeTest, DtypeOfCppTypes) {
  EXPECT_TRUE(dtype_equal(dtype_of<float>(), kFloat32));
  EXPECT_TRUE(dtype_equal(dtype_of<double>(), kFloat64));
  EXPECT_TRUE(dtype_equal(dtype_of<int32_t>(), kInt32));
  EXPECT_TRUE(dtype_equal(dtype_of<int64_t>(), kInt64));
  EXPECT_TRUE(dtype_equal(dtype_of<uint8_t>(), kUInt8));
  EXPECT_TRUE(dtype_equal(dtype_of<bool>(), kBool));
}

TEST(DTypeTest, RejectsUnknownNames) {
  for (const char* name : {"", "float", "float8", "int7", "int", "uint1", "double", "float32x",
                           "float32x0", "float32xy", "Float32", "int32 "}) {
    EXPECT_THROW(parse_dtype(name), Error) << name;
  }
  try {
    parse_dtype("floot32");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dtype 'floot32'"), std::string::npos) << e.what();
  }
}

TEST(NDArrayTest, EmptyIsZeroedAlignedAndDescribed) {
  NDArray a = NDArray::empty({2, 3, 5}, kFloat32);
  ASSERT_TRUE(a.defined());
  EXPECT_EQ(a.num_elements(), 30);
  EXPECT_EQ(a.nbytes(), 120);
  EXPECT_EQ(a.ndim(), 3);
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_TRUE(dtype_equal(a.dtype(), kFloat32));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % NDArray::kAlignment, 0u);
  for (float x : a.to_vector<float>()) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(a.shape_string(), "[2, 3, 5]");

  const KilnTensor* t = a.tensor();
  EXPECT_EQ(t->data, a.data());
  EXPECT_EQ(t->ndim, 3);
  EXPECT_EQ(t->strides, nullptr);
  EXPECT_EQ(t->shape[0], 2);
  EXPECT_EQ(t->shape[2], 5);
  EXPECT_TRUE(dtype_equal(t->dtype, kFloat32));
}

TEST(NDArrayTest, ScalarAndZeroSizedArrays) {
  NDArray s = NDArray::empty({}, kInt64);
  EXPECT_EQ(s.num_elements(), 1);
  EXPECT_EQ(s.ndim(), 0);
  s.data<int64_t>()[0] = 42;
  EXPECT_EQ(s.to_vector<int64_t>(), std::vector<int64_t>{42});

  NDArray z = NDArray::empty({4, 0}, kFloat32);
  EXPECT_EQ(z.num_elements(), 0);
  EXPECT_EQ(z.nbytes(), 0);
  EXPECT_NE(z.data(), nullptr);
  EXPECT_TRUE(z.to_vector<float>().empty());
  z.copy_from(std::vector<float>{});
  NDArray zc = z.copy();
  EXPECT_EQ(zc.shape(), z.shape());
}

TEST(NDArrayTest, RejectsBadShapes) {
  EXPECT_THROW(NDArray::empty({2, -1}, kFloat32), Error);
  EXPECT_THROW(NDArray::empty({int64_t{1} << 40, int64_t{1} << 40}, kFloat32), Error);
}

TEST(NDArrayTest, CopiesToAndFromVectors) {
  NDArray a = NDArray::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(dtype_equal(a.dtype(), kFloat32));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(a.data<float>()[4], 5.0f);

  // Same element size reinterprets, a different size is an error.
  EXPECT_NO_THROW(a.data<int32_t>());
  EXPECT_THROW(a.data<double>(), Error);
  EXPECT_THROW(a.to_vector<int8_t>(), Error);
  EXPECT_THROW(a.copy_from(std::vector<float>{1, 2}), Error);
  EXPECT_THROW(a.copy_from(std::vector<double>(6)), Error);

  std::vector<float> raw = {9, 8, 7, 6, 5, 4};
  a.copy_from_bytes(raw.data(), raw.size() * sizeof(float));
  EXPECT_EQ(a.to_vector<float>(), raw);
  EXPECT_THROW(a.copy_from_bytes(raw.data(), 4), Error);

  NDArray b = NDArray::from_vector<uint8_t>({1, 0, 1}, {3});
  EXPECT_TRUE(dtype_equal(b.dtype(), kUInt8));
  NDArray h = NDArray::empty({3}, kFloat16);
  h.copy_from(std::vector<uint16_t>{0x3c00, 0, 0xbc00});  // half bits: 1, 0, -1
  EXPECT_EQ(h.to_vector<uint16_t>()[2], 0xbc00);
}

TEST(NDArrayTest, CopyIsDeep) {
  NDArray a = NDArray::from_vector<int32_t>({1, 2, 3}, {3});
  NDArray b = a.copy();
  EXPECT_NE(a.data(), b.data());
  b.data<int32_t>()[0] = 100;
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(b.to_vector<int32_t>(), (std::vector<int32_t>{100, 2, 3}));
  EXPECT_EQ(b.shape(), a.shape());
}

TEST(NDArrayTest, TensorViewSurvivesMoves) {
  NDArray a = NDArray::from_vector<float>({1, 2, 3, 4}, {2, 2});
  const KilnTensor* view = a.tensor();
  const int64_t* shape = view->shape;
  void* data = view->data;

  NDArray b = std::move(a);
  EXPECT_FALSE(a.defined());  // NOLINT(bugprone-use-after-move): moved-from is null
  EXPECT_EQ(b.tensor(), view);
  EXPECT_EQ(view->shape, shape);
  EXPECT_EQ(view->data, data);

  std::vector<NDArray> arrays;
  arrays.push_back(std::move(b));
  for (int i = 0; i < 100; ++i) arrays.push_back(NDArray::empty({i + 1}, kInt8));  // reallocates
  EXPECT_EQ(arrays[0].tensor(), view);
  EXPECT_EQ(view->shape[0], 2);
  EXPECT_EQ(view->shape[1], 2);
  EXPECT_EQ(static_cast<const float*>(view->data)[3], 4.0f);
}

TEST(NDArrayTest, NullArrayUseIsAnInternalError) {
  NDArray a;
  EXPECT_FALSE(a.defined());
  EXPECT_THROW(a.shape(), InternalError);
}

}  // namespace
}  // namespace kiln::runtime

namespace kiln::runtime {
namespace {

TEST(NDArrayView, SharesAndOutlivesItsBase) {
  NDArray v;
  {
    NDArray base = NDArray::empty({64}, kFloat32);
    for (int i = 0; i < 64; ++i) base.data<float>()[i] = float(i);
    v = NDArray::view(base, 16 * 4, {4, 4}, kFloat32);
    base.data<float>()[16] = -1.0f;
  }
  EXPECT_EQ(v.shape(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(v.data<float>()[0], -1.0f);
  EXPECT_EQ(v.data<float>()[15], 31.0f);
}

TEST(NDArrayView, RejectsOutOfBoundsAndMisalignedViews) {
  NDArray base = NDArray::empty({8}, kFloat32);
  EXPECT_THROW(NDArray::view(base, 16, {8}, kFloat32), kiln::Error);
  EXPECT_THROW(NDArray::view(base, 2, {1}, kFloat32), kiln::Error);
  EXPECT_THROW(NDArray::view(base, 0, {-1}, kFloat32), kiln::Error);
  EXPECT_NO_THROW(NDArray::view(base, 4, {2, 2}, kInt32));
}

}  // namespace
}  // namespace kiln::runtime
