// The job store: persistence across reopen (a restart lists every unfinished job), state
// transitions validated with errors naming the job and both states, progress updates.
#include <gtest/gtest.h>

#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"
#include "tracker/job_store.h"

namespace kiln::tracker {
namespace {

JobRecord job(const std::string& name, uint32_t trials = 100) {
  JobRecord j;
  j.owner = "ana";
  j.model_name = name;
  j.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";
  j.device_key = "rk3399";
  j.trials = trials;
  j.priority = 2;
  return j;
}

TEST(TrackerJobStore, PersistsAcrossReopenAndResumesUnfinished) {
  kiln::testing::TempDir dir;
  int64_t now = 1000;
  auto clock = [&] { return now; };
  JobId a, b, c, d;
  {
    JobStore s = JobStore::open(dir.file("jobs"), clock);
    JobRecord shaped = job("resnet18");
    shaped.input_shapes = {{"input", {4, 3, 224, 224}}, {"mask", {4, 1}}, {"scalar", {}}};
    a = s.create(shaped);
    b = s.create(job("mobilenet"));
    c = s.create(job("dqn"));
    JobRecord budgeted = job("lstm", 0);  // the task scheduler's: a budget and a time limit
    budgeted.budget = 600;
    budgeted.time_limit_s = 90.5;
    budgeted.early_stop = 0;
    d = s.create(budgeted);
    EXPECT_EQ(a, 1u);
    EXPECT_EQ(d, 4u);
    now = 2000;
    s.transition(a, JobState::kRunning);
    s.update_progress(a, [](JobRecord& j) {
      j.tasks_total = 12;
      j.task_keys = {"t0", "t1", "t2", "t3"};
      j.done_tasks = {2, 0, 3};  // under a budget, in the order they ended
      j.tuning_task = 1;
      j.trials_done = 310;
      j.trials_failed = 7;
      j.best_latency_s = 0.0123;
    });
    s.transition(b, JobState::kRunning);
    now = 3000;
    s.transition(b, JobState::kDone);
    s.transition(c, JobState::kCancelled, "owner asked");
  }
  JobStore s = JobStore::open(dir.file("jobs"), clock);
  auto all = s.list();
  ASSERT_EQ(all.size(), 4u);
  auto open = s.unfinished();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open[0].id, a);
  EXPECT_EQ(open[0].state, JobState::kRunning);
  EXPECT_EQ(open[0].tasks_done(), 3u);
  EXPECT_EQ(open[0].done_tasks, (std::vector<uint32_t>{2, 0, 3}));
  EXPECT_EQ(open[0].tuning_task, 1u);
  EXPECT_FALSE(open[0].scheduled());
  EXPECT_EQ(open[0].budget, 0u);
  EXPECT_FALSE(open[0].early_stop);
  EXPECT_EQ(open[0].trials_done, 310u);
  EXPECT_DOUBLE_EQ(open[0].best_latency_s, 0.0123);
  EXPECT_EQ(open[0].created_ms, 1000);
  EXPECT_EQ(open[0].started_ms, 2000);
  EXPECT_EQ(open[0].owner, "ana");
  EXPECT_EQ(open[0].priority, 2);
  // The shapes its model is compiled for (--input-shape), a scalar's empty one included.
  const std::map<std::string, std::vector<int64_t>> shapes = {
      {"input", {4, 3, 224, 224}}, {"mask", {4, 1}}, {"scalar", {}}};
  EXPECT_EQ(open[0].input_shapes, shapes);
  EXPECT_TRUE(open[1].input_shapes.empty());
  EXPECT_EQ(open[1].id, d);
  EXPECT_EQ(open[1].state, JobState::kQueued);
  EXPECT_TRUE(open[1].scheduled());
  EXPECT_EQ(open[1].trials, 0u);
  EXPECT_EQ(open[1].budget, 600u);
  EXPECT_DOUBLE_EQ(open[1].time_limit_s, 90.5);
  EXPECT_EQ(open[1].early_stop, 0u);
  EXPECT_FALSE(open[1].tuning_task);
  auto done = s.get(b);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, JobState::kDone);
  EXPECT_EQ(done->finished_ms, 3000);
  EXPECT_EQ(s.get(c)->error, "owner asked");
  EXPECT_FALSE(s.get(99));
  // Ids are never reused after a reopen.
  EXPECT_EQ(s.create(job("dcgan")), 5u);
}

TEST(TrackerJobStore, IllegalTransitionsNameTheJobAndStates) {
  kiln::testing::TempDir dir;
  JobStore s = JobStore::open(dir.file("jobs"));
  JobId id = s.create(job("resnet18"));
  EXPECT_ERROR_CONTAINS(s.transition(id, JobState::kDone),
                        "job 1 ('resnet18'): cannot go from queued to done");
  EXPECT_ERROR_CONTAINS(s.transition(id, JobState::kQueued), "from queued to queued");
  s.transition(id, JobState::kRunning);
  EXPECT_ERROR_CONTAINS(s.transition(id, JobState::kQueued), "from running to queued");
  s.transition(id, JobState::kFailed, "no device of key rk3399");
  EXPECT_ERROR_CONTAINS(s.transition(id, JobState::kRunning),
                        "cannot go from failed to running (it has finished)");
  EXPECT_ERROR_CONTAINS(s.transition(id, JobState::kCancelled), "from failed to cancelled");
  EXPECT_EQ(s.get(id)->state, JobState::kFailed);
  EXPECT_EQ(s.get(id)->error, "no device of key rk3399");
  EXPECT_ERROR_CONTAINS(s.transition(42, JobState::kRunning), "job 42: no such job");
  EXPECT_ERROR_CONTAINS(s.update_progress(42, [](JobRecord&) {}), "job 42: no such job");
}

TEST(TrackerJobStore, TransitionTable) {
  using S = JobState;
  EXPECT_TRUE(is_legal_transition(S::kQueued, S::kRunning));
  EXPECT_TRUE(is_legal_transition(S::kQueued, S::kCancelled));
  EXPECT_TRUE(is_legal_transition(S::kQueued, S::kFailed));
  EXPECT_TRUE(is_legal_transition(S::kRunning, S::kDone));
  EXPECT_TRUE(is_legal_transition(S::kRunning, S::kFailed));
  EXPECT_TRUE(is_legal_transition(S::kRunning, S::kCancelled));
  EXPECT_FALSE(is_legal_transition(S::kQueued, S::kDone));
  for (S from : {S::kDone, S::kFailed, S::kCancelled}) {
    for (S to : {S::kQueued, S::kRunning, S::kDone, S::kFailed, S::kCancelled}) {
      EXPECT_FALSE(is_legal_transition(from, to));
    }
  }
  EXPECT_EQ(job_state_from_name("cancelled"), S::kCancelled);
  EXPECT_ERROR_CONTAINS(job_state_from_name("paused"), "unknown job state 'paused'");
}

TEST(TrackerJobStore, RejectsBadJobsAndSecondOpen) {
  kiln::testing::TempDir dir;
  JobStore s = JobStore::open(dir.file("jobs"));
  JobRecord bad = job("x");
  bad.device_key = "";
  EXPECT_ERROR_CONTAINS(s.create(bad), "device key is empty");
  EXPECT_ERROR_CONTAINS(s.create(job("y", 0)), "needs trials (per task), a budget or a time limit");
  EXPECT_ERROR_CONTAINS(JobStore::open(dir.file("jobs")), "in use");
  EXPECT_TRUE(s.list().empty());
}

}  // namespace
}  // namespace kiln::tracker
