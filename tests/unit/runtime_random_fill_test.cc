// Seeded inputs (runtime::fill_uniform): the range, determinism, pinned values (a farm's boards
// and its tuner must generate the same numbers, so a change of the generator must be caught
// here), and the float32-only rule.
#include "deploy/runtime/random_fill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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

}  // namespace
}  // namespace kiln::runtime
