// sink_reshapes on 3-D layers over frames as rows: views [N, C, D, H*W] -> [N, C, D, H, W] move
// down past elementwise operators (a residual that is no view reshaped to 4-D itself), channel
// Concats, and cancel against the Reshapes back to 4-D, so that the chain stays 4-D for
// alter_layout. (1-D chains: graph_lift_conv1d_test.cc; numerics through the build:
// tests/correctness/volume_ops_test.cc.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/alter_layout.h"
#include "compiler/graph/sink_reshapes.h"
#include "tests/common/four_d_ops.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using Shape = std::vector<int64_t>;

Attrs reshape_to(const Shape& s) { return {{"shape", s}}; }

TEST(SinkReshapes, FramesAsRowsChainStaysFourD) {
  // a, b: 4-D [1, 16, 4, 12] (two convolutions' outputs) viewed as [1, 16, 4, 3, 4];
  // Relu(a) + r (a 5-D input), concatenated with b's view, viewed as 4-D again.
  Graph g;
  const Shape rows{1, 16, 4, 12}, frames{1, 16, 4, 3, 4};
  ValueId a = g.add_input("a", kFloat32, rows);
  ValueId b = g.add_input("b", kFloat32, rows);
  ValueId r = g.add_input("r", kFloat32, frames);
  ValueId av = g.add_op("Reshape", "a_view", {a}, reshape_to(frames), kFloat32, frames);
  ValueId bv = g.add_op("Reshape", "b_view", {b}, reshape_to(frames), kFloat32, frames);
  ValueId relu = g.add_op("Relu", "relu", {av}, {}, kFloat32, frames);
  ValueId sum = g.add_op("Add", "residual", {relu, r}, {}, kFloat32, frames);
  const Shape cat{1, 32, 4, 3, 4};
  ValueId c = g.add_op("Concat", "cat", {sum, bv}, {{"axis", int64_t{1}}}, kFloat32, cat);
  ValueId back =
      g.add_op("Reshape", "rows", {c}, reshape_to({1, 32, 4, 12}), kFloat32, {1, 32, 4, 12});
  ValueId s = g.add_op("Sigmoid", "after", {back}, {}, kFloat32, {1, 32, 4, 12});
  g.add_output(s);
  EXPECT_EQ(sink_reshapes(g), 3u);  // Relu, Add, Concat
  g.verify();
  const std::vector<std::string> ops = testing::four_d_ops(g);
  // The residual r reshaped to 4-D; nothing else left but the 4-D operators.
  EXPECT_EQ(ops, (std::vector<std::string>{"Relu", "Reshape", "Add", "Concat", "Sigmoid"}));
  const Node& concat = g.nodes()[3];
  EXPECT_EQ(concat.inputs[1], b);
  EXPECT_EQ(concat.i("axis"), 1);
  EXPECT_EQ(g.value(concat.outputs[0]).shape, (Shape{1, 32, 4, 12}));
  EXPECT_EQ(g.nodes()[4].inputs[0], concat.outputs[0]);
}

// A view that is a graph output, a broadcast of another shape, and a Reshape that is not a view
// (its channels regrouped) stay as they are.
TEST(SinkReshapes, LeavesOtherShapesAlone) {
  Graph g;
  const Shape rows{1, 8, 4, 6}, frames{1, 8, 4, 2, 3};
  ValueId a = g.add_input("a", kFloat32, rows);
  ValueId per_channel = g.add_input("scale", kFloat32, {8, 1, 1, 1});
  ValueId av = g.add_op("Reshape", "a_view", {a}, reshape_to(frames), kFloat32, frames);
  ValueId m = g.add_op("Mul", "scale", {av, per_channel}, {}, kFloat32, frames);
  ValueId regrouped =
      g.add_op("Reshape", "regroup", {a}, reshape_to({1, 4, 2, 4, 6}), kFloat32, {1, 4, 2, 4, 6});
  ValueId relu = g.add_op("Relu", "relu", {regrouped}, {}, kFloat32, {1, 4, 2, 4, 6});
  g.add_output(m);
  g.add_output(relu);
  g.add_output(av);
  EXPECT_EQ(sink_reshapes(g), 0u);
  g.verify();
  EXPECT_EQ(g.nodes().size(), 4u);
}

}  // namespace
}  // namespace kiln::graph
