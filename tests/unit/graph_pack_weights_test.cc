// pack_weights: which nodes it rewrites, the shapes, attributes and contents of the new constants,
// and the nodes it leaves alone. (The numerics of the packed kernels against the unpacked build
// are in tests/correctness/graph_pack_weights_build_test.cc.)
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "compiler/graph/pack_weights.h"
#include "compiler/topi/lstm.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

ValueId add_random(Graph& g, const std::string& name, Shape shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return g.add_constant(name, NDArray::from_vector<float>(v, std::move(shape)));
}

Attrs gemm_attrs(int64_t trans_a, int64_t trans_b) {
  return {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", trans_a}, {"transB", trans_b}};
}

/// Element [p, k, j] of a packing of B [K, N] (or [N, K] when trans_b) is B's column p * bn + j.
void expect_packed(const Graph& g, ValueId packed, ValueId orig, bool trans_b, int64_t bn) {
  const Value& pv = g.value(packed);
  const Value& ov = g.value(orig);
  const size_t r = ov.shape.size();
  const int64_t k = trans_b ? ov.shape[r - 1] : ov.shape[r - 2];
  const int64_t n = trans_b ? ov.shape[r - 2] : ov.shape[r - 1];
  ASSERT_TRUE(pv.is_constant());
  ASSERT_EQ(pv.shape, (Shape{(n + bn - 1) / bn, k, bn}));
  const float* p = pv.data->data<float>();
  const float* o = ov.data->data<float>();
  for (int64_t q = 0; q < pv.shape[0]; ++q) {
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < bn; ++j) {
        const int64_t col = q * bn + j;
        const float want = col >= n ? 0.0f : trans_b ? o[col * k + kk] : o[kk * n + col];
        ASSERT_EQ(p[(q * k + kk) * bn + j], want) << "[" << q << ", " << kk << ", " << j << "]";
      }
    }
  }
}

TEST(PackWeights, PanelWidthDividesN) {
  EXPECT_EQ(dense_panel_width(512), 64);
  EXPECT_EQ(dense_panel_width(10000), 80);
  // Nothing divides: whole vectors (40 would be half ones), the widest padding by a 32nd at most.
  EXPECT_EQ(dense_panel_width(1000), 64);
  EXPECT_EQ(dense_panel_width(5000), 64);
  EXPECT_EQ(dense_panel_width(18), 32);
  EXPECT_EQ(dense_panel_width(37), 48);
  EXPECT_EQ(dense_panel_width(12), 16);
  EXPECT_EQ(topi::lstm_panel_width(2600), 64);  // padded
  EXPECT_EQ(topi::lstm_panel_width(96), 32);
  EXPECT_EQ(topi::lstm_panel_width(20), 16);
}

TEST(PackWeights, GemmTransBAndNot) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 48});
  ValueId w1 = add_random(g, "w1", {40, 48}, 1);  // transB: [N, K], N = 40: a panel of 48
  ValueId b1 = add_random(g, "b1", {40}, 2);
  ValueId y1 = g.add_op("Gemm", "fc1", {x, w1, b1}, gemm_attrs(0, 1), kFloat32, {1, 40});
  ValueId w2 = add_random(g, "w2", {40, 18}, 3);  // [K, N], N = 18: a panel of 32
  ValueId y2 = g.add_op("Gemm", "fc2", {y1, w2}, gemm_attrs(0, 0), kFloat32, {1, 18});
  g.add_output(y2);
  EXPECT_EQ(pack_weights(g), 2u);
  g.verify();
  const Node& fc1 = g.nodes()[0];
  const Node& fc2 = g.nodes()[1];
  EXPECT_EQ(fc1.i("packed_bn"), 48);
  EXPECT_EQ(fc2.i("packed_bn"), 32);
  EXPECT_EQ(fc1.inputs[2], b1);  // the bias is left alone
  EXPECT_EQ(g.value(fc1.inputs[1]).name, "w1.packed");
  expect_packed(g, fc1.inputs[1], w1, true, 48);
  expect_packed(g, fc2.inputs[1], w2, false, 32);
  EXPECT_EQ(g.value(fc2.inputs[1]).shape, (Shape{1, 40, 32}));
  // Running it again changes nothing.
  EXPECT_EQ(pack_weights(g), 0u);
}

TEST(PackWeights, MatMulWithConstantMatrixAndNDInput) {
  Graph g;
  ValueId a = g.add_input("a", kFloat32, {5, 1, 24});
  ValueId b = add_random(g, "b", {24, 64}, 4);
  ValueId y = g.add_op("MatMul", "mm", {a, b}, {}, kFloat32, {5, 1, 64});
  g.add_output(y);
  EXPECT_EQ(pack_weights(g), 1u);
  const Node& mm = g.nodes()[0];
  EXPECT_EQ(mm.i("packed_bn"), 64);
  expect_packed(g, mm.inputs[1], b, false, 64);
}

TEST(PackWeights, LeavesOtherFormsAlone) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {8, 4});
  ValueId wv = g.add_input("w_var", kFloat32, {4, 16});  // not a constant
  ValueId y1 = g.add_op("Gemm", "var", {x, wv}, gemm_attrs(0, 0), kFloat32, {8, 16});
  ValueId w = add_random(g, "w", {8, 16}, 5);
  ValueId y2 = g.add_op("Gemm", "ta", {x, w}, gemm_attrs(1, 0), kFloat32, {4, 16});  // transA
  ValueId b3 = add_random(g, "b3", {2, 4, 16}, 6);  // a batch of matrices
  ValueId y3 = g.add_op("MatMul", "batched", {x, b3}, {}, kFloat32, {2, 8, 16});
  for (ValueId v : {y1, y2, y3}) g.add_output(v);
  const std::string before = g.to_string();
  EXPECT_EQ(pack_weights(g), 0u);
  EXPECT_EQ(g.to_string(), before);
}

TEST(PackWeights, SharedWeightPackedOnce) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 32});
  ValueId w = add_random(g, "w", {32, 32}, 7);
  ValueId y1 = g.add_op("MatMul", "m1", {x, w}, {}, kFloat32, {1, 32});
  ValueId y2 = g.add_op("MatMul", "m2", {y1, w}, {}, kFloat32, {1, 32});
  g.add_output(y2);
  const Graph copy = g;
  EXPECT_EQ(pack_weights(g), 2u);
  EXPECT_EQ(g.nodes()[0].inputs[1], g.nodes()[1].inputs[1]);
  // The copy (sharing the constants' data) still reads the original weight.
  EXPECT_EQ(copy.nodes()[0].inputs[1], w);
  EXPECT_FALSE(copy.nodes()[0].has_attr("packed_bn"));
}

TEST(PackWeights, LstmWeightsPackedOverGates) {
  const int64_t T = 3, B = 1, I = 10, H = 12;  // 48 gates: panels of 16
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {T, B, I});
  ValueId w = add_random(g, "W", {1, 4 * H, I}, 8);
  ValueId r = add_random(g, "R", {1, 4 * H, H}, 9);
  ValueId b = add_random(g, "B", {1, 8 * H}, 10);
  Node n;
  n.op = "LSTM";
  n.name = "lstm";
  n.inputs = {x, w, r, b};
  n.outputs = {g.add_value("y", kFloat32, {T, 1, B, H})};
  n.attrs = {{"direction", std::string("forward")},
             {"hidden_size", H},
             {"layout", int64_t{0}},
             {"input_forget", int64_t{0}}};
  g.add_node(n);
  g.add_output(n.outputs[0]);
  EXPECT_EQ(pack_weights(g), 1u);
  g.verify();
  const Node& l = g.nodes()[0];
  EXPECT_EQ(l.i("packed_bn"), 16);
  expect_packed(g, l.inputs[1], w, true, 16);
  expect_packed(g, l.inputs[2], r, true, 16);
  EXPECT_EQ(g.value(l.inputs[1]).shape, (Shape{3, I, 16}));
  EXPECT_EQ(l.inputs[3], b);

  // A reverse LSTM has one direction's weights too: packed. A bidirectional one is left alone
  // (each direction packs its slice in its own stage).
  for (const char* dir : {"reverse", "bidirectional"}) {
    const int64_t d = std::string(dir) == "reverse" ? 1 : 2;
    Graph g2;
    ValueId x2 = g2.add_input("x", kFloat32, {T, B, I});
    n.inputs = {x2, add_random(g2, "W", {d, 4 * H, I}, 8), add_random(g2, "R", {d, 4 * H, H}, 9)};
    n.outputs = {g2.add_value("y", kFloat32, {T, d, B, H})};
    n.attrs["direction"] = std::string(dir);
    g2.add_node(n);
    g2.add_output(n.outputs[0]);
    EXPECT_EQ(pack_weights(g2), d == 1 ? 1u : 0u) << dir;
  }
}

}  // namespace
}  // namespace kiln::graph
