// Tests of the simplifier: canonical linear forms, division and remainder by constants with known
// bounds, min/max, comparisons, logic, vectors, statements, and a random check that simplified
// expressions keep their value.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <random>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "tests/unit/ir_eval_helper.h"

namespace kiln::ir {
namespace {

using testing::Env;
using testing::eval_int;
using testing::RandomExprGen;

std::string S(const Expr& e, const VarIntervals& dom = {}) { return to_string(simplify(e, dom)); }

Interval iv(int64_t lo, int64_t hi) { return {make_const(kInt32, lo), make_const(kInt32, hi)}; }

class SimplifyTest : public ::testing::Test {
 protected:
  Var x{"x"}, y{"y"}, z{"z"}, a{"a"}, b{"b"}, i{"i"}, n{"n"};
};

// ---- linear forms ----

TEST_F(SimplifyTest, CollectsLikeTerms) {
  EXPECT_EQ(S((x * 8 + y) - x * 8), "y");
  EXPECT_EQ(S(x * 4 * 2), "x*8");
  EXPECT_EQ(S((a + 3) + (b - 3)), "a + b");
  EXPECT_EQ(S(x + x), "x*2");
  EXPECT_EQ(S(x - x), "0");
  EXPECT_EQ(S((x + 1) * 2 - x), "x + 2");
  EXPECT_EQ(S(x * 3 - (x * 2 + y) * 2), "0 - x - y*2");
}

TEST_F(SimplifyTest, OrdersVariablesByFirstAppearanceConstantLast) {
  EXPECT_EQ(S((y * 8 + 2) + (x + 3)), "y*8 + x + 5");
  EXPECT_EQ(S(5 + x), "x + 5");
  EXPECT_EQ(S(1 - y * 2 + x), "x - y*2 + 1");
  EXPECT_EQ(S(3 - x - 3), "0 - x");
  EXPECT_EQ(S(5 - x), "5 - x");
  EXPECT_EQ(S(x - 5), "x - 5");
  EXPECT_EQ(S((x - 1) - y * 3 + 1), "x - y*3");
}

TEST_F(SimplifyTest, ProductsOfNonConstants) {
  EXPECT_EQ(S(x * y), "x*y");
  EXPECT_EQ(S(x * y + x * y), "x*y*2");
  EXPECT_EQ(S(x * (y - y + 2)), "x*2");
  EXPECT_EQ(S((x + 0) * (y * 1)), "x*y");
}

TEST_F(SimplifyTest, KeepsIdentityWhenNothingChanges) {
  Expr e = x * 8 + y;
  EXPECT_TRUE(simplify(e).same_as(e));
  Expr d = floordiv(x, 8);
  EXPECT_TRUE(simplify(d).same_as(d));
  Expr m = min(x, y) + 1;
  EXPECT_TRUE(simplify(m).same_as(m));
  Expr c = x < y;
  EXPECT_TRUE(simplify(c).same_as(c));
  Expr f = Var("f", kFloat32) + 1.0f;
  EXPECT_TRUE(simplify(f).same_as(f));
}

TEST_F(SimplifyTest, Int64) {
  Var p("p", kInt64);
  EXPECT_EQ(S(p * int64_t{4} * int64_t{2} - p), "p*7i64");
  EXPECT_EQ(S(cast(kInt32, cast(kInt64, x))), "x");
  EXPECT_EQ(S(cast(kInt64, x) + int64_t{1} - int64_t{1}), "int64(x)");
}

// ---- division and remainder ----

TEST_F(SimplifyTest, FloorDivByConstant) {
  VarIntervals dom{{y.get(), iv(0, 7)}};
  EXPECT_EQ(S(floordiv(x * 8 + y, 8), dom), "x");
  EXPECT_EQ(S(floordiv(x * 8 + y, 8)), "x + y // 8");
  EXPECT_EQ(S(floordiv(floordiv(x, 4), 2)), "x // 8");
  EXPECT_EQ(S(floordiv(x * 8, 4)), "x*2");
  EXPECT_EQ(S(floordiv(x * 8 + 13, 8)), "x + 1");
  EXPECT_EQ(S(floordiv(x * 8 - 1, 8)), "x - 1");
  EXPECT_EQ(S(floordiv(x * 4 + y, 8), {{y.get(), iv(0, 3)}}), "x // 2");
  EXPECT_EQ(S(floordiv(x + 3, 8)), "(x + 3) // 8");
  EXPECT_EQ(S(floordiv(floordiv(x, 4) + 8, 2)), "x // 8 + 4");
  EXPECT_EQ(S(floordiv(y, 8), dom), "0");
}

TEST_F(SimplifyTest, FloorModByConstant) {
  VarIntervals dom{{y.get(), iv(0, 7)}};
  EXPECT_EQ(S(floormod(x * 8 + y, 8), dom), "y");
  EXPECT_EQ(S(floormod(x * 8 + y, 8)), "y % 8");
  EXPECT_EQ(S(floormod(x, 1)), "0");
  EXPECT_EQ(S(floormod(x * 8, 4)), "0");
  EXPECT_EQ(S(floormod(x + 11, 8)), "(x + 3) % 8");
  EXPECT_EQ(S(floormod(x * 4 + y, 8), {{y.get(), iv(0, 3)}}), "x % 2*4 + y");
  EXPECT_EQ(S(floormod(floormod(x, 16), 8)), "x % 8");
  EXPECT_EQ(S(floormod(y + 8, 8), dom), "y");
  EXPECT_EQ(S(floormod(y - 8, 8), dom), "y");
  EXPECT_EQ(S(floormod(x, 8), {{x.get(), iv(16, 20)}}), "x - 16");
}

TEST_F(SimplifyTest, SplitThenFuseIsIdentity) {
  // fused = fo*8 + fi (fi < 8), then split by 16 and fused back.
  Var fo("fo"), fi("fi");
  VarIntervals d8{{fi.get(), iv(0, 7)}};
  Expr f = fo * 8 + fi;
  EXPECT_EQ(S(floordiv(f, 16), d8), "fo // 2");
  EXPECT_EQ(S(floormod(f, 16), d8), "fo % 2*8 + fi");
  EXPECT_EQ(S(floordiv(f, 16) * 16 + floormod(f, 16), d8), "fo*8 + fi");
  EXPECT_EQ(S(floordiv(x, 8) * 8 + floormod(x, 8)), "x");
  EXPECT_EQ(S(floormod(x, 8) + floordiv(x, 8) * 8 + y), "x + y");
  EXPECT_EQ(S((x / 4) * 4 + x % 4), "x");
  EXPECT_EQ(S(floordiv(x * n + y, n) * n + floormod(x * n + y, n)), "x*n + y");
  EXPECT_EQ(S(n * floordiv(x, n) * 2 + floormod(x, n) * 2 + 1), "x*2 + 1");
  EXPECT_EQ(S(floordiv(x, n) * n + floormod(x, y)), "x // n*n + x % y");
  EXPECT_EQ(S(floordiv(x + y, 16) * 32 + floormod(x + y, 16) * 2), "x*2 + y*2");
  // A row-major [C, H, W] index unravelled and flattened again (a Flatten read through its
  // offset): z//(H*W)*(H*W) + z//W%H*W + z%W is z; a wrong multiple stays.
  EXPECT_EQ(S(floordiv(x, 6400) * 6400 + floormod(floordiv(x, 80), 80) * 80 + floormod(x, 80)),
            "x");
  EXPECT_EQ(S(floordiv(x + y, 6400) * 12800 + floormod(floordiv(x + y, 80), 80) * 160 +
              floormod(x + y, 80) * 2),
            "x*2 + y*2");
  EXPECT_EQ(S(floordiv(x, 6000) * 6000 + floormod(floordiv(x, 80), 80) * 80 + floormod(x, 80)),
            "x // 6000*6000 + x // 80 % 80*80 + x % 80");
  // Index of a fused axis split again: fused = i*16 + j with j in [0, 15].
  VarIntervals dom{{x.get(), iv(0, 63)}, {y.get(), iv(0, 15)}};
  Expr fused = x * 16 + y;
  EXPECT_EQ(S(floordiv(fused, 16), dom), "x");
  EXPECT_EQ(S(floormod(fused, 16), dom), "y");
}

TEST_F(SimplifyTest, TruncDivWhenNonNegative) {
  VarIntervals dom{{x.get(), iv(0, 10)}, {y.get(), iv(0, 7)}};
  EXPECT_EQ(S((x * 8 + y) / 8, dom), "x");
  EXPECT_EQ(S((x * 8 + y) % 8, dom), "y");
  EXPECT_EQ(S((x * 8 + y) / 8), "truncdiv(x*8 + y, 8)");
  EXPECT_EQ(S((x * 16 + z) / 8, {{x.get(), iv(0, 10)}, {z.get(), iv(0, 100)}}),
            "x*2 + truncdiv(z, 8)");
  EXPECT_EQ(S((x * 16 + z) / 8, dom), "truncdiv(x*16 + z, 8)");  // z may be negative
  EXPECT_EQ(S(x % 8, {{x.get(), iv(0, 100)}}), "truncmod(x, 8)");
  EXPECT_EQ(S(x % 8, {{x.get(), iv(-3, 3)}}), "x");
  EXPECT_EQ(S(x / 8, {{x.get(), iv(-7, 7)}}), "0");
  EXPECT_EQ(S(x / 8, {{x.get(), iv(-8, 7)}}), "truncdiv(x, 8)");
}

TEST_F(SimplifyTest, DivisionByZeroIsLeftAlone) {
  Expr e = floordiv(x, y - y + 0 * z + y);
  Expr zero = floordiv(x, Expr(std::make_shared<SubNode>(kInt32, y, y)));
  EXPECT_NO_THROW(simplify(zero));
  EXPECT_EQ(S(zero), "x // 0");
  EXPECT_EQ(S(e), "x // y");
  Expr vzero = floormod(ramp(x, 1, 4), broadcast(y - y, 4));
  EXPECT_EQ(S(vzero), "ramp(x, 1, 4) % x4(0)");
}

// ---- min / max ----

TEST_F(SimplifyTest, MinMax) {
  EXPECT_EQ(S(min(x, x)), "x");
  EXPECT_EQ(S(min(x + 8, x + 3)), "x + 3");
  EXPECT_EQ(S(max(x + 8, x + 3)), "x + 8");
  EXPECT_EQ(S(min(Expr(3), Expr(5))), "3");
  EXPECT_EQ(S(min(i, 1024), {{i.get(), iv(0, 1023)}}), "i");
  EXPECT_EQ(S(max(i, 0), {{i.get(), iv(0, 1023)}}), "i");
  EXPECT_EQ(S(min(i, 1000), {{i.get(), iv(0, 1023)}}), "min(i, 1000)");
  EXPECT_EQ(S(min(min(x, 8), 4)), "min(x, 4)");
  EXPECT_EQ(S(min(min(x, 4), 8)), "min(x, 4)");
  EXPECT_EQ(S(max(max(x, 4), 8)), "max(x, 8)");
  EXPECT_EQ(S(min(x * 8 + 8, (x + 1) * 8)), "x*8 + 8");
  EXPECT_EQ(S(min(x, y)), "min(x, y)");
  EXPECT_EQ(S(min(4, x)), "min(x, 4)");
  EXPECT_EQ(S(max(4, min(8, x))), "max(min(x, 8), 4)");
  EXPECT_EQ(S(min(4, min(8, x))), "min(x, 4)");
}

TEST_F(SimplifyTest, SymbolicBoundsFromTheDomain) {
  VarIntervals dom{{i.get(), {Expr(0), n - 1}}};
  EXPECT_EQ(S(i < n, dom), "true");
  EXPECT_EQ(S(i >= n, dom), "false");
  EXPECT_EQ(S(min(i, n), dom), "i");
  EXPECT_EQ(S(min(i, n - 1), dom), "i");
  EXPECT_EQ(S(i < n - 1, dom), "i < n - 1");
  EXPECT_TRUE(can_prove(i + 1 <= n, dom));
  EXPECT_FALSE(can_prove(i + 2 <= n, dom));
}

// ---- comparisons and logic ----

TEST_F(SimplifyTest, Comparisons) {
  VarIntervals dom{{i.get(), iv(0, 1023)}};
  EXPECT_EQ(S(i < 1024, dom), "true");
  EXPECT_EQ(S(i >= 1024, dom), "false");
  EXPECT_EQ(S(i < 512, dom), "i < 512");
  EXPECT_EQ(S(i == -1, dom), "false");
  EXPECT_EQ(S(i != 2000, dom), "true");
  EXPECT_EQ(S(x + 3 < y + 3), "x < y");
  EXPECT_EQ(S(x * 2 + 1 <= x * 2 + 5), "true");
  EXPECT_EQ(S(x == x), "true");
  EXPECT_EQ(S(x + 1 < y), "x + 1 < y");
  EXPECT_EQ(S(x + 5 < y + 2), "x < y - 3");
  EXPECT_EQ(S(x + 2 < x + y), "y > 2");
  EXPECT_EQ(S(4 < x), "x > 4");
  EXPECT_EQ(S(4 >= x), "x <= 4");
  EXPECT_EQ(S(0 == x), "x == 0");
  VarIntervals two{{x.get(), iv(0, 127)}, {y.get(), iv(0, 7)}};
  EXPECT_EQ(S(x * 8 + y < 1024, two), "true");
  EXPECT_EQ(S(x * 8 + y < 1023, two), "x*8 + y < 1023");
}

TEST_F(SimplifyTest, Logic) {
  VarIntervals dom{{i.get(), iv(0, 1023)}};
  Var c("c", kBool);
  EXPECT_EQ(S(i < 1024 && c, dom), "c");
  EXPECT_EQ(S(i >= 1024 && c, dom), "false");
  EXPECT_EQ(S(i >= 1024 || c, dom), "c");
  EXPECT_EQ(S(c || i < 1024, dom), "true");
  EXPECT_EQ(S(c && c), "c");
  EXPECT_EQ(S(!(x < y)), "x >= y");
  EXPECT_EQ(S(!(x == y)), "x != y");
  EXPECT_EQ(S(!!(x < y)), "x < y");
  Var f("f", kFloat32);
  EXPECT_EQ(S(!(f < 1.0f)), "not f < 1f");
  EXPECT_EQ(S(select(i < 1024, x, y), dom), "x");
  EXPECT_EQ(S(select(i > 1024, x, y), dom), "y");
  EXPECT_EQ(S(select(c, x + 1, 1 + x)), "x + 1");
  EXPECT_TRUE(can_prove(i >= 0 && i < 1024, dom));
  EXPECT_FALSE(can_prove(i < 1000, dom));
  EXPECT_FALSE(can_prove(c));
}

// ---- floats, casts, lets ----

TEST_F(SimplifyTest, FloatsOnlyFoldConstants) {
  Var f("f", kFloat32), g("g", kFloat32);
  EXPECT_EQ(S(f + 0.0f), "f + 0f");
  EXPECT_EQ(S(f * 1.0f), "f*1f");
  EXPECT_EQ(S((f + 1.0f) + 2.0f), "f + 1f + 2f");
  EXPECT_EQ(S(f - f), "f - f");
  EXPECT_EQ(S(Expr(1.5f) + Expr(2.0f)), "3.5f");
  EXPECT_EQ(S(f * g + cast(kFloat32, x * 2 + x)), "f*g + float32(x*3)");
  EXPECT_EQ(S(min(f, f)), "f");
}

TEST_F(SimplifyTest, Let) {
  Var t("t");
  EXPECT_EQ(S(let(t, Expr(4), t * x + t)), "x*4 + 4");
  EXPECT_EQ(S(let(t, x * 2, t + t - t * 2)), "0");
  EXPECT_EQ(S(let(t, x * 2, t + 1)), "(let t = x*2 in t + 1)");
  EXPECT_EQ(S(let(t, y * 2, floordiv(t, 2)), {{y.get(), iv(0, 3)}}), "(let t = y*2 in t // 2)");
}

TEST_F(SimplifyTest, ConstantPointDomainIsSubstituted) {
  EXPECT_EQ(S(x * 8 + y, {{x.get(), iv(3, 3)}}), "y + 24");
}

// ---- vectors ----

TEST_F(SimplifyTest, Vectors) {
  EXPECT_EQ(S(broadcast(x, 4) + broadcast(y, 4)), "x4(x + y)");
  EXPECT_EQ(S(broadcast(x + 1, 4) - broadcast(x, 4)), "x4(1)");
  EXPECT_EQ(S(ramp(y, 1, 4) + broadcast(x, 4)), "ramp(y + x, 1, 4)");
  EXPECT_EQ(S(broadcast(x, 4) + ramp(y, 1, 4)), "ramp(x + y, 1, 4)");
  EXPECT_EQ(S(ramp(x, 1, 4) + ramp(y * 2, 2, 4)), "ramp(x + y*2, 3, 4)");
  EXPECT_EQ(S(ramp(x, 1, 4) - ramp(x, 1, 4)), "x4(0)");
  EXPECT_EQ(S(ramp(x, 1, 4) * broadcast(Expr(3), 4)), "ramp(x*3, 3, 4)");
  EXPECT_EQ(S(ramp(x + 0 * y, y - y, 4)), "x4(x)");
  VarIntervals dom{{x.get(), iv(0, 15)}};
  EXPECT_EQ(S(floordiv(ramp(x * 8, 1, 8), broadcast(Expr(8), 8)), dom), "x8(x)");
  EXPECT_EQ(S(floormod(ramp(x * 8, 1, 8), broadcast(Expr(8), 8)), dom), "ramp(0, 1, 8)");
  EXPECT_EQ(S(floordiv(ramp(x * 8, 8, 4), broadcast(Expr(8), 4))), "ramp(x, 1, 4)");
  EXPECT_EQ(S(floordiv(ramp(x, 1, 4), broadcast(Expr(8), 4))), "ramp(x, 1, 4) // x4(8)");
  EXPECT_EQ(S(min(broadcast(x + 8, 4), broadcast(x + 3, 4))), "x4(x + 3)");
  EXPECT_EQ(S(broadcast(i, 4) < broadcast(Expr(1024), 4), {{i.get(), iv(0, 1023)}}), "x4(true)");
  Var buf("A", DataType::Handle());
  Expr ld = load(DataType::Float(32, 4), buf, ramp(x * 4 + 4 - 4, 1, 4));
  EXPECT_EQ(S(ld), "A[ramp(x*4, 1, 4)]");
  Var fv("fv", DataType::Float(32, 4));
  Expr vf = fv + broadcast(Expr(0.0f), 4);
  EXPECT_TRUE(simplify(vf).same_as(vf));
}

// ---- statements ----

class StmtSimplifyTest : public SimplifyTest {
 protected:
  Var A{"A", DataType::Handle()};
  Stmt st(const Expr& index, const Expr& value = Expr(1.0f)) { return store(A, value, index); }
};

TEST_F(StmtSimplifyTest, LoopBoundsReachTheBody) {
  Stmt s = for_loop(i, 0, 16, ForKind::kSerial, st(min(i, 16)));
  EXPECT_EQ(to_string(simplify(s)), "for i in range(16):\n  A[i] = 1f\n");
  Var yo("yo"), yi("yi");
  Stmt nest = for_loop(yo, 0, 4, ForKind::kSerial,
                       for_loop(yi, 0, 8, ForKind::kSerial,
                                if_then_else(yo * 8 + yi < 32, st(floordiv(yo * 8 + yi, 8)))));
  EXPECT_EQ(to_string(simplify(nest)),
            "for yo in range(4):\n  for yi in range(8):\n    A[yo] = 1f\n");
}

TEST_F(StmtSimplifyTest, SymbolicLoopExtent) {
  Stmt s = for_loop(i, 0, n, ForKind::kSerial, if_then_else(i < n, st(i), st(i + 1)));
  EXPECT_EQ(to_string(simplify(s)), "for i in range(n):\n  A[i] = 1f\n");
}

TEST_F(StmtSimplifyTest, OneIterationLoopsAreInlined) {
  Stmt s = for_loop(i, 3, 1, ForKind::kSerial, st(i * 2 + x));
  EXPECT_EQ(to_string(simplify(s)), "A[x + 6] = 1f\n");
  Stmt v = for_loop(i, 0, 1, ForKind::kVectorized, st(i));
  EXPECT_EQ(to_string(simplify(v)), "A[0] = 1f\n");
}

TEST_F(StmtSimplifyTest, EmptyLoopsVanish) {
  EXPECT_TRUE(is_no_op(simplify(for_loop(i, 0, 0, ForKind::kSerial, st(i)))));
  EXPECT_TRUE(is_no_op(simplify(for_loop(i, 0, x - x - 3, ForKind::kSerial, st(i)))));
  EXPECT_TRUE(
      is_no_op(simplify(for_loop(i, 0, y, ForKind::kSerial, st(i)), {{y.get(), iv(-5, 0)}})));
  EXPECT_TRUE(is_no_op(simplify(for_loop(i, 0, 8, ForKind::kSerial, evaluate(x - x)))));
  Stmt kept = for_loop(i, 0, y, ForKind::kSerial, st(i));
  EXPECT_TRUE(simplify(kept).same_as(kept));
}

TEST_F(StmtSimplifyTest, Branches) {
  VarIntervals dom{{x.get(), iv(0, 9)}};
  EXPECT_EQ(to_string(simplify(if_then_else(x < 10, st(x), st(x + 1)), dom)), "A[x] = 1f\n");
  EXPECT_EQ(to_string(simplify(if_then_else(x >= 10, st(x), st(x + 1)), dom)), "A[x + 1] = 1f\n");
  EXPECT_TRUE(is_no_op(simplify(if_then_else(x >= 10, st(x)), dom)));
  EXPECT_EQ(to_string(simplify(if_then_else(y < 3, evaluate(0), st(y)))),
            "if y >= 3:\n  A[y] = 1f\n");
  EXPECT_TRUE(is_no_op(simplify(if_then_else(y < 3, evaluate(0), evaluate(1)))));
}

TEST_F(StmtSimplifyTest, ConditionsNarrowTheDomain) {
  Stmt s = if_then_else(y < 10, st(min(y, 10)), st(max(y, 10)));
  EXPECT_EQ(to_string(simplify(s)), "if y < 10:\n  A[y] = 1f\nelse:\n  A[y] = 1f\n");
  Stmt g = if_then_else(y >= 0 && y < 8, st(floordiv(x * 8 + y, 8)));
  EXPECT_EQ(to_string(simplify(g)), "if y >= 0 and y < 8:\n  A[x] = 1f\n");
}

TEST_F(StmtSimplifyTest, Asserts) {
  Stmt s = assert_stmt(x < 10, "x too large", st(x));
  EXPECT_EQ(to_string(simplify(s, {{x.get(), iv(0, 9)}})), "A[x] = 1f\n");
  EXPECT_TRUE(simplify(s).same_as(s));
}

TEST_F(StmtSimplifyTest, SeqOfNoOpsCollapses) {
  Stmt s = seq({st(x), evaluate(0), st(y)});
  Stmt t = for_loop(i, 0, 4, ForKind::kSerial, seq({if_then_else(i > 10, st(i)), st(i)}));
  EXPECT_EQ(to_string(simplify(t)), "for i in range(4):\n  A[i] = 1f\n");
  EXPECT_TRUE(is_no_op(simplify(seq({if_then_else(x - x > 0, st(x)), evaluate(y - y)}))));
  EXPECT_TRUE(simplify(s).same_as(s));
}

TEST_F(StmtSimplifyTest, ThreadExtent) {
  IterVar tx(Var("tx"), Range(), IterVarType::kThreadIndex, "threadIdx.x");
  Stmt s = attr_stmt(tx.node(), attr::kThreadExtent, 64,
                     if_then_else(tx.var() < 64, st(floordiv(tx.var(), 64) + tx.var())));
  EXPECT_EQ(to_string(simplify(s)), "attr [threadIdx.x] thread_extent = 64\nA[tx] = 1f\n");
}

TEST_F(StmtSimplifyTest, LetStmt) {
  Var t("t");
  EXPECT_EQ(to_string(simplify(let_stmt(t, 5, st(t + x)))), "A[x + 5] = 1f\n");
  EXPECT_EQ(to_string(simplify(let_stmt(t, x * 2, st(y)))), "A[y] = 1f\n");
  Stmt s = let_stmt(t, x * 4, if_then_else(t < 40, st(t)));
  EXPECT_EQ(to_string(simplify(s, {{x.get(), iv(0, 9)}})), "let t = x*4\nA[t] = 1f\n");
}

TEST_F(StmtSimplifyTest, NestedLoopsKeepIdentityWhenSimplified) {
  Var j("j");
  Stmt s = for_loop(i, 0, 16, ForKind::kSerial,
                    for_loop(j, 0, 16, ForKind::kParallel, st(i * 16 + j, Expr(2.0f))));
  EXPECT_TRUE(simplify(s).same_as(s));
  EXPECT_EQ(to_string(simplify(s)),
            "for i in range(16):\n  parallel for j in range(16):\n    A[i*16 + j] = 2f\n");
}

// ---- tensor-level nodes ----

/// A stand-in for te::Tensor.
class FakeTensor final : public ProducerNode {
 public:
  FakeTensor(std::string name, std::vector<Expr> shape)
      : name_(std::move(name)), shape_(std::move(shape)) {}
  const std::string& name() const override { return name_; }
  const std::vector<Expr>& shape() const override { return shape_; }
  DataType dtype() const override { return kFloat32; }

 private:
  std::string name_;
  std::vector<Expr> shape_;
};

TEST_F(SimplifyTest, ReduceAxesAreKnownInTheirBody) {
  auto B = std::make_shared<FakeTensor>("B", std::vector<Expr>{64});
  IterVar k(Var("k"), Range(0, 16), IterVarType::kCommReduce);
  Expr body = producer_load(B, {floordiv(x * 16 + k.var(), 16) * 16 + floormod(k.var(), 16)});
  Expr r(std::make_shared<ReduceNode>(kFloat32, ReduceKind::kSum, body, std::vector<IterVar>{k},
                                      k.var() < 16));
  EXPECT_EQ(S(r), "sum(B[x*16 + k], axis=[k])");
}

TEST_F(SimplifyTest, ProducerStatements) {
  auto C = std::make_shared<FakeTensor>("C", std::vector<Expr>{64, 64});
  Var j("j");
  Stmt body = producer_store(C, producer_load(C, {i, j + 1 - 1}) + 1.0f, {i + 0, min(j, 64)});
  Stmt loops = for_loop(i, 0, 64, ForKind::kSerial, for_loop(j, 0, 64, ForKind::kSerial, body));
  Stmt realize = producer_realize(C, {Range(0, 64), Range(x - x, 64)}, "global", loops);
  EXPECT_EQ(to_string(simplify(realize)),
            "realize C[0:64, 0:64]:\n  for i in range(64):\n    for j in range(64):\n"
            "      C[i, j] = C[i, j] + 1f\n");
  Stmt empty =
      producer_realize(C, {Range(0, 64)}, "global", for_loop(i, 0, 0, ForKind::kSerial, body));
  EXPECT_TRUE(is_no_op(simplify(empty)));
  Stmt alloc = allocate(Var("buf", DataType::Handle()), kFloat32, {x * 2 - x}, "global",
                        if_then_else(x < x, evaluate(call(kInt32, "f", {}, CallKind::kExtern))));
  EXPECT_TRUE(is_no_op(simplify(alloc)));
}

// ---- random checks ----

/// Simplified random expressions agree with the originals on random points of the domain.
TEST(SimplifyFuzz, KeepsValuesOnRandomPoints) {
  Var x("x"), y("y"), z("z"), w("w");
  RandomExprGen gen({x, y, z, w}, 12345);
  VarIntervals dom{{x.get(), iv(0, 15)}, {y.get(), iv(-8, 7)}, {z.get(), iv(0, 7)}};
  int checked = 0, changed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    Expr e = gen.gen(4);
    bool with_dom = iter % 2 == 0;
    Expr s = with_dom ? simplify(e, dom) : simplify(e);
    if (!s.same_as(e)) ++changed;
    for (int k = 0; k < 24; ++k) {
      Env env{{x.get(), gen.uniform(with_dom ? 0 : -20, 15)},
              {y.get(), gen.uniform(-8, 7)},
              {z.get(), gen.uniform(with_dom ? 0 : -9, 7)},
              {w.get(), gen.uniform(-20, 20)}};
      auto before = eval_int(e, env), after = eval_int(s, env);
      if (!before || !after) continue;
      ++checked;
      ASSERT_EQ(*before, *after) << "original:   " << e << "\nsimplified: " << s
                                 << "\nx=" << env[x.get()] << " y=" << env[y.get()]
                                 << " z=" << env[z.get()] << " w=" << env[w.get()];
    }
  }
  EXPECT_GT(checked, 40000);
  EXPECT_GT(changed, 1000);
}

/// Comparisons proven by the simplifier hold on every sampled point.
TEST(SimplifyFuzz, ProofsAreSound) {
  Var x("x"), y("y"), z("z");
  RandomExprGen gen({x, y, z}, 777);
  VarIntervals dom{{x.get(), iv(0, 15)}, {y.get(), iv(-8, 7)}, {z.get(), iv(0, 7)}};
  int proven = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Expr c = gen.cmp(3);
    bool yes = can_prove(c, dom), no = can_prove(!c, dom);
    ASSERT_FALSE(yes && no) << c;
    if (!yes && !no) continue;
    ++proven;
    for (int k = 0; k < 32; ++k) {
      Env env{{x.get(), gen.uniform(0, 15)},
              {y.get(), gen.uniform(-8, 7)},
              {z.get(), gen.uniform(0, 7)}};
      auto v = eval_int(c, env);
      if (!v) continue;
      ASSERT_EQ(*v != 0, yes) << c << " x=" << env[x.get()] << " y=" << env[y.get()]
                              << " z=" << env[z.get()];
    }
  }
  EXPECT_GT(proven, 300);
}

/// Simplifying a simplified expression changes nothing (mostly: count the exceptions).
TEST(SimplifyFuzz, IsIdempotent) {
  Var x("x"), y("y"), z("z");
  RandomExprGen gen({x, y, z}, 4242);
  VarIntervals dom{{x.get(), iv(0, 15)}, {y.get(), iv(-8, 7)}};
  int differ = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    Expr s = simplify(gen.gen(4), dom);
    Expr t = simplify(s, dom);
    if (!t.same_as(s)) ++differ;
  }
  EXPECT_LT(differ, 20);
}

struct AssertFailed {};

/// Runs a statement made of For, IfThenElse, LetStmt, AssertStmt, Seq and Store, recording each
/// store as (index, value); false when some value is undefined (a division by zero). A failing
/// assertion throws AssertFailed.
bool run_stmt(const Stmt& s, Env& env, std::vector<std::pair<int64_t, int64_t>>* trace) {
  if (!s.defined() || is_no_op(s)) return true;
  if (auto op = s.as<ForNode>()) {
    auto lo = eval_int(op->min, env), ext = eval_int(op->extent, env);
    if (!lo || !ext) return false;
    for (int64_t v = *lo; v < *lo + *ext; ++v) {
      env[op->loop_var.get()] = v;
      if (!run_stmt(op->body, env, trace)) return false;
    }
    env.erase(op->loop_var.get());
    return true;
  }
  if (auto op = s.as<IfThenElseNode>()) {
    auto c = eval_int(op->condition, env);
    if (!c) return false;
    return run_stmt(*c ? op->then_case : op->else_case, env, trace);
  }
  if (auto op = s.as<LetStmtNode>()) {
    auto v = eval_int(op->value, env);
    if (!v) return false;
    env[op->var.get()] = *v;
    bool ok = run_stmt(op->body, env, trace);
    env.erase(op->var.get());
    return ok;
  }
  if (auto op = s.as<AssertStmtNode>()) {
    auto c = eval_int(op->condition, env);
    if (!c) return false;
    if (!*c) throw AssertFailed{};
    return run_stmt(op->body, env, trace);
  }
  if (auto op = s.as<SeqNode>()) {
    for (auto& x : op->seq) {
      if (!run_stmt(x, env, trace)) return false;
    }
    return true;
  }
  if (auto op = s.as<StoreNode>()) {
    auto i = eval_int(op->index, env), v = eval_int(op->value, env);
    if (!i || !v) return false;
    trace->push_back({*i, *v});
    return true;
  }
  ADD_FAILURE() << "unexpected statement " << s;
  return false;
}

/// Random loop nests with branches and lets write the same values before and after simplify.
TEST(SimplifyFuzz, StatementsKeepTheirEffects) {
  Var x("x"), y("y"), buf("A", DataType::Handle());
  std::mt19937 rng(2024);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::function<Stmt(std::vector<Var>, int)> gen_stmt = [&](std::vector<Var> scope, int depth) {
    RandomExprGen gen(scope, static_cast<uint32_t>(pick(0, 1 << 30)));
    int64_t kind = depth == 0 ? 0 : pick(0, 5);
    switch (kind) {
      case 1: {
        Var v("i" + std::to_string(depth));
        Expr ext = pick(0, 2) == 0 ? floormod(gen.gen(1), 4) : make_const(kInt32, pick(0, 5));
        Expr lo = pick(0, 2) == 0 ? gen.gen(1) : make_const(kInt32, pick(-2, 2));
        auto inner = scope;
        inner.push_back(v);
        return for_loop(v, lo, ext, ForKind::kSerial, gen_stmt(inner, depth - 1));
      }
      case 2: {
        Stmt t = gen_stmt(scope, depth - 1);
        Stmt e = pick(0, 1) ? gen_stmt(scope, depth - 1) : Stmt();
        Expr c = gen.cmp(2);
        if (pick(0, 2) == 0) c = c && gen.cmp(1);
        return if_then_else(c, t, e);
      }
      case 3: {
        Var v("t" + std::to_string(depth));
        Expr value = gen.gen(2);
        auto inner = scope;
        inner.push_back(v);
        return let_stmt(v, value, gen_stmt(inner, depth - 1));
      }
      case 4:
        return seq({gen_stmt(scope, depth - 1), gen_stmt(scope, depth - 1)});
      case 5:
        return assert_stmt(gen.cmp(2), "check", gen_stmt(scope, depth - 1));
      default:
        return store(buf, gen.gen(3), gen.gen(2));
    }
  };
  int compared = 0, changed = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    Stmt s = gen_stmt({x, y}, 4);
    Stmt t = simplify(s);
    if (!t.same_as(s)) ++changed;
    for (int k = 0; k < 6; ++k) {
      Env env{{x.get(), pick(-10, 10)}, {y.get(), pick(-10, 10)}};
      std::vector<std::pair<int64_t, int64_t>> before, after;
      Env e1 = env, e2 = env;
      auto run = [](const Stmt& st, Env& e, std::vector<std::pair<int64_t, int64_t>>* tr) {
        try {
          return run_stmt(st, e, tr);
        } catch (AssertFailed&) {
          tr->push_back({-1, -1});  // the run stops here
          return true;
        }
      };
      if (!run(s, e1, &before) || !run(t, e2, &after)) continue;
      ++compared;
      ASSERT_EQ(before, after) << "original:\n"
                               << s << "simplified:\n"
                               << t << "x=" << env[x.get()] << " y=" << env[y.get()];
    }
  }
  EXPECT_GT(compared, 5000);
  EXPECT_GT(changed, 300);
}

// ---- speed ----

TEST(SimplifySpeed, LargeExpressionsStayFast) {
  auto start = std::chrono::steady_clock::now();
  std::vector<Var> vars;
  for (int k = 0; k < 1000; ++k) vars.emplace_back("v" + std::to_string(k));
  Expr sum = vars[0];
  for (int k = 1; k < 1000; ++k) sum = sum + vars[static_cast<size_t>(k)] * (k % 7 + 1);
  for (int k = 0; k < 1000; ++k) sum = sum - vars[static_cast<size_t>(k)];
  Expr r = simplify(sum);
  EXPECT_EQ(r.kind(), ExprKind::kAdd);
  // Deep nests of min, division and select with a domain (each level uses the one below once:
  // the simplifier does not memoize shared subtrees).
  Var x("x");
  VarIntervals dom{{x.get(), iv(0, 1023)}};
  Expr nest = x;
  for (int k = 0; k < 300; ++k) nest = floordiv(min(nest * 2 + 1, x * 2 + 2048), 2) + 1 - 1;
  EXPECT_EQ(to_string(simplify(nest, dom)), "x");
  Expr sel = x;
  for (int k = 0; k < 300; ++k) sel = select(x < 512 + k, min(sel, x + 2000), max(x - k, 0));
  EXPECT_EQ(simplify(sel, dom).kind(), ExprKind::kSelect);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace kiln::ir
