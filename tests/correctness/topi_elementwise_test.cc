// The elementwise operators of topi, scheduled with the injective x86 schedule, against plain C++
// loops: unary math and activations, casts, broadcasting binary operators (scalar vs tensor,
// [3, 1, 5] vs [4, 5], ...), fused chains with inlined producers, and shape errors. Tolerance:
// 1e-5 relative + 1e-6 absolute.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "compiler/topi/conv2d.h"
#include "compiler/topi/elementwise.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using ir::Expr;
using runtime::NDArray;
using testing::all_close;
using testing::build_host;
using testing::numel;
using testing::random_array;
using testing::to_exprs;
using testing::zeros;

using UnaryOp = std::function<te::Tensor(const te::Tensor&)>;

void check_unary(const UnaryOp& op, const std::function<float(float)>& ref,
                 std::vector<int64_t> shape, float lo, float hi) {
  te::Tensor x = te::placeholder(to_exprs(shape), ir::kFloat32, "x");
  te::Tensor y = op(x);
  te::Schedule s = te::create_schedule({y});
  topi::schedule_injective_x86(s, y);
  auto f = build_host(s, {x, y});
  NDArray a = random_array(shape, 11, lo, hi), out = zeros(shape);
  f(a, out);
  std::vector<float> expected(numel(shape));
  for (int64_t i = 0; i < numel(shape); ++i) expected[i] = ref(a.data<float>()[i]);
  EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6)) << y->name();
}

const std::vector<std::vector<int64_t>> kUnaryShapes = {{1},       {7},        {67},
                                                        {3, 5, 7}, {130, 131}, {2, 48}};

TEST(TopiElementwise, Activations) {
  for (const auto& shape : kUnaryShapes) {
    check_unary([](const te::Tensor& x) { return topi::relu(x); },
                [](float v) { return std::max(v, 0.0f); }, shape, -2, 2);
    check_unary([](const te::Tensor& x) { return topi::leaky_relu(x, 0.1); },
                [](float v) { return v < 0 ? v * 0.1f : v; }, shape, -2, 2);
    check_unary([](const te::Tensor& x) { return topi::clip(x, -0.5, 0.25); },
                [](float v) { return std::min(std::max(v, -0.5f), 0.25f); }, shape, -2, 2);
    check_unary([](const te::Tensor& x) { return topi::sigmoid(x); },
                [](float v) { return 1.0f / (1.0f + std::exp(-v)); }, shape, -8, 8);
  }
}

TEST(TopiElementwise, Math) {
  for (const auto& shape : kUnaryShapes) {
    check_unary([](const te::Tensor& x) { return topi::tanh(x); },
                [](float v) { return std::tanh(v); }, shape, -5, 5);
    check_unary([](const te::Tensor& x) { return topi::exp(x); },
                [](float v) { return std::exp(v); }, shape, -5, 5);
    check_unary([](const te::Tensor& x) { return topi::log(x); },
                [](float v) { return std::log(v); }, shape, 0.01f, 50);
    check_unary([](const te::Tensor& x) { return topi::sqrt(x); },
                [](float v) { return std::sqrt(v); }, shape, 0, 100);
    check_unary([](const te::Tensor& x) { return topi::abs(x); },
                [](float v) { return std::fabs(v); }, shape, -3, 3);
    check_unary([](const te::Tensor& x) { return topi::neg(x); }, [](float v) { return -v; }, shape,
                -3, 3);
  }
}

TEST(TopiElementwise, CastFloatToIntAndBack) {
  te::Tensor x = te::placeholder({37}, ir::kFloat32, "x");
  te::Tensor i = topi::cast(x, ir::kInt32, "to_int");
  te::Tensor y = topi::cast(i, ir::kFloat32, "to_float");
  auto s = topi::schedule_injective_x86({y});
  auto f = build_host(s, {x, y});
  NDArray a = random_array({37}, 3, -50, 50), out = zeros({37});
  f(a, out);
  std::vector<float> expected(37);
  for (int k = 0; k < 37; ++k) expected[k] = float(int32_t(a.data<float>()[k]));
  EXPECT_TRUE(all_close(out, expected, 0, 0));

  te::Tensor yi = topi::cast(x, ir::kInt32, "yi");
  te::Schedule s2 = te::create_schedule({yi});
  topi::schedule_injective_x86(s2, yi);
  NDArray outi = zeros({37}, runtime::kInt32);
  build_host(s2, {x, yi})(a, outi);
  for (int k = 0; k < 37; ++k) EXPECT_EQ(outi.data<int32_t>()[k], int32_t(a.data<float>()[k]));
}

using BinaryOp = std::function<te::Tensor(const te::Tensor&, const te::Tensor&)>;
using BinaryRef = std::function<float(float, float)>;

/// Broadcast reference: the flat index of the output point in an operand of shape `s`.
int64_t operand_offset(const std::vector<int64_t>& out_shape, int64_t flat,
                       const std::vector<int64_t>& s) {
  std::vector<int64_t> idx(out_shape.size());
  for (int64_t d = int64_t(out_shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % out_shape[d];
    flat /= out_shape[d];
  }
  int64_t off = 0;
  const size_t lead = out_shape.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

void check_binary(const BinaryOp& op, const BinaryRef& ref, const std::vector<int64_t>& sa,
                  const std::vector<int64_t>& sb, const std::vector<int64_t>& so, float lo = -2,
                  float hi = 2) {
  te::Tensor a = te::placeholder(to_exprs(sa), ir::kFloat32, "a");
  te::Tensor b = te::placeholder(to_exprs(sb), ir::kFloat32, "b");
  te::Tensor c = op(a, b);
  ASSERT_EQ(c.ndim(), so.size());
  for (size_t d = 0; d < so.size(); ++d) EXPECT_EQ(*ir::as_const_int(c->shape()[d]), so[d]);
  te::Schedule s = te::create_schedule({c});
  topi::schedule_injective_x86(s, c);
  auto f = build_host(s, {a, b, c});
  NDArray x = random_array(sa, 5, lo, hi), y = random_array(sb, 6, lo, hi), out = zeros(so);
  f(x, y, out);
  std::vector<float> expected(numel(so));
  for (int64_t i = 0; i < numel(so); ++i) {
    expected[i] =
        ref(x.data<float>()[operand_offset(so, i, sa)], y.data<float>()[operand_offset(so, i, sb)]);
  }
  EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6)) << c->name();
}

struct ShapeCase {
  std::vector<int64_t> a, b, out;
};
const std::vector<ShapeCase> kBroadcastCases = {
    {{67}, {67}, {67}},              // same shape, odd size
    {{1}, {3, 4}, {3, 4}},           // scalar vs tensor
    {{5, 7}, {1}, {5, 7}},           // tensor vs scalar
    {{3, 1, 5}, {4, 5}, {3, 4, 5}},  // both sides stretch
    {{4, 1}, {1, 33}, {4, 33}},      // outer product
    {{2, 3, 1, 17}, {3, 9, 1}, {2, 3, 9, 17}},
    {{130, 131}, {131}, {130, 131}},    // big enough to run in parallel
    {{4, 1, 32}, {3, 32}, {4, 3, 32}},  // rows a multiple of the vector width
    {{70, 256}, {70, 1}, {70, 256}},    // the same, in parallel
};

TEST(TopiElementwise, BroadcastingBinaryOps) {
  for (const auto& c : kBroadcastCases) {
    check_binary([](auto& a, auto& b) { return topi::add(a, b); },
                 [](float x, float y) { return x + y; }, c.a, c.b, c.out);
    check_binary([](auto& a, auto& b) { return topi::sub(a, b); },
                 [](float x, float y) { return x - y; }, c.a, c.b, c.out);
    check_binary([](auto& a, auto& b) { return topi::mul(a, b); },
                 [](float x, float y) { return x * y; }, c.a, c.b, c.out);
    check_binary([](auto& a, auto& b) { return topi::maximum(a, b); },
                 [](float x, float y) { return std::max(x, y); }, c.a, c.b, c.out);
    check_binary([](auto& a, auto& b) { return topi::minimum(a, b); },
                 [](float x, float y) { return std::min(x, y); }, c.a, c.b, c.out);
  }
}

TEST(TopiElementwise, DivAndPow) {
  for (const auto& c : kBroadcastCases) {
    check_binary([](auto& a, auto& b) { return topi::div(a, b); },
                 [](float x, float y) { return x / y; }, c.a, c.b, c.out, 0.5f, 3.0f);
    check_binary([](auto& a, auto& b) { return topi::pow(a, b); },
                 [](float x, float y) { return std::pow(x, y); }, c.a, c.b, c.out, 0.5f, 3.0f);
  }
}

TEST(TopiElementwise, IntegerDivTruncatesAndBroadcasts) {
  te::Tensor a = te::placeholder({3, 19}, ir::kInt32, "a");
  te::Tensor b = te::placeholder({19}, ir::kInt32, "b");
  te::Tensor q = topi::div(a, b);
  te::Tensor m = topi::maximum(q, b, "m");
  te::Schedule s = te::create_schedule({m});
  s[q].compute_inline();
  topi::schedule_injective_x86(s, m);
  std::vector<int32_t> av(57), bv(19);
  for (int i = 0; i < 57; ++i) av[i] = (i * 37) % 101 - 50;
  for (int i = 0; i < 19; ++i) bv[i] = (i % 2 ? 1 : -1) * (i % 7 + 1);
  bv[5] = 0;  // x / 0 is defined as x
  NDArray x = NDArray::from_vector(av, {3, 19}), y = NDArray::from_vector(bv, {19});
  NDArray out = zeros({3, 19}, runtime::kInt32);
  build_host(s, {a, b, m})(x, y, out);
  for (int i = 0; i < 57; ++i)
    EXPECT_EQ(out.data<int32_t>()[i], std::max(bv[i % 19] ? av[i] / bv[i % 19] : av[i], bv[i % 19]))
        << i;
}

/// `out`'s schedule with the stages `inlined` inlined and schedule_injective_x86 on `out`.
te::Schedule injective_chain(const std::vector<te::Tensor>& inlined, const te::Tensor& out) {
  te::Schedule s = te::create_schedule({out});
  for (const te::Tensor& t : inlined) s[t].compute_inline();
  topi::schedule_injective_x86(s, out);
  return s;
}

TEST(TopiElementwise, FusedChainWithInlinedProducers) {
  // relu(a * b + c) - both threads counts, broadcasting inside the chain.
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    te::Tensor a = te::placeholder({3, 1, 129}, ir::kFloat32, "a");
    te::Tensor b = te::placeholder({50, 129}, ir::kFloat32, "b");
    te::Tensor c = te::placeholder({1}, ir::kFloat32, "c");
    te::Tensor m = topi::mul(a, b);
    te::Tensor ad = topi::add(m, c);
    te::Tensor r = topi::relu(ad);
    auto f = build_host(injective_chain({m, ad}, r), {a, b, c, r});
    NDArray x = random_array({3, 1, 129}, 1), y = random_array({50, 129}, 2),
            z = random_array({1}, 3);
    NDArray out = zeros({3, 50, 129});
    f(x, y, z, out);
    std::vector<float> expected(3 * 50 * 129);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 50; ++j)
        for (int k = 0; k < 129; ++k) {
          float v =
              x.data<float>()[i * 129 + k] * y.data<float>()[j * 129 + k] + z.data<float>()[0];
          expected[(i * 50 + j) * 129 + k] = std::max(v, 0.0f);
        }
    EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6)) << "threads=" << threads;
  }
  runtime::set_num_threads(0);
}

// A chain that writes a blocked input out channel-major (NCHW16c to NCHW, plus a residual in NCHW)
// reads each input line for 16 channels in turn: tiles of 16 channels by runs of the row, the
// vectors along the row (56: three whole and a partial one), 40 channels (a partial tile).
TEST(TopiElementwise, TransposingChainTilesTheChannels) {
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    const int64_t c = 40, h = 3, w = 56;
    te::Tensor xb = te::placeholder({1, 3, h, w, 16}, ir::kFloat32, "xb");
    te::Tensor r = te::placeholder({1, c, h, w}, ir::kFloat32, "r");
    te::Tensor x = topi::nchwc_to_nchw(xb, c);
    te::Tensor ad = topi::add(x, r);
    te::Tensor y = topi::relu(ad);
    te::Schedule s = injective_chain({x, ad}, y);
    // The parallel tiles, 16 channels, the vectors of a run, the lanes.
    EXPECT_EQ(s[y]->leaf_iter_vars.size(), 4u);
    auto f = build_host(s, {xb, r, y});
    NDArray a = random_array({1, 3, h, w, 16}, 5), b = random_array({1, c, h, w}, 6);
    NDArray out = zeros({1, c, h, w});
    f(a, b, out);
    std::vector<float> expected(c * h * w);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          const float v = a.data<float>()[((ch / 16 * h + i) * w + j) * 16 + ch % 16] +
                          b.data<float>()[(ch * h + i) * w + j];
          expected[(ch * h + i) * w + j] = std::max(v, 0.0f);
        }
    EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6)) << "threads=" << threads;
  }
  runtime::set_num_threads(0);
}

TEST(TopiElementwise, WholeScheduleInlinesTheChain) {
  te::Tensor a = te::placeholder({5, 7}, ir::kFloat32, "a");
  te::Tensor y = topi::tanh(topi::neg(topi::exp(a)));
  auto s = topi::schedule_injective_x86({y});
  for (const te::Stage& st : s->stages) {
    if (!st->is_placeholder() && !st->is_output) {
      EXPECT_EQ(st->attach_type, te::AttachType::kInline);
    }
  }
  NDArray x = random_array({5, 7}, 4), out = zeros({5, 7});
  build_host(s, {a, y})(x, out);
  std::vector<float> expected(35);
  for (int i = 0; i < 35; ++i) expected[i] = std::tanh(-std::exp(x.data<float>()[i]));
  EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6));
}

TEST(TopiElementwise, SymbolicShape) {
  Expr n = te::var("n");
  te::Tensor a = te::placeholder({n, 3}, ir::kFloat32, "a");
  te::Tensor b = te::placeholder({3}, ir::kFloat32, "b");
  te::Tensor c = topi::add(a, b);
  te::Schedule s = te::create_schedule({c});
  topi::schedule_injective_x86(s, c);
  auto f = build_host(s, {a, b, c});
  for (int64_t rows : {1, 9, 6000}) {
    NDArray x = random_array({rows, 3}, 7), y = random_array({3}, 8), out = zeros({rows, 3});
    f(x, y, out);
    std::vector<float> expected(rows * 3);
    for (int64_t i = 0; i < rows * 3; ++i)
      expected[i] = x.data<float>()[i] + y.data<float>()[i % 3];
    EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6)) << rows;
  }
}

TEST(TopiElementwiseErrors, IncompatibleShapesNameBoth) {
  te::Tensor a = te::placeholder({3, 4}, ir::kFloat32, "a");
  te::Tensor b = te::placeholder({5}, ir::kFloat32, "b");
  EXPECT_ERROR_CONTAINS(topi::add(a, b), "add: shapes [3, 4] and [5] cannot be broadcast");
  te::Tensor c = te::placeholder({2, 3, 1}, ir::kFloat32, "c");
  te::Tensor d = te::placeholder({4, 2}, ir::kFloat32, "d");
  EXPECT_ERROR_CONTAINS(topi::mul(c, d), "[2, 3, 1] and [4, 2]");
}

TEST(TopiElementwiseErrors, DtypesAndArguments) {
  te::Tensor a = te::placeholder({3}, ir::kFloat32, "a");
  te::Tensor i = te::placeholder({3}, ir::kInt32, "i");
  EXPECT_ERROR_CONTAINS(topi::add(a, i), "different dtypes");
  EXPECT_ERROR_CONTAINS(topi::exp(i), "exp: 'i' must be a floating-point tensor");
  EXPECT_ERROR_CONTAINS(topi::clip(a, 1.0, -1.0), "clip: min 1 is greater than max -1");
}

}  // namespace
}  // namespace kiln
