// The paper's shared-memory tiled matmul lowered for a GPU: the kernel's IR (barriers around the
// shared stores in the reduction's outer loop, shared buffers of the block's tile, launch grid and
// block), the same with virtual threads and with a vectorized cooperative fetch, each run thread
// by thread to check its numbers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "tests/passes/gpu_interpreter.h"
#include "tests/passes/gpu_matmul_schedule.h"

namespace kiln::pass {
namespace {

using testing::GpuMatmul;

DeviceFunction lower(GpuMatmul& m, const std::string& target = "cuda") {
  return compiler::lower_device(m.s, {m.A, m.B, m.C}, "matmul", target::Target::parse(target));
}

/// Runs the lowered matmul on seeded inputs and compares with a plain triple loop.
void expect_computes_matmul(const DeviceFunction& d, int n) {
  std::vector<std::vector<float>> args(3, std::vector<float>(static_cast<size_t>(n * n)));
  for (int i = 0; i < n * n; ++i) {
    args[0][static_cast<size_t>(i)] = static_cast<float>((i * 7) % 13) - 6.0f;
    args[1][static_cast<size_t>(i)] = static_cast<float>((i * 5) % 11) - 5.0f;
  }
  testing::run_on_threads(d, &args);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      float want = 0;
      for (int k = 0; k < n; ++k)
        want += args[0][static_cast<size_t>(i * n + k)] * args[1][static_cast<size_t>(k * n + j)];
      wrong += args[2][static_cast<size_t>(i * n + j)] != want;
    }
  }
  EXPECT_EQ(wrong, 0) << "elements of C differ from the reference";
}

TEST(LowerDevice, SharedMemoryTiledMatmul) {
  GpuMatmul m(128, 32, 8, 8);  // 32 x 32 block tiles, 8 x 8 threads of 4 x 4 each, k by 8
  DeviceFunction d = lower(m);
  EXPECT_EQ(d.name, "matmul");
  ASSERT_EQ(d.params.size(), 3u);
  EXPECT_TRUE(d.workspaces.empty());
  ASSERT_EQ(d.kernels.size(), 1u);
  const DeviceKernel& k = d.kernels[0];
  EXPECT_EQ(k.func.name, "matmul_kernel0");
  EXPECT_EQ(k.args, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(k.launch.grid, (std::array<int64_t, 3>{4, 4, 1}));
  EXPECT_EQ(k.launch.block, (std::array<int64_t, 3>{8, 8, 1}));
  EXPECT_EQ(ir::to_string(k.func.body),
            R"(attr [blockIdx.y] thread_extent = 4
attr [blockIdx.x] thread_extent = 4
attr [threadIdx.y] thread_extent = 8
attr [threadIdx.x] thread_extent = 8
allocate A.shared: float32[256] in shared
allocate B.shared: float32[256] in shared
allocate C.local: float32[16] in local
for i.init in range(4):
  for j.init in range(4):
    C.local[i.init*4 + j.init] = 0f
for k.outer in range(16):
  kiln.storage_sync("shared")
  for i.inner in range(4):
    A.shared[threadIdx.y*32 + i.inner*8 + threadIdx.x] = A[threadIdx.y*512 + i.inner*128 + blockIdx.y*4096 + threadIdx.x + k.outer*8]
  for j.inner in range(4):
    B.shared[threadIdx.y*32 + threadIdx.x*4 + j.inner] = B[threadIdx.y*128 + k.outer*1024 + threadIdx.x*4 + j.inner + blockIdx.x*32]
  kiln.storage_sync("shared")
  for k.inner in range(8):
    allocate A.shared.local: float32[4] in local
    for i in range(4):
      A.shared.local[i] = A.shared[i*8 + threadIdx.y*32 + k.inner]
    allocate B.shared.local: float32[4] in local
    for j in range(4):
      B.shared.local[j] = B.shared[k.inner*32 + j + threadIdx.x*4]
    for i in range(4):
      for j in range(4):
        C.local[i*4 + j] = C.local[i*4 + j] + A.shared.local[i]*B.shared.local[j]
for i.inner.inner in range(4):
  for j.inner.inner in range(4):
    C[blockIdx.y*4096 + threadIdx.y*512 + i.inner.inner*128 + blockIdx.x*32 + threadIdx.x*4 + j.inner.inner] = C.local[i.inner.inner*4 + j.inner.inner]
)");
  expect_computes_matmul(d, 128);
}

TEST(LowerDevice, SharedTilesAreTheBlockTile) {
  GpuMatmul m(256, 64, 16, 16);  // 64 x 16 tiles of A and 16 x 64 of B per block
  DeviceFunction d = lower(m);
  ASSERT_EQ(d.kernels.size(), 1u);
  std::string ir = ir::to_string(d.kernels[0].func.body);
  EXPECT_NE(ir.find("allocate A.shared: float32[1024] in shared"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate B.shared: float32[1024] in shared"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate C.local: float32[16] in local"), std::string::npos) << ir;
  EXPECT_EQ(d.kernels[0].launch.grid, (std::array<int64_t, 3>{4, 4, 1}));
  EXPECT_EQ(d.kernels[0].launch.block, (std::array<int64_t, 3>{16, 16, 1}));
}

TEST(LowerDevice, VirtualThreads) {
  GpuMatmul m(128, 64, 8, 8, 2);  // each thread: 2 x 2 virtual threads of 4 x 4, 32 apart
  DeviceFunction d = lower(m, "opencl");
  ASSERT_EQ(d.kernels.size(), 1u);
  const DeviceKernel& k = d.kernels[0];
  EXPECT_EQ(k.launch.grid, (std::array<int64_t, 3>{2, 2, 1}));
  EXPECT_EQ(k.launch.block, (std::array<int64_t, 3>{8, 8, 1}));
  std::string ir = ir::to_string(k.func.body);
  EXPECT_EQ(ir.find("virtual_thread"), std::string::npos) << ir;
  // The register tile is replicated for the four virtual threads; the shared tiles cover all.
  EXPECT_NE(ir.find("allocate C.local: float32[64] in local"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate A.shared: float32[512] in shared"), std::string::npos) << ir;
  EXPECT_NE(ir.find(R"(for k.outer in range(16):
  kiln.storage_sync("shared")
  for i.inner in range(8):
    A.shared[)"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find(R"(
  kiln.storage_sync("shared")
  for k.inner in range(8):)"),
            std::string::npos)
      << ir;
  EXPECT_NE(
      ir.find(R"(        C.local[i*4 + j] = C.local[i*4 + j] + A.shared.local[i]*B.shared.local[j]
        C.local[i*4 + j + 32] = C.local[i*4 + j + 32] + A.shared.local[i + 4]*B.shared.local[j]
        C.local[i*4 + j + 16] = C.local[i*4 + j + 16] + A.shared.local[i]*B.shared.local[j + 4]
        C.local[i*4 + j + 48] = C.local[i*4 + j + 48] + A.shared.local[i + 4]*B.shared.local[j + 4]
)"),
      std::string::npos)
      << ir;
  expect_computes_matmul(d, 128);
}

TEST(LowerDevice, VectorizedCooperativeFetch) {
  GpuMatmul m(128, 32, 8, 16, 1, true);  // each thread copies 2 elements of A's tile, 4 of B's
  DeviceFunction d = lower(m);
  ASSERT_EQ(d.kernels.size(), 1u);
  std::string ir = ir::to_string(d.kernels[0].func.body);
  EXPECT_NE(ir.find("A.shared[ramp(threadIdx.y*64 + i.inner*16 + threadIdx.x*2, 1, 2)] = A[ramp("),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("B.shared[ramp(threadIdx.y*64 + i.inner*32 + threadIdx.x*4, 1, 4)] = B[ramp("),
            std::string::npos)
      << ir;
  expect_computes_matmul(d, 128);
}

TEST(LowerDevice, RegisterPrefetchOfSharedTiles) {
  // Each thread's part of the first tiles loaded into registers before the reduction's loop; each
  // step stores them into shared memory, then loads the next step's while it computes.
  GpuMatmul m(128, 32, 8, 16, 1, true, true);
  DeviceFunction d = lower(m);
  ASSERT_EQ(d.kernels.size(), 1u);
  std::string ir = ir::to_string(d.kernels[0].func.body);
  EXPECT_NE(ir.find("allocate A.shared.prefetch: float32[8] in local"), std::string::npos) << ir;
  EXPECT_NE(ir.find("allocate B.shared.prefetch: float32[8] in local"), std::string::npos) << ir;
  // The prologue reads the first step's columns of A (k.outer = 0: no k.outer term).
  EXPECT_NE(
      ir.find(
          R"(A.shared.prefetch[ramp(i.inner*2, 1, 2)] = A[ramp(threadIdx.y*512 + i.inner*128 + blockIdx.y*4096 + threadIdx.x*2, 1, 2)]
)"),
      std::string::npos)
      << ir;
  EXPECT_NE(ir.find(R"(for k.outer in range(8):
  kiln.storage_sync("shared")
  for i.inner in range(4):
    A.shared[ramp(threadIdx.y*64 + i.inner*16 + threadIdx.x*2, 1, 2)] = A.shared.prefetch[ramp(i.inner*2, 1, 2)]
  if k.outer < 7:
)"),
            std::string::npos)
      << ir;
  expect_computes_matmul(d, 128);
}

}  // namespace
}  // namespace kiln::pass
