// realize_qconv on hand-built QDQ graphs: the QConv node's inputs, attributes, shifts and
// rounded biases; the Relu folded in; and each reason a quantized convolution stays float.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "compiler/graph/realize_qconv.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;

/// The pattern x_q -> DQ -> Conv(W = DQ(w_q), B = DQ(b_q)) [-> Relu] -> Q, with power-of-two
/// scales given by their log2s; `s_w` of one or two entries (per tensor / per channel).
struct Pattern {
  int lx = -4, ly = -1;
  std::vector<float> s_w = {1.0f / 128, 1.0f / 64};
  bool relu = true, bias = true;
  int8_t y_zero = 0;
  float x_scale = 0.0f;  ///< overrides 2^lx when not 0
};

Graph build(const Pattern& p) {
  Graph g;
  const ValueId xq = g.add_input("x_q", runtime::kInt8, {1, 3, 5, 5});
  const float sx = p.x_scale != 0.0f ? p.x_scale : std::ldexp(1.0f, p.lx);
  const ValueId s_x = g.add_constant("s_x", NDArray::from_vector(std::vector<float>{sx}, {}));
  const ValueId z = g.add_constant("z", NDArray::from_vector(std::vector<int8_t>{0}, {}));
  const ValueId xd = g.add_op("DequantizeLinear", "dqx", {xq, s_x, z}, {{"axis", int64_t{0}}},
                              runtime::kFloat32, {1, 3, 5, 5});
  const ValueId wq = g.add_constant(
      "w_q", NDArray::from_vector(std::vector<int8_t>(2 * 3 * 3 * 3, 1), {2, 3, 3, 3}));
  const bool per_axis = p.s_w.size() > 1;
  const ValueId s_w = g.add_constant(
      "s_w",
      NDArray::from_vector(p.s_w, per_axis ? std::vector<int64_t>{2} : std::vector<int64_t>{}));
  const ValueId wd = g.add_op("DequantizeLinear", "dqw", {wq, s_w}, {{"axis", int64_t{0}}},
                              runtime::kFloat32, {2, 3, 3, 3});
  std::vector<ValueId> conv_in{xd, wd};
  if (p.bias) {
    const ValueId bq =
        g.add_constant("b_q", NDArray::from_vector(std::vector<int32_t>{-7, 100}, {2}));
    std::vector<float> sb;
    for (size_t o = 0; o < 2; ++o) sb.push_back(sx * p.s_w[per_axis ? o : 0]);
    const ValueId s_b = g.add_constant("s_b", NDArray::from_vector(sb, {2}));
    conv_in.push_back(g.add_op("DequantizeLinear", "dqb", {bq, s_b}, {{"axis", int64_t{0}}},
                               runtime::kFloat32, {2}));
  }
  Attrs conv{{"strides", std::vector<int64_t>{2, 2}},
             {"pads", std::vector<int64_t>{1, 1, 1, 1}},
             {"dilations", std::vector<int64_t>{1, 1}},
             {"group", int64_t{1}},
             {"kernel_shape", std::vector<int64_t>{3, 3}}};
  ValueId y = g.add_op("Conv", "conv1", conv_in, conv, runtime::kFloat32, {1, 2, 3, 3});
  if (p.relu) y = g.add_op("Relu", "relu1", {y}, {}, runtime::kFloat32, {1, 2, 3, 3});
  const ValueId s_y =
      g.add_constant("s_y", NDArray::from_vector(std::vector<float>{std::ldexp(1.0f, p.ly)}, {}));
  const ValueId zy = g.add_constant("zy", NDArray::from_vector(std::vector<int8_t>{p.y_zero}, {}));
  g.add_output(g.add_op("QuantizeLinear", "q", {y, s_y, zy}, {{"axis", int64_t{0}}}, runtime::kInt8,
                        {1, 2, 3, 3}));
  g.verify();
  return g;
}

std::vector<int32_t> ints_of(const Graph& g, ValueId v) {
  return g.value(v).data->to_vector<int32_t>();
}

TEST(RealizeQConv, PerChannelWithReluAndBias) {
  Graph g = build({});
  const RealizeQConvReport r = realize_qconv(g);
  g.remove_dead_nodes();
  g.verify();
  EXPECT_EQ(r.realized, 1u);
  EXPECT_TRUE(r.kept_float.empty());
  ASSERT_EQ(g.nodes().size(), 1u) << g.to_string();
  const Node& n = g.nodes()[0];
  EXPECT_EQ(n.op, "QConv");
  EXPECT_EQ(n.name, "conv1");
  EXPECT_EQ(g.value(n.inputs[0]).name, "x_q");
  EXPECT_EQ(g.value(n.inputs[1]).name, "w_q");
  EXPECT_EQ(n.i("relu"), 1);
  EXPECT_EQ(n.ints("strides"), (std::vector<int64_t>{2, 2}));
  // shift = log2(s_y) - log2(s_x) - log2(s_w): -1 + 4 + 7 = 10 and -1 + 4 + 6 = 9; the bias
  // gains 2^(shift - 1).
  EXPECT_EQ(ints_of(g, n.inputs[3]), (std::vector<int32_t>{10, 9}));
  EXPECT_EQ(ints_of(g, n.inputs[2]), (std::vector<int32_t>{-7 + 512, 100 + 256}));
  EXPECT_EQ(n.outputs[0], g.outputs()[0]);
}

TEST(RealizeQConv, PerTensorShiftZeroWithoutBiasOrRelu) {
  Pattern p;
  p.s_w = {1.0f / 8};
  p.lx = -2;
  p.ly = -5;  // shift 0: no rounding term
  p.relu = false;
  p.bias = false;
  Graph g = build(p);
  EXPECT_EQ(realize_qconv(g).realized, 1u);
  g.remove_dead_nodes();
  const Node& n = g.nodes().at(0);
  EXPECT_EQ(n.i("relu"), 0);
  EXPECT_EQ(ints_of(g, n.inputs[3]), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(ints_of(g, n.inputs[2]), (std::vector<int32_t>{0, 0}));
}

/// The pattern stays float and the one reason names the conv and holds `why`.
void expect_float(const Pattern& p, const std::string& why) {
  Graph g = build(p);
  const size_t nodes = g.nodes().size();
  const RealizeQConvReport r = realize_qconv(g);
  EXPECT_EQ(r.realized, 0u);
  EXPECT_EQ(g.nodes().size(), nodes);
  ASSERT_EQ(r.kept_float.size(), 1u);
  EXPECT_NE(r.kept_float[0].find("node 'conv1' (Conv): stays float: "), std::string::npos)
      << r.kept_float[0];
  EXPECT_NE(r.kept_float[0].find(why), std::string::npos) << r.kept_float[0];
}

TEST(RealizeQConv, ReasonsToStayFloat) {
  Pattern p;
  p.x_scale = 0.3f;
  expect_float(p, "the input's scale 0.3 is not a power of two");
  p = {};
  p.ly = -12;  // shifts -1 and -2
  expect_float(p, "the shift of channel 0 is -1, outside [0, 31]");
  p = {};
  p.ly = 30;  // shift 41
  expect_float(p, "outside [0, 31]");
  p = {};
  p.y_zero = 3;
  expect_float(p, "the output's zero point 'zy' is not a constant 0");
}

}  // namespace
}  // namespace kiln::graph
