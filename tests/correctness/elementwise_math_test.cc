// Elementwise math, casts and the other dtypes (float16, int8, int32), each vectorized, against
// std:: references. Tolerances: float32 math within 1e-5 relative (2e-5 for tanh/pow, whose LLVM
// and libm versions may differ in the last bits); float16 within one half-precision ulp (1e-3).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "compiler/te/schedule.h"
#include "deploy/runtime/dtype.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using ir::Expr;
using ir::Var;
using runtime::NDArray;
using testing::all_close;
using testing::build_host;
using testing::random_array;
using testing::zeros;

constexpr int kN = 67;  // not a multiple of the vector width: exercises the tail guard

/// out[i] = f(A[i], B[i]) vectorized by 16, checked against ref.
void check_binary(const std::function<Expr(Expr, Expr)>& f,
                  const std::function<float(float, float)>& ref, float lo, float hi, double rtol) {
  te::Tensor A = te::placeholder({kN}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({kN}, ir::kFloat32, "B");
  te::Tensor C = te::compute(
      {kN}, [&](Var i) { return f(A(i), B(i)); }, "C");
  auto s = te::create_schedule({C});
  auto [o, in] = s[C].split(s[C].axis(0), 16);
  s[C].vectorize(in);
  NDArray a = random_array({kN}, 21, lo, hi), b = random_array({kN}, 22, lo, hi), c = zeros({kN});
  if (C->inputs().size() == 2) {
    build_host(s, {A, B, C})(a, b, c);
  } else {  // a unary function: B is not an argument
    build_host(s, {A, C})(a, c);
  }
  std::vector<float> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = ref(a.data<float>()[i], b.data<float>()[i]);
  EXPECT_TRUE(all_close(c, expected, rtol, 1e-6));
}

TEST(ElementwiseMath, Exp) {
  check_binary([](Expr a, Expr) { return ir::exp(a); }, [](float a, float) { return std::exp(a); },
               -5, 5, 1e-5);
}
TEST(ElementwiseMath, Log) {
  check_binary([](Expr a, Expr) { return ir::log(a); }, [](float a, float) { return std::log(a); },
               0.01f, 50, 1e-5);
}
TEST(ElementwiseMath, Sqrt) {
  check_binary([](Expr a, Expr) { return ir::sqrt(a); },
               [](float a, float) { return std::sqrt(a); }, 0, 100, 1e-6);
}
TEST(ElementwiseMath, Tanh) {
  check_binary([](Expr a, Expr) { return ir::tanh(a); },
               [](float a, float) { return std::tanh(a); }, -6, 6, 2e-5);
}
TEST(ElementwiseMath, Sigmoid) {
  check_binary([](Expr a, Expr) { return ir::sigmoid(a); },
               [](float a, float) { return 1.0f / (1.0f + std::exp(-a)); }, -8, 8, 2e-5);
}
TEST(ElementwiseMath, Pow) {
  check_binary([](Expr a, Expr b) { return ir::pow(a, b); },
               [](float a, float b) { return std::pow(a, b); }, 0.1f, 3, 2e-5);
}
TEST(ElementwiseMath, Abs) {
  check_binary([](Expr a, Expr) { return ir::abs(a); }, [](float a, float) { return std::fabs(a); },
               -3, 3, 0);
}
TEST(ElementwiseMath, Fma) {
  check_binary([](Expr a, Expr b) { return ir::fma(a, b, a); },
               [](float a, float b) { return std::fma(a, b, a); }, -3, 3, 1e-6);
}
TEST(ElementwiseMath, SelectMaxMin) {
  check_binary(
      [](Expr a, Expr b) { return ir::select(a > b, ir::max(a, 0.5f), ir::min(b, -0.25f)); },
      [](float a, float b) { return a > b ? std::max(a, 0.5f) : std::min(b, -0.25f); }, -1, 1, 0);
}
TEST(ElementwiseMath, DivideAndFloor) {
  check_binary([](Expr a, Expr b) { return ir::floor(a / b); },
               [](float a, float b) { return std::floor(a / b); }, 1, 9, 0);
}

TEST(Dtypes, Float16ComputeAndCast) {
  te::Tensor A = te::placeholder({kN}, ir::kFloat16, "A");
  te::Tensor B = te::compute(
      {kN}, [&](Var i) { return A(i) * ir::make_const(ir::kFloat16, 0.5) + A(i); }, "B");
  te::Tensor C = te::compute(
      {kN}, [&](Var i) { return ir::cast(ir::kFloat32, B(i)); }, "C");
  auto s = te::create_schedule({C});
  auto [o, in] = s[B].split(s[B].axis(0), 8);
  s[B].vectorize(in);
  auto fn = build_host(s, {A, C});
  NDArray a = NDArray::empty({kN}, runtime::kFloat16), c = zeros({kN});
  auto* ap = static_cast<_Float16*>(a.data());
  for (int i = 0; i < kN; ++i) ap[i] = static_cast<_Float16>(i * 0.25f - 8.0f);
  fn(a, c);
  std::vector<float> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = float(_Float16(float(ap[i]) * 0.5f) + ap[i]);
  EXPECT_TRUE(all_close(c, expected, 1e-3, 1e-3));
}

TEST(Dtypes, Int8ToInt32Accumulate) {
  const int m = 7, k = 35;
  te::Tensor A = te::placeholder({m, k}, ir::kInt8, "A");
  te::Tensor W = te::placeholder({k}, ir::kInt8, "W");
  ir::IterVar r = te::reduce_axis({0, k}, "r");
  te::Tensor C = te::compute(
      {m},
      [&](Var i) {
        return te::sum(ir::cast(ir::kInt32, A(i, r)) * ir::cast(ir::kInt32, W(r)), {r});
      },
      "C");
  auto s = te::create_schedule({C});
  auto fn = build_host(s, {A, W, C});
  NDArray a = NDArray::empty({m, k}, runtime::kInt8), w = NDArray::empty({k}, runtime::kInt8),
          c = NDArray::empty({m}, runtime::kInt32);
  for (int i = 0; i < m * k; ++i) a.data<int8_t>()[i] = int8_t((i * 37) % 255 - 127);
  for (int i = 0; i < k; ++i) w.data<int8_t>()[i] = int8_t((i * 11) % 200 - 100);
  fn(a, w, c);
  for (int i = 0; i < m; ++i) {
    int32_t acc = 0;
    for (int j = 0; j < k; ++j) acc += int32_t(a.data<int8_t>()[i * k + j]) * w.data<int8_t>()[j];
    EXPECT_EQ(c.data<int32_t>()[i], acc) << "row " << i;
  }
}

TEST(Dtypes, Int32FloorDivModOnNegatives) {
  const int n = 40;
  te::Tensor A = te::placeholder({n}, ir::kInt32, "A");
  te::Tensor C = te::compute(
      {n}, [&](Var i) { return ir::floordiv(A(i), 3) * 10 + ir::floormod(A(i), 3); }, "C");
  auto s = te::create_schedule({C});
  auto [o, in] = s[C].split(s[C].axis(0), 8);
  s[C].vectorize(in);
  auto fn = build_host(s, {A, C});
  NDArray a = NDArray::empty({n}, runtime::kInt32), c = NDArray::empty({n}, runtime::kInt32);
  for (int i = 0; i < n; ++i) a.data<int32_t>()[i] = i - 20;
  fn(a, c);
  for (int i = 0; i < n; ++i) {
    int v = i - 20, q = v / 3, r = v % 3;
    if (r != 0 && (r < 0)) {
      q -= 1;
      r += 3;
    }
    EXPECT_EQ(c.data<int32_t>()[i], q * 10 + r) << "value " << v;
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

/// Runs out[i] = f(in[i]) vectorized by 16 over `values` and returns the outputs.
std::vector<float> run_unary_vectorized(const std::function<ir::Expr(ir::Expr)>& f,
                                        const std::vector<float>& values) {
  const int n = static_cast<int>(values.size());
  te::Tensor A = te::placeholder({n}, ir::kFloat32, "A");
  te::Tensor C = te::compute(
      {n}, [&](ir::Var i) { return f(A(i)); }, "C");
  auto s = te::create_schedule({C});
  auto [o, in] = s[C].split(s[C].axis(0), 16);
  s[C].vectorize(in);
  auto a = runtime::NDArray::from_vector(values, {n});
  auto c = testing::zeros({n});
  testing::build_host(s, {A, C})(a, c);
  return c.to_vector<float>();
}

/// Max relative error of the polynomial math (float32, vectorized) against double-precision libm
/// on a dense grid: the Cephes approximations are good to a few ulp (2.5e-7 relative here).
TEST(FastMath, AccuracyOnDenseGrids) {
  struct Case {
    const char* name;
    std::function<ir::Expr(ir::Expr)> f;
    std::function<double(double)> ref;
    double lo, hi;
    bool log_grid;
  };
  std::vector<Case> cases = {
      {"exp", [](ir::Expr x) { return ir::exp(x); }, [](double x) { return std::exp(x); }, -87, 88,
       false},
      {"log", [](ir::Expr x) { return ir::log(x); }, [](double x) { return std::log(x); }, 1e-30,
       1e30, true},
      {"tanh", [](ir::Expr x) { return ir::tanh(x); }, [](double x) { return std::tanh(x); }, -10,
       10, false},
      {"sigmoid", [](ir::Expr x) { return ir::sigmoid(x); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -80, 80, false},
  };
  for (auto& c : cases) {
    std::vector<float> xs;
    for (int i = 0; i < 4096; ++i) {
      double t = i / 4095.0;
      xs.push_back(float(c.log_grid ? c.lo * std::pow(c.hi / c.lo, t) : c.lo + (c.hi - c.lo) * t));
    }
    std::vector<float> got = run_unary_vectorized(c.f, xs);
    double worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double ref = c.ref(xs[i]);
      double err = std::fabs(got[i] - ref) / std::max(std::fabs(ref), 1e-30);
      if (std::fabs(ref) < 1e-6) err = std::fabs(got[i] - ref);  // log near 1, tanh near 0
      worst = std::max(worst, err);
    }
    EXPECT_LT(worst, 2.5e-7) << c.name;
  }
}

TEST(FastMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {0.0f,  -0.0f,  1.0f, -1.0f, 100.0f, -100.0f,
                           88.5f, -87.0f, inf,  -inf,  nan};
  auto e = run_unary_vectorized([](ir::Expr x) { return ir::exp(x); }, xs);
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[4], inf);
  EXPECT_EQ(e[5], 0.0f);
  EXPECT_NEAR(e[6] / std::exp(88.5), 1.0, 1e-6);  // near the top of the range: still finite
  EXPECT_EQ(e[8], inf);
  EXPECT_EQ(e[9], 0.0f);
  EXPECT_TRUE(std::isnan(e[10]));
  auto l = run_unary_vectorized([](ir::Expr x) { return ir::log(x); }, xs);
  EXPECT_EQ(l[0], -inf);
  EXPECT_EQ(l[2], 0.0f);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_EQ(l[8], inf);
  EXPECT_TRUE(std::isnan(l[9]));
  EXPECT_TRUE(std::isnan(l[10]));
  auto t = run_unary_vectorized([](ir::Expr x) { return ir::tanh(x); }, xs);
  EXPECT_EQ(t[0], 0.0f);
  EXPECT_EQ(t[4], 1.0f);
  EXPECT_EQ(t[5], -1.0f);
  EXPECT_EQ(t[8], 1.0f);
  EXPECT_EQ(t[9], -1.0f);
  EXPECT_TRUE(std::isnan(t[10]));
  auto s = run_unary_vectorized([](ir::Expr x) { return ir::sigmoid(x); }, xs);
  EXPECT_EQ(s[0], 0.5f);
  EXPECT_EQ(s[4], 1.0f);
  EXPECT_EQ(s[5], 0.0f);
  EXPECT_EQ(s[8], 1.0f);
  EXPECT_EQ(s[9], 0.0f);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The masked-off lanes of a vectorized tail read 0 from memory; integer division by them must
// not trap (67 elements in vectors of 16 leave 13 dead lanes).
TEST(Dtypes, IntegerDivisionInAVectorizedTailDoesNotTrap) {
  te::Tensor A = te::placeholder({kN}, ir::kInt32, "A");
  te::Tensor B = te::placeholder({kN}, ir::kInt32, "B");
  te::Tensor C = te::compute(
      {kN}, [&](Var i) { return ir::floordiv(A(i), B(i)) + A(i) / B(i); }, "C");
  auto s = te::create_schedule({C});
  auto [o, in] = s[C].split(s[C].axis(0), 16);
  s[C].vectorize(in);
  NDArray a = NDArray::empty({kN}, runtime::kInt32), b = NDArray::empty({kN}, runtime::kInt32),
          c = NDArray::empty({kN}, runtime::kInt32);
  for (int i = 0; i < kN; ++i) {
    a.data<int32_t>()[i] = 3 * i - 50;
    b.data<int32_t>()[i] = (i % 5) + 1;
  }
  build_host(s, {A, B, C})(a, b, c);
  for (int i = 0; i < kN; ++i) {
    int x = 3 * i - 50, y = (i % 5) + 1;
    int fq = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    EXPECT_EQ(c.data<int32_t>()[i], fq + x / y) << i;
  }
}

}  // namespace
}  // namespace kiln
