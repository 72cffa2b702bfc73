// Config spaces: split enumeration, mixed-radix indexing both ways, and bad knob names.
#include "compiler/space/space.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/common/expect_error.h"

namespace kiln::space {
namespace {

TEST(ConfigSpace, SplitEnumeratesEveryFactorization) {
  ConfigSpace s;
  s.define_split("tile", 12, 2);
  // 12 = 12*1, 6*2, 4*3, 3*4, 2*6, 1*12
  EXPECT_EQ(s.size(), 6u);
  std::set<std::vector<int64_t>> seen;
  for (uint64_t i = 0; i < s.size(); ++i) {
    auto f = s.get(i).split("tile");
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0] * f[1], 12);
    seen.insert(f);
  }
  EXPECT_EQ(seen.size(), 6u);
}

TEST(ConfigSpace, FactorsOfLargeAndSquareExtents) {
  ConfigSpace big;
  big.define_split("t", 2147483646, 2);  // 2 * 3^2 * 7 * 11 * 31 * 151 * 331: 192 factors
  EXPECT_EQ(big.size(), 192u);
  ConfigSpace square;
  square.define_split("t", 36, 2);
  std::vector<int64_t> inner;
  for (uint64_t i = 0; i < square.size(); ++i) inner.push_back(square.get(i).split("t")[1]);
  EXPECT_EQ(inner, (std::vector<int64_t>{1, 2, 3, 4, 6, 9, 12, 18, 36}));
}

TEST(ConfigSpace, ThreeWaySplitAndMaxInner) {
  ConfigSpace s;
  s.define_split("t", 16, 3, SplitPolicy::kFactors, 4);
  for (uint64_t i = 0; i < s.size(); ++i) {
    auto f = s.get(i).split("t");
    EXPECT_EQ(f[0] * f[1] * f[2], 16);
    EXPECT_LE(f[2], 4);
  }
  EXPECT_EQ(s.size(), 12u);  // inner in {1,2,4}: 5 + 4 + 3 ways for the rest
}

TEST(ConfigSpace, Power2SplitCoversTheExtent) {
  ConfigSpace s;
  s.define_split("t", 100, 2, SplitPolicy::kPower2);
  for (uint64_t i = 0; i < s.size(); ++i) {
    auto f = s.get(i).split("t");
    EXPECT_GE(f[0] * f[1], 100);
    EXPECT_LT((f[0] - 1) * f[1], 100);
  }
}

TEST(ConfigSpace, FactorsAndPowersOfTwo) {
  ConfigSpace s;
  s.define_split("t", 14, 2, SplitPolicy::kFactorsAndPower2, 8);
  std::vector<std::string> got;
  for (uint64_t i = 0; i < s.size(); ++i) {
    auto f = s.get(i).split("t");
    got.push_back(std::to_string(f[0]) + "x" + std::to_string(f[1]));
  }
  // 1, 2 and 7 divide 14; 4 and 8 leave a partial last tile; 14 is over the limit.
  EXPECT_EQ(got, (std::vector<std::string>{"14x1", "7x2", "4x4", "2x7", "2x8"}));
  EXPECT_THROW(s.define_split("u", 14, 3, SplitPolicy::kFactorsAndPower2), Error);
}

TEST(ConfigSpace, IndexAndPositionsRoundTrip) {
  ConfigSpace s;
  s.define_split("a", 8, 2);
  s.define_knob("u", {1, 2, 4});
  s.define_knob("v", {0, 1});
  EXPECT_EQ(s.size(), 4u * 3 * 2);
  for (uint64_t i = 0; i < s.size(); ++i) {
    Config c = s.get(i);
    EXPECT_EQ(s.from_positions(c.positions()).index(), i);
  }
  Config c = s.get(5);
  EXPECT_EQ(c.str(), "a=[4, 2] u=2 v=0");  // 5 = 1 + 4*1: a at position 1, u at 1
}

TEST(ConfigSpace, ConfigOutlivesItsSpace) {
  Config c;
  {
    ConfigSpace s;
    s.define_knob("u", {3, 5});
    c = s.get(1);
  }
  EXPECT_EQ(c.knob("u"), 5);
}

TEST(ConfigSpace, BadRequestsNameTheKnob) {
  ConfigSpace s;
  s.define_knob("u", {1, 2});
  EXPECT_ERROR_CONTAINS(s.define_knob("u", {3}), "knob 'u' defined twice");
  EXPECT_ERROR_CONTAINS(s.get(2), "outside the space of 2 points");
  EXPECT_ERROR_CONTAINS(s.get(0).split("u"), "'u' is not a split");
  EXPECT_ERROR_CONTAINS(s.get(0).knob("w"), "no knob 'w'");
  EXPECT_ERROR_CONTAINS(s.define_split("z", 0, 2), "extent must be positive");
}

}  // namespace
}  // namespace kiln::space
