// trim_conv_taps: which taps it drops, the new attributes and weight, and the convolutions it
// leaves alone. (The numerics of trimmed convolutions against a naive convolution are in
// tests/correctness/graph_layers_test.cc.)
#include <gtest/gtest.h>

#include <vector>

#include "compiler/graph/trim_conv_taps.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

Attrs conv_attrs(Shape kernel, Shape dil, Shape pads) {
  const Shape ones(kernel.size(), 1);
  return {{"kernel_shape", kernel},
          {"strides", ones},
          {"dilations", dil},
          {"pads", pads},
          {"group", int64_t{1}}};
}

TEST(TrimConvTaps, AtrousRateBeyondTheMapIsAOneByOne) {
  // DeepLabV3's rate 24 on a 16x16 map: only the centre tap reaches the input.
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 8, 16, 16});
  ValueId w = g.add_constant("w", testing::random_array({4, 8, 3, 3}, 1));
  ValueId y = g.add_op("Conv", "aspp", {x, w}, conv_attrs({3, 3}, {24, 24}, {24, 24, 24, 24}),
                       kFloat32, {1, 4, 16, 16});
  g.add_output(y);
  EXPECT_EQ(trim_conv_taps(g), 1u);
  g.verify();
  const Node& n = g.nodes()[0];
  EXPECT_EQ(n.ints("kernel_shape"), (Shape{1, 1}));
  EXPECT_EQ(n.ints("dilations"), (Shape{1, 1}));
  EXPECT_EQ(n.ints("pads"), (Shape{0, 0, 0, 0}));
  const Value& t = g.value(n.inputs[1]);
  EXPECT_EQ(t.name, "w.trimmed");
  ASSERT_EQ(t.shape, (Shape{4, 8, 1, 1}));
  const float* src = g.value(w).data->data<float>();
  const float* dst = t.data->data<float>();
  for (int64_t f = 0; f < 32; ++f) EXPECT_EQ(dst[f], src[f * 9 + 4]) << f;
}

TEST(TrimConvTaps, OneAxisOneDAndAsymmetricPads) {
  // 1-D, kernel 5, dilation 4, pads [8, 0] over 10 positions, 2 outputs: taps 0 and 1 read
  // positions -8..-3 only; taps 2..4 stay, the begin pad shrinks by 2 x 4.
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 2, 10});
  ValueId w = g.add_constant("w", testing::random_array({3, 2, 5}, 2));
  ValueId y = g.add_op("Conv", "c", {x, w}, conv_attrs({5}, {4}, {8, 0}), kFloat32, {1, 3, 2});
  g.add_output(y);
  EXPECT_EQ(trim_conv_taps(g), 1u);
  const Node& n = g.nodes()[0];
  EXPECT_EQ(n.ints("kernel_shape"), (Shape{3}));
  EXPECT_EQ(n.ints("dilations"), (Shape{4}));
  EXPECT_EQ(n.ints("pads"), (Shape{0, 0}));
  const Value& t = g.value(n.inputs[1]);
  ASSERT_EQ(t.shape, (Shape{3, 2, 3}));
  const float* src = g.value(w).data->data<float>();
  for (int64_t f = 0; f < 6; ++f) {
    for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(t.data->data<float>()[f * 3 + k], src[f * 5 + 2 + k]);
  }
}

TEST(TrimConvTaps, LeavesLiveTapsAndNonConstantWeightsAlone) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 8, 16, 16});
  // Rate 12 on 16x16: every tap reaches the input for some output (rows 0-3 and 12-15).
  ValueId w = g.add_constant("w", testing::random_array({4, 8, 3, 3}, 3));
  ValueId y1 = g.add_op("Conv", "rate12", {x, w}, conv_attrs({3, 3}, {12, 12}, {12, 12, 12, 12}),
                        kFloat32, {1, 4, 16, 16});
  // A weight computed at run time cannot be sliced at build time.
  ValueId wi = g.add_input("w_in", kFloat32, {4, 8, 3, 3});
  ValueId y2 = g.add_op("Conv", "runtime_w", {x, wi},
                        conv_attrs({3, 3}, {24, 24}, {24, 24, 24, 24}), kFloat32, {1, 4, 16, 16});
  g.add_output(y1);
  g.add_output(y2);
  EXPECT_EQ(trim_conv_taps(g), 0u);
  EXPECT_EQ(g.nodes()[0].inputs[1], w);
  EXPECT_EQ(g.nodes()[1].ints("kernel_shape"), (Shape{3, 3}));
}

TEST(TrimConvTaps, LeavesAnAxisThatWouldNeedTheInputCropped) {
  // Kernel 2, dilation 10, pads [5, 0] over 8 positions, stride 1: outputs 0..2 read -5..-3 with
  // tap 0 (dead) and 5..7 with tap 1. Dropping tap 0 would need a pad of -5: left alone.
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 1, 8});
  ValueId w = g.add_constant("w", testing::random_array({1, 1, 2}, 4));
  ValueId y = g.add_op("Conv", "c", {x, w}, conv_attrs({2}, {10}, {5, 0}), kFloat32, {1, 1, 3});
  g.add_output(y);
  EXPECT_EQ(trim_conv_taps(g), 0u);
  EXPECT_EQ(g.nodes()[0].ints("kernel_shape"), (Shape{2}));
}

}  // namespace
}  // namespace kiln::graph
