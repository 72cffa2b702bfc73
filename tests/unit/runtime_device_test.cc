// Tests for DeviceAPI and DeviceTensor. OpenCL runs for real on whatever OpenCL device the machine
// has (PoCL on the CPU here): copies, hand-written kernels with __local tiles and barriers under
// several launch shapes checked against loops, dynamic __local memory, the messages of a build
// error, a wrong kernel name and wrong arguments, event timing, launches from several threads.
// CUDA: without a driver, the clean "no CUDA device" error; with a GPU, a hand-written PTX saxpy
// and a kernel with dynamic shared memory, checked the same way, plus the JIT log of bad PTX.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_tensor.h"
#include "deploy/runtime/ndarray.h"
#include "tests/common/expect_error.h"

namespace kiln::runtime {
namespace {

// y = a * x + y over a rows x cols matrix, through a __local tile: each thread stores its element
// of x, and after the barrier reads the element its mirror thread (across the block's x axis)
// stored, so a missing barrier or a wrong local size gives wrong answers. Blocks of at most 256.
constexpr const char* kOpenCLSource = R"CL(
__kernel void saxpy_mirror(__global const float* x, __global float* y, float a, int rows,
                           int cols) {
  __local float tile[256];
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int sx = get_local_size(0);
  const int c = get_group_id(0) * sx + lx;
  const int r = get_group_id(1) * get_local_size(1) + ly;
  tile[ly * sx + lx] = (r < rows && c < cols) ? x[r * cols + c] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  const int mx = sx - 1 - lx;
  const int mc = get_group_id(0) * sx + mx;
  if (r < rows && mc < cols) y[r * cols + mc] = a * tile[ly * sx + mx] + y[r * cols + mc];
}

// Reverses each block of y in place, doubling it, through dynamic __local memory (the trailing
// argument a LaunchConfig's dyn_shared_bytes sizes). n is a multiple of the block size.
__kernel void reverse_blocks(__global float* y, long n, __local float* scratch) {
  const int l = get_local_id(0), s = get_local_size(0);
  const long i = get_group_id(0) * s + l;
  scratch[l] = i < n ? y[i] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (i < n) y[i] = 2.0f * scratch[s - 1 - l];
}
)CL";

std::vector<float> iota_values(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 97);
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

DeviceAPI* opencl_or_skip() {
  std::string why;
  if (!DeviceAPI::available(TargetKind::kOpenCL, &why)) return nullptr;
  return &DeviceAPI::get(TargetKind::kOpenCL);
}

#define OPENCL_DEVICE_OR_SKIP(name)                  \
  DeviceAPI* name = opencl_or_skip();                \
  if (name == nullptr) {                             \
    std::string why;                                 \
    DeviceAPI::available(TargetKind::kOpenCL, &why); \
    GTEST_SKIP() << why;                             \
  }

TEST(DeviceOpenCLTest, DescribesTheDevice) {
  OPENCL_DEVICE_OR_SKIP(device);
  const DeviceInfo& info = device->info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.memory_bytes, 0);
  EXPECT_GT(info.max_threads_per_block, 0);
  EXPECT_GT(info.shared_memory_per_block, 0);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_EQ(device->module_format(), std::string("cl"));
  EXPECT_NE(device->description().find("opencl:0 " + info.name), std::string::npos)
      << device->description();
  EXPECT_EQ(&DeviceAPI::get(TargetKind::kOpenCL, 0), device) << "one instance per device";
  EXPECT_EQ(DeviceAPI::count(TargetKind::kOpenCL), DeviceAPI::count(TargetKind::kOpenCL));
  EXPECT_ERROR_CONTAINS(DeviceAPI::get(TargetKind::kOpenCL, 1000), "no OpenCL device 1000");
}

TEST(DeviceOpenCLTest, CopiesRoundTripWithOffsets) {
  OPENCL_DEVICE_OR_SKIP(device);
  const std::vector<float> values = iota_values(1000, -3.0f, 0.25f);
  const int64_t bytes = static_cast<int64_t>(values.size() * sizeof(float));
  DeviceBuffer a = device->alloc(bytes);
  DeviceBuffer b = device->alloc(bytes + 64);
  EXPECT_EQ(a.bytes(), bytes);
  EXPECT_EQ(a.device(), device);
  device->copy_to_device(a, values.data(), bytes);
  device->copy_on_device(b, a, bytes, /*dst_offset=*/64);
  std::vector<float> back(values.size());
  device->copy_to_host(back.data(), b, bytes, /*src_offset=*/64);
  EXPECT_EQ(back, values);
  // Part of a buffer, at an offset, in both directions.
  const std::vector<float> part = {7, 8, 9};
  device->copy_to_device(a, part.data(), 12, /*dst_offset=*/40);
  std::vector<float> window(5);
  device->copy_to_host(window.data(), a, 20, /*src_offset=*/36);
  EXPECT_EQ(window, (std::vector<float>{values[9], 7, 8, 9, values[13]}));

  EXPECT_ERROR_CONTAINS(device->copy_to_host(back.data(), a, bytes, 4),
                        "outside the device buffer");
  EXPECT_ERROR_CONTAINS(device->copy_on_device(a, b, bytes + 64), "outside the device buffer");
  EXPECT_ERROR_CONTAINS(device->copy_to_device(DeviceBuffer(), values.data(), 4),
                        "null device buffer");
  // Moving keeps one owner; an empty buffer is still a buffer.
  DeviceBuffer moved = std::move(a);
  EXPECT_FALSE(a.defined());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(moved.defined());
  EXPECT_EQ(device->alloc(0).bytes(), 0);
}

TEST(DeviceOpenCLTest, TiledSaxpyMatchesLoopUnderManyLaunchShapes) {
  OPENCL_DEVICE_OR_SKIP(device);
  DeviceModule module = device->load_module(kOpenCLSource, "cl");
  DeviceKernelHandle saxpy = module.kernel("saxpy_mirror");
  const int rows = 37, cols = 53;
  const float a = 1.5f;
  const std::vector<float> x = iota_values(rows * cols, 1.0f, 0.5f);
  const std::vector<float> y0 = iota_values(rows * cols, -2.0f, 0.125f);
  DeviceBuffer x_device = device->alloc(rows * cols * 4);
  DeviceBuffer y_device = device->alloc(rows * cols * 4);
  device->copy_to_device(x_device, x.data(), rows * cols * 4);
  const std::vector<std::array<int64_t, 2>> blocks = {{16, 16}, {8, 4},  {32, 1}, {1, 1},
                                                      {5, 3},   {1, 64}, {53, 2}};
  for (const auto& [bx, by] : blocks) {
    device->copy_to_device(y_device, y0.data(), rows * cols * 4);
    LaunchConfig config;
    config.block = {bx, by, 1};
    config.grid = {ceil_div(cols, bx), ceil_div(rows, by), 1};
    device->launch(saxpy, config, {x_device, y_device, a, int32_t{rows}, int32_t{cols}});
    std::vector<float> y(rows * cols);
    device->copy_to_host(y.data(), y_device, rows * cols * 4);
    for (int i = 0; i < rows * cols; ++i) {
      ASSERT_FLOAT_EQ(y[i], a * x[i] + y0[i]) << "element " << i << ", block " << bx << "x" << by;
    }
  }
}

TEST(DeviceOpenCLTest, DynamicSharedMemoryIsATrailingLocalArgument) {
  OPENCL_DEVICE_OR_SKIP(device);
  DeviceModule module = device->load_module(kOpenCLSource, "cl");
  DeviceKernelHandle reverse = module.kernel("reverse_blocks");
  const int64_t block = 32, n = 8 * block;
  const std::vector<float> y0 = iota_values(n, 0.0f, 1.0f);
  DeviceBuffer y_device = device->alloc(n * 4);
  device->copy_to_device(y_device, y0.data(), n * 4);
  LaunchConfig config;
  config.grid = {n / block, 1, 1};
  config.block = {block, 1, 1};
  config.dyn_shared_bytes = block * 4;
  device->launch(reverse, config, {y_device, n});
  std::vector<float> y(n);
  device->copy_to_host(y.data(), y_device, n * 4);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t base = i / block * block;
    ASSERT_FLOAT_EQ(y[i], 2.0f * y0[base + block - 1 - (i - base)]) << "element " << i;
  }
  // Without the dynamic memory, the kernel's third argument is missing.
  config.dyn_shared_bytes = 0;
  EXPECT_ERROR_CONTAINS(device->launch(reverse, config, {y_device, n}),
                        "kernel 'reverse_blocks' takes 3 arguments, got 2");
}

TEST(DeviceOpenCLTest, BuildErrorCarriesTheLogAndTheSource) {
  OPENCL_DEVICE_OR_SKIP(device);
  const std::string source =
      "__kernel void broken(__global float* y) {\n  y[0] = undeclared_thing;\n}\n";
  try {
    device->load_module(source, "cl");
    FAIL() << "expected a build error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("does not build"), std::string::npos) << message;
    EXPECT_NE(message.find("CL_BUILD_PROGRAM_FAILURE"), std::string::npos) << message;
    EXPECT_NE(message.find("build log:"), std::string::npos) << message;
    // The compiler's own diagnostic names the identifier, and the source is quoted by line.
    EXPECT_NE(message.find("undeclared_thing"), message.rfind("undeclared_thing")) << message;
    EXPECT_NE(message.find("2|   y[0] = undeclared_thing;"), std::string::npos) << message;
  }
  EXPECT_ERROR_CONTAINS(device->load_module(source, "ptx"), "loads 'cl' modules, not 'ptx'");
}

TEST(DeviceOpenCLTest, WrongKernelNameAndArgumentsAreNamed) {
  OPENCL_DEVICE_OR_SKIP(device);
  DeviceModule module = device->load_module(kOpenCLSource, "cl");
  EXPECT_ERROR_CONTAINS(module.kernel("saxpy"), "no kernel 'saxpy' in the OpenCL module");
  EXPECT_ERROR_CONTAINS(module.kernel("saxpy"), "saxpy_mirror");
  DeviceKernelHandle saxpy = module.kernel("saxpy_mirror");
  DeviceBuffer buffer = device->alloc(64);
  LaunchConfig config;
  EXPECT_ERROR_CONTAINS(device->launch(saxpy, config, {buffer, buffer, 1.0f}),
                        "kernel 'saxpy_mirror' takes 5 arguments, got 3");
  // A 64-bit integer where the kernel takes an int: the device refuses the size.
  EXPECT_ERROR_CONTAINS(
      device->launch(saxpy, config, {buffer, buffer, 1.0f, int64_t{1}, int32_t{1}}),
      "clSetKernelArg(3)");
  config.block = {device->info().max_threads_per_block + 1, 1, 1};
  EXPECT_ERROR_CONTAINS(device->launch(saxpy, config, {buffer, buffer, 1.0f, 1, 1}),
                        "threads is more than");
  config.block = {1, 1, 1};
  config.grid = {0, 1, 1};
  EXPECT_ERROR_CONTAINS(device->launch(saxpy, config, {buffer, buffer, 1.0f, 1, 1}), "grid[0] = 0");
  config.grid = {1, 1, 1};
  EXPECT_ERROR_CONTAINS(device->launch(saxpy, config, {buffer, DeviceBuffer(), 1.0f, 1, 1}),
                        "argument 1 is a null device buffer");
  EXPECT_ERROR_CONTAINS(device->launch(DeviceKernelHandle(), config, {}), "null kernel");
}

TEST(DeviceOpenCLTest, EventTimingIsPositive) {
  OPENCL_DEVICE_OR_SKIP(device);
  DeviceModule module = device->load_module(kOpenCLSource, "cl");
  DeviceKernelHandle saxpy = module.kernel("saxpy_mirror");
  const int rows = 256, cols = 256;
  DeviceBuffer x = device->alloc(rows * cols * 4);
  DeviceBuffer y = device->alloc(rows * cols * 4);
  LaunchConfig config;
  config.block = {16, 16, 1};
  config.grid = {cols / 16, rows / 16, 1};
  const double ms = device->time_ms([&] {
    for (int i = 0; i < 5; ++i) device->launch(saxpy, config, {x, y, 1.0f, rows, cols});
  });
  EXPECT_GT(ms, 0.0);
  EXPECT_LT(ms, 60000.0);
  EXPECT_ERROR_CONTAINS(device->time_ms([] {}), "launched no kernel");
  // Launches outside time_ms keep no events.
  device->launch(saxpy, config, {x, y, 1.0f, rows, cols});
  device->synchronize();
}

TEST(DeviceOpenCLTest, LaunchesFromSeveralThreads) {
  OPENCL_DEVICE_OR_SKIP(device);
  DeviceModule module = device->load_module(kOpenCLSource, "cl");
  DeviceKernelHandle saxpy = module.kernel("saxpy_mirror");
  const int n = 1000;
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<float> x = iota_values(n, static_cast<float>(t), 1.0f);
      std::vector<float> y(n, 0.0f);
      DeviceBuffer x_device = device->alloc(n * 4);
      DeviceBuffer y_device = device->alloc(n * 4);
      device->copy_to_device(x_device, x.data(), n * 4);
      device->copy_to_device(y_device, y.data(), n * 4);
      LaunchConfig config;
      config.block = {64, 1, 1};
      config.grid = {ceil_div(n, 64), 1, 1};
      for (int k = 0; k < 10; ++k) {
        device->launch(saxpy, config, {x_device, y_device, 1.0f, int32_t{1}, int32_t{n}});
      }
      device->copy_to_host(y.data(), y_device, n * 4);
      for (int i = 0; i < n; ++i) wrong[t] += y[i] != 10.0f * x[i];
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(DeviceTensorTest, RoundTripsThroughTheDevice) {
  OPENCL_DEVICE_OR_SKIP(device);
  const NDArray host = NDArray::from_vector<float>(iota_values(24, 0.0f, 1.5f), {2, 3, 4});
  DeviceTensor tensor = DeviceTensor::from_host(*device, host);
  EXPECT_EQ(tensor.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(tensor.nbytes(), 96);
  EXPECT_EQ(&tensor.device(), device);
  EXPECT_EQ(tensor.to_host().to_vector<float>(), host.to_vector<float>());
  NDArray wrong_shape = NDArray::empty({4, 6}, kFloat32);
  EXPECT_ERROR_CONTAINS(tensor.copy_to_host(wrong_shape), "float32[4, 6]");
  EXPECT_ERROR_CONTAINS(tensor.copy_from_host(NDArray::empty({2, 3, 4}, kInt32)),
                        "the device tensor float32[2, 3, 4]");
  DeviceTensor empty = DeviceTensor::empty(*device, {0, 5}, kFloat32);
  EXPECT_EQ(empty.to_host().num_elements(), 0);
}

// ---- CUDA ----

// saxpy (y = a * x + y, n elements) and scale_dynamic_shared (reverses each block of y through
// dynamic shared memory, doubling it), as nvcc -ptx writes them, with a PTX version and target old
// enough for any driver that knows the GPU to JIT-compile them.
constexpr const char* kPTX = R"PTX(
.version 7.0
.target sm_70
.address_size 64

.extern .shared .align 16 .b8 tile[];

.visible .entry saxpy(
	.param .u64 saxpy_param_0,
	.param .u64 saxpy_param_1,
	.param .f32 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [saxpy_param_0];
	ld.param.u64 	%rd2, [saxpy_param_1];
	ld.param.f32 	%f1, [saxpy_param_2];
	ld.param.u32 	%r2, [saxpy_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	cvta.to.global.u64 	%rd3, %rd2;
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r1, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.f32 	%f2, [%rd6];
	add.s64 	%rd7, %rd3, %rd5;
	ld.global.f32 	%f3, [%rd7];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd7], %f4;
$L__BB0_2:
	ret;
}

.visible .entry scale_dynamic_shared(
	.param .u64 scale_dynamic_shared_param_0,
	.param .u32 scale_dynamic_shared_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .f32 	%f<7>;
	.reg .b32 	%r<14>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd2, [scale_dynamic_shared_param_0];
	ld.param.u32 	%r4, [scale_dynamic_shared_param_1];
	cvta.to.global.u64 	%rd3, %rd2;
	mov.u32 	%r1, %ntid.x;
	mov.u32 	%r5, %ctaid.x;
	mov.u32 	%r2, %tid.x;
	mad.lo.s32 	%r3, %r5, %r1, %r2;
	setp.ge.s32 	%p1, %r3, %r4;
	mul.wide.s32 	%rd4, %r3, 4;
	add.s64 	%rd1, %rd3, %rd4;
	mov.f32 	%f6, 0f00000000;
	@%p1 bra 	$L__BB1_2;
	ld.global.f32 	%f6, [%rd1];
$L__BB1_2:
	shl.b32 	%r6, %r2, 2;
	mov.u32 	%r7, tile;
	add.s32 	%r8, %r7, %r6;
	st.shared.f32 	[%r8], %f6;
	bar.sync 	0;
	@%p1 bra 	$L__BB1_4;
	not.b32 	%r9, %r2;
	add.s32 	%r10, %r1, %r9;
	shl.b32 	%r11, %r10, 2;
	add.s32 	%r13, %r7, %r11;
	ld.shared.f32 	%f4, [%r13];
	add.f32 	%f5, %f4, %f4;
	st.global.f32 	[%rd1], %f5;
$L__BB1_4:
	ret;
}
)PTX";

TEST(DeviceCUDATest, WithoutAGpuTheErrorSaysWhy) {
  std::string why;
  if (DeviceAPI::available(TargetKind::kCuda, &why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(why.rfind("no CUDA device: ", 0), 0u) << why;
  EXPECT_EQ(DeviceAPI::count(TargetKind::kCuda), 0);
  try {
    DeviceAPI::get(TargetKind::kCuda);
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "error: " + why);
  }
}

TEST(DeviceCUDATest, PTXSaxpyAndDynamicSharedMemoryMatchLoops) {
  std::string why;
  if (!DeviceAPI::available(TargetKind::kCuda, &why)) GTEST_SKIP() << why;
  DeviceAPI& device = DeviceAPI::get(TargetKind::kCuda);
  const DeviceInfo& info = device.info();
  EXPECT_GT(info.compute_capability_major, 0);
  EXPECT_GT(info.multiprocessors, 0);
  EXPECT_GE(info.max_shared_memory_per_block, info.shared_memory_per_block);
  std::printf("%s\n", device.description().c_str());

  DeviceModule module = device.load_module(kPTX, "ptx");
  DeviceKernelHandle saxpy = module.kernel("saxpy");
  const int n = 100003;
  const std::vector<float> x = iota_values(n, 1.0f, 0.5f);
  const std::vector<float> y0 = iota_values(n, -2.0f, 0.125f);
  DeviceBuffer x_device = device.alloc(n * 4);
  DeviceBuffer y_device = device.alloc(n * 4);
  device.copy_to_device(x_device, x.data(), n * 4);
  for (int64_t block : {1, 32, 100, 256, 1024}) {
    device.copy_to_device(y_device, y0.data(), n * 4);
    LaunchConfig config;
    config.block = {block, 1, 1};
    config.grid = {ceil_div(n, block), 1, 1};
    device.launch(saxpy, config, {x_device, y_device, 3.0f, int32_t{n}});
    std::vector<float> y(n);
    device.copy_to_host(y.data(), y_device, n * 4);
    for (int i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ(y[i], 3.0f * x[i] + y0[i]) << "element " << i << ", block " << block;
    }
  }
  EXPECT_ERROR_CONTAINS(device.launch(saxpy, LaunchConfig{}, {x_device, y_device, 3.0f}),
                        "kernel 'saxpy' takes 4 arguments, got 3");
  EXPECT_ERROR_CONTAINS(
      device.launch(saxpy, LaunchConfig{}, {x_device, y_device, 3.0f, int64_t{n}}),
      "argument 3 is 8 bytes, the PTX parameter 4");

  // Dynamic shared memory, also past the 48 KiB a kernel gets without opting in.
  DeviceKernelHandle reverse = module.kernel("scale_dynamic_shared");
  for (int64_t extra : {int64_t{0}, info.max_shared_memory_per_block - 1024 * 4}) {
    const int64_t block = 1024;
    const int m = 16 * 1024;
    const std::vector<float> v0 = iota_values(m, 0.0f, 1.0f);
    DeviceBuffer v = device.alloc(m * 4);
    device.copy_to_device(v, v0.data(), m * 4);
    LaunchConfig config;
    config.block = {block, 1, 1};
    config.grid = {m / block, 1, 1};
    config.dyn_shared_bytes = block * 4 + extra;
    device.launch(reverse, config, {v, int32_t{m}});
    std::vector<float> out(m);
    device.copy_to_host(out.data(), v, m * 4);
    for (int i = 0; i < m; ++i) {
      const int base = i / 1024 * 1024;
      ASSERT_FLOAT_EQ(out[i], 2.0f * v0[base + 1023 - (i - base)])
          << "element " << i << ", " << config.dyn_shared_bytes << " bytes of shared memory";
    }
  }

  const double ms = device.time_ms([&] {
    LaunchConfig config;
    config.block = {256, 1, 1};
    config.grid = {ceil_div(n, 256), 1, 1};
    for (int i = 0; i < 10; ++i) device.launch(saxpy, config, {x_device, y_device, 1.0f, n});
  });
  EXPECT_GT(ms, 0.0);
  EXPECT_ERROR_CONTAINS(module.kernel("nope"), "no kernel 'nope' in the PTX module");
  EXPECT_ERROR_CONTAINS(module.kernel("nope"), "saxpy, scale_dynamic_shared");
  EXPECT_ERROR_CONTAINS(device.load_module(".version 7.0\n.target sm_70\nbogus;\n", "ptx"),
                        "JIT log:");
}

TEST(DeviceCPUTest, TheCPUHasNoDeviceAPI) {
  std::string why;
  EXPECT_FALSE(DeviceAPI::available(TargetKind::kCpu, &why));
  EXPECT_NE(why.find("host code runs through Module"), std::string::npos);
  EXPECT_ERROR_CONTAINS(DeviceAPI::get(TargetKind::kCpu), "the CPU has no DeviceAPI");
}

TEST(DeviceCPUTest, NorHasTheVdla) {
  std::string why;
  EXPECT_EQ(DeviceAPI::count(TargetKind::kVdla, &why), 0);
  EXPECT_NE(why.find("its programs run on the VDLA's simulator"), std::string::npos) << why;
  EXPECT_ERROR_CONTAINS(DeviceAPI::get(TargetKind::kVdla), "the VDLA has no DeviceAPI");
}

}  // namespace
}  // namespace kiln::runtime
