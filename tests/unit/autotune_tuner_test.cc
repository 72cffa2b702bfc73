// The tuning loop end to end on a small dense task: every trial lands in the log, a second run
// resumes (no config measured twice), equal programs are measured once, the graph build's
// LogConfigSource takes the best config, and each explorer runs.
#include "compiler/autotune/tuner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "compiler/topi/dense.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace kiln::autotune {
namespace {

Task dense_task() {
  te::Tensor x = te::placeholder({32, 64}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({48, 64}, ir::kFloat32, "w");
  return Task::make("dense_x86", topi::dense(x, w), "llvm");
}

TuneOptions quick(const std::string& explorer, int trials) {
  TuneOptions o;
  o.trials = trials;
  o.batch = 8;
  o.explorer = explorer;
  o.repeat = 2;
  o.min_repeat_ms = 1;
  o.threads = 1;
  return o;
}

TEST(Tuner, MeasuresResumesAndFeedsTheBuild) {
  testing::TempDir dir("kiln_tuner_test");
  RecordLog log = RecordLog::open((dir.path() / "log").string());
  const Task task = dense_task();
  std::vector<TuneProgress> seen;
  TuneOptions o = quick("xgb", 16);
  o.progress = [&](const TuneProgress& p) { seen.push_back(p); };
  TaskResult first = Tuner(log, o).tune(task);
  EXPECT_EQ(first.trials, 16);
  EXPECT_EQ(first.measured_now, 16);
  EXPECT_TRUE(first.has_best);
  EXPECT_GT(first.best_gflops, 0.0);
  EXPECT_TRUE(first.errors.empty());
  ASSERT_EQ(first.curve.size(), 16u);
  for (size_t i = 1; i < first.curve.size(); ++i) EXPECT_GE(first.curve[i], first.curve[i - 1]);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen.back().trials_done, 16);
  // The default config is the first measured.
  EXPECT_EQ(log.records(task.key, "llvm").front().config_index, task.default_config.index());

  // Again with a larger budget: 8 more, none of them measured before.
  TaskResult second = Tuner(log, quick("xgb", 24)).tune(task);
  EXPECT_EQ(second.trials, 24);
  EXPECT_EQ(second.measured_now, 8);
  std::set<uint64_t> configs;
  for (const MeasureRecord& r : log.records(task.key, "llvm")) {
    EXPECT_TRUE(configs.insert(r.config_index).second) << "config " << r.config_index << " twice";
    EXPECT_EQ(r.device, host_device_fingerprint());
  }
  // A budget already met measures nothing.
  EXPECT_EQ(Tuner(log, quick("xgb", 10)).tune(task).measured_now, 0);

  LogConfigSource source(log);
  EXPECT_EQ(source.choose(task).index(), log.best(task.key, "llvm")->config_index);
  EXPECT_EQ(source.tuned(), 1);
  te::Tensor x = te::placeholder({8, 8}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({8, 8}, ir::kFloat32, "w");
  Task untuned = Task::make("dense_x86", topi::dense(x, w), "llvm");
  EXPECT_EQ(source.choose(untuned).index(), untuned.default_config.index());
  EXPECT_EQ(source.defaults(), 1);
}

TEST(Tuner, EveryExplorerAndTheKnobFeatures) {
  testing::TempDir dir("kiln_tuner_test");
  RecordLog log = RecordLog::open((dir.path() / "log").string());
  const Task task = dense_task();
  for (const char* e : {"random", "grid", "ga"}) {
    TuneOptions o = quick(e, 8);
    o.seed = 7;
    TaskResult r = Tuner(log, o).tune(task);
    EXPECT_GE(r.trials, 8) << e;
  }
  TuneOptions o = quick("xgb", 24);
  o.features = "knob";
  EXPECT_EQ(Tuner(log, o).tune(task).trials, 24);
  // Programs equal to one measured before are not run again, but are recorded.
  for (const MeasureRecord& r : log.records(task.key, "llvm")) EXPECT_EQ(r.error, ErrorKind::kNone);
}

TEST(Tuner, BuildsPastTheTimeLimitAreRecordedAsCompileTimeouts) {
  testing::TempDir dir("kiln_tuner_test");
  RecordLog log = RecordLog::open((dir.path() / "log").string());
  TuneOptions o = quick("random", 4);
  o.build_timeout_s = 1e-6;
  TaskResult r = Tuner(log, o).tune(dense_task());
  EXPECT_EQ(r.trials, 4);
  EXPECT_FALSE(r.has_best);
  int timeouts = 0;
  for (const MeasureRecord& rec : log.records(dense_task().key, "llvm")) {
    timeouts += rec.error == ErrorKind::kCompileTimeout;
    EXPECT_EQ(rec.gflops, 0.0);
  }
  EXPECT_EQ(timeouts, r.errors["compile_timeout"]);
  EXPECT_GT(timeouts, 0);
  // The abandoned builds finish in the background; let them before the process exits.
  std::this_thread::sleep_for(std::chrono::seconds(2));
}

TEST(Tuner, BadOptionsNameTheOption) {
  testing::TempDir dir("kiln_tuner_test");
  RecordLog log = RecordLog::open((dir.path() / "log").string());
  TuneOptions o = quick("annealing", 8);
  EXPECT_ERROR_CONTAINS(Tuner(log, o).tune(dense_task()), "unknown explorer 'annealing'");
  o = quick("xgb", 0);
  EXPECT_ERROR_CONTAINS(Tuner(log, o), "trials and batch must be positive");
  o = quick("xgb", 8);
  o.features = "pixels";
  EXPECT_ERROR_CONTAINS(Tuner(log, o), "unknown features 'pixels'");
}

}  // namespace
}  // namespace kiln::autotune
