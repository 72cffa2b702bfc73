// Grouped convolutions whose groups pad_groups pads to whole channel blocks (RegNet's X and Y
// blocks, groups of 40 channels in blocks of 16), end to end: built with and without alter_layout
// (and the padding), fused and not, each against ONNX Runtime (tests/common/graph_build_check.h);
// the build's report says whether the padding happened.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;

/// RegNet's bottleneck with `c` channels in groups of `width`: 1x1 Conv, Relu, 3x3 grouped Conv,
/// Relu, [squeeze-excitation], 1x1 Conv, the residual Add and Relu. `body_output` also makes the
/// grouped convolution's output a graph output.
MB regnet_block(int64_t in, int64_t c, int64_t width, bool se, bool body_output) {
  MB m;
  m.input("x", {1, in, 7, 7});
  m.init("wa", {c, in, 1, 1});
  m.init("ba", {c});
  m.init("wb", {c, width, 3, 3}, -0.2f, 0.2f);
  m.init("bb", {c});
  m.init("wc", {in, c, 1, 1}, -0.2f, 0.2f);
  m.init("bc", {in});
  m.node("Conv", {"x", "wa", "ba"}, {"a"});
  m.node("Relu", {"a"}, {"ar"});
  auto* b = m.node("Conv", {"ar", "wb", "bb"}, {"b"});
  MB::attr(b, "pads", std::vector<int64_t>{1, 1, 1, 1});
  MB::attr(b, "group", c / width);
  m.node("Relu", {"b"}, {"br"});
  std::string body = "br";
  if (se) {
    m.init("w1", {4, c, 1, 1});
    m.init("b1", {4});
    m.init("w2", {c, 4, 1, 1});
    m.init("b2", {c});
    m.node("GlobalAveragePool", {"br"}, {"pooled"});
    m.node("Conv", {"pooled", "w1", "b1"}, {"sq"});
    m.node("Relu", {"sq"}, {"sqr"});
    m.node("Conv", {"sqr", "w2", "b2"}, {"ex"});
    m.node("Sigmoid", {"ex"}, {"scale"});
    m.node("Mul", {"scale", "br"}, {"scaled"});
    body = "scaled";
  }
  m.node("Conv", {body, "wc", "bc"}, {"cc"});
  m.node("Add", {"cc", "x"}, {"sum"});
  m.node("Relu", {"sum"}, {"y"});
  m.output("y");
  if (body_output) m.output("b");
  return m;
}

class GroupedPaddingTest : public GraphBuildTest {
 protected:
  /// How many grouped convolutions the build pads, with AVX-512's blocks of 16.
  size_t groups_padded(const MB& m, const std::string& tag) {
    const std::string path = (dir_.path() / (tag + "_report.onnx")).string();
    EXPECT_TRUE(m.write(path));
    BuildOptions options;
    options.pad_channels_to = 16;
    BuildReport report;
    build_graph(import_onnx(path), "llvm -mcpu=native", options, &report);
    return report.groups_padded;
  }
};

TEST_F(GroupedPaddingTest, RegNetXBlock) {
  const MB m = regnet_block(16, 80, 40, /*se=*/false, /*body_output=*/false);
  EXPECT_EQ(groups_padded(m, "regnet_x"), 1u);
  check(m, "regnet_x", /*layouts=*/true);
}

TEST_F(GroupedPaddingTest, RegNetYBlockWithSqueezeExcitation) {
  const MB m = regnet_block(16, 80, 40, /*se=*/true, /*body_output=*/false);
  EXPECT_EQ(groups_padded(m, "regnet_y"), 1u);
  check(m, "regnet_y", /*layouts=*/true);
}

TEST_F(GroupedPaddingTest, GroupedOutputThatIsAGraphOutputStaysMerged) {
  const MB m = regnet_block(16, 80, 40, /*se=*/true, /*body_output=*/true);
  EXPECT_EQ(groups_padded(m, "regnet_refused"), 0u);
  check(m, "regnet_refused", /*layouts=*/true);
}

}  // namespace
}  // namespace kiln::graph
