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
      attr_stmt(
          vt.node(), attr::kVirtualThread, 2,
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
      attr_stmt(
          vt.node(), attr::kVirtualThread, 2,
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

// A co-processor's cthread shares nothing: both local buffers are replicated (the input copy does
// not depend on the thread), the allocation nested in the loop body is hoisted so that the two
// consecutive copy regions become one block, and the GEMM-like statement is a block of its own:
// [copies t0][copies t1][compute t0][compute t1].
TEST(InjectVirtualThread, CthreadInterleavesWholeBlocks) {
  IterVar ct = axis("cthread", IterVarType::kVirtualThread);
  Var a("A", DataType::Handle()), w("W", DataType::Handle()), in("In", DataType::Handle()),
      wb("Wb", DataType::Handle()), acc("Acc", DataType::Handle()), k("k"), i("i");
  auto copy = [&](Var dst, Var src, Expr src_index) {
    return attr_stmt(
        i.node(), std::string(attr::kPragmaPrefix) + "dma_copy", 0,
        for_loop(i, 0, 4, ForKind::kSerial, store(dst, load(kInt8, src, src_index), i)));
  };
  Stmt body =
      for_loop(k, 0, 2, ForKind::kSerial,
               allocate(in, kInt8, {4}, "local.inp_buffer",
                        seq({copy(in, a, k * 4 + i),
                             allocate(wb, kInt8, {4}, "local.wgt_buffer",
                                      seq({copy(wb, w, ct.var() * 8 + k * 4 + i),
                                           evaluate(call(kInt32, "vdla.gemm",
                                                         {load(kInt32, acc, 0), load(kInt8, in, 0),
                                                          load(kInt8, wb, 0)},
                                                         CallKind::kIntrinsic))}))})));
  Stmt s = attr_stmt(ct.node(), attr::kVirtualThread, 2,
                     allocate(acc, kInt32, {16}, "local.acc_buffer", body));
  EXPECT_EQ(to_string(inject_virtual_thread(s)),
            "allocate Acc: int32[32] in local.acc_buffer\n"
            "for k in range(2):\n"
            "  allocate In: int8[8] in local.inp_buffer\n"
            "  allocate Wb: int8[8] in local.wgt_buffer\n"
            "  unrolled for cthread in range(2):\n"
            "    attr [i] pragma_dma_copy = 0\n"
            "    for i in range(4):\n"
            "      In[i + cthread*4] = A[k*4 + i]\n"
            "    attr [i] pragma_dma_copy = 0\n"
            "    for i in range(4):\n"
            "      Wb[i + cthread*4] = W[cthread*8 + k*4 + i]\n"
            "  unrolled for cthread in range(2):\n"
            "    vdla.gemm(Acc[cthread*16], In[cthread*4], Wb[cthread*4])\n");
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
    EXPECT_NE(std::string(e.what()).find("virtual thread 'vthread' has extent n"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::pass
