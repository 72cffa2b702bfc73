// alter_layout: which convolutions move to NCHW[x]c, where the layout conversions go (once per
// value and block, none inside an elementwise chain), and that the rewritten graph computes what
// the NCHW graph computed (both built and run; the NCHW build is itself checked against ONNX
// Runtime by the graph build tests).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/graph/alter_layout.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/split_to_slices.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;

class LayoutGraph {
 public:
  ValueId input(const std::string& name, std::vector<int64_t> shape) {
    return g.add_input(name, kFloat32, std::move(shape));
  }
  /// A kxk convolution with "same" padding, stride s, groups, and a bias.
  ValueId conv(ValueId x, int64_t out, int64_t k, int64_t s = 1, int64_t groups = 1) {
    const std::vector<int64_t> xs = g.value(x).shape;  // a copy: adding values moves them
    const int64_t p = k / 2, oh = (xs[2] + 2 * p - k) / s + 1, ow = (xs[3] + 2 * p - k) / s + 1;
    const std::string id = std::to_string(n_++);
    ValueId w = g.add_constant("w" + id, testing::random_array({out, xs[1] / groups, k, k}, n_));
    ValueId b = g.add_constant("b" + id, testing::random_array({out}, 100 + n_));
    Attrs a;
    a["kernel_shape"] = std::vector<int64_t>{k, k};
    a["strides"] = std::vector<int64_t>{s, s};
    a["pads"] = std::vector<int64_t>{p, p, p, p};
    a["dilations"] = std::vector<int64_t>{1, 1};
    a["group"] = groups;
    return g.add_op("Conv", "conv" + id, {x, w, b}, a, kFloat32, {xs[0], out, oh, ow});
  }
  ValueId op(const std::string& type, std::vector<ValueId> in) {
    return g.add_op(type, type + std::to_string(n_++), in, {}, kFloat32, g.value(in[0]).shape);
  }
  std::vector<std::string> ops() const {
    std::vector<std::string> r;
    for (const Node& n : g.nodes()) {
      r.push_back(n.op == "LayoutTransform" ? "LT" + std::to_string(n.i("src_block")) + ">" +
                                                  std::to_string(n.i("dst_block"))
                                            : n.op);
    }
    return r;
  }

  Graph g;

 private:
  int n_ = 1;
};

/// Builds `g` with and without the layout pass, runs both on the same random inputs and compares
/// every output (float32 sums in another order: 1e-4 relative, `atol` absolute).
void expect_same_results(const Graph& g, int pad_channels_to = -1, double atol = 1e-5) {
  std::vector<runtime::GraphExecutor> execs;
  for (bool alter : {false, true}) {
    BuildOptions o;
    o.alter_layout = alter;
    o.pad_channels_to = pad_channels_to;
    BuildReport rep;
    execs.push_back(runtime::GraphExecutor::from_bundle(build_graph(g, "llvm", o, &rep), "g"));
    EXPECT_EQ(rep.convolutions_blocked > 0, alter);
  }
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    NDArray x = testing::random_array(g.value(g.inputs()[i]).shape, 7 + static_cast<uint32_t>(i));
    for (auto& e : execs) e.set_input(i, x);
  }
  for (auto& e : execs) e.run();
  for (size_t i = 0; i < execs[0].num_outputs(); ++i) {
    const NDArray& ref = execs[0].output(i);
    ASSERT_EQ(execs[1].output(i).shape(), ref.shape());
    EXPECT_TRUE(testing::all_close(execs[1].output(i), ref.to_vector<float>(), 1e-4, atol));
  }
}

TEST(AlterLayout, ChannelBlocks) {
  EXPECT_EQ(channel_block(64), 16);
  EXPECT_EQ(channel_block(24), 8);
  EXPECT_EQ(channel_block(3), 3);
  EXPECT_EQ(channel_block(12), 12);
  EXPECT_EQ(channel_block(20), 0);
}

TEST(AlterLayout, ResidualBlockConvertsOnlyAtItsEdges) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 3, 12, 12});
  ValueId a = m.op("Relu", {m.conv(x, 16, 3)});
  ValueId b = m.op("Relu", {m.conv(a, 16, 3)});
  ValueId c = m.op("Add", {m.conv(b, 16, 3), a});  // the skip connection stays blocked
  ValueId y = m.op("Relu", {c});
  ValueId d = m.conv(y, 32, 3, 2);  // stride 2, 32 channels: blocks of 16
  Attrs pool;
  pool["kernel_shape"] = std::vector<int64_t>{3, 3};
  pool["strides"] = std::vector<int64_t>{2, 2};
  pool["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  pool["dilations"] = std::vector<int64_t>{1, 1};
  pool["ceil_mode"] = int64_t{0};
  ValueId mp = m.g.add_op("MaxPool", "maxpool", {d}, pool, kFloat32, {1, 32, 3, 3});
  ValueId p = m.g.add_op("GlobalAveragePool", "gap", {mp}, {}, kFloat32, {1, 32, 1, 1});
  ValueId f = m.g.add_op("Flatten", "flatten", {p}, {{"axis", int64_t{1}}}, kFloat32, {1, 32});
  m.g.add_output(f);
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.convolutions_blocked, 4u);
  EXPECT_EQ(r.conversions, 2u);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>3", "Conv", "Relu", "Conv", "Relu", "Conv",
                                               "Add", "Relu", "Conv", "MaxPool",
                                               "GlobalAveragePool", "LT16>0", "Flatten"}));
  // The packed weight of the first conv: [O/16, C/3, KH, KW, 3, 16].
  EXPECT_EQ(m.g.value(m.g.nodes()[1].inputs[1]).shape, (std::vector<int64_t>{1, 1, 3, 3, 3, 16}));
  EXPECT_EQ(m.g.value(m.g.nodes()[1].outputs[0]).shape, (std::vector<int64_t>{1, 1, 12, 12, 16}));
  expect_same_results(before);
}

// Padded blocks (pad_to 16): 72 channels as 5 blocks of 16, the last half padding. Plain
// convolutions (one reading a padded input), a grouped one of 9 groups of 8 (a zero group
// appended, then merged in pairs: 5 groups of 16), a squeeze-and-excitation scale (its
// 18-channel middle on a 1x1 map padded to 32: no block divides 18, and the padding of a single
// pixel costs nothing), a depthwise convolution,
// a residual Add and an unfolded batch norm all stay in padded blocks; a Div (not finite on the
// padding) reads NCHW, and so does a Concat; the next convolution converts back from NCHW. The
// results match the NCHW build's, so the padding never leaks into a real channel.
TEST(AlterLayout, PaddedBlocksKeepTheirPaddingOutOfRealChannels) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 3, 10, 10});
  ValueId a = m.op("Relu", {m.conv(x, 72, 3)});
  ValueId g = m.op("Relu", {m.conv(m.op("Relu", {m.conv(a, 72, 1)}), 72, 3, 1, 9)});
  ValueId p = m.g.add_op("GlobalAveragePool", "gap", {g}, {}, kFloat32, {1, 72, 1, 1});
  ValueId s = m.op("Sigmoid", {m.conv(m.op("Relu", {m.conv(p, 18, 1)}), 72, 1)});
  ValueId se = m.g.add_op("Mul", "se", {g, s}, {}, kFloat32, {1, 72, 10, 10});
  ValueId sum = m.op("Add", {m.conv(se, 72, 3, 1, 72), a});
  // An unfolded batch norm of the padded sum: a blocked Mul and Add whose padding is zeros.
  std::vector<ValueId> bn{sum};
  for (uint32_t k = 0; k < 4; ++k) {
    NDArray v = testing::random_array({72}, 60 + k);
    if (k == 3) {  // a positive variance
      for (int64_t i = 0; i < 72; ++i) v.data<float>()[i] = 0.5f + std::abs(v.data<float>()[i]);
    }
    bn.push_back(m.g.add_constant("bn" + std::to_string(k), std::move(v)));
  }
  ValueId d =
      m.g.add_op("BatchNormalization", "bn", bn, {{"epsilon", 1e-5f}}, kFloat32, {1, 72, 10, 10});
  ValueId pc = m.g.add_constant("pc", testing::random_array({1, 72, 1, 1}, 6));
  ValueId q = m.g.add_op("Div", "div", {d, m.op("Sigmoid", {pc})}, {}, kFloat32, {1, 72, 10, 10});
  ValueId cat =
      m.g.add_op("Concat", "cat", {q, a}, {{"axis", int64_t{1}}}, kFloat32, {1, 144, 10, 10});
  m.g.add_output(m.conv(cat, 72, 1));
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g, {16});
  EXPECT_EQ(r.convolutions_blocked, 7u);
  EXPECT_EQ(r.padded, 7u);
  EXPECT_EQ(r.grouped_blocked, 1u);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>3",  "Conv",    "Relu",   "Conv",
                                               "Relu",   "Conv",    "Relu",   "GlobalAveragePool",
                                               "Conv",   "Relu",    "Conv",   "Sigmoid",
                                               "Mul",    "Conv",    "Add",    "Mul",
                                               "Add",    "Sigmoid", "LT16>0", "Div",
                                               "LT16>0", "Concat",  "LT0>16", "Conv",
                                               "LT16>0"}));
  for (const Node& n : m.g.nodes()) {
    if (n.op == "Conv" && n.has_attr("out_block")) {
      // ceil(72 / 16) blocks, the squeeze-and-excitation's middle ceil(18 / 16)
      EXPECT_EQ(
          m.g.value(n.outputs[0]).shape[1],
          m.g.value(n.outputs[0]).shape[2] == 1 && m.g.value(n.inputs[0]).shape[1] == 5 ? 2 : 5)
          << n.name;
      EXPECT_EQ(n.i("out_block"), 16) << n.name;
    }
    if (n.op == "LayoutTransform" && (n.i("src_block") == 16 || n.i("dst_block") == 16)) {
      EXPECT_EQ(n.has_attr("channels"), m.g.value(n.outputs[0]).shape[1] != 144 / 16) << n.name;
    }
  }
  // The grouped convolution: 10 groups of 8 merged in pairs.
  EXPECT_EQ(m.g.nodes()[5].i("group"), 5);
  // Six layers of random weights cancel to outputs near 0.1 from sums near 10: float32 rounding
  // in another order differs by up to 1e-4 there (as much with blocks of 8), a leaked padding
  // channel by about the outputs themselves.
  expect_same_results(before, 16, 1e-4);
  // Without padding the same graph blocks 72 channels in 8s, and pads only the 1x1 map's 18
  // channels (to 24).
  Graph plain_blocks = before;
  AlterLayoutReport r8 = alter_layout(plain_blocks);
  EXPECT_EQ(r8.padded, 2u);
  EXPECT_EQ(r8.convolutions_blocked, 7u);
  expect_same_results(before, 0, 1e-4);
}

// A squeeze-and-excitation scale: GlobalAveragePool (blocked), two 1x1 convolutions on the
// [1,C,1,1] result (blocked too), Sigmoid, and the Mul of the block by that [1,C,1,1] scale, which
// stays blocked ([1,C/b,1,1,b] broadcasts over [1,C/b,H,W,b]); a per-channel [1,C,1,1] constant
// becomes a constant in the blocks (no conversion on every run), a single element is read as it is,
// and a per-channel [C,1,1] one (rank 3) makes its node read NCHW.
TEST(AlterLayout, PerChannelOperandsStayBlocked) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  ValueId body = m.op("Relu", {m.conv(x, 16, 3)});
  ValueId p = m.g.add_op("GlobalAveragePool", "gap", {body}, {}, kFloat32, {1, 16, 1, 1});
  ValueId s = m.op("Sigmoid", {m.conv(m.op("Relu", {m.conv(p, 8, 1)}), 16, 1)});
  ValueId scaled = m.g.add_op("Mul", "scale", {body, s}, {}, kFloat32, {1, 16, 6, 6});
  ValueId pc = m.g.add_constant("pc", testing::random_array({1, 16, 1, 1}, 3));
  ValueId one = m.g.add_constant("one", testing::random_array({1}, 4));
  ValueId shifted = m.g.add_op("Add", "shift", {pc, scaled}, {}, kFloat32, {1, 16, 6, 6});
  ValueId y = m.g.add_op("Mul", "times", {shifted, one}, {}, kFloat32, {1, 16, 6, 6});
  ValueId c3 = m.g.add_constant("c3", testing::random_array({16, 1, 1}, 5));
  ValueId z = m.g.add_op("Sub", "rank3", {y, c3}, {}, kFloat32, {1, 16, 6, 6});
  m.g.add_output(z);
  Graph before = m.g;
  alter_layout(m.g);
  EXPECT_EQ(m.ops(),
            (std::vector<std::string>{"LT0>16", "Conv", "Relu", "GlobalAveragePool", "Conv", "Relu",
                                      "Conv", "Sigmoid", "Mul", "Add", "Mul", "LT16>0", "Sub"}));
  const Value& blocked_pc = m.g.value(m.g.nodes()[9].inputs[0]);
  EXPECT_TRUE(blocked_pc.is_constant());
  EXPECT_EQ(blocked_pc.shape, (std::vector<int64_t>{1, 1, 1, 1, 16}));
  expect_same_results(before);
}

// MobileNetV3's hard swish between convolutions, x * HardSigmoid(x) (as PyTorch exports it), and
// an Elu and a Pow after it: all computed in blocks, converted only at the edges.
TEST(AlterLayout, ActivationsWithAttributesStayBlocked) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  ValueId c = m.conv(x, 16, 3);
  Attrs hs;
  hs["alpha"] = 1.0f / 6;
  hs["beta"] = 0.5f;
  ValueId gate = m.g.add_op("HardSigmoid", "hard_sigmoid", {c}, hs, kFloat32, {1, 16, 6, 6});
  ValueId swish = m.op("Mul", {c, gate});
  ValueId elu =
      m.g.add_op("Elu", "elu", {m.conv(swish, 16, 1)}, {{"alpha", 1.0f}}, kFloat32, {1, 16, 6, 6});
  ValueId two = m.g.add_constant("two", NDArray::from_vector(std::vector<float>{2.0f}, {1}));
  ValueId y = m.op("Pow", {elu, two});
  m.g.add_output(m.conv(y, 16, 1));
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.conversions, 2u);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>16", "Conv", "HardSigmoid", "Mul", "Conv",
                                               "Elu", "Pow", "Conv", "LT16>0"}));
  expect_same_results(before);
}

// A DenseNet block: each layer's output concatenated with the ones before it (and the block's
// NCHW input, converted once) along the channels, then BatchNormalization -> Relu -> Conv. The
// concatenations concatenate channel blocks and each batch norm becomes a blocked Mul and Add.
TEST(AlterLayout, DenseBlockConcatenatesAndNormalizesInBlocks) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  auto bn_relu_conv = [&](ValueId in, int64_t channels) {
    const int64_t c = m.g.value(in).shape[1];
    std::vector<ValueId> p;
    for (uint32_t k = 0; k < 4; ++k) {
      NDArray a = testing::random_array({c}, 40 + k);
      if (k == 3) {  // a positive variance
        float* v = a.data<float>();
        for (int64_t i = 0; i < c; ++i) v[i] = 0.5f + std::abs(v[i]);
      }
      p.push_back(
          m.g.add_constant("bn" + std::to_string(c) + "_" + std::to_string(k), std::move(a)));
    }
    ValueId bn =
        m.g.add_op("BatchNormalization", "bn" + std::to_string(c), {in, p[0], p[1], p[2], p[3]},
                   {{"epsilon", 1e-5f}}, kFloat32, m.g.value(in).shape);
    return m.conv(m.op("Relu", {bn}), channels, 3);
  };
  ValueId a = m.conv(x, 16, 1);
  ValueId b = bn_relu_conv(a, 16);
  ValueId ab =
      m.g.add_op("Concat", "cat1", {x, a, b}, {{"axis", int64_t{1}}}, kFloat32, {1, 48, 6, 6});
  ValueId c = bn_relu_conv(ab, 16);
  ValueId abc =
      m.g.add_op("Concat", "cat2", {ab, c}, {{"axis", int64_t{-3}}}, kFloat32, {1, 64, 6, 6});
  m.g.add_output(abc);
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.conversions,
            2u);  // x to blocks (once, for the conv and the concatenation), the output back
  EXPECT_EQ(m.ops(),
            (std::vector<std::string>{"LT0>16", "Conv", "Mul", "Add", "Relu", "Conv", "Concat",
                                      "Mul", "Add", "Relu", "Conv", "Concat", "LT16>0"}));
  expect_same_results(before);
}

TEST(AlterLayout, DepthwiseBlocksAndBlockedGraphOutputs) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 16, 9, 9});
  ValueId a = m.op("Relu", {m.conv(x, 24, 1)});  // 24 channels: blocks of 8
  ValueId b = m.conv(a, 24, 3, 2, 24);           // depthwise, stride 2
  ValueId c = m.conv(b, 32, 1);                  // reads blocks of 8, writes blocks of 16
  ValueId d = m.op("Sigmoid", {c});
  m.g.add_output(d);  // a graph output read back in NCHW
  m.g.add_output(b);  // an intermediate that is also an output
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.convolutions_blocked, 3u);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>16", "Conv", "Relu", "Conv", "Conv", "Sigmoid",
                                               "LT16>0", "LT8>0"}));
  // The outputs keep their ids, names and NCHW shapes.
  EXPECT_EQ(m.g.outputs(), (std::vector<ValueId>{d, b}));
  EXPECT_EQ(m.g.value(b).shape, (std::vector<int64_t>{1, 24, 5, 5}));
  expect_same_results(before);
}

TEST(AlterLayout, GroupedConvolutionsStayBlocked) {
  // A ResNeXt / RegNet block: 1x1, grouped 3x3, 1x1, the skip connection added. Blocks of 16
  // everywhere: the grouped convolutions read and write them, with no conversion between.
  // (Sigmoids keep the values near 1: a chain of Relus grows them until the last sums cancel.)
  LayoutGraph m;
  ValueId x = m.input("x", {1, 32, 10, 10});
  ValueId a = m.op("Sigmoid", {m.conv(x, 64, 1)});
  ValueId b = m.op("Sigmoid", {m.conv(a, 64, 3, 1, 4)});   // 16 channels a group: blocks inside
  ValueId c = m.op("Sigmoid", {m.conv(b, 64, 3, 2, 8)});   // 8 a group: two groups a block
  ValueId d = m.op("Sigmoid", {m.conv(c, 64, 3, 1, 16)});  // 4 a group: four groups a block
  ValueId e = m.conv(d, 32, 1);
  m.g.add_output(m.op("Add", {e, m.conv(x, 32, 1, 2)}));
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.convolutions_blocked, 6u);
  EXPECT_EQ(r.grouped_blocked, 3u);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>16", "Conv", "Sigmoid", "Conv", "Sigmoid",
                                               "Conv", "Sigmoid", "Conv", "Sigmoid", "Conv", "Conv",
                                               "Add", "LT16>0"}));
  // The groups of the blocked convolutions: groups merged into one count once.
  std::vector<int64_t> groups;
  for (const Node& n : m.g.nodes()) {
    if (n.op == "Conv") groups.push_back(n.i("group"));
  }
  EXPECT_EQ(groups, (std::vector<int64_t>{1, 4, 4, 4, 1, 1}));
  expect_same_results(before);
}

TEST(AlterLayout, GroupedBlocksOfEightMergedGroupsAndFallback) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 24, 7, 7});
  ValueId a = m.conv(x, 24, 3, 1, 3);  // 8 channels a group in blocks of 8
  ValueId b = m.conv(a, 24, 3, 2, 6);  // 4 a group: two groups a block
  ValueId c = m.conv(b, 8, 1, 1, 4);   // 6 in and 2 out a group: all four merged into one
  ValueId d = m.conv(b, 16, 1, 1, 2);  // 12 in a group: blocks of 8 fit two groups
  ValueId e = m.conv(m.input("y", {1, 4, 6, 6}), 8, 3, 1, 4);     // channel multiplier 2
  ValueId f = m.conv(m.input("z", {1, 48, 5, 5}), 48, 3, 1, 16);  // 3 a group: stays NCHW
  for (ValueId v : {c, d, e, f}) m.g.add_output(v);
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.convolutions_blocked, 5u);
  EXPECT_EQ(r.grouped_blocked, 5u);
  std::vector<int64_t> groups;
  for (const Node& n : m.g.nodes()) {
    if (n.op == "Conv") groups.push_back(n.i("group"));
  }
  EXPECT_EQ(groups, (std::vector<int64_t>{3, 3, 1, 1, 1, 16}));
  expect_same_results(before);
}

TEST(AlterLayout, OtherReadersGetNchwAndUnblockableConvsStay) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 8, 6, 6});
  ValueId a = m.conv(x, 8, 3);
  ValueId t = m.g.add_op("Transpose", "t", {a}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}},
                         kFloat32, {1, 8, 6, 6});
  ValueId b = m.conv(t, 20, 3);         // 20 output channels have no block
  ValueId c = m.conv(b, 8, 3, 1, 4);    // grouped (not depthwise): stays NCHW
  m.g.add_output(m.op("Add", {c, a}));  // a is read again: one conversion serves both
  Graph before = m.g;
  AlterLayoutReport r = alter_layout(m.g);
  EXPECT_EQ(r.convolutions_blocked, 1u);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>8", "Conv", "LT8>0", "Transpose", "Conv",
                                               "Conv", "Add"}));
  expect_same_results(before);
}

/// The attributes of a (depth, 2, 2) pooling over frames of 6x6 as rows (rewrite_pool3d's form).
Attrs frame_pool(int64_t depth) {
  Attrs a;
  a["kernel_shape"] = std::vector<int64_t>{depth, 2, 2};
  a["strides"] = std::vector<int64_t>{depth, 2, 2};
  a["pads"] = std::vector<int64_t>(6, 0);
  a["dilations"] = std::vector<int64_t>{1, 1, 1};
  a["ceil_mode"] = int64_t{0};
  a["frame_shape"] = std::vector<int64_t>{6, 6};
  return a;
}

// A 3-D pooling over frames as rows (rewrite_pool3d: [N, C, D, H*W] with frame_shape [H, W]) of a
// plain value pools in blocks, its input converted, and its reader gets the blocks: a (1, 2, 2)
// MaxPool and a (2, 2, 2) AveragePool over 4 frames of 6x6. A plain 2-D pooling stays plain.
TEST(AlterLayout, FramePoolingsOfPlainValuesPoolInBlocks) {
  for (const char* op : {"MaxPool", "AveragePool"}) {
    const bool max = std::string(op) == "MaxPool";
    LayoutGraph m;
    ValueId x = m.input("x", {1, 16, 4, 36});
    Attrs pool = frame_pool(max ? 1 : 2);
    if (!max) pool["count_include_pad"] = int64_t{0};
    ValueId p = m.g.add_op(op, "pool", {x}, pool, kFloat32, {1, 16, max ? 4 : 2, 9});
    m.g.add_output(m.conv(p, 16, 3));
    Attrs plain = pool;
    plain.erase("frame_shape");
    plain["kernel_shape"] = std::vector<int64_t>{2, 2};
    plain["strides"] = std::vector<int64_t>{2, 2};
    plain["pads"] = std::vector<int64_t>(4, 0);
    plain["dilations"] = std::vector<int64_t>{1, 1};
    m.g.add_output(m.g.add_op(op, "plain", {x}, plain, kFloat32, {1, 16, 2, 18}));
    Graph before = m.g;
    alter_layout(m.g);
    EXPECT_EQ(m.ops(), (std::vector<std::string>{"LT0>16", op, "Conv", op, "LT16>0"})) << op;
    expect_same_results(before);
  }
  // Three channels (a video's colours) would not fill a vector: that pooling stays plain.
  LayoutGraph m;
  ValueId x = m.input("x", {1, 3, 4, 36});
  m.g.add_output(m.g.add_op("MaxPool", "pool", {x}, frame_pool(1), kFloat32, {1, 3, 4, 9}));
  alter_layout(m.g);
  EXPECT_EQ(m.ops(), (std::vector<std::string>{"MaxPool"}));
}

/// A Slice of channels [start, start + len) of the 4-D `x`, in the front end's normalized form.
ValueId channel_slice(LayoutGraph& m, ValueId x, int64_t start, int64_t len) {
  std::vector<int64_t> shape = m.g.value(x).shape;
  const Attrs a = slice_along(shape, 1, start, len);
  shape[1] = len;
  return m.g.add_op("Slice", "slice" + std::to_string(start), {x}, a, kFloat32, shape);
}

// A gated unit (WaveNet's tanh x sigmoid over the two halves of a convolution's channels): Slices
// of whole blocks slice the blocks, and the gate stays blocked up to the next convolution. A Slice
// that starts inside a block reads NCHW.
TEST(AlterLayout, SlicesOfWholeBlocksStayBlocked) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 16, 5, 7});
  ValueId c = m.conv(x, 64, 3);
  ValueId gate = m.op("Mul", {m.op("Tanh", {channel_slice(m, c, 0, 32)}),
                              m.op("Sigmoid", {channel_slice(m, c, 32, 32)})});
  m.g.add_output(m.conv(gate, 16, 1));
  m.g.add_output(channel_slice(m, c, 8, 16));
  Graph before = m.g;
  alter_layout(m.g);
  EXPECT_EQ(m.ops(),
            (std::vector<std::string>{"LT0>16", "Conv", "Slice", "Tanh", "Slice", "Sigmoid", "Mul",
                                      "Conv", "LT16>0", "Slice", "LT16>0"}));
  const Node& second = m.g.nodes()[4];
  EXPECT_EQ(second.ints("starts"), (std::vector<int64_t>{0, 2, 0, 0, 0}));
  EXPECT_EQ(second.ints("ends"), (std::vector<int64_t>{1, 4, 5, 7, 16}));
  EXPECT_EQ(m.g.value(second.outputs[0]).shape, (std::vector<int64_t>{1, 2, 5, 7, 16}));
  expect_same_results(before);
}

// Winograd (options.winograd): a plain 3x3 of stride 1 over 16 channels or more on a map with
// tiles enough gets its kernel transformed, F(4x4) where its products are fewer than F(2x2)'s;
// a 6x6 map (4 tiles of 4x4, 9 of 2x2: too few), a stride-2 3x3, a 1x1, a 3-channel input and a
// small one (under 2^21 multiply-adds) stay direct; without the option every convolution is direct.
// Built, the network computes what the NCHW build computes.
TEST(AlterLayout, WinogradForStrideOne3x3sWithTilesEnough) {
  LayoutGraph m;
  ValueId x = m.input("x", {1, 3, 24, 24});
  ValueId a = m.op("Relu", {m.conv(x, 16, 3)});     // 3 input channels: direct
  ValueId b = m.op("Relu", {m.conv(a, 32, 3)});     // 24x24: F(4x4), 36 tiles
  ValueId c = m.conv(m.conv(b, 32, 3, 2), 32, 1);   // stride 2, then a 1x1: direct
  ValueId d = m.op("Relu", {m.conv(c, 64, 3)});     // 12x12: F(2x2), 36 tiles
  ValueId d2 = m.op("Relu", {m.conv(d, 16, 3)});    // 12x12 but 1.3M multiply-adds: direct
  ValueId e = m.conv(m.conv(d2, 32, 3, 2), 32, 3);  // 6x6: too few tiles
  m.g.add_output(m.op("Relu", {e}));
  Graph direct = m.g;
  AlterLayoutReport off = alter_layout(direct);
  EXPECT_EQ(off.winograd, 0u);
  AlterLayoutOptions opt;
  opt.winograd = true;
  AlterLayoutReport r = alter_layout(m.g, opt);
  EXPECT_EQ(r.convolutions_blocked, 8u);
  EXPECT_EQ(r.winograd, 2u);
  std::vector<std::pair<std::string, int64_t>> tiles;
  for (const Node& n : m.g.nodes()) {
    if (n.op != "Conv") continue;
    const int64_t t = n.i("winograd", 0);
    tiles.emplace_back(n.name, t);
    if (t != 0) {
      const std::vector<int64_t>& ws = m.g.value(n.inputs[1]).shape;
      const std::vector<int64_t>& os = m.g.value(n.outputs[0]).shape;
      // [alpha, alpha, O/ob, C, ob]
      EXPECT_EQ(ws, (std::vector<int64_t>{t + 2, t + 2, os[1], ws[3], os[4]}));
    }
  }
  EXPECT_EQ(tiles, (std::vector<std::pair<std::string, int64_t>>{{"conv1", 0},
                                                                 {"conv3", 4},
                                                                 {"conv5", 0},
                                                                 {"conv6", 0},
                                                                 {"conv7", 2},
                                                                 {"conv9", 0},
                                                                 {"conv11", 0},
                                                                 {"conv12", 0}}));
  // Built: the first four convolutions, one of each tile between direct ones. Random weights
  // without a normalization cancel (outputs of 1-4 from sums of hundreds): the direct blocked
  // build itself differs from the NCHW one by up to 3e-4 here, with Winograd by up to 9e-4.
  LayoutGraph n;
  ValueId nx = n.input("x", {1, 3, 24, 24});
  ValueId na = n.op("Relu", {n.conv(n.op("Relu", {n.conv(nx, 16, 3)}), 32, 3)});  // F(4x4)
  n.g.add_output(n.op("Relu", {n.conv(n.conv(na, 32, 3, 2), 64, 3)}));            // F(2x2)
  AlterLayoutOptions with;
  with.winograd = true;
  Graph built = n.g;
  EXPECT_EQ(alter_layout(built, with).winograd, 2u);
  expect_same_results(n.g, -1, 2e-3);
}

TEST(AlterLayout, ChannelsThatDisagreeAreAnInternalError) {
  // The model of issue 14 (a weight with 5 input channels, an input with 3), had it slipped past
  // the front end's validation: packing its kernel wrote past the packed buffer. Now a check.
  LayoutGraph m;
  ValueId x = m.input("x", {1, 3, 8, 8});
  ValueId w = m.g.add_constant("w", testing::random_array({4, 5, 3, 3}, 7));
  Attrs a;
  a["kernel_shape"] = std::vector<int64_t>{3, 3};
  a["strides"] = std::vector<int64_t>{1, 1};
  a["pads"] = std::vector<int64_t>{1, 1, 1, 1};
  a["dilations"] = std::vector<int64_t>{1, 1};
  a["group"] = int64_t{1};
  m.g.add_output(m.g.add_op("Conv", "conv1", {x, w}, a, kFloat32, {1, 4, 8, 8}));
  try {
    alter_layout(m.g);
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'conv1' (Conv) reads float32[1,3,8,8] with the "
                                         "kernel float32[4,5,3,3] and group 1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kiln::graph
