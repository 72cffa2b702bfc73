// ONNX's integer products, ConvInteger and MatMulInteger (what quantize_dynamic writes), end to
// end against ONNX Runtime: a float input quantized by QuantizeLinear, the integer product over
// int8 / uint8 operands with zero points, and its int32 result cast to float. The products are
// exact in int32, so Kiln and ONNX Runtime must agree exactly (the comparison's tolerance, 1e-4
// relative, is far below one unit). The zero points ONNX allows and ONNX Runtime does not run
// (one per output channel of ConvInteger's weight, one per row of MatMulInteger's A) are checked
// against naive loops, exactly. Malformed zero points are refused naming the input and shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/pack_weights.h"
#include "tests/common/expect_error.h"
#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;
using Ints = std::vector<int64_t>;
using onnx::TensorProto;

/// `count` reproducible 8-bit values in [lo, hi].
std::vector<int> values(size_t count, int lo, int hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(count);
  for (int& x : v) x = d(gen);
  return v;
}

/// x (float, in [-1, 1)) quantized to `elem` by a scale of 1/100 and zero point `zp`.
void quantized_input(MB& m, const std::string& name, const Ints& shape, int elem, int zp) {
  m.input(name + "_f", shape);
  m.init_scalar(name + "_scale", 0.01f);
  m.init_8bit(name + "_zp", {}, elem, {zp});
  m.node("QuantizeLinear", {name + "_f", name + "_scale", name + "_zp"}, {name});
}

TEST_F(GraphBuildTest, ConvIntegerZeroPointsStridesPadsGroups) {
  MB m;
  quantized_input(m, "x", {1, 8, 9, 10}, TensorProto::UINT8, 131);
  m.init_8bit("w", {12, 4, 3, 3}, TensorProto::INT8, values(12 * 4 * 9, -128, 127, 1));
  m.init_8bit("wz", {}, TensorProto::INT8, {-4});
  auto* conv = m.node("ConvInteger", {"x", "w", "x_zp", "wz"}, {"acc"});
  MB::attr(conv, "group", int64_t{2});
  MB::attr(conv, "strides", Ints{2, 1});
  MB::attr(conv, "pads", Ints{1, 2, 0, 1});
  MB::attr(conv, "dilations", Ints{1, 2});
  auto* cast = m.node("Cast", {"acc"}, {"y"});
  MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
  m.output("y");
  check(m, "conv_integer");
}

// Signed data with a scalar weight zero point, a 1-D convolution, and a Relu after the cast that
// fuses with it.
TEST_F(GraphBuildTest, ConvIntegerSignedData1d) {
  MB m;
  quantized_input(m, "x", {2, 6, 17}, TensorProto::INT8, -7);
  m.init_8bit("w", {5, 6, 4}, TensorProto::INT8, values(5 * 6 * 4, -100, 100, 3));
  m.init_8bit("wz", {}, TensorProto::INT8, {3});
  auto* conv = m.node("ConvInteger", {"x", "w", "x_zp", "wz"}, {"acc"});
  MB::attr(conv, "auto_pad", std::string("SAME_UPPER"));
  auto* cast = m.node("Cast", {"acc"}, {"f"});
  MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
  m.node("Relu", {"f"}, {"y"});
  m.output("y");
  check(m, "conv_integer_1d");
}

// A 2-D product with B's zero point per column, as quantize_dynamic's linear layers compute
// (then scaled), and a batched one.
TEST_F(GraphBuildTest, MatMulIntegerPerColumn) {
  MB m;
  quantized_input(m, "a", {7, 33}, TensorProto::UINT8, 120);
  m.init_8bit("b", {33, 20}, TensorProto::INT8, values(33 * 20, -128, 127, 5));
  m.init_8bit("bz", {20}, TensorProto::INT8, values(20, -3, 3, 6));
  m.node("MatMulInteger", {"a", "b", "a_zp", "bz"}, {"acc"});
  auto* cast = m.node("Cast", {"acc"}, {"f"});
  MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
  m.init_scalar("s", 0.5f);
  m.node("Mul", {"f", "s"}, {"y"});
  m.output("y");
  check(m, "matmul_integer");
}

TEST_F(GraphBuildTest, MatMulIntegerBatched) {
  MB m;
  quantized_input(m, "a", {2, 3, 5, 16}, TensorProto::INT8, 9);
  m.init_8bit("b", {16, 24}, TensorProto::INT8, values(16 * 24, -128, 127, 7));
  m.node("MatMulInteger", {"a", "b", "a_zp"}, {"acc"});
  auto* cast = m.node("Cast", {"acc"}, {"y"});
  MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
  m.output("y");
  check(m, "matmul_integer_batched");
}

/// How many ConvInteger and MatMulInteger nodes of `m` pack_weights gives to the VNNI kernels
/// (packed_int8).
size_t packed_for_vnni(const MB& m, const fs::path& dir) {
  const std::string path = (dir / "packed.onnx").string();
  EXPECT_TRUE(m.write(path));
  Graph g = import_onnx(path);
  pack_weights(g, /*dense=*/true);
  size_t packed = 0;
  for (const Node& n : g.nodes()) packed += n.has_attr("packed_int8");
  return packed;
}

// The VNNI kernel's path (pack_weights' packed_int8, topi::dense_int8): uint8 A with its zero
// point, an int8 weight without one, as quantize_dynamic writes BERT's linear layers; 2-D and
// batched, with a requantizing epilogue (scale, round half to even, clip) fused into the tile.
TEST_F(GraphBuildTest, MatMulIntegerPackedForVnni) {
  {
    MB m;
    quantized_input(m, "a", {9, 64}, TensorProto::UINT8, 131);
    m.init_8bit("b", {64, 48}, TensorProto::INT8, values(64 * 48, -128, 127, 12));
    m.node("MatMulInteger", {"a", "b", "a_zp"}, {"acc"});
    auto* cast = m.node("Cast", {"acc"}, {"f"});
    MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
    m.init_scalar("s", 0.0625f);
    m.node("Mul", {"f", "s"}, {"y"});
    m.output("y");
    EXPECT_EQ(packed_for_vnni(m, dir_.path()), 1u);
    check(m, "matmul_integer_vnni");
  }
  {
    MB m;
    quantized_input(m, "a", {2, 7, 32}, TensorProto::UINT8, 7);
    m.init_8bit("b", {32, 32}, TensorProto::INT8, values(32 * 32, -128, 127, 13));
    m.init_8bit("bz", {}, TensorProto::INT8, {0});
    m.node("MatMulInteger", {"a", "b", "a_zp", "bz"}, {"acc"});
    auto* cast = m.node("Cast", {"acc"}, {"f"});
    MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
    m.init_scalar("s", 0.01f);
    m.init_scalar("yz", 100.0f);
    m.node("Mul", {"f", "s"}, {"g"});
    m.node("Round", {"g"}, {"r"});
    m.node("Add", {"r", "yz"}, {"y"});
    m.output("y");
    EXPECT_EQ(packed_for_vnni(m, dir_.path()), 1u);
    check(m, "matmul_integer_vnni_batched");
  }
  {
    // A nonzero weight zero point keeps the generic path.
    MB m;
    quantized_input(m, "a", {4, 16}, TensorProto::UINT8, 3);
    m.init_8bit("b", {16, 16}, TensorProto::INT8, values(16 * 16, -128, 127, 14));
    m.init_8bit("bz", {}, TensorProto::INT8, {2});
    m.node("MatMulInteger", {"a", "b", "a_zp", "bz"}, {"y"});
    m.output("y");
    EXPECT_EQ(packed_for_vnni(m, dir_.path()), 0u);
  }
}

// The VNNI convolution's path (pack_weights' packed_int8, topi::conv2d_nchwc_int8): uint8 data
// with a constant zero point that the padding reads, an int8 weight without one; channels in
// blocks of 64, 16 and an image's 3 rounded up to 4; output channels in whole blocks of 16 and
// with a padded last one; strides and asymmetric padding; a fused requantizing epilogue.
TEST_F(GraphBuildTest, ConvIntegerPackedForVnni) {
  struct Case {
    Ints x, w, strides, pads;
    int zp;
  };
  const std::vector<Case> cases = {
      {{1, 64, 9, 10}, {32, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, 131},
      {{1, 48, 8, 7}, {16, 48, 1, 1}, {2, 2}, {0, 0, 0, 0}, 0},
      {{2, 3, 15, 13}, {16, 3, 7, 7}, {2, 2}, {3, 2, 3, 1}, 128},
      // 24 output channels: a padded last block of 16.
      {{1, 32, 6, 6}, {24, 32, 1, 1}, {1, 1}, {0, 0, 0, 0}, 9},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& cs = cases[k];
    SCOPED_TRACE(k);
    MB m;
    quantized_input(m, "x", cs.x, TensorProto::UINT8, cs.zp);
    const int64_t wn = cs.w[0] * cs.w[1] * cs.w[2] * cs.w[3];
    m.init_8bit("w", cs.w, TensorProto::INT8, values(size_t(wn), -128, 127, uint32_t(20 + k)));
    auto* conv = m.node("ConvInteger", {"x", "w", "x_zp"}, {"acc"});
    MB::attr(conv, "strides", cs.strides);
    MB::attr(conv, "pads", cs.pads);
    auto* cast = m.node("Cast", {"acc"}, {"f"});
    MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
    m.init_scalar("s", 0.001f);
    m.node("Mul", {"f", "s"}, {"g"});
    m.node("Round", {"g"}, {"y"});
    m.output("y");
    EXPECT_EQ(packed_for_vnni(m, dir_.path()), 1u);
    check(m, "conv_integer_vnni_" + std::to_string(k), /*layouts=*/true);
  }
}

// The depthwise int8 convolution (pack_weights' depthwise packing,
// topi::depthwise_conv2d_nchwc_int8: the bytes widened along the channel vector), with the data
// zero point in its padding and in the weights' share, strided and not, dilated; with and without
// alter_layout's blocks, fused and not, exactly ONNX Runtime's sums.
TEST_F(GraphBuildTest, ConvIntegerDepthwisePacked) {
  struct Case {
    Ints x, strides, pads, dilations;
    int64_t k;
    int zp;
  };
  const std::vector<Case> cases = {
      {{1, 32, 9, 10}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, 131},
      {{2, 16, 11, 8}, {2, 2}, {1, 0, 1, 2}, {1, 1}, 3, 0},
      {{1, 48, 7, 7}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 3, 7},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& cs = cases[k];
    SCOPED_TRACE(k);
    MB m;
    quantized_input(m, "x", cs.x, TensorProto::UINT8, cs.zp);
    const int64_t c = cs.x[1];
    m.init_8bit("w", {c, 1, cs.k, cs.k}, TensorProto::INT8,
                values(size_t(c * cs.k * cs.k), -128, 127, uint32_t(40 + k)));
    auto* conv = m.node("ConvInteger", {"x", "w", "x_zp"}, {"acc"});
    MB::attr(conv, "group", c);
    MB::attr(conv, "strides", cs.strides);
    MB::attr(conv, "pads", cs.pads);
    MB::attr(conv, "dilations", cs.dilations);
    auto* cast = m.node("Cast", {"acc"}, {"f"});
    MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
    m.init_scalar("s", 0.01f);
    m.node("Mul", {"f", "s"}, {"y"});
    m.output("y");
    EXPECT_EQ(packed_for_vnni(m, dir_.path()), 1u);
    check(m, "conv_integer_depthwise_" + std::to_string(k), /*layouts=*/true);
  }
}

/// Builds `m`, runs it on `x` (its one input) and returns its one output.
std::vector<float> run_model(const MB& m, const fs::path& dir, const runtime::NDArray& x) {
  const std::string path = (dir / "model.onnx").string();
  EXPECT_TRUE(m.write(path));
  runtime::GraphExecutor exec =
      runtime::GraphExecutor::from_bundle(build_graph(import_onnx(path), "llvm -mcpu=native"), "m");
  exec.set_input(0, x);
  exec.run();
  return exec.output(0).copy().to_vector<float>();
}

/// QuantizeLinear's value of `v` at scale 1/100 and zero point `zp`, in [lo, hi].
int quantize(float v, int zp, int lo, int hi) {
  return std::clamp(static_cast<int>(std::nearbyint(v / 0.01f)) + zp, lo, hi);
}

class IntegerOpsNaive : public GraphBuildTest {};

TEST_F(IntegerOpsNaive, ConvIntegerZeroPointPerOutputChannel) {
  const int64_t C = 6, H = 7, W = 8, M = 5, K = 3;
  MB m;
  quantized_input(m, "x", {1, C, H, W}, TensorProto::UINT8, 140);
  const std::vector<int> w = values(M * C * K * K, -128, 127, 8), wz = values(M, -6, 6, 9);
  m.init_8bit("w", {M, C, K, K}, TensorProto::INT8, w);
  m.init_8bit("wz", {M}, TensorProto::INT8, wz);
  auto* conv = m.node("ConvInteger", {"x", "w", "x_zp", "wz"}, {"acc"});
  MB::attr(conv, "pads", Ints{1, 1, 1, 1});
  auto* cast = m.node("Cast", {"acc"}, {"y"});
  MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
  m.output("y");
  const runtime::NDArray x = testing::random_array({1, C, H, W}, 1, -1.0f, 1.0f);
  const std::vector<float> got = run_model(m, dir_.path(), x);
  const std::vector<float> xf = x.to_vector<float>();
  ASSERT_EQ(got.size(), static_cast<size_t>(M * H * W));
  for (int64_t o = 0; o < M; ++o) {
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t xx = 0; xx < W; ++xx) {
        int64_t acc = 0;
        for (int64_t c = 0; c < C; ++c) {
          for (int64_t i = 0; i < K; ++i) {
            for (int64_t j = 0; j < K; ++j) {
              const int64_t r = y + i - 1, q = xx + j - 1;
              if (r < 0 || r >= H || q < 0 || q >= W) continue;  // the zero point: a real 0
              const int xq = quantize(xf[(c * H + r) * W + q], 140, 0, 255);
              acc += (xq - 140) * (w[((o * C + c) * K + i) * K + j] - wz[o]);
            }
          }
        }
        ASSERT_EQ(got[(o * H + y) * W + xx], static_cast<float>(acc)) << o << " " << y << " " << xx;
      }
    }
  }
}

TEST_F(IntegerOpsNaive, MatMulIntegerZeroPointPerRow) {
  const int64_t M = 6, K = 40, N = 17;
  MB m;
  quantized_input(m, "a", {M, K}, TensorProto::INT8, 0);
  const std::vector<int> az = values(M, -20, 20, 10), b = values(K * N, 0, 255, 11);
  m.init_8bit("az", {M}, TensorProto::INT8, az);
  m.init_8bit("b", {K, N}, TensorProto::UINT8, b);
  m.init_8bit("bz", {}, TensorProto::UINT8, {128});
  m.node("MatMulInteger", {"a", "b", "az", "bz"}, {"acc"});
  auto* cast = m.node("Cast", {"acc"}, {"y"});
  MB::attr(cast, "to", int64_t{TensorProto::FLOAT});
  m.output("y");
  const runtime::NDArray a = testing::random_array({M, K}, 2, -1.0f, 1.0f);
  const std::vector<float> got = run_model(m, dir_.path(), a);
  const std::vector<float> af = a.to_vector<float>();
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (quantize(af[i * K + k], 0, -128, 127) - az[i]) * (b[k * N + j] - 128);
      ASSERT_EQ(got[i * N + j], static_cast<float>(acc)) << i << " " << j;
    }
  }
}

class IntegerOpsErrors : public GraphBuildTest {
 protected:
  void expect_refused(const MB& m, const std::string& tag, const std::string& what) {
    const std::string path = (dir_.path() / (tag + ".onnx")).string();
    ASSERT_TRUE(m.write(path));
    EXPECT_ERROR_CONTAINS(import_onnx(path), what);
  }
};

TEST_F(IntegerOpsErrors, ZeroPointsOfTheWrongShape) {
  {
    MB m;
    quantized_input(m, "x", {1, 4, 5, 5}, TensorProto::UINT8, 0);
    m.init_8bit("w", {6, 4, 1, 1}, TensorProto::UINT8, values(24, 0, 255, 1));
    m.init_8bit("wz", {4}, TensorProto::UINT8, {1, 2, 3, 4});
    m.node("ConvInteger", "conv", {"x", "w", "x_zp", "wz"}, {"y"});
    m.output("y");
    expect_refused(m, "conv_wz", "must be a scalar or [6], one per output channel");
  }
  {
    MB m;
    quantized_input(m, "a", {3, 8}, TensorProto::UINT8, 0);
    m.init_8bit("b", {8, 5}, TensorProto::INT8, values(40, -9, 9, 2));
    m.init_8bit("bz", {8}, TensorProto::INT8, values(8, -1, 1, 3));
    m.node("MatMulInteger", "mm", {"a", "b", "a_zp", "bz"}, {"y"});
    m.output("y");
    expect_refused(m, "mm_bz", "one per column of a 2-D operand");
  }
}

}  // namespace
}  // namespace kiln::graph
