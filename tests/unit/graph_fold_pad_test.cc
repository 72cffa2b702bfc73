// fold_pad: which Pads fold into their readers (zeros on the spatial dimensions, every reader a
// Conv's data or an AveragePool whose own padding is zero or counted), what the readers' pads and
// count_include_pad become, and the Pads that stay. (The numerics against ONNX Runtime are in
// tests/correctness/graph_build_test.cc: ZeroPadsFoldIntoPoolsAndConvolutions.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/fold_pad.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

ValueId pad(Graph& g, ValueId x, Shape pads, float value = 0.0f, std::string mode = "constant") {
  Shape s = g.value(x).shape;
  const size_t rank = s.size();
  for (size_t d = 0; d < rank; ++d) s[d] += pads[d] + pads[d + rank];
  return g.add_op("Pad", "pad" + std::to_string(g.nodes().size()), {x},
                  {{"mode", mode}, {"pads", pads}, {"value", value}}, kFloat32, s);
}

ValueId avg_pool(Graph& g, ValueId x, Shape pads, int64_t count_include_pad = 0,
                 int64_t ceil_mode = 0) {
  Shape s = g.value(x).shape;
  s[2] += pads[0] + pads[2] - 2;
  s[3] += pads[1] + pads[3] - 2;
  return g.add_op("AveragePool", "avg" + std::to_string(g.nodes().size()), {x},
                  {{"kernel_shape", Shape{3, 3}},
                   {"strides", Shape{1, 1}},
                   {"dilations", Shape{1, 1}},
                   {"pads", pads},
                   {"ceil_mode", ceil_mode},
                   {"count_include_pad", count_include_pad}},
                  kFloat32, s);
}

ValueId conv(Graph& g, ValueId x, Shape pads) {
  Shape s = g.value(x).shape;
  ValueId w = g.add_constant("w" + std::to_string(g.nodes().size()),
                             testing::random_array({8, s[1], 3, 3}, 3));
  s[1] = 8;
  s[2] += pads[0] + pads[2] - 2;
  s[3] += pads[1] + pads[3] - 2;
  return g.add_op("Conv", "conv" + std::to_string(g.nodes().size()), {x, w},
                  {{"kernel_shape", Shape{3, 3}},
                   {"strides", Shape{1, 1}},
                   {"dilations", Shape{1, 1}},
                   {"pads", pads},
                   {"group", int64_t{1}}},
                  kFloat32, s);
}

TEST(FoldPad, IntoAnAveragePoolAndAConvolutionReadingOnePad) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 4, 6, 6});
  ValueId p = pad(g, x, {0, 0, 1, 2, 0, 0, 3, 1});  // asymmetric: top 1, left 2, bottom 3, right 1
  g.add_output(avg_pool(g, p, {0, 0, 0, 0}));
  g.add_output(conv(g, p, {1, 0, 0, 1}));
  EXPECT_EQ(fold_pad(g), 1u);
  EXPECT_EQ(g.remove_dead_nodes(), 1u);
  g.verify();
  ASSERT_EQ(g.nodes().size(), 2u);
  const Node& a = g.nodes()[0];
  EXPECT_EQ(a.op, "AveragePool");
  EXPECT_EQ(a.inputs[0], x);
  EXPECT_EQ(a.ints("pads"), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(a.i("count_include_pad"), 1);
  const Node& c = g.nodes()[1];
  EXPECT_EQ(c.inputs[0], x);
  EXPECT_EQ(c.ints("pads"), (Shape{2, 2, 3, 2}));
}

TEST(FoldPad, AnAveragePoolCountingItsOwnPaddingTakesMore) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 4, 6, 6});
  g.add_output(avg_pool(g, pad(g, x, {0, 0, 1, 1, 0, 0, 1, 1}), {1, 1, 1, 1}, 1));
  EXPECT_EQ(fold_pad(g), 1u);
  g.remove_dead_nodes();
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].ints("pads"), (Shape{2, 2, 2, 2}));
}

TEST(FoldPad, PadsThatStay) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 4, 6, 6});
  const Shape same{0, 0, 1, 1, 0, 0, 1, 1};
  // A value other than zero; a reflection; padding the channels; a negative pad (a crop).
  g.add_output(avg_pool(g, pad(g, x, same, 0.5f), {0, 0, 0, 0}));
  g.add_output(avg_pool(g, pad(g, x, same, 0.0f, "reflect"), {0, 0, 0, 0}));
  g.add_output(conv(g, pad(g, x, {0, 1, 1, 1, 0, 0, 1, 1}), {0, 0, 0, 0}));
  g.add_output(conv(g, pad(g, x, {0, 0, 1, -1, 0, 0, 1, 1}), {0, 0, 0, 0}));
  // A pool whose own padding is not counted; a pool in ceil mode; a MaxPool (its padding is not
  // zeros) beside a foldable reader; a Pad that is a graph output.
  g.add_output(avg_pool(g, pad(g, x, same), {1, 1, 1, 1}, 0));
  g.add_output(avg_pool(g, pad(g, x, same), {0, 0, 0, 0}, 0, 1));
  ValueId shared = pad(g, x, same);
  g.add_output(avg_pool(g, shared, {0, 0, 0, 0}));
  g.add_output(g.add_op("MaxPool", "max", {shared},
                        {{"kernel_shape", Shape{3, 3}}, {"pads", Shape{0, 0, 0, 0}}}, kFloat32,
                        {1, 4, 6, 6}));
  ValueId out = pad(g, x, same);
  g.add_output(conv(g, out, {0, 0, 0, 0}));
  g.add_output(out);
  const std::string before = g.to_string();
  EXPECT_EQ(fold_pad(g), 0u);
  EXPECT_EQ(g.to_string(), before);
}

}  // namespace
}  // namespace kiln::graph
