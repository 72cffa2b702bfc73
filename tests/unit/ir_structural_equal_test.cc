// Structural equality and hashing of lowered programs: the same schedule lowered twice (with new
// variables each time) is equal; any change of loop structure, constant, type or argument order
// is not.
#include <gtest/gtest.h>

#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/topi/matmul.h"

namespace kiln {
namespace {

ir::PrimFunc lowered(int tile, bool vectorize, bool swap_args = false) {
  te::Tensor A = te::placeholder({64, 32}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({32, 48}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul(A, B);
  auto s = te::create_schedule({C});
  auto st = s[C];
  auto [io, jo, ii, ji] = st.tile(st.axis(0), st.axis(1), tile, 16);
  if (vectorize) st.vectorize(ji);
  std::vector<te::Tensor> args =
      swap_args ? std::vector<te::Tensor>{B, A, C} : std::vector<te::Tensor>{A, B, C};
  return compiler::lower(s, args, "f");
}

TEST(StructuralEqual, SameScheduleLoweredTwiceIsEqual) {
  ir::PrimFunc a = lowered(8, true), b = lowered(8, true);
  EXPECT_FALSE(a.body.same_as(b.body));
  EXPECT_TRUE(ir::structural_equal(a, b));
  EXPECT_EQ(ir::structural_hash(a), ir::structural_hash(b));
}

TEST(StructuralEqual, DifferentProgramsDiffer) {
  ir::PrimFunc base = lowered(8, true);
  for (const ir::PrimFunc& other : {lowered(4, true), lowered(8, false), lowered(8, true, true)}) {
    EXPECT_FALSE(ir::structural_equal(base, other));
    EXPECT_NE(ir::structural_hash(base), ir::structural_hash(other));
  }
}

TEST(StructuralEqual, RenamingDoesNotMatterButStructureDoes) {
  ir::Var i("i"), j("j");
  ir::Var buf("A", ir::DataType::Handle());
  auto loop = [&](const ir::Var& v, int extent) {
    return ir::for_loop(v, 0, extent, ir::ForKind::kSerial, ir::store(buf, ir::Expr(1.0f), v));
  };
  EXPECT_TRUE(ir::structural_equal(loop(i, 8), loop(j, 8)));
  EXPECT_FALSE(ir::structural_equal(loop(i, 8), loop(i, 9)));
  // The same variable used twice is not the same as two different variables.
  ir::Stmt same = ir::store(buf, ir::cast(ir::kFloat32, i + i), 0);
  ir::Stmt diff = ir::store(buf, ir::cast(ir::kFloat32, i + j), 0);
  EXPECT_FALSE(ir::structural_equal(same, diff));
}

}  // namespace
}  // namespace kiln
