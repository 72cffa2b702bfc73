// The graph build for a GPU target end to end: small ONNX models built here, compiled for
// "opencl" into GPU bundles (one device program per fused group), run by the graph executor on
// OpenCL (PoCL here) and compared with the same model built for the CPU within 1e-4: a chain of
// elementwise and injective operators (schedule_injective), fused into one kernel and unfused (one
// kernel per node, the intermediates in device buffers of the memory plan), and a model using
// each GPU template of the build: a convolution with its bias and ReLU (conv2d_nchw_gpu, on 10 x 10
// images), a Flatten and a Gemm with its bias and ReLU (matmul_gpu; 10 outputs), sizes which the
// templates' tiles do not divide. Built for CUDA, the same model's programs are PTX (NVRTC); where
// a CUDA device exists it runs there against the CPU build, elsewhere the executor says there is
// none; built for sm_61, which CUDA 13's NVRTC refuses, the programs are PTX for sm_61 from
// LLVM's NVPTX back-end. A softmax along a middle axis and an ArgMax (reduce_gpu) match the CPU
// build; the tuning tasks of an OpenCL target are the GPU templates' and build. Groups without a
// GPU schedule are refused naming the node.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "compiler/codegen/nvrtc.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/lower.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;
using testing::OnnxModelBuilder;

/// Float initializer `name` of reproducible random values in [-0.5, 0.5).
void init_random(OnnxModelBuilder& m, const std::string& name, const std::vector<int64_t>& shape,
                 uint32_t seed) {
  m.init_values(name, shape, testing::random_array(shape, seed, -0.5f, 0.5f).to_vector<float>());
}

/// x [1, 3, 10, 10] -> Conv 3x3 (8 channels, pads 1) + bias -> Relu -> Flatten [1, 800] -> Gemm
/// (10 outputs, transB) + bias -> Relu -> y [1, 10].
OnnxModelBuilder conv_relu_dense() {
  OnnxModelBuilder m;
  m.input("x", {1, 3, 10, 10});
  init_random(m, "w", {8, 3, 3, 3}, 1);
  init_random(m, "b", {8}, 2);
  init_random(m, "fc_w", {10, 800}, 3);
  init_random(m, "fc_b", {10}, 4);
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  OnnxModelBuilder::attr(conv, "kernel_shape", std::vector<int64_t>{3, 3});
  OnnxModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("Flatten", {"r"}, {"f"});
  auto* gemm = m.node("Gemm", {"f", "fc_w", "fc_b"}, {"d"});
  OnnxModelBuilder::attr(gemm, "transB", int64_t{1});
  m.node("Relu", {"d"}, {"y"});
  m.output("y");
  return m;
}

/// x [2, 3, 4, 5] + c [3, 1, 1] -> Relu -> Transpose (0, 2, 3, 1) -> Sigmoid -> Mul by itself
/// -> y [2, 4, 5, 3].
OnnxModelBuilder injective_chain() {
  OnnxModelBuilder m;
  m.input("x", {2, 3, 4, 5});
  init_random(m, "c", {3, 1, 1}, 6);
  m.node("Add", {"x", "c"}, {"a"});
  m.node("Relu", {"a"}, {"r"});
  auto* t = m.node("Transpose", {"r"}, {"t"});
  OnnxModelBuilder::attr(t, "perm", std::vector<int64_t>{0, 2, 3, 1});
  m.node("Sigmoid", {"t"}, {"s"});
  m.node("Mul", {"s", "s"}, {"y"});
  m.output("y");
  return m;
}

/// The model's output for `x`, built for `target` and run on `device`.
NDArray run_built(const Graph& g, const std::string& target, TargetKind device, const NDArray& x,
                  const BuildOptions& options = {}) {
  runtime::Bundle bundle = build_graph(g, target, options);
  auto exec = runtime::GraphExecutor::from_bundle(std::move(bundle), target, device);
  exec.set_input("x", x);
  exec.run();
  return exec.output(0).copy();
}

TEST(GraphBuildGpu, AnInjectiveChainOnOpenCLMatchesTheCpuBuildFusedAndNot) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  const Graph g = import_onnx_bytes(injective_chain().bytes(), "injective.onnx");
  BuildOptions unfused;
  unfused.fuse = false;
  BuildReport report;
  EXPECT_EQ(build_graph(g, "opencl", {}, &report).device_programs.size(), 1u);
  EXPECT_EQ(build_graph(g, "opencl", unfused, &report).device_programs.size(), 5u);
  EXPECT_GT(report.intermediate_bytes, 0);
  const NDArray x = testing::random_array({2, 3, 4, 5}, 9);
  const NDArray want = run_built(g, "llvm", TargetKind::kCpu, x);
  EXPECT_TRUE(testing::all_close(run_built(g, "opencl", TargetKind::kOpenCL, x),
                                 want.to_vector<float>(), 1e-4, 1e-4));
  EXPECT_TRUE(testing::all_close(run_built(g, "opencl", TargetKind::kOpenCL, x, unfused),
                                 want.to_vector<float>(), 1e-4, 1e-4));
}

TEST(GraphBuildGpu, ConvReluDenseOnOpenCLMatchesTheCpuBuild) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  const Graph g = import_onnx_bytes(conv_relu_dense().bytes(), "conv_relu_dense.onnx");
  BuildReport report;
  const runtime::Bundle gpu = build_graph(g, "opencl", {}, &report);
  EXPECT_EQ(runtime::bundle_device(gpu), TargetKind::kOpenCL);
  EXPECT_TRUE(gpu.library.empty());
  EXPECT_EQ(gpu.device_programs.size(), 3u);  // conv+relu, flatten, gemm+relu
  EXPECT_EQ(report.num_functions, 3u);
  EXPECT_EQ(report.convolutions_blocked, 0u);  // NCHW on a GPU
  for (uint32_t seed : {7u, 8u}) {
    const NDArray x = testing::random_array({1, 3, 10, 10}, seed);
    const NDArray want = run_built(g, "llvm", TargetKind::kCpu, x);
    const NDArray got = run_built(g, "opencl", TargetKind::kOpenCL, x);
    EXPECT_TRUE(testing::all_close(got, want.to_vector<float>(), 1e-4, 1e-4)) << "seed " << seed;
  }
}

TEST(GraphBuildGpu, ConvReluDenseForCudaIsPtxAndRunsWhereThereIsACudaDevice) {
  if (!codegen::nvrtc_available()) GTEST_SKIP() << "no NVRTC (libnvrtc.so.13) here";
  const Graph g = import_onnx_bytes(conv_relu_dense().bytes(), "conv_relu_dense.onnx");
  runtime::Bundle cuda = build_graph(g, "cuda -arch=sm_75");
  EXPECT_EQ(runtime::bundle_device(cuda), TargetKind::kCuda);
  ASSERT_EQ(cuda.device_programs.size(), 3u);
  for (const runtime::DeviceProgram& p : cuda.device_programs) {
    EXPECT_EQ(p.format, "ptx");
    EXPECT_NE(p.code.find(".entry"), std::string::npos) << p.name;
  }
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kCuda, &why)) {
    EXPECT_ERROR_CONTAINS(
        runtime::GraphExecutor::from_bundle(std::move(cuda), "cuda.kiln", TargetKind::kCuda),
        "no CUDA device");
    return;
  }
  const NDArray x = testing::random_array({1, 3, 10, 10}, 7);
  const NDArray want = run_built(g, "llvm", TargetKind::kCpu, x);
  const NDArray got = run_built(g, "cuda -arch=sm_75", TargetKind::kCuda, x);
  EXPECT_TRUE(testing::all_close(got, want.to_vector<float>(), 1e-4, 1e-4));
}

TEST(GraphBuildGpu, SoftmaxOnOpenCLMatchesTheCpuBuild) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  OnnxModelBuilder m;  // rows of 37 along axis 1 of [3, 37, 2]: not the innermost axis
  m.input("x", {3, 37, 2});
  auto* soft = m.node("Softmax", "probabilities", {"x"}, {"y"});
  OnnxModelBuilder::attr(soft, "axis", int64_t{1});
  m.output("y");
  const Graph g = import_onnx_bytes(m.bytes(), "soft.onnx");
  const NDArray x = testing::random_array({3, 37, 2}, 11, -4.0f, 4.0f);
  const NDArray want = run_built(g, "llvm", TargetKind::kCpu, x);
  EXPECT_TRUE(testing::all_close(run_built(g, "opencl", TargetKind::kOpenCL, x),
                                 want.to_vector<float>(), 1e-5, 1e-5));
}

TEST(GraphBuildGpu, ArgMaxOnOpenCLMatchesTheCpuBuild) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  OnnxModelBuilder m;  // int64 indices along axis 1 of [3, 37, 2]
  m.input("x", {3, 37, 2});
  auto* arg = m.node("ArgMax", "best", {"x"}, {"y"});
  OnnxModelBuilder::attr(arg, "axis", int64_t{1});
  m.output("y");
  const Graph g = import_onnx_bytes(m.bytes(), "argmax.onnx");
  const NDArray x = testing::random_array({3, 37, 2}, 12);
  const NDArray want = run_built(g, "llvm", TargetKind::kCpu, x);
  const NDArray got = run_built(g, "opencl", TargetKind::kOpenCL, x);
  EXPECT_EQ(got.to_vector<int64_t>(), want.to_vector<int64_t>());
}

TEST(GraphBuildGpu, TheTasksOfAGpuTargetAreThoseOfItsGpuTemplatesAndBuild) {
  const Graph g = import_onnx_bytes(conv_relu_dense().bytes(), "conv_relu_dense.onnx");
  std::vector<std::string> templates;
  for (const autotune::Task& t : extract_tasks(g, "opencl")) {
    templates.push_back(t.template_name);
    EXPECT_EQ(t.target, "opencl");
    const runtime::DeviceProgram p = compiler::build_gpu(t.schedule(t.default_config), t.args(),
                                                         target::Target::parse("opencl"), "task");
    EXPECT_FALSE(p.kernels.empty()) << t.key;
  }
  EXPECT_EQ(templates, (std::vector<std::string>{"conv2d_nchw_gpu", "matmul_gpu"}));
}

TEST(GraphBuildGpu, TheLstmsProductsAreTasksOfMatmulGpu) {
  OnnxModelBuilder m;  // 3 steps: the input projection and two recurrent GEMVs
  m.input("x", {3, 1, 4});
  init_random(m, "W", {1, 20, 4}, 1);
  init_random(m, "R", {1, 20, 5}, 2);
  auto* lstm = m.node("LSTM", "lstm", {"x", "W", "R"}, {"Y"});
  OnnxModelBuilder::attr(lstm, "hidden_size", int64_t{5});
  m.output("Y");
  std::set<std::string> templates;
  size_t tasks = 0;
  for (const autotune::Task& t :
       extract_tasks(import_onnx_bytes(m.bytes(), "lstm.onnx"), "opencl")) {
    templates.insert(t.template_name);
    ++tasks;
    const runtime::DeviceProgram p = compiler::build_gpu(t.schedule(t.default_config), t.args(),
                                                         target::Target::parse("opencl"), "task");
    EXPECT_FALSE(p.kernels.empty()) << t.key;
  }
  EXPECT_EQ(templates, std::set<std::string>{"matmul_gpu"});
  EXPECT_EQ(tasks, 2u);  // [3, K = 4] x W and [1, K = 5] x R (the two GEMVs are one task)
}

TEST(GraphBuildGpu, ConvReluDenseForSm61IsPtxFromNvptx) {
  const Graph g = import_onnx_bytes(conv_relu_dense().bytes(), "conv_relu_dense.onnx");
  runtime::Bundle cuda = build_graph(g, "cuda -arch=sm_61");
  EXPECT_EQ(runtime::bundle_device(cuda), TargetKind::kCuda);
  ASSERT_EQ(cuda.device_programs.size(), 3u);
  for (const runtime::DeviceProgram& p : cuda.device_programs) {
    EXPECT_EQ(p.format, "ptx");
    EXPECT_EQ(p.target, "cuda -arch=sm_61");
    EXPECT_NE(p.code.find(".target sm_61"), std::string::npos) << p.name;
    for (const auto& k : p.kernels) {
      EXPECT_NE(p.code.find(".entry " + k.name + "("), std::string::npos) << p.name;
    }
  }
}

/// The normalizations and the other row operators whose reductions reduce_gpu schedules (a block
/// a row for long rows), each on OpenCL against the CPU build.
NDArray build_one(OnnxModelBuilder& m, const std::vector<int64_t>& shape, uint64_t seed, bool gpu) {
  const Graph g = import_onnx_bytes(m.bytes(), "row_op.onnx");
  const NDArray x = testing::random_array(shape, seed, -3.0f, 3.0f);
  return gpu ? run_built(g, "opencl", TargetKind::kOpenCL, x)
             : run_built(g, "llvm", TargetKind::kCpu, x);
}

void expect_gpu_matches_cpu(OnnxModelBuilder& m, const std::vector<int64_t>& shape, uint64_t seed) {
  const NDArray want = build_one(m, shape, seed, false);
  EXPECT_TRUE(
      testing::all_close(build_one(m, shape, seed, true), want.to_vector<float>(), 1e-5, 1e-5));
}

TEST(GraphBuildGpu, NormalizationsHardmaxAndCumSumOnOpenCLMatchTheCpuBuild) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  {
    OnnxModelBuilder m(17);  // rows of 200 (a block a row), scale and bias
    m.input("x", {6, 200});
    init_random(m, "scale", {200}, 21);
    init_random(m, "bias", {200}, 22);
    auto* ln = m.node("LayerNormalization", "ln", {"x", "scale", "bias"}, {"y"});
    OnnxModelBuilder::attr(ln, "axis", int64_t{-1});
    OnnxModelBuilder::attr(ln, "epsilon", 1e-5f);
    m.output("y");
    expect_gpu_matches_cpu(m, {6, 200}, 23);
  }
  {
    OnnxModelBuilder m;  // per sample and channel over 9 x 9
    m.input("x", {2, 3, 9, 9});
    init_random(m, "scale", {3}, 24);
    init_random(m, "bias", {3}, 25);
    m.node("InstanceNormalization", "in", {"x", "scale", "bias"}, {"y"});
    m.output("y");
    expect_gpu_matches_cpu(m, {2, 3, 9, 9}, 26);
  }
  {
    OnnxModelBuilder m;
    m.input("x", {3, 37});
    m.node("Hardmax", "winner", {"x"}, {"y"});
    m.output("y");
    expect_gpu_matches_cpu(m, {3, 37}, 27);
  }
  {
    OnnxModelBuilder m;
    m.input("x", {3, 40});
    m.init_int64("axis", {1}, true);
    m.node("CumSum", "running", {"x", "axis"}, {"y"});
    m.output("y");
    expect_gpu_matches_cpu(m, {3, 40}, 28);
  }
}

// Both directions of an LSTM, and a GRU, go through the same GPU schedule as the forward LSTM.
TEST(GraphBuildGpu, BidirectionalLstmAndGruOnOpenCLMatchTheCpuBuild) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  OnnxModelBuilder m;
  m.input("x", {3, 2, 4});
  init_random(m, "W", {2, 24, 4}, 31);
  init_random(m, "R", {2, 24, 6}, 32);
  init_random(m, "B", {2, 48}, 33);
  auto* l = m.node("LSTM", "bilstm", {"x", "W", "R", "B"}, {"y"});
  OnnxModelBuilder::attr(l, "hidden_size", int64_t{6});
  OnnxModelBuilder::attr(l, "direction", std::string("bidirectional"));
  m.output("y");
  expect_gpu_matches_cpu(m, {3, 2, 4}, 34);
  OnnxModelBuilder g;
  g.input("x", {3, 2, 4});
  init_random(g, "W", {1, 18, 4}, 35);
  init_random(g, "R", {1, 18, 6}, 36);
  auto* gru = g.node("GRU", "gru", {"x", "W", "R"}, {"y"});
  OnnxModelBuilder::attr(gru, "hidden_size", int64_t{6});
  g.output("y");
  expect_gpu_matches_cpu(g, {3, 2, 4}, 37);
}

TEST(GraphBuildGpu, AGroupWithoutAGpuScheduleIsRefusedNamingItsNode) {
  OnnxModelBuilder mm4;
  mm4.input("x", {2, 2, 3, 4});
  init_random(mm4, "w", {2, 2, 4, 5}, 7);
  mm4.node("MatMul", "product", {"x", "w"}, {"y"});
  mm4.output("y");
  EXPECT_ERROR_CONTAINS(build_graph(import_onnx_bytes(mm4.bytes(), "mm4.onnx"), "opencl"),
                        "graph build for opencl: node 'product' (MatMul): operator "
                        "'MatMul' of more than 3 dimensions has no GPU schedule yet");
  OnnxModelBuilder conv1d;
  conv1d.input("x", {1, 4, 6});
  init_random(conv1d, "w", {4, 4, 3}, 5);
  auto* conv = conv1d.node("Conv", "c1", {"x", "w"}, {"y"});
  OnnxModelBuilder::attr(conv, "kernel_shape", std::vector<int64_t>{3});
  conv1d.output("y");
  EXPECT_ERROR_CONTAINS(build_graph(import_onnx_bytes(conv1d.bytes(), "c1.onnx"), "cuda"),
                        "node 'c1' (Conv): operator 'Conv' in 1-D has no GPU schedule yet");
}

}  // namespace
}  // namespace kiln::graph
