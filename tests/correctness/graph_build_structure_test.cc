// The graph build's own structure, apart from what each operator computes: intermediates
// planned into one pool, fused chains, identical groups sharing one kernel, unique parameter
// names, the bundle's inputs with defaults, and the errors a build refuses with.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

#include "base/json.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/op_lowering.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "tests/common/expect_error.h"
#include "tests/common/graph_build_check.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

namespace kiln::graph {
namespace {
TEST(GraphBuild, IntermediatesShareOnePlannedPool) {
  Graph g;
  ValueId x = g.add_input("x", runtime::kFloat32, {4});
  ValueId a = g.add_op("Relu", "r1", {x}, {}, runtime::kFloat32, {4});
  ValueId b = g.add_op("Neg", "r2", {a}, {}, runtime::kFloat32, {4});
  ValueId c = g.add_op("Abs", "r3", {b}, {}, runtime::kFloat32, {4});
  g.add_output(c);
  for (bool plan : {true, false}) {
    BuildOptions options;
    options.plan_memory = plan;
    options.fuse = false;  // one function per node, so that there are intermediates
    BuildReport report;
    runtime::Bundle bundle = build_graph(g, "llvm", options, &report);
    EXPECT_NE(bundle.graph_json.find("\"r1_0\""), std::string::npos) << bundle.graph_json;
    EXPECT_NE(bundle.graph_json.find("\"r3_2\""), std::string::npos);
    const kiln::Json json = kiln::Json::parse(bundle.graph_json);
    // r1's and r2's outputs are alive together (r2 reads one and writes the other): with the
    // plan they sit side by side in one pool, without it each has its own.
    EXPECT_EQ(json.at("storage", "graph").as_array("storage").size(), plan ? 1u : 2u);
    EXPECT_EQ(report.intermediate_bytes, plan ? 128 : 32);
    EXPECT_EQ(json.at("tensors", "graph").as_array("tensors").size(), 4u);
    EXPECT_EQ(json.at("nodes", "graph").as_array("nodes").size(), 3u);
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "g");
    NDArray in = NDArray::from_vector(std::vector<float>{-1, 2, -3, 4}, {4});
    exec.set_input("x", in);
    exec.run();
    EXPECT_TRUE(testing::all_close(exec.output(0), {0, 2, 0, 4}));
  }
}

TEST(GraphBuild, ChainFusesIntoOneFunctionOrReusesStorageUnfused) {
  // x -> Neg -> Abs -> ... (8 ops) -> |x|. Fused: one function, no intermediates. Unfused: 7
  // intermediates of 4 KiB, at most two alive at once, so the plan needs two.
  Graph g;
  ValueId v = g.add_input("x", runtime::kFloat32, {1024});
  for (int i = 0; i < 8; ++i) {
    v = g.add_op(i % 2 ? "Abs" : "Neg", "op" + std::to_string(i), {v}, {}, runtime::kFloat32,
                 {1024});
  }
  g.add_output(v);
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "not fused");
    BuildReport report;
    BuildOptions options;
    options.fuse = fuse;
    runtime::Bundle bundle = build_graph(g, "llvm", options, &report);
    EXPECT_EQ(report.num_functions, fuse ? 1u : 8u);
    // Unfused, the four Negs lower to one program up to renaming, and so do the four Abs.
    EXPECT_EQ(report.num_distinct_functions, fuse ? 1u : 2u);
    EXPECT_EQ(report.intermediate_bytes_without_reuse, fuse ? 0 : 7 * 4096);
    EXPECT_EQ(report.intermediate_bytes, fuse ? 0 : 2 * 4096);
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "chain");
    NDArray in = testing::random_array({1024}, 9);
    exec.set_input("x", in);
    exec.run();
    std::vector<float> ref(1024);
    for (int i = 0; i < 1024; ++i) ref[i] = std::fabs(in.data<float>()[i]);
    EXPECT_TRUE(testing::all_close(exec.output(0), ref));
  }
}

TEST(GraphBuild, IdenticalGroupsShareOneKernelAndOthersKeepTheirOwn) {
  // Two branches of the same Sigmoid on [64] share one kernel; a third on [32] has its own.
  Graph g;
  ValueId x = g.add_input("x", runtime::kFloat32, {64});
  ValueId y = g.add_input("y", runtime::kFloat32, {64});
  ValueId z = g.add_input("z", runtime::kFloat32, {32});
  g.add_output(g.add_op("Sigmoid", "sx", {x}, {}, runtime::kFloat32, {64}));
  g.add_output(g.add_op("Sigmoid", "sy", {y}, {}, runtime::kFloat32, {64}));
  g.add_output(g.add_op("Sigmoid", "sz", {z}, {}, runtime::kFloat32, {32}));
  BuildReport report;
  runtime::Bundle bundle = build_graph(g, "llvm", BuildOptions(), &report);
  EXPECT_EQ(report.num_functions, 3u);
  EXPECT_EQ(report.num_distinct_functions, 2u);
  const kiln::Json json = kiln::Json::parse(bundle.graph_json);
  std::vector<std::string> funcs;
  for (const kiln::Json& n : json.at("nodes", "graph").as_array("nodes"))
    funcs.push_back(n.at("func", "node").as_string("func"));
  ASSERT_EQ(funcs.size(), 3u);
  EXPECT_EQ(funcs[0], funcs[1]);
  EXPECT_NE(funcs[0], funcs[2]);
  runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "shared");
  const NDArray in[3] = {testing::random_array({64}, 1), testing::random_array({64}, 2),
                         testing::random_array({32}, 3)};
  exec.set_input("x", in[0]);
  exec.set_input("y", in[1]);
  exec.set_input("z", in[2]);
  exec.run();
  for (int k = 0; k < 3; ++k) {
    std::vector<float> ref(in[k].shape()[0]);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = 1 / (1 + std::exp(-in[k].data<float>()[i]));
    EXPECT_TRUE(testing::all_close(exec.output(k), ref)) << "output " << k;
  }
}

TEST(GraphBuild, ParameterNamesAreMadeUnique) {
  Graph g;
  ValueId x = g.add_input("x", runtime::kFloat32, {2});
  ValueId c = g.add_constant("x", NDArray::from_vector(std::vector<float>{10, 20}, {2}));
  ValueId y = g.add_op("Add", "add", {x, c}, {}, runtime::kFloat32, {2});
  g.add_output(y);
  runtime::Bundle bundle = build_graph(g, "llvm");
  ASSERT_EQ(bundle.params.size(), 1u);
  EXPECT_EQ(bundle.params.begin()->first, "x_1");
  runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "g");
  exec.set_input("x", NDArray::from_vector(std::vector<float>{1, 2}, {2}));
  exec.run();
  EXPECT_TRUE(testing::all_close(exec.output(0), {11, 22}));
}

TEST(GraphBuild, OperatorWithoutLoweringNamesOpAndNode) {
  Graph g;
  ValueId x = g.add_input("x", runtime::kFloat32, {4});
  ValueId y = g.add_op("Frobnicate", "frob_7", {x}, {}, runtime::kFloat32, {4});
  g.add_output(y);
  EXPECT_ERROR_CONTAINS(lower_group(g, fuse_ops(g).at(0)), "Frobnicate");
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm"), "frob_7");
}

TEST(GraphBuild, InputWithADefaultEndToEnd) {
  // y = Relu(x W^T + b), b a graph input whose initializer is its default value.
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.input("b", {4});
  const NDArray w = testing::random_array({4, 3}, 21);
  const NDArray b_default = testing::random_array({4}, 22);
  m.init_values("w", {4, 3}, w.to_vector<float>());
  m.init_values("b", {4}, b_default.to_vector<float>());
  ModelBuilder::attr(m.node("Gemm", "fc", {"x", "w", "b"}, {"g"}), "transB", int64_t{1});
  m.node("Relu", "relu", {"g"}, {"y"});
  m.output("y");
  auto reference = [&](const NDArray& x, const NDArray& b) {
    std::vector<float> y(8);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 4; ++j) {
        float acc = b.data<float>()[j];
        for (int k = 0; k < 3; ++k) acc += x.data<float>()[i * 3 + k] * w.data<float>()[j * 3 + k];
        y[static_cast<size_t>(i * 4 + j)] = std::max(acc, 0.0f);
      }
    }
    return y;
  };

  const Graph g = import_onnx_bytes(m.bytes(), "default.onnx");
  ASSERT_EQ(g.inputs().size(), 2u);
  runtime::Bundle bundle = build_graph(g, "llvm");
  const kiln::Json graph = kiln::Json::parse(bundle.graph_json);
  EXPECT_EQ(graph.at("version", "graph").as_int("version"), 2);
  testing::TempDir dir("kiln_default_test");
  const std::string path = (dir.path() / "default.kiln").string();
  runtime::write_bundle(path, bundle);

  runtime::GraphExecutor exec = runtime::GraphExecutor::load(path);
  ASSERT_EQ(exec.num_inputs(), 2u);
  EXPECT_EQ(exec.input_name(1), "b");
  EXPECT_FALSE(exec.input_has_default(0));
  EXPECT_TRUE(exec.input_has_default(1));
  const NDArray x = testing::random_array({2, 3}, 23);
  exec.set_input("x", x);
  exec.run();  // b not given: its default
  EXPECT_TRUE(testing::all_close(exec.output(0), reference(x, b_default)));
  const NDArray b = testing::random_array({4}, 24);
  exec.set_input("b", b);  // b given: the caller's
  exec.run();
  EXPECT_TRUE(testing::all_close(exec.output(0), reference(x, b)));
  EXPECT_ERROR_CONTAINS(exec.set_input("b", testing::zeros({3})),
                        "input 'b' must have shape [4], got [3]");
  EXPECT_ERROR_CONTAINS(exec.set_input("b", testing::zeros({4}, runtime::kInt32)),
                        "input 'b' must be float32, got int32");

  // A graph without defaults keeps version 1, which older runtimes read.
  ModelBuilder plain(13);
  plain.input("x", {2});
  plain.node("Relu", "relu", {"x"}, {"y"});
  plain.output("y");
  const kiln::Json v1 =
      kiln::Json::parse(build_graph(import_onnx_bytes(plain.bytes(), "plain"), "llvm").graph_json);
  EXPECT_EQ(v1.at("version", "graph").as_int("version"), 1);
}

TEST(GraphBuild, OutputThatIsAnInputIsRefused) {
  Graph g;
  ValueId x = g.add_input("x", runtime::kFloat32, {4});
  g.add_output(x);
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm"), "graph output 'x'");
}

}  // namespace
}  // namespace kiln::graph
