// Before/after tests of no-op removal.
#include "compiler/pass/remove_no_op.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "tests/passes/test_producer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class RemoveNoOp : public ::testing::Test {
 protected:
  Var a{"A", DataType::Handle()}, b{"B", DataType::Handle()};
  Var i{"i"}, j{"j"}, n{"n"};
  Expr A(Expr idx) { return load(kFloat32, a, std::move(idx)); }
  Stmt effect(Expr arg) {
    return evaluate(call(kInt32, "log_value", {std::move(arg)}, CallKind::kExtern));
  }
};

TEST_F(RemoveNoOp, LoopsWithEmptyBodiesGo) {
  Stmt s =
      seq({for_loop(i, 0, n, ForKind::kSerial, for_loop(j, 0, 4, ForKind::kSerial, evaluate(1.0f))),
           store(b, A(0), 0)});
  EXPECT_EQ(to_string(remove_no_op(s)), "B[0] = A[0]\n");
  Stmt never = for_loop(i, 0, 0, ForKind::kSerial, store(b, A(i), i));
  EXPECT_TRUE(is_no_op(remove_no_op(never)));
}

TEST_F(RemoveNoOp, IfBranches) {
  Stmt both = if_then_else(i < n, no_op(), no_op());
  EXPECT_TRUE(is_no_op(remove_no_op(both)));
  Stmt empty_else = if_then_else(i < n, store(b, A(i), i), evaluate(0));
  EXPECT_EQ(to_string(remove_no_op(empty_else)),
            "if i < n:\n"
            "  B[i] = A[i]\n");
  Stmt empty_then = if_then_else(i < n, evaluate(0), store(b, A(i), i));
  EXPECT_EQ(to_string(remove_no_op(empty_then)),
            "if not i < n:\n"
            "  B[i] = A[i]\n");
  Stmt constant = if_then_else(const_false(), store(b, A(i), i), store(b, A(0), 0));
  EXPECT_EQ(to_string(remove_no_op(constant)), "B[0] = A[0]\n");
}

TEST_F(RemoveNoOp, EvaluateKeepsOnlyEffects) {
  Stmt s = seq({evaluate(3), evaluate(i + 1), effect(i), evaluate(exp(2.0f))});
  EXPECT_EQ(to_string(remove_no_op(s)), "log_value(i)\n");
}

TEST_F(RemoveNoOp, StoreOfAnElementToItself) {
  Stmt s = seq({store(b, load(kFloat32, b, i), i), store(b, load(kFloat32, b, i + 1), i),
                store(b, load(kFloat32, b, i * 4 + n), i * 4 + n)});
  EXPECT_EQ(to_string(remove_no_op(s)), "B[i] = B[i + 1]\n");
}

TEST_F(RemoveNoOp, UnusedAllocateKeepsItsBody) {
  Var t("T", DataType::Handle()), u("U", DataType::Handle());
  Stmt s = allocate(t, kFloat32, {16}, "local",
                    allocate(u, kFloat32, {4}, "local",
                             seq({store(u, A(0), 0), store(b, load(kFloat32, u, 0), 0)})));
  EXPECT_EQ(to_string(remove_no_op(s)),
            "allocate U: float32[4] in local\n"
            "U[0] = A[0]\n"
            "B[0] = U[0]\n");
}

TEST_F(RemoveNoOp, UnusedLets) {
  Var x("x"), y("y"), z("z");
  Stmt s = let_stmt(
      x, n * 2,
      let_stmt(y, n + 1,
               let_stmt(z, call(kInt32, "next_id", {}, CallKind::kExtern), store(b, A(y), 0))));
  EXPECT_EQ(to_string(remove_no_op(s)),
            "let y = n + 1\n"
            "let z = next_id()\n"
            "B[0] = A[y]\n");
}

TEST_F(RemoveNoOp, EverythingEmptyBecomesOneNoOp) {
  Producer p = testing::make_producer("T", {4});
  Var t("T", DataType::Handle());
  Stmt s = producer_realize(
      p, {Range(0, 4)}, "global",
      attr_stmt(t.node(), attr::kStorageScope, make_string("global"),
                allocate(t, kFloat32, {4}, "global",
                         for_loop(i, 0, 4, ForKind::kParallel,
                                  if_then_else(i < 2, evaluate(1), evaluate(2))))));
  Stmt r = remove_no_op(s);
  EXPECT_TRUE(is_no_op(r));
  EXPECT_EQ(to_string(r), "0\n");
}

TEST_F(RemoveNoOp, AllocateReferredToByAnAttributeStays) {
  Var t("T", DataType::Handle());
  Stmt s = allocate(t, kFloat32, {4}, "shared",
                    attr_stmt(t.node(), attr::kStorageScope, make_string("shared"), effect(0)));
  EXPECT_TRUE(remove_no_op(s).same_as(s));
}

TEST_F(RemoveNoOp, UsefulCodeKeepsItsIdentity) {
  Stmt s = for_loop(i, 0, n, ForKind::kSerial,
                    if_then_else(i < 4, store(b, A(i), i), store(b, A(0), i)));
  EXPECT_TRUE(remove_no_op(s).same_as(s));
}

}  // namespace
}  // namespace kiln::pass
