// Builds for compiler workers, handed out in batches.
//
//   BuildQueue b(clock, {.build_timeout = std::chrono::seconds(60), .max_attempts = 2});
//   b.enqueue({.job_id = 3, .task_key = k, .config_index = 7, .target = "llvm ..."});
//   auto batch = b.take_batch("worker-1", 16, {"llvm -mcpu=znver4"});   // empty targets: any
//   b.complete(batch[0].id, "worker-1");   // nullopt when stale (timed out and handed again)
//   for (auto& lost : b.expire()) ...      // handed out too long: re-queued, or given up
//
// A batch takes builds from jobs in turn (the job served least recently first, one build each
// per round) so one big job does not hold every worker. Not thread-safe.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracker/clock.h"
#include "tracker/ids.h"

namespace kiln::tracker {

using BuildId = uint64_t;

struct BuildSpec {
  JobId job_id = 0;
  std::string task_key;
  uint64_t config_index = 0;
  std::string target;
};

struct BuildRequest : BuildSpec {
  BuildId id = 0;
  int attempts = 0;         ///< hand-outs that timed out so far
  TimePoint enqueued_at{};  ///< when it last entered the queue
  TimePoint handed_at{};    ///< when a worker took it (in flight only)
  std::string worker;       ///< who has it (in flight only)
};

struct BuildQueueOptions {
  /// A batch's build not reported within this time goes back to the queue.
  Duration build_timeout = std::chrono::seconds(60);
  /// Hand-outs a build may get before it is given up (reported as a compile timeout).
  int max_attempts = 2;
};

class BuildQueue {
 public:
  explicit BuildQueue(const Clock& clock, BuildQueueOptions options = {});

  /// Adds a build; returns its id (1, 2, ...). kiln::Error when the job id is 0 or the target or
  /// task key is empty.
  BuildId enqueue(BuildSpec spec);
  /// Up to `max` builds for `worker` whose target is in `targets` (any target when empty), taken
  /// from jobs in turn; they are in flight on `worker` until completed or expired.
  std::vector<BuildRequest> take_batch(const std::string& worker, size_t max,
                                       const std::vector<std::string>& targets = {});
  /// Finishes a build in flight on `worker`; nullopt when it is not (stale or unknown).
  std::optional<BuildRequest> complete(BuildId id, const std::string& worker);
  /// Builds in flight longer than build_timeout go back to the front of their job's queue with
  /// attempts + 1; those at max_attempts are removed and returned (given up).
  std::vector<BuildRequest> expire();
  /// Drops a job's pending builds; returns how many.
  size_t cancel_job(JobId job);

  size_t pending() const { return pending_; }
  size_t in_flight() const { return builds_.size() - pending_; }

 private:
  struct JobQueue {
    std::deque<BuildId> ids;  ///< pending builds, in order
    uint64_t last_served = 0;
  };
  void push(BuildRequest& b, bool front);

  const Clock& clock_;
  BuildQueueOptions options_;
  BuildId next_id_ = 1;
  uint64_t serve_counter_ = 0;
  size_t pending_ = 0;
  std::unordered_map<BuildId, BuildRequest> builds_;
  std::map<JobId, JobQueue> jobs_;
};

}  // namespace kiln::tracker
