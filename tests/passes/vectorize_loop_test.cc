// Before/after tests of loop vectorization, including the cases that must stay serial loops.
#include "compiler/pass/vectorize_loop.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class VectorizeLoop : public ::testing::Test {
 protected:
  Var a{"A", DataType::Handle()}, b{"B", DataType::Handle()}, c{"C", DataType::Handle()};
  Var x{"x"}, i{"i"}, k{"k"}, n{"n"};
  Expr A(Expr idx) { return load(kFloat32, a, std::move(idx)); }
  Expr B(Expr idx) { return load(kFloat32, b, std::move(idx)); }
  Expr C(Expr idx) { return load(kFloat32, c, std::move(idx)); }
  Stmt vfor(const Var& v, Expr extent, Stmt body) {
    return for_loop(v, 0, std::move(extent), ForKind::kVectorized, std::move(body));
  }
  Stmt sfor(const Var& v, Expr extent, Stmt body) {
    return for_loop(v, 0, std::move(extent), ForKind::kSerial, std::move(body));
  }
};

TEST_F(VectorizeLoop, ElementwiseBroadcastsScalars) {
  Stmt s = vfor(x, 8, store(b, A(x) + 1.0f, x));
  EXPECT_EQ(to_string(vectorize_loops(s)), "B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)] + x8(1f)\n");
  Stmt r = vectorize_loops(s);
  auto st = r.as<StoreNode>();
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->value.dtype(), DataType::Float(32, 8));
  EXPECT_EQ(st->value.as<AddNode>()->a.dtype(), DataType::Float(32, 8));
}

TEST_F(VectorizeLoop, IndexArithmeticKeepsRamps) {
  Stmt s = sfor(i, 16, vfor(x, 8, store(c, A(i * 8 + x) * B(x * 2 + 1) - A(i), i * 8 + x)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for i in range(16):\n"
            "  C[ramp(i*8, 1, 8)] = A[ramp(i*8, 1, 8)]*B[ramp(1, 2, 8)] - x8(A[i])\n");
}

TEST_F(VectorizeLoop, NonZeroMin) {
  Stmt s = for_loop(x, 4, 4, ForKind::kVectorized, store(b, A(x - 4), x));
  EXPECT_EQ(to_string(vectorize_loops(s)), "B[ramp(4, 1, 4)] = A[ramp(0, 1, 4)]\n");
}

TEST_F(VectorizeLoop, InnerLoopIndependentOfTheLanesStaysALoop) {
  // vectorized for x: for k: C[x] += A[k]*B[k*8 + x]; each lane accumulates into its own element.
  Stmt s = vfor(x, 8, sfor(k, 16, store(c, C(x) + A(k) * B(k * 8 + x), x)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for k in range(16):\n"
            "  C[ramp(0, 1, 8)] = C[ramp(0, 1, 8)] + x8(A[k])*B[ramp(k*8, 1, 8)]\n");
}

TEST_F(VectorizeLoop, SelectCastAndPureCalls) {
  Stmt s = vfor(x, 4, store(b, select(x < 2, exp(cast(kFloat32, x)), A(0)), x));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "B[ramp(0, 1, 4)] = select(ramp(0, 1, 4) < x4(2), exp(float32x4(ramp(0, 1, 4))), "
            "x4(A[0]))\n");
  Stmt p = vfor(x, 4, store(b, pow(A(x), 2.0f) + max(A(x), 0.0f), x));
  EXPECT_EQ(to_string(vectorize_loops(p)),
            "B[ramp(0, 1, 4)] = pow(A[ramp(0, 1, 4)], x4(2f)) + max(A[ramp(0, 1, 4)], x4(0f))\n");
  Stmt r = vectorize_loops(p);
  auto st = r.as<StoreNode>();
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->value.as<AddNode>()->a.dtype(), DataType::Float(32, 4));
}

TEST_F(VectorizeLoop, ClampsTheSelectMakesRedundantGoFromPredicatedLoads) {
  // Constant padding: the clamp keeps the discarded lanes in bounds; loaded only where the
  // condition holds, the index needs none and stays a ramp.
  Stmt pad = vfor(x, 8, store(b, select(x <= 5, A(min(x, 5)), 0.0f), x));
  EXPECT_EQ(to_string(vectorize_loops(pad)),
            "B[ramp(0, 1, 8)] = select(ramp(0, 1, 8) <= x8(5), A[ramp(0, 1, 8) if ramp(0, 1, 8) <= "
            "x8(5)], x8(0f))\n");
  // A concatenation of A (20 elements) and B (12): the conditions of both selects around B's
  // load make both of its clamps redundant.
  Expr j = i * 8 + x;
  Stmt cat = sfor(
      i, 4,
      vfor(x, 8,
           store(c, select(j < 20, A(min(j, 19)), select(j < 32, B(min(max(j - 20, 0), 11)), 0.0f)),
                 j)));
  EXPECT_EQ(to_string(vectorize_loops(cat)),
            "for i in range(4):\n"
            "  C[ramp(i*8, 1, 8)] = select(ramp(i*8, 1, 8) < x8(20), A[ramp(i*8, 1, 8) if "
            "ramp(i*8, 1, 8) < x8(20)], select(ramp(i*8, 1, 8) < x8(32), B[ramp(i*8 - 20, 1, 8) if "
            "not ramp(i*8, 1, 8) < x8(20) and ramp(i*8, 1, 8) < x8(32)], x8(0f)))\n");
  // A clamp the conditions do not bound stays, and the load is not predicated.
  Stmt kept = vfor(x, 8, store(b, select(x < 6, A(min(x, 4)), 0.0f), x));
  EXPECT_EQ(to_string(vectorize_loops(kept)),
            "B[ramp(0, 1, 8)] = select(ramp(0, 1, 8) < x8(6), A[min(ramp(0, 1, 8), x8(4))], "
            "x8(0f))\n");
}

TEST_F(VectorizeLoop, ScalarValueIsBroadcastToTheStore) {
  Stmt s = vfor(x, 8, store(b, A(n), x + n));
  EXPECT_EQ(to_string(vectorize_loops(s)), "B[ramp(n, 1, 8)] = x8(A[n])\n");
}

TEST_F(VectorizeLoop, LetOfARampKeepsItsScalarBase) {
  Var t("t");
  Stmt s = vfor(x, 8, let_stmt(t, x * 2 + n, store(b, A(t + 1), t)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "let t = n\n"
            "B[ramp(t, 2, 8)] = A[ramp(t + 1, 2, 8)]\n");
}

TEST_F(VectorizeLoop, LetOfAVectorValueBindsAVectorVariable) {
  Var v("v", kFloat32);
  Stmt s = vfor(x, 8, let_stmt(v, A(x) * 2.0f, store(b, v + v, x)));
  Stmt r = vectorize_loops(s);
  EXPECT_EQ(to_string(r),
            "let v = A[ramp(0, 1, 8)]*x8(2f)\n"
            "B[ramp(0, 1, 8)] = v + v\n");
  auto l = r.as<LetStmtNode>();
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->var.dtype(), DataType::Float(32, 8));
  EXPECT_FALSE(l->var.same_as(v));
  // A let expression too.
  Var w("w", kFloat32);
  Stmt e = vfor(x, 4, store(b, let(w, A(x), w * w), x));
  EXPECT_EQ(to_string(vectorize_loops(e)),
            "B[ramp(0, 1, 4)] = (let w = A[ramp(0, 1, 4)] in w*w)\n");
}

TEST_F(VectorizeLoop, LaneDependentIfBecomesPredicatedStores) {
  Stmt s = vfor(
      x, 8,
      if_then_else(i * 8 + x < n, store(b, A(i * 8 + x), i * 8 + x), store(b, 0.0f, i * 8 + x)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "B[ramp(i*8, 1, 8) if ramp(i*8, 1, 8) < x8(n)] = "
            "A[ramp(i*8, 1, 8) if ramp(i*8, 1, 8) < x8(n)]\n"
            "B[ramp(i*8, 1, 8) if not ramp(i*8, 1, 8) < x8(n)] = x8(0f)\n");
}

TEST_F(VectorizeLoop, NestedLaneDependentIfsCombineTheirMasks) {
  Stmt s =
      vfor(x, 8, if_then_else(x < n, if_then_else(x > 2, store(b, A(x), x), store(b, 0.0f, x))));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "B[ramp(0, 1, 8) if ramp(0, 1, 8) < x8(n) and ramp(0, 1, 8) > x8(2)] = "
            "A[ramp(0, 1, 8) if ramp(0, 1, 8) < x8(n) and ramp(0, 1, 8) > x8(2)]\n"
            "B[ramp(0, 1, 8) if ramp(0, 1, 8) < x8(n) and not ramp(0, 1, 8) > x8(2)] = x8(0f)\n");
}

TEST_F(VectorizeLoop, LoopUnderALaneDependentIf) {
  Stmt s = vfor(x, 8, if_then_else(x < n, sfor(k, 4, store(c, A(x * 4 + k), x * 4 + k))));
  EXPECT_EQ(
      to_string(vectorize_loops(s)),
      "for k in range(4):\n"
      "  C[ramp(k, 4, 8) if ramp(0, 1, 8) < x8(n)] = A[ramp(k, 4, 8) if ramp(0, 1, 8) < x8(n)]\n");
}

TEST_F(VectorizeLoop, ConditionThatReadsMemoryIsEvaluatedOnce) {
  // The then-branch overwrites what the condition reads; the else-branch must see the old value.
  Stmt s = vfor(x, 4, if_then_else(A(x) > 0.0f, store(a, 0.0f, x), store(b, 1.0f, x)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "let mask = A[ramp(0, 1, 4)] > x4(0f)\n"
            "A[ramp(0, 1, 4) if mask] = x4(0f)\n"
            "B[ramp(0, 1, 4) if not mask] = x4(1f)\n");
}

TEST_F(VectorizeLoop, LaneIndependentIfStaysAnIf) {
  Stmt s = vfor(x, 8, if_then_else(n > 0, store(b, A(x), x)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "if n > 0:\n"
            "  B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)]\n");
}

TEST_F(VectorizeLoop, BodyIndependentOfTheVariableInsideAnIf) {
  // A store that every lane makes to one element, under a lane-dependent if: serial.
  Stmt s = vfor(x, 8, if_then_else(x == n, store(b, 1.0f, 0)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(8):\n"
            "  if x == n:\n"
            "    B[0] = 1f\n");
}

// ---- what stays serial ----

TEST_F(VectorizeLoop, ReductionIntoOneElementStaysSerial) {
  Stmt s = vfor(x, 8, store(c, C(0) + A(x), 0));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(8):\n"
            "  C[0] = C[0] + A[x]\n");
  // The same inside an inner loop: every lane would accumulate into C[k].
  Stmt t = vfor(x, 8, sfor(k, 4, store(c, C(k) + A(x * 4 + k), k)));
  EXPECT_EQ(to_string(vectorize_loops(t)),
            "for x in range(8):\n"
            "  for k in range(4):\n"
            "    C[k] = C[k] + A[x*4 + k]\n");
}

TEST_F(VectorizeLoop, StoreIndependentOfTheVariableStaysSerial) {
  // Runs once per lane in the original; a single scalar store would not be the same program.
  Stmt s = vfor(x, 8, seq({store(b, A(x), x), store(c, C(0) + 1.0f, 0)}));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(8):\n"
            "  B[x] = A[x]\n"
            "  C[0] = C[0] + 1f\n");
}

TEST_F(VectorizeLoop, NonConstantExtentStaysSerial) {
  Stmt s = vfor(x, n, store(b, A(x), x));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(n):\n"
            "  B[x] = A[x]\n");
  Stmt one = vfor(x, 1, store(b, A(x), x));
  EXPECT_EQ(to_string(vectorize_loops(one)),
            "for x in range(1):\n"
            "  B[x] = A[x]\n");
}

TEST_F(VectorizeLoop, InnerLoopBoundsDependingOnTheLaneStaySerial) {
  Stmt s = vfor(x, 8, sfor(k, x, store(c, A(k), x * 8 + k)));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(8):\n"
            "  for k in range(x):\n"
            "    C[x*8 + k] = A[k]\n");
}

TEST_F(VectorizeLoop, AllocateInsideStaysSerial) {
  Var t("t", DataType::Handle());
  Stmt s = vfor(x, 4,
                allocate(t, kFloat32, {1}, "local",
                         seq({store(t, A(x), 0), store(b, load(kFloat32, t, 0), x)})));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(4):\n"
            "  allocate t: float32[1] in local\n"
            "  t[0] = A[x]\n"
            "  B[x] = t[0]\n");
}

TEST_F(VectorizeLoop, CallWithSideEffectsStaysSerial) {
  Stmt s = vfor(x, 4,
                seq({store(b, A(x), x),
                     evaluate(call(kInt32, "printf", {make_string("%d"), x}, CallKind::kExtern))}));
  EXPECT_EQ(to_string(vectorize_loops(s)),
            "for x in range(4):\n"
            "  B[x] = A[x]\n"
            "  printf(\"%d\", x)\n");
  Stmt t = vfor(x, 4, store(b, call(kFloat32, "f", {A(x)}, CallKind::kExtern), x));
  EXPECT_EQ(to_string(vectorize_loops(t)),
            "for x in range(4):\n"
            "  B[x] = f(A[x])\n");
}

TEST_F(VectorizeLoop, NestedVectorizedLoopsDoNotMakeVectorsOfVectors) {
  // The inner loop is vectorized; the outer one would need 4 x 8 lanes and stays serial.
  Stmt s = vfor(i, 4, vfor(x, 8, store(c, A(i * 8 + x) + 1.0f, i * 8 + x)));
  Stmt r = vectorize_loops(s);
  EXPECT_EQ(to_string(r),
            "for i in range(4):\n"
            "  C[ramp(i*8, 1, 8)] = A[ramp(i*8, 1, 8)] + x8(1f)\n");
  // An already vector expression that varies with the loop variable is the same case.
  Stmt v = vfor(i, 4, store(c, broadcast(A(i), 8), ramp(i * 8, 1, 8)));
  EXPECT_EQ(to_string(vectorize_loops(v)),
            "for i in range(4):\n"
            "  C[ramp(i*8, 1, 8)] = x8(A[i])\n");
}

TEST_F(VectorizeLoop, UntouchedTreeKeepsItsIdentity) {
  Stmt s = sfor(i, 4, store(b, A(i), i));
  EXPECT_TRUE(vectorize_loops(s).same_as(s));
}

}  // namespace
}  // namespace kiln::pass
