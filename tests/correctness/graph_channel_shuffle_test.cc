// Channel shuffles (Reshape -> Transpose -> Reshape over the channels, then a Split or Slices)
// built with gather_channel_permutations and alter_layout's blocked ChannelGather, against ONNX
// Runtime and against the build without layouts (where the chain runs as written): ShuffleNet V2's
// blocks with channel counts that pad their blocks (29 + 29), a stride-2 block whose branches both
// read the input, a stage's last shuffle read whole, and a shuffle of 3 groups cut by Slices.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;
using Shape = std::vector<int64_t>;

class ChannelShuffleTest : public GraphBuildTest {
 protected:
  /// A 1x1 Conv (+ Relu) from `in` (cin channels) to `out` (cout channels).
  void pointwise(MB& m, const std::string& in, int64_t cin, int64_t cout, const std::string& out,
                 bool relu = true) {
    m.init(out + "_w", {cout, cin, 1, 1});
    m.init(out + "_b", {cout});
    m.node("Conv", {in, out + "_w", out + "_b"}, {relu ? out + "_c" : out});
    if (relu) m.node("Relu", {out + "_c"}, {out});
  }

  /// A depthwise 3x3 Conv of `c` channels with stride `s`.
  void depthwise(MB& m, const std::string& in, int64_t c, int64_t s, const std::string& out) {
    m.init(out + "_w", {c, 1, 3, 3});
    m.init(out + "_b", {c});
    auto* n = m.node("Conv", {in, out + "_w", out + "_b"}, {out});
    MB::attr(n, "pads", Shape{1, 1, 1, 1});
    MB::attr(n, "strides", Shape{s, s});
    MB::attr(n, "group", c);
  }

  /// Concat(parts) shuffled in `groups` groups of c / groups channels at n x h x w: `out`.
  void shuffle(MB& m, const std::vector<std::string>& parts, int64_t c, int64_t groups, int64_t h,
               int64_t w, const std::string& out, int64_t n = 1) {
    MB::attr(m.node("Concat", parts, {out + "_cat"}), "axis", int64_t{1});
    m.init_int64(out + "_s5", {n, groups, c / groups, h, w});
    m.init_int64(out + "_s4", {n, c, h, w});
    m.node("Reshape", {out + "_cat", out + "_s5"}, {out + "_r5"});
    MB::attr(m.node("Transpose", {out + "_r5"}, {out + "_t5"}), "perm", Shape{0, 2, 1, 3, 4});
    m.node("Reshape", {out + "_t5", out + "_s4"}, {out});
  }

  /// One ShuffleNet V2 unit of stride 1 on `in` (2 * half channels): a Split in halves, the
  /// second through pointwise / depthwise / pointwise, then the shuffle of both.
  void unit(MB& m, const std::string& in, int64_t half, int64_t h, const std::string& out) {
    m.init_int64(out + "_split", {half, half});
    MB::attr(m.node("Split", {in, out + "_split"}, {out + "_x1", out + "_x2"}), "axis", int64_t{1});
    pointwise(m, out + "_x2", half, half, out + "_p1");
    depthwise(m, out + "_p1", half, 1, out + "_dw");
    pointwise(m, out + "_dw", half, half, out + "_p2");
    shuffle(m, {out + "_x1", out + "_p2"}, 2 * half, 2, h, h, out);
  }
};

TEST_F(ChannelShuffleTest, ShuffleNetStage) {
  // A stride-2 unit (both branches read the stem), two stride-1 units, and the stage's output
  // shuffle read whole by a 1x1 Conv and returned as it is.
  const int64_t half = 29, h = 8;
  MB m;
  m.input("x", {1, 24, 2 * h, 2 * h});
  depthwise(m, "x", 24, 2, "b1_dw");
  pointwise(m, "b1_dw", 24, half, "b1");
  pointwise(m, "x", 24, half, "b2_p1");
  depthwise(m, "b2_p1", half, 2, "b2_dw");
  pointwise(m, "b2_dw", half, half, "b2");
  shuffle(m, {"b1", "b2"}, 2 * half, 2, h, h, "s0");
  unit(m, "s0", half, h, "s1");
  unit(m, "s1", half, h, "s2");
  pointwise(m, "s2", 2 * half, 32, "head");
  m.output("head");
  m.output("s2");
  check(m, "shufflenet_stage", /*layouts=*/true);
}

TEST_F(ChannelShuffleTest, ThreeGroupsCutBySlices) {
  // 48 channels (blocks of 16) in 3 groups, the shuffled value cut by Slice nodes into a first
  // third and the rest, each read by a convolution.
  MB m(13);
  m.input("x", {1, 8, 6, 6});
  pointwise(m, "x", 8, 16, "a");
  pointwise(m, "x", 8, 32, "b");
  shuffle(m, {"a", "b"}, 48, 3, 6, 6, "s");
  m.init_int64("starts0", {0});
  m.init_int64("ends0", {16});
  m.init_int64("starts1", {16});
  m.init_int64("ends1", {48});
  m.init_int64("axes", {1});
  m.node("Slice", {"s", "starts0", "ends0", "axes"}, {"first"});
  m.node("Slice", {"s", "starts1", "ends1", "axes"}, {"rest"});
  pointwise(m, "first", 16, 16, "y0", false);
  pointwise(m, "rest", 32, 16, "y1", false);
  m.output("y0");
  m.output("y1");
  check(m, "three_groups", /*layouts=*/true);
}

TEST_F(ChannelShuffleTest, InputsInDifferentLayouts) {
  // One part of the shuffle is the graph's NCHW input, the other a blocked convolution's output:
  // the gather reads both in NCHW (the blocked one converted), 4 groups of 6, batch 2.
  MB m;
  m.input("x", {2, 8, 5, 7});
  pointwise(m, "x", 8, 16, "a");
  shuffle(m, {"x", "a"}, 24, 4, 5, 7, "s", 2);
  pointwise(m, "s", 24, 8, "y", false);
  m.output("y");
  m.output("s");
  check(m, "mixed_layouts", /*layouts=*/true);
}

}  // namespace
}  // namespace kiln::graph
