// The tuning loop end to end on a small dense task: every trial lands in the log, a second run
// resumes (no config measured twice), equal programs are measured once, the graph build's
// LogConfigSource takes the best config, and each explorer runs. With a fake Measurer: the Tuner
// sends each distinct program once and every record is appended exactly once. The task's
// reference (compute_reference) is seeded and deterministic. Measurements on a CPU that another
// process holds are marked contended. An int8 convolution over uint8 data tunes like a float task,
// its candidates checked exactly. The search scores its candidates without lowering them fully.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <unordered_set>

#include "compiler/autotune/local_measurer.h"
#include "compiler/autotune/measurer.h"
#include "compiler/autotune/tune_tasks.h"
#include "compiler/autotune/tuner.h"
#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/dense.h"
#include "deploy/runtime/kernel_runner.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/random_fill.h"
#include "tests/common/cpu_competitor.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace kiln::autotune {
namespace {

using space::Config;

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
  o.local.repeat = 2;
  o.local.min_repeat_ms = 1;
  o.local.threads = 1;
  return o;
}

TEST(Tuner, MeasuresResumesAndFeedsTheBuild) {
  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
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
  for (const records::MeasureRecord& r : log.records(task.key, "llvm")) {
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
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
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
  // The model-guided search with the other kind of cost model, on the loop features.
  o = quick("xgb", 32);
  o.cost_model = "mlp";
  EXPECT_EQ(Tuner(log, o).tune(task).trials, 32);
  // Programs equal to one measured before are not run again, but are recorded.
  for (const records::MeasureRecord& r : log.records(task.key, "llvm"))
    EXPECT_EQ(r.error, ErrorKind::kNone);
}

TEST(Tuner, BuildsPastTheTimeLimitAreRecordedAsCompileTimeouts) {
  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  TuneOptions o = quick("random", 4);
  o.local.build_timeout_s = 1e-6;
  TaskResult r = Tuner(log, o).tune(dense_task());
  EXPECT_EQ(r.trials, 4);
  EXPECT_FALSE(r.has_best);
  int timeouts = 0;
  for (const records::MeasureRecord& rec : log.records(dense_task().key, "llvm")) {
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
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  TuneOptions o = quick("annealing", 8);
  EXPECT_ERROR_CONTAINS(Tuner(log, o).tune(dense_task()), "unknown explorer 'annealing'");
  o = quick("xgb", 0);
  EXPECT_ERROR_CONTAINS(Tuner(log, o), "trials and batch must be positive");
  o = quick("xgb", 8);
  o.features = "pixels";
  EXPECT_ERROR_CONTAINS(Tuner(log, o), "unknown features 'pixels'");
  o = quick("xgb", 8);
  o.cost_model = "forest";
  EXPECT_ERROR_CONTAINS(Tuner(log, o), "unknown cost model 'forest' (known: xgb, mlp)");
}

/// A Measurer that measures nothing: each candidate "runs" in a time derived from its config, and
/// its record is appended here, as a real measurer does. Counts calls and checks that no program
/// is sent twice.
class FakeMeasurer : public Measurer {
 public:
  explicit FakeMeasurer(records::RecordLog& log) : log_(log) {}

  void begin_task(const Task& task) override {
    ++begin_calls;
    task_key = task.key;
  }

  std::vector<records::MeasureRecord> measure(const Task& task,
                                              const std::vector<Candidate>& candidates,
                                              uint64_t seed) override {
    EXPECT_EQ(task.key, task_key) << "measure() before begin_task()";
    ++measure_calls;
    std::vector<records::MeasureRecord> out;
    for (const Candidate& c : candidates) {
      if (kill_after >= 0 && static_cast<int>(appended.size()) >= kill_after) {
        throw std::runtime_error("killed");  // as a killed process: what it appended stays
      }
      EXPECT_TRUE(programs.insert(ir::structural_hash(c.func)).second)
          << "config " << c.config_index << ": a program sent twice";
      EXPECT_EQ(c.config, task.space.get(c.config_index).str());
      records::MeasureRecord r;
      r.target = task.target;
      r.device = "fake device";
      r.task_key = task.key;
      r.config_index = c.config_index;
      r.config = c.config;
      r.costs_s = {1e-4 * static_cast<double>(1 + c.config_index % 7)};
      r.gflops = task.flops / r.cost() / 1e9;
      r.timestamp_ms = 1;
      r.search_seed = seed;
      log_.append(r);
      appended.push_back(r);
      out.push_back(r);
    }
    if (other_job) {  // another job of the same model, sharing the log, measures one config too
      records::MeasureRecord r = out.back();
      r.config_index = task.space.size() - 1 - other_configs++;
      r.config = task.space.get(r.config_index).str();
      r.search_seed = seed + 1000;
      log_.append(r);
    }
    return out;
  }

  bool other_job = false;  ///< each measure() also appends another job's record of the task
  uint64_t other_configs = 0;

  int kill_after = -1;  ///< >= 0: measure() throws once this many records were appended
  int begin_calls = 0;
  int measure_calls = 0;
  std::string task_key;
  std::unordered_set<uint64_t> programs;
  std::vector<records::MeasureRecord> appended;

 private:
  records::RecordLog& log_;
};

/// A small dense task whose space has a knob the template ignores: the configs that differ only
/// in it lower to equal programs (36 distinct programs, 144 configs).
Task task_with_equal_programs() {
  te::Tensor x = te::placeholder({4, 8}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({4, 8}, ir::kFloat32, "w");
  Task t = Task::make("dense_x86", topi::dense(x, w), "llvm");
  const uint64_t dflt = t.default_config.index();
  t.space.define_knob("ignored", {0, 1, 2, 3});  // the slowest digit: old indices stay valid
  t.default_config = t.space.get(dflt);
  return t;
}

TEST(Tuner, AGivenMeasurerGetsEachProgramOnceAndEachRecordIsAppendedOnce) {
  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const Task task = task_with_equal_programs();
  ASSERT_EQ(task.space.size(), 144u);
  FakeMeasurer fake(log);
  TuneOptions o = quick("random", 144);
  o.batch = 16;
  o.local.build_timeout_s = 1e-9;  // an option of the LocalMeasurer: ignored with a given measurer
  TaskResult r = Tuner(log, o, &fake).tune(task);
  EXPECT_EQ(fake.begin_calls, 1);
  EXPECT_GE(fake.measure_calls, 3);  // at most one per batch of 16, none for a batch all reused
  EXPECT_LE(fake.measure_calls, 9);
  EXPECT_EQ(r.measured_now, 144);
  EXPECT_EQ(r.trials, 144);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.has_best);
  // Each distinct program measured once (FakeMeasurer checks none is sent twice), the rest reuse.
  EXPECT_EQ(fake.programs.size(), 36u);
  EXPECT_EQ(fake.appended.size(), 36u);
  EXPECT_EQ(r.reused, 144 - 36);
  // Every config once in the log: the measurer's records as it appended them, and the Tuner's
  // own for the configs reusing a measurement, with the measured program's costs.
  const std::vector<records::MeasureRecord> recs = log.records(task.key, "llvm");
  ASSERT_EQ(recs.size(), 144u);
  std::set<uint64_t> configs;
  std::map<uint64_t, double> cost_of;  // config index % 36 (the program) -> cost
  for (const records::MeasureRecord& m : fake.appended) cost_of[m.config_index % 36] = m.cost();
  for (const records::MeasureRecord& rec : recs) {
    EXPECT_TRUE(configs.insert(rec.config_index).second) << "config " << rec.config_index;
    EXPECT_EQ(rec.device, "fake device");
    EXPECT_EQ(rec.search_seed, o.seed);
    EXPECT_EQ(rec.config, task.space.get(rec.config_index).str());
    EXPECT_EQ(rec.cost(), cost_of.at(rec.config_index % 36)) << "config " << rec.config_index;
    EXPECT_EQ(rec.gflops, task.flops / rec.cost() / 1e9);
  }
  for (const records::MeasureRecord& m : fake.appended) {
    EXPECT_EQ(std::count(recs.begin(), recs.end(), m), 1) << "config " << m.config_index;
  }

  // A budget already met asks the measurer for nothing, not even the reference.
  FakeMeasurer idle(log);
  EXPECT_EQ(Tuner(log, quick("random", 144), &idle).tune(task).measured_now, 0);
  EXPECT_EQ(idle.begin_calls, 0);
  EXPECT_EQ(idle.measure_calls, 0);
}

/// Small dense tasks of different shapes, as a model's.
std::vector<Task> dense_tasks() {
  std::vector<Task> tasks;
  for (int n : {8, 16, 32}) {
    te::Tensor x = te::placeholder({n, 32}, ir::kFloat32, "x");
    te::Tensor w = te::placeholder({16, 32}, ir::kFloat32, "w");
    tasks.push_back(Task::make("dense_x86", topi::dense(x, w), "llvm"));
  }
  return tasks;
}

size_t records_of(const records::RecordLog& log, const std::vector<Task>& tasks) {
  size_t n = 0;
  for (const Task& t : tasks) n += log.count(t.key, t.target);
  return n;
}

TEST(TuneTasks, ABudgetIsSpentExactlyAndAKilledRunResumesMeasuringNothingTwice) {
  testing::TempDir dir("kiln_tune_tasks_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const std::vector<Task> tasks = dense_tasks();
  for (const Task& t : tasks) ASSERT_GE(t.space.size(), 40u) << t.key;
  const std::vector<int> calls = {1, 3, 2};
  TasksTuneOptions o;
  o.tune = quick("random", 200);
  o.budget = 60;

  // Killed after 25 measurements: they stay in the log.
  FakeMeasurer dying(log);
  dying.kill_after = 25;
  EXPECT_THROW(tune_tasks(tasks, calls, log, o, &dying), std::runtime_error);
  const size_t after_kill = records_of(log, tasks);
  EXPECT_GE(after_kill, 25u);
  EXPECT_LT(after_kill, 60u);

  // Run again with the same budget: the rest, exactly.
  FakeMeasurer fake(log);
  std::vector<size_t> done;
  std::vector<double> estimates;
  o.on_progress = [&](size_t, const Task&, const TuneProgress& p, const ScheduleStatus& s) {
    EXPECT_FALSE(p.costs_s.empty());
    EXPECT_LE(s.measurements, 60);
    estimates.push_back(s.estimated_latency_s);
  };
  o.on_task_done = [&](size_t i, const Task&, const TaskResult&, const std::string& why,
                       const ScheduleStatus&) {
    done.push_back(i);
    EXPECT_TRUE(why == "budget spent" || why == "stopped improving") << why;
  };
  const TasksTuneReport r = tune_tasks(tasks, calls, log, o, &fake);
  EXPECT_EQ(records_of(log, tasks), 60u);
  EXPECT_EQ(r.status.measurements, 60);
  EXPECT_EQ(r.status.measured_now, static_cast<int>(60 - after_kill));
  EXPECT_EQ(r.ended, "budget spent");
  EXPECT_EQ(std::set<size_t>(done.begin(), done.end()).size(), tasks.size());  // each once
  ASSERT_FALSE(estimates.empty());
  EXPECT_GT(estimates.back(), 0);
  int now = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    // Every task got its first round (the default first), and no config twice.
    const std::vector<records::MeasureRecord> recs = log.records(tasks[i].key, "llvm");
    EXPECT_GE(recs.size(), 8u) << tasks[i].key;
    EXPECT_EQ(recs.front().config_index, tasks[i].default_config.index());
    std::set<uint64_t> configs;
    for (const records::MeasureRecord& rec : recs) {
      EXPECT_TRUE(configs.insert(rec.config_index).second)
          << tasks[i].key << ": config " << rec.config_index << " measured twice";
    }
    EXPECT_EQ(r.results[i].trials, static_cast<int>(recs.size()));
    now += r.results[i].measured_now;
  }
  EXPECT_EQ(now, r.status.measured_now);
  // The model's estimate is every task's best time times its calls.
  double expected = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    expected += calls[i] * log.best(tasks[i].key, "llvm")->cost();
  }
  EXPECT_NEAR(r.status.estimated_latency_s, expected, 1e-12);

  // A third run with the same budget measures nothing, not even a reference.
  FakeMeasurer idle(log);
  o.on_progress = nullptr;
  o.on_task_done = nullptr;
  EXPECT_EQ(tune_tasks(tasks, calls, log, o, &idle).status.measured_now, 0);
  EXPECT_EQ(idle.begin_calls, 0);
  EXPECT_EQ(idle.measure_calls, 0);
}

TEST(TuneTasks, WithoutABudgetEachTaskIsTunedToItsTrialsInTurn) {
  testing::TempDir dir("kiln_tune_tasks_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const std::vector<Task> tasks = dense_tasks();
  TasksTuneOptions o;
  o.tune = quick("random", 12);
  FakeMeasurer fake(log);
  std::vector<size_t> order;
  o.on_progress = [&](size_t i, const Task&, const TuneProgress& p, const ScheduleStatus&) {
    if (order.empty() || order.back() != i) order.push_back(i);
    EXPECT_EQ(p.trials_total, 12);
  };
  o.on_task_done = [&](size_t, const Task&, const TaskResult& r, const std::string& why,
                       const ScheduleStatus&) {
    EXPECT_EQ(r.trials, 12);
    EXPECT_EQ(why, "trial cap");
  };
  const TasksTuneReport r = tune_tasks(tasks, {1, 1, 1}, log, o, &fake);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(r.ended, "every task done");
  EXPECT_EQ(records_of(log, tasks), 36u);
  EXPECT_ERROR_CONTAINS(tune_tasks(tasks, {1, 1}, log, o, &fake), "2 call counts for 3 tasks");
}

// The search scores hundreds of candidates per batch it measures: their features must come from
// the cheap program (Task::lower_for_features), never a full device lowering, or the search costs
// more than the measurements (it did: lowering every scored OpenCL candidate through unrolling and
// barrier planning took minutes per batch). Counted, not timed: the full lowerings of a tune() are
// those of the configs it measures.
TEST(Tuner, ScoringACandidateCostsNoFullLowering) {
  testing::TempDir dir("kiln_tuner_search_cost");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  te::Tensor data = te::placeholder({1, 16, 14, 14}, ir::kFloat32, "data");
  te::Tensor kernel = te::placeholder({32, 16, 3, 3}, ir::kFloat32, "kernel");
  const Task task = Task::make("conv2d_nchw_gpu",
                               topi::conv2d_nchw(data, kernel, {1, 1}, {1, 1, 1, 1}), "opencl");
  ASSERT_GT(task.space.size(), 1000u);
  FakeMeasurer fake(log);
  TuneOptions o = quick("xgb", 32);
  o.batch = 16;
  const uint64_t before = compiler::full_lowerings();
  const TaskResult r = Tuner(log, o, &fake).tune(task);
  const uint64_t lowered = compiler::full_lowerings() - before;
  EXPECT_EQ(r.measured_now, 32);
  EXPECT_EQ(r.rounds, 2);
  EXPECT_GE(r.scored, 200) << "the model-guided rounds scored too few candidates to tell";
  EXPECT_LE(lowered, 32u) << "full lowerings beyond the 32 measured configs: the search lowers "
                          << "the " << r.scored
                          << " candidates it scores through the device passes";
  EXPECT_GT(r.search_s, 0);
  EXPECT_GT(r.measure_s, 0);
}

TEST(Measurer, TheReferenceIsSeededAndDeterministic) {
  const Task task = dense_task();
  const TaskReference a = compute_reference(task);
  const TaskReference b = compute_reference(task);
  EXPECT_EQ(a.input_seed, runtime::seed_of(task.key));
  ASSERT_EQ(a.inputs.size(), 2u);
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    runtime::NDArray expected = runtime::NDArray::empty(a.inputs[i].shape(), runtime::kFloat32);
    runtime::fill_uniform(expected, a.input_seed + i);
    const float* p = a.inputs[i].data<float>();
    const float* q = expected.data<float>();
    for (int64_t k = 0; k < expected.num_elements(); ++k) ASSERT_EQ(p[k], q[k]) << i << " " << k;
  }
  ASSERT_EQ(a.output.num_elements(), 32 * 48);
  ASSERT_EQ(b.output.num_elements(), 32 * 48);
  EXPECT_EQ(a.max_abs, b.max_abs);
  // out = x * w^T, against a loop here.
  const float* x = a.inputs[0].data<float>();
  const float* w = a.inputs[1].data<float>();
  const float* out = a.output.data<float>();
  double max_abs = 0;
  for (int i = 0; i < 32; ++i) {
    for (int j = 0; j < 48; ++j) {
      double sum = 0;
      for (int k = 0; k < 64; ++k) sum += static_cast<double>(x[i * 64 + k]) * w[j * 64 + k];
      EXPECT_NEAR(out[i * 48 + j], sum, 1e-4) << i << ", " << j;
      EXPECT_EQ(out[i * 48 + j], b.output.data<float>()[i * 48 + j]);
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(out[i * 48 + j])));
    }
  }
  EXPECT_EQ(a.max_abs, max_abs);
  EXPECT_GT(a.max_abs, 0.0);
}

TEST(Tuner, TunesAnInt8ConvolutionOverUint8Data) {
  // conv2d_nchwc_int8_x86: uint8 data (generated in [0, 255]), int8 weights, an exact int32
  // output; every candidate must match the reference bit for bit.
  te::Tensor x = te::placeholder({1, 2, 9, 9, 8}, ir::DataType::UInt(8), "data");
  te::Tensor w = te::placeholder({2, 2, 3, 3, 2, 16, 4}, ir::kInt8, "kernel");
  const Task task =
      Task::make("conv2d_nchwc_int8_x86",
                 topi::conv2d_nchwc_int8(x, w, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3), "llvm");
  const TaskReference ref = compute_reference(task);
  ASSERT_EQ(ref.inputs.size(), 2u);
  const size_t at = task.inputs[0]->name() == "data" ? 0 : 1;
  const runtime::NDArray& data = ref.inputs[at];
  ASSERT_TRUE(runtime::dtype_equal(data.dtype(), runtime::kUInt8));
  const uint8_t* d = data.data<uint8_t>();
  EXPECT_GT(*std::max_element(d, d + data.num_elements()), 127) << "the data's upper half unused";
  EXPECT_GT(ref.max_abs, 0.0);

  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const TaskResult r = Tuner(log, quick("xgb", 8)).tune(task);
  EXPECT_EQ(r.measured_now, 8);
  EXPECT_TRUE(r.errors.empty()) << r.errors.begin()->first;
  EXPECT_TRUE(r.has_best);
  EXPECT_EQ(log.records(task.key, "llvm").front().config_index, task.default_config.index());
}

TEST(LocalMeasurer, MeasureNeedsBeginTaskOfTheSameTask) {
  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  LocalMeasurer m(log, LocalMeasureOptions{});
  EXPECT_EQ(m.options().device, host_device_fingerprint());
  EXPECT_THROW(m.measure(dense_task(), {}, 1), InternalError);
}

/// The LocalMeasurer work folders of this process (kiln-tune-<pid>-<n> in the temp folder).
std::vector<std::filesystem::path> work_dirs() {
  const std::string prefix = "kiln-tune-" + std::to_string(::getpid()) + "-";
  std::vector<std::filesystem::path> out;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  for (const auto& e : std::filesystem::directory_iterator(tmp)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  }
  return out;
}

TEST(LocalMeasurer, MeasuresInOrderAppendsAndRemovesItsFiles) {
  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const Task task = dense_task();
  std::vector<Candidate> cands;
  for (uint64_t i : {task.default_config.index(), uint64_t{5}}) {
    const Config cfg = task.space.get(i);
    cands.push_back({i, cfg.str(), compiler::lower(task.schedule(cfg), task.args(), "candidate")});
  }
  LocalMeasureOptions o;
  o.repeat = 2;
  o.min_repeat_ms = 1;
  o.threads = 1;
  o.device = "test device";
  {
    LocalMeasurer m(log, o);
    ASSERT_TRUE(work_dirs().empty());
    m.begin_task(task);
    m.begin_task(task);  // replaces the first folder
    const std::vector<std::filesystem::path> dirs = work_dirs();
    ASSERT_EQ(dirs.size(), 1u);
    // The reference as files: compute_reference's arrays.
    const TaskReference ref = compute_reference(task);
    for (size_t i = 0; i < ref.inputs.size(); ++i) {
      runtime::NDArray a =
          runtime::load_npy((dirs[0] / ("input" + std::to_string(i) + ".npy")).string());
      ASSERT_EQ(a.num_elements(), ref.inputs[i].num_elements());
      for (int64_t k = 0; k < a.num_elements(); ++k) {
        ASSERT_EQ(a.data<float>()[k], ref.inputs[i].data<float>()[k]);
      }
    }
    EXPECT_TRUE(std::filesystem::exists(dirs[0] / "reference.npy"));

    const std::vector<records::MeasureRecord> recs = m.measure(task, cands, 99);
    ASSERT_EQ(recs.size(), 2u);
    EXPECT_EQ(log.records(task.key, "llvm"), recs);
    for (size_t k = 0; k < recs.size(); ++k) {
      EXPECT_EQ(recs[k].config_index, cands[k].config_index);
      EXPECT_EQ(recs[k].config, cands[k].config);
      EXPECT_EQ(recs[k].error, ErrorKind::kNone) << recs[k].error_msg;
      EXPECT_EQ(recs[k].costs_s.size(), 2u);
      EXPECT_EQ(recs[k].gflops, task.flops / recs[k].cost() / 1e9);
      EXPECT_EQ(recs[k].device, "test device");
      EXPECT_EQ(recs[k].target, "llvm");
      EXPECT_EQ(recs[k].search_seed, 99u);
      EXPECT_GT(recs[k].timestamp_ms, 0);
    }
    // The candidates' libraries do not pile up.
    EXPECT_FALSE(std::filesystem::exists(dirs[0] / "candidate0.so"));
  }
  EXPECT_TRUE(work_dirs().empty());
}

// A measurement whose CPU another process holds throughout: the record says contended, and the
// next measurement gets a tenth of the retry allowance (the LocalMeasurer does not wait the whole
// allowance again on a busy machine). The kiln-runner child inherits this thread's single CPU.
TEST(LocalMeasurer, ContendedMeasurementsAreMarkedAndShortenTheNextAllowance) {
  if (std::isnan(runtime::run_queue_wait_s())) GTEST_SKIP() << "no scheduler statistics here";
  auto busy = std::make_unique<testing::CpuCompetitor>();  // until the measurements are done

  testing::TempDir dir("kiln_tuner_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const Task task = dense_task();
  LocalMeasureOptions o;
  o.repeat = 2;
  o.min_repeat_ms = 20;
  o.threads = 1;
  o.disturbed_retry_ms = 1000;
  LocalMeasurer m(log, o);
  m.begin_task(task);
  std::vector<double> seconds;
  std::vector<records::MeasureRecord> recs;
  for (uint64_t i : {uint64_t{1}, uint64_t{2}}) {
    const Config cfg = task.space.get(i);
    const Candidate c{i, cfg.str(), compiler::lower(task.schedule(cfg), task.args(), "candidate")};
    const auto t0 = std::chrono::steady_clock::now();
    recs.push_back(m.measure(task, {c}, 1).at(0));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  busy.reset();

  for (const records::MeasureRecord& r : recs) {
    ASSERT_EQ(r.error, ErrorKind::kNone) << r.error_msg;
    EXPECT_TRUE(r.contended);
    EXPECT_EQ(r.costs_s.size(), 2u);  // kept, not lost
  }
  EXPECT_EQ(log.records(task.key, "llvm"), recs);  // the flag is in the log too
  EXPECT_GE(seconds[0], 1.0);                      // the whole allowance, spent
  EXPECT_LT(seconds[1], seconds[0] - 0.5);         // a tenth of it
}

// On a farm, the log is shared: another job tuning the same model appends records of the same
// task while this one tunes it. They count as its trials (the scheduler follows the log).
TEST(TuneTasks, RecordsAnotherJobAppendsToTheSharedLogCountAsTrials) {
  testing::TempDir dir("kiln_tune_tasks_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const std::vector<Task> tasks = dense_tasks();
  TasksTuneOptions o;
  o.tune = quick("random", 12);
  FakeMeasurer fake(log);
  fake.other_job = true;
  const TasksTuneReport r = tune_tasks(tasks, {1, 1, 1}, log, o, &fake);
  EXPECT_EQ(r.ended, "every task done");
  for (const Task& t : tasks) EXPECT_GE(log.count(t.key, t.target), 12u) << t.key;
  EXPECT_GT(fake.other_configs, 0u);
}

}  // namespace
}  // namespace kiln::autotune
