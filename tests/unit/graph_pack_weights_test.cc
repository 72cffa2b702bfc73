// pack_weights: which nodes it rewrites, the shapes, attributes and contents of the new constants,
// and the nodes it leaves alone. (The numerics of the packed kernels against the unpacked build
// are in tests/correctness/graph_pack_weights_build_test.cc.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
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

/// Element [d, p, k, j] of a recurrent weight's packing [D, P, K, bn]: row row0 + q * bn + j of
/// direction d for the q-th panel of the segment (row0, rows) that panel p falls in, zero past the
/// segment's rows.
void expect_gate_panels(const Graph& g, ValueId packed, ValueId orig,
                        const std::vector<std::pair<int64_t, int64_t>>& segments, int64_t bn) {
  const Value& pv = g.value(packed);
  const Value& ov = g.value(orig);
  const int64_t dirs = ov.shape[0], gates = ov.shape[1], k = ov.shape[2];
  int64_t panels = 0;
  for (const auto& seg : segments) panels += (seg.second + bn - 1) / bn;
  ASSERT_TRUE(pv.is_constant());
  ASSERT_EQ(pv.shape, (Shape{dirs, panels, k, bn}));
  const float* p = pv.data->data<float>();
  const float* o = ov.data->data<float>();
  for (int64_t d = 0; d < dirs; ++d) {
    int64_t q = 0;
    for (const auto& [row0, rows] : segments) {
      for (int64_t sp = 0; sp * bn < rows; ++sp, ++q) {
        for (int64_t kk = 0; kk < k; ++kk) {
          for (int64_t j = 0; j < bn; ++j) {
            const int64_t row = sp * bn + j;
            const float want = row < rows ? o[(d * gates + row0 + row) * k + kk] : 0.0f;
            ASSERT_EQ(p[((d * panels + q) * k + kk) * bn + j], want)
                << "[" << d << ", " << q << ", " << kk << ", " << j << "]";
          }
        }
      }
    }
  }
}

TEST(PackWeights, LstmWeightsPackedOverGates) {
  const int64_t T = 3, B = 1, I = 10, H = 12;  // 48 gates: panels of 16
  // Every direction: forward and reverse have one direction's weights, bidirectional two, each
  // direction's gates packed in panels of its own.
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    const int64_t d = std::string(dir) == "bidirectional" ? 2 : 1;
    Graph g;
    ValueId x = g.add_input("x", kFloat32, {T, B, I});
    ValueId w = add_random(g, "W", {d, 4 * H, I}, 8);
    ValueId r = add_random(g, "R", {d, 4 * H, H}, 9);
    ValueId b = add_random(g, "B", {d, 8 * H}, 10);
    Node n;
    n.op = "LSTM";
    n.name = "lstm";
    n.inputs = {x, w, r, b};
    n.outputs = {g.add_value("y", kFloat32, {T, d, B, H})};
    n.attrs = {{"direction", std::string(dir)},
               {"hidden_size", H},
               {"layout", int64_t{0}},
               {"input_forget", int64_t{0}}};
    g.add_node(n);
    g.add_output(n.outputs[0]);
    EXPECT_EQ(pack_weights(g), 1u) << dir;
    g.verify();
    const Node& l = g.nodes()[0];
    EXPECT_EQ(l.i("packed_bn"), 16);
    expect_gate_panels(g, l.inputs[1], w, {{0, 4 * H}}, 16);
    expect_gate_panels(g, l.inputs[2], r, {{0, 4 * H}}, 16);
    EXPECT_EQ(g.value(l.inputs[1]).shape, (Shape{d, 3, I, 16}));
    EXPECT_EQ(l.inputs[3], b);
  }
}

// A GRU's R in the segments its recurrent products read: all 3H gates with linear_before_reset,
// else z and r, then h, each in whole panels (H = 20: panels of 16, padded).
TEST(PackWeights, GruWeightsPackedInSegments) {
  const int64_t T = 2, B = 1, I = 7, H = 20;
  EXPECT_EQ(topi::gru_panel_segments(H, true), (std::vector<std::pair<int64_t, int64_t>>{{0, 60}}));
  EXPECT_EQ(topi::gru_panel_segments(H, false),
            (std::vector<std::pair<int64_t, int64_t>>{{0, 40}, {40, 20}}));
  for (int64_t lbr : {0, 1}) {
    Graph g;
    ValueId x = g.add_input("x", kFloat32, {T, B, I});
    ValueId w = add_random(g, "W", {2, 3 * H, I}, 11);
    ValueId r = add_random(g, "R", {2, 3 * H, H}, 12);
    Node n;
    n.op = "GRU";
    n.name = "gru";
    n.inputs = {x, w, r};
    n.outputs = {g.add_value("y", kFloat32, {T, 2, B, H})};
    n.attrs = {{"direction", std::string("bidirectional")},
               {"hidden_size", H},
               {"layout", int64_t{0}},
               {"linear_before_reset", lbr}};
    g.add_node(n);
    g.add_output(n.outputs[0]);
    EXPECT_EQ(pack_weights(g), 1u);
    g.verify();
    const Node& l = g.nodes()[0];
    const int64_t bn = topi::lstm_panel_width(H);
    EXPECT_EQ(bn, 16);
    EXPECT_EQ(l.i("packed_bn"), bn);
    expect_gate_panels(g, l.inputs[1], w, {{0, 3 * H}}, bn);
    expect_gate_panels(g, l.inputs[2], r, topi::gru_panel_segments(H, lbr != 0), bn);
    // 60 rows in 4 panels; 40 + 20 rows in 3 + 2.
    EXPECT_EQ(g.value(l.inputs[2]).shape, (Shape{2, lbr ? 4 : 5, H, bn}));
  }
}

}  // namespace
}  // namespace kiln::graph
