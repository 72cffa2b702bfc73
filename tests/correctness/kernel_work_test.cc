// Each kernel's work in the bundle's graph (graph_build.cc, te::count_flops): the operations and
// minimum bytes of known kernels, counted here by hand, written as the nodes' "flops", "bytes"
// and "ops"; the same whatever layout or fusion the build chose for them.
#include <gtest/gtest.h>

#include <string>

#include "base/json.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

/// The node of `bundle`'s graph whose "ops" is `ops`; fails the test when there is none.
Json node_with_ops(const runtime::Bundle& bundle, const std::string& ops) {
  const Json graph = Json::parse(bundle.graph_json);
  std::string all;
  for (const Json& n : graph.at("nodes", "graph").as_array("nodes")) {
    const std::string o = n.has("ops") ? n.at("ops", "node").as_string("ops") : "?";
    if (o == ops) return n;
    all += " " + o;
  }
  ADD_FAILURE() << "no kernel of operators " << ops << "; the kernels:" << all;
  return Json();
}

int64_t field(const Json& node, const char* name) {
  return node.is_null() ? -1 : node.at(name, "node").as_int(name);
}

runtime::Bundle build(const ModelBuilder& m, const BuildOptions& options = {}) {
  return build_graph(import_onnx_bytes(m.bytes(), "work.onnx"), "llvm", options);
}

// Conv 3x3 (pads 1) of x [1, 16, 8, 8] by w [16, 16, 3, 3] with a bias, then Relu: each of the
// 1*16*8*8 = 1024 outputs takes 16*3*3 = 144 multiply-adds (2 operations each), one add of its
// bias and one max: 1024 * (288 + 2) = 296960. Bytes: x and the output 4096 each, w 9216, the
// bias 64.
TEST(KernelWork, ConvBiasReluCountedByHand) {
  ModelBuilder m;
  m.input("x", {1, 16, 8, 8});
  m.init("w", {16, 16, 3, 3});
  m.init("b", {16});
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  ModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"y"});
  m.output("y");
  for (bool blocked : {false, true}) {  // NCHW, and NCHW16c with its kernel packed
    SCOPED_TRACE(blocked ? "NCHW16c" : "NCHW");
    BuildOptions options;
    options.alter_layout = blocked;
    const runtime::Bundle b = build(m, options);
    const Json conv_node = node_with_ops(b, "Conv+Relu");
    EXPECT_EQ(field(conv_node, "flops"), 1024 * (2 * 144 + 2));
    EXPECT_EQ(field(conv_node, "bytes"), 4096 + 9216 + 64 + 4096);
    if (blocked) {  // the layout conversions move data and compute nothing
      const Json to_blocked = node_with_ops(b, "LayoutTransform");
      EXPECT_EQ(field(to_blocked, "flops"), 0);
      EXPECT_EQ(field(to_blocked, "bytes"), 2 * 4096);
    }
  }
  // bf16: the same work, the weights in bf16 pairs half the bytes (built for a CPU with
  // avx512_bf16, not run).
  BuildOptions bf16;
  bf16.precision = Precision::kBf16;
  const runtime::Bundle b =
      build_graph(import_onnx_bytes(m.bytes(), "work.onnx"), "llvm -mcpu=sapphirerapids", bf16);
  const Json conv_node = node_with_ops(b, "Conv+Relu");
  EXPECT_EQ(field(conv_node, "flops"), 1024 * (2 * 144 + 2));
  EXPECT_EQ(field(conv_node, "bytes"), 4096 + 9216 / 2 + 64 + 4096);
}

// Gemm of x [4, 32] by a constant w [32, 16] plus a bias [16]: 4*16 outputs of 32 multiply-adds and
// one add: 64 * 65 = 4160 operations. Bytes: x 512, w 2048, the bias 64, the output 256.
TEST(KernelWork, DenseCountedByHand) {
  ModelBuilder m;
  m.input("x", {4, 32});
  m.init("w", {32, 16});
  m.init("c", {16});
  m.node("Gemm", {"x", "w", "c"}, {"y"});
  m.output("y");
  for (bool packed : {false, true}) {  // the weights as given, and in [N/bn, K, bn] panels
    SCOPED_TRACE(packed ? "packed" : "as given");
    BuildOptions options;
    options.pack_weights = packed;
    const Json gemm = node_with_ops(build(m, options), "Gemm");
    EXPECT_EQ(field(gemm, "flops"), 4 * 16 * (2 * 32 + 1));
    EXPECT_EQ(field(gemm, "bytes"), 512 + 2048 + 64 + 256);
  }
  BuildOptions bf16;  // the weights in bf16 pairs: half the bytes, the same work
  bf16.precision = Precision::kBf16;
  const Json gemm = node_with_ops(
      build_graph(import_onnx_bytes(m.bytes(), "work.onnx"), "llvm -mcpu=sapphirerapids", bf16),
      "Gemm");
  EXPECT_EQ(field(gemm, "flops"), 4 * 16 * (2 * 32 + 1));
  EXPECT_EQ(field(gemm, "bytes"), 512 + 2048 / 2 + 64 + 256);
}

// An elementwise Add of two [2, 3, 4] inputs: 24 operations, three tensors of 96 bytes.
TEST(KernelWork, ElementwiseCountedByHand) {
  ModelBuilder m;
  m.input("a", {2, 3, 4});
  m.input("b", {2, 3, 4});
  m.node("Add", {"a", "b"}, {"y"});
  m.output("y");
  const Json add = node_with_ops(build(m), "Add");
  EXPECT_EQ(field(add, "flops"), 24);
  EXPECT_EQ(field(add, "bytes"), 3 * 96);

  ModelBuilder same_input;  // one tensor read twice is moved once
  same_input.input("a", {2, 3, 4});
  same_input.node("Add", {"a", "a"}, {"y"});
  same_input.output("y");
  EXPECT_EQ(field(node_with_ops(build(same_input), "Add"), "bytes"), 2 * 96);
}

}  // namespace
}  // namespace kiln::graph
