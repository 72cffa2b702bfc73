// The farm's state behind kilnd's gRPC services: the tracker (devices, measure queue), the build
// queue for compiler workers, the jobs (persisted), the shared record log, the metrics, and the
// job runners that tune each job's tasks through them. Everything is guarded by one mutex; calls
// that wait (a device waiting for work, a worker's long-poll, a job watcher) wait on condition
// variables with deadlines, never holding the lock.
//
//   Farm farm({.state_dir = "state"});
//   farm.start();                                  // resumes unfinished jobs, starts the ticker
//   JobId j = farm.submit({.model = bytes, .target = "llvm", .device_key = "cpu", .trials = 32});
//   // services: register_device / attach / report_result (agents), take_builds /
//   // report_artifact / job_model (workers), job / jobs / cancel / wait_job (public API)
//   farm.stop();                                   // running jobs stay "running": resumed later
//
// A job's life (job_runner.cc): its model is imported and its tasks extracted; each task is tuned
// by autotune::Tuner with a FarmMeasurer, whose every batch becomes builds (handed to workers),
// then measure requests (matched to devices of the job's key); a device's result is appended to
// the record log before it is acknowledged. Then the bundle is built with each task's best config.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "compiler/autotune/measurer.h"
#include "compiler/autotune/record_log.h"
#include "proto/kiln/v1/service.pb.h"
#include "proto/kiln/v1/tracker.pb.h"
#include "server/metrics.h"
#include "tracker/build_queue.h"
#include "tracker/clock.h"
#include "tracker/job_store.h"
#include "tracker/tracker.h"

namespace kiln::server {

/// A request the farm refuses, with the gRPC status code the services answer with.
class FarmError : public std::runtime_error {
 public:
  enum class Code { kInvalidArgument, kNotFound, kFailedPrecondition, kResourceExhausted };
  FarmError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

struct FarmOptions {
  std::string state_dir;    ///< jobs/ (RocksDB), models/, bundles/; created when missing
  std::string records_dir;  ///< the shared record log; default <state_dir>/records
  tracker::TrackerOptions tracker;
  tracker::BuildQueueOptions builds;
  size_t max_model_bytes = 64u << 20;  ///< larger models are refused (RESOURCE_EXHAUSTED)
  uint32_t max_trials = 10000;         ///< per task
  int max_running_jobs = 2;            ///< jobs tuned at once; the others wait queued
  // How each job is tuned and measured.
  int batch = 16;
  std::string explorer = "xgb";
  uint32_t repeat = 3;
  uint32_t min_repeat_ms = 20;
  uint32_t run_timeout_ms = 10000;
  uint32_t build_timeout_ms = 60000;
  uint32_t threads = 0;  ///< kernel threads on the device; 0 = all of its CPUs
  /// How often leases, queue waits and build hand-outs are checked, and metrics refreshed.
  tracker::Duration tick = std::chrono::milliseconds(200);
};

/// Where a device's work goes: its GetWork stream (services.cc). The farm pushes each request
/// the moment the device can take it, so no thread waits per device.
class WorkSink {
 public:
  virtual ~WorkSink() = default;
  /// A request now in flight on the device (`wire`: what to send). Called with the farm's lock
  /// held: must not block or call back into the farm.
  virtual void deliver(v1::MeasureRequest wire) = 0;
  /// The stream must end: the device was dropped (it must register again: `stopping` false) or
  /// kilnd is stopping. Same rules as deliver; nothing is delivered afterwards.
  virtual void close(bool stopping, const std::string& why) = 0;
};

/// What SubmitModel carries.
struct Submission {
  std::string model;  ///< ONNX bytes
  std::string name, target, device_key, owner;
  uint32_t trials = 0;
  int32_t priority = 0;
};

/// A recent event for people (device joined or lost, job done, retries, quarantine).
struct FarmEvent {
  int64_t unix_ms = 0;
  std::string kind;  ///< "device_joined", "device_lost", "quarantine", "job_state", "retry", ...
  std::string text;
};

class Farm {
 public:
  explicit Farm(FarmOptions options);
  ~Farm();
  Farm(const Farm&) = delete;
  Farm& operator=(const Farm&) = delete;

  /// Resumes every unfinished job of the store and starts the ticker and the job runners.
  void start();
  /// Stops the ticker and the runners and wakes every waiter; jobs being tuned stay "running" in
  /// the store (a restart resumes them). Idempotent; the destructor calls it.
  void stop();
  bool stopping() const { return stopping_; }

  /// This process's random id, sent with every measure request (agents check it).
  const std::string& instance() const { return instance_; }
  Metrics& metrics() { return metrics_; }
  autotune::RecordLog& records() { return log_; }
  const FarmOptions& options() const { return options_; }

  // --- device agents ----------------------------------------------------------------------
  struct Registration {
    tracker::DeviceId id = 0;
    uint32_t lease_ms = 0;
  };
  /// FarmError kInvalidArgument naming a missing key or target, or a target that does not parse.
  Registration register_device(const v1::RegisterDeviceRequest& request);
  struct Lease {
    bool known = false;
    bool quarantined = false;
    std::string reason;
    uint32_t lease_ms = 0;
  };
  Lease heartbeat(tracker::DeviceId id);
  enum class Attach { kAttached, kUnknownDevice, kStopping };
  /// From now on the device's work goes to `sink` (what is pending for it goes at once).
  Attach attach(tracker::DeviceId device, WorkSink* sink);
  /// `sink` gets nothing more (its stream is gone); a no-op when it is no longer attached.
  void detach(tracker::DeviceId device, WorkSink* sink);
  /// The device's stream ended (agent gone): it is dropped and its work re-queued at once.
  void device_gone(tracker::DeviceId device, const std::string& why);
  /// A device's result. `done(accepted, error)` is called once the answer is known: false at once
  /// for a stale or unknown request (nothing recorded); true once its record is durable in the
  /// log (group-committed with concurrent ones; no thread waits for the disk meanwhile); or the
  /// error that kept the record from the log. May be called before report_result returns.
  void report_result(const v1::MeasureResult& result,
                     std::function<void(bool accepted, std::exception_ptr error)> done);
  std::vector<v1::DeviceInfo> devices(const std::string& key) const;
  /// A measure request outside any tuning batch (benchmarks, tools): dispatched, recorded and
  /// counted like any other. Returns its id.
  tracker::RequestId enqueue_measure(tracker::MeasureSpec spec);

  // --- compiler workers -------------------------------------------------------------------
  /// Up to `max` builds for `worker`, waiting up to `wait` for the first.
  std::vector<v1::BuildRequest> take_builds(const std::string& worker, size_t max,
                                            const std::vector<std::string>& targets,
                                            tracker::Duration wait);
  /// A worker's artifact; false for a stale or unknown build.
  bool report_artifact(uint64_t build_id, const std::string& worker, v1::Artifact artifact);
  /// The job's model; FarmError kNotFound for an unknown job.
  v1::JobModel job_model(tracker::JobId id) const;

  // --- the public API ---------------------------------------------------------------------
  /// Validates and stores a job (queued); FarmError naming the problem otherwise.
  tracker::JobId submit(const Submission& s);
  /// FarmError kNotFound for an unknown job.
  tracker::JobRecord job(tracker::JobId id) const;
  std::vector<tracker::JobRecord> jobs() const;
  /// Cancels a queued or running job (FarmError kFailedPrecondition when it has finished).
  tracker::JobRecord cancel(tracker::JobId id, const std::string& reason);
  /// Waits up to `wait` for job `id` to change after version `seen`; returns the version now
  /// (the same one when nothing changed). FarmError kNotFound for an unknown job.
  uint64_t wait_job(tracker::JobId id, uint64_t seen, tracker::Duration wait);
  /// The bundle of a done job; FarmError kNotFound / kFailedPrecondition otherwise.
  std::string bundle_path(tracker::JobId id) const;
  /// The newest events, oldest first.
  std::vector<FarmEvent> events(size_t max = 100) const;

  // --- for the job runners (job_runner.cc) ------------------------------------------------
  /// What a task's measure requests carry besides the artifact: inputs, output and reference.
  struct TaskWire {
    std::string task_key, target, template_name;
    double flops = 0;
    std::vector<v1::TensorSpec> inputs;
    v1::TensorSpec output;
    std::string reference_npy;
    uint64_t input_seed = 0;
    double rtol = 1e-3, atol = 1e-7;
  };
  /// Builds (on workers) and measures (on devices of the job's key) one batch of candidates, and
  /// returns their records, each appended to the log. Throws JobStopped when the job was
  /// cancelled or the farm stops meanwhile; kiln::Error when no device took a request in time.
  std::vector<autotune::MeasureRecord> measure_batch(tracker::JobId job, const TaskWire& task,
                                                     const std::vector<autotune::Candidate>& cands,
                                                     uint64_t seed);
  /// The job was cancelled or the farm is stopping: the runner leaves the job as it is.
  struct JobStopped {};
  /// Changes a job's progress counters (persisted) and wakes its watchers.
  tracker::JobRecord update_job(tracker::JobId id,
                                const std::function<void(tracker::JobRecord&)>& change);
  tracker::JobRecord transition_job(tracker::JobId id, tracker::JobState to,
                                    const std::string& error = "");
  std::string model_path(tracker::JobId id) const;

 private:
  struct Batch;
  struct SlotRef {
    Batch* batch = nullptr;
    size_t index = 0;
  };
  void tick_loop();
  void runner_loop();                // job_runner.cc
  void run_job(tracker::JobId id);   // job_runner.cc
  void add_event_locked(const std::string& kind, const std::string& text);
  void refresh_gauges_locked();
  /// Pushes requests to `device` while it can take them; keeps idle_ up to date.
  void feed_locked(tracker::DeviceId device);
  /// Feeds idle devices of `key` until `n` requests went out or none is idle.
  void feed_key_locked(const std::string& key, size_t n);
  void forget_device_locked(tracker::DeviceId device, const std::string& key);
  void give_up_locked(const tracker::GiveUp& g);
  void bump_job_locked(tracker::JobId id);
  /// The slot of a finished request gets its record (or the failure to keep it).
  void settle_measure_locked(tracker::RequestId id, std::optional<autotune::MeasureRecord> record,
                             const std::string& failure);
  bool job_stopped_locked(tracker::JobId id) const;

  FarmOptions options_;
  tracker::SystemClock clock_;
  std::string instance_;
  autotune::RecordLog log_;
  tracker::JobStore store_;
  Metrics metrics_;

  mutable std::mutex mu_;
  tracker::Tracker tracker_;
  tracker::BuildQueue builds_;
  std::condition_variable builds_cv_;  ///< a build was queued
  std::condition_variable jobs_cv_;    ///< a job changed (watchers) or became runnable
  std::unordered_map<tracker::DeviceId, WorkSink*> sinks_;    ///< devices with an open stream
  std::map<std::string, std::set<tracker::DeviceId>> idle_;  ///< of those, with room, by key
  std::unordered_map<uint64_t, SlotRef> build_slots_;    ///< build id -> its candidate
  std::unordered_map<uint64_t, SlotRef> measure_slots_;  ///< request id -> its candidate
  std::unordered_map<uint64_t, std::string> build_templates_;  ///< build id -> template name
  std::unordered_map<tracker::JobId, uint64_t> job_versions_;
  std::set<tracker::JobId> cancelled_;
  std::deque<tracker::JobId> runnable_;  ///< jobs waiting for a runner
  std::deque<FarmEvent> events_;
  struct DeviceStats {
    std::map<std::string, uint64_t> errors;       ///< results by error kind
    std::deque<tracker::TimePoint> recent;        ///< result times of the last minute
  };
  std::unordered_map<tracker::DeviceId, DeviceStats> device_stats_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::thread ticker_;
  std::vector<std::thread> runners_;
};

}  // namespace kiln::server
