// split_to_slices: the Slices it writes in a Split's place (bounds, outputs, order), an omitted
// output, and what the fuser makes of an attention's Split afterwards. (The numerics against ONNX
// Runtime are in tests/correctness/graph_build_test.cc: SplitIntoAttentionHeads and
// LayerNormalizationSplitTileExpand.)
#include <gtest/gtest.h>

#include <vector>

#include "compiler/graph/fuse.h"
#include "compiler/graph/split_to_slices.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

TEST(SplitToSlices, OneSlicePerOutputWhereTheSplitStood) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {2, 10, 4});
  ValueId r = g.add_op("Relu", "relu", {x}, {}, kFloat32, {2, 10, 4});
  ValueId a = g.add_value("a", kFloat32, {2, 3, 4});
  ValueId b = g.add_value("b", kFloat32, {2, 7, 4});
  g.add_node(Node{"Split", "split", {r}, {a, b}, {{"axis", int64_t{1}}, {"split", Shape{3, 7}}}});
  ValueId y = g.add_op("Neg", "neg", {b}, {}, kFloat32, {2, 7, 4});
  g.add_output(a);
  g.add_output(y);
  EXPECT_EQ(split_to_slices(g), 1u);
  g.verify();
  ASSERT_EQ(g.nodes().size(), 4u);
  const Node& s0 = g.nodes()[1];
  const Node& s1 = g.nodes()[2];
  EXPECT_EQ(s0.op, "Slice");
  EXPECT_EQ(s0.inputs, std::vector<ValueId>{r});
  EXPECT_EQ(s0.outputs, std::vector<ValueId>{a});
  EXPECT_EQ(s0.ints("starts"), (Shape{0, 0, 0}));
  EXPECT_EQ(s0.ints("ends"), (Shape{2, 3, 4}));
  EXPECT_EQ(s0.ints("axes"), (Shape{0, 1, 2}));
  EXPECT_EQ(s0.ints("steps"), (Shape{1, 1, 1}));
  EXPECT_EQ(s1.outputs, std::vector<ValueId>{b});
  EXPECT_EQ(s1.ints("starts"), (Shape{0, 3, 0}));
  EXPECT_EQ(s1.ints("ends"), (Shape{2, 10, 4}));
  EXPECT_EQ(g.nodes()[3].op, "Neg");
}

TEST(SplitToSlices, AnOmittedOutputGetsNoSlice) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {6});
  ValueId c = g.add_value("c", kFloat32, {3});
  g.add_node(Node{"Split",
                  "split",
                  {x},
                  {kNoValue, kNoValue, c},
                  {{"axis", int64_t{0}}, {"split", Shape{1, 2, 3}}}});
  g.add_output(c);
  EXPECT_EQ(split_to_slices(g), 1u);
  g.verify();
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].ints("starts"), (Shape{3}));
  EXPECT_EQ(g.nodes()[0].ints("ends"), (Shape{6}));
}

TEST(SplitToSlices, EachPartFusesWithItsReader) {
  // An attention's Q / K / V: a product split in three, each part reshaped into heads and
  // transposed. Before, the Split was a kernel of its own, copying what the transposes copy again.
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 8, 48});
  std::vector<ValueId> parts;
  for (int k = 0; k < 3; ++k) {
    parts.push_back(g.add_value("p" + std::to_string(k), kFloat32, {1, 8, 16}));
  }
  g.add_node(
      Node{"Split", "split", {x}, parts, {{"axis", int64_t{2}}, {"split", Shape{16, 16, 16}}}});
  for (int k = 0; k < 3; ++k) {
    ValueId h = g.add_op("Reshape", "reshape" + std::to_string(k), {parts[k]},
                         {{"shape", Shape{1, 8, 2, 8}}}, kFloat32, {1, 8, 2, 8});
    g.add_output(g.add_op("Transpose", "transpose" + std::to_string(k), {h},
                          {{"perm", Shape{0, 2, 1, 3}}}, kFloat32, {1, 2, 8, 8}));
  }
  EXPECT_EQ(split_to_slices(g), 1u);
  g.sort_topologically();
  g.verify();
  const std::vector<FusedGroup> groups = fuse_ops(g, true);
  ASSERT_EQ(groups.size(), 3u) << fused_groups_to_string(g, groups);
  for (const FusedGroup& grp : groups) {
    ASSERT_EQ(grp.nodes.size(), 3u) << fused_groups_to_string(g, groups);
    EXPECT_EQ(g.nodes()[grp.nodes[0]].op, "Slice");
    EXPECT_EQ(grp.inputs, std::vector<ValueId>{x});
  }
}

}  // namespace
}  // namespace kiln::graph
