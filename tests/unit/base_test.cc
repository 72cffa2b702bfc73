// The small shared pieces of base/: target kinds and their two spellings, floor division and
// modulo on int64, the shape formatter.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "base/int_math.h"
#include "base/shape_string.h"
#include "base/target_kind.h"
#include "tests/common/expect_error.h"

namespace kiln {
namespace {

TEST(TargetKind, NamesRoundTrip) {
  for (TargetKind k : kTargetKinds) {
    EXPECT_EQ(parse_target_kind(target_kind_name(k)), k) << target_kind_name(k);
    EXPECT_EQ(parse_device_kind(device_kind_name(k)), k) << device_kind_name(k);
  }
}

TEST(TargetKind, TheCpuIsSpelledLlvmInTargetsAndCpuOnDevices) {
  EXPECT_EQ(target_kind_name(TargetKind::kCpu), "llvm");
  EXPECT_EQ(device_kind_name(TargetKind::kCpu), "cpu");
  EXPECT_EQ(device_kind_name(TargetKind::kVdla), "vdla");
  EXPECT_EQ(target_kind_name(TargetKind::kOpenCL), "opencl");
  EXPECT_FALSE(find_target_kind("cpu").has_value());
  EXPECT_EQ(find_target_kind("cuda"), TargetKind::kCuda);
  EXPECT_EQ(known_target_kinds(), "llvm, cuda, opencl, vdla");
  EXPECT_EQ(known_device_kinds(), "cpu, cuda, opencl, vdla");
}

TEST(TargetKind, UnknownNamesAreErrorsListingTheKnownOnes) {
  EXPECT_ERROR_CONTAINS(parse_target_kind("cpu"),
                        "unknown target kind 'cpu' (known: llvm, cuda, opencl, vdla)");
  EXPECT_ERROR_CONTAINS(parse_device_kind("llvm"),
                        "unknown device 'llvm' (known: cpu, cuda, opencl, vdla)");
  EXPECT_ERROR_CONTAINS(parse_device_kind(""), "unknown device ''");
  EXPECT_ERROR_CONTAINS(parse_device_kind("CUDA"), "unknown device 'CUDA'");
}

TEST(TargetKind, GpusAreCudaAndOpenCL) {
  EXPECT_TRUE(is_gpu(TargetKind::kCuda));
  EXPECT_TRUE(is_gpu(TargetKind::kOpenCL));
  EXPECT_FALSE(is_gpu(TargetKind::kCpu));
  EXPECT_FALSE(is_gpu(TargetKind::kVdla));
}

TEST(TargetKind, PrintsItsTargetName) {
  std::ostringstream os;
  os << TargetKind::kCpu << " " << TargetKind::kVdla;
  EXPECT_EQ(os.str(), "llvm vdla");
}

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
