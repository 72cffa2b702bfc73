// Before/after tests of virtual thread injection.
#include "compiler/pass/inject_virtual_thread.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/pass/thread_sync.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

IterVar axis(const std::string& tag, IterVarType type = IterVarType::kThreadIndex) {
  return IterVar(Var(tag), Range(), type, tag);
}

TEST(InjectVirtualThread, PerThreadBufferIsReplicatedAndTheLoopPushedInward) {
  IterVar tx = axis("threadIdx.x"), vt = axis("vthread", IterVarType::kVirtualThread);
  Var a("A", DataType::Handle()), b("B", DataType::Handle()), l("L", DataType::Handle()), i("i");
  Expr global = vt.var() * 32 + tx.var() * 4 + i;
  Stmt s = attr_stmt(
      tx.node(), attr::kThreadExtent, 8,
      attr_stmt(vt.node(), attr::kVirtualThread, 2,
                allocate(l, kFloat32, {4}, "local",
                         seq({for_loop(i, 0, 4, ForKind::kSerial, store(l, load(kFloat32, a, global), i)),
                              for_loop(i, 0, 4, ForKind::kSerial,
                                       store(b, load(kFloat32, l, i) * 2.0f, global))}))));
  EXPECT_EQ(to_string(inject_virtual_thread(s)),
            "attr [threadIdx.x] thread_extent = 8\n"
            "allocate L: float32[8] in local\n"
            "for i in range(4):\n"
            "  unrolled for vthread in range(2):\n"
            "    L[i + vthread*4] = A[vthread*32 + threadIdx.x*4 + i]\n"
            "for i in range(4):\n"
            "  unrolled for vthread in range(2):\n"
            "    B[vthread*32 + threadIdx.x*4 + i] = L[i + vthread*4]*2f\n");
}

TEST(InjectVirtualThread, SharedFetchRunsOnceAndBarriersOrderIt) {
  IterVar tx = axis("threadIdx.x"), vt = axis("vthread", IterVarType::kVirtualThread);
  Var a("A", DataType::Handle()), b("B", DataType::Handle()), sh("S", DataType::Handle());
  Stmt s = attr_stmt(
      tx.node(), attr::kThreadExtent, 8,
      attr_stmt(vt.node(), attr::kVirtualThread, 2,
                allocate(sh, kFloat32, {8}, "shared",
                         seq({store(sh, load(kFloat32, a, tx.var()), tx.var()),
                              store(b, load(kFloat32, sh, 7 - tx.var()), vt.var() * 8 + tx.var())}))));
  EXPECT_EQ(to_string(thread_sync(inject_virtual_thread(s), "shared")),
            "attr [threadIdx.x] thread_extent = 8\n"
            "allocate S: float32[8] in shared\n"
            "S[threadIdx.x] = A[threadIdx.x]\n"
            "kiln.storage_sync(\"shared\")\n"
            "unrolled for vthread in range(2):\n"
            "  B[vthread*8 + threadIdx.x] = S[7 - threadIdx.x]\n");
}

TEST(InjectVirtualThread, WithoutVirtualThreadsNothingChanges) {
  IterVar tx = axis("threadIdx.x");
  Var a("A", DataType::Handle());
  Stmt s = attr_stmt(tx.node(), attr::kThreadExtent, 8, store(a, 1.0f, tx.var()));
  EXPECT_TRUE(inject_virtual_thread(s).same_as(s));
}

TEST(InjectVirtualThread, ExtentMustBeAConstant) {
  IterVar vt = axis("vthread", IterVarType::kVirtualThread);
  Var a("A", DataType::Handle()), n("n");
  Stmt s = attr_stmt(vt.node(), attr::kVirtualThread, n, store(a, 1.0f, vt.var()));
  try {
    inject_virtual_thread(s);
    FAIL() << "expected kiln::Error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("virtual thread 'vthread' has extent n"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::pass
