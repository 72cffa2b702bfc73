// The graph IR: building, printing, verifying and the rewriting helpers passes rely on.
#include "compiler/graph/graph.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;

/// x -> Conv(x, w) -> Relu -> out
struct SmallGraph {
  Graph g;
  ValueId x, w, conv, relu;
  SmallGraph() {
    x = g.add_input("x", kFloat32, {1, 3, 8, 8});
    w = g.add_constant("w1", runtime::NDArray::empty({4, 3, 3, 3}, kFloat32));
    conv = g.add_op("Conv", "conv1", {x, w},
                    {{"strides", std::vector<int64_t>{2, 2}},
                     {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                     {"group", int64_t{1}}},
                    kFloat32, {1, 4, 4, 4});
    relu = g.add_op("Relu", "relu1", {conv}, {}, kFloat32, {1, 4, 4, 4});
    g.add_output(relu);
  }
};

TEST(GraphTest, BuildAndQuery) {
  SmallGraph s;
  Graph& g = s.g;
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.inputs(), std::vector<ValueId>{s.x});
  EXPECT_TRUE(g.value(s.w).is_constant());
  EXPECT_FALSE(g.value(s.x).is_constant());
  EXPECT_EQ(g.value(s.w).shape, (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(g.producer(s.conv), 0);
  EXPECT_EQ(g.producer(s.x), -1);
  EXPECT_EQ(g.consumers(s.conv), std::vector<size_t>{1});
  EXPECT_EQ(g.consumers(s.x), std::vector<size_t>{0});
  EXPECT_TRUE(g.is_output(s.relu));
  EXPECT_EQ(g.find_value("w1"), s.w);
  EXPECT_EQ(g.value(s.x).ir_dtype(), ir::kFloat32);
  EXPECT_EQ(g.find_value("nope"), kNoValue);
  const Node& conv = g.nodes()[0];
  EXPECT_EQ(conv.i("group"), 1);
  EXPECT_EQ(conv.ints("strides"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv.i("missing", 7), 7);
  EXPECT_THROW(conv.i("missing"), InternalError);
  EXPECT_THROW(conv.f("group"), InternalError);  // wrong kind
  EXPECT_NO_THROW(g.verify());
}

TEST(GraphTest, Printer) {
  SmallGraph s;
  EXPECT_EQ(s.g.node_to_string(s.g.nodes()[0]),
            "%2 = Conv(%0, %1) {group=1, pads=[1,1,1,1], strides=[2,2]} : float32[1,4,4,4]");
  EXPECT_EQ(s.g.to_string(),
            "graph(%0 \"x\": float32[1,3,8,8]) {\n"
            "  const %1 \"w1\" : float32[4,3,3,3]\n"
            "  %2 = Conv(%0, %1) {group=1, pads=[1,1,1,1], strides=[2,2]} : float32[1,4,4,4]\n"
            "  %3 = Relu(%2) : float32[1,4,4,4]\n"
            "  return %3\n"
            "}\n");
}

TEST(GraphTest, PrinterAttributeKindsAndMultipleOutputs) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {2});
  ValueId a = g.add_value("a", kFloat32, {2});
  ValueId b = g.add_value("b", runtime::kInt64, {});
  Attrs attrs{
      {"alpha", 0.5f},
      {"mode", std::string("constant")},
      {"scales", std::vector<float>{1.5f, 2.0f}},
      {"value", std::make_shared<const runtime::NDArray>(runtime::NDArray::empty({3}, kFloat32))}};
  g.add_node(Node{"Custom", "c", {x, kNoValue}, {a, b}, attrs});
  g.add_output(a);
  EXPECT_EQ(g.node_to_string(g.nodes()[0]),
            "%1, %2 = Custom(%0, _) {alpha=0.5, mode=\"constant\", scales=[1.5,2], "
            "value=tensor<float32[3]>} : float32[2], int64[]");
  EXPECT_NO_THROW(g.verify());
}

TEST(GraphTest, VerifierCatchesBrokenGraphs) {
  {  // out of topological order
    SmallGraph s;
    std::swap(s.g.nodes()[0], s.g.nodes()[1]);
    EXPECT_THROW(s.g.verify(), InternalError);
    s.g.sort_topologically();
    EXPECT_NO_THROW(s.g.verify());
    EXPECT_EQ(s.g.nodes()[0].op, "Conv");
  }
  {  // an input nobody defines
    SmallGraph s;
    ValueId dangling = s.g.add_value("dangling", kFloat32, {1});
    s.g.nodes()[1].inputs.push_back(dangling);
    try {
      s.g.verify();
      FAIL() << "expected InternalError";
    } catch (const InternalError& e) {
      EXPECT_NE(std::string(e.what()).find("'relu1'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("dangling"), std::string::npos) << e.what();
    }
  }
  {  // an untyped value
    SmallGraph s;
    s.g.value(s.conv).typed = false;
    EXPECT_THROW(s.g.verify(), InternalError);
  }
  {  // a value produced twice
    SmallGraph s;
    s.g.nodes()[1].outputs = {s.conv};
    EXPECT_THROW(s.g.verify(), InternalError);
  }
  {  // an id out of range
    SmallGraph s;
    s.g.nodes()[1].inputs = {99};
    EXPECT_THROW(s.g.verify(), InternalError);
  }
}

TEST(GraphTest, InputWithDefault) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {2});
  auto dflt = std::make_shared<const runtime::NDArray>(
      runtime::NDArray::from_vector<float>({1.0f, 2.0f}, {2}));
  ValueId b = g.add_input_with_default("b", dflt);
  g.add_output(g.add_op("Add", "add", {x, b}, {}, kFloat32, {2}));
  EXPECT_EQ(g.inputs(), (std::vector<ValueId>{x, b}));
  EXPECT_FALSE(g.value(b).is_constant());  // callers may replace it: no pass may fold it
  EXPECT_EQ(g.value(b).type_string(), "float32[2]");
  EXPECT_EQ(g.input_default(b), dflt);
  EXPECT_EQ(g.input_default(x), nullptr);
  EXPECT_NE(g.to_string().find("%1 \"b\": float32[2] = default"), std::string::npos)
      << g.to_string();
  EXPECT_NO_THROW(g.verify());
  Graph copy = g;
  EXPECT_EQ(copy.input_default(b), dflt);
  // A default of another shape than its input's is a broken invariant.
  g.value(b).shape = {3};
  try {
    g.verify();
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'b' is float32[3] but its default is float32[2]"),
              std::string::npos)
        << e.what();
  }
}

TEST(GraphTest, RewriteReplaceAndRemoveDead) {
  SmallGraph s;
  Graph& g = s.g;
  // Replace Relu by Sigmoid writing a new value, then redirect uses and drop the old node.
  ValueId sig = g.add_op("Sigmoid", "sig", {s.conv}, {}, kFloat32, {1, 4, 4, 4});
  g.replace_all_uses(s.relu, sig);
  EXPECT_EQ(g.outputs(), std::vector<ValueId>{sig});
  EXPECT_EQ(g.remove_dead_nodes(), 1u);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[1].op, "Sigmoid");
  EXPECT_NO_THROW(g.verify());
  // Replacing a node in place keeps its outputs.
  g.nodes()[1] = Node{"Tanh", "tanh", {s.conv}, {sig}, {}};
  EXPECT_NO_THROW(g.verify());
  EXPECT_NE(g.to_string().find("%4 = Tanh(%2)"), std::string::npos) << g.to_string();
  // Copies share constant data but not structure.
  Graph copy = g;
  copy.nodes().clear();
  EXPECT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(copy.value(s.w).data.get(), g.value(s.w).data.get());
}

}  // namespace
}  // namespace kiln::graph
