// Printed OpenCL C on a real OpenCL implementation (PoCL on this CPU): every test kernel builds
// with clBuildProgram, and the tiled matmul and the division kernel run with
// clEnqueueNDRangeKernel (global size = grid x block) and match plain C++ loops. Skipped when
// there is no OpenCL platform.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/codegen/codegen_device_c.h"
#include "tests/unit/device_test_kernels.h"

namespace kiln {
namespace {

/// One OpenCL context and queue on the first device of the first platform.
class OpenCL {
 public:
  OpenCL() {
    cl_uint platforms = 0;
    if (clGetPlatformIDs(1, &platform_, &platforms) != CL_SUCCESS || platforms == 0) return;
    if (clGetDeviceIDs(platform_, CL_DEVICE_TYPE_ALL, 1, &device_, nullptr) != CL_SUCCESS) return;
    cl_int err = CL_SUCCESS;
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return;
    queue_ = clCreateCommandQueue(context_, device_, 0, &err);
  }
  ~OpenCL() {
    if (program_ != nullptr) clReleaseProgram(program_);
    if (queue_ != nullptr) clReleaseCommandQueue(queue_);
    if (context_ != nullptr) clReleaseContext(context_);
  }
  bool ready() const { return queue_ != nullptr; }
  bool has_extension(const std::string& name) const {
    char buf[8192] = {};
    clGetDeviceInfo(device_, CL_DEVICE_EXTENSIONS, sizeof buf - 1, buf, nullptr);
    return std::string(buf).find(name) != std::string::npos;
  }

  /// Builds `source`; returns the build log on failure, "" on success.
  std::string build(const std::string& source) {
    const char* text = source.c_str();
    cl_int err = CL_SUCCESS;
    program_ = clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
    if (err != CL_SUCCESS) return "clCreateProgramWithSource failed: " + std::to_string(err);
    if (clBuildProgram(program_, 1, &device_, "", nullptr, nullptr) == CL_SUCCESS) return "";
    size_t size = 0;
    clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    return "build failed:\n" + log;
  }

  template <typename T>
  cl_mem buffer(std::vector<T>& host) {
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              host.size() * sizeof(T), host.data(), &err);
    EXPECT_EQ(err, CL_SUCCESS);
    return m;
  }

  /// Runs kernel `name` over grid x block work-items with `args` (cl_mem or scalars).
  void run(const std::string& name, const std::vector<std::pair<size_t, const void*>>& args,
           std::array<size_t, 2> grid, std::array<size_t, 2> block) {
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(program_, name.c_str(), &err);
    ASSERT_EQ(err, CL_SUCCESS) << name;
    for (size_t i = 0; i < args.size(); ++i) {
      ASSERT_EQ(clSetKernelArg(k, static_cast<cl_uint>(i), args[i].first, args[i].second),
                CL_SUCCESS);
    }
    const size_t global[2] = {grid[0] * block[0], grid[1] * block[1]};
    ASSERT_EQ(
        clEnqueueNDRangeKernel(queue_, k, 2, nullptr, global, block.data(), 0, nullptr, nullptr),
        CL_SUCCESS);
    ASSERT_EQ(clFinish(queue_), CL_SUCCESS);
    clReleaseKernel(k);
  }

  template <typename T>
  void read(cl_mem m, std::vector<T>& host) {
    ASSERT_EQ(clEnqueueReadBuffer(queue_, m, CL_TRUE, 0, host.size() * sizeof(T), host.data(), 0,
                                  nullptr, nullptr),
              CL_SUCCESS);
    clReleaseMemObject(m);
  }

 private:
  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_program program_ = nullptr;
};

#define REQUIRE_OPENCL(cl) \
  if (!(cl).ready()) GTEST_SKIP() << "no OpenCL platform (install pocl-opencl-icd)"

TEST(OpenCLDeviceC, EveryTestKernelBuilds) {
  OpenCL cl;
  REQUIRE_OPENCL(cl);
  std::vector<ir::PrimFunc> funcs = {
      testing::tiled_matmul(), testing::div_mod(),
      testing::vectors(),      testing::math("math_f32", ir::kFloat32),
      testing::misc(),         testing::vector_let()};
  if (cl.has_extension("cl_khr_fp64"))
    funcs.push_back(testing::math("math_f64", ir::DataType::Float(64)));
  if (cl.has_extension("cl_khr_fp16")) funcs.push_back(testing::math("math_f16", ir::kFloat16));
  const std::string source = codegen::print_opencl(funcs);
  EXPECT_EQ(cl.build(source), "") << source;
}

TEST(OpenCLDeviceC, TiledMatmulRunsAndMatchesLoops) {
  OpenCL cl;
  REQUIRE_OPENCL(cl);
  ASSERT_EQ(cl.build(codegen::print_opencl({testing::tiled_matmul()})), "");
  constexpr int n = testing::kMatmulN;
  std::vector<float> a(n * n), b(n * n), c(n * n, -1.0f), expected(n * n, 0.0f);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.5f;
    b[i] = static_cast<float>((i * 5) % 11) / 11.0f - 0.5f;
  }
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k)
      for (int j = 0; j < n; ++j) expected[i * n + j] += a[i * n + k] * b[k * n + j];
  cl_mem da = cl.buffer(a), db = cl.buffer(b), dc = cl.buffer(c);
  constexpr size_t blocks = n / testing::kMatmulBlockTile, threads = testing::kMatmulThreads;
  cl.run("tiled_matmul", {{sizeof(cl_mem), &da}, {sizeof(cl_mem), &db}, {sizeof(cl_mem), &dc}},
         {blocks, blocks}, {threads, threads});
  cl.read(dc, c);
  clReleaseMemObject(da);
  clReleaseMemObject(db);
  for (int i = 0; i < n * n; ++i) ASSERT_NEAR(c[i], expected[i], 1e-5) << "at " << i;
}

TEST(OpenCLDeviceC, DivisionOfNegativeNumbersFollowsTheIR) {
  OpenCL cl;
  REQUIRE_OPENCL(cl);
  ASSERT_EQ(cl.build(codegen::print_opencl({testing::div_mod()})), "");
  constexpr int threads = testing::kDivModThreads;
  auto floordiv = [](int a, int b) {
    return static_cast<int>(std::floor(static_cast<double>(a) / b));
  };
  auto floormod = [&](int a, int b) { return a - floordiv(a, b) * b; };
  for (int n : {-3, 5}) {
    std::vector<int> x(threads), out(threads * 8, 0);
    for (int t = 0; t < threads; ++t) x[t] = t - 9;  // -9 .. 6
    cl_mem dx = cl.buffer(x), dout = cl.buffer(out);
    cl.run("div_mod", {{sizeof(cl_mem), &dx}, {sizeof(cl_mem), &dout}, {sizeof(int), &n}}, {1, 1},
           {threads, 1});
    cl.read(dout, out);
    clReleaseMemObject(dx);
    for (int t = 0; t < threads; ++t) {
      const int v = x[t];
      const int expected[8] = {v / n,          v % n,          floordiv(v, 4), floormod(v, 4),
                               floordiv(v, 3), floormod(v, 3), floordiv(v, n), (t + 5) / 3};
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(out[t * 8 + i], expected[i]) << "x = " << v << ", n = " << n << ", value " << i;
      }
    }
  }
}

TEST(OpenCLDeviceC, VectorAccessesRunAndMatchLoops) {
  OpenCL cl;
  REQUIRE_OPENCL(cl);
  ASSERT_EQ(cl.build(codegen::print_opencl({testing::vectors()})), "");
  std::vector<float> x(64), out(64, 0.0f);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i) - 20.0f;
  int n = 3;
  cl_mem dx = cl.buffer(x), dout = cl.buffer(out);
  cl.run("vectors", {{sizeof(cl_mem), &dx}, {sizeof(cl_mem), &dout}, {sizeof(int), &n}}, {1, 1},
         {16, 1});
  cl.read(dout, out);
  clReleaseMemObject(dx);
  for (int t = 0; t < 16; ++t) {
    for (int l = 0; l < 4; ++l) {
      const int i = t * 4 + l;
      float expected = x[t + 16 * l];  // the gather overwrote x * 2 + 1
      if (i < 62) expected = std::max(expected, static_cast<float>(n));
      EXPECT_EQ(out[i], expected) << "at " << i;
    }
  }
}

TEST(OpenCLDeviceC, MathIntrinsicsComputeWhatTheirNamesSay) {
  OpenCL cl;
  REQUIRE_OPENCL(cl);
  ASSERT_EQ(cl.build(codegen::print_opencl({testing::math("math_f32", ir::kFloat32)})), "");
  const std::vector<std::string>& names = testing::math_intrinsics();
  const size_t count = names.size();
  std::vector<float> x(count + 1), out(count, 0.0f);
  for (size_t i = 0; i <= count; ++i)
    x[i] = 0.37f + 0.01f * static_cast<float>(i);  // inside every domain
  auto input = [&](const char* name, float v) {
    x[std::find(names.begin(), names.end(), name) - names.begin()] = v;
  };
  input("acosh", 1.7f);
  input("floor", -1.5f);
  input("ceil", -1.5f);
  input("trunc", -1.5f);
  input("round", 2.5f);      // halfway: away from zero, 3
  input("roundeven", 2.5f);  // halfway: to even, 2
  input("sigmoid", -2.0f);
  cl_mem dx = cl.buffer(x), dout = cl.buffer(out);
  cl.run("math_f32", {{sizeof(cl_mem), &dx}, {sizeof(cl_mem), &dout}}, {1, 1}, {1, 1});
  cl.read(dout, out);
  clReleaseMemObject(dx);
  for (size_t i = 0; i < count; ++i) {
    const double v = x[i], y = x[i + 1];
    const std::string& f = names[i];
    const double expected = f == "exp"         ? std::exp(v)
                            : f == "exp2"      ? std::exp2(v)
                            : f == "log"       ? std::log(v)
                            : f == "log2"      ? std::log2(v)
                            : f == "log10"     ? std::log10(v)
                            : f == "sqrt"      ? std::sqrt(v)
                            : f == "fabs"      ? std::fabs(v)
                            : f == "floor"     ? std::floor(v)
                            : f == "ceil"      ? std::ceil(v)
                            : f == "trunc"     ? std::trunc(v)
                            : f == "round"     ? std::round(v)
                            : f == "roundeven" ? std::nearbyint(v)
                            : f == "sin"       ? std::sin(v)
                            : f == "cos"       ? std::cos(v)
                            : f == "tan"       ? std::tan(v)
                            : f == "asin"      ? std::asin(v)
                            : f == "acos"      ? std::acos(v)
                            : f == "atan"      ? std::atan(v)
                            : f == "sinh"      ? std::sinh(v)
                            : f == "cosh"      ? std::cosh(v)
                            : f == "asinh"     ? std::asinh(v)
                            : f == "acosh"     ? std::acosh(v)
                            : f == "atanh"     ? std::atanh(v)
                            : f == "tanh"      ? std::tanh(v)
                            : f == "erf"       ? std::erf(v)
                            : f == "sigmoid"   ? 1.0 / (1.0 + std::exp(-v))
                            : f == "pow"       ? std::pow(v, y)
                                               : v * y + y;  // fma
    EXPECT_NEAR(out[i], expected, 1e-5 * std::max(1.0, std::fabs(expected)))
        << f << "(" << v << ")";
  }
}

}  // namespace
}  // namespace kiln
