// Golden printouts of the paper's shared-memory tiled matmul (§4.2, Fig. 7) taken all the way
// from its schedule (tests/passes/gpu_matmul_schedule.h: 64×64, 32×32 block tiles, 4×4 threads,
// reduction steps of 8) through lower_device to CUDA C and OpenCL C: the shared tiles fetched
// cooperatively between two barriers in each reduction step, the per-thread tile accumulated in
// local memory, written back once.
#include <gtest/gtest.h>

#include "compiler/codegen/build_device.h"
#include "compiler/lower.h"
#include "tests/passes/gpu_matmul_schedule.h"

namespace kiln {
namespace {

std::string printed(const char* target_string) {
  pass::testing::GpuMatmul m(64, 32, 4, 8);
  target::Target target = target::Target::parse(target_string);
  return codegen::device_source(compiler::lower_device(m.s, {m.A, m.B, m.C}, "matmul", target),
                                target);
}

TEST(GpuMatmulGolden, Cuda) {
  EXPECT_EQ(
      printed("cuda -arch=sm_90"),
      R"CUDA(extern "C" __global__ void __launch_bounds__(16) matmul_kernel0(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
  __shared__ __align__(16) float A_shared[256];
  __shared__ __align__(16) float B_shared[256];
  int blockIdx_y = blockIdx.y;
  int blockIdx_x = blockIdx.x;
  int threadIdx_y = threadIdx.y;
  int threadIdx_x = threadIdx.x;
  float C_local[64];
  for (int i_init = 0; i_init < 8; ++i_init) {
    for (int j_init = 0; j_init < 8; ++j_init) {
      C_local[i_init * 8 + j_init] = 0.0f;
    }
  }
  for (int k_outer = 0; k_outer < 8; ++k_outer) {
    __syncthreads();
    for (int i_inner = 0; i_inner < 8; ++i_inner) {
      for (int j_inner = 0; j_inner < 2; ++j_inner) {
        A_shared[threadIdx_y * 64 + i_inner * 8 + threadIdx_x * 2 + j_inner] = A[threadIdx_y * 512 + i_inner * 64 + blockIdx_y * 2048 + threadIdx_x * 2 + j_inner + k_outer * 8];
      }
    }
    for (int i_inner = 0; i_inner < 2; ++i_inner) {
      for (int j_inner = 0; j_inner < 8; ++j_inner) {
        B_shared[threadIdx_y * 64 + i_inner * 32 + threadIdx_x * 8 + j_inner] = B[threadIdx_y * 128 + i_inner * 64 + k_outer * 512 + threadIdx_x * 8 + j_inner + blockIdx_x * 32];
      }
    }
    __syncthreads();
    for (int k_inner = 0; k_inner < 8; ++k_inner) {
      float A_shared_local[8];
      for (int i = 0; i < 8; ++i) {
        A_shared_local[i] = A_shared[i * 8 + threadIdx_y * 64 + k_inner];
      }
      float B_shared_local[8];
      for (int j = 0; j < 8; ++j) {
        B_shared_local[j] = B_shared[k_inner * 32 + j + threadIdx_x * 8];
      }
      for (int i = 0; i < 8; ++i) {
        for (int j = 0; j < 8; ++j) {
          C_local[i * 8 + j] = C_local[i * 8 + j] + A_shared_local[i] * B_shared_local[j];
        }
      }
    }
  }
  for (int i_inner_inner = 0; i_inner_inner < 8; ++i_inner_inner) {
    for (int j_inner_inner = 0; j_inner_inner < 8; ++j_inner_inner) {
      C[blockIdx_y * 2048 + threadIdx_y * 512 + i_inner_inner * 64 + blockIdx_x * 32 + threadIdx_x * 8 + j_inner_inner] = C_local[i_inner_inner * 8 + j_inner_inner];
    }
  }
}
)CUDA");
}

TEST(GpuMatmulGolden, OpenCL) {
  EXPECT_EQ(
      printed("opencl"),
      R"CL(__kernel void matmul_kernel0(__global const float* restrict A, __global const float* restrict B, __global float* restrict C) {
  __local float A_shared[256];
  __local float B_shared[256];
  int blockIdx_y = (int)get_group_id(1);
  int blockIdx_x = (int)get_group_id(0);
  int threadIdx_y = (int)get_local_id(1);
  int threadIdx_x = (int)get_local_id(0);
  float C_local[64];
  for (int i_init = 0; i_init < 8; ++i_init) {
    for (int j_init = 0; j_init < 8; ++j_init) {
      C_local[i_init * 8 + j_init] = 0.0f;
    }
  }
  for (int k_outer = 0; k_outer < 8; ++k_outer) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i_inner = 0; i_inner < 8; ++i_inner) {
      for (int j_inner = 0; j_inner < 2; ++j_inner) {
        A_shared[threadIdx_y * 64 + i_inner * 8 + threadIdx_x * 2 + j_inner] = A[threadIdx_y * 512 + i_inner * 64 + blockIdx_y * 2048 + threadIdx_x * 2 + j_inner + k_outer * 8];
      }
    }
    for (int i_inner = 0; i_inner < 2; ++i_inner) {
      for (int j_inner = 0; j_inner < 8; ++j_inner) {
        B_shared[threadIdx_y * 64 + i_inner * 32 + threadIdx_x * 8 + j_inner] = B[threadIdx_y * 128 + i_inner * 64 + k_outer * 512 + threadIdx_x * 8 + j_inner + blockIdx_x * 32];
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k_inner = 0; k_inner < 8; ++k_inner) {
      float A_shared_local[8];
      for (int i = 0; i < 8; ++i) {
        A_shared_local[i] = A_shared[i * 8 + threadIdx_y * 64 + k_inner];
      }
      float B_shared_local[8];
      for (int j = 0; j < 8; ++j) {
        B_shared_local[j] = B_shared[k_inner * 32 + j + threadIdx_x * 8];
      }
      for (int i = 0; i < 8; ++i) {
        for (int j = 0; j < 8; ++j) {
          C_local[i * 8 + j] = C_local[i * 8 + j] + A_shared_local[i] * B_shared_local[j];
        }
      }
    }
  }
  for (int i_inner_inner = 0; i_inner_inner < 8; ++i_inner_inner) {
    for (int j_inner_inner = 0; j_inner_inner < 8; ++j_inner_inner) {
      C[blockIdx_y * 2048 + threadIdx_y * 512 + i_inner_inner * 64 + blockIdx_x * 32 + threadIdx_x * 8 + j_inner_inner] = C_local[i_inner_inner * 8 + j_inner_inner];
    }
  }
}
)CL");
}

}  // namespace
}  // namespace kiln
