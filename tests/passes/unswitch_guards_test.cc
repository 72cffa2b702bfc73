// Before/after tests of guard unswitching: the padded taps of an accumulation are left out.
#include "compiler/pass/unswitch_guards.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class UnswitchGuards : public ::testing::Test {
 protected:
  Var acc{"acc", DataType::Handle()}, d{"D", DataType::Handle()}, w{"W", DataType::Handle()};
  Var r{"r"}, x{"x"}, y{"y"}, k{"k"};
  Expr W(Expr idx) { return load(kFloat32, w, std::move(idx)); }
  /// acc[slot] = acc[slot] + select(guard, D[k + slot], 0) * W[k]
  Stmt update(int slot, const Expr& guard) {
    Expr tap = select(guard, load(kFloat32, d, k + slot), make_const(kFloat32, 0.0));
    return store(acc, load(kFloat32, acc, slot) + tap * W(k), slot);
  }
  Stmt loop(Stmt body, ForKind kind = ForKind::kSerial) {
    return for_loop(k, 0, 16, kind, std::move(body));
  }
};

TEST_F(UnswitchGuards, SharedGuardBecomesOneIfAroundTheLoop) {
  Stmt s = loop(seq({update(0, y + r >= 1), update(1, y + r >= 1)}));
  EXPECT_EQ(to_string(unswitch_guards(s)),
            "if y + r >= 1:\n"
            "  for k in range(16):\n"
            "    acc[0] = acc[0] + D[k]*W[k]\n"
            "    acc[1] = acc[1] + D[k + 1]*W[k]\n");
}

TEST_F(UnswitchGuards, DistinctGuardsGiveOneCopyPerCombination) {
  // The first update reads padding when y + r < 1 or x < 1, the second only when y + r < 1.
  Stmt s = loop(seq({update(0, (y + r >= 1) && (x >= 1)), update(1, y + r >= 1)}));
  EXPECT_EQ(to_string(unswitch_guards(s)),
            "if y + r >= 1:\n"
            "  if x >= 1:\n"
            "    for k in range(16):\n"
            "      acc[0] = acc[0] + D[k]*W[k]\n"
            "      acc[1] = acc[1] + D[k + 1]*W[k]\n"
            "  else:\n"
            "    for k in range(16):\n"
            "      acc[1] = acc[1] + D[k + 1]*W[k]\n");
}

TEST_F(UnswitchGuards, UnguardedUpdatesStayInEveryCopy) {
  Stmt plain = store(acc, load(kFloat32, acc, 2) + W(k), 2);
  Stmt s = loop(seq({update(0, x >= 1), plain}));
  EXPECT_EQ(to_string(unswitch_guards(s)),
            "if x >= 1:\n"
            "  for k in range(16):\n"
            "    acc[0] = acc[0] + D[k]*W[k]\n"
            "    acc[2] = acc[2] + W[k]\n"
            "else:\n"
            "  for k in range(16):\n"
            "    acc[2] = acc[2] + W[k]\n");
}

TEST_F(UnswitchGuards, ConjunctsOfTheLoopVariableStayInTheSelect) {
  Stmt s = loop(update(0, (x >= 1) && (k + x < 20)));
  EXPECT_EQ(to_string(unswitch_guards(s)),
            "if x >= 1:\n"
            "  for k in range(16):\n"
            "    acc[0] = acc[0] + select(k + x < 20, D[k], 0f)*W[k]\n");
}

TEST_F(UnswitchGuards, ConstantFalseGuardDropsTheUpdate) {
  Stmt s = loop(seq({update(0, const_false()), update(1, const_true())}));
  EXPECT_EQ(to_string(unswitch_guards(s)),
            "for k in range(16):\n"
            "  acc[1] = acc[1] + D[k + 1]*W[k]\n");
  Stmt never = loop(update(0, const_false()));
  EXPECT_TRUE(is_no_op(unswitch_guards(never)));
}

TEST_F(UnswitchGuards, OnlyTheMostUsedGuardsAreUnswitched) {
  // Four distinct guards, x >= 1 used twice: the least used of the others stays in its select.
  Stmt s = loop(seq({update(0, x >= 1), update(1, x >= 1), update(2, x >= 2), update(3, x >= 3),
                     update(4, y >= 1)}));
  const std::string out = to_string(unswitch_guards(s));
  EXPECT_EQ(out.rfind("if x >= 1:\n", 0), 0u) << out;
  // 2^3 copies; the fourth guard (y >= 1, used once, listed last) is still a select in each.
  size_t copies = 0, selects = 0;
  for (size_t p = out.find("for k"); p != std::string::npos; p = out.find("for k", p + 1)) ++copies;
  for (size_t p = out.find("select(y >= 1"); p != std::string::npos;
       p = out.find("select(y >= 1", p + 1)) {
    ++selects;
  }
  EXPECT_EQ(copies, 8u) << out;
  EXPECT_EQ(selects, 8u) << out;
  EXPECT_EQ(out.find("select(x"), std::string::npos) << out;
}

TEST_F(UnswitchGuards, BroadcastGuardedVectors) {
  Expr tap = broadcast(select(x >= 1, load(kFloat32, d, k), make_const(kFloat32, 0.0)), 4);
  Expr wv = load(kFloat32.with_lanes(4), w, ramp(k * 4, 1, 4));
  Stmt s =
      loop(store(acc, wv * tap + load(kFloat32.with_lanes(4), acc, ramp(0, 1, 4)), ramp(0, 1, 4)));
  const std::string out = to_string(unswitch_guards(s));
  EXPECT_EQ(out.rfind("if x >= 1:\n", 0), 0u) << out;
  EXPECT_EQ(out.find("select"), std::string::npos) << out;
}

TEST_F(UnswitchGuards, LeavesOtherLoopsAlone) {
  Stmt parallel = loop(update(0, x >= 1), ForKind::kParallel);
  EXPECT_TRUE(unswitch_guards(parallel).same_as(parallel));
  // A select whose other value is not zero is no padded tap.
  Expr tap = select(x >= 1, load(kFloat32, d, k), make_const(kFloat32, 1.0));
  Stmt not_zero = loop(store(acc, load(kFloat32, acc, 0) + tap * W(k), 0));
  EXPECT_TRUE(unswitch_guards(not_zero).same_as(not_zero));
  // Not an update of the stored element.
  Expr zero_tap = select(x >= 1, load(kFloat32, d, k), make_const(kFloat32, 0.0));
  Stmt other = loop(store(acc, load(kFloat32, acc, 1) + zero_tap * W(k), 0));
  EXPECT_TRUE(unswitch_guards(other).same_as(other));
  // A loop that holds more than stores.
  Stmt nested = loop(seq({update(0, x >= 1), for_loop(r, 0, 2, ForKind::kSerial, evaluate(0))}));
  EXPECT_TRUE(unswitch_guards(nested).same_as(nested));
}

}  // namespace
}  // namespace kiln::pass
