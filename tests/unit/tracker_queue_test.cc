// The measure queue: fair share between jobs, priorities, matching by device key, FIFO within a
// job with re-queued requests first, cancel, and a throughput check. The build queue: batches
// taken from jobs in turn, target filters, timed-out builds handed again or given up.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "base/sanitizers.h"
#include "tests/common/expect_error.h"
#include "tracker/build_queue.h"
#include "tracker/measure_queue.h"

namespace kiln::tracker {
namespace {

using std::chrono::seconds;

MeasureSpec spec(JobId job, const std::string& key, uint64_t config = 0) {
  MeasureSpec s;
  s.job_id = job;
  s.task_key = "conv2d_x86:1x64x56x56:77";
  s.config_index = config;
  s.target = "llvm";
  s.device_key = key;
  return s;
}

TEST(TrackerQueue, FairShareBetweenTwoJobs) {
  FakeClock clock;
  MeasureQueue q(clock);
  // Job 1 submits everything first; job 2 arrives later with as many requests.
  for (int i = 0; i < 500; ++i) q.enqueue(spec(1, "pi", i));
  for (int i = 0; i < 500; ++i) q.enqueue(spec(2, "pi", i));
  std::map<JobId, int> served;
  for (int i = 0; i < 600; ++i) {
    auto r = q.next_for(1, "pi");
    ASSERT_TRUE(r);
    ++served[r->job_id];
    int diff = served[1] - served[2];
    EXPECT_LE(std::abs(diff), 1) << "after " << i + 1 << " dispatches";
    ASSERT_TRUE(q.complete(r->id, 1));
  }
  EXPECT_EQ(served[1], 300);
  EXPECT_EQ(served[2], 300);
  EXPECT_EQ(q.dispatched(1), 300u);
}

TEST(TrackerQueue, ThreeJobsJoiningLateStayFair) {
  FakeClock clock;
  MeasureQueue q(clock);
  for (int i = 0; i < 100; ++i) q.enqueue(spec(1, "pi", i));
  for (int i = 0; i < 10; ++i) q.complete(q.next_for(1, "pi")->id, 1);
  for (int i = 0; i < 100; ++i) q.enqueue(spec(2, "pi", i));
  for (int i = 0; i < 100; ++i) q.enqueue(spec(3, "pi", i));
  std::map<JobId, int> served;
  for (int i = 0; i < 90; ++i) ++served[q.next_for(1 + i % 4, "pi")->job_id];
  EXPECT_EQ(served[1], 30);
  EXPECT_EQ(served[2], 30);
  EXPECT_EQ(served[3], 30);
}

TEST(TrackerQueue, HigherPriorityFirstThenFair) {
  FakeClock clock;
  MeasureQueue q(clock);
  q.set_priority(3, 5);
  for (int i = 0; i < 10; ++i) q.enqueue(spec(1, "pi", i));
  for (int i = 0; i < 10; ++i) q.enqueue(spec(2, "pi", i));
  for (int i = 0; i < 4; ++i) q.enqueue(spec(3, "pi", i));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q.next_for(1, "pi")->job_id, 3u) << i;
  std::map<JobId, int> served;
  for (int i = 0; i < 20; ++i) ++served[q.next_for(1, "pi")->job_id];
  EXPECT_EQ(served[1], 10);
  EXPECT_EQ(served[2], 10);
  EXPECT_FALSE(q.next_for(1, "pi"));
  // A priority raised while requests wait applies at once.
  q.enqueue(spec(1, "pi", 50));
  q.enqueue(spec(2, "pi", 50));
  q.set_priority(2, 1);
  EXPECT_EQ(q.next_for(1, "pi")->job_id, 2u);
}

TEST(TrackerQueue, MatchesByDeviceKeyOnly) {
  FakeClock clock;
  MeasureQueue q(clock);
  for (int i = 0; i < 50; ++i) {
    q.enqueue(spec(1 + i % 3, i % 2 ? "titanx" : "rk3399", i));
  }
  EXPECT_FALSE(q.next_for(9, "mali")) << "no request of that key";
  EXPECT_EQ(q.pending_for_key("titanx"), 25u);
  int n = 0;
  while (auto r = q.next_for(1, "rk3399")) {
    EXPECT_EQ(r->device_key, "rk3399");
    EXPECT_EQ(r->config_index % 2, 0u);
    ++n;
  }
  EXPECT_EQ(n, 25);
  EXPECT_EQ(q.pending(), 25u);
  EXPECT_EQ(q.pending_for_key("titanx"), 25u);
  EXPECT_EQ(q.in_flight(), 25u);
  EXPECT_EQ(q.in_flight_on(1).size(), 25u);
}

TEST(TrackerQueue, FifoWithinAJobAndRequeuedFirst) {
  FakeClock clock;
  MeasureQueue q(clock, {.max_attempts = 3});
  for (int i = 0; i < 3; ++i) q.enqueue(spec(1, "pi", i));
  auto a = q.next_for(7, "pi");
  EXPECT_EQ(a->config_index, 0u);
  EXPECT_EQ(a->device, 7u);
  EXPECT_TRUE(q.requeue({a->id}, "lost").empty());
  EXPECT_TRUE(q.requeue({a->id}, "lost").empty()) << "a pending request is skipped";
  EXPECT_EQ(q.find(a->id)->attempts, 1);
  auto b = q.next_for(8, "pi");
  EXPECT_EQ(b->id, a->id) << "re-queued requests go first";
  EXPECT_FALSE(q.complete(b->id, 7)) << "reported by a device that no longer holds it";
  EXPECT_TRUE(q.complete(b->id, 8));
  EXPECT_EQ(q.next_for(8, "pi")->config_index, 1u);
  EXPECT_EQ(q.next_for(8, "pi")->config_index, 2u);
}

TEST(TrackerQueue, CancelDropsPendingKeepsInFlight) {
  FakeClock clock;
  MeasureQueue q(clock);
  for (int i = 0; i < 5; ++i) q.enqueue(spec(1, "pi", i));
  for (int i = 0; i < 5; ++i) q.enqueue(spec(2, "pi", i));
  auto r = q.next_for(1, "pi");
  ASSERT_EQ(r->job_id, 1u);
  EXPECT_EQ(q.cancel_job(1), 4u);
  EXPECT_EQ(q.pending(1), 0u);
  EXPECT_EQ(q.pending(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(q.next_for(2, "pi")->job_id, 2u);
  EXPECT_TRUE(q.complete(r->id, 1));
}

TEST(TrackerQueue, QueuedTimeSummedOverAttempts) {
  FakeClock clock;
  MeasureQueue q(clock, {.max_attempts = 5});
  RequestId id = q.enqueue(spec(1, "pi"));
  clock.advance(seconds(3));
  q.next_for(1, "pi");
  clock.advance(seconds(100));  // runs (and the device is lost)
  q.requeue({id}, "lost");
  clock.advance(seconds(4));
  q.next_for(2, "pi");
  clock.advance(seconds(1));
  auto c = q.complete(id, 2);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->queued, seconds(7));
  EXPECT_EQ(c->run, seconds(1));
  EXPECT_EQ(c->request.attempts, 1);
}

TEST(TrackerQueue, RejectsBadRequests) {
  FakeClock clock;
  MeasureQueue q(clock);
  EXPECT_ERROR_CONTAINS(q.enqueue(spec(0, "pi")), "job id 0");
  EXPECT_ERROR_CONTAINS(q.enqueue(spec(4, "")), "device key is empty");
}

TEST(TrackerQueue, Throughput) {
  FakeClock clock;
  MeasureQueue q(clock);
  constexpr int kN = 100000;
  constexpr int kJobs = 8;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) q.enqueue(spec(1 + i % kJobs, i % 2 ? "a" : "b", i));
  int done = 0;
  for (int i = 0; i < kN; ++i) {
    DeviceId dev = 1 + i % 16;
    auto r = q.next_for(dev, dev % 2 ? "a" : "b");
    ASSERT_TRUE(r);
    ASSERT_TRUE(q.complete(r->id, dev));
    ++done;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("tracker queue: %d enqueue+dispatch+complete in %.3f s (%.0f per second)\n", done, s,
              done / s);
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(q.in_flight(), 0u);
  // Under the sanitizers everything is several times slower; the bound is for optimized builds.
#if !KILN_ASAN && !KILN_TSAN
  EXPECT_LT(s, 1.0);
#endif
}

}  // namespace
}  // namespace kiln::tracker

// ---- builds for compiler workers ----

namespace kiln::tracker {
namespace {

BuildSpec build(JobId job, uint64_t config, const std::string& target = "llvm -mcpu=znver4") {
  BuildSpec b;
  b.job_id = job;
  b.task_key = "dense_x86:1x512:ab";
  b.config_index = config;
  b.target = target;
  return b;
}

TEST(TrackerBuildQueue, BatchesTakeFromJobsInTurn) {
  FakeClock clock;
  BuildQueue q(clock);
  for (int i = 0; i < 20; ++i) q.enqueue(build(1, i));
  for (int i = 0; i < 4; ++i) q.enqueue(build(2, i));
  auto batch = q.take_batch("w1", 8);
  ASSERT_EQ(batch.size(), 8u);
  std::map<JobId, int> per_job;
  for (const auto& b : batch) {
    ++per_job[b.job_id];
    EXPECT_EQ(b.worker, "w1");
  }
  EXPECT_EQ(per_job[1], 4);
  EXPECT_EQ(per_job[2], 4);
  // Within a job, in order.
  EXPECT_EQ(batch[0].config_index, 0u);
  auto rest = q.take_batch("w2", 100);
  EXPECT_EQ(rest.size(), 16u);
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(q.in_flight(), 24u);
  EXPECT_TRUE(q.take_batch("w3", 4).empty());
  EXPECT_FALSE(q.complete(batch[0].id, "w2")) << "not w2's";
  EXPECT_TRUE(q.complete(batch[0].id, "w1"));
  EXPECT_FALSE(q.complete(batch[0].id, "w1")) << "twice";
  EXPECT_EQ(q.in_flight(), 23u);
}

TEST(TrackerBuildQueue, FiltersByTarget) {
  FakeClock clock;
  BuildQueue q(clock);
  q.enqueue(build(1, 0, "cuda"));
  q.enqueue(build(1, 1, "llvm -mcpu=znver4"));
  q.enqueue(build(2, 0, "opencl"));
  auto batch = q.take_batch("x86-worker", 10, {"llvm -mcpu=znver4"});
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0].target, "llvm -mcpu=znver4");
  EXPECT_EQ(q.take_batch("gpu-worker", 10, {"cuda", "opencl"}).size(), 2u);
  EXPECT_ERROR_CONTAINS(q.enqueue(build(1, 0, "")), "target is empty");
  EXPECT_ERROR_CONTAINS(q.take_batch("", 1), "worker name is empty");
}

TEST(TrackerBuildQueue, TimedOutBuildsAreHandedAgainThenGivenUp) {
  FakeClock clock;
  BuildQueueOptions opts;
  opts.build_timeout = seconds(60);
  opts.max_attempts = 2;
  BuildQueue q(clock, opts);
  BuildId id = q.enqueue(build(1, 0));
  q.enqueue(build(1, 1));
  ASSERT_EQ(q.take_batch("w1", 1).size(), 1u);
  clock.advance(seconds(60));
  EXPECT_TRUE(q.expire().empty()) << "not late yet";
  clock.advance(seconds(1));
  EXPECT_TRUE(q.expire().empty()) << "first time: re-queued";
  auto again = q.take_batch("w2", 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, id) << "a re-queued build goes first";
  EXPECT_EQ(again[0].attempts, 1);
  EXPECT_FALSE(q.complete(id, "w1")) << "w1's late report is stale";
  clock.advance(seconds(61));
  auto lost = q.expire();
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].id, id);
  EXPECT_EQ(q.pending(), 1u);
  EXPECT_EQ(q.cancel_job(1), 1u);
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(q.in_flight(), 0u);
}

}  // namespace
}  // namespace kiln::tracker
