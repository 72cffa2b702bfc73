// The cost model of a whole record log (compiler/autotune/log_model.h): trained on every task of a
// target whose source the log knows, kept on the log's shelf and reloaded after a restart, trained
// again once the records grew, ranking a task it never saw (transfer), trained on records imported
// from another farm's pack (which carries its tasks' sources), guiding a Tuner's first round, and
// choosing zero-shot configs for the graph build's LogConfigSource. Throughputs come
// from a hidden function of each config's loop program, the same for every task, so what the
// model learns on some tasks holds on others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "compiler/autotune/features.h"
#include "compiler/autotune/log_model.h"
#include "compiler/autotune/measurer.h"
#include "compiler/autotune/tuner.h"
#include "compiler/topi/dense.h"
#include "records/record_log.h"
#include "records/record_pack.h"
#include "tests/common/expect_error.h"
#include "tests/common/rank_correlation.h"
#include "tests/common/temp_dir.h"

namespace kiln::autotune {
namespace {

const char* kTarget = "llvm";

Task dense(int n, int k, int m) {
  te::Tensor x = te::placeholder({n, k}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({m, k}, ir::kFloat32, "w");
  return Task::make("dense_x86", topi::dense(x, w), kTarget);
}

/// The hidden throughput of a config: a function of its loop program's features (innermost
/// extent near 16 and vectorized is fast, more loop levels cost).
double truth(const Task& task, uint64_t index) {
  const std::vector<float> f = loop_features(task.lower_for_features(task.space.get(index)));
  const double inner = f[kLoopOffset + 0];  // log2(1 + innermost extent)
  const double vectorized = f[kLoopOffset + 3];
  double levels = 0;
  for (int l = 0; l < kMaxLoops; ++l) levels += f[kLoopOffset + l * kLoopLevelFeatures + 7];
  return 10.0 + 6.0 * vectorized - 2.0 * std::abs(inner - 4.1) - 0.7 * levels;
}

records::MeasureRecord record(const Task& task, uint64_t index) {
  records::MeasureRecord r;
  r.target = kTarget;
  r.device = "fake device";
  r.task_key = task.key;
  r.config_index = index;
  r.config = task.space.get(index).str();
  r.gflops = truth(task, index);
  r.costs_s = {task.flops / r.gflops / 1e9};
  r.timestamp_ms = 1;
  return r;
}

/// Appends `n` configs of `task` spread over its space, noting its source.
void measure(records::RecordLog& log, const Task& task, size_t n) {
  log.note_task(task.key, {task.template_name, task.workload});
  for (size_t i = 0; i < n; ++i) log.append(record(task, i * task.space.size() / n));
}

/// How well `model` ranks every config of `task` against the truth.
double rank_quality(const CostModel& model, const Task& task) {
  std::vector<std::vector<float>> x;
  std::vector<double> t;
  for (uint64_t i = 0; i < task.space.size(); ++i) {
    x.push_back(loop_features(task.lower_for_features(task.space.get(i))));
    t.push_back(truth(task, i));
  }
  const std::vector<float> s = model.predict(x);
  return testing::spearman({s.begin(), s.end()}, t);
}

TEST(LogModel, TrainedOnTheWholeLogKeptAndRetrainedAsRecordsArrive) {
  testing::TempDir dir("kiln_log_model_test");
  const std::string path = (dir.path() / "log").string();
  const Task held_out = dense(24, 48, 40);
  std::vector<float> before;
  {
    records::RecordLog log = records::RecordLog::open(path);
    EXPECT_EQ(pretrained_model(log, kTarget), nullptr);  // nothing to learn from yet
    for (const Task& t : {dense(8, 32, 16), dense(16, 64, 32), dense(32, 32, 64)})
      measure(log, t, 40);
    // A task whose source names a template this Kiln lacks: skipped, counted.
    records::MeasureRecord stray = record(dense(8, 32, 16), 1);
    stray.task_key = "conv9d_x86:1x2:abc";
    log.append(stray);
    log.note_task(stray.task_key, {"conv9d_x86", "{}"});

    LogModelReport r;
    std::unique_ptr<CostModel> m = pretrained_model(log, kTarget, {}, &r);
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(r.trained_now);
    EXPECT_EQ(r.info.tasks, 3u);
    EXPECT_EQ(r.info.rows, 120u);
    EXPECT_EQ(r.info.records, 121u);
    EXPECT_EQ(r.skipped_tasks, 1u);
    // Transfer: a task of another shape it never saw is ranked well.
    const double rho = rank_quality(*m, held_out);
    std::cout << "case=log_model_transfer spearman_heldout=" << rho << "\n";
    EXPECT_GT(rho, 0.6);

    // Asked again with no new records: the kept model, not trained again.
    LogModelReport again;
    std::unique_ptr<CostModel> kept = pretrained_model(log, kTarget, {}, &again);
    EXPECT_FALSE(again.trained_now);
    EXPECT_EQ(again.info.rows, 120u);
    before = kept->predict({loop_features(held_out.lower_for_features(held_out.default_config))});
  }
  // After a restart, the kept model is the same one.
  records::RecordLog log = records::RecordLog::open(path);
  LogModelInfo info;
  std::unique_ptr<CostModel> reloaded = kept_model(log, kTarget, "xgb", &info);
  ASSERT_NE(reloaded, nullptr);
  EXPECT_EQ(info.tasks, 3u);
  EXPECT_EQ(
      reloaded->predict({loop_features(held_out.lower_for_features(held_out.default_config))}),
      before);
  // Records of a new task arrive: past the growth threshold the model learns again.
  measure(log, held_out, 20);
  LogModelReport grown;
  std::unique_ptr<CostModel> m = pretrained_model(log, kTarget, {}, &grown);
  EXPECT_TRUE(grown.trained_now);
  EXPECT_EQ(grown.info.tasks, 4u);
  EXPECT_EQ(grown.info.records, 141u);
  // Another target has no model; a shelf entry that is not a model is refused by name.
  EXPECT_EQ(kept_model(log, "llvm -mcpu=znver4"), nullptr);
  log.put_shelf(records::cost_model_shelf(kTarget, "xgb"), "garbage");
  EXPECT_ERROR_CONTAINS(kept_model(log, kTarget), "the kept cost model 'cost-model/xgb/llvm'");
}

TEST(LogModel, RecordsImportedFromAnotherFarmsPackTrainTheModel) {
  testing::TempDir dir("kiln_log_model_test");
  const std::string pack = (dir.path() / "farm.jsonl").string();
  {
    records::RecordLog farm = records::RecordLog::open((dir.path() / "farm").string());
    for (const Task& t : {dense(8, 32, 16), dense(16, 64, 32), dense(32, 32, 64)})
      measure(farm, t, 40);
    EXPECT_EQ(farm.export_pack(pack, kTarget).sources, 3u);
  }
  // Another team's log, which never tuned these tasks: the pack is all it knows.
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const records::RecordLog::ImportReport imported = log.import_pack(pack);
  EXPECT_EQ(imported.imported, 120u);
  EXPECT_EQ(imported.sources, 3u);
  LogModelReport r;
  std::unique_ptr<CostModel> m = pretrained_model(log, kTarget, {}, &r);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(r.trained_now);
  EXPECT_EQ(r.info.tasks, 3u);
  EXPECT_EQ(r.info.rows, 120u);
  EXPECT_EQ(r.skipped_tasks, 0u) << "every source rebuilt its task's key";
  const double rho = rank_quality(*m, dense(24, 48, 40));
  std::cout << "case=log_model_imported_pack tasks=" << r.info.tasks << " rows=" << r.info.rows
            << " spearman_heldout=" << rho << "\n";
  EXPECT_GT(rho, 0.6);

  // The same records without their sources, as a version 1 pack carried them: the log holds
  // them (bests, resuming) but its model has nothing it can read.
  const std::string bare = (dir.path() / "bare.jsonl").string();
  records::write_pack(bare, kTarget, records::Lane::kDevice, records::read_pack(pack).records, {});
  records::RecordLog without = records::RecordLog::open((dir.path() / "without").string());
  EXPECT_EQ(without.import_pack(bare).imported, 120u);
  EXPECT_EQ(pretrained_model(without, kTarget), nullptr);
}

/// Measures with the hidden truth, appending to the log as a Measurer must.
class TruthMeasurer : public Measurer {
 public:
  explicit TruthMeasurer(records::RecordLog& log) : log_(log) {}
  void begin_task(const Task&) override {}
  std::vector<records::MeasureRecord> measure(const Task& task, const std::vector<Candidate>& cands,
                                              uint64_t) override {
    std::vector<records::MeasureRecord> out;
    for (const Candidate& c : cands) {
      out.push_back(record(task, c.config_index));
      log_.append(out.back());
    }
    return out;
  }

 private:
  records::RecordLog& log_;
};

TEST(LogModel, APretrainedModelGuidesTheFirstRoundAndChoosesZeroShotConfigs) {
  testing::TempDir dir("kiln_log_model_test");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  std::vector<double> gains;  // default time / best time of each task
  for (const Task& t : {dense(8, 32, 16), dense(16, 64, 32), dense(32, 32, 64)}) {
    measure(log, t, 40);
    log.append(record(t, t.default_config.index()));
    double best = 0;
    for (const auto& r : log.records(t.key, kTarget)) best = std::max(best, r.gflops);
    gains.push_back(best / truth(t, t.default_config.index()));
  }
  LogModelReport report;
  std::unique_ptr<CostModel> prior = pretrained_model(log, kTarget, {}, &report);
  ASSERT_NE(prior, nullptr);
  // What tuning gained over each template's default, the median over its tasks, is kept with it.
  std::sort(gains.begin(), gains.end());
  ASSERT_EQ(report.info.template_gains.count("dense_x86"), 1u);
  EXPECT_NEAR(report.info.template_gains.at("dense_x86"), gains[1], 1e-6);
  const Task task = dense(24, 48, 40);
  std::vector<double> all;
  for (uint64_t i = 0; i < task.space.size(); ++i) all.push_back(truth(task, i));
  const double best = *std::max_element(all.begin(), all.end());
  std::vector<double> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  const double top_quarter = sorted[sorted.size() * 3 / 4];

  // One round of 8 with the prior against one without (random): the prior's is better.
  auto first_round = [&](const CostModel* p, const std::string& sub) {
    records::RecordLog l = records::RecordLog::open((dir.path() / sub).string());
    TruthMeasurer measurer(l);
    TuneOptions o;
    o.trials = 8;
    o.batch = 8;
    o.default_first = false;
    o.prior = p;
    Tuner(l, o, &measurer).tune(task);
    double sum = 0;
    for (const auto& r : l.records(task.key, kTarget)) sum += r.gflops;
    return sum / 8;
  };
  const double with = first_round(prior.get(), "with"), without = first_round(nullptr, "without");
  std::cout << "case=first_round mean_with_prior=" << with << " mean_random=" << without
            << " best=" << best << "\n";
  EXPECT_GT(with, without);

  // Zero-shot: the build's choice for a task never measured is among the best quarter.
  const std::optional<space::Config> cfg = predict_best_config(task, *prior);
  ASSERT_TRUE(cfg.has_value());
  EXPECT_GE(truth(task, cfg->index()), top_quarter);
  // The build takes it where the log shows tuning gains much over the template's defaults.
  LogConfigSource source(log, prior.get(), {{"dense_x86", 2.0}});
  EXPECT_EQ(source.choose(task).index(), cfg->index());
  EXPECT_EQ(source.predicted(), 1);
  EXPECT_EQ(source.defaults(), 0);
  // Where tuning gained little over the defaults (a CPU template's), or for a template the model
  // never saw, the default stays.
  for (const std::map<std::string, double>& gains :
       {std::map<std::string, double>{{"dense_x86", 1.1}}, std::map<std::string, double>{}}) {
    LogConfigSource cautious(log, prior.get(), gains);
    EXPECT_EQ(cautious.choose(task).index(), task.default_config.index());
    EXPECT_EQ(cautious.defaults(), 1);
  }
  // A measured task gets its best record; without a model, an unmeasured task its default.
  const Task measured = dense(8, 32, 16);
  EXPECT_EQ(source.choose(measured).index(), log.best(measured.key, kTarget)->config_index);
  EXPECT_EQ(source.tuned(), 1);
  LogConfigSource plain(log);
  EXPECT_EQ(plain.choose(task).index(), task.default_config.index());
  EXPECT_EQ(plain.defaults(), 1);
}

}  // namespace
}  // namespace kiln::autotune
