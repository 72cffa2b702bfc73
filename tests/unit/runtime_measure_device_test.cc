// Measuring a DeviceProgram in kiln-runner's guarded child on OpenCL (PoCL here; skipped without
// an OpenCL device): a good kernel is timed with the CPU path's statistics and checked against its
// reference, a wrong one is a wrong answer, a program the device refuses to build is a compile
// error with the build log, a launch the device refuses is a runtime error naming the limit, and a
// request for an unknown device is a bad request. None of them takes the caller down.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/kernel_runner.h"
#include "deploy/runtime/measure_child.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "tests/common/temp_dir.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kRows = 8, kCols = 64;

constexpr const char* kDoubleSource = R"CL(
__kernel void twice(__global const float* x, __global float* y) {
  int i = (int)get_group_id(0) * 64 + (int)get_local_id(0);
  y[i] = x[i] * 2.0f;
}
)CL";

class RuntimeMeasureDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
    std::vector<float> x(kRows * kCols), ref(kRows * kCols), wrong(kRows * kCols);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<float>(i) * 0.25f - 9.0f;
      ref[i] = 2 * x[i];
      wrong[i] = ref[i] + (i == 77 ? 1.0f : 0.0f);
    }
    save_npy(dir_.file("x.npy"), NDArray::from_vector(x, {kRows, kCols}));
    save_npy(dir_.file("ref.npy"), NDArray::from_vector(ref, {kRows, kCols}));
    save_npy(dir_.file("wrong.npy"), NDArray::from_vector(wrong, {kRows, kCols}));
  }

  static DeviceProgram twice() {
    DeviceProgram p;
    p.name = "candidate";
    p.target = "opencl";
    p.format = "cl";
    p.code = kDoubleSource;
    p.params = {{"x", KilnDType{kKilnFloat, 32, 1}, {kRows, kCols}},
                {"y", KilnDType{kKilnFloat, 32, 1}, {kRows, kCols}}};
    DeviceProgram::Kernel k{"twice", {}, {0, 1}};
    k.launch.grid = {kRows, 1, 1};
    k.launch.block = {kCols, 1, 1};
    p.kernels = {k};
    return p;
  }

  /// A request measuring `program` (written to a file) against `reference`.
  RunRequest request(const DeviceProgram& program, const std::string& reference = "ref.npy") {
    const std::string path = dir_.file("program" + std::to_string(files_++) + ".json");
    std::ofstream(path) << program.to_json().dump();
    RunRequest r;
    r.library = path;
    r.function = program.name;
    r.device = TargetKind::kOpenCL;
    r.args = {RunArg::make_input(dir_.file("x.npy")),
              RunArg::make_output("float32", {kRows, kCols}, dir_.file(reference))};
    r.repeat = 3;
    r.min_repeat_ms = 1;
    return r;
  }

  testing::TempDir dir_{"measure_device"};
  int files_ = 0;
};

TEST_F(RuntimeMeasureDeviceTest, AGoodKernelIsTimedAndChecked) {
  const RunResult r = measure_in_child(request(twice()), 60, KILN_RUNNER_PATH);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_EQ(r.costs_s.size(), 3u);
  for (double c : r.costs_s) {
    EXPECT_GT(c, 0);
    EXPECT_LT(c, 1.0);
  }
  EXPECT_GE(r.number, 1);
  EXPECT_EQ(r.max_error, 0);
}

TEST_F(RuntimeMeasureDeviceTest, AWrongKernelIsAWrongAnswer) {
  const RunResult r = measure_in_child(request(twice(), "wrong.npy"), 60, KILN_RUNNER_PATH);
  EXPECT_EQ(r.error, ErrorKind::kWrongAnswer) << r.message;
  EXPECT_NE(r.message.find("at index 77"), std::string::npos) << r.message;
}

TEST_F(RuntimeMeasureDeviceTest, AProgramTheDeviceRefusesIsACompileError) {
  DeviceProgram p = twice();
  p.code = "__kernel void twice(__global const float* x, __global float* y) { y[0] = x[0] +; }";
  const RunResult r = measure_in_child(request(p), 60, KILN_RUNNER_PATH);
  EXPECT_EQ(r.error, ErrorKind::kCompileError) << r.message;
  EXPECT_NE(r.message.find("twice"), std::string::npos) << r.message;
}

TEST_F(RuntimeMeasureDeviceTest, ALaunchTheDeviceRefusesIsARuntimeError) {
  DeviceProgram p = twice();
  p.kernels[0].launch.block = {1 << 20, 1, 1};  // more threads per block than any device has
  p.kernels[0].launch.grid = {1, 1, 1};
  const RunResult r = measure_in_child(request(p), 60, KILN_RUNNER_PATH);
  EXPECT_EQ(r.error, ErrorKind::kRuntimeError) << r.message;
  EXPECT_NE(r.message.find("threads"), std::string::npos) << r.message;
}

TEST_F(RuntimeMeasureDeviceTest, AnUnknownDeviceIsABadRequest) {
  Json json = request(twice()).to_json();
  std::string text = json.dump();
  const std::string from = "\"device\":\"opencl\"";
  ASSERT_NE(text.find(from), std::string::npos) << text;
  text.replace(text.find(from), from.size(), "\"device\":\"tpu\"");
  const RunResult r = measure_in_child_json(text, 60, KILN_RUNNER_PATH);
  EXPECT_EQ(r.error, ErrorKind::kRuntimeError);
  EXPECT_NE(r.message.find("unknown device 'tpu' (known: cpu, cuda, opencl, vdla)"),
            std::string::npos)
      << r.message;
}

}  // namespace
}  // namespace kiln::runtime
