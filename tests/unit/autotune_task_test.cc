// Tuning tasks: keys that name a workload (equal for equal workloads, different otherwise), flop
// counts, candidates at several configs computing what the reference schedule computes, the
// distinct tasks of a graph, and a graph build that takes its configs from a ConfigSource.
#include "compiler/autotune/task.h"

#include <gtest/gtest.h>

#include <map>

#include "compiler/graph/graph_build.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/dense.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

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
  EXPECT_ERROR_CONTAINS(Task::make("conv2d_nchwc_x87", blocked_conv(1), "llvm"), "conv2d_nchwc_x86");
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
    compiler::build(t.schedule(t.space.get(i)), t.args(), "llvm", "cand").function("cand")(xa, wa, out);
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
    graph::ValueId w = g.add_constant("w" + std::to_string(i), testing::random_array({16, 16, 3, 3}, 10 + i));
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
  for (ConfigSource* src : {static_cast<ConfigSource*>(nullptr), static_cast<ConfigSource*>(&last)}) {
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

}  // namespace
}  // namespace kiln::autotune
