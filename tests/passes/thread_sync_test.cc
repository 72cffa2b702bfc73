// Before/after tests of barrier insertion for shared memory.
#include "compiler/pass/thread_sync.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

IterVar thread(const std::string& tag) {
  return IterVar(Var(tag), Range(), IterVarType::kThreadIndex, tag);
}

/// attr [blockIdx.x] = 4 { attr [threadIdx.x] = 32 { allocate AA[32] in shared { body } } }
Stmt in_kernel(const IterVar& bx, const IterVar& tx, const Var& aa, Stmt body) {
  return attr_stmt(bx.node(), attr::kThreadExtent, 4,
                   attr_stmt(tx.node(), attr::kThreadExtent, 32,
                             allocate(aa, kFloat32, {32}, "shared", std::move(body))));
}

TEST(ThreadSync, TiledLoopGetsBarriersBeforeAndAfterTheSharedStore) {
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x");
  Var a("A", DataType::Handle()), c("C", DataType::Handle()), aa("AA", DataType::Handle());
  Var k("k"), j("j");
  Stmt body = for_loop(
      k, 0, 8, ForKind::kSerial,
      seq({store(aa, load(kFloat32, a, k * 32 + tx.var()), tx.var()),
           for_loop(j, 0, 32, ForKind::kSerial,
                    store(c, load(kFloat32, c, bx.var() * 32 + tx.var()) + load(kFloat32, aa, j),
                          bx.var() * 32 + tx.var()))}));
  EXPECT_EQ(to_string(thread_sync(in_kernel(bx, tx, aa, body), "shared")),
            "attr [blockIdx.x] thread_extent = 4\n"
            "attr [threadIdx.x] thread_extent = 32\n"
            "allocate AA: float32[32] in shared\n"
            "for k in range(8):\n"
            "  kiln.storage_sync(\"shared\")\n"
            "  AA[threadIdx.x] = A[k*32 + threadIdx.x]\n"
            "  kiln.storage_sync(\"shared\")\n"
            "  for j in range(32):\n"
            "    C[blockIdx.x*32 + threadIdx.x] = C[blockIdx.x*32 + threadIdx.x] + AA[j]\n");
}

TEST(ThreadSync, TheInsertedStatementIsTheStorageSyncIntrinsic) {
  Stmt s = storage_sync("shared");
  auto call = s.as<EvaluateNode>()->value.as<CallNode>();
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->name, "kiln.storage_sync");
  EXPECT_EQ(call->call_kind, CallKind::kIntrinsic);
  EXPECT_EQ(call->dtype, kInt32);
  ASSERT_EQ(call->args.size(), 1u);
  EXPECT_EQ(call->args[0].as<StringImmNode>()->value, "shared");
  EXPECT_TRUE(is_storage_sync(s));
}

TEST(ThreadSync, AThreadReadingBackItsOwnElementNeedsNoBarrier) {
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x");
  Var a("A", DataType::Handle()), aa("AA", DataType::Handle());
  Stmt body = seq({store(aa, load(kFloat32, a, tx.var()), tx.var()),
                   store(a, load(kFloat32, aa, tx.var()) * 2.0f, tx.var())});
  Stmt s = in_kernel(bx, tx, aa, body);
  EXPECT_TRUE(thread_sync(s, "shared").same_as(s));
}

TEST(ThreadSync, WriteAfterReadGetsABarrier) {
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x");
  Var a("A", DataType::Handle()), aa("AA", DataType::Handle());
  Stmt body =
      seq({store(a, load(kFloat32, aa, 31 - tx.var()), tx.var()), store(aa, 0.0f, tx.var())});
  EXPECT_EQ(to_string(thread_sync(in_kernel(bx, tx, aa, body), "shared")),
            "attr [blockIdx.x] thread_extent = 4\n"
            "attr [threadIdx.x] thread_extent = 32\n"
            "allocate AA: float32[32] in shared\n"
            "A[threadIdx.x] = AA[31 - threadIdx.x]\n"
            "kiln.storage_sync(\"shared\")\n"
            "AA[threadIdx.x] = 0f\n");
}

TEST(ThreadSync, ABarrierAlreadyThereIsKept) {
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x");
  Var a("A", DataType::Handle()), aa("AA", DataType::Handle());
  Stmt body = seq({store(aa, 1.0f, tx.var()), storage_sync("shared"),
                   store(a, load(kFloat32, aa, 31 - tx.var()), tx.var())});
  Stmt s = in_kernel(bx, tx, aa, body);
  EXPECT_TRUE(thread_sync(s, "shared").same_as(s));
}

TEST(ThreadSync, LocalBuffersAndOtherScopesAreLeftAlone) {
  IterVar bx = thread("blockIdx.x"), tx = thread("threadIdx.x");
  Var a("A", DataType::Handle()), l("L", DataType::Handle());
  Stmt s =
      attr_stmt(bx.node(), attr::kThreadExtent, 4,
                attr_stmt(tx.node(), attr::kThreadExtent, 32,
                          allocate(l, kFloat32, {32}, "local",
                                   seq({store(l, 1.0f, tx.var()),
                                        store(a, load(kFloat32, l, 31 - tx.var()), tx.var())}))));
  EXPECT_TRUE(thread_sync(s, "shared").same_as(s));
}

}  // namespace
}  // namespace kiln::pass
