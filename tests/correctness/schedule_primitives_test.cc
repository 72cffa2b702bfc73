// Every schedule primitive, built for the host, run, and compared with a naive loop nest in C++.
// Tolerance: fp32 results within 1e-5 relative + 1e-5 absolute (reductions of up to ~100 terms);
// larger reductions use 1e-4 relative, because summation order differs from the reference.
#include <gtest/gtest.h>

#include "compiler/ir/printer.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using ir::Expr;
using ir::IterVar;
using ir::Var;
using runtime::NDArray;
using testing::all_close;
using testing::build_host;
using testing::random_array;
using testing::zeros;

std::vector<float> naive_matmul(const NDArray& a, const NDArray& b, int m, int n, int k) {
  auto& A = const_cast<NDArray&>(a);
  auto& B = const_cast<NDArray&>(b);
  std::vector<float> c(size_t(m) * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int r = 0; r < k; ++r)
        acc += double(A.data<float>()[i * k + r]) * B.data<float>()[r * n + j];
      c[size_t(i) * n + j] = float(acc);
    }
  return c;
}

struct Elementwise {
  te::Tensor a, b, c;
};

// c[i, j] = a[i, j] * 2 + b[i, j]
Elementwise make_elementwise(int m, int n) {
  Elementwise e;
  e.a = te::placeholder({m, n}, ir::kFloat32, "A");
  e.b = te::placeholder({m, n}, ir::kFloat32, "B");
  e.c = te::compute(
      {m, n}, [&](Var i, Var j) { return e.a(i, j) * 2.0f + e.b(i, j); }, "C");
  return e;
}

void check_elementwise(const te::Schedule& s, const Elementwise& e, int m, int n) {
  auto f = build_host(s, {e.a, e.b, e.c});
  NDArray a = random_array({m, n}, 1), b = random_array({m, n}, 2), c = zeros({m, n});
  f(a, b, c);
  std::vector<float> ref(size_t(m) * n);
  for (int i = 0; i < m * n; ++i) ref[i] = a.data<float>()[i] * 2.0f + b.data<float>()[i];
  EXPECT_TRUE(all_close(c, ref));
}

TEST(ScheduleCorrectness, DefaultSchedule) {
  auto e = make_elementwise(13, 7);
  check_elementwise(te::create_schedule({e.c}), e, 13, 7);
}

TEST(ScheduleCorrectness, SplitThatDivides) {
  auto e = make_elementwise(64, 32);
  auto s = te::create_schedule({e.c});
  s[e.c].split(s[e.c].axis(1), 8);
  check_elementwise(s, e, 64, 32);
}

TEST(ScheduleCorrectness, SplitThatDoesNotDivide) {
  auto e = make_elementwise(37, 53);
  auto s = te::create_schedule({e.c});
  auto [yo, xo, yi, xi] = s[e.c].tile(s[e.c].axis(0), s[e.c].axis(1), 8, 16);
  s[e.c].vectorize(xi);
  check_elementwise(s, e, 37, 53);
}

TEST(ScheduleCorrectness, SplitByNparts) {
  auto e = make_elementwise(30, 41);
  auto s = te::create_schedule({e.c});
  auto [o, i] = s[e.c].split_nparts(s[e.c].axis(1), 4);
  s[e.c].unroll(o);
  check_elementwise(s, e, 30, 41);
}

TEST(ScheduleCorrectness, NestedSplitsThatDoNotDivide) {
  auto e = make_elementwise(5, 100);
  auto s = te::create_schedule({e.c});
  auto [o, i] = s[e.c].split(s[e.c].axis(1), 9);
  auto [io, ii] = s[e.c].split(i, 4);
  s[e.c].reorder({io, s[e.c].axis(0), o, ii});
  check_elementwise(s, e, 5, 100);
}

TEST(ScheduleCorrectness, FuseVectorizeParallel) {
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    auto e = make_elementwise(64, 48);
    auto s = te::create_schedule({e.c});
    auto st = s[e.c];
    IterVar fused = st.fuse(st.axis(0), st.axis(1));
    auto [o, i] = st.split(fused, 16);
    st.parallel(o);
    st.vectorize(i);
    check_elementwise(s, e, 64, 48);
  }
  runtime::set_num_threads(0);
}

TEST(ScheduleCorrectness, FuseThatDoesNotDivideThenSplit) {
  auto e = make_elementwise(7, 9);
  auto s = te::create_schedule({e.c});
  auto st = s[e.c];
  IterVar fused = st.fuse({st.axis(0), st.axis(1)});
  auto [o, i] = st.split(fused, 8);
  st.parallel(o);
  st.vectorize(i);
  check_elementwise(s, e, 7, 9);
}

TEST(ScheduleCorrectness, FusedLoopsOfAnAttachedStageStartWhereItsRegionDoes) {
  // T = A * 2 computed per 4 rows of C = T + B, its two loops fused (as a GPU's cooperative fetch
  // fuses a shared copy's): the region of T starts at the block's first row, so the fused loop's
  // rows must too.
  auto e = make_elementwise(8, 6);
  te::Tensor t = te::compute(
      {8, 6}, [&](Var i, Var j) { return e.a(i, j) * 2.0f; }, "T");
  e.c = te::compute(
      {8, 6}, [&](Var i, Var j) { return t(i, j) + e.b(i, j); }, "C");
  auto s = te::create_schedule({e.c});
  auto [rows, row] = s[e.c].split(s[e.c].axis(0), 4);
  auto st = s[t];
  st.compute_at(s[e.c], rows);
  st.fuse(st.axis(0), st.axis(1));
  check_elementwise(s, e, 8, 6);
}

TEST(ScheduleCorrectness, ReorderAndUnroll) {
  auto e = make_elementwise(16, 12);
  auto s = te::create_schedule({e.c});
  auto st = s[e.c];
  auto [xo, xi] = st.split(st.axis(1), 4);
  st.reorder({xi, st.axis(0), xo});
  st.unroll(xi);
  check_elementwise(s, e, 16, 12);
}

TEST(ScheduleCorrectness, PragmaIsCarriedAndHarmless) {
  auto e = make_elementwise(8, 8);
  auto s = te::create_schedule({e.c});
  s[e.c].pragma(s[e.c].axis(0), "debug_note", 1);
  EXPECT_NE(ir::to_string(compiler::lower_loops(s)).find("pragma_debug_note"), std::string::npos);
  check_elementwise(s, e, 8, 8);
}

TEST(ScheduleCorrectness, PaperMatmulTiled) {
  const int n = 64;
  te::Tensor A = te::placeholder({n, n}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({n, n}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul_transposed_a(A, B);
  auto s = te::create_schedule({C});
  auto st = s[C];
  st.tile(st.axis(0), st.axis(1), st.reduce_axis(0), 8, 8, 8);
  auto f = build_host(s, {A, B, C});
  NDArray a = random_array({n, n}, 3), b = random_array({n, n}, 4), c = zeros({n, n});
  f(a, b, c);
  // C[y][x] = sum_k A[k][y] * B[k][x]
  std::vector<float> ref(n * n);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      double acc = 0;
      for (int k = 0; k < n; ++k)
        acc += double(a.data<float>()[k * n + y]) * b.data<float>()[k * n + x];
      ref[y * n + x] = float(acc);
    }
  EXPECT_TRUE(all_close(c, ref, 1e-4, 1e-5));
}

TEST(ScheduleCorrectness, ReductionSplitThatDoesNotDivide) {
  const int m = 10, n = 12, k = 29;
  te::Tensor A = te::placeholder({m, k}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({k, n}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul(A, B);
  auto s = te::create_schedule({C});
  auto st = s[C];
  auto [ko, ki] = st.split(st.reduce_axis(0), 8);
  st.reorder({ko, st.axis(0), ki, st.axis(1)});
  st.vectorize(st.axis(1));
  auto f = build_host(s, {A, B, C});
  NDArray a = random_array({m, k}, 5), b = random_array({k, n}, 6), c = zeros({m, n});
  f(a, b, c);
  EXPECT_TRUE(all_close(c, naive_matmul(a, b, m, n, k), 1e-4, 1e-5));
}

TEST(ScheduleCorrectness, PackedMatmulAllSizes) {
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    for (auto [m, n, k] : {std::tuple{64, 64, 64}, {40, 96, 33}, {17, 50, 9}}) {
      auto p = topi::packed_matmul_x86(m, n, k);
      auto f = build_host(p.schedule, {p.a, p.b, p.c});
      NDArray a = random_array({m, k}, 7), b = random_array({k, n}, 8), c = zeros({m, n});
      f(a, b, c);
      EXPECT_TRUE(all_close(c, naive_matmul(a, b, m, n, k), 1e-4, 1e-5))
          << m << "x" << n << "x" << k << " threads=" << threads;
    }
  }
  runtime::set_num_threads(0);
}

TEST(ScheduleCorrectness, SymbolicShapesBoundAtCallTime) {
  Var m = te::var("m"), n = te::var("n");
  te::Tensor A = te::placeholder({m, n}, ir::kFloat32, "A");
  te::Tensor B = te::compute(
      {m, n}, [&](Var i, Var j) { return A(i, j) + 1.0f; }, "B");
  auto s = te::create_schedule({B});
  auto [jo, ji] = s[B].split(s[B].axis(1), 8);
  s[B].vectorize(ji);
  s[B].parallel(s[B].axis(0));
  auto f = build_host(s, {A, B});
  for (auto [rows, cols] : {std::pair{3, 5}, {16, 16}, {1, 100}}) {
    NDArray a = random_array({rows, cols}, 9), b = zeros({rows, cols});
    f(a, b);
    std::vector<float> ref(size_t(rows) * cols);
    for (int i = 0; i < rows * cols; ++i) ref[i] = a.data<float>()[i] + 1.0f;
    EXPECT_TRUE(all_close(b, ref)) << rows << "x" << cols;
  }
}

TEST(ScheduleCorrectness, SymbolicMatmul) {
  Var m = te::var("m"), n = te::var("n"), k = te::var("k");
  te::Tensor A = te::placeholder({m, k}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({k, n}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul(A, B);
  auto s = te::create_schedule({C});
  auto st = s[C];
  auto [io, jo, ii, ji] = st.tile(st.axis(0), st.axis(1), 4, 8);
  st.vectorize(ji);
  auto f = build_host(s, {A, B, C});
  for (auto [mm, nn, kk] : {std::tuple{5, 9, 3}, {8, 16, 20}}) {
    NDArray a = random_array({mm, kk}, 10), b = random_array({kk, nn}, 11), c = zeros({mm, nn});
    f(a, b, c);
    EXPECT_TRUE(all_close(c, naive_matmul(a, b, mm, nn, kk), 1e-4, 1e-5));
  }
}

// A padded 3x3 convolution (one channel): P = pad(I, 1), O[y, x] = sum P[y+ry, x+rx] * W[ry, rx].
struct Conv {
  te::Tensor in, w, pad, out;
};

Conv make_conv(int h, int wd) {
  Conv c;
  c.in = te::placeholder({h, wd}, ir::kFloat32, "I");
  c.w = te::placeholder({3, 3}, ir::kFloat32, "W");
  c.pad = te::compute(
      {h + 2, wd + 2},
      [&](Var y, Var x) {
        Expr inside = y >= 1 && y < h + 1 && x >= 1 && x < wd + 1;
        return ir::select(inside, c.in(ir::max(y - 1, 0), ir::max(x - 1, 0)) * 1.0f, Expr(0.0f));
      },
      "P");
  IterVar ry = te::reduce_axis({0, 3}, "ry"), rx = te::reduce_axis({0, 3}, "rx");
  c.out = te::compute(
      {h, wd},
      [&](Var y, Var x) {
        return te::sum(c.pad(y + ry, x + rx) * c.w(ry, rx), {ry, rx});
      },
      "O");
  return c;
}

void check_conv(const te::Schedule& s, const Conv& c, int h, int wd) {
  auto f = build_host(s, {c.in, c.w, c.out});
  NDArray in = random_array({h, wd}, 12), w = random_array({3, 3}, 13), out = zeros({h, wd});
  f(in, w, out);
  std::vector<float> ref(size_t(h) * wd);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < wd; ++x) {
      double acc = 0;
      for (int ry = 0; ry < 3; ++ry)
        for (int rx = 0; rx < 3; ++rx) {
          int iy = y + ry - 1, ix = x + rx - 1;
          float v =
              (iy >= 0 && iy < h && ix >= 0 && ix < wd) ? in.data<float>()[iy * wd + ix] : 0.0f;
          acc += double(v) * w.data<float>()[ry * 3 + rx];
        }
      ref[y * wd + x] = float(acc);
    }
  EXPECT_TRUE(all_close(out, ref));
}

TEST(ScheduleCorrectness, ConvPaddingAtRoot) {
  auto c = make_conv(12, 10);
  check_conv(te::create_schedule({c.out}), c, 12, 10);
}

TEST(ScheduleCorrectness, ConvPaddingInlined) {
  auto c = make_conv(12, 10);
  auto s = te::create_schedule({c.out});
  s[c.pad].compute_inline();
  auto [xo, xi] = s[c.out].split(s[c.out].axis(1), 4);
  s[c.out].vectorize(xi);
  check_conv(s, c, 12, 10);
}

TEST(ScheduleCorrectness, ConvPaddingComputedAtRow) {
  auto c = make_conv(12, 10);
  auto s = te::create_schedule({c.out});
  s[c.pad].compute_at(s[c.out], s[c.out].axis(0));
  check_conv(s, c, 12, 10);
}

TEST(ScheduleCorrectness, ConvPaddingComputedAtTile) {
  auto c = make_conv(13, 11);
  auto s = te::create_schedule({c.out});
  auto st = s[c.out];
  auto [yo, xo, yi, xi] = st.tile(st.axis(0), st.axis(1), 4, 4);
  s[c.pad].compute_at(st, xo);
  s[c.pad].set_scope("local");
  check_conv(s, c, 13, 11);
}

TEST(ScheduleCorrectness, ComputeRootUndoesComputeAt) {
  auto c = make_conv(6, 7);
  auto s = te::create_schedule({c.out});
  s[c.pad].compute_at(s[c.out], s[c.out].axis(0));
  s[c.pad].compute_root();
  check_conv(s, c, 6, 7);
}

TEST(ScheduleCorrectness, CacheReadAndCacheWrite) {
  const int m = 32, n = 48, k = 16;
  te::Tensor A = te::placeholder({m, k}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({k, n}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul(A, B);
  auto s = te::create_schedule({C});
  te::Tensor AL = s.cache_read(A, "local", {C});
  te::Tensor CL = s.cache_write(C, "local");
  auto sc = s[C];
  auto [io, jo, ii, ji] = sc.tile(sc.axis(0), sc.axis(1), 8, 16);
  s[CL].compute_at(sc, jo);
  auto [ko, ki] = s[CL].split(s[CL].reduce_axis(0), 4);
  s[CL].reorder({ko, s[CL].axis(0), ki, s[CL].axis(1)});
  s[CL].vectorize(s[CL].axis(1));
  s[AL].compute_at(s[CL], ko);
  auto f = build_host(s, {A, B, C});
  NDArray a = random_array({m, k}, 14), b = random_array({k, n}, 15), c = zeros({m, n});
  f(a, b, c);
  EXPECT_TRUE(all_close(c, naive_matmul(a, b, m, n, k), 1e-4, 1e-5));
}

TEST(ScheduleCorrectness, MaxMinProdReductionsWithCondition) {
  const int m = 9, k = 13;
  te::Tensor A = te::placeholder({m, k}, ir::kFloat32, "A");
  IterVar r1 = te::reduce_axis({0, k}, "r1"), r2 = te::reduce_axis({0, k}, "r2"),
          r3 = te::reduce_axis({0, 4}, "r3"), r4 = te::reduce_axis({0, k}, "r4");
  te::Tensor mx = te::compute(
      {m}, [&](Var i) { return te::max(A(i, r1), {r1}); }, "mx");
  te::Tensor mn = te::compute(
      {m}, [&](Var i) { return te::min(A(i, r2), {r2}); }, "mn");
  te::Tensor pr = te::compute(
      {m}, [&](Var i) { return te::prod(A(i, r3) + 2.0f, {r3}); }, "pr");
  te::Tensor se = te::compute(
      {m}, [&](Var i) { return te::sum(A(i, r4), {r4}, r4 % 2 == 0); }, "se");
  auto s = te::create_schedule({mx, mn, pr, se});
  auto f = build_host(s, {A, mx, mn, pr, se});
  NDArray a = random_array({m, k}, 16), o1 = zeros({m}), o2 = zeros({m}), o3 = zeros({m}),
          o4 = zeros({m});
  f(a, o1, o2, o3, o4);
  std::vector<float> r_mx(m), r_mn(m), r_pr(m), r_se(m);
  for (int i = 0; i < m; ++i) {
    const float* row = a.data<float>() + i * k;
    r_mx[i] = *std::max_element(row, row + k);
    r_mn[i] = *std::min_element(row, row + k);
    r_pr[i] = (row[0] + 2) * (row[1] + 2) * (row[2] + 2) * (row[3] + 2);
    double acc = 0;
    for (int j = 0; j < k; j += 2) acc += row[j];
    r_se[i] = float(acc);
  }
  EXPECT_TRUE(all_close(o1, r_mx));
  EXPECT_TRUE(all_close(o2, r_mn));
  EXPECT_TRUE(all_close(o3, r_pr));
  EXPECT_TRUE(all_close(o4, r_se));
}

TEST(ScheduleCorrectness, IntermediateStageInLocalScope) {
  const int n = 40;
  te::Tensor A = te::placeholder({n}, ir::kFloat32, "A");
  te::Tensor B = te::compute(
      {n}, [&](Var i) { return A(i) * 3.0f; }, "B");
  te::Tensor C = te::compute(
      {n}, [&](Var i) { return B(i) + A(i); }, "C");
  auto s = te::create_schedule({C});
  s[B].set_scope("local");
  auto f = build_host(s, {A, C});
  NDArray a = random_array({n}, 17), c = zeros({n});
  f(a, c);
  std::vector<float> ref(n);
  for (int i = 0; i < n; ++i) ref[i] = a.data<float>()[i] * 4.0f;
  EXPECT_TRUE(all_close(c, ref));
}

}  // namespace
}  // namespace kiln
