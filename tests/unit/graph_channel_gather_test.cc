// gather_channel_permutations: which Reshape / Transpose chains are channel permutations, and the
// ChannelGather nodes it makes of a shuffle, the Concat it reads and the Slices that read it.
// (The numerics through the build are in tests/correctness/graph_channel_shuffle_test.cc.)
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/alter_layout.h"
#include "compiler/graph/channel_gather.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

/// (input, channel) per output channel of a ChannelGather's table.
std::vector<std::pair<int32_t, int32_t>> table_of(const Graph& g, const Node& n) {
  const Value& t = g.value(n.inputs.back());
  const int64_t c = t.shape[1];
  const int32_t* d = t.data->data<int32_t>();
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int64_t i = 0; i < c; ++i) out.emplace_back(d[i], d[c + i]);
  return out;
}

/// Concat(a, b) -> Reshape [1, groups, C/groups, H, W] -> Transpose(0, 2, 1, 3, 4) -> Reshape.
ValueId shuffle(Graph& g, ValueId a, ValueId b, int64_t c, int64_t groups, int64_t hw) {
  ValueId cat = g.add_op("Concat", "cat", {a, b}, {{"axis", int64_t{1}}}, kFloat32, {1, c, hw, hw});
  ValueId r5 = g.add_op("Reshape", "r5", {cat}, {{"shape", Shape{1, groups, c / groups, hw, hw}}},
                        kFloat32, {1, groups, c / groups, hw, hw});
  ValueId t5 = g.add_op("Transpose", "t5", {r5}, {{"perm", Shape{0, 2, 1, 3, 4}}}, kFloat32,
                        {1, c / groups, groups, hw, hw});
  return g.add_op("Reshape", "r4", {t5}, {{"shape", Shape{1, c, hw, hw}}}, kFloat32,
                  {1, c, hw, hw});
}

Attrs channel_slice(int64_t from, int64_t to, int64_t hw) {
  return {{"starts", Shape{0, from, 0, 0}},
          {"ends", Shape{1, to, hw, hw}},
          {"axes", Shape{0, 1, 2, 3}},
          {"steps", Shape{1, 1, 1, 1}}};
}

TEST(ChannelGather, ShuffleOfConcatCutInHalves) {
  Graph g;
  ValueId a = g.add_input("a", kFloat32, {1, 3, 4, 4});
  ValueId b = g.add_input("b", kFloat32, {1, 3, 4, 4});
  ValueId s = shuffle(g, a, b, 6, 2, 4);
  ValueId x1 = g.add_op("Slice", "x1", {s}, channel_slice(0, 3, 4), kFloat32, {1, 3, 4, 4});
  ValueId x2 = g.add_op("Slice", "x2", {s}, channel_slice(3, 6, 4), kFloat32, {1, 3, 4, 4});
  g.add_output(x1);
  g.add_output(x2);
  EXPECT_EQ(gather_channel_permutations(g), 2u);
  // The shuffle's Concat, Reshapes and Transpose are gone: each half reads a and b.
  ASSERT_EQ(g.nodes().size(), 2u);
  using T = std::vector<std::pair<int32_t, int32_t>>;
  // Shuffled channels: a0 b0 a1 b1 a2 b2.
  const Node &first = g.nodes()[0], &second = g.nodes()[1];
  EXPECT_EQ(first.op, "ChannelGather");
  EXPECT_EQ(first.outputs, std::vector<ValueId>{x1});
  EXPECT_EQ(first.inputs.size(), 3u);
  EXPECT_EQ(first.inputs[0], a);
  EXPECT_EQ(first.inputs[1], b);
  EXPECT_EQ(table_of(g, first), (T{{0, 0}, {1, 0}, {0, 1}}));
  EXPECT_EQ(second.outputs, std::vector<ValueId>{x2});
  EXPECT_EQ(table_of(g, second), (T{{1, 1}, {0, 2}, {1, 2}}));
}

TEST(ChannelGather, GatherOfAGatherReadOnlyByIt) {
  // A ShuffleNet stage's last unit: its first half comes from the shuffle before, and its own
  // shuffle is read whole: the gather reads the inner one's inputs (rule 4).
  Graph g;
  ValueId a = g.add_input("a", kFloat32, {1, 2, 3, 3});
  ValueId b = g.add_input("b", kFloat32, {1, 2, 3, 3});
  ValueId c = g.add_input("c", kFloat32, {1, 2, 3, 3});
  ValueId s = shuffle(g, a, b, 4, 2, 3);  // a0 b0 a1 b1
  ValueId x1 = g.add_op("Slice", "x1", {s}, channel_slice(0, 2, 3), kFloat32, {1, 2, 3, 3});
  ValueId t = shuffle(g, x1, c, 4, 2, 3);  // x1[0] c0 x1[1] c1 = a0 c0 b0 c1
  g.add_output(t);
  EXPECT_EQ(gather_channel_permutations(g), 1u);
  ASSERT_EQ(g.nodes().size(), 1u);
  const Node& n = g.nodes()[0];
  EXPECT_EQ(n.op, "ChannelGather");
  EXPECT_EQ(n.inputs, (std::vector<ValueId>{c, a, b, n.inputs.back()}));
  using T = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(table_of(g, n), (T{{1, 0}, {0, 0}, {2, 0}, {0, 1}}));
}

TEST(ChannelGather, OnlyChannelPermutations) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 4, 3, 3});
  // Swapping H and W (square, so the shape returns) moves elements within a channel.
  ValueId hw =
      g.add_op("Transpose", "hw", {x}, {{"perm", Shape{0, 1, 3, 2}}}, kFloat32, {1, 4, 3, 3});
  // Channels and rows interleaved: [1, 4, 3, 3] -> [1, 2, 2, 3, 3] -> (0, 1, 3, 2, 4) -> back.
  ValueId r5 =
      g.add_op("Reshape", "r5", {x}, {{"shape", Shape{1, 2, 2, 3, 3}}}, kFloat32, {1, 2, 2, 3, 3});
  ValueId t5 = g.add_op("Transpose", "t5", {r5}, {{"perm", Shape{0, 1, 3, 2, 4}}}, kFloat32,
                        {1, 2, 3, 2, 3});
  ValueId mixed =
      g.add_op("Reshape", "r4", {t5}, {{"shape", Shape{1, 4, 3, 3}}}, kFloat32, {1, 4, 3, 3});
  // A reshape there and back: the identity, left as it is.
  ValueId flat =
      g.add_op("Reshape", "flat", {x}, {{"shape", Shape{1, 36}}}, kFloat32, Shape{1, 36});
  ValueId back =
      g.add_op("Reshape", "back", {flat}, {{"shape", Shape{1, 4, 3, 3}}}, kFloat32, {1, 4, 3, 3});
  for (ValueId v : {hw, mixed, back}) g.add_output(v);
  const std::vector<Node> before = g.nodes();
  EXPECT_EQ(gather_channel_permutations(g), 0u);
  ASSERT_EQ(g.nodes().size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(g.nodes()[i].op, before[i].op);
  // Channels last and back again: a permutation of the channels, the identity.
  std::vector<const Node*> chain;
  Graph r;
  ValueId y = r.add_input("y", kFloat32, {2, 3, 2, 2});
  ValueId t =
      r.add_op("Transpose", "t", {y}, {{"perm", Shape{0, 2, 3, 1}}}, kFloat32, {2, 2, 2, 3});
  ValueId u =
      r.add_op("Transpose", "u", {t}, {{"perm", Shape{0, 3, 1, 2}}}, kFloat32, {2, 3, 2, 2});
  r.add_output(u);
  for (const Node& n : r.nodes()) chain.push_back(&n);
  auto p = chain_channel_permutation(r, {2, 3, 2, 2}, chain);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(*p, (Shape{0, 1, 2}));
}

TEST(ChannelGather, BlockedByAlterLayout) {
  // Between blocked convolutions the gather reads their blocks (29 channels padded to 32, as
  // AVX-512's pad_to makes them) and writes blocks of 16 for its own 29, its table extended with
  // empty columns; nothing converts.
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 16, 4, 4});
  auto conv = [&](ValueId in, int64_t cin, int64_t cout, const char* name) {
    ValueId w = g.add_constant(std::string(name) + "_w",
                               runtime::NDArray::empty({cout, cin, 1, 1}, kFloat32));
    return g.add_op("Conv", name, {in, w},
                    {{"kernel_shape", Shape{1, 1}},
                     {"strides", Shape{1, 1}},
                     {"dilations", Shape{1, 1}},
                     {"pads", Shape{0, 0, 0, 0}},
                     {"group", int64_t{1}}},
                    kFloat32, {1, cout, 4, 4});
  };
  ValueId a = conv(x, 16, 29, "ca");
  ValueId b = conv(x, 16, 29, "cb");
  ValueId s = shuffle(g, a, b, 58, 2, 4);
  ValueId x2 = g.add_op("Slice", "x2", {s}, channel_slice(29, 58, 4), kFloat32, {1, 29, 4, 4});
  g.add_output(conv(x2, 29, 16, "cc"));
  EXPECT_EQ(gather_channel_permutations(g), 1u);
  AlterLayoutOptions opt;
  opt.pad_to = 16;
  const AlterLayoutReport rep = alter_layout(g, opt);
  EXPECT_EQ(rep.convolutions_blocked, 3u);
  EXPECT_EQ(rep.conversions, 2u);  // x into blocks, the output back
  const Node* gather = nullptr;
  for (const Node& n : g.nodes()) {
    if (n.op == "ChannelGather") gather = &n;
  }
  ASSERT_NE(gather, nullptr);
  EXPECT_EQ(gather->i("data_block"), 16);
  EXPECT_EQ(gather->i("out_block"), 16);
  EXPECT_EQ(g.value(gather->outputs[0]).shape, (Shape{1, 2, 4, 4, 16}));
  const auto t = table_of(g, *gather);
  ASSERT_EQ(t.size(), 32u);
  // Shuffled channel c is channel (c % 2) * 29 + c / 2 of the Concat: 29 is b14, 30 is a15.
  EXPECT_EQ(t[0], (std::pair<int32_t, int32_t>{1, 14}));
  EXPECT_EQ(t[1], (std::pair<int32_t, int32_t>{0, 15}));
  EXPECT_EQ(t[28], (std::pair<int32_t, int32_t>{1, 28}));
  EXPECT_EQ(t[29].first, -1);  // the padding
}

}  // namespace
}  // namespace kiln::graph
