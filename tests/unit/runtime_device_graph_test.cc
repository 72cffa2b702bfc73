// GPU bundles without the compiler: the bundle format's device section (round trip, and what it
// refuses at the door), and the graph executor on a device over hand-written OpenCL C programs,
// run on OpenCL (PoCL here) and compared with a loop. The graph is a chain of four nodes through
// three intermediates, two of which share a pool offset (so they share one device buffer), and
// one program called by two nodes: wrong routing of buffers or a lost upload gives wrong numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "base/fnv1a.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/run_bundle.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace kiln::runtime {
namespace {

constexpr KilnDType kF32{kKilnFloat, 32, 1};
constexpr int kRows = 2, kCols = 8, kCount = kRows * kCols;

constexpr const char* kScaleSource = R"CL(
__kernel void scale2(__global const float* x, __global float* y) {
  int i = (int)get_group_id(0) * (int)get_local_size(0) + (int)get_local_id(0);
  y[i] = 2.0f * x[i];
}
)CL";

constexpr const char* kAddSource = R"CL(
__kernel void add(__global const float* a, __global const float* b, __global float* y) {
  int i = (int)get_group_id(0) * (int)get_local_size(0) + (int)get_local_id(0);
  y[i] = a[i] + b[i];
}
)CL";

/// One kernel over `tensors` float32[2, 8] tensors, 4 blocks of 4 threads.
DeviceProgram program(const std::string& name, const std::string& kernel, const char* code,
                      std::vector<std::string> tensors) {
  DeviceProgram p;
  p.name = name;
  p.target = "opencl";
  p.format = "cl";
  p.code = code;
  std::vector<int> args;
  for (const std::string& t : tensors) {
    args.push_back(static_cast<int>(p.params.size()));
    p.params.push_back({t, kF32, {kRows, kCols}});
  }
  DeviceProgram::Kernel k{kernel, {}, args};
  k.launch.grid = {4, 1, 1};
  k.launch.block = {4, 1, 1};
  p.kernels = {k};
  return p;
}

/// y = 2 * (2 * x + w) + w: scale (t1 at offset 0), add w (t2 at 64), scale (t3 at 0 again, t1
/// being dead), add w into the output.
const char* kGraph = R"({"format": "kiln.graph", "version": 1,
  "storage": [{"bytes": 128}],
  "tensors": [
    {"name": "x", "dtype": "float32", "shape": [2, 8], "kind": "input"},
    {"name": "w", "dtype": "float32", "shape": [2, 8], "kind": "param"},
    {"name": "t1", "dtype": "float32", "shape": [2, 8], "kind": "intermediate", "storage": 0, "offset": 0},
    {"name": "t2", "dtype": "float32", "shape": [2, 8], "kind": "intermediate", "storage": 0, "offset": 64},
    {"name": "t3", "dtype": "float32", "shape": [2, 8], "kind": "intermediate", "storage": 0, "offset": 0},
    {"name": "y", "dtype": "float32", "shape": [2, 8], "kind": "output"}],
  "nodes": [{"name": "s1", "func": "scale", "args": [0, 2]},
            {"name": "a1", "func": "add_w", "args": [2, 1, 3]},
            {"name": "s2", "func": "scale", "args": [3, 4]},
            {"name": "a2", "func": "add_w", "args": [4, 1, 5]}],
  "inputs": [0], "outputs": [5]})";

std::vector<float> ramp(float start, float step) {
  std::vector<float> v(kCount);
  for (int i = 0; i < kCount; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

Bundle gpu_bundle() {
  Bundle b;
  b.graph_json = kGraph;
  b.params.emplace("w", NDArray::from_vector<float>(ramp(0.5f, -0.25f), {kRows, kCols}));
  b.device_programs = {program("scale", "scale2", kScaleSource, {"x", "y"}),
                       program("add_w", "add", kAddSource, {"a", "b", "y"})};
  return b;
}

Bundle round_trip(const Bundle& b) { return deserialize_bundle(serialize_bundle(b), "gpu.kiln"); }

/// `bytes` with its checksum made to match again after an edit.
std::string resealed(std::string bytes) {
  const uint64_t sum = fnv1a64(bytes.data(), bytes.size() - 16);
  std::memcpy(bytes.data() + bytes.size() - 16, &sum, sizeof sum);
  return bytes;
}

bool opencl_here(std::string* why) { return DeviceAPI::available(TargetKind::kOpenCL, why); }

TEST(GpuBundle, RoundTripsItsDevicePrograms) {
  const std::string bytes = serialize_bundle(gpu_bundle());
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  EXPECT_EQ(version, 2u);
  const Bundle b = deserialize_bundle(bytes, "gpu.kiln");
  ASSERT_EQ(b.device_programs.size(), 2u);
  EXPECT_EQ(b.device_programs[1].name, "add_w");
  EXPECT_EQ(b.device_programs[1].code, kAddSource);
  EXPECT_EQ(b.device_programs[1].kernels[0].args, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(b.library.empty());
  EXPECT_EQ(bundle_device(b), TargetKind::kOpenCL);

  Bundle cpu;
  cpu.graph_json = kGraph;
  cpu.library = "library bytes";
  const std::string cpu_bytes = serialize_bundle(cpu);
  std::memcpy(&version, cpu_bytes.data() + 8, 4);
  EXPECT_EQ(version, 1u);  // as before GPU bundles: older runtimes still read it
  EXPECT_EQ(bundle_device(round_trip(cpu)), TargetKind::kCpu);
  Bundle cuda = gpu_bundle();
  for (DeviceProgram& p : cuda.device_programs) p.format = "ptx";
  EXPECT_EQ(bundle_device(round_trip(cuda)), TargetKind::kCuda);
}

TEST(GpuBundle, RefusesABadDeviceSection) {
  Bundle both = gpu_bundle();
  both.library = "host code";
  EXPECT_ERROR_CONTAINS(serialize_bundle(both), "device programs or a host library, not both");

  Bundle twice = gpu_bundle();
  twice.device_programs[1].name = "scale";
  EXPECT_ERROR_CONTAINS(round_trip(twice), "device section: device program 'scale' appears twice");

  Bundle mixed = gpu_bundle();
  mixed.device_programs[1].format = "ptx";
  EXPECT_ERROR_CONTAINS(round_trip(mixed),
                        "device program 'add_w' holds ptx code, but 'scale' holds cl (a bundle is "
                        "for one kind of device)");

  Bundle bad_kernel = gpu_bundle();
  bad_kernel.device_programs[0].kernels[0].args = {0, 5};
  EXPECT_ERROR_CONTAINS(
      round_trip(bad_kernel),
      "device program in bundle 'gpu.kiln': kernels 'scale2': argument 5 names no tensor");

  // A version 1 bundle has no device section; a version 2 bundle must have one.
  std::string v1 = serialize_bundle(gpu_bundle());
  const uint32_t one = 1;
  std::memcpy(v1.data() + 8, &one, 4);
  EXPECT_ERROR_CONTAINS(deserialize_bundle(resealed(v1), "gpu.kiln"),
                        "unknown or repeated section kind 4 (format version 1)");
  Bundle cpu;
  cpu.graph_json = kGraph;
  std::string v2 = serialize_bundle(cpu);
  const uint32_t two = 2;
  std::memcpy(v2.data() + 8, &two, 4);
  EXPECT_ERROR_CONTAINS(deserialize_bundle(resealed(v2), "gpu.kiln"),
                        "bundle 'gpu.kiln' has format version 2 but no device section");
  // Version 3 is a bundle with VDLA functions (tests/correctness/vdla_graph_executor_test.cc).
  std::string v4 = serialize_bundle(cpu);
  const uint32_t four = 4;
  std::memcpy(v4.data() + 8, &four, 4);
  EXPECT_ERROR_CONTAINS(deserialize_bundle(resealed(v4), "gpu.kiln"),
                        "has format version 4; this runtime reads versions 1, 2 and 3");
}

TEST(GpuBundle, RunsOnlyOnTheDeviceItWasBuiltFor) {
  EXPECT_ERROR_CONTAINS(GraphExecutor::from_bundle(round_trip(gpu_bundle()), "gpu.kiln"),
                        "bundle 'gpu.kiln' was built for opencl; run it with --device opencl");
  EXPECT_ERROR_CONTAINS(
      GraphExecutor::from_bundle(round_trip(gpu_bundle()), "gpu.kiln", TargetKind::kCuda),
      "bundle 'gpu.kiln' was built for opencl; run it with --device opencl");
  Bundle cpu;
  cpu.graph_json = kGraph;
  cpu.library = "not even a library: refused before it is loaded";
  EXPECT_ERROR_CONTAINS(GraphExecutor::from_bundle(std::move(cpu), "cpu.kiln", TargetKind::kCuda),
                        "bundle 'cpu.kiln' was built for the CPU (it holds no device code); run it "
                        "without --device cuda");
  std::string why;
  if (DeviceAPI::available(TargetKind::kCuda, &why)) GTEST_SKIP() << "this machine has CUDA";
  Bundle cuda = gpu_bundle();
  for (DeviceProgram& p : cuda.device_programs) p.format = "ptx";
  EXPECT_ERROR_CONTAINS(GraphExecutor::from_bundle(std::move(cuda), "cuda.kiln", TargetKind::kCuda),
                        "no CUDA device");
}

TEST(GpuGraphExecutor, RunsAChainOfProgramsOnOpenCL) {
  std::string why;
  if (!opencl_here(&why)) GTEST_SKIP() << why;
  GraphExecutor g =
      GraphExecutor::from_bundle(round_trip(gpu_bundle()), "gpu.kiln", TargetKind::kOpenCL);
  ASSERT_NE(g.device(), nullptr);
  EXPECT_EQ(g.device()->kind(), TargetKind::kOpenCL);
  const std::vector<float> w = ramp(0.5f, -0.25f);
  for (float start : {1.0f, -3.0f}) {  // a second input replaces the first
    const std::vector<float> x = ramp(start, 0.75f);
    g.set_input("x", NDArray::from_vector<float>(x, {kRows, kCols}));
    g.run();
    const std::vector<float> y = g.output(0).to_vector<float>();
    ASSERT_EQ(y.size(), static_cast<size_t>(kCount));
    for (int i = 0; i < kCount; ++i) EXPECT_FLOAT_EQ(y[i], 2 * (2 * x[i] + w[i]) + w[i]) << i;
  }
  std::vector<double> run_ms;
  const auto times = g.profile(3, &run_ms);
  ASSERT_EQ(times.size(), 4u);
  EXPECT_EQ(times[1].name, "a1");
  EXPECT_EQ(times[1].func, "add_w");
  for (const auto& t : times) EXPECT_GE(t.median_ms, 0.0);
  EXPECT_EQ(run_ms.size(), 3u);
  EXPECT_FLOAT_EQ(g.output(0).to_vector<float>()[5], 2 * (2 * (-3.0f + 5 * 0.75f) + w[5]) + w[5]);
}

TEST(GpuGraphExecutor, NamesANodeWhoseTensorsDoNotFitItsProgram) {
  std::string why;
  if (!opencl_here(&why)) GTEST_SKIP() << why;
  DeviceAPI& gpu = DeviceAPI::get(TargetKind::kOpenCL);
  auto make = [&](auto edit) {
    Bundle b = gpu_bundle();
    edit(b);
    return GraphExecutor::on_device(b.graph_json, std::move(b.params), std::move(b.device_programs),
                                    gpu, "gpu.kiln");
  };
  EXPECT_ERROR_CONTAINS(
      make([](Bundle& b) { b.device_programs[0].name = "scale_by_two"; }),
      "graph node 's1' calls 'scale', which the bundle's device programs do not define");
  EXPECT_ERROR_CONTAINS(
      make([](Bundle& b) {
        b.device_programs[0].params[1].shape = {4, 4};
      }),
      "node 's1' passes tensor 't1' (float32[2, 8]) as 'y' of device program 'scale', "
      "which takes float32[4, 4]");
  EXPECT_ERROR_CONTAINS(make([](Bundle& b) { b.device_programs[1].params.pop_back(); }),
                        "node 'a1' passes 3 tensors to device program 'add_w', which takes 2");
  EXPECT_ERROR_CONTAINS(make([](Bundle& b) { b.device_programs.push_back(b.device_programs[0]); }),
                        "device program 'scale' appears twice");
  EXPECT_ERROR_CONTAINS(make([](Bundle& b) {
                          const std::string at = "\"offset\": 64";
                          b.graph_json.replace(b.graph_json.find(at), at.size(), "\"offset\": 96");
                        }),
                        "tensor 3: 64 bytes at offset 96 do not fit in pool 0 of 128 bytes");
  EXPECT_ERROR_CONTAINS(make([](Bundle& b) {
                          const std::string at = "\"outputs\": [5]";
                          b.graph_json.replace(b.graph_json.find(at), at.size(),
                                               "\"outputs\": [4]");
                        }),
                        "output 't3' is an intermediate tensor");
}

TEST(GpuGraphExecutor, RunsFromTheCommandLinesCodeWithDeviceOpenCL) {
  std::string why;
  if (!opencl_here(&why)) GTEST_SKIP() << why;
  kiln::testing::TempDir dir;
  write_bundle(dir.file("gpu.kiln"), gpu_bundle());
  const std::vector<float> x = ramp(-1.0f, 0.5f);
  save_npy(dir.file("x.npy"), NDArray::from_vector<float>(x, {kRows, kCols}));
  RunOptions o;
  o.bundle = dir.file("gpu.kiln");
  o.inputs = {parse_input_file("x=" + dir.file("x.npy"))};
  o.output_dir = dir.file("out");
  EXPECT_ERROR_CONTAINS(prepare_run(o), "was built for opencl; run it with --device opencl");
  o.device = TargetKind::kOpenCL;
  PreparedRun run = prepare_run(o);
  std::ostringstream printed;
  execute_run(run, o, printed);
  EXPECT_EQ(printed.str().rfind("running on opencl:0 ", 0), 0u) << printed.str();
  const std::vector<float> y = load_npy(dir.file("out/y.npy")).to_vector<float>();
  const std::vector<float> w = ramp(0.5f, -0.25f);
  ASSERT_EQ(y.size(), static_cast<size_t>(kCount));
  for (int i = 0; i < kCount; ++i) EXPECT_FLOAT_EQ(y[i], 4 * x[i] + 3 * w[i]) << i;
}

}  // namespace
}  // namespace kiln::runtime
