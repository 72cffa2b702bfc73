// Device C printing: the paper's tiled matmul as CUDA C and OpenCL C (golden text), vector
// loads and stores, integer division of negative numbers, every math intrinsic in both
// dialects, and the errors for IR a kernel cannot hold.
#include "compiler/codegen/codegen_device_c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "tests/unit/device_test_kernels.h"

namespace kiln {
namespace {

using codegen::print_cuda;
using codegen::print_opencl;
using namespace ir;
using testing::thread_axis;
using testing::thread_extent;

TEST(DeviceC, TiledMatmulCuda) {
  EXPECT_EQ(
      print_cuda({testing::tiled_matmul()}),
      R"(extern "C" __global__ void __launch_bounds__(64) tiled_matmul(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  __shared__ __align__(16) float AA[256];
  __shared__ __align__(16) float BB[256];
  int by = blockIdx.y;
  int bx = blockIdx.x;
  int ty = threadIdx.y;
  int tx = threadIdx.x;
  float CL[16];
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      CL[i * 4 + j] = 0.0f;
    }
  }
  for (int k = 0; k < 8; ++k) {
    __syncthreads();
    *(float4*)(AA + (ty * 32 + tx * 4)) = *(float4*)(A + ((by * 32 + ty * 4 + tx / 2) * 64 + k * 8 + tx % 2 * 4));
    *(float4*)(BB + (ty * 32 + tx * 4)) = *(float4*)(B + ((k * 8 + ty) * 64 + bx * 32 + tx * 4));
    __syncthreads();
    for (int kk = 0; kk < 8; ++kk) {
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          CL[i * 4 + j] = CL[i * 4 + j] + AA[(ty * 4 + i) * 8 + kk] * BB[kk * 32 + tx * 4 + j];
        }
      }
    }
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    *(float4*)(C + ((by * 32 + ty * 4 + i) * 64 + bx * 32 + tx * 4)) = make_float4(CL[i * 4], CL[i * 4 + 1], CL[i * 4 + 2], CL[i * 4 + 3]);
  }
}
)");
}

TEST(DeviceC, TiledMatmulOpenCL) {
  EXPECT_EQ(
      print_opencl({testing::tiled_matmul()}),
      R"(__kernel void tiled_matmul(__global const float* restrict A, __global const float* restrict B, __global float* restrict C) {
  __local float AA[256];
  __local float BB[256];
  int by = (int)get_group_id(1);
  int bx = (int)get_group_id(0);
  int ty = (int)get_local_id(1);
  int tx = (int)get_local_id(0);
  float CL[16];
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
      CL[i * 4 + j] = 0.0f;
    }
  }
  for (int k = 0; k < 8; ++k) {
    barrier(CLK_LOCAL_MEM_FENCE);
    vstore4(vload4(0, A + ((by * 32 + ty * 4 + tx / 2) * 64 + k * 8 + tx % 2 * 4)), 0, AA + (ty * 32 + tx * 4));
    vstore4(vload4(0, B + ((k * 8 + ty) * 64 + bx * 32 + tx * 4)), 0, BB + (ty * 32 + tx * 4));
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < 8; ++kk) {
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          CL[i * 4 + j] = CL[i * 4 + j] + AA[(ty * 4 + i) * 8 + kk] * BB[kk * 32 + tx * 4 + j];
        }
      }
    }
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    vstore4(((float4)(CL[i * 4], CL[i * 4 + 1], CL[i * 4 + 2], CL[i * 4 + 3])), 0, C + ((by * 32 + ty * 4 + i) * 64 + bx * 32 + tx * 4));
  }
}
)");
}

TEST(DeviceC, VectorLoadsAndStoresCuda) {
  // Aligned contiguous accesses are float4; the gather, and the predicated store that reads what
  // it writes, go lane by lane.
  EXPECT_EQ(
      print_cuda({testing::vectors()}),
      R"(extern "C" __global__ void __launch_bounds__(16) vectors(const float* __restrict__ x, float* __restrict__ out, int n) {
  int tx = threadIdx.x;
  float4 x_vec = *(float4*)(x + tx * 4);
  *(float4*)(out + tx * 4) = make_float4(x_vec.x * 2.0f + 1.0f, x_vec.y * 2.0f + 1.0f, x_vec.z * 2.0f + 1.0f, x_vec.w * 2.0f + 1.0f);
  *(float4*)(out + tx * 4) = make_float4(x[tx], x[tx + 16], x[tx + 32], x[tx + 48]);
  float out_lanes[4] = {fmaxf(tx * 4 < 62 ? out[tx * 4] : 0.0f, (float)n), fmaxf(tx * 4 + 1 < 62 ? out[tx * 4 + 1] : 0.0f, (float)n), fmaxf(tx * 4 + 2 < 62 ? out[tx * 4 + 2] : 0.0f, (float)n), fmaxf(tx * 4 + 3 < 62 ? out[tx * 4 + 3] : 0.0f, (float)n)};
  if (tx * 4 < 62) out[tx * 4] = out_lanes[0];
  if (tx * 4 + 1 < 62) out[tx * 4 + 1] = out_lanes[1];
  if (tx * 4 + 2 < 62) out[tx * 4 + 2] = out_lanes[2];
  if (tx * 4 + 3 < 62) out[tx * 4 + 3] = out_lanes[3];
}
)");
}

TEST(DeviceC, VectorLoadsAndStoresOpenCL) {
  EXPECT_EQ(
      print_opencl({testing::vectors()}),
      R"(__kernel void vectors(__global const float* restrict x, __global float* restrict out, int n) {
  int tx = (int)get_local_id(0);
  float4 x_vec = vload4(0, x + tx * 4);
  vstore4(((float4)(x_vec.x * 2.0f + 1.0f, x_vec.y * 2.0f + 1.0f, x_vec.z * 2.0f + 1.0f, x_vec.w * 2.0f + 1.0f)), 0, out + tx * 4);
  vstore4(((float4)(x[tx], x[tx + 16], x[tx + 32], x[tx + 48])), 0, out + tx * 4);
  float out_lanes[4] = {fmax(tx * 4 < 62 ? out[tx * 4] : 0.0f, (float)n), fmax(tx * 4 + 1 < 62 ? out[tx * 4 + 1] : 0.0f, (float)n), fmax(tx * 4 + 2 < 62 ? out[tx * 4 + 2] : 0.0f, (float)n), fmax(tx * 4 + 3 < 62 ? out[tx * 4 + 3] : 0.0f, (float)n)};
  if (tx * 4 < 62) out[tx * 4] = out_lanes[0];
  if (tx * 4 + 1 < 62) out[tx * 4 + 1] = out_lanes[1];
  if (tx * 4 + 2 < 62) out[tx * 4 + 2] = out_lanes[2];
  if (tx * 4 + 3 < 62) out[tx * 4 + 3] = out_lanes[3];
}
)");
}

TEST(DeviceC, UnalignedVectorAccessGoesLaneByLaneOnCuda) {
  Buffer X = make_buffer("x", kFloat32, {64});
  IterVar tx = thread_axis("tx", "threadIdx.x", 15);
  const DataType f4 = DataType::Float(32, 4);
  Expr shifted = ramp(Expr(tx) * 4 + 1, 1, 4);
  Stmt s = store(X.data, load(f4, X.data, shifted) + broadcast(1.0f, 4), ramp(Expr(tx) * 4, 1, 4));
  PrimFunc f{"shift", {testing::tensor_param(X)}, thread_extent(tx, 15, s)};
  const std::string cuda = print_cuda({f});
  EXPECT_NE(
      cuda.find("*(float4*)(x + tx * 4) = make_float4(x[tx * 4 + 1] + 1.0f, x[tx * 4 + 2] + 1.0f, "
                "x[tx * 4 + 3] + 1.0f, x[tx * 4 + 4] + 1.0f);"),
      std::string::npos)
      << cuda;
  const std::string opencl = print_opencl({f});
  EXPECT_NE(opencl.find("float4 x_vec = vload4(0, x + (tx * 4 + 1));"), std::string::npos)
      << opencl;
}

TEST(DeviceC, VectorLetBecomesAnArrayOfLanes) {
  EXPECT_EQ(
      print_cuda({testing::vector_let()}),
      "extern \"C\" __global__ void __launch_bounds__(16) vector_let(const float* __restrict__ x, "
      "float* __restrict__ out) {\n"
      "  int tx = threadIdx.x;\n"
      "  float4 x_vec = *(float4*)(x + tx * 4);\n"
      "  float v[4] = {x_vec.x, x_vec.y, x_vec.z, x_vec.w};\n"
      "  *(float4*)(out + tx * 4) = make_float4(v[0] > 0.0f ? v[0] : v[0] * 0.5f, "
      "v[1] > 0.0f ? v[1] : v[1] * 0.5f, v[2] > 0.0f ? v[2] : v[2] * 0.5f, "
      "v[3] > 0.0f ? v[3] : v[3] * 0.5f);\n"
      "}\n");
}

TEST(DeviceC, IntegerDivisionOfNegativeNumbers) {
  // Div / Mod truncate as C does; FloorDiv / FloorMod round toward minus infinity: a shift and
  // a mask for powers of two, plain C when both sides are provably non-negative, a helper
  // otherwise.
  EXPECT_EQ(print_cuda({testing::div_mod()}),
            R"(__device__ __forceinline__ int kiln_floordiv_i32(int a, int b) {
  int q = a / b;
  return a % b != 0 && (a % b < 0) != (b < 0) ? q - 1 : q;
}

__device__ __forceinline__ int kiln_floormod_i32(int a, int b) {
  int r = a % b;
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}

extern "C" __global__ void __launch_bounds__(16) div_mod(const int* __restrict__ x, int* __restrict__ out, int n) {
  int tx = threadIdx.x;
  out[tx * 8] = x[tx] / n;
  out[tx * 8 + 1] = x[tx] % n;
  out[tx * 8 + 2] = x[tx] >> 2;
  out[tx * 8 + 3] = x[tx] & 3;
  out[tx * 8 + 4] = kiln_floordiv_i32(x[tx], 3);
  out[tx * 8 + 5] = kiln_floormod_i32(x[tx], 3);
  out[tx * 8 + 6] = kiln_floordiv_i32(x[tx], n);
  out[tx * 8 + 7] = (tx + 5) / 3;
}
)");
  const std::string opencl = print_opencl({testing::div_mod()});
  EXPECT_NE(opencl.find("static inline int kiln_floordiv_i32(int a, int b) {"), std::string::npos)
      << opencl;
  EXPECT_NE(opencl.find("out[tx * 8 + 6] = kiln_floordiv_i32(x[tx], n);"), std::string::npos)
      << opencl;
}

TEST(DeviceC, FloorDivisionOf64BitAndFloatValues) {
  Buffer X = make_buffer("x", kInt64, {4});
  Buffer F = make_buffer("f", kFloat32, {4});
  Var n("n", kInt64);
  IterVar bx = thread_axis("bx", "blockIdx.x", 1);
  Stmt s = seq({store(X.data, floordiv(load(kInt64, X.data, 0), n), 0),
                store(X.data, floormod(load(kInt64, X.data, 1), n), 1),
                store(F.data, floordiv(load(kFloat32, F.data, 0), 3.0f), 0),
                store(F.data, floormod(load(kFloat32, F.data, 1), 3.0f), 1)});
  PrimFunc f{"wide",
             {testing::tensor_param(X), testing::tensor_param(F), Param{n, std::nullopt}},
             thread_extent(bx, 1, s)};
  const std::string cuda = print_cuda({f});
  EXPECT_NE(
      cuda.find("__device__ __forceinline__ long long kiln_floordiv_i64(long long a, long long b)"),
      std::string::npos)
      << cuda;
  EXPECT_NE(cuda.find("x[0] = kiln_floordiv_i64(x[0], n);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("x[1] = kiln_floormod_i64(x[1], n);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("f[0] = floorf(f[0] / 3.0f);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("f[1] = f[1] - floorf(f[1] / 3.0f) * 3.0f;"), std::string::npos) << cuda;
  const std::string opencl = print_opencl({f});
  EXPECT_NE(opencl.find("static inline long kiln_floormod_i64(long a, long b)"), std::string::npos)
      << opencl;
  EXPECT_NE(opencl.find("f[0] = floor(f[0] / 3.0f);"), std::string::npos) << opencl;
}

TEST(DeviceC, EveryMathIntrinsicInBothDialects) {
  struct Row {
    const char* cuda_f32;
    const char* cuda_f64;
    const char* opencl;
  };
  // The call each intrinsic prints as, on x[i] (and y = x[i + 1]).
  const std::vector<Row> rows = {
      {"expf(x)", "exp(x)", "exp(x)"},
      {"exp2f(x)", "exp2(x)", "exp2(x)"},
      {"logf(x)", "log(x)", "log(x)"},
      {"log2f(x)", "log2(x)", "log2(x)"},
      {"log10f(x)", "log10(x)", "log10(x)"},
      {"sqrtf(x)", "sqrt(x)", "sqrt(x)"},
      {"fabsf(x)", "fabs(x)", "fabs(x)"},
      {"floorf(x)", "floor(x)", "floor(x)"},
      {"ceilf(x)", "ceil(x)", "ceil(x)"},
      {"truncf(x)", "trunc(x)", "trunc(x)"},
      {"roundf(x)", "round(x)", "round(x)"},
      {"rintf(x)", "rint(x)", "rint(x)"},
      {"sinf(x)", "sin(x)", "sin(x)"},
      {"cosf(x)", "cos(x)", "cos(x)"},
      {"tanf(x)", "tan(x)", "tan(x)"},
      {"asinf(x)", "asin(x)", "asin(x)"},
      {"acosf(x)", "acos(x)", "acos(x)"},
      {"atanf(x)", "atan(x)", "atan(x)"},
      {"sinhf(x)", "sinh(x)", "sinh(x)"},
      {"coshf(x)", "cosh(x)", "cosh(x)"},
      {"asinhf(x)", "asinh(x)", "asinh(x)"},
      {"acoshf(x)", "acosh(x)", "acosh(x)"},
      {"atanhf(x)", "atanh(x)", "atanh(x)"},
      {"tanhf(x)", "tanh(x)", "tanh(x)"},
      {"erff(x)", "erf(x)", "erf(x)"},
      {"1.0f / (1.0f + expf(-x))", "1.0 / (1.0 + exp(-x))", "1.0f / (1.0f + exp(-x))"},
      {"powf(x, y)", "pow(x, y)", "pow(x, y)"},
      {"fmaf(x, y, y)", "fma(x, y, y)", "fma(x, y, y)"},
  };
  ASSERT_EQ(rows.size(), testing::math_intrinsics().size());
  const std::string cuda =
      print_cuda({testing::math("m32", kFloat32), testing::math("m64", DataType::Float(64))});
  const std::string opencl =
      print_opencl({testing::math("m32", kFloat32), testing::math("m64", DataType::Float(64))});
  const std::string cuda_f32 = cuda.substr(0, cuda.find("m64"));
  const std::string cuda_f64 = cuda.substr(cuda.find("m64"));
  auto expect_line = [](const std::string& source, size_t i, std::string call) {
    auto replace = [&](const std::string& from, const std::string& to) {
      for (size_t p; (p = call.find(from)) != std::string::npos;) call.replace(p, from.size(), to);
    };
    replace("y", "x[" + std::to_string(i + 1) + "]");
    // Only the argument x, not the x of exp and the like.
    for (size_t p = 0; (p = call.find('x', p)) != std::string::npos; ++p) {
      const bool arg = (p == 0 || !std::isalpha(static_cast<unsigned char>(call[p - 1]))) &&
                       (p + 1 == call.size() || call[p + 1] != '[');
      const bool is_exp = p >= 2 && call.compare(p - 2, 3, "exp") == 0;
      if (arg && !is_exp) call.replace(p, 1, "x[" + std::to_string(i) + "]");
    }
    const std::string line = "  out[" + std::to_string(i) + "] = " + call + ";\n";
    EXPECT_NE(source.find(line), std::string::npos) << "missing " << line << "in\n" << source;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    expect_line(cuda_f32, i, rows[i].cuda_f32);
    expect_line(cuda_f64, i, rows[i].cuda_f64);
    expect_line(opencl, i, rows[i].opencl);
  }
  EXPECT_EQ(opencl.rfind("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n", 0), 0u) << opencl;
}

TEST(DeviceC, HalfComputesMathInFloat) {
  const std::string cuda = print_cuda({testing::math("m16", kFloat16)});
  EXPECT_EQ(cuda.rfind("#include <cuda_fp16.h>\n", 0), 0u) << cuda;
  EXPECT_NE(cuda.find("out[0] = (half)expf((float)x[0]);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("out[25] = (half)(1.0f / (1.0f + expf(-(float)x[25])));"), std::string::npos)
      << cuda;
  const std::string opencl = print_opencl({testing::math("m16", kFloat16)});
  EXPECT_EQ(opencl.rfind("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n", 0), 0u) << opencl;
  EXPECT_NE(opencl.find("out[26] = (half)pow((float)x[26], (float)x[27]);"), std::string::npos)
      << opencl;
}

TEST(DeviceC, ScalarStatementsAndExpressionsCuda) {
  EXPECT_EQ(
      print_cuda({testing::misc()}),
      R"(extern "C" __global__ void __launch_bounds__(32) misc(const float* __restrict__ x, float* __restrict__ out, int n) {
  int tx = threadIdx.x;
  int m = min(tx * 2, n - 1);
  assert((n > 0) && "n must be positive");
  if (tx < n) {
    out[tx] = x[tx] > 0.0f ? x[tx] : x[tx] * 0.1f;
  } else {
    out[tx] = -__int_as_float(0x7f800000);
  }
  float y = x[m] * 2.0f;
  out[tx + 32] = y * y;
  out[tx + 64] = (float)((long long)tx * 3000000000LL);
  out[tx + 96] = (float)(!(tx == 3) || (tx >= 5 && n != -2));
}
)");
}

TEST(DeviceC, ScalarStatementsAndExpressionsOpenCL) {
  EXPECT_EQ(
      print_opencl({testing::misc()}),
      R"(__kernel void misc(__global const float* restrict x, __global float* restrict out, int n) {
  int tx = (int)get_local_id(0);
  int m = min(tx * 2, n - 1);
  // assert n > 0: n must be positive (OpenCL C cannot check it)
  if (tx < n) {
    out[tx] = x[tx] > 0.0f ? x[tx] : x[tx] * 0.1f;
  } else {
    out[tx] = -INFINITY;
  }
  float y = x[m] * 2.0f;
  out[tx + 32] = y * y;
  out[tx + 64] = (float)((long)tx * 3000000000L);
  out[tx + 96] = (float)(!(tx == 3) || (tx >= 5 && n != -2));
}
)");
}

TEST(DeviceC, SeveralKernelsInOneSource) {
  const std::string cuda = print_cuda({testing::tiled_matmul(), testing::div_mod()});
  EXPECT_NE(cuda.find("void __launch_bounds__(64) tiled_matmul("), std::string::npos);
  EXPECT_NE(cuda.find("void __launch_bounds__(16) div_mod("), std::string::npos);
  // Helpers come before every kernel.
  EXPECT_LT(cuda.find("kiln_floordiv_i32(int a"), cuda.find("tiled_matmul"));
}

TEST(DeviceC, SiblingLoopsReuseTheirNames) {
  Buffer X = make_buffer("x", kFloat32, {8});
  IterVar bx = thread_axis("bx", "blockIdx.x", 1);
  Var i("i"), j("i");  // two variables with one name, in nested loops
  Stmt s = seq({for_loop(i, 0, 4, ForKind::kSerial,
                         for_loop(j, 0, 2, ForKind::kSerial, store(X.data, 1.0f, i * 2 + j))),
                for_loop(i, 0, 8, ForKind::kSerial, store(X.data, 0.0f, i))});
  const std::string cuda =
      print_cuda({PrimFunc{"names", {testing::tensor_param(X)}, thread_extent(bx, 1, s)}});
  EXPECT_NE(cuda.find("for (int i_1 = 0; i_1 < 2; ++i_1) {"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("x[i * 2 + i_1] = 1.0f;"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("  for (int i = 0; i < 8; ++i) {\n    x[i] = 0.0f;"), std::string::npos)
      << cuda;
}

TEST(DeviceC, ALetOfABufferIsAnotherNameForIt) {
  Buffer X = make_buffer("x", kFloat32, {8});
  IterVar bx = thread_axis("bx", "blockIdx.x", 1);
  Var alias("x_alias", DataType::Handle());
  Stmt s = let_stmt(alias, X.data, store(alias, load(kFloat32, alias, 1) + 1.0f, 0));
  const std::string cuda =
      print_cuda({PrimFunc{"alias", {testing::tensor_param(X)}, thread_extent(bx, 1, s)}});
  EXPECT_NE(cuda.find("(float* __restrict__ x) {\n  x[0] = x[1] + 1.0f;\n}"), std::string::npos)
      << cuda;
}

void expect_error(const PrimFunc& f, const std::string& message) {
  try {
    print_cuda({f});
    FAIL() << "printed " << f.name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(DeviceC, ErrorsForWhatAKernelCannotHold) {
  Buffer X = make_buffer("x", kFloat32, {8});
  IterVar bx = thread_axis("bx", "blockIdx.x", 1);
  Var buf("scratch", DataType::Handle()), n("n");
  Stmt write = store(X.data, 1.0f, 0);
  expect_error(PrimFunc{"k",
                        {testing::tensor_param(X)},
                        thread_extent(bx, 1, allocate(buf, kFloat32, {8}, "global", write))},
               "a kernel allocates only shared and local memory");
  expect_error(PrimFunc{"k",
                        {testing::tensor_param(X), Param{n, std::nullopt}},
                        thread_extent(bx, 1, allocate(buf, kFloat32, {n}, "shared", write))},
               "device arrays need constant sizes");
  IterVar vt = thread_axis("vt", "vthread", 2);
  expect_error(
      PrimFunc{
          "k", {testing::tensor_param(X)}, attr_stmt(vt.node(), attr::kVirtualThread, 2, write)},
      "inject_virtual_thread must run first");
  expect_error(PrimFunc{"my.kernel", {testing::tensor_param(X)}, thread_extent(bx, 1, write)},
               "is not a C identifier");
  expect_error(PrimFunc{"k",
                        {testing::tensor_param(X)},
                        thread_extent(bx, 1, store(X.data, cast(kFloat32, n), 0))},
               "uses variable 'n'");
  IterVar other = thread_axis("b2", "blockIdx.x", 2);
  expect_error(
      PrimFunc{
          "k", {testing::tensor_param(X)}, thread_extent(bx, 1, thread_extent(other, 2, write))},
      "binds blockIdx.x with two different extents");
}

}  // namespace
}  // namespace kiln
