// Tests for DeviceProgram: its JSON round trip, the checks from_json makes at the door (each bad
// field named), and a two-kernel program with a workspace run for real on OpenCL (PoCL here):
// the first kernel writes the workspace, the second reads it, so wrong argument routing or launch
// shapes give wrong answers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/json.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "tests/common/expect_error.h"

namespace kiln::runtime {
namespace {

constexpr const char* kSource = R"CL(
__kernel void scale(__global const float* x, __global float* tmp) {
  int i = (int)get_group_id(0) * (int)get_local_size(0) + (int)get_local_id(0);
  tmp[i] = x[i] * 2.0f;
}
__kernel void add(__global const float* tmp, __global const float* x, __global float* y) {
  int i = (int)get_group_id(0) * 4 + (int)get_local_id(0);
  y[i] = tmp[i] + x[i];
}
)CL";

DeviceProgram two_kernels() {
  DeviceProgram p;
  p.name = "scale_add";
  p.target = "opencl";
  p.format = "cl";
  p.code = kSource;
  p.params = {{"x", KilnDType{kKilnFloat, 32, 1}, {4, 8}},
              {"y", KilnDType{kKilnFloat, 32, 1}, {4, 8}}};
  p.workspace_bytes = {32 * 4};
  DeviceProgram::Kernel scale{"scale", {}, {0, -1}};
  scale.launch.grid = {8, 1, 1};
  scale.launch.block = {4, 1, 1};
  DeviceProgram::Kernel add{"add", {}, {-1, 0, 1}};
  add.launch.grid = {8, 1, 1};
  add.launch.block = {4, 1, 1};
  p.kernels = {scale, add};
  return p;
}

DeviceProgram round_trip(const DeviceProgram& p) {
  return DeviceProgram::from_json(Json::parse(p.to_json().dump()), "test");
}

TEST(DeviceProgramTest, JsonRoundTrip) {
  DeviceProgram p = round_trip(two_kernels());
  EXPECT_EQ(p.name, "scale_add");
  ASSERT_EQ(p.params.size(), 2u);
  EXPECT_EQ(p.params[1].name, "y");
  EXPECT_EQ(p.params[1].bytes(), 4 * 8 * 4);
  ASSERT_EQ(p.kernels.size(), 2u);
  EXPECT_EQ(p.kernels[1].args, (std::vector<int>{-1, 0, 1}));
  EXPECT_EQ(p.kernels[0].launch.grid[0], 8);
  EXPECT_EQ(p.workspace_bytes, (std::vector<int64_t>{128}));
  EXPECT_EQ(p.code, kSource);
}

TEST(DeviceProgramTest, RefusesBadFields) {
  auto with = [](auto edit) {
    DeviceProgram p = two_kernels();
    edit(p);
    return p;
  };
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.format = "spirv"; })),
                        "format 'spirv' is not one of ptx, cl");
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.kernels[0].args[1] = -2; })),
                        "'scale': argument -2 names no tensor (2) or workspace (1)");
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.kernels[0].args[0] = 2; })),
                        "argument 2 names no tensor");
  EXPECT_ERROR_CONTAINS(
      round_trip(with([](DeviceProgram& p) { p.kernels[1].launch.block[1] = 0; })),
      "'add': block: extent 0 out of range");
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.kernels[0].name = "a b"; })),
                        "'a b' is not a kernel name");
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.params[0].shape = {-1}; })),
                        "'x': shape dimension -1 out of range");
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.workspace_bytes = {0}; })),
                        "workspace of 0 bytes out of range");
  EXPECT_ERROR_CONTAINS(round_trip(with([](DeviceProgram& p) { p.kernels.clear(); })),
                        "no kernels");
  EXPECT_ERROR_CONTAINS(DeviceProgram::from_json(Json::parse("{\"name\":\"f\"}"), "f.json"),
                        "device program in f.json");
}

TEST(DeviceProgramTest, RunsTwoKernelsThroughAWorkspaceOnOpenCL) {
  std::string why;
  if (!DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  DeviceAPI& gpu = DeviceAPI::get(TargetKind::kOpenCL);
  LoadedDeviceProgram run(gpu, round_trip(two_kernels()));
  std::vector<float> x(32), y(32, -1.0f);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i) - 7.5f;
  DeviceBuffer dx = gpu.alloc(128), dy = gpu.alloc(128);
  gpu.copy_to_device(dx, x.data(), 128);
  run.launch({&dx, &dy});
  gpu.copy_to_host(y.data(), dy, 128);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(y[i], 3.0f * x[i]) << i;

  DeviceBuffer small = gpu.alloc(64);
  EXPECT_ERROR_CONTAINS(run.launch({&dx, &small}),
                        "the buffer of 'y' has 64 bytes, the tensor needs 128");
  EXPECT_ERROR_CONTAINS(run.launch({&dx}), "takes 2 tensors, got 1");
  DeviceProgram ptx = two_kernels();
  ptx.format = "ptx";
  EXPECT_ERROR_CONTAINS(LoadedDeviceProgram(gpu, ptx), "holds ptx code");
}

}  // namespace
}  // namespace kiln::runtime
