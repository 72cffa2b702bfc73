// 3-D convolutions and poolings (video networks, [N, C, D, H, W]) end to end against ONNX Runtime:
// Conv is rewritten at import into a 2-D convolution, over the frames as rows of H*W pixels where
// its kernel's spatial size is 1, else between a depth unfold and reshapes (rewrite_conv3d in
// compiler/graph/ops/nn/conv.cc); the poolings over frames as rows too (rewrite_pool3d in
// ops/nn/pool.cc), lowered as a 2-D pool over H and W then one over D (lower_frames_pool). Each
// case is built fused and not, with and without the blocked layout, and compared with ONNX Runtime
// (tests/common/graph_build_check.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph/onnx_frontend.h"
#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;
using Ints = std::vector<int64_t>;

// Strides, pads and dilations that differ per axis (the depth's own among them), a bias, then a
// batch norm and Relu after the rewritten convolution.
TEST_F(GraphBuildTest, Conv3dStridesPadsDilations) {
  MB m;
  m.input("x", {2, 3, 9, 10, 11});
  m.init("w", {8, 3, 3, 3, 2});
  m.init("b", {8});
  for (const char* p : {"g", "beta", "mean"}) m.init(p, {8});
  m.init("var", {8}, 0.5f, 1.5f);
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  MB::attr(conv, "strides", Ints{2, 1, 2});
  MB::attr(conv, "pads", Ints{1, 0, 1, 2, 1, 0});
  MB::attr(conv, "dilations", Ints{2, 1, 1});
  m.node("BatchNormalization", {"c", "g", "beta", "mean", "var"}, {"bn"});
  m.node("Relu", {"bn"}, {"y"});
  m.output("y");
  check(m, "conv3d", /*layouts=*/true);
}

// Grouped (and depthwise) 3-D convolutions without a bias, (2+1)-D style kernels of depth 1 and
// of spatial size 1, and auto_pad SAME_UPPER.
TEST_F(GraphBuildTest, Conv3dGroupsAndSeparableKernels) {
  MB m;
  m.input("x", {1, 8, 6, 7, 7});
  m.init("wg", {8, 4, 3, 3, 3});  // group 2
  m.init("wd", {8, 1, 3, 1, 1});  // depthwise, temporal only
  m.init("ws", {16, 8, 1, 3, 3});
  auto* g = m.node("Conv", {"x", "wg"}, {"a"});
  MB::attr(g, "group", int64_t{2});
  MB::attr(g, "pads", Ints{1, 1, 1, 1, 1, 1});
  auto* d = m.node("Conv", {"a", "wd"}, {"bb"});
  MB::attr(d, "group", int64_t{8});
  MB::attr(d, "auto_pad", std::string("SAME_UPPER"));
  auto* s = m.node("Conv", {"bb", "ws"}, {"y"});
  MB::attr(s, "strides", Ints{1, 2, 2});
  m.output("y");
  check(m, "conv3d_groups", /*layouts=*/true);
}

// Kernels of spatial size 1 (temporal (KD, 1, 1) and pointwise 1x1x1) are 2-D convolutions over
// the frames as rows of H*W pixels: depth strides, pads and dilations, a bias, a grouped one,
// chained through Relu and a residual Add; and a 1x1x1 with a spatial stride, which is not.
TEST_F(GraphBuildTest, Conv3dTemporalAndPointwiseAsFramesOfRows) {
  MB m;
  m.input("x", {1, 16, 9, 6, 5});
  m.init("wt", {32, 16, 3, 1, 1});
  m.init("bt", {32});
  m.init("wp", {16, 32, 1, 1, 1});
  m.init("wg", {16, 4, 5, 1, 1});  // group 4
  m.init("ws", {16, 16, 1, 1, 1});
  auto* t = m.node("Conv", {"x", "wt", "bt"}, {"t"});
  MB::attr(t, "strides", Ints{2, 1, 1});
  MB::attr(t, "pads", Ints{2, 0, 0, 1, 0, 0});
  MB::attr(t, "dilations", Ints{2, 1, 1});
  m.node("Relu", {"t"}, {"tr"});
  m.node("Conv", {"tr", "wp"}, {"p"});
  auto* g = m.node("Conv", {"p", "wg"}, {"g"});
  MB::attr(g, "group", int64_t{4});
  MB::attr(g, "pads", Ints{2, 0, 0, 2, 0, 0});
  m.node("Add", {"g", "p"}, {"a"});
  auto* s = m.node("Conv", {"a", "ws"}, {"y"});
  MB::attr(s, "strides", Ints{1, 2, 2});
  m.output("y");
  check(m, "conv3d_frames", /*layouts=*/true);
}

// A chain of layers over frames as rows (inception-style, as S3D's): temporal convolutions, a
// Relu, 3-D poolings whose window is spatial only, temporal only, and both (pads, strides,
// ceil_mode, the average not counting the padding), a channel Concat of two branches and a
// residual Add: blocked from end to end, with the reshapes between the layers dropped.
TEST_F(GraphBuildTest, FramesAsRowsChainWithPoolsAndConcat) {
  MB m;
  m.input("x", {1, 16, 7, 9, 8});
  m.init("w1", {16, 16, 3, 1, 1});
  m.init("w2", {16, 16, 1, 1, 1});
  m.init("w3", {32, 32, 3, 1, 1});
  auto* c1 = m.node("Conv", {"x", "w1"}, {"c1"});
  MB::attr(c1, "pads", Ints{1, 0, 0, 1, 0, 0});
  m.node("Relu", {"c1"}, {"r1"});
  auto* sp = m.node("MaxPool", {"r1"}, {"sp"});  // spatial window only
  MB::attr(sp, "kernel_shape", Ints{1, 3, 3});
  MB::attr(sp, "strides", Ints{1, 2, 2});
  MB::attr(sp, "pads", Ints{0, 1, 1, 0, 1, 1});
  m.node("Conv", {"sp", "w2"}, {"b0"});
  auto* tp = m.node("MaxPool", {"sp"}, {"b1"});  // temporal window only
  MB::attr(tp, "kernel_shape", Ints{3, 1, 1});
  MB::attr(tp, "pads", Ints{1, 0, 0, 1, 0, 0});
  MB::attr(m.node("Concat", {"b0", "b1"}, {"cat"}), "axis", int64_t{1});
  auto* c3 = m.node("Conv", {"cat", "w3"}, {"c3"});
  MB::attr(c3, "pads", Ints{1, 0, 0, 1, 0, 0});
  m.node("Add", {"c3", "cat"}, {"res"});
  auto* ap = m.node("AveragePool", {"res"}, {"y"});  // both
  MB::attr(ap, "kernel_shape", Ints{2, 2, 2});
  MB::attr(ap, "strides", Ints{2, 2, 2});
  MB::attr(ap, "pads", Ints{0, 1, 0, 0, 0, 0});
  MB::attr(ap, "ceil_mode", int64_t{1});
  m.node("GlobalMaxPool", {"res"}, {"g"});
  m.output("y");
  m.output("g");
  check(m, "frames_chain", /*layouts=*/true);
}

// Max and average 3-D pooling with pads, strides and ceil_mode (windows clipped at the end), the
// average counting the padding and not, and the global poolings of a 3-D map.
TEST_F(GraphBuildTest, Pool3d) {
  MB m;
  m.input("x", {1, 4, 7, 9, 8});
  auto* mp = m.node("MaxPool", {"x"}, {"mp"});
  MB::attr(mp, "kernel_shape", Ints{3, 3, 2});
  MB::attr(mp, "strides", Ints{2, 2, 2});
  MB::attr(mp, "pads", Ints{1, 1, 0, 1, 1, 0});
  MB::attr(mp, "ceil_mode", int64_t{1});
  auto* ap = m.node("AveragePool", {"x"}, {"ap"});
  MB::attr(ap, "kernel_shape", Ints{2, 3, 3});
  MB::attr(ap, "strides", Ints{2, 2, 1});
  MB::attr(ap, "pads", Ints{0, 1, 1, 1, 1, 1});
  MB::attr(ap, "ceil_mode", int64_t{1});
  auto* ai = m.node("AveragePool", {"x"}, {"ai"});
  MB::attr(ai, "kernel_shape", Ints{3, 2, 2});
  MB::attr(ai, "pads", Ints{1, 1, 1, 1, 1, 1});
  MB::attr(ai, "count_include_pad", int64_t{1});
  m.node("GlobalAveragePool", {"x"}, {"ga"});
  m.node("GlobalMaxPool", {"x"}, {"gm"});
  for (const char* y : {"mp", "ap", "ai", "ga", "gm"}) m.output(y);
  check(m, "pool3d");
}

}  // namespace
}  // namespace kiln::graph
