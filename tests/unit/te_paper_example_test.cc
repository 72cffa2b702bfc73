// Golden printouts of the paper's example, C[y][x] = sum_k A[k][y] * B[k][x] at 1024x1024: the
// loop program with the default schedule, after tile(y, x, k, 8, 8, 8), and the flattened function
// the code generator receives.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/matmul.h"

namespace kiln {
namespace {

struct PaperExample {
  te::Tensor A, B, C;
  te::Schedule s;
  PaperExample() {
    A = te::placeholder({1024, 1024}, ir::kFloat32, "A");
    B = te::placeholder({1024, 1024}, ir::kFloat32, "B");
    C = topi::matmul_transposed_a(A, B);
    s = te::create_schedule({C});
  }
  void tile() {
    auto st = s[C];
    st.tile(st.axis(0), st.axis(1), st.reduce_axis(0), 8, 8, 8);
  }
};

TEST(PaperExample, DefaultSchedule) {
  PaperExample ex;
  EXPECT_EQ(ir::to_string(compiler::lower_loops(ex.s)),
            R"(realize C[0:1024, 0:1024]:
  for y in range(1024):
    for x in range(1024):
      C[y, x] = 0f
      for k in range(1024):
        C[y, x] = C[y, x] + A[k, y]*B[k, x]
)");
}

TEST(PaperExample, AfterTile) {
  PaperExample ex;
  ex.tile();
  EXPECT_EQ(ir::to_string(compiler::lower_loops(ex.s)),
            R"(realize C[0:1024, 0:1024]:
  for y.outer in range(128):
    for x.outer in range(128):
      for y.inner.init in range(8):
        for x.inner.init in range(8):
          C[y.outer*8 + y.inner.init, x.outer*8 + x.inner.init] = 0f
      for k.outer in range(128):
        for y.inner in range(8):
          for x.inner in range(8):
            for k.inner in range(8):
              C[y.outer*8 + y.inner, x.outer*8 + x.inner] = C[y.outer*8 + y.inner, x.outer*8 + x.inner] + A[k.outer*8 + k.inner, y.outer*8 + y.inner]*B[k.outer*8 + k.inner, x.outer*8 + x.inner]
)");
}

TEST(PaperExample, FlattenedAfterTile) {
  PaperExample ex;
  ex.tile();
  ir::PrimFunc f = compiler::lower(ex.s, {ex.A, ex.B, ex.C}, "matmul");
  ASSERT_EQ(f.params.size(), 3u);
  EXPECT_EQ(f.params[0].buffer->name, "A");
  EXPECT_EQ(ir::to_string(f.body),
            R"(for y.outer in range(128):
  for x.outer in range(128):
    for y.inner.init in range(8):
      for x.inner.init in range(8):
        C[y.outer*8192 + y.inner.init*1024 + x.outer*8 + x.inner.init] = 0f
    for k.outer in range(128):
      for y.inner in range(8):
        for x.inner in range(8):
          for k.inner in range(8):
            C[y.outer*8192 + y.inner*1024 + x.outer*8 + x.inner] = C[y.outer*8192 + y.inner*1024 + x.outer*8 + x.inner] + A[k.outer*8192 + k.inner*1024 + y.outer*8 + y.inner]*B[k.outer*8192 + k.inner*1024 + x.outer*8 + x.inner]
)");
}

TEST(PaperExample, LoweringLeavesTheScheduleUntouched) {
  PaperExample ex;
  ex.tile();
  std::string first = ir::to_string(compiler::lower_loops(ex.s));
  EXPECT_EQ(first, ir::to_string(compiler::lower_loops(ex.s)));
}

}  // namespace
}  // namespace kiln
