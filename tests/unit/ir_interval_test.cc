// Tests of interval analysis: symbolic and constant bounds of index expressions, unions and
// intersections, and a random check that evaluated values lie within the computed bounds.
#include <gtest/gtest.h>

#include "compiler/ir/interval.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "tests/unit/ir_eval_helper.h"

namespace kiln::ir {
namespace {

using testing::Env;
using testing::eval_int;
using testing::RandomExprGen;

Interval iv(int64_t lo, int64_t hi) { return {make_const(kInt32, lo), make_const(kInt32, hi)}; }

std::string str(const Interval& i) {
  return "[" + (i.min.defined() ? to_string(i.min) : std::string("-inf")) + ", " +
         (i.max.defined() ? to_string(i.max) : std::string("+inf")) + "]";
}

std::string E(const Expr& e, const VarIntervals& dom) { return str(eval_interval(e, dom)); }

class IntervalTest : public ::testing::Test {
 protected:
  Var x{"x"}, y{"y"}, yo{"yo"}, yi{"yi"}, n{"n"}, k{"k"};
};

TEST_F(IntervalTest, Basics) {
  EXPECT_TRUE(Interval::single_point(x).is_single_point());
  EXPECT_TRUE((Interval{x + 1, x + 1}).is_single_point());
  EXPECT_FALSE(iv(0, 1).is_single_point());
  EXPECT_TRUE(iv(3, 3).is_single_point());
  EXPECT_TRUE(Interval::everything().is_everything());
  EXPECT_FALSE(Interval::everything().is_single_point());
  EXPECT_EQ(str(Interval::from_range(Range(2, 10))), "[2, 11]");
  EXPECT_EQ(str(Interval::from_range(Range(0, n))), "[0, n - 1]");
  EXPECT_EQ(str(Interval::from_range(Range(yo * 8, 8))), "[yo*8, yo*8 + 7]");
  Range r = to_range(Interval{yo * 8, yo * 8 + 7});
  EXPECT_EQ(to_string(r.min), "yo*8");
  EXPECT_EQ(to_string(r.extent), "8");
}

TEST_F(IntervalTest, SplitIndex) {
  VarIntervals dom{{yi.get(), iv(0, 7)}};
  EXPECT_EQ(E(yo * 8 + yi, dom), "[yo*8, yo*8 + 7]");
  dom[yo.get()] = iv(0, 127);
  EXPECT_EQ(E(yo * 8 + yi, dom), "[0, 1023]");
  EXPECT_EQ(E(yi, {}), "[yi, yi]");
  EXPECT_TRUE(eval_interval(yo * 8, {{yi.get(), iv(0, 7)}}).is_single_point());
}

TEST_F(IntervalTest, Arithmetic) {
  VarIntervals dom{{x.get(), iv(0, 10)}, {y.get(), iv(0, 5)}};
  EXPECT_EQ(E(x + y, dom), "[0, 15]");
  EXPECT_EQ(E(x - y, dom), "[-5, 10]");
  EXPECT_EQ(E(x * -2, dom), "[-20, 0]");
  EXPECT_EQ(E(x * 3 + 1, dom), "[1, 31]");
  EXPECT_EQ(E(x - x, dom), "[0, 0]");
  EXPECT_EQ(E(x * y, dom), "[0, 50]");
  EXPECT_EQ(E(x * y, {{x.get(), iv(-2, 3)}, {y.get(), iv(-1, 4)}}), "[-8, 12]");
  EXPECT_EQ(E(x * n, dom), "[-inf, +inf]");
  EXPECT_EQ(E(x + n, dom), "[n, n + 10]");
  EXPECT_EQ(E(x * 4 + n * 2, dom), "[n*2, n*2 + 40]");
}

TEST_F(IntervalTest, Division) {
  EXPECT_EQ(E(floordiv(x, 4), {{x.get(), iv(0, 15)}}), "[0, 3]");
  EXPECT_EQ(E(floordiv(x, 4), {{x.get(), iv(-5, 15)}}), "[-2, 3]");
  EXPECT_EQ(E(floordiv(x, -4), {{x.get(), iv(-5, 15)}}), "[-4, 1]");
  EXPECT_EQ(E(x / 4, {{x.get(), iv(-5, 15)}}), "[-1, 3]");
  EXPECT_EQ(E(floormod(x, 8), {{x.get(), iv(0, 100)}}), "[0, 7]");
  EXPECT_EQ(E(floormod(x, 8), {{x.get(), iv(8, 13)}}), "[0, 5]");
  EXPECT_EQ(E(floormod(x, 8), {{x.get(), iv(3, 5)}}), "[3, 5]");
  EXPECT_EQ(E(floormod(x, 8), {{x.get(), iv(-3, 5)}}), "[0, 7]");
  EXPECT_EQ(E(floormod(x, 8), {}), "[x % 8, x % 8]");
  EXPECT_EQ(E(floormod(x + n, 8), {{x.get(), iv(0, 3)}}), "[0, 7]");
  EXPECT_EQ(E(x % 8, {{x.get(), iv(-20, 20)}}), "[-7, 7]");
  EXPECT_EQ(E(x % 8, {{x.get(), iv(0, 5)}}), "[0, 5]");
  EXPECT_EQ(E(floordiv(yo * 8 + yi, 8), {{yi.get(), iv(0, 7)}}), "[yo, yo]");
  EXPECT_EQ(E(floordiv(x, y), {{x.get(), iv(0, 100)}, {y.get(), iv(2, 4)}}), "[0, 50]");
  EXPECT_EQ(E(floormod(x, y), {{x.get(), iv(0, 100)}, {y.get(), iv(2, 4)}}), "[0, 3]");
}

TEST_F(IntervalTest, SymbolicOnePeriodRemainder) {
  // floormod of [yo*8 + 1, yo*8 + 6] stays within one period: [1, 6].
  VarIntervals dom{{yi.get(), iv(1, 6)}};
  Interval raw = eval_interval_raw(floormod(yo * 8 + yi, 8), dom);
  EXPECT_EQ(to_string(simplify(raw.min)), "1");
  EXPECT_EQ(to_string(simplify(raw.max)), "6");
}

TEST_F(IntervalTest, MinMaxSelect) {
  VarIntervals dom{{x.get(), iv(0, 10)}};
  EXPECT_EQ(E(min(x, 5), dom), "[0, 5]");
  EXPECT_EQ(E(max(x, 5), dom), "[5, 10]");
  EXPECT_EQ(E(min(x, n), dom), "[min(n, 0), min(n, 10)]");
  Var c("c", kBool);
  EXPECT_EQ(E(select(c, x, x + 20), dom), "[0, 30]");
  EXPECT_EQ(E(select(x < 20, x, x + 20), dom), "[0, 10]");
  EXPECT_EQ(E(x < 5, dom), "[false, true]");
  EXPECT_EQ(E(x < 11, dom), "[true, true]");
}

TEST_F(IntervalTest, Unbounded) {
  VarIntervals dom{{x.get(), {Expr(0), Expr()}}};
  EXPECT_EQ(E(x + 1, dom), "[1, +inf]");
  EXPECT_EQ(E(0 - x, dom), "[-inf, 0]");
  EXPECT_EQ(E(min(x, 7), dom), "[0, 7]");
  EXPECT_EQ(E(floormod(x, 8), dom), "[0, 7]");
  EXPECT_EQ(E(floordiv(x, 8), dom), "[0, +inf]");
  EXPECT_EQ(E(x * 2, {{x.get(), Interval::everything()}}), "[-inf, +inf]");
}

TEST_F(IntervalTest, OpaqueValues) {
  Var A("A", DataType::Handle());
  VarIntervals dom{{x.get(), iv(0, 10)}};
  EXPECT_EQ(E(load(kInt32, A, x), dom), "[-inf, +inf]");
  Interval p = eval_interval(load(kInt32, A, y + 1), dom);
  EXPECT_TRUE(p.is_single_point());
  EXPECT_EQ(to_string(p.min), "A[y + 1]");
  EXPECT_EQ(E(load(kInt32, A, x), {{x.get(), iv(3, 3)}}), "[A[3], A[3]]");
  EXPECT_EQ(E(call(kInt32, "f", {x}, CallKind::kExtern), dom), "[-inf, +inf]");
  EXPECT_EQ(E(cast(kInt64, x), dom), "[0i64, 10i64]");
  EXPECT_EQ(E(cast(DataType::Int(8), x * 100), dom), "[-inf, +inf]");
}

TEST_F(IntervalTest, LetAndDependentDomains) {
  Var t("t");
  VarIntervals dom{{x.get(), iv(0, 10)}};
  EXPECT_EQ(E(let(t, x * 2, t + y), dom), "[y, y + 20]");
  // k in [0, x] and x in [0, 9]: k in [0, 9].
  VarIntervals dep{{k.get(), {Expr(0), x}}, {x.get(), iv(0, 9)}};
  EXPECT_EQ(E(k, dep), "[0, 9]");
  EXPECT_EQ(E(k, {{k.get(), {Expr(0), x}}}), "[0, x]");
  // A variable whose domain mentions itself does not loop forever.
  EXPECT_EQ(E(k, {{k.get(), {Expr(0), k + 1}}}), "[0, k + 1]");
}

TEST_F(IntervalTest, Vectors) {
  VarIntervals dom{{x.get(), iv(0, 10)}};
  EXPECT_EQ(E(ramp(x, 2, 4), dom), "[0, 16]");
  EXPECT_EQ(E(ramp(x, -1, 4), dom), "[-3, 10]");
  EXPECT_EQ(E(broadcast(x, 4), dom), "[0, 10]");
  EXPECT_EQ(E(ramp(x * 4, 1, 4) + broadcast(n, 4), dom), "[n, n + 43]");
}

TEST_F(IntervalTest, UnionAndIntersect) {
  EXPECT_EQ(str(union_of(iv(0, 7), iv(4, 12))), "[0, 12]");
  EXPECT_EQ(str(intersect(iv(0, 10), iv(5, 20))), "[5, 10]");
  EXPECT_EQ(str(union_of(Interval{yo * 8, yo * 8 + 7}, Interval{yo * 8 + 4, yo * 8 + 11})),
            "[yo*8, yo*8 + 11]");
  EXPECT_EQ(str(intersect(Interval{yo * 8, yo * 8 + 7}, Interval{yo * 8 + 4, yo * 8 + 11})),
            "[yo*8 + 4, yo*8 + 7]");
  EXPECT_EQ(str(union_of(iv(0, 7), Interval{Expr(2), n})), "[0, max(n, 7)]");
  EXPECT_EQ(str(intersect(iv(0, 7), Interval{Expr(2), n})), "[2, min(n, 7)]");
  EXPECT_EQ(str(union_of(iv(0, 7), Interval::everything())), "[-inf, +inf]");
  EXPECT_EQ(str(intersect(iv(0, 7), Interval::everything())), "[0, 7]");
  EXPECT_EQ(str(intersect(Interval{Expr(), n}, Interval{Expr(0), Expr()})), "[0, n]");
}

TEST_F(IntervalTest, ConstBounds) {
  VarIntervals dom{{x.get(), iv(0, 10)}, {y.get(), {Expr(0), n - 1}}};
  EXPECT_EQ(const_min(x * 2 - 3, dom), -3);
  EXPECT_EQ(const_max(x * 2 - 3, dom), 17);
  EXPECT_EQ(const_max(x - x + 4, {}), 4);
  EXPECT_EQ(const_max(y, dom), std::nullopt);
  EXPECT_EQ(const_max(y - n, dom), -1);
  EXPECT_EQ(const_min(floormod(n, 8)), 0);
  EXPECT_EQ(const_max(floormod(n, 8)), 7);
  EXPECT_EQ(const_min(n), std::nullopt);
  ConstBounds cb = eval_const_bounds(floordiv(x, 3) + min(x, 4), dom);
  EXPECT_EQ(cb.min, 0);
  EXPECT_EQ(cb.max, 7);
  Var u("u", DataType::UInt(8));
  EXPECT_EQ(eval_const_bounds(u, {}).min, 0);
  EXPECT_EQ(eval_const_bounds(u, {}).max, 255);
  EXPECT_EQ(eval_const_bounds(u - make_const(DataType::UInt(8), int64_t{1}), {}).max, 255);
}

/// Values at random points of the domain lie within the computed bounds.
TEST(IntervalFuzz, BoundsContainValues) {
  Var x("x"), y("y"), z("z"), w("w");
  RandomExprGen gen({x, y, z, w}, 99);
  VarIntervals dom{{x.get(), iv(0, 15)}, {y.get(), iv(-8, 7)}, {z.get(), iv(0, 7)}};
  int checked = 0, bounded = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Expr e = gen.gen(4);
    Interval b = eval_interval(e, dom);
    if (b.min.defined() && b.max.defined()) ++bounded;
    ConstBounds cb = eval_const_bounds(e, dom);
    for (int k = 0; k < 16; ++k) {
      Env env{{x.get(), gen.uniform(0, 15)},
              {y.get(), gen.uniform(-8, 7)},
              {z.get(), gen.uniform(0, 7)},
              {w.get(), gen.uniform(-20, 20)}};
      auto v = eval_int(e, env);
      if (!v) continue;
      ++checked;
      if (b.min.defined()) {
        auto lo = eval_int(b.min, env);
        ASSERT_TRUE(lo.has_value()) << e << " min " << b.min;
        ASSERT_LE(*lo, *v) << e << " min " << b.min;
      }
      if (b.max.defined()) {
        auto hi = eval_int(b.max, env);
        ASSERT_TRUE(hi.has_value()) << e << " max " << b.max;
        ASSERT_GE(*hi, *v) << e << " max " << b.max;
      }
      if (cb.min) {
        ASSERT_LE(*cb.min, *v) << e;
      }
      if (cb.max) {
        ASSERT_GE(*cb.max, *v) << e;
      }
    }
  }
  EXPECT_GT(checked, 30000);
  EXPECT_GT(bounded, 1000);
}

}  // namespace
}  // namespace kiln::ir
