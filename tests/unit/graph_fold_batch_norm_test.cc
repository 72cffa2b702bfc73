// fold_batch_norm: the folded graph computes what conv/dense + batch norm computed, by naive
// reference implementations on random data.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "compiler/graph/fold_batch_norm.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

int64_t product(const Shape& s) {
  int64_t p = 1;
  for (int64_t d : s) p *= d;
  return p;
}

ValueId add_const(Graph& g, const std::string& name, const std::vector<float>& data, Shape shape) {
  return g.add_constant(name, NDArray::from_vector<float>(data, std::move(shape)));
}

std::vector<double> data_of(const Graph& g, ValueId v) {
  const std::vector<float> f = g.value(v).data->to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

/// Naive NCHW conv with groups, strides, dilations and pads [top, left, bottom, right].
std::vector<double> naive_conv(const std::vector<double>& x, const Shape& xs,
                               const std::vector<double>& w, const Shape& ws,
                               const std::vector<double>* bias, int64_t group, int64_t stride,
                               int64_t pad, int64_t dil, Shape* out_shape) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const int64_t m = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  const int64_t oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
  const int64_t ow = (wd + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
  EXPECT_EQ(cg * group, c);
  *out_shape = {n, m, oh, ow};
  std::vector<double> y(static_cast<size_t>(n * m * oh * ow), 0.0);
  const int64_t m_per_group = m / group;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < m; ++o) {
      const int64_t gi = o / m_per_group;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias ? (*bias)[static_cast<size_t>(o)] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci) {
            for (int64_t r = 0; r < kh; ++r) {
              for (int64_t s = 0; s < kw; ++s) {
                const int64_t yy = i * stride - pad + r * dil, xx = j * stride - pad + s * dil;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                const int64_t cin = gi * cg + ci;
                acc += x[static_cast<size_t>(((b * c + cin) * h + yy) * wd + xx)] *
                       w[static_cast<size_t>(((o * cg + ci) * kh + r) * kw + s)];
              }
            }
          }
          y[static_cast<size_t>(((b * m + o) * oh + i) * ow + j)] = acc;
        }
      }
    }
  }
  return y;
}

/// Inference batch norm over channel dim 1 of an [N, C, ...] tensor.
std::vector<double> naive_bn(std::vector<double> x, const Shape& xs,
                             const std::vector<float>& gamma, const std::vector<float>& beta,
                             const std::vector<float>& mean, const std::vector<float>& var,
                             double eps) {
  const int64_t c = xs[1], inner = product(xs) / xs[0] / c;
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t ch = static_cast<size_t>((static_cast<int64_t>(i) / inner) % c);
    x[i] = (x[i] - mean[ch]) * gamma[ch] / std::sqrt(static_cast<double>(var[ch]) + eps) + beta[ch];
  }
  return x;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  double max_abs = 0.0;
  for (double w : want) max_abs = std::max(max_abs, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, max_abs)) << "at " << i;
  }
}

struct BnConsts {
  std::vector<float> gamma, beta, mean, var;
  std::vector<ValueId> ids;
  BnConsts(Graph& g, int64_t c, std::mt19937& rng) {
    const size_t n = static_cast<size_t>(c);
    gamma = random_vector(n, rng, 0.5f, 2.0f);
    beta = random_vector(n, rng);
    mean = random_vector(n, rng);
    var = random_vector(n, rng, 0.1f, 3.0f);
    ids = {add_const(g, "gamma", gamma, {c}), add_const(g, "beta", beta, {c}),
           add_const(g, "mean", mean, {c}), add_const(g, "var", var, {c})};
  }
};

void conv_bn_case(int64_t group, bool with_bias) {
  std::mt19937 rng(42 + static_cast<unsigned>(group) * 2 + (with_bias ? 1 : 0));
  const Shape xs = {2, 4, 6, 5}, ws = {6, 4 / group, 3, 3};
  Graph g;
  const ValueId x = g.add_input("x", kFloat32, xs);
  const std::vector<float> w = random_vector(static_cast<size_t>(product(ws)), rng);
  const std::vector<float> bias = random_vector(6, rng);
  std::vector<ValueId> in = {x, add_const(g, "w", w, ws)};
  if (with_bias) in.push_back(add_const(g, "b", bias, {6}));
  const ValueId c = g.add_op("Conv", "conv", in,
                             {{"group", group},
                              {"pads", Shape{1, 1, 1, 1}},
                              {"strides", Shape{2, 2}},
                              {"dilations", Shape{1, 1}},
                              {"kernel_shape", Shape{3, 3}}},
                             kFloat32, {2, 6, 3, 3});
  BnConsts bn(g, 6, rng);
  const ValueId y =
      g.add_op("BatchNormalization", "bn", {c, bn.ids[0], bn.ids[1], bn.ids[2], bn.ids[3]},
               {{"epsilon", 1e-3f}}, kFloat32, {2, 6, 3, 3});
  const ValueId out = g.add_op("Relu", "relu", {y}, {}, kFloat32, {2, 6, 3, 3});
  g.add_output(out);
  g.verify();

  const std::vector<float> xf = random_vector(static_cast<size_t>(product(xs)), rng);
  const std::vector<double> xd(xf.begin(), xf.end()), wd(w.begin(), w.end()),
      bd(bias.begin(), bias.end());
  Shape ys;
  const std::vector<double> want =
      naive_bn(naive_conv(xd, xs, wd, ws, with_bias ? &bd : nullptr, group, 2, 1, 1, &ys), ys,
               bn.gamma, bn.beta, bn.mean, bn.var, 1e-3);

  EXPECT_EQ(fold_batch_norm(g), 1u);
  g.verify();
  ASSERT_EQ(g.nodes().size(), 2u);
  const Node& conv = g.nodes()[0];
  EXPECT_EQ(conv.op, "Conv");
  EXPECT_EQ(conv.outputs[0], y);  // takes over the batch norm's output
  EXPECT_EQ(g.nodes()[1].inputs[0], y);
  ASSERT_EQ(conv.inputs.size(), 3u);
  EXPECT_EQ(g.value(conv.inputs[1]).shape, ws);
  EXPECT_EQ(g.value(conv.inputs[2]).shape, Shape{6});
  const std::vector<double> w2 = data_of(g, conv.inputs[1]), b2 = data_of(g, conv.inputs[2]);
  Shape ys2;
  expect_close(naive_conv(xd, xs, w2, ws, &b2, group, 2, 1, 1, &ys2), want);
  EXPECT_EQ(ys2, ys);
}

TEST(FoldBatchNormTest, ConvWithBias) { conv_bn_case(1, true); }
TEST(FoldBatchNormTest, ConvWithoutBias) { conv_bn_case(1, false); }
TEST(FoldBatchNormTest, GroupedConv) { conv_bn_case(2, true); }

/// Y = A * B (+ C) with transB, alpha, beta as Gemm does; C broadcast [n] or [m, n].
std::vector<double> naive_gemm(const std::vector<float>& a, const std::vector<float>& b,
                               const std::vector<float>* c, bool c_full, int64_t m, int64_t k,
                               int64_t n, bool trans_b, double alpha, double beta) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t l = 0; l < k; ++l) {
        const double bv =
            trans_b ? b[static_cast<size_t>(j * k + l)] : b[static_cast<size_t>(l * n + j)];
        acc += static_cast<double>(a[static_cast<size_t>(i * k + l)]) * bv;
      }
      double cv = 0.0;
      if (c) cv = (*c)[static_cast<size_t>(c_full ? i * n + j : j)];
      y[static_cast<size_t>(i * n + j)] = alpha * acc + beta * cv;
    }
  }
  return y;
}

void dense_bn_case(const std::string& op, bool trans_b, bool c_full) {
  std::mt19937 rng(7);
  const int64_t m = 3, k = 5, n = 4;
  Graph g;
  const ValueId a = g.add_input("a", kFloat32, {m, k});
  const std::vector<float> b = random_vector(static_cast<size_t>(k * n), rng);
  const std::vector<float> c = random_vector(static_cast<size_t>(c_full ? m * n : n), rng);
  const Shape bs = trans_b ? Shape{n, k} : Shape{k, n};
  std::vector<ValueId> in = {a, add_const(g, "B", b, bs)};
  Attrs attrs;
  const double alpha = op == "Gemm" ? 0.5 : 1.0, beta = op == "Gemm" ? 2.0 : 1.0;
  if (op == "Gemm") {
    in.push_back(add_const(g, "C", c, c_full ? Shape{m, n} : Shape{n}));
    attrs = {{"alpha", 0.5f}, {"beta", 2.0f}, {"transA", int64_t{0}}, {"transB", int64_t{trans_b}}};
  }
  const ValueId d = g.add_op(op, "dense", in, attrs, kFloat32, {m, n});
  BnConsts bn(g, n, rng);
  const ValueId y =
      g.add_op("BatchNormalization", "bn", {d, bn.ids[0], bn.ids[1], bn.ids[2], bn.ids[3]},
               {{"epsilon", 1e-5f}}, kFloat32, {m, n});
  g.add_output(y);
  g.verify();
  const std::vector<float> af = random_vector(static_cast<size_t>(m * k), rng);
  const std::vector<double> want = naive_bn(
      naive_gemm(af, b, op == "Gemm" ? &c : nullptr, c_full, m, k, n, trans_b, alpha, beta), {m, n},
      bn.gamma, bn.beta, bn.mean, bn.var, 1e-5);

  EXPECT_EQ(fold_batch_norm(g), 1u);
  g.verify();
  ASSERT_EQ(g.nodes().size(), 1u);
  const Node& gemm = g.nodes()[0];
  EXPECT_EQ(gemm.op, "Gemm");
  EXPECT_EQ(gemm.outputs[0], y);
  EXPECT_EQ(gemm.f("beta"), 1.0f);
  const std::vector<float> b2 = g.value(gemm.inputs[1]).data->to_vector<float>();
  const std::vector<float> c2 = g.value(gemm.inputs[2]).data->to_vector<float>();
  EXPECT_EQ(g.value(gemm.inputs[2]).shape, (c_full ? Shape{m, n} : Shape{n}));
  expect_close(
      naive_gemm(af, b2, &c2, c_full, m, k, n, gemm.i("transB") != 0, gemm.f("alpha"), 1.0), want);
}

TEST(FoldBatchNormTest, Gemm) { dense_bn_case("Gemm", false, false); }
TEST(FoldBatchNormTest, GemmTransposedFullBias) { dense_bn_case("Gemm", true, true); }
TEST(FoldBatchNormTest, MatMulBecomesGemm) { dense_bn_case("MatMul", false, false); }

TEST(FoldBatchNormTest, LeavesWhatItCannotFold) {
  std::mt19937 rng(1);
  Graph g;
  const ValueId x = g.add_input("x", kFloat32, {1, 2, 4, 4});
  const ValueId w = add_const(g, "w", random_vector(2 * 2 * 9, rng), {2, 2, 3, 3});
  const Attrs conv_attrs = {{"group", int64_t{1}},
                            {"pads", Shape{1, 1, 1, 1}},
                            {"strides", Shape{1, 1}},
                            {"dilations", Shape{1, 1}},
                            {"kernel_shape", Shape{3, 3}}};
  const ValueId c = g.add_op("Conv", "conv", {x, w}, conv_attrs, kFloat32, {1, 2, 4, 4});
  BnConsts bn(g, 2, rng);
  // 1. The conv output has a second reader.
  const ValueId y1 =
      g.add_op("BatchNormalization", "bn1", {c, bn.ids[0], bn.ids[1], bn.ids[2], bn.ids[3]},
               {{"epsilon", 1e-5f}}, kFloat32, {1, 2, 4, 4});
  const ValueId r = g.add_op("Relu", "relu", {c}, {}, kFloat32, {1, 2, 4, 4});
  // 2. A batch norm whose mean is not a constant.
  const ValueId mean = g.add_input("mean", kFloat32, {2});
  const ValueId c2 = g.add_op("Conv", "conv2", {r, w}, conv_attrs, kFloat32, {1, 2, 4, 4});
  const ValueId y2 =
      g.add_op("BatchNormalization", "bn2", {c2, bn.ids[0], bn.ids[1], mean, bn.ids[3]},
               {{"epsilon", 1e-5f}}, kFloat32, {1, 2, 4, 4});
  // 3. A batch norm after a non-conv op.
  const ValueId y3 =
      g.add_op("BatchNormalization", "bn3", {r, bn.ids[0], bn.ids[1], bn.ids[2], bn.ids[3]},
               {{"epsilon", 1e-5f}}, kFloat32, {1, 2, 4, 4});
  g.add_output(y1);
  g.add_output(y2);
  g.add_output(y3);
  g.verify();
  const std::string before = g.to_string();
  EXPECT_EQ(fold_batch_norm(g), 0u);
  EXPECT_EQ(g.to_string(), before);
}

TEST(FoldBatchNormTest, GraphOutputKeepsItsValue) {
  std::mt19937 rng(3);
  Graph g;
  const ValueId x = g.add_input("x", kFloat32, {1, 2, 4, 4});
  const ValueId w = add_const(g, "w", random_vector(2 * 2, rng), {2, 2, 1, 1});
  const ValueId c = g.add_op("Conv", "conv", {x, w},
                             {{"group", int64_t{1}},
                              {"pads", Shape{0, 0, 0, 0}},
                              {"strides", Shape{1, 1}},
                              {"dilations", Shape{1, 1}},
                              {"kernel_shape", Shape{1, 1}}},
                             kFloat32, {1, 2, 4, 4});
  BnConsts bn(g, 2, rng);
  const ValueId y =
      g.add_op("BatchNormalization", "bn", {c, bn.ids[0], bn.ids[1], bn.ids[2], bn.ids[3]},
               {{"epsilon", 1e-5f}}, kFloat32, {1, 2, 4, 4});
  g.add_output(y);
  EXPECT_EQ(fold_batch_norm(g), 1u);
  g.verify();
  EXPECT_EQ(g.outputs(), std::vector<ValueId>{y});
  EXPECT_EQ(g.nodes()[0].outputs[0], y);
  EXPECT_EQ(g.value(g.nodes()[0].inputs[1]).name, "w.bn_folded");
}

}  // namespace
}  // namespace kiln::graph
