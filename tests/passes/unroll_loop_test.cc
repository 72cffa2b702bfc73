// Before/after tests of loop unrolling.
#include "compiler/pass/unroll_loop.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class UnrollLoop : public ::testing::Test {
 protected:
  Var a{"A", DataType::Handle()}, b{"B", DataType::Handle()};
  Var i{"i"}, j{"j"}, n{"n"};
  Expr A(Expr idx) { return load(kFloat32, a, std::move(idx)); }
};

TEST_F(UnrollLoop, CopiesTheBodyWithConstants) {
  Stmt s = for_loop(i, 0, 4, ForKind::kUnrolled, store(b, A(i * 2) + A(n + i), i));
  EXPECT_EQ(to_string(unroll_loops(s)),
            "B[0] = A[0] + A[n]\n"
            "B[1] = A[2] + A[n + 1]\n"
            "B[2] = A[4] + A[n + 2]\n"
            "B[3] = A[6] + A[n + 3]\n");
}

TEST_F(UnrollLoop, NonZeroMin) {
  Stmt s = for_loop(i, 2, 2, ForKind::kUnrolled, store(b, A(i), i - 2));
  EXPECT_EQ(to_string(unroll_loops(s)),
            "B[0] = A[2]\n"
            "B[1] = A[3]\n");
  Stmt t = for_loop(i, n, 2, ForKind::kUnrolled, store(b, A(i), i));
  EXPECT_EQ(to_string(unroll_loops(t)),
            "B[n] = A[n]\n"
            "B[n + 1] = A[n + 1]\n");
}

TEST_F(UnrollLoop, InnerLoopsAndSequencesAreCopied) {
  Stmt s = for_loop(i, 0, 2, ForKind::kUnrolled,
                    for_loop(j, 0, n, ForKind::kSerial, store(b, A(j), i * n + j)));
  EXPECT_EQ(to_string(unroll_loops(s)),
            "for j in range(n):\n"
            "  B[j] = A[j]\n"
            "for j in range(n):\n"
            "  B[n + j] = A[j]\n");
}

TEST_F(UnrollLoop, NestedUnrolledLoops) {
  Stmt s = for_loop(i, 0, 2, ForKind::kUnrolled,
                    for_loop(j, 0, 2, ForKind::kUnrolled, store(b, A(i * 2 + j), i * 2 + j)));
  EXPECT_EQ(to_string(unroll_loops(s)),
            "B[0] = A[0]\n"
            "B[1] = A[1]\n"
            "B[2] = A[2]\n"
            "B[3] = A[3]\n");
}

TEST_F(UnrollLoop, ZeroExtentLeavesNothing) {
  Stmt s = for_loop(i, 0, 0, ForKind::kUnrolled, store(b, A(i), i));
  EXPECT_TRUE(is_no_op(unroll_loops(s)));
}

TEST_F(UnrollLoop, NonConstantExtentBecomesSerial) {
  Stmt s = for_loop(i, 0, n, ForKind::kUnrolled, store(b, A(i), i));
  EXPECT_EQ(to_string(unroll_loops(s)),
            "for i in range(n):\n"
            "  B[i] = A[i]\n");
}

TEST_F(UnrollLoop, AutoUnrollsShortInnermostSerialLoops) {
  Stmt s = for_loop(i, 0, 2, ForKind::kSerial,
                    for_loop(j, 0, 3, ForKind::kSerial, store(b, A(j), i * 3 + j)));
  // Without auto unrolling nothing changes.
  EXPECT_TRUE(unroll_loops(s).same_as(s));
  // Only the innermost loop is unrolled, although the outer one is short enough too.
  EXPECT_EQ(to_string(unroll_loops(s, 8)),
            "for i in range(2):\n"
            "  B[i*3] = A[0]\n"
            "  B[i*3 + 1] = A[1]\n"
            "  B[i*3 + 2] = A[2]\n");
  // Too long for the limit.
  EXPECT_TRUE(unroll_loops(s, 2).same_as(s));
}

TEST_F(UnrollLoop, AutoUnrollLeavesOtherKindsAndSymbolicExtents) {
  Stmt par = for_loop(i, 0, 2, ForKind::kParallel, store(b, A(i), i));
  EXPECT_TRUE(unroll_loops(par, 8).same_as(par));
  Stmt vec = for_loop(i, 0, 4, ForKind::kVectorized, store(b, A(i), i));
  EXPECT_TRUE(unroll_loops(vec, 8).same_as(vec));
  Stmt sym = for_loop(i, 0, n, ForKind::kSerial, store(b, A(i), i));
  EXPECT_TRUE(unroll_loops(sym, 8).same_as(sym));
}

}  // namespace
}  // namespace kiln::pass
