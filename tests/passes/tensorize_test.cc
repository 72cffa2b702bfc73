// The tensorize primitive on the CPU: a 4x4 GEMV block intrinsic, out[j] = sum_k a[k] * b[j, k],
// declared as a tensor expression and lowered to plain loops over its buffers' regions, replaces
// the inner loops of a matrix product; the result matches the naive loops. Mismatches between the
// loops and the declaration are errors naming the stage, the axis and the intrinsic.
#include <gtest/gtest.h>

#include <vector>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor_intrin.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using ir::Expr;
using ir::Var;

/// out[j] (j < 4) = sum_k (k < 4) a[k] * b[j, k], lowered to loops over the flat regions.
te::TensorIntrin gemv4(std::vector<ir::IntrinBuffer>* seen = nullptr) {
  te::Tensor a = te::placeholder({4}, ir::kFloat32, "a");
  te::Tensor b = te::placeholder({4, 4}, ir::kFloat32, "b");
  te::IterVar k = te::reduce_axis({0, 4}, "k");
  te::Tensor out =
      te::compute({4}, [&](Var j) { return te::sum(a(k) * b(j, k), {k}); }, "out", {"j"});
  return te::decl_tensor_intrin(
      out,
      [seen](const std::vector<ir::IntrinBuffer>& in, const ir::IntrinBuffer& o) {
        Var j("j"), kk("kk");
        auto reset = ir::for_loop(j, 0, 4, ir::ForKind::kSerial, o.store({j}, Expr(0.0f)));
        // The reset runs where the inputs' regions are not live: it sees them without data.
        if (!in[0].data.defined()) return ir::IntrinStmts{ir::Stmt(), reset, ir::Stmt()};
        if (seen) {
          *seen = in;
          seen->push_back(o);
        }
        auto update = ir::for_loop(
            j, 0, 4, ir::ForKind::kSerial,
            ir::for_loop(kk, 0, 4, ir::ForKind::kSerial,
                         o.store({j}, o.load({j}) + in[0].load({kk}) * in[1].load({j, kk}))));
        return ir::IntrinStmts{ir::seq({reset, update}), reset, update};
      },
      "gemv4");
}

struct Product {
  static constexpr int M = 6, N = 8, K = 12;
  te::Tensor A = te::placeholder({M, K}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({N, K}, ir::kFloat32, "B");
  te::Tensor C;
  te::Schedule s;
  Product(int k_extent = K) {
    te::IterVar k = te::reduce_axis({0, k_extent}, "k");
    C = te::compute(
        {M, N}, [&](Var i, Var j) { return te::sum(A(i, k) * B(j, k), {k}); }, "C");
    s = te::create_schedule({C});
  }
  std::vector<float> naive(const runtime::NDArray& a, const runtime::NDArray& b,
                           int k_extent) const {
    std::vector<float> c(M * N, 0.0f);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        for (int k = 0; k < k_extent; ++k)
          c[i * N + j] += a.data<float>()[i * K + k] * b.data<float>()[j * K + k];
    return c;
  }
};

TEST(Tensorize, ReductionSplitAcrossTheIntrinsicUsesResetAndUpdate) {
  Product p;
  std::vector<ir::IntrinBuffer> seen;
  te::Stage st = p.s[p.C];
  auto [jo, ji] = st.split(st.axis(1), 4);
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.reorder({st.axis(0), jo, ko, ji, ki});
  st.tensorize(ji, gemv4(&seen));
  const std::string loops = ir::to_string(compiler::lower_loops(p.s));
  EXPECT_NE(loops.find("tensorize = \"reset\""), std::string::npos) << loops;
  EXPECT_NE(loops.find("tensorize = \"update\""), std::string::npos) << loops;

  runtime::Function f = testing::build_host(p.s, {p.A, p.B, p.C});
  // The regions the intrinsic saw (the last call's): A's row from i*12 + k.outer*4 with stride 1,
  // B's block with strides (12, 1), C's four elements with stride 1.
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(ir::to_string(seen[1].strides[0]), "12");
  EXPECT_EQ(ir::to_string(seen[1].strides[1]), "1");
  EXPECT_EQ(ir::to_string(seen[0].strides[0]), "1");
  EXPECT_EQ(seen[2].scope, "global");

  runtime::NDArray a = testing::random_array({Product::M, Product::K}, 1);
  runtime::NDArray b = testing::random_array({Product::N, Product::K}, 2);
  runtime::NDArray c = testing::zeros({Product::M, Product::N});
  f(a, b, c);
  EXPECT_TRUE(testing::all_close(c, p.naive(a, b, Product::K)));
}

TEST(Tensorize, WholeReductionInsideUsesBody) {
  Product p(4);
  te::Stage st = p.s[p.C];
  auto [jo, ji] = st.split(st.axis(1), 4);
  st.tensorize(ji, gemv4());
  const std::string loops = ir::to_string(compiler::lower_loops(p.s));
  EXPECT_NE(loops.find("tensorize = \"body\""), std::string::npos) << loops;
  runtime::Function f = testing::build_host(p.s, {p.A, p.B, p.C});
  runtime::NDArray a = testing::random_array({Product::M, Product::K}, 3);
  runtime::NDArray b = testing::random_array({Product::N, Product::K}, 4);
  runtime::NDArray c = testing::zeros({Product::M, Product::N});
  f(a, b, c);
  EXPECT_TRUE(testing::all_close(c, p.naive(a, b, 4)));
}

TEST(Tensorize, IntoALocalCacheSeesItsScopeAndStrides) {
  Product p;
  te::Tensor CL = p.s.cache_write(p.C, "local");
  te::Stage out = p.s[p.C];
  auto [jo, ji] = out.split(out.axis(1), 4);
  te::Stage st = p.s[CL];
  st.compute_at(out, jo);
  // CL covers four elements of a row here: its loops are i (1), k.outer, j (4), k.inner.
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.reorder({st.axis(0), ko, st.axis(1), ki});
  std::vector<ir::IntrinBuffer> seen;
  st.tensorize(st.axis(1), gemv4(&seen));
  runtime::Function f = testing::build_host(p.s, {p.A, p.B, p.C});
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].scope, "local");
  runtime::NDArray a = testing::random_array({Product::M, Product::K}, 5);
  runtime::NDArray b = testing::random_array({Product::N, Product::K}, 6);
  runtime::NDArray c = testing::zeros({Product::M, Product::N});
  f(a, b, c);
  EXPECT_TRUE(testing::all_close(c, p.naive(a, b, Product::K)));
}

TEST(Tensorize, ElementwiseIntrinsicHasOnlyABody) {
  te::Tensor a = te::placeholder({4}, ir::kFloat32, "a"),
             b = te::placeholder({4}, ir::kFloat32, "b");
  te::Tensor o = te::compute({4}, [&](Var j) { return a(j) + b(j); }, "o", {"j"});
  te::TensorIntrin vadd4 = te::decl_tensor_intrin(
      o,
      [](const std::vector<ir::IntrinBuffer>& in, const ir::IntrinBuffer& out) {
        Var j("j");
        return ir::IntrinStmts{ir::for_loop(j, 0, 4, ir::ForKind::kSerial,
                                            out.store({j}, in[0].load({j}) + in[1].load({j}))),
                               ir::Stmt(), ir::Stmt()};
      },
      "vadd4");
  te::Tensor A = te::placeholder({3, 8}, ir::kFloat32, "A"),
             B = te::placeholder({3, 8}, ir::kFloat32, "B");
  te::Tensor C = te::compute(
      {3, 8}, [&](Var i, Var j) { return A(i, j) + B(i, j); }, "C");
  te::Schedule s = te::create_schedule({C});
  auto [jo, ji] = s[C].split(s[C].axis(1), 4);
  s[C].tensorize(ji, vadd4);
  runtime::Function f = testing::build_host(s, {A, B, C});
  runtime::NDArray x = testing::random_array({3, 8}, 9), y = testing::random_array({3, 8}, 10);
  runtime::NDArray z = testing::zeros({3, 8});
  f(x, y, z);
  std::vector<float> want(24);
  for (int k = 0; k < 24; ++k) want[k] = x.data<float>()[k] + y.data<float>()[k];
  EXPECT_TRUE(testing::all_close(z, want));
}

/// o[j] = a[j] > j ? a[j] : 0 over 4 elements: a loop variable used as a value, not an index.
te::TensorIntrin above_index4() {
  te::Tensor a = te::placeholder({4}, ir::kFloat32, "a");
  te::Tensor o = te::compute(
      {4}, [&](Var j) { return ir::select(a(j) > ir::cast(ir::kFloat32, j), a(j), Expr(0.0f)); },
      "o", {"j"});
  return te::decl_tensor_intrin(
      o,
      [](const std::vector<ir::IntrinBuffer>& in, const ir::IntrinBuffer& out) {
        Var j("j");
        Expr v = in[0].load({j});
        return ir::IntrinStmts{
            ir::for_loop(j, 0, 4, ir::ForKind::kSerial,
                         out.store({j}, ir::select(v > ir::cast(ir::kFloat32, j), v, Expr(0.0f)))),
            ir::Stmt(), ir::Stmt()};
      },
      "above_index4");
}

TEST(Tensorize, LoopVariablesUsedAsValuesAreTheIntrinsicsAxes) {
  te::Tensor A = te::placeholder({4}, ir::kFloat32, "A");
  te::Tensor C = te::compute(
      {4}, [&](Var i) { return ir::select(A(i) > ir::cast(ir::kFloat32, i), A(i), Expr(0.0f)); },
      "C");
  te::Schedule s = te::create_schedule({C});
  s[C].tensorize(s[C].axis(0), above_index4());
  runtime::Function f = testing::build_host(s, {A, C});
  runtime::NDArray x =
      runtime::NDArray::from_vector(std::vector<float>{1.5f, 0.5f, 2.5f, 3.5f}, {4});
  runtime::NDArray z = testing::zeros({4});
  f(x, z);
  EXPECT_TRUE(testing::all_close(z, {1.5f, 0.0f, 2.5f, 3.5f}, 0, 0));
}

TEST(TensorizeErrors, AValueOfALoopOutsideTheAxisIsRefused) {
  // C[i] compares with i = i.outer * 4 + i.inner: the intrinsic sees only i.inner.
  te::Tensor A = te::placeholder({8}, ir::kFloat32, "A");
  te::Tensor C = te::compute(
      {8}, [&](Var i) { return ir::select(A(i) > ir::cast(ir::kFloat32, i), A(i), Expr(0.0f)); },
      "C");
  te::Schedule s = te::create_schedule({C});
  auto [io, ii] = s[C].split(s[C].axis(0), 4);
  s[C].tensorize(ii, above_index4());
  EXPECT_ERROR_CONTAINS(compiler::lower_loops(s),
                        "tensorize: stage 'C', axis 'i.inner', intrinsic 'above_index4': the "
                        "loops compute");
}

TEST(TensorizeErrors, ExtentMismatchNamesStageAxisAndIntrinsic) {
  Product p;
  te::Stage st = p.s[p.C];
  auto [jo, ji] = st.split(st.axis(1), 2);
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.reorder({st.axis(0), jo, ko, ji, ki});
  st.tensorize(ji, gemv4());
  EXPECT_ERROR_CONTAINS(
      compiler::lower_loops(p.s),
      "tensorize: stage 'C', axis 'j.inner', intrinsic 'gemv4': loop 'j.inner' has "
      "extent 2 but the intrinsic's axis 'j' has extent 4");
}

TEST(TensorizeErrors, DifferentBodyIsRefused) {
  Product p;
  te::IterVar k = te::reduce_axis({0, Product::K}, "k");
  te::Tensor D = te::compute(
      {Product::M, Product::N}, [&](Var i, Var j) { return te::sum(p.A(i, k) + p.B(j, k), {k}); },
      "D");
  te::Schedule s = te::create_schedule({D});
  te::Stage st = s[D];
  auto [jo, ji] = st.split(st.axis(1), 4);
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.reorder({st.axis(0), jo, ko, ji, ki});
  st.tensorize(ji, gemv4());
  EXPECT_ERROR_CONTAINS(compiler::lower_loops(s),
                        "tensorize: stage 'D', axis 'j.inner', intrinsic "
                        "'gemv4': the loops compute");
}

TEST(TensorizeErrors, LoopCountMismatch) {
  Product p;
  te::Stage st = p.s[p.C];
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.tensorize(ki, gemv4());
  EXPECT_ERROR_CONTAINS(compiler::lower_loops(p.s),
                        "intrinsic 'gemv4': the loops from it inward are 0 "
                        "data-parallel (none) and 1 reduction (k.inner)");
}

TEST(Tensorize, GuardsOnOuterLoopsStayOutside) {
  Product p;
  te::Stage st = p.s[p.C];
  auto [io, ii] = st.split(st.axis(0), 4);  // 6 rows: a guard on i.inner
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  auto [jo, ji] = st.split(st.axis(1), 4);
  st.reorder({io, jo, ko, ii, ji, ki});
  st.tensorize(ji, gemv4());
  // The guard on i.inner (6 rows in tiles of 4) is on a loop outside the intrinsic: allowed.
  runtime::Function f = testing::build_host(p.s, {p.A, p.B, p.C});
  runtime::NDArray a = testing::random_array({Product::M, Product::K}, 7);
  runtime::NDArray b = testing::random_array({Product::N, Product::K}, 8);
  runtime::NDArray c = testing::zeros({Product::M, Product::N});
  f(a, b, c);
  EXPECT_TRUE(testing::all_close(c, p.naive(a, b, Product::K)));
}

TEST(TensorizeErrors, TwoTensorizedAxesAreRefused) {
  Product p;
  te::Stage st = p.s[p.C];
  auto [jo, ji] = st.split(st.axis(1), 4);
  st.tensorize(ji, gemv4());
  EXPECT_ERROR_CONTAINS(st.tensorize(jo, gemv4()), "already tensorized at 'j.inner'");
}

// A packed operand: B's columns in panels of 4, read at floordiv(j, 4) / floormod(j, 4). Inside
// the intrinsic's loops the panel does not move, which the matcher proves with the intrinsic's
// axes' extents (j < 4).
TEST(Tensorize, PackedOperandReadThroughFloorDivMatches) {
  constexpr int M = 3, N = 8, K = 8;
  te::Tensor A = te::placeholder({M, K}, ir::kFloat32, "A");
  te::Tensor P = te::placeholder({N / 4, 4, K}, ir::kFloat32, "P");  // P[j / 4, j % 4, k]
  te::IterVar k = te::reduce_axis({0, K}, "k");
  te::Tensor C = te::compute(
      {M, N},
      [&](Var i, Var j) {
        return te::sum(A(i, k) * P(ir::floordiv(j, 4), ir::floormod(j, 4), k), {k});
      },
      "C");
  te::Schedule s = te::create_schedule({C});
  te::Stage st = s[C];
  auto [jo, ji] = st.split(st.axis(1), 4);
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.reorder({st.axis(0), jo, ko, ji, ki});
  st.tensorize(ji, gemv4());
  runtime::Function f = testing::build_host(s, {A, P, C});
  runtime::NDArray a = testing::random_array({M, K}, 11);
  runtime::NDArray p = testing::random_array({N / 4, 4, K}, 12);
  runtime::NDArray c = testing::zeros({M, N});
  f(a, p, c);
  std::vector<float> want(M * N, 0.0f);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int kk = 0; kk < K; ++kk)
        want[i * N + j] +=
            a.data<float>()[i * K + kk] * p.data<float>()[(j / 4 * 4 + j % 4) * K + kk];
  EXPECT_TRUE(testing::all_close(c, want));
}

}  // namespace
}  // namespace kiln
