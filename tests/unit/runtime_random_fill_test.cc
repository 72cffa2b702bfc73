// Seeded inputs (runtime::fill_uniform): the range, determinism, pinned values (a farm's boards
// and its tuner must generate the same numbers, so a change of the generator must be caught
// here), and the float32-only rule of fill_uniform; integer inputs in a range (fill_uniform_int,
// the VDLA's int8 / int32 tasks) with their own pinned values, and fill_input's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "deploy/runtime/random_fill.h"
#include "tests/common/expect_error.h"

namespace kiln::runtime {
namespace {

std::vector<float> values(const NDArray& a) {
  const float* p = a.data<float>();
  return std::vector<float>(p, p + a.num_elements());
}

NDArray filled(std::vector<int64_t> shape, uint64_t seed) {
  NDArray a = NDArray::empty(std::move(shape), kFloat32);
  fill_uniform(a, seed);
  return a;
}

TEST(RandomFill, ValuesAreInMinusOneToOne) {
  const std::vector<float> v = values(filled({64, 3, 7, 7}, 12345));
  float lo = 1, hi = -1;
  double sum = 0;
  for (float x : v) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  // 9408 draws spread over the whole range, centred on 0.
  EXPECT_LT(lo, -0.99f);
  EXPECT_GT(hi, 0.99f);
  EXPECT_NEAR(sum / static_cast<double>(v.size()), 0.0, 0.05);
}

TEST(RandomFill, SameSeedSameValuesOtherSeedOtherValues) {
  EXPECT_EQ(values(filled({16, 16}, 7)), values(filled({16, 16}, 7)));
  EXPECT_NE(values(filled({16, 16}, 7)), values(filled({16, 16}, 8)));
  // The values do not depend on the shape, only on the element count and order.
  EXPECT_EQ(values(filled({256}, 7)), values(filled({16, 16}, 7)));
}

TEST(RandomFill, PinnedValues) {
  // SplitMix64, top 24 bits mapped to [-1, 1): exact in float32, so compared exactly.
  EXPECT_EQ(values(filled({4}, 0)),
            (std::vector<float>{0.7666215896606445f, -0.13694405555725098f, -0.9471324682235718f,
                                0.9417638778686523f}));
  EXPECT_EQ(values(filled({2, 2}, 42)),
            (std::vector<float>{0.48312973976135254f, -0.680179238319397f, -0.44279778003692627f,
                                -0.3116186857223511f}));
}

TEST(RandomFill, SeedOfIsFnv1a) {
  EXPECT_EQ(seed_of(""), 14695981039346656037ull);
  EXPECT_EQ(seed_of("dense"), 0x3fd80475e188c550ull);
  EXPECT_NE(seed_of("dense:1"), seed_of("dense:2"));
}

TEST(RandomFill, OnlyFloat32) {
  NDArray d = NDArray::empty({4}, kFloat64);
  EXPECT_ERROR_CONTAINS(fill_uniform(d, 1), "only float32");
  NDArray i = NDArray::empty({4}, kInt32);
  EXPECT_ERROR_CONTAINS(fill_uniform(i, 1), "int32");
}

template <typename T>
std::vector<int64_t> ints(KilnDType dtype, int64_t n, uint64_t seed, ValueRange r) {
  NDArray a = NDArray::empty({n}, dtype);
  fill_uniform_int(a, seed, r);
  const T* p = a.data<T>();
  return std::vector<int64_t>(p, p + n);
}

TEST(RandomFill, IntegersPinned) {
  // SplitMix64's top 32 bits times the span, >> 32 (computed independently in Python).
  EXPECT_EQ(ints<int8_t>(kInt8, 6, 0, {-128, 127}),
            (std::vector<int64_t>{98, -18, -122, 120, -101, -45}));
  EXPECT_EQ(ints<int32_t>(kInt32, 6, 42, {0, 31}), (std::vector<int64_t>{23, 5, 8, 11, 1, 27}));
  EXPECT_EQ(ints<int32_t>(kInt32, 4, 7, {-(1 << 18), 1 << 18}),
            (std::vector<int64_t>{-57761, -253343, 210114, 43479}));
}

TEST(RandomFill, IntegersStayInTheirRangeAndCoverIt) {
  const std::vector<int64_t> v = ints<int32_t>(kInt32, 4096, 99, {0, 31});
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 0);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 31);
  const std::vector<int64_t> b = ints<int8_t>(kInt8, 4096, 3, {-128, 127});
  EXPECT_EQ(*std::min_element(b.begin(), b.end()), -128);
  EXPECT_EQ(*std::max_element(b.begin(), b.end()), 127);
  EXPECT_EQ(ints<int8_t>(kInt8, 5, 3, {7, 7}), (std::vector<int64_t>(5, 7)));
}

TEST(RandomFill, IntegerRangesAreChecked) {
  NDArray a = NDArray::empty({4}, kInt8);
  EXPECT_ERROR_CONTAINS(fill_uniform_int(a, 1, {-129, 0}), "does not fit int8 [-128, 127]");
  EXPECT_ERROR_CONTAINS(fill_uniform_int(a, 1, {5, 4}), "[5, 4] is empty");
  NDArray l = NDArray::empty({4}, kInt64);
  EXPECT_ERROR_CONTAINS(fill_uniform_int(l, 1, {0, int64_t{1} << 40}), "spans more than 2^32");
  NDArray f = NDArray::empty({4}, kFloat32);
  EXPECT_ERROR_CONTAINS(fill_uniform_int(f, 1, {0, 1}), "float32 arrays are not generated");
}

TEST(RandomFill, FillInputPicksTheGenerator) {
  NDArray f = NDArray::empty({4}, kFloat32);
  fill_input(f, 0, std::nullopt);
  EXPECT_EQ(values(f), values(filled({4}, 0)));
  EXPECT_ERROR_CONTAINS(fill_input(f, 0, ValueRange{0, 1}), "float32 input takes no value range");
  NDArray i = NDArray::empty({6}, kInt8);
  EXPECT_ERROR_CONTAINS(fill_input(i, 0, std::nullopt), "int8 input has no value range");
  fill_input(i, 0, ValueRange{-128, 127});
  EXPECT_EQ(std::vector<int64_t>(i.data<int8_t>(), i.data<int8_t>() + 6),
            (std::vector<int64_t>{98, -18, -122, 120, -101, -45}));
}

}  // namespace
}  // namespace kiln::runtime
