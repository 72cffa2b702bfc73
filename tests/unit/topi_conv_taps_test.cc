// topi::tap_regions: the runs of outputs of a convolution's axis that read one interval of taps.
#include <gtest/gtest.h>

#include <vector>

#include "compiler/topi/conv_taps.h"

namespace kiln::topi {
namespace {

std::vector<std::vector<int64_t>> flat(const std::vector<TapRegion>& rs) {
  std::vector<std::vector<int64_t>> v;
  for (const TapRegion& r : rs) v.push_back({r.begin, r.end, r.tap_lo, r.tap_hi});
  return v;
}

TEST(ConvTaps, AtrousRatesOnASixteenMap) {
  // Rate 12: outputs 0-3 read taps 1-2, 4-11 tap 1, 12-15 taps 0-1.
  EXPECT_EQ(flat(tap_regions(16, 16, 3, 1, 12, 12)),
            (std::vector<std::vector<int64_t>>{{0, 4, 1, 2}, {4, 12, 1, 1}, {12, 16, 0, 1}}));
  // Rate 24: the centre tap alone, everywhere.
  EXPECT_EQ(flat(tap_regions(16, 16, 3, 1, 24, 24)),
            (std::vector<std::vector<int64_t>>{{0, 16, 1, 1}}));
  // Rate 1, padding 1: the borders miss one tap.
  EXPECT_EQ(flat(tap_regions(8, 8, 3, 1, 1, 1)),
            (std::vector<std::vector<int64_t>>{{0, 1, 1, 2}, {1, 7, 0, 2}, {7, 8, 0, 1}}));
}

TEST(ConvTaps, StridedAndPaddingOnly) {
  // Stride 2, rate 8, padding 8 over 16: outputs 0-3 read taps 1-2, 4-7 taps 0-1.
  EXPECT_EQ(flat(tap_regions(16, 8, 3, 2, 8, 8)),
            (std::vector<std::vector<int64_t>>{{0, 4, 1, 2}, {4, 8, 0, 1}}));
  // A 1-tap kernel with padding 2: the two outputs at each end read only padding.
  const auto r = tap_regions(8, 12, 1, 1, 1, 2);
  EXPECT_EQ(flat(r),
            (std::vector<std::vector<int64_t>>{{0, 2, 0, -1}, {2, 10, 0, 0}, {10, 12, 0, -1}}));
  EXPECT_EQ(r[0].taps(), 0);
  EXPECT_EQ(r[1].taps(), 1);
}

}  // namespace
}  // namespace kiln::topi
