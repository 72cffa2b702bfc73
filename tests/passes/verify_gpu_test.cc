// The errors of GPU lowering: schedules that break the target's limits or leave work on the host
// (kiln::Error, naming the stage, the axis and the limit), and broken invariants of lowering
// (kiln::InternalError).
#include "compiler/pass/verify_gpu.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/lower.h"
#include "compiler/pass/thread_sync.h"
#include "tests/passes/gpu_matmul_schedule.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using testing::GpuMatmul;

template <typename E>
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    FAIL() << "expected an error";
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

IterVar thread(const std::string& tag) {
  return IterVar(Var(tag), Range(), IterVarType::kThreadIndex, tag);
}

void lower(GpuMatmul& m, const std::string& target) {
  compiler::lower_device(m.s, {m.A, m.B, m.C}, "matmul", target::Target::parse(target));
}

TEST(VerifyGpu, TooManyThreadsPerBlock) {
  GpuMatmul m(256, 128, 32, 8);  // 32 x 32 threads
  lower(m, "cuda");              // 1024 is CUDA's limit
  expect_error<kiln::Error>([&] { lower(m, "opencl"); },
                            {"kernel of stage 'C'", "1024 threads per block",
                             "threadIdx.x = 32 x threadIdx.y = 32", "max_num_threads = 256"});
  expect_error<kiln::Error>([&] { lower(m, "cuda -max_num_threads=512"); },
                            {"max_num_threads = 512"});
}

TEST(VerifyGpu, TooMuchSharedMemory) {
  GpuMatmul m(512, 256, 16, 32);  // two 256 x 32 float tiles: 64 KiB
  expect_error<kiln::Error>(
      [&] { lower(m, "cuda"); },
      {"kernel of stage 'C'", "65536 bytes of shared memory", "'A.shared' 32768 bytes",
       "'B.shared' 32768 bytes", "max_shared_memory_per_block = 49152"});
}

TEST(VerifyGpu, OneThreadTagWithTwoExtents) {
  IterVar bx = thread("blockIdx.x"), tx8 = thread("threadIdx.x"), tx16 = thread("threadIdx.x");
  Var a("A", DataType::Handle()), s("A.shared", DataType::Handle());
  Stmt body = attr_stmt(
      bx.node(), attr::kThreadExtent, 4,
      attr_stmt(
          tx8.node(), attr::kThreadExtent, 8,
          allocate(s, kFloat32, {16}, "shared",
                   seq({attr_stmt(tx16.node(), attr::kThreadExtent, 16, store(s, 1.0f, tx16.var())),
                        store(a, load(kFloat32, s, tx8.var()), tx8.var())}))));
  expect_error<kiln::Error>([&] { verify_gpu(body, target::Target::parse("cuda")); },
                            {"thread axis 'threadIdx.x' is bound with extent 8 by stage 'A'",
                             "with extent 16 by stage 'A.shared'"});
}

TEST(VerifyGpu, CooperativeFetchBoundWithAnotherThreadCount) {
  te::Tensor A = te::placeholder({64}, kFloat32, "A");
  te::Tensor B = te::compute(
      {64}, [&](Var i) { return A(i) * 2.0f; }, "B");
  te::Schedule s = te::create_schedule({B});
  te::Tensor AS = s.cache_read(A, "shared", {B});
  auto [bx, tx] = s[B].split(s[B].axis(0), 16);
  s[B].bind(bx, te::thread_axis("blockIdx.x"));
  s[B].bind(tx, te::thread_axis("threadIdx.x"));
  s[AS].compute_at(s[B], bx);
  auto [fetch_tx, fetch_inner] = s[AS].split(s[AS].axis(0), 2);  // 8 threads copy the 16 elements
  s[AS].bind(fetch_tx, te::thread_axis("threadIdx.x"));
  expect_error<kiln::Error>(
      [&] {
        compiler::lower_device(s, {A, B}, "f", target::Target::parse("cuda"));
      },
      {"thread axis 'threadIdx.x' is bound with extent 8 by stage 'A.shared' and with extent 16 by "
       "stage 'B'"});
}

TEST(VerifyGpu, LaunchExtentMustBeConstant) {
  IterVar bx = thread("blockIdx.x");
  Var a("A", DataType::Handle()), n("n");
  Stmt body = attr_stmt(bx.node(), attr::kThreadExtent, n, store(a, 1.0f, bx.var()));
  expect_error<kiln::Error>([&] { verify_gpu(body, target::Target::parse("cuda")); },
                            {"stage 'A'", "launch extent of 'blockIdx.x' is n, not a constant"});
}

TEST(VerifyGpu, BarrierUnderThreadDependentCondition) {
  IterVar tx = thread("threadIdx.x");
  Var a("A", DataType::Handle());
  Stmt body = attr_stmt(
      tx.node(), attr::kThreadExtent, 32,
      if_then_else(tx.var() < 16, seq({storage_sync("shared"), store(a, 1.0f, tx.var())})));
  expect_error<kiln::InternalError>([&] { verify_gpu(body, target::Target::parse("cuda")); },
                                    {"barrier", "depends on threadIdx"});
}

TEST(VerifyGpu, SharedBufferOutsideTheKernel) {
  Var s("S", DataType::Handle());
  Stmt body = allocate(s, kFloat32, {16}, "shared", store(s, 1.0f, 0));
  expect_error<kiln::InternalError>([&] { verify_gpu(body, target::Target::parse("cuda")); },
                                    {"shared buffer 'S'", "outside the thread environment"});
}

TEST(LowerDevice, UnboundStageIsNotOnTheGpu) {
  te::Tensor A = te::placeholder({64}, kFloat32, "A");
  te::Tensor B = te::compute(
      {64}, [&](Var i) { return A(i) * 2.0f; }, "B");
  te::Schedule s = te::create_schedule({B});
  expect_error<kiln::Error>(
      [&] {
        compiler::lower_device(s, {A, B}, "f", target::Target::parse("cuda"));
      },
      {"stage 'B' is not bound to GPU threads"});
}

TEST(LowerDevice, ParallelLoopsAndCpuTargetsAreRefused) {
  te::Tensor A = te::placeholder({64}, kFloat32, "A");
  te::Tensor B = te::compute(
      {64}, [&](Var i) { return A(i) * 2.0f; }, "B");
  te::Schedule s = te::create_schedule({B});
  expect_error<kiln::Error>(
      [&] {
        compiler::lower_device(s, {A, B}, "f", target::Target::parse("llvm"));
      },
      {"not a GPU"});
  s[B].parallel(s[B].axis(0));
  expect_error<kiln::Error>(
      [&] {
        compiler::lower_device(s, {A, B}, "f", target::Target::parse("cuda"));
      },
      {"stage 'B'", "loop 'i' is parallel"});
}

}  // namespace
}  // namespace kiln::pass
