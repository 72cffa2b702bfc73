// realize_qlinear on hand-built QDQ graphs with float scales: which nodes become integer
// (ConvInteger / MatMulInteger and the requantization chain), the constants it computes (the
// float32 multiplier s_x * s_w / s_y, the bias, zero points), int8 activations made unsigned,
// the reasons a product stays float, and bad scales refused naming the node and both values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/realize_qlinear.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;

/// DequantizeLinear(x_q [1,3,5,5], s_x, z_x) -> Conv(DQ(w_q [2,3,3,3] int8, s_w per channel),
/// DQ(b_q int32, s_x * s_w)) [-> Relu] -> QuantizeLinear(s_y, z_y): ORT's QDQ form.
struct Pattern {
  KilnDType x_type = runtime::kUInt8;
  bool x_from_quantize = false;  ///< x_q = QuantizeLinear(a float input) instead of an input
  float s_x = 0.02f, s_y = 0.07f;
  int64_t z_x = 120, z_y = 3;
  std::vector<float> s_w = {0.003f, 0.0051f};
  float bias_scale_factor = 1.0f;  ///< the bias's scale is s_x * s_w times this
  bool relu = false, quantize_output = true;
};

template <typename T>
ValueId scalar(Graph& g, const std::string& name, T v) {
  return g.add_constant(name, NDArray::from_vector(std::vector<T>{v}, {}));
}

ValueId zero_point(Graph& g, const std::string& name, KilnDType t, int64_t z) {
  return runtime::dtype_equal(t, runtime::kUInt8) ? scalar(g, name, static_cast<uint8_t>(z))
                                                  : scalar(g, name, static_cast<int8_t>(z));
}

Graph build(const Pattern& p) {
  Graph g;
  const std::vector<int64_t> xs{1, 3, 5, 5};
  ValueId xq;
  if (p.x_from_quantize) {
    const ValueId x = g.add_input("x", runtime::kFloat32, xs);
    xq = g.add_op("QuantizeLinear", "qx",
                  {x, scalar(g, "s_x", p.s_x), zero_point(g, "z_x", p.x_type, p.z_x)},
                  {{"axis", int64_t{0}}}, p.x_type, xs);
  } else {
    xq = g.add_input("x_q", p.x_type, xs);
  }
  const ValueId xd =
      g.add_op("DequantizeLinear", "dqx",
               {xq, scalar(g, "s_x_dq", p.s_x), zero_point(g, "z_x_dq", p.x_type, p.z_x)},
               {{"axis", int64_t{0}}}, runtime::kFloat32, xs);
  std::vector<int8_t> w(2 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>(i % 13) - 6);
  const ValueId wq = g.add_constant("w_q", NDArray::from_vector(w, {2, 3, 3, 3}));
  const auto n_w = static_cast<int64_t>(p.s_w.size());
  const ValueId wd = g.add_op(
      "DequantizeLinear", "dqw",
      {wq, g.add_constant("s_w", NDArray::from_vector(p.s_w, {n_w})),
       g.add_constant("z_w", NDArray::from_vector(std::vector<int8_t>(p.s_w.size(), 0), {n_w}))},
      {{"axis", int64_t{0}}}, runtime::kFloat32, {2, 3, 3, 3});
  std::vector<float> sb;
  for (size_t o = 0; o < 2; ++o) {
    sb.push_back(p.s_x * p.s_w[p.s_w.size() > 1 ? o : 0] * p.bias_scale_factor);
  }
  const ValueId bd =
      g.add_op("DequantizeLinear", "dqb",
               {g.add_constant("b_q", NDArray::from_vector(std::vector<int32_t>{-70, 1000}, {2})),
                g.add_constant("s_b", NDArray::from_vector(sb, {2}))},
               {{"axis", int64_t{0}}}, runtime::kFloat32, {2});
  Attrs conv{{"strides", std::vector<int64_t>{2, 2}},
             {"pads", std::vector<int64_t>{1, 1, 1, 1}},
             {"dilations", std::vector<int64_t>{1, 1}},
             {"group", int64_t{1}},
             {"kernel_shape", std::vector<int64_t>{3, 3}}};
  ValueId y = g.add_op("Conv", "conv1", {xd, wd, bd}, conv, runtime::kFloat32, {1, 2, 3, 3});
  if (p.relu) y = g.add_op("Relu", "relu1", {y}, {}, runtime::kFloat32, {1, 2, 3, 3});
  if (p.quantize_output) {
    y = g.add_op("QuantizeLinear", "q",
                 {y, scalar(g, "s_y", p.s_y), zero_point(g, "z_y", runtime::kUInt8, p.z_y)},
                 {{"axis", int64_t{0}}}, runtime::kUInt8, {1, 2, 3, 3});
  }
  g.add_output(y);
  g.verify();
  return g;
}

std::vector<std::string> ops_of(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes()) ops.push_back(n.op);
  return ops;
}

const Node& only(const Graph& g, const std::string& op) {
  const Node* found = nullptr;
  for (const Node& n : g.nodes()) {
    if (n.op != op) continue;
    EXPECT_EQ(found, nullptr) << "two " << op << " nodes";
    found = &n;
  }
  if (found == nullptr) throw std::runtime_error("no " + op + " node in\n" + g.to_string());
  return *found;
}

TEST(RealizeQLinear, ConvBecomesConvIntegerAndRequantization) {
  const Pattern p;
  Graph g = build(p);
  const RealizeQLinearReport r = realize_qlinear(g);
  g.remove_dead_nodes();
  g.verify();
  EXPECT_EQ(r.convolutions, 1u);
  EXPECT_TRUE(r.kept_float.empty());
  EXPECT_EQ(ops_of(g),
            (std::vector<std::string>{"ConvInteger", "Add", "Cast", "Mul", "QuantizeLinear"}))
      << g.to_string();
  const Node& c = only(g, "ConvInteger");
  EXPECT_EQ(c.name, "conv1");
  EXPECT_EQ(g.value(c.inputs[0]).name, "x_q");
  EXPECT_EQ(g.value(c.inputs[1]).name, "w_q");
  ASSERT_EQ(c.inputs.size(), 3u) << "symmetric weights need no zero point input";
  EXPECT_EQ(g.value(c.inputs[2]).data->to_vector<uint8_t>(), (std::vector<uint8_t>{120}));
  EXPECT_EQ(c.ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(runtime::dtype_equal(g.value(c.outputs[0]).dtype, runtime::kInt32));
  // The bias as it is, per channel; the multiplier in float32 as ORT computes it.
  const Node& add = only(g, "Add");
  EXPECT_EQ(g.value(add.inputs[1]).data->to_vector<int32_t>(), (std::vector<int32_t>{-70, 1000}));
  EXPECT_EQ(g.value(add.inputs[1]).shape, (std::vector<int64_t>{1, 2, 1, 1}));
  const Node& mul = only(g, "Mul");
  const float m0 = p.s_x * p.s_w[0], m1 = p.s_x * p.s_w[1];
  EXPECT_EQ(g.value(mul.inputs[1]).data->to_vector<float>(),
            (std::vector<float>{m0 / p.s_y, m1 / p.s_y}));
  const Node& q = only(g, "QuantizeLinear");
  EXPECT_EQ(g.value(q.inputs[1]).data->to_vector<float>(), (std::vector<float>{1.0f}));
  EXPECT_EQ(g.value(q.inputs[2]).data->to_vector<uint8_t>(), (std::vector<uint8_t>{3}));
  EXPECT_EQ(q.outputs[0], g.outputs()[0]);
}

TEST(RealizeQLinear, ReluStaysOnTheFloatSide) {
  Pattern p;
  p.relu = true;
  Graph g = build(p);
  EXPECT_EQ(realize_qlinear(g).convolutions, 1u);
  g.remove_dead_nodes();
  EXPECT_EQ(ops_of(g), (std::vector<std::string>{"ConvInteger", "Add", "Cast", "Mul", "Relu",
                                                 "QuantizeLinear"}));
}

TEST(RealizeQLinear, Int8ActivationsFromAQuantizeLinearBecomeUnsigned) {
  Pattern p;
  p.x_type = runtime::kInt8;
  p.x_from_quantize = true;
  p.z_x = -5;
  Graph g = build(p);
  const RealizeQLinearReport r = realize_qlinear(g);
  g.remove_dead_nodes();
  g.verify();
  EXPECT_EQ(r.unsigned_activations, 1u);
  const Node& qx = g.nodes().at(0);
  ASSERT_EQ(qx.name, "qx");
  EXPECT_TRUE(runtime::dtype_equal(g.value(qx.outputs[0]).dtype, runtime::kUInt8));
  EXPECT_EQ(g.value(qx.inputs[2]).data->to_vector<uint8_t>(), (std::vector<uint8_t>{123}));
  const Node& c = only(g, "ConvInteger");
  EXPECT_EQ(c.inputs[0], qx.outputs[0]);
  EXPECT_EQ(g.value(c.inputs[2]).data->to_vector<uint8_t>(), (std::vector<uint8_t>{123}));
}

TEST(RealizeQLinear, Int8GraphInputIsShiftedThroughInt32) {
  Pattern p;
  p.x_type = runtime::kInt8;
  p.z_x = 7;
  Graph g = build(p);
  EXPECT_EQ(realize_qlinear(g).convolutions, 1u);
  g.remove_dead_nodes();
  g.verify();
  EXPECT_EQ(ops_of(g), (std::vector<std::string>{"Cast", "Add", "Cast", "ConvInteger", "Add",
                                                 "Cast", "Mul", "QuantizeLinear"}))
      << g.to_string();
  const Node& c = only(g, "ConvInteger");
  EXPECT_TRUE(runtime::dtype_equal(g.value(c.inputs[0]).dtype, runtime::kUInt8));
  EXPECT_EQ(g.value(c.inputs[2]).data->to_vector<uint8_t>(), (std::vector<uint8_t>{135}));
}

TEST(RealizeQLinear, GemmBecomesMatMulIntegerOverTheTransposedWeight) {
  Graph g;
  const ValueId aq = g.add_input("a_q", runtime::kUInt8, {2, 3});
  const ValueId ad = g.add_op("DequantizeLinear", "dqa",
                              {aq, scalar(g, "s_a", 0.5f), scalar(g, "z_a", uint8_t{10})},
                              {{"axis", int64_t{0}}}, runtime::kFloat32, {2, 3});
  // Gemm's B is [N=4, K=3], read transposed.
  const ValueId w43 = g.add_constant(
      "w43",
      NDArray::from_vector(std::vector<int8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}));
  const ValueId wd = g.add_op(
      "DequantizeLinear", "dqw",
      {w43, g.add_constant("s_w", NDArray::from_vector(std::vector<float>{1, 2, 4, 8}, {4})),
       g.add_constant("z_w", NDArray::from_vector(std::vector<int8_t>{0, 0, 0, 0}, {4}))},
      {{"axis", int64_t{0}}}, runtime::kFloat32, {4, 3});
  const ValueId bd = g.add_op(
      "DequantizeLinear", "dqb",
      {g.add_constant("b_q", NDArray::from_vector(std::vector<int32_t>{1, 2, 3, 4}, {4})),
       g.add_constant("s_b", NDArray::from_vector(std::vector<float>{0.5f, 1, 2, 4}, {4}))},
      {{"axis", int64_t{0}}}, runtime::kFloat32, {4});
  const ValueId y =
      g.add_op("Gemm", "fc", {ad, wd, bd},
               {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", int64_t{0}}, {"transB", int64_t{1}}},
               runtime::kFloat32, {2, 4});
  g.add_output(g.add_op("QuantizeLinear", "q",
                        {y, scalar(g, "s_y", 0.25f), scalar(g, "z_y", uint8_t{128})},
                        {{"axis", int64_t{0}}}, runtime::kUInt8, {2, 4}));
  const RealizeQLinearReport r = realize_qlinear(g);
  g.remove_dead_nodes();
  g.verify();
  EXPECT_EQ(r.products, 1u);
  EXPECT_EQ(ops_of(g),
            (std::vector<std::string>{"MatMulInteger", "Add", "Cast", "Mul", "QuantizeLinear"}));
  const Node& mm = only(g, "MatMulInteger");
  EXPECT_EQ(g.value(mm.inputs[1]).shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(g.value(mm.inputs[1]).data->to_vector<int8_t>(),
            (std::vector<int8_t>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12}));
  EXPECT_EQ(g.value(only(g, "Mul").inputs[1]).data->to_vector<float>(),
            (std::vector<float>{2, 4, 8, 16}));
}

/// DequantizeLinear -> MaxPool -> QuantizeLinear; the output's scale is `s_y`.
Graph max_pool(float s_y) {
  Graph g;
  const std::vector<int64_t> xs{1, 2, 4, 4}, ys{1, 2, 2, 2};
  const ValueId xq = g.add_input("x_q", runtime::kUInt8, xs);
  const ValueId xd =
      g.add_op("DequantizeLinear", "dq", {xq, scalar(g, "s", 0.5f), scalar(g, "z", uint8_t{7})},
               {{"axis", int64_t{0}}}, runtime::kFloat32, xs);
  const ValueId p = g.add_op("MaxPool", "pool", {xd},
                             {{"kernel_shape", std::vector<int64_t>{2, 2}},
                              {"strides", std::vector<int64_t>{2, 2}},
                              {"pads", std::vector<int64_t>{0, 0, 0, 0}}},
                             runtime::kFloat32, ys);
  g.add_output(g.add_op("QuantizeLinear", "q",
                        {p, scalar(g, "s_y", s_y), scalar(g, "z_y", uint8_t{7})},
                        {{"axis", int64_t{0}}}, runtime::kUInt8, ys));
  return g;
}

TEST(RealizeQLinear, MaxPoolBetweenEqualQuantizationsRunsOnTheBytes) {
  Graph g = max_pool(0.5f);
  EXPECT_EQ(realize_qlinear(g).pools, 1u);
  g.remove_dead_nodes();
  g.verify();
  ASSERT_EQ(ops_of(g), (std::vector<std::string>{"MaxPool"})) << g.to_string();
  EXPECT_EQ(g.nodes()[0].inputs[0], g.inputs()[0]);
  EXPECT_EQ(g.nodes()[0].outputs[0], g.outputs()[0]);
  EXPECT_EQ(g.nodes()[0].ints("kernel_shape"), (std::vector<int64_t>{2, 2}));
  // Another scale: requantizing changes the values, so the pool stays float.
  Graph other = max_pool(0.25f);
  EXPECT_EQ(realize_qlinear(other).pools, 0u);
  EXPECT_EQ(ops_of(other),
            (std::vector<std::string>{"DequantizeLinear", "MaxPool", "QuantizeLinear"}));
}

/// The pattern stays float and the one reason names the conv and holds `why`.
void expect_float(const Pattern& p, const std::string& why) {
  Graph g = build(p);
  const RealizeQLinearReport r = realize_qlinear(g);
  EXPECT_EQ(r.convolutions, 0u);
  ASSERT_EQ(r.kept_float.size(), 1u);
  EXPECT_NE(r.kept_float[0].find("node 'conv1' (Conv): stays float: "), std::string::npos)
      << r.kept_float[0];
  EXPECT_NE(r.kept_float[0].find(why), std::string::npos) << r.kept_float[0];
}

TEST(RealizeQLinear, ReasonsToStayFloat) {
  Pattern p;
  p.quantize_output = false;
  expect_float(p, "its output is not quantized");
  p = {};
  p.bias_scale_factor = 1.5f;
  expect_float(p,
               "the bias's scale 9e-05 of channel 0 is not the input's times the weight's, 6e-05");
}

/// realize_qlinear refuses `p` with a kiln::Error holding `what`.
void expect_error(const Pattern& p, const std::string& what) {
  Graph g = build(p);
  try {
    realize_qlinear(g);
    ADD_FAILURE() << "no error; wanted: " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(RealizeQLinear, BadScalesAreErrorsNamingTheNode) {
  Pattern p;
  p.s_y = 0.0f;
  expect_error(p,
               "node 'q' (QuantizeLinear): scale 's_y' holds 0 at index 0; scales must be "
               "positive and finite");
  p = {};
  p.s_w = {0.003f, 0.004f, 0.005f};
  expect_error(p,
               "node 'dqw' (DequantizeLinear): the weight's scale 's_w' has 3 values, but the "
               "weight 'w_q' has 2 output channels (axis 0)");
}

}  // namespace
}  // namespace kiln::graph
