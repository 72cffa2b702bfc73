// Tuning tasks: keys that name a workload (equal for equal workloads, different otherwise), flop
// counts, candidates at several configs computing what the reference schedule computes, the
// distinct tasks of a graph, and a graph build that takes its configs from a ConfigSource; tasks
// that describe themselves: every task of models covering every template rebuilds from its
// workload text alone, in this process and in another one (same key, space, default, flops and
// lowered programs), and bad templates, pairings and targets are user errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "compiler/autotune/task.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/conv2d_winograd.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/dense_int8.h"
#include "compiler/topi/tunable.h"
#include "compiler/topi/workload.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/child_process.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

namespace kiln::autotune {
namespace {

using runtime::NDArray;

te::Tensor blocked_conv(int stride) {
  te::Tensor x = te::placeholder({1, 2, 10, 10, 8}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({2, 2, 3, 3, 8, 8}, ir::kFloat32, "w");
  return topi::conv2d_nchwc(x, w, {stride, stride}, {1, 1, 1, 1});
}

TEST(Task, KeysNameTheWorkload) {
  Task a = Task::make("conv2d_nchwc_x86", blocked_conv(1), "llvm");
  Task b = Task::make("conv2d_nchwc_x86", blocked_conv(1), "llvm");
  Task c = Task::make("conv2d_nchwc_x86", blocked_conv(2), "llvm");
  EXPECT_EQ(a.key, b.key);
  EXPECT_NE(a.key, c.key);
  EXPECT_EQ(a.key.rfind("conv2d_nchwc_x86:1x2x10x10x8:", 0), 0u) << a.key;
  EXPECT_EQ(a.inputs.size(), 2u);
  // 2 * outputs * (C * KH * KW) = 2 * (1*2*10*10*8) * (16 * 9)
  EXPECT_DOUBLE_EQ(a.flops, 2.0 * 1600 * 144);
  EXPECT_GT(a.space.size(), 1u);
  EXPECT_ERROR_CONTAINS(Task::make("conv2d_nchwc_x87", blocked_conv(1), "llvm"),
                        "conv2d_nchwc_x86");
}

TEST(Task, EveryCandidateComputesTheReference) {
  te::Tensor x = te::placeholder({24, 40}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({36, 40}, ir::kFloat32, "w");
  Task t = Task::make("dense_x86", topi::dense(x, w), "llvm");
  NDArray xa = testing::random_array({24, 40}, 1), wa = testing::random_array({36, 40}, 2);
  NDArray ref = testing::zeros({24, 36});
  compiler::build(t.reference_schedule(), t.args(), "llvm", "ref").function("ref")(xa, wa, ref);
  const uint64_t n = t.space.size();
  for (uint64_t i : {uint64_t{0}, n / 3, n / 2, n - 1}) {
    SCOPED_TRACE(t.space.get(i).str());
    NDArray out = testing::zeros({24, 36});
    compiler::build(t.schedule(t.space.get(i)), t.args(), "llvm", "cand")
        .function("cand")(xa, wa, out);
    EXPECT_TRUE(testing::all_close(out, ref.to_vector<float>(), 1e-5, 1e-5));
  }
}

/// Picks the last point of every space and counts the tasks it was asked about.
class LastConfig : public ConfigSource {
 public:
  space::Config choose(const Task& task) override {
    ++asked[task.key];
    return task.space.get(task.space.size() - 1);
  }
  std::map<std::string, int> asked;
};

TEST(Task, GraphTasksAndABuildWithChosenConfigs) {
  graph::Graph g;
  using runtime::kFloat32;
  graph::ValueId v = g.add_input("x", kFloat32, {1, 16, 8, 8});
  for (int i = 0; i < 3; ++i) {  // three equal convolutions: one task
    graph::ValueId w =
        g.add_constant("w" + std::to_string(i), testing::random_array({16, 16, 3, 3}, 10 + i));
    graph::Attrs a;
    a["kernel_shape"] = std::vector<int64_t>{3, 3};
    a["strides"] = std::vector<int64_t>{1, 1};
    a["pads"] = std::vector<int64_t>{1, 1, 1, 1};
    a["dilations"] = std::vector<int64_t>{1, 1};
    a["group"] = int64_t{1};
    v = g.add_op("Conv", "conv" + std::to_string(i), {v, w}, a, kFloat32, {1, 16, 8, 8});
    v = g.add_op("Relu", "relu" + std::to_string(i), {v}, {}, kFloat32, {1, 16, 8, 8});
  }
  graph::ValueId f = g.add_op("Flatten", "flat", {v}, {{"axis", int64_t{1}}}, kFloat32, {1, 1024});
  graph::ValueId w = g.add_constant("fc", testing::random_array({1024, 10}, 20));
  g.add_output(g.add_op("MatMul", "fc", {f, w}, {}, kFloat32, {1, 10}));

  std::vector<Task> tasks = graph::extract_tasks(g, "llvm");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].template_name, "conv2d_nchwc_x86");
  EXPECT_EQ(tasks[1].template_name, "dense_x86");

  NDArray x = testing::random_array({1, 16, 8, 8}, 3);
  std::vector<NDArray> outs;
  LastConfig last;
  for (ConfigSource* src :
       {static_cast<ConfigSource*>(nullptr), static_cast<ConfigSource*>(&last)}) {
    graph::BuildOptions o;
    o.configs = src;
    auto exec = runtime::GraphExecutor::from_bundle(graph::build_graph(g, "llvm", o), "g");
    exec.set_input("x", x);
    exec.run();
    outs.push_back(exec.output(0).copy());
  }
  EXPECT_EQ(last.asked.size(), 2u);
  EXPECT_EQ(last.asked[tasks[0].key], 3);
  EXPECT_TRUE(testing::all_close(outs[1], outs[0].to_vector<float>(), 1e-4, 1e-5));
}

TEST(Task, CarriesItsWorkload) {
  const te::Tensor out = blocked_conv(2);
  Task t = Task::make("conv2d_nchwc_x86", out, "llvm");
  EXPECT_EQ(t.workload, *topi::workload_of(out));
  EXPECT_EQ(topi::Workload::parse(t.workload).compute, "conv2d_nchwc");
  // The task is rebuilt from the workload: its own output over fresh placeholders.
  EXPECT_NE(t.out, out);
  EXPECT_EQ(*topi::workload_of(t.out), t.workload);
  te::Tensor x = te::placeholder({4, 4}, ir::kFloat32, "x");
  te::Tensor doubled = te::compute({4, 4}, [&](ir::Var i, ir::Var j) { return x(i, j) * 2.0f; });
  try {
    Task::make("dense_x86", doubled, "llvm");
    ADD_FAILURE() << "a task of a compute without a workload";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'compute' carries no workload"), std::string::npos)
        << e.what();
  }
}

TEST(Task, OnlyTheOperatorsOwnStages) {
  // A task of a convolution that reads reshapes (a 1-D convolution lifted to 2-D) is the task of
  // the same convolution on placeholders: the key says what is tuned, not what fed it.
  te::Tensor x = te::placeholder({1, 3, 10}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({4, 3, 3}, ir::kFloat32, "w");
  auto lift = [](const te::Tensor& t) {
    return te::compute({t->shape()[0], t->shape()[1], 1, t->shape()[2]},
                       [&](ir::Var a, ir::Var b, ir::Var, ir::Var d) { return t(a, b, d); });
  };
  const te::Tensor lifted = topi::conv2d_nchw(lift(x), lift(w), {1, 1}, {0, 1, 0, 1});
  const te::Tensor direct =
      topi::conv2d_nchw(te::placeholder({1, 3, 1, 10}, ir::kFloat32, "d"),
                        te::placeholder({4, 3, 1, 3}, ir::kFloat32, "k"), {1, 1}, {0, 1, 0, 1});
  const Task a = Task::make("conv2d_nchw_x86", lifted, "llvm");
  const Task b = Task::make("conv2d_nchw_x86", direct, "llvm");
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.inputs.size(), 2u);
  EXPECT_EQ(a.inputs[0]->shape().size(), 4u);
}

TEST(Task, FromWorkloadRefusesBadTemplatesPairingsAndTargets) {
  const std::string conv = *topi::workload_of(blocked_conv(1));
  EXPECT_ERROR_CONTAINS(Task::from_workload("conv2d_nchwc_x87", conv, "llvm"),
                        "no tunable template named 'conv2d_nchwc_x87'");
  EXPECT_ERROR_CONTAINS(
      Task::from_workload("dense_x86", conv, "llvm"),
      "template 'dense_x86' schedules dense, dense_packed, dense_packed_bf16, not 'conv2d_nchwc'");
  EXPECT_ERROR_CONTAINS(Task::from_workload("conv2d_nchwc_x86", conv, "tpu"), "tpu");
  EXPECT_ERROR_CONTAINS(Task::from_workload("conv2d_nchwc_x86", "{}", "llvm"),
                        "has no member 'compute'");
  // A grouped (not depthwise) convolution is no depthwise template's.
  const std::string grouped = *topi::workload_of(
      topi::conv2d_nchw(te::placeholder({1, 4, 6, 6}), te::placeholder({4, 2, 3, 3}), {1, 1},
                        {1, 1, 1, 1}, {1, 1}, 2));
  EXPECT_ERROR_CONTAINS(Task::from_workload("depthwise_conv2d_nchw_x86", grouped, "llvm"),
                        "is not a depthwise convolution");
}

/// A CNN whose tasks are blocked convolutions (plain, depthwise and grouped), blocked poolings
/// (window and global) and a packed dense layer in the default build, and the NCHW convolutions,
/// poolings and a plain dense layer without layout changes and weight packing.
std::string cnn_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 8, 12, 12});
  auto init = [&](const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
    m.init_values(name, shape, testing::random_array(shape, seed, -0.3f, 0.3f).to_vector<float>());
  };
  init("w1", {16, 8, 3, 3}, 1);
  init("dw", {16, 1, 3, 3}, 2);
  init("w2", {32, 16, 1, 1}, 4);
  init("gw", {32, 16, 3, 3}, 5);
  init("fc", {10, 32}, 3);
  auto* c1 = m.node("Conv", {"x", "w1"}, {"c1"});
  testing::OnnxModelBuilder::attr(c1, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"});
  auto* c2 = m.node("Conv", {"r1", "dw"}, {"c2"});
  testing::OnnxModelBuilder::attr(c2, "pads", std::vector<int64_t>{1, 1, 1, 1});
  testing::OnnxModelBuilder::attr(c2, "strides", std::vector<int64_t>{2, 2});
  testing::OnnxModelBuilder::attr(c2, "group", int64_t{16});
  m.node("Conv", {"c2", "w2"}, {"c3"});
  auto* c4 = m.node("Conv", {"c3", "gw"}, {"c4"});
  testing::OnnxModelBuilder::attr(c4, "pads", std::vector<int64_t>{1, 1, 1, 1});
  testing::OnnxModelBuilder::attr(c4, "group", int64_t{2});
  auto* p1 = m.node("MaxPool", {"c4"}, {"p1"});
  testing::OnnxModelBuilder::attr(p1, "kernel_shape", std::vector<int64_t>{2, 2});
  testing::OnnxModelBuilder::attr(p1, "strides", std::vector<int64_t>{2, 2});
  auto* p2 = m.node("AveragePool", {"p1"}, {"p2"});
  testing::OnnxModelBuilder::attr(p2, "kernel_shape", std::vector<int64_t>{3, 3});
  testing::OnnxModelBuilder::attr(p2, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("GlobalAveragePool", {"p2"}, {"g"});
  m.node("Flatten", {"g"}, {"f"});
  auto* fc = m.node("Gemm", {"f", "fc"}, {"y"});
  testing::OnnxModelBuilder::attr(fc, "transB", int64_t{1});
  m.output("y");
  return m.bytes();
}

/// A transposed convolution, a batched MatMul of two inputs, and a 1-D convolution and pooling
/// (lowered as 2-D ones through reshapes).
std::string other_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 4, 5, 5});
  m.input("a", {2, 3, 4});
  m.input("b", {2, 4, 5});
  m.input("s", {1, 3, 10});
  m.init_values("wt", {4, 3, 4, 4}, testing::random_array({4, 3, 4, 4}, 4).to_vector<float>());
  m.init_values("w1d", {4, 3, 3}, testing::random_array({4, 3, 3}, 5).to_vector<float>());
  auto* ct = m.node("ConvTranspose", {"x", "wt"}, {"ct"});
  testing::OnnxModelBuilder::attr(ct, "strides", std::vector<int64_t>{2, 2});
  testing::OnnxModelBuilder::attr(ct, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("MatMul", {"a", "b"}, {"mm"});
  auto* cs = m.node("Conv", {"s", "w1d"}, {"cs"});
  testing::OnnxModelBuilder::attr(cs, "pads", std::vector<int64_t>{1, 1});
  auto* ps = m.node("MaxPool", {"cs"}, {"ps"});
  testing::OnnxModelBuilder::attr(ps, "kernel_shape", std::vector<int64_t>{2});
  testing::OnnxModelBuilder::attr(ps, "strides", std::vector<int64_t>{2});
  m.output("ct");
  m.output("mm");
  m.output("ps");
  return m.bytes();
}

/// A model whose every operator has a GPU schedule: conv + relu + flatten + dense.
std::string gpu_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 4, 8, 8});
  m.init_values("w", {8, 4, 3, 3}, testing::random_array({8, 4, 3, 3}, 6).to_vector<float>());
  m.init_values("fc", {10, 512}, testing::random_array({10, 512}, 7).to_vector<float>());
  auto* c = m.node("Conv", {"x", "w"}, {"c"});
  testing::OnnxModelBuilder::attr(c, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("Flatten", {"r"}, {"f"});
  auto* g = m.node("Gemm", {"f", "fc"}, {"y"});
  testing::OnnxModelBuilder::attr(g, "transB", int64_t{1});
  m.output("y");
  return m.bytes();
}

/// The tasks of both models, built as they are and without layout changes and weight packing,
/// and those of the GPU model for opencl.
std::vector<Task> model_tasks() {
  graph::BuildOptions plain;
  plain.alter_layout = false;
  plain.pack_weights = false;
  std::vector<Task> all;
  for (const std::string& model : {cnn_model(), other_model()}) {
    for (const graph::BuildOptions& o : {graph::BuildOptions{}, plain}) {
      for (Task& t : graph::extract_tasks(graph::import_onnx_bytes(model, "test model"), "llvm", o))
        all.push_back(std::move(t));
    }
  }
  for (Task& t : graph::extract_tasks(graph::import_onnx_bytes(gpu_model(), "gpu model"), "opencl"))
    all.push_back(std::move(t));
  // The int8 templates, which only quantized models (ConvInteger, MatMulInteger) lower to: tasks
  // of their computes.
  te::Tensor x = te::placeholder({1, 2, 9, 9, 8}, ir::DataType::UInt(8), "data");
  te::Tensor w = te::placeholder({2, 2, 3, 3, 2, 16, 4}, ir::kInt8, "kernel");
  all.push_back(Task::make("conv2d_nchwc_int8_x86",
                           topi::conv2d_nchwc_int8(x, w, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3), "llvm"));
  // Winograd's, which alter_layout chooses for 3x3s of stride 1 on large enough maps.
  all.push_back(
      Task::make("conv2d_nchwc_winograd_x86",
                 topi::conv2d_nchwc_winograd(te::placeholder({1, 2, 12, 12, 8}),
                                             te::placeholder({6, 6, 2, 16, 16}), {1, 1, 1, 1}, 4),
                 "llvm"));
  te::Tensor rows = te::placeholder({12, 32}, ir::DataType::UInt(8), "x");
  all.push_back(Task::make(
      "dense_int8_x86", topi::dense_int8(rows, te::placeholder({2, 8, 16, 4}, ir::kInt8, "packed")),
      "llvm"));
  return all;
}

/// The candidate program of config `index`, or nothing where it does not lower (a GPU config over
/// the target's limits).
std::optional<ir::PrimFunc> lowered(const Task& t, uint64_t index) {
  try {
    return t.lower(t.space.get(index));
  } catch (const Error&) {
    return std::nullopt;
  }
}

/// The configs whose lowered programs the tests compare: the default, the first, the middle and
/// the last point.
std::vector<uint64_t> probes(const Task& t) {
  const uint64_t n = t.space.size();
  return {t.default_config.index(), 0, n / 2, n - 1};
}

uint64_t program_hash(const Task& t, uint64_t index) {
  return ir::structural_hash(compiler::lower(t.schedule(t.space.get(index)), t.args(), "cand"));
}

TEST(Task, ModelTasksRebuildFromTheirWorkloads) {
  const std::vector<Task> tasks = model_tasks();
  std::set<std::string> templates;
  for (const Task& t : tasks) {
    SCOPED_TRACE(t.key + " " + t.workload);
    if (t.template_name.ends_with("_x86")) templates.insert(t.template_name);
    const Task u = Task::from_workload(t.template_name, t.workload, t.target);
    EXPECT_EQ(u.key, t.key);
    EXPECT_EQ(u.workload, t.workload);
    EXPECT_EQ(u.space.size(), t.space.size());
    EXPECT_EQ(u.default_config.index(), t.default_config.index());
    EXPECT_EQ(u.flops, t.flops);
    ASSERT_EQ(u.args().size(), t.args().size());
    for (size_t i = 0; i < u.args().size(); ++i) {
      EXPECT_EQ(topi::spec_of(u.args()[i], "test"), topi::spec_of(t.args()[i], "test"));
    }
    EXPECT_TRUE(ir::structural_equal(compiler::lower(u.reference_schedule(), u.args(), "ref"),
                                     compiler::lower(t.reference_schedule(), t.args(), "ref")));
    for (uint64_t i : probes(t)) {
      const std::optional<ir::PrimFunc> a = lowered(u, i), b = lowered(t, i);
      ASSERT_EQ(a.has_value(), b.has_value()) << t.space.get(i).str();
      if (a) {
        EXPECT_TRUE(ir::structural_equal(*a, *b)) << t.space.get(i).str();
      }
    }
  }
  // Every CPU template appears among the CPU tasks (the GPU tasks above round-trip too).
  std::set<std::string> all;
  for (const topi::TunableTemplate& t : topi::tunable_templates()) {
    if (t.name.ends_with("_x86")) all.insert(t.name);
  }
  EXPECT_EQ(templates, all);
}

constexpr const char* kWorkloadsEnv = "KILN_TASK_TEST_WORKLOADS";

/// One line per task: its key, space size, default and the hashes of its probe programs.
std::string describe(const Task& t) {
  std::ostringstream os;
  os << t.key << " " << t.space.size() << " " << t.default_config.index();
  for (uint64_t i : probes(t)) os << " " << program_hash(t, i);
  return os.str();
}

// Runs only in the process AnotherProcessRebuildsTheSameTasks starts: reads "template workload
// target" lines (the target one word) from the file named by KILN_TASK_TEST_WORKLOADS and prints
// each task's description.
TEST(TaskInAnotherProcess, Describe) {
  const char* path = std::getenv(kWorkloadsEnv);
  if (path == nullptr) GTEST_SKIP() << "started by Task.AnotherProcessRebuildsTheSameTasks";
  std::ifstream in(path);
  std::string tmpl, workload, target;
  while (in >> tmpl >> workload >> target) {
    std::cout << "task " << describe(Task::from_workload(tmpl, workload, target)) << std::endl;
  }
}

TEST(Task, AnotherProcessRebuildsTheSameTasks) {
  const std::vector<Task> tasks = model_tasks();
  testing::TempDir dir("task_test");
  {
    std::ofstream out(dir.file("workloads.txt"));
    for (const Task& t : tasks)
      out << t.template_name << " " << t.workload << " " << t.target << "\n";
  }
  testing::ChildProcess child({std::filesystem::read_symlink("/proc/self/exe").string(),
                               "--gtest_filter=TaskInAnotherProcess.Describe"},
                              dir.file("child.log"),
                              {std::string(kWorkloadsEnv) + "=" + dir.file("workloads.txt")});
  ASSERT_EQ(child.wait(), 0) << child.stderr_text();
  child.wait_for_line("PASSED", std::chrono::seconds(10));
  std::vector<std::string> got;
  for (const std::string& line : child.lines()) {
    if (line.rfind("task ", 0) == 0) got.push_back(line.substr(5));
  }
  ASSERT_EQ(got.size(), tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(got[i], describe(tasks[i]));
}

}  // namespace
}  // namespace kiln::autotune
