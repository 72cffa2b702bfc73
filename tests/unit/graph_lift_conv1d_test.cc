// lift_conv1d: a 1-D Conv with a constant weight becomes a 2-D one of height 1 between reshapes
// (then blocked by alter_layout like any 2-D convolution); other convolutions are left alone.
// (The numerics through the build are in tests/correctness/graph_layers_test.cc.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/alter_layout.h"
#include "compiler/graph/lift_conv1d.h"
#include "compiler/graph/sink_reshapes.h"
#include "compiler/graph/split_to_slices.h"
#include "tests/common/four_d_ops.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

Attrs conv1d_attrs(int64_t k, int64_t stride, int64_t dil, Shape pads) {
  return {{"kernel_shape", Shape{k}},
          {"strides", Shape{stride}},
          {"dilations", Shape{dil}},
          {"pads", pads},
          {"group", int64_t{1}}};
}

TEST(LiftConv1d, ConvBetweenReshapesThenBlocked) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 16, 40});
  ValueId w = g.add_constant("w", testing::random_array({32, 16, 5}, 1));
  ValueId b = g.add_constant("b", testing::random_array({32}, 2));
  ValueId y =
      g.add_op("Conv", "c", {x, w, b}, conv1d_attrs(5, 2, 3, {6, 5}), kFloat32, {1, 32, 20});
  ValueId s = g.add_op("Softmax", "softmax", {y}, {{"axis", int64_t{1}}}, kFloat32, {1, 32, 20});
  g.add_output(s);
  EXPECT_EQ(lift_conv1d(g), 1u);
  g.verify();
  ASSERT_EQ(g.nodes().size(), 4u);
  const Node &to_2d = g.nodes()[0], &conv = g.nodes()[1], &to_1d = g.nodes()[2];
  EXPECT_EQ(to_2d.op, "Reshape");
  EXPECT_EQ(to_2d.inputs, std::vector<ValueId>{x});
  EXPECT_EQ(g.value(to_2d.outputs[0]).shape, (Shape{1, 16, 1, 40}));
  EXPECT_EQ(conv.op, "Conv");
  EXPECT_EQ(conv.inputs[0], to_2d.outputs[0]);
  EXPECT_EQ(conv.inputs[2], b);
  EXPECT_EQ(conv.ints("kernel_shape"), (Shape{1, 5}));
  EXPECT_EQ(conv.ints("strides"), (Shape{1, 2}));
  EXPECT_EQ(conv.ints("dilations"), (Shape{1, 3}));
  EXPECT_EQ(conv.ints("pads"), (Shape{0, 6, 0, 5}));
  const Value& w2 = g.value(conv.inputs[1]);
  EXPECT_EQ(w2.shape, (Shape{32, 16, 1, 5}));
  EXPECT_EQ(w2.data->to_vector<float>(), g.value(w).data->to_vector<float>());
  EXPECT_EQ(g.value(conv.outputs[0]).shape, (Shape{1, 32, 1, 20}));
  EXPECT_EQ(to_1d.op, "Reshape");
  EXPECT_EQ(to_1d.outputs, std::vector<ValueId>{y});  // the Softmax (not lifted) still reads y
  EXPECT_EQ(g.nodes()[3].inputs, std::vector<ValueId>{y});
  EXPECT_EQ(alter_layout(g).convolutions_blocked, 1u);
  g.verify();
}

// With sink_reshapes after it (as the build runs them).
TEST(LiftConv1d, AChainOfLayersStaysFourD) {
  // Conv -> Relu -> MaxPool -> Conv -> Add(residual: the pool) -> GlobalAveragePool.
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 16, 40});
  ValueId w1 = g.add_constant("w1", testing::random_array({16, 16, 3}, 1));
  ValueId w2 = g.add_constant("w2", testing::random_array({16, 16, 3}, 2));
  ValueId c1 =
      g.add_op("Conv", "c1", {x, w1}, conv1d_attrs(3, 1, 1, {1, 1}), kFloat32, {1, 16, 40});
  ValueId r = g.add_op("Relu", "relu", {c1}, {}, kFloat32, {1, 16, 40});
  ValueId p = g.add_op("MaxPool", "pool", {r},
                       {{"kernel_shape", Shape{2}},
                        {"strides", Shape{2}},
                        {"dilations", Shape{1}},
                        {"pads", Shape{0, 0}},
                        {"ceil_mode", int64_t{0}}},
                       kFloat32, {1, 16, 20});
  ValueId c2 =
      g.add_op("Conv", "c2", {p, w2}, conv1d_attrs(3, 1, 1, {1, 1}), kFloat32, {1, 16, 20});
  ValueId a = g.add_op("Add", "residual", {c2, p}, {}, kFloat32, {1, 16, 20});
  ValueId gap = g.add_op("GlobalAveragePool", "gap", {a}, {}, kFloat32, {1, 16, 1});
  g.add_output(gap);
  EXPECT_EQ(lift_conv1d(g), 2u);
  EXPECT_EQ(sink_reshapes(g), 4u);  // Relu, MaxPool, Add, GlobalAveragePool
  g.verify();
  // One Reshape in, one out; everything between is 4-D.
  const std::vector<std::string> ops = testing::four_d_ops(g);
  EXPECT_EQ(ops, (std::vector<std::string>{"Reshape", "Conv", "Relu", "MaxPool", "Conv", "Add",
                                           "GlobalAveragePool", "Reshape"}));
  EXPECT_EQ(g.nodes()[3].ints("kernel_shape"), (Shape{1, 2}));
  EXPECT_EQ(g.nodes()[3].ints("pads"), (Shape{0, 0, 0, 0}));
  EXPECT_EQ(g.nodes().back().outputs, std::vector<ValueId>{gap});
  // Blocked from the first convolution to the pooling: one conversion in, one out.
  const AlterLayoutReport layout = alter_layout(g);
  EXPECT_EQ(layout.convolutions_blocked, 2u);
  EXPECT_EQ(layout.conversions, 2u);
  g.verify();
}

TEST(LiftConv1d, LeavesTwoDAndRuntimeWeightsAlone) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 8, 30});
  ValueId wi = g.add_input("w", kFloat32, {8, 8, 3});
  ValueId y1 =
      g.add_op("Conv", "runtime_w", {x, wi}, conv1d_attrs(3, 1, 1, {1, 1}), kFloat32, {1, 8, 30});
  ValueId x2 = g.add_input("x2", kFloat32, {1, 8, 6, 6});
  ValueId w2 = g.add_constant("w2", testing::random_array({8, 8, 3, 3}, 3));
  const Shape ones{1, 1};
  ValueId y2 = g.add_op("Conv", "conv2d", {x2, w2},
                        {{"kernel_shape", Shape{3, 3}},
                         {"strides", ones},
                         {"dilations", ones},
                         {"pads", Shape{1, 1, 1, 1}},
                         {"group", int64_t{1}}},
                        kFloat32, {1, 8, 6, 6});
  g.add_output(y1);
  g.add_output(y2);
  EXPECT_EQ(lift_conv1d(g), 0u);
  EXPECT_EQ(g.nodes().size(), 2u);
}

// A gated unit over 1-D layers: a Split of the dilated convolution's channels (as Slices,
// split_to_slices) into tanh x sigmoid, then a 1x1 convolution. The channel Slices run on the 4-D
// value too, and the whole unit is blocked with one conversion in and one out.
TEST(LiftConv1d, GatedUnitSlicesStayFourD) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 16, 40});
  ValueId w1 = g.add_constant("w1", testing::random_array({64, 16, 2}, 1));
  ValueId w2 = g.add_constant("w2", testing::random_array({16, 32, 1}, 2));
  ValueId c1 =
      g.add_op("Conv", "dil", {x, w1}, conv1d_attrs(2, 1, 4, {4, 0}), kFloat32, {1, 64, 40});
  auto half = [&](int64_t start) {
    return g.add_op("Slice", "half" + std::to_string(start), {c1},
                    slice_along({1, 64, 40}, 1, start, 32), kFloat32, {1, 32, 40});
  };
  ValueId t = g.add_op("Tanh", "tanh", {half(0)}, {}, kFloat32, {1, 32, 40});
  ValueId s = g.add_op("Sigmoid", "sigmoid", {half(32)}, {}, kFloat32, {1, 32, 40});
  ValueId z = g.add_op("Mul", "gate", {t, s}, {}, kFloat32, {1, 32, 40});
  ValueId c2 =
      g.add_op("Conv", "out", {z, w2}, conv1d_attrs(1, 1, 1, {0, 0}), kFloat32, {1, 16, 40});
  g.add_output(c2);
  EXPECT_EQ(lift_conv1d(g), 2u);
  EXPECT_EQ(sink_reshapes(g), 5u);  // the two Slices, Tanh, Sigmoid, Mul
  g.verify();
  EXPECT_EQ(testing::four_d_ops(g),
            (std::vector<std::string>{"Reshape", "Conv", "Slice", "Tanh", "Slice", "Sigmoid", "Mul",
                                      "Conv", "Reshape"}));
  const Node& second = g.nodes()[4];
  EXPECT_EQ(second.ints("starts"), (Shape{0, 32, 0, 0}));
  EXPECT_EQ(second.ints("ends"), (Shape{1, 64, 1, 40}));
  EXPECT_EQ(g.value(second.outputs[0]).shape, (Shape{1, 32, 1, 40}));
  const AlterLayoutReport layout = alter_layout(g);
  EXPECT_EQ(layout.convolutions_blocked, 2u);
  EXPECT_EQ(layout.conversions, 2u);
  g.verify();
}

}  // namespace
}  // namespace kiln::graph
