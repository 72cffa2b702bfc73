// The queue of measure requests: one FIFO per job and device key, served by fair share.
//
//   MeasureQueue q(clock, {.max_attempts = 3});
//   q.set_priority(job, 1);                                     // default 0; higher first
//   RequestId r = q.enqueue({.job_id = job, .task_key = k, .config_index = 7,
//                            .target = "llvm ...", .device_key = "rk3399"});
//   auto req = q.next_for(device_id, "rk3399");   // only requests of that key; records dispatch
//   auto done = q.complete(req->id, device_id);   // queued and run time, measured apart
//   q.requeue(dropped.in_flight, "device lost");  // attempt + 1, or given up at the limit
//
// Choosing the job (next_for): among jobs with a request pending for the device's key, the highest
// priority wins; among those, the job served least recently (a new job first), so equal jobs
// alternate and their dispatch counts stay within one of each other. Within a job, FIFO, with
// re-queued requests at the front (they have waited already).
//
// Time queued (enqueue to dispatch, summed over attempts) is kept apart from run time (dispatch to
// completion): a request that waits long for a device is a queue timeout (expire_queued), never
// a run timeout. Not thread-safe: the server holds one lock around the tracker's state.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tracker/clock.h"
#include "tracker/ids.h"

namespace kiln::tracker {

/// What the caller asks to measure.
struct MeasureSpec {
  JobId job_id = 0;
  std::string task_key;
  uint64_t config_index = 0;
  std::string target;
  std::string device_key;  ///< only devices of this key may run it
  std::string payload;     ///< opaque to the queue (the server's serialized wire request)
  // For the record the result becomes (tracker.h make_record):
  std::string config_text;   ///< Config::str()
  uint64_t search_seed = 0;  ///< the seed of the search that chose the config
  double flops = 0;          ///< per run of the task; gives the record's GFLOP/s
};

/// A request in the queue or in flight.
struct MeasureRequest : MeasureSpec {
  RequestId id = 0;
  int attempts = 0;           ///< dispatches so far that ended with a lost device
  TimePoint enqueued_at{};    ///< when it last entered the queue
  Duration queued{};          ///< time waited in the queue in earlier attempts
  TimePoint dispatched_at{};  ///< when it last left the queue (in flight only)
  DeviceId device = 0;        ///< the device running it (in flight only)
};

/// A finished request and where its time went.
struct Completion {
  MeasureRequest request;
  Duration queued{};  ///< enqueue to dispatch, over all attempts
  Duration run{};     ///< dispatch to completion, this attempt
};

/// Why the queue gave a request up (proto: ERROR_KIND_DEVICE_LOST / ERROR_KIND_QUEUE_TIMEOUT).
enum class GiveUpKind { kDeviceLost, kQueueTimeout };

/// A request the queue gave up on; the caller reports it to its job as failed.
struct GiveUp {
  MeasureRequest request;
  GiveUpKind kind = GiveUpKind::kDeviceLost;
  std::string reason;
};

struct QueueOptions {
  /// Dispatches a request may get; after this many lost devices it is given up.
  int max_attempts = 3;
};

class MeasureQueue {
 public:
  explicit MeasureQueue(const Clock& clock, QueueOptions options = {});

  /// Sets a job's priority (default 0; higher is served first). Applies to pending requests too.
  void set_priority(JobId job, int priority);
  /// Adds a request at the back of its job's queue; returns its id (1, 2, ...). kiln::Error when
  /// the job id is 0 or the device key is empty.
  RequestId enqueue(MeasureSpec spec);
  /// The next request for a device of `device_key` (see the header comment for the choice), now
  /// in flight on `device`; nullopt when none of that key is pending.
  std::optional<MeasureRequest> next_for(DeviceId device, const std::string& device_key);
  /// Finishes a request in flight on `device`. nullopt when it is not in flight there (a stale
  /// report: the request was re-queued after its device was dropped, or is unknown).
  std::optional<Completion> complete(RequestId id, DeviceId device);
  /// Puts in-flight requests back at the front of their queues with attempts + 1; those that
  /// reach max_attempts are removed and returned. Unknown or pending ids are skipped.
  std::vector<GiveUp> requeue(const std::vector<RequestId>& ids, const std::string& reason);
  /// Removes and returns pending requests that have waited (all attempts) longer than max_wait.
  std::vector<GiveUp> expire_queued(Duration max_wait);
  /// Drops a job's pending requests; returns how many. Its in-flight requests still complete.
  size_t cancel_job(JobId job);

  /// A request pending or in flight; nullptr otherwise. Valid until the next change.
  const MeasureRequest* find(RequestId id) const;
  size_t pending() const { return pending_; }
  size_t pending(JobId job) const;
  size_t pending_for_key(const std::string& device_key) const;
  size_t in_flight() const { return requests_.size() - pending_; }
  /// How many requests of `job` are in flight on devices.
  size_t in_flight(JobId job) const;
  /// The requests in flight on `device`, sorted.
  std::vector<RequestId> in_flight_on(DeviceId device) const;
  /// How many requests of `job` were dispatched (re-dispatches included).
  uint64_t dispatched(JobId job) const;

 private:
  struct JobInfo {
    int priority = 0;
    uint64_t last_served = 0;  ///< serve counter at its last dispatch; 0: never
    uint64_t dispatched = 0;
    size_t pending = 0;
  };
  using JobQueues = std::map<JobId, std::deque<RequestId>>;  ///< non-empty queues only

  void push(MeasureRequest& r, bool front);
  void remove_pending(const std::vector<RequestId>& ids);

  const Clock& clock_;
  QueueOptions options_;
  RequestId next_id_ = 1;
  uint64_t serve_counter_ = 0;
  size_t pending_ = 0;
  std::unordered_map<RequestId, MeasureRequest> requests_;  ///< pending and in flight
  std::unordered_map<std::string, JobQueues> by_key_;       ///< pending, by device key and job
  std::unordered_map<JobId, JobInfo> jobs_;
  std::unordered_map<DeviceId, std::unordered_set<RequestId>> in_flight_;
};

}  // namespace kiln::tracker
