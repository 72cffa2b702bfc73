// topi::qconv2d_nchw (the QConv contract, compiler/topi/qconv2d.h) built with its x86 schedule and
// compared bit for bit with a naive int32 loop nest: random shapes with groups, depthwise, stride
// 2, dilation, asymmetric padding, relu on and off, shifts of 0 and up to 31 per channel, biases
// that make accumulators negative; and an elementwise epilogue (dequantization) on the tile.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "compiler/topi/elementwise.h"
#include "compiler/topi/qconv2d.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using testing::build_host;
using topi::Ints2;
using topi::Ints4;

struct Case {
  int n, c, h, w, o, kh, kw;
  Ints2 stride;
  Ints4 pad;
  Ints2 dilation;
  int groups;
  bool relu;
};

int out_dim(int in, int k, int s, int p0, int p1, int d) {
  return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

/// The contract, literally: int32 sums (wrapping), an arithmetic shift, the clip.
std::vector<int8_t> naive_qconv(const Case& p, const std::vector<int8_t>& x,
                                const std::vector<int8_t>& wt, const std::vector<int32_t>& bias,
                                const std::vector<int32_t>& shift) {
  const int oh = out_dim(p.h, p.kh, p.stride[0], p.pad[0], p.pad[2], p.dilation[0]);
  const int ow = out_dim(p.w, p.kw, p.stride[1], p.pad[1], p.pad[3], p.dilation[1]);
  const int cg = p.c / p.groups, og = p.o / p.groups;
  std::vector<int8_t> out(size_t(p.n) * p.o * oh * ow);
  for (int n = 0; n < p.n; ++n)
    for (int f = 0; f < p.o; ++f)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx) {
          uint32_t acc = static_cast<uint32_t>(bias[f]);  // wrapping
          const int g = f / og;
          for (int c = 0; c < cg; ++c)
            for (int ky = 0; ky < p.kh; ++ky)
              for (int kx = 0; kx < p.kw; ++kx) {
                const int iy = y * p.stride[0] + ky * p.dilation[0] - p.pad[0];
                const int ix = xx * p.stride[1] + kx * p.dilation[1] - p.pad[1];
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                const int32_t a = x[((size_t(n) * p.c + g * cg + c) * p.h + iy) * p.w + ix];
                const int32_t b = wt[((size_t(f) * cg + c) * p.kh + ky) * p.kw + kx];
                acc += static_cast<uint32_t>(a * b);
              }
          const int32_t shifted = static_cast<int32_t>(acc) >> shift[f];  // arithmetic (C++20)
          const int32_t lo = p.relu ? 0 : -128;
          out[((size_t(n) * p.o + f) * oh + y) * ow + xx] =
              static_cast<int8_t>(std::min(std::max(shifted, lo), 127));
        }
  return out;
}

template <typename T>
std::vector<T> random_ints(size_t n, int lo, int hi, std::mt19937* rng) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (T& e : v) e = static_cast<T>(d(*rng));
  return v;
}

void check(const Case& p, uint32_t seed, bool dequantize_epilogue = false) {
  std::mt19937 rng(seed);
  const std::vector<int64_t> xs{p.n, p.c, p.h, p.w}, ws{p.o, p.c / p.groups, p.kh, p.kw};
  const std::vector<int8_t> x = random_ints<int8_t>(size_t(testing::numel(xs)), -128, 127, &rng);
  const std::vector<int8_t> w = random_ints<int8_t>(size_t(testing::numel(ws)), -128, 127, &rng);
  // Biases large enough to make many accumulators negative; shifts 0, small and the extremes.
  std::vector<int32_t> bias = random_ints<int32_t>(size_t(p.o), -20000, 20000, &rng);
  std::vector<int32_t> shift = random_ints<int32_t>(size_t(p.o), 0, 12, &rng);
  shift[0] = 0;
  if (p.o > 1) shift[1] = 31;
  if (p.o > 2) bias[2] = INT32_MIN + 5;
  const std::vector<int8_t> ref = naive_qconv(p, x, w, bias, shift);

  te::Tensor xt = te::placeholder(testing::to_exprs(xs), ir::kInt8, "x");
  te::Tensor wt = te::placeholder(testing::to_exprs(ws), ir::kInt8, "w");
  te::Tensor bt = te::placeholder({p.o}, ir::kInt32, "bias");
  te::Tensor st = te::placeholder({p.o}, ir::kInt32, "shift");
  topi::QConv2d q =
      topi::qconv2d_nchw(xt, wt, bt, st, p.stride, p.pad, p.dilation, p.groups, p.relu);
  std::vector<int64_t> os;
  for (const auto& e : q.out->shape()) os.push_back(*ir::as_const_int(e));
  // With the epilogue: y = float(q) * 0.5, computed on the register tile.
  te::Tensor out = dequantize_epilogue
                       ? topi::elementwise(
                             q.out,
                             [](ir::Expr v) {
                               return ir::cast(ir::kFloat32, v) * ir::make_const(ir::kFloat32, 0.5);
                             },
                             "dq")
                       : q.out;
  te::Schedule s = te::create_schedule({out});
  topi::schedule_qconv2d_nchw_x86(s, q, out);
  runtime::Function f = build_host(s, {xt, wt, bt, st, out});
  NDArray xa = NDArray::from_vector(x, xs), wa = NDArray::from_vector(w, ws);
  NDArray ba = NDArray::from_vector(bias, {p.o}), sa = NDArray::from_vector(shift, {p.o});
  NDArray ya = testing::zeros(os, dequantize_epilogue ? runtime::kFloat32 : runtime::kInt8);
  f(xa, wa, ba, sa, ya);
  int64_t mismatches = 0, negative = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double got =
        dequantize_epilogue ? double(ya.data<float>()[i]) : double(ya.data<int8_t>()[i]);
    const double want = dequantize_epilogue ? ref[i] * 0.5 : ref[i];
    if (got != want && mismatches++ < 5) {
      ADD_FAILURE() << "element " << i << ": got " << got << ", want " << want;
    }
    negative += ref[i] < 0;
  }
  EXPECT_EQ(mismatches, 0) << "of " << ref.size();
  if (!p.relu) {
    EXPECT_GT(negative, 0) << "the case should produce negative outputs";
  }
}

TEST(TopiQConv2d, Stride1Pad1Relu) {
  check({1, 8, 10, 10, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true}, 1);
}

TEST(TopiQConv2d, Stride2AsymmetricPadNoRelu) {
  check({2, 5, 13, 11, 7, 3, 3, {2, 2}, {0, 1, 2, 1}, {1, 1}, 1, false}, 2);
}

TEST(TopiQConv2d, GroupsAndDilation) {
  check({1, 12, 12, 9, 8, 3, 3, {1, 2}, {2, 2, 2, 2}, {2, 2}, 4, false}, 3);
}

TEST(TopiQConv2d, Depthwise) {
  check({1, 16, 9, 9, 16, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16, true}, 4);
}

TEST(TopiQConv2d, OneByOneStride2) {
  check({1, 32, 8, 8, 24, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false}, 5);
}

TEST(TopiQConv2d, DequantizingEpilogueOnTheTile) {
  check({1, 8, 7, 7, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false}, 6,
        /*dequantize_epilogue=*/true);
}

}  // namespace
}  // namespace kiln
