// The tuning tasks of the five whole models (written by make_models.py, the CTest fixture
// models_generate) describe themselves: each task rebuilt from its template, workload text and
// target alone (as a worker of the farm rebuilds it) has the same key, space, default, flops,
// argument specs and lowered programs (naive, and at the default, first, middle and last
// configs) as the task extracted from the model. Each model is its own test
// (ctest -R model_tasks_<name>).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "compiler/autotune/task.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/topi/workload.h"

namespace kiln::autotune {
namespace {

constexpr const char* kTarget = "llvm -mcpu=native";

ir::PrimFunc lowered(const Task& t, const space::Config* cfg) {
  return compiler::lower(cfg != nullptr ? t.schedule(*cfg) : t.reference_schedule(), t.args(), "f");
}

void check_model(const std::string& model) {
  const std::string path = std::string(KILN_MODELS_DATA_DIR) + "/" + model + ".onnx";
  const std::vector<Task> tasks = graph::extract_tasks(graph::import_onnx(path), kTarget);
  ASSERT_FALSE(tasks.empty());
  for (const Task& t : tasks) {
    SCOPED_TRACE(t.key + " " + t.workload);
    const Task u = Task::from_workload(t.template_name, t.workload, t.target);
    EXPECT_EQ(u.key, t.key);
    EXPECT_EQ(topi::Workload::parse(t.workload).json(), t.workload);
    EXPECT_EQ(u.space.size(), t.space.size());
    EXPECT_EQ(u.default_config.index(), t.default_config.index());
    EXPECT_EQ(u.flops, t.flops);
    ASSERT_EQ(u.args().size(), t.args().size());
    for (size_t i = 0; i < t.args().size(); ++i) {
      EXPECT_EQ(topi::spec_of(u.args()[i], "args"), topi::spec_of(t.args()[i], "args"));
    }
    EXPECT_TRUE(ir::structural_equal(lowered(u, nullptr), lowered(t, nullptr)));
    const uint64_t n = t.space.size();
    for (uint64_t i : {t.default_config.index(), uint64_t{0}, n / 2, n - 1}) {
      const space::Config a = u.space.get(i), b = t.space.get(i);
      EXPECT_TRUE(ir::structural_equal(lowered(u, &a), lowered(t, &b))) << b.str();
    }
  }
  std::printf("%s: %zu tasks rebuilt from their workloads\n", model.c_str(), tasks.size());
}

TEST(ModelTasks, resnet18) { check_model("resnet18"); }
TEST(ModelTasks, mobilenetv2) { check_model("mobilenetv2"); }
TEST(ModelTasks, dqn) { check_model("dqn"); }
TEST(ModelTasks, dcgan) { check_model("dcgan"); }
TEST(ModelTasks, lstm) { check_model("lstm"); }
TEST(ModelTasks, convt_odd) { check_model("convt_odd"); }

}  // namespace
}  // namespace kiln::autotune
