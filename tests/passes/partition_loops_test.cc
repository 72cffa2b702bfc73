// Before/after tests of loop partitioning: a partial last tile is peeled off.
#include "compiler/pass/partition_loops.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class PartitionLoops : public ::testing::Test {
 protected:
  Var a{"A", DataType::Handle()}, b{"B", DataType::Handle()};
  Var o{"o"}, i{"i"}, n{"n"};
  Expr A(Expr idx) { return load(kFloat32, a, std::move(idx)); }
  /// for o in range(outer): for i in range(min(o*4 + 3, last) - o*4 + 1) [kind]: B[o*4 + i] = A[..]
  Stmt tiles(int64_t outer, int64_t last, ForKind inner_kind,
             ForKind outer_kind = ForKind::kSerial) {
    Expr extent = min(o * 4 + 3, Expr(last)) - o * 4 + 1;
    return for_loop(o, 0, outer, outer_kind,
                    for_loop(i, 0, extent, inner_kind, store(b, A(o * 4 + i), o * 4 + i)));
  }
};

TEST_F(PartitionLoops, PeelsThePartialLastTile) {
  // 7 columns in tiles of 4: one full tile, then 3.
  EXPECT_EQ(to_string(partition_loops(tiles(2, 6, ForKind::kUnrolled))),
            "unrolled for i in range(4):\n"
            "  B[i] = A[i]\n"
            "unrolled for i in range(3):\n"
            "  B[i + 4] = A[i + 4]\n");
}

TEST_F(PartitionLoops, ManyFullTilesStayALoop) {
  // 14 columns in tiles of 4: three full tiles, then 2.
  EXPECT_EQ(to_string(partition_loops(tiles(4, 13, ForKind::kVectorized))),
            "for o in range(3):\n"
            "  vectorized for i in range(4):\n"
            "    B[o*4 + i] = A[o*4 + i]\n"
            "vectorized for i in range(2):\n"
            "  B[i + 12] = A[i + 12]\n");
}

TEST_F(PartitionLoops, PeelsTheGuardedLastVector) {
  // 14 columns in vectors of 4: the guard stays in the last vector only.
  Stmt guarded =
      for_loop(o, 0, 4, ForKind::kSerial,
               for_loop(i, 0, 4, ForKind::kVectorized,
                        if_then_else(o * 4 + i < 14, store(b, A(o * 4 + i), o * 4 + i))));
  EXPECT_EQ(to_string(partition_loops(guarded)),
            "for o in range(3):\n"
            "  vectorized for i in range(4):\n"
            "    B[o*4 + i] = A[o*4 + i]\n"
            "vectorized for i in range(4):\n"
            "  if i < 2:\n"
            "    B[i + 12] = A[i + 12]\n");
  // A guard the full iterations do not lose (a bound not known here): left as it was.
  Stmt unknown = for_loop(o, 0, 4, ForKind::kSerial,
                          for_loop(i, 0, 4, ForKind::kVectorized,
                                   if_then_else(o * 4 + i < n, store(b, A(o * 4 + i), o * 4 + i))));
  EXPECT_TRUE(partition_loops(unknown).same_as(unknown));
}

TEST_F(PartitionLoops, LeavesOtherLoopsAlone) {
  // A serial inner loop gains nothing from a constant extent.
  Stmt serial = tiles(2, 6, ForKind::kSerial);
  EXPECT_TRUE(partition_loops(serial).same_as(serial));
  // A parallel outer loop is not split.
  Stmt parallel = tiles(2, 6, ForKind::kUnrolled, ForKind::kParallel);
  EXPECT_TRUE(partition_loops(parallel).same_as(parallel));
  // An extent that stays symbolic in the full tiles: nothing to gain.
  Stmt symbolic = for_loop(
      o, 0, 2, ForKind::kSerial,
      for_loop(i, 0, min(o * 4 + 3, n) - o * 4 + 1, ForKind::kUnrolled, store(b, A(i), i)));
  EXPECT_TRUE(partition_loops(symbolic).same_as(symbolic));
}

}  // namespace
}  // namespace kiln::pass
