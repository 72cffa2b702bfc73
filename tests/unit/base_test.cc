// The small shared pieces of base/: floor division and modulo on int64, the shape formatter.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/int_math.h"
#include "base/shape_string.h"

namespace kiln {
namespace {

TEST(IntMath, FloorDivisionRoundsTowardNegativeInfinity) {
  EXPECT_EQ(floor_div(7, 2), 3);
  EXPECT_EQ(floor_div(-7, 2), -4);
  EXPECT_EQ(floor_div(7, -2), -4);
  EXPECT_EQ(floor_div(-7, -2), 3);
  EXPECT_EQ(floor_div(-8, 2), -4);
  EXPECT_EQ(floor_div(0, -3), 0);
  EXPECT_EQ(floor_div(std::numeric_limits<int64_t>::min(), 2),
            std::numeric_limits<int64_t>::min() / 2);
  static_assert(floor_div(-1, 16) == -1);
}

TEST(IntMath, FloorModuloHasTheDivisorsSign) {
  EXPECT_EQ(floor_mod(7, 2), 1);
  EXPECT_EQ(floor_mod(-7, 2), 1);
  EXPECT_EQ(floor_mod(7, -2), -1);
  EXPECT_EQ(floor_mod(-7, -2), -1);
  EXPECT_EQ(floor_mod(-8, 4), 0);
  static_assert(floor_mod(-1, 16) == 15);
}

TEST(IntMath, DivisionAndModuloAgreeOnEveryPairInARange) {
  for (int64_t a = -40; a <= 40; ++a) {
    for (int64_t b = -9; b <= 9; ++b) {
      if (b == 0) continue;
      const int64_t q = floor_div(a, b), r = floor_mod(a, b);
      EXPECT_EQ(q * b + r, a) << a << " " << b;
      EXPECT_TRUE(b > 0 ? (r >= 0 && r < b) : (r <= 0 && r > b)) << a << " " << b;
    }
  }
}

TEST(ShapeString, PrintsDimensionsInBrackets) {
  EXPECT_EQ(shape_string(std::vector<int64_t>{1, 3, 224, 224}), "[1, 3, 224, 224]");
  EXPECT_EQ(shape_string(std::vector<int64_t>{1, 3, 224, 224}, ","), "[1,3,224,224]");
  EXPECT_EQ(shape_string(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(shape_string(std::vector<int64_t>{-1, 0}), "[-1, 0]");
}

}  // namespace
}  // namespace kiln
