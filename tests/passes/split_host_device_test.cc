// Tests of the host/device split: kernels outlined with their parameters, launch configuration,
// workspaces, thread axes unified and shared allocations hoisted, and host code refused.
#include "compiler/pass/split_host_device.h"

#include <gtest/gtest.h>

#include <functional>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

IterVar thread(const std::string& tag) {
  return IterVar(Var(tag), Range(), IterVarType::kThreadIndex, tag);
}

Param tensor(const std::string& name, int64_t n) {
  Buffer b = make_buffer(name, kFloat32, {make_const(kInt32, n)});
  return Param{b.data, b};
}

/// attr [blockIdx.x] = blocks { attr [threadIdx.x] = threads { body(bx*threads + tx) } }
Stmt kernel(int64_t blocks, int64_t threads, const std::function<Stmt(Expr)>& body) {
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x");
  return attr_stmt(bx.node(), attr::kThreadExtent, make_const(kInt32, blocks),
                   attr_stmt(tx.node(), attr::kThreadExtent, make_const(kInt32, threads),
                             body(bx.var() * make_const(kInt32, threads) + tx.var())));
}

TEST(SplitHostDevice, TwoKernelsShareAWorkspace) {
  PrimFunc f;
  f.name = "scale_reverse";
  Param a = tensor("A", 64), b = tensor("B", 64), alpha{Var("alpha", kFloat32), std::nullopt};
  f.params = {a, b, alpha};
  Var t("T", DataType::Handle());
  f.body = allocate(
      t, kFloat32, {64}, "global",
      seq({kernel(2, 32, [&](Expr i) { return store(t, load(kFloat32, a.var, i) * alpha.var, i); }),
           kernel(2, 32, [&](Expr i) { return store(b.var, load(kFloat32, t, 63 - i), i); })}));
  DeviceFunction d = split_host_device(f);
  EXPECT_EQ(d.name, "scale_reverse");
  ASSERT_EQ(d.params.size(), 3u);
  ASSERT_EQ(d.workspaces.size(), 1u);
  EXPECT_EQ(d.workspaces[0].name, "T");
  EXPECT_EQ(d.workspaces[0].dtype, kFloat32);
  EXPECT_EQ(d.workspaces[0].elements, 64);
  ASSERT_EQ(d.kernels.size(), 2u);

  const DeviceKernel& k0 = d.kernels[0];
  EXPECT_EQ(k0.func.name, "scale_reverse_kernel0");
  EXPECT_EQ(k0.args, (std::vector<int>{0, -1, 2}));  // A, workspace T, then the scalar alpha
  ASSERT_EQ(k0.func.params.size(), 3u);
  EXPECT_TRUE(k0.func.params[0].var.same_as(a.var));
  EXPECT_TRUE(k0.func.params[1].is_tensor());
  EXPECT_EQ(k0.func.params[1].buffer->name, "T");
  EXPECT_FALSE(k0.func.params[2].is_tensor());
  EXPECT_EQ(k0.launch.grid, (std::array<int64_t, 3>{2, 1, 1}));
  EXPECT_EQ(k0.launch.block, (std::array<int64_t, 3>{32, 1, 1}));
  EXPECT_EQ(to_string(k0.func.body),
            "attr [blockIdx.x] thread_extent = 2\n"
            "attr [threadIdx.x] thread_extent = 32\n"
            "T[blockIdx.x*32 + threadIdx.x] = A[blockIdx.x*32 + threadIdx.x]*alpha\n");

  const DeviceKernel& k1 = d.kernels[1];
  EXPECT_EQ(k1.func.name, "scale_reverse_kernel1");
  EXPECT_EQ(k1.args, (std::vector<int>{1, -1}));  // the caller's order: B, then the workspace
}

TEST(SplitHostDevice, NestedBindingsOfATagAreOneAxisAndSharedMemoryIsAtTheTop) {
  PrimFunc f;
  f.name = "f";
  Param a = tensor("A", 32), b = tensor("B", 16);
  f.params = {a, b};
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x"), fetch_tx = thread("threadIdx.x");
  Var k("k"), s("S", DataType::Handle());
  f.body = attr_stmt(
      bx.node(), attr::kThreadExtent, 2,
      attr_stmt(
          tx.node(), attr::kThreadExtent, 8,
          for_loop(k, 0, 4, ForKind::kSerial,
                   allocate(s, kFloat32, {8}, "shared",
                            seq({attr_stmt(fetch_tx.node(), attr::kThreadExtent, 8,
                                           store(s, load(kFloat32, a.var, k * 8 + fetch_tx.var()),
                                                 fetch_tx.var())),
                                 store(b.var, load(kFloat32, s, 7 - tx.var()),
                                       bx.var() * 8 + tx.var())})))));
  DeviceFunction d = split_host_device(f);
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(to_string(d.kernels[0].func.body),
            "attr [blockIdx.x] thread_extent = 2\n"
            "attr [threadIdx.x] thread_extent = 8\n"
            "allocate S: float32[8] in shared\n"
            "for k in range(4):\n"
            "  S[threadIdx.x] = A[k*8 + threadIdx.x]\n"
            "  B[blockIdx.x*8 + threadIdx.x] = S[7 - threadIdx.x]\n");
  // The fetch's axis became the kernel's one: only tx is used.
  bool uses_fetch_axis = false;
  post_order_visit(d.kernels[0].func.body,
                   [&](const Object* n) { uses_fetch_axis |= n == fetch_tx.var().get(); });
  EXPECT_FALSE(uses_fetch_axis);
}

TEST(SplitHostDevice, HostLoopIsAnErrorNamingTheStage) {
  PrimFunc f;
  f.name = "f";
  Param c = tensor("C", 8);
  f.params = {c};
  Var i("i");
  f.body = for_loop(i, 0, 8, ForKind::kSerial, store(c.var, 0.0f, i));
  try {
    split_host_device(f);
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "stage 'C' is not bound to GPU threads: its loop 'i' would run on the host"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::pass
