// pad_groups: which grouped convolutions get whole-block groups, where their kernels, biases and
// per-channel constants put the zeros, the regions it refuses, and that the padded graph computes
// what the original computed (both built in NCHW and run, and the padded one through alter_layout
// too). ONNX Runtime checks the same blocks end to end in tests/correctness/grouped_padding_test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/alter_layout.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/pad_groups.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

const AlterLayoutOptions kAvx512{16};

class GroupGraph {
 public:
  ValueId input(const std::string& name, Shape shape) {
    return g.add_input(name, kFloat32, std::move(shape));
  }
  /// A kxk convolution with "same" padding, `groups` groups and a bias; its node's index in
  /// `convs`.
  ValueId conv(ValueId x, int64_t out, int64_t k, int64_t groups = 1) {
    const Shape xs = g.value(x).shape;  // a copy: adding values moves them
    const std::string id = std::to_string(n_++);
    ValueId w = g.add_constant("w" + id, testing::random_array({out, xs[1] / groups, k, k}, n_));
    ValueId b = g.add_constant("b" + id, testing::random_array({out}, 100 + n_));
    Attrs a;
    a["kernel_shape"] = Shape{k, k};
    a["strides"] = Shape{1, 1};
    a["pads"] = Shape{k / 2, k / 2, k / 2, k / 2};
    a["dilations"] = Shape{1, 1};
    a["group"] = groups;
    convs.push_back(g.nodes().size());
    return g.add_op("Conv", "conv" + id, {x, w, b}, a, kFloat32, {xs[0], out, xs[2], xs[3]});
  }
  ValueId op(const std::string& type, std::vector<ValueId> in, Shape shape = {}) {
    if (shape.empty()) shape = g.value(in[0]).shape;
    return g.add_op(type, type + std::to_string(n_++), in, {}, kFloat32, shape);
  }
  const Node& conv_node(size_t i) const { return g.nodes()[convs[i]]; }
  const NDArray& kernel(size_t i) const { return *g.value(conv_node(i).inputs[1]).data; }
  const NDArray& bias(size_t i) const { return *g.value(conv_node(i).inputs[2]).data; }

  Graph g;
  std::vector<size_t> convs;

 private:
  int n_ = 1;
};

/// RegNet's X block, groups of 40 channels (8 more than two blocks of 16): a 1x1 convolution
/// to 80 channels, Relu, a 3x3 one in two groups, Relu, a 1x1 one to 32.
GroupGraph x_block() {
  GroupGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  ValueId a = m.op("Relu", {m.conv(x, 80, 1)});
  ValueId b = m.op("Relu", {m.conv(a, 80, 3, 2)});
  m.g.add_output(m.conv(b, 32, 1));
  return m;
}

/// The outputs of `g` built for this CPU (NCHW, or through alter_layout with blocks of 16) on
/// seeded inputs.
std::vector<std::vector<float>> run(const Graph& g, bool alter) {
  BuildOptions o;
  o.alter_layout = alter;
  o.pad_channels_to = 16;
  runtime::GraphExecutor e = runtime::GraphExecutor::from_bundle(build_graph(g, "llvm", o), "g");
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    e.set_input(i, testing::random_array(g.value(g.inputs()[i]).shape, 7 + uint32_t(i)));
  }
  e.run();
  std::vector<std::vector<float>> outs;
  for (size_t i = 0; i < e.num_outputs(); ++i) outs.push_back(e.output(i).to_vector<float>());
  return outs;
}

/// Pads `m` and checks that the padded graph computes what it computed: in NCHW, where only
/// zero products are added, to 1e-5; blocked, where the sums run in another order over values of
/// up to ~5 (random weights in [-1, 1]), to 1e-4.
PadGroupsReport pad_and_compare(GroupGraph& m) {
  const std::vector<std::vector<float>> before = run(m.g, /*alter=*/false);
  const PadGroupsReport r = pad_groups(m.g, kAvx512);
  for (bool alter : {false, true}) {
    SCOPED_TRACE(alter ? "blocked" : "NCHW");
    const std::vector<std::vector<float>> after = run(m.g, alter);
    EXPECT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size() && i < before.size(); ++i) {
      EXPECT_EQ(after[i].size(), before[i].size());
      if (after[i].size() != before[i].size()) continue;
      EXPECT_TRUE(testing::all_close(after[i].data(), before[i].data(),
                                     static_cast<int64_t>(after[i].size()), alter ? 1e-4 : 1e-5,
                                     alter ? 1e-4 : 1e-5));
    }
  }
  return r;
}

TEST(PadGroups, RegNetXBlockGroupsOf40BecomeGroupsOf48) {
  GroupGraph m = x_block();
  const NDArray wa = m.kernel(0).copy(), ba = m.bias(0).copy();
  const NDArray wb = m.kernel(1).copy(), wc = m.kernel(2).copy();
  // Before: alter_layout merges the two groups of 40 into one of 80 (5 blocks).
  EXPECT_EQ(grouped_conv_blocks(m.g, m.conv_node(1), kAvx512).merge, 2);

  const PadGroupsReport r = pad_and_compare(m);
  EXPECT_EQ(r.padded, 1u);
  EXPECT_TRUE(r.kept.empty());
  const GroupedConvBlocks after = grouped_conv_blocks(m.g, m.conv_node(1), kAvx512);
  EXPECT_EQ(after.in_block, 16);
  EXPECT_EQ(after.merge, 1);
  EXPECT_EQ(m.g.value(m.conv_node(1).inputs[0]).shape, (Shape{1, 96, 6, 6}));
  EXPECT_EQ(m.g.value(m.conv_node(1).outputs[0]).shape, (Shape{1, 96, 6, 6}));
  EXPECT_EQ(m.g.value(m.conv_node(2).outputs[0]).shape, (Shape{1, 32, 6, 6}));  // as it was
  ASSERT_EQ(m.kernel(0).shape(), (Shape{96, 16, 1, 1}));
  ASSERT_EQ(m.bias(0).shape(), (Shape{96}));
  ASSERT_EQ(m.kernel(1).shape(), (Shape{96, 48, 3, 3}));
  ASSERT_EQ(m.bias(1).shape(), (Shape{96}));
  ASSERT_EQ(m.kernel(2).shape(), (Shape{32, 96, 1, 1}));
  // Channel k of group j (40 wide) is channel 48 j + k; the rest is zeros.
  auto moved = [](int64_t c) { return c / 40 * 48 + c % 40; };
  auto padding = [](int64_t c) { return c % 48 >= 40; };
  const float* a = m.kernel(0).data<float>();
  const float* b = m.kernel(1).data<float>();
  const float* c = m.kernel(2).data<float>();
  for (int64_t o = 0; o < 96; ++o) {
    for (int64_t i = 0; i < 16; ++i) {
      EXPECT_EQ(a[o * 16 + i],
                padding(o) ? 0.0f : wa.data<float>()[(o / 48 * 40 + o % 48) * 16 + i]);
    }
    EXPECT_EQ(m.bias(0).data<float>()[o],
              padding(o) ? 0.0f : ba.data<float>()[o / 48 * 40 + o % 48]);
    for (int64_t i = 0; i < 48; ++i) {
      for (int64_t t = 0; t < 9; ++t) {
        const float want = padding(o) || i >= 40
                               ? 0.0f
                               : wb.data<float>()[((o / 48 * 40 + o % 48) * 40 + i) * 9 + t];
        EXPECT_EQ(b[(o * 48 + i) * 9 + t], want) << o << " " << i << " " << t;
      }
    }
  }
  for (int64_t o = 0; o < 32; ++o) {
    for (int64_t i = 0; i < 80; ++i) EXPECT_EQ(c[o * 96 + moved(i)], wc.data<float>()[o * 80 + i]);
    for (int64_t i = 0; i < 96; ++i) {
      if (padding(i)) {
        EXPECT_EQ(c[o * 96 + i], 0.0f);
      }
    }
  }
}

TEST(PadGroups, RegNetYBlockPadsTheSqueezeExcitationAndPerChannelConstants) {
  // X's block with a squeeze-excitation between the 3x3 and the last 1x1, and a per-channel
  // constant [80, 1, 1] added after it.
  GroupGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  ValueId a = m.op("Relu", {m.conv(x, 80, 1)});
  ValueId b = m.op("Relu", {m.conv(a, 80, 3, 2)});
  ValueId pooled = m.op("GlobalAveragePool", {b}, {1, 80, 1, 1});
  ValueId squeezed = m.op("Relu", {m.conv(pooled, 8, 1)});
  ValueId scale = m.op("Sigmoid", {m.conv(squeezed, 80, 1)});
  ValueId scaled = m.op("Mul", {scale, b}, {1, 80, 6, 6});
  ValueId shift = m.g.add_constant("shift", testing::random_array({80, 1, 1}, 50));
  ValueId shifted = m.op("Add", {scaled, shift});
  ValueId half = m.g.add_constant("half", NDArray::from_vector(std::vector<float>{0.5f}, {}));
  ValueId y = m.op("Mul", {shifted, half});
  m.g.add_output(m.conv(y, 32, 1));
  const NDArray shift_before = m.g.value(shift).data->copy();

  const PadGroupsReport r = pad_and_compare(m);
  EXPECT_EQ(r.padded, 1u);
  EXPECT_EQ(m.g.value(pooled).shape, (Shape{1, 96, 1, 1}));
  EXPECT_EQ(m.g.value(scale).shape, (Shape{1, 96, 1, 1}));
  EXPECT_EQ(m.g.value(y).shape, (Shape{1, 96, 6, 6}));
  EXPECT_EQ(m.kernel(2).shape(), (Shape{8, 96, 1, 1}));   // squeeze: zero columns
  EXPECT_EQ(m.kernel(3).shape(), (Shape{96, 8, 1, 1}));   // excitation: zero rows
  EXPECT_EQ(m.kernel(4).shape(), (Shape{32, 96, 1, 1}));  // the last 1x1
  // The shift's use reads a padded copy; the single element stays.
  const Node& add = m.g.nodes()[static_cast<size_t>(m.g.producer(shifted))];
  const Value& padded_shift = m.g.value(add.inputs[1]);
  ASSERT_EQ(padded_shift.shape, (Shape{96, 1, 1}));
  for (int64_t c = 0; c < 96; ++c) {
    EXPECT_EQ(padded_shift.data->data<float>()[c],
              c % 48 >= 40 ? 0.0f : shift_before.data<float>()[c / 48 * 40 + c % 48]);
  }
  EXPECT_EQ(m.g.nodes()[static_cast<size_t>(m.g.producer(y))].inputs[1], half);
}

TEST(PadGroups, RefusesRegionsItCannotPadAndLeavesThemAsTheyWere) {
  struct Case {
    const char* what;
    const char* reason;  ///< a part of the report's line
  };
  for (const Case& c :
       {Case{"graph output", "is a graph output"}, Case{"reshape reader", "is read by Flatten"},
        Case{"graph input", "is a graph input"}, Case{"unpadded add", "is a graph input"}}) {
    SCOPED_TRACE(c.what);
    GroupGraph m;
    const std::string what = c.what;
    ValueId x = m.input("x", {1, 80, 6, 6});
    ValueId a = what == "graph input" ? x : m.op("Relu", {m.conv(x, 80, 1)});
    if (what == "unpadded add") a = m.op("Add", {a, x});  // x: a graph input of 80 channels
    ValueId b = m.conv(a, 80, 3, 2);
    m.g.add_output(m.conv(m.op("Relu", {b}), 32, 1));
    if (what == "graph output") m.g.add_output(b);
    if (what == "reshape reader") {
      m.g.add_output(
          m.g.add_op("Flatten", "flatten", {b}, {{"axis", int64_t{1}}}, kFloat32, {1, 80 * 36}));
    }
    const size_t grouped = what == "graph input" ? 0 : 1;
    const ValueId kernel = m.conv_node(grouped).inputs[1];
    const PadGroupsReport r = pad_and_compare(m);
    EXPECT_EQ(r.padded, 0u);
    ASSERT_EQ(r.kept.size(), 1u);
    EXPECT_NE(r.kept[0].find(m.conv_node(grouped).name + ": "), std::string::npos) << r.kept[0];
    EXPECT_NE(r.kept[0].find(c.reason), std::string::npos) << r.kept[0];
    EXPECT_EQ(m.conv_node(grouped).inputs[1], kernel);
    EXPECT_EQ(m.g.value(b).shape, (Shape{1, 80, 6, 6}));
    EXPECT_EQ(grouped_conv_blocks(m.g, m.conv_node(grouped), kAvx512).merge, 2);
  }
}

TEST(PadGroups, KeepsMergingWherePaddingCostsMore) {
  // Groups of 8 in blocks of 16: padding doubles both sides of the grouped convolution (4 times
  // its work) where merging doubles one. Groups that are whole blocks (2 of 16) are left alone.
  GroupGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  ValueId a = m.op("Relu", {m.conv(x, 32, 1)});
  ValueId b = m.op("Relu", {m.conv(a, 32, 3, 4)});
  ValueId c = m.op("Relu", {m.conv(b, 32, 1)});
  m.g.add_output(m.conv(c, 32, 3, 2));
  const PadGroupsReport r = pad_and_compare(m);
  EXPECT_EQ(r.padded, 0u);
  ASSERT_EQ(r.kept.size(), 1u);
  EXPECT_NE(r.kept[0].find(m.conv_node(1).name + ": padding adds"), std::string::npos) << r.kept[0];
  EXPECT_EQ(m.g.value(a).shape, (Shape{1, 32, 6, 6}));
}

TEST(PadGroups, PadsAGroupedConvolutionThatWouldStayNchw) {
  // 5 groups of 24 channels: 120 is blocked in 16s with a padded last block, which no number of
  // merged groups of 24 fills, so alter_layout leaves it NCHW; padded to 32 a group it is blocked.
  GroupGraph m;
  ValueId x = m.input("x", {1, 16, 6, 6});
  ValueId a = m.op("Relu", {m.conv(x, 120, 1)});
  ValueId b = m.op("Relu", {m.conv(a, 120, 3, 5)});
  m.g.add_output(m.conv(b, 16, 1));
  EXPECT_EQ(grouped_conv_blocks(m.g, m.conv_node(1), kAvx512).in_block, 0);
  const PadGroupsReport r = pad_and_compare(m);
  EXPECT_EQ(r.padded, 1u);
  EXPECT_EQ(m.kernel(1).shape(), (Shape{160, 32, 3, 3}));
  const GroupedConvBlocks after = grouped_conv_blocks(m.g, m.conv_node(1), kAvx512);
  EXPECT_EQ(after.in_block, 16);
  EXPECT_EQ(after.merge, 1);
}

}  // namespace
}  // namespace kiln::graph
