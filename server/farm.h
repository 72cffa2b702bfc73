// The farm's state behind kilnd's gRPC services: the tracker (devices, measure queue), the build
// queue for compiler workers, the jobs (persisted), the shared record log, the metrics, and the
// job drivers. Everything is guarded by one mutex; calls that wait (a device waiting for work, a
// worker's long-poll, a job watcher, a driver's batch) wait on condition variables with
// deadlines, never holding the lock. kilnd never reads a user's model: each running job has a
// driver process (kiln-tuner) that does, talking back through the JobDriver service.
//
//   Farm farm({.state_dir = "state"});
//   farm.start("127.0.0.1:7070");                  // resumes unfinished jobs, starts the ticker
//   JobId j = farm.submit({.target = "llvm", .device_key = "cpu", .trials = 32}, read_chunks);
//   // services: register_device / attach / report_result (agents), take_builds /
//   // report_artifact (workers), driver_* (job drivers), job / jobs / cancel / wait_job (the API)
//   farm.stop();                                   // running jobs stay "running": resumed later
//
// The methods live in one file per concept: farm.cc (life cycle, ticker, events, gauges),
// device_dispatch.cc (agents), build_dispatch.cc (workers), jobs.cc (the public API's jobs),
// measure_batch.cc (a driver's batch: builds, then measurements), job_drivers.cc (starting and
// watching each job's driver, and what drivers may ask).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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

#include "base/sanitizers.h"
#include "proto/kiln/v1/driver.pb.h"
#include "proto/kiln/v1/service.pb.h"
#include "proto/kiln/v1/tracker.pb.h"
#include "records/record_log.h"
#include "server/metrics.h"
#include "tracker/build_queue.h"
#include "tracker/clock.h"
#include "tracker/job_store.h"
#include "tracker/tracker.h"

namespace kiln::server {

/// A request the farm refuses, with the gRPC status code the services answer with.
class FarmError : public std::runtime_error {
 public:
  enum class Code {
    kInvalidArgument,
    kNotFound,
    kFailedPrecondition,
    kResourceExhausted,
    kPermissionDenied,  ///< a driver that is not (any more) its job's driver
    kCancelled,         ///< the job was cancelled meanwhile
    kUnavailable,       ///< kilnd is stopping
  };
  FarmError(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

/// How job drivers (kiln-tuner) are run: one process per running job, and one per submission to
/// check the model.
struct DriverOptions {
  std::string program;  ///< kiln-tuner's path; empty: found beside kilnd (find_program)
  /// Each driver's address space; 0 for none. The sanitizer builds have none: their shadow
  /// memory is address space.
#if KILN_ASAN || KILN_TSAN
  uint32_t memory_limit_mb = 0;
#else
  uint32_t memory_limit_mb = 8192;
#endif
  /// A driver that shows no sign of life (a call to kilnd) this long, while not waiting for a
  /// batch, is killed: a hang fails the try.
  tracker::Duration idle_timeout = std::chrono::minutes(10);
  /// The model check at submission (import and validate) must finish within this.
  tracker::Duration check_timeout = std::chrono::minutes(2);
  /// Tries of a job's driver that end in a crash, hang or memory exhaustion before the job fails.
  int max_tries = 2;
  std::string tls_ca;  ///< what drivers trust to reach kilnd (empty: plaintext)
  std::string token;   ///< the farm's token, given to drivers as $KILN_TOKEN
};

struct FarmOptions {
  std::string state_dir;    ///< jobs/ (RocksDB), models/, bundles/; created when missing
  std::string records_dir;  ///< the shared record log; default <state_dir>/records
  tracker::TrackerOptions tracker;
  tracker::BuildQueueOptions builds;
  /// Larger models are refused (RESOURCE_EXHAUSTED) as soon as their upload goes past it. The
  /// upload goes to disk as it arrives, so the default is ONNX's own limit (a protobuf of 2 GiB).
  uint64_t max_model_bytes = uint64_t{2} << 30;
  uint32_t max_trials = 10000;    ///< per task
  uint32_t max_budget = 1000000;  ///< measurements of one job under a budget
  int max_running_jobs = 2;       ///< jobs tuned at once; the others wait queued
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
  DriverOptions driver;
  uint64_t max_bundle_bytes = 4ull << 30;  ///< larger uploads from a driver are refused
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

/// What SubmitModel's job asks for (its model follows in chunks: Farm::submit).
struct Submission {
  std::string name, target, device_key, owner;
  uint64_t model_size = 0;  ///< the model's size as announced; 0: not announced
  /// How much to measure, as SubmitModelRequest says (trials per task or each task's cap, a
  /// budget over all tasks, a time limit, the scheduler's patience); checked by submit.
  uint32_t trials = 0;
  uint32_t budget = 0;
  double time_limit_s = 0;
  std::optional<uint32_t> early_stop;
  int32_t priority = 0;
  /// `--input-shape`s as sent (SubmitModelRequest.input_shapes): checked by submit (names
  /// non-empty and distinct, sizes positive, limits), then by the model's --check.
  std::vector<std::pair<std::string, std::vector<int64_t>>> input_shapes;
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

  /// Resumes every unfinished job of the store and starts the ticker and the job runners, whose
  /// drivers reach kilnd at `driver_server` (its own gRPC address; empty: jobs cannot run and
  /// fail saying so).
  void start(const std::string& driver_server = "");
  /// Stops the ticker, the runners and their drivers and wakes every waiter; jobs being tuned stay
  /// "running" in the store (a restart resumes them). Idempotent; the destructor calls it.
  void stop();
  bool stopping() const { return stopping_; }

  /// This process's random id, sent with every measure request (agents check it).
  const std::string& instance() const { return instance_; }
  Metrics& metrics() { return metrics_; }
  records::RecordLog& records() { return log_; }
  const FarmOptions& options() const { return options_; }

  // --- device agents (device_dispatch.cc) -------------------------------------------------
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
  /// Renews the lease; `device_clock_ms` (0: not sent) running backwards quarantines the device.
  Lease heartbeat(tracker::DeviceId id, uint64_t device_clock_ms = 0);
  enum class Attach { kAttached, kUnknownDevice, kStopping };
  /// From now on the device's work goes to `sink` (what is pending for it goes at once).
  Attach attach(tracker::DeviceId device, WorkSink* sink);
  /// `sink` gets nothing more (its stream is gone); a no-op when it is no longer attached.
  void detach(tracker::DeviceId device, WorkSink* sink);
  /// The device's stream ended (agent gone): it is dropped and its work re-queued at once.
  void device_gone(tracker::DeviceId device, const std::string& why);
  /// A device's result. `done(accepted, error)` is called once the answer is known: false at once
  /// for a stale or unknown request (nothing recorded; a request the device was never given
  /// counts toward its quarantine), and for a result that shows the device cannot be trusted (its
  /// clock ran backwards, a negative or non-finite cost: the device is quarantined and the
  /// request re-queued for another); true once its record is durable in the
  /// log (group-committed with concurrent ones; no thread waits for the disk meanwhile); or the
  /// error that kept the record from the log. May be called before report_result returns.
  void report_result(const v1::MeasureResult& result,
                     std::function<void(bool accepted, std::exception_ptr error)> done);
  std::vector<v1::DeviceInfo> devices(const std::string& key) const;
  /// A measure request outside any tuning batch (benchmarks, tools): dispatched, recorded and
  /// counted like any other. Returns its id.
  tracker::RequestId enqueue_measure(tracker::MeasureSpec spec);

  // --- compiler workers (build_dispatch.cc) -----------------------------------------------
  /// Up to `max` builds for `worker`, waiting up to `wait` for the first. Each carries its task
  /// (template, workload, target) and config: all the worker needs.
  std::vector<v1::BuildRequest> take_builds(const std::string& worker, size_t max,
                                            const std::vector<std::string>& targets,
                                            tracker::Duration wait);
  /// A worker's artifact; false for a stale or unknown build.
  bool report_artifact(uint64_t build_id, const std::string& worker, v1::Artifact artifact);

  // --- the public API (jobs.cc) -----------------------------------------------------------
  /// Validates and stores a job (queued); FarmError naming the problem otherwise. The job's
  /// fields are checked first; then the model's ModelUpload messages (chunks, then the checksum)
  /// are read with `read` (false: the stream ended) and written to a temporary file under
  /// <state_dir>/models as they arrive, refused (kResourceExhausted, naming both sizes) as soon
  /// as they go past max_model_bytes or the announced size, and refused on a checksum mismatch.
  /// The complete model is checked by a kiln-tuner --check process (never in kilnd): one that
  /// does not import is refused (kInvalidArgument, with the importer's message). Only then is it
  /// renamed into place for its job; a refused or interrupted upload leaves no file and no job.
  tracker::JobId submit(const Submission& s, const std::function<bool(v1::ModelUpload&)>& read);
  /// FarmError kNotFound for an unknown job.
  tracker::JobRecord job(tracker::JobId id) const;
  std::vector<tracker::JobRecord> jobs() const;
  /// Cancels a queued or running job (FarmError kFailedPrecondition when it has finished); its
  /// driver is stopped.
  tracker::JobRecord cancel(tracker::JobId id, const std::string& reason);
  /// Waits up to `wait` for job `id` to change after version `seen`; returns the version now
  /// (the same one when nothing changed). FarmError kNotFound for an unknown job.
  uint64_t wait_job(tracker::JobId id, uint64_t seen, tracker::Duration wait);
  /// The bundle of a done job; FarmError kNotFound / kFailedPrecondition otherwise.
  std::string bundle_path(tracker::JobId id) const;
  /// The newest events, oldest first.
  std::vector<FarmEvent> events(size_t max = 100) const;
  /// Changes a job's progress counters (persisted) and wakes its watchers.
  tracker::JobRecord update_job(tracker::JobId id,
                                const std::function<void(tracker::JobRecord&)>& change);

  // --- job drivers (job_drivers.cc, measure_batch.cc) --------------------------------------
  /// The job whose current driver `auth` names; FarmError kPermissionDenied otherwise (an
  /// unknown job, a wrong secret, a driver that was replaced), kCancelled for a cancelled job.
  /// Counts as a sign of life of the driver.
  tracker::JobRecord driver_job(const v1::DriverAuth& auth);
  /// What GetDriverJob answers.
  v1::DriverJob driver_job_spec(const v1::DriverAuth& auth);
  /// The model file FetchModel streams to the job's driver (driver_job's checks first).
  std::string driver_model_path(const v1::DriverAuth& auth);
  /// A driver's progress (phase, tasks, counters, the user error it is about to exit with).
  void driver_progress(const v1::DriverProgress& progress);
  /// The records of one of the job's tasks on its target (FarmError kInvalidArgument for a task
  /// that is not the job's).
  v1::TaskRecords driver_records(const v1::TaskRecordsRequest& request);
  /// Appends records a driver made itself, each checked (the job's target, one of its tasks);
  /// their sequence numbers (0 for a config the log held already: not appended again).
  std::vector<uint64_t> driver_append(const v1::AppendRecordsRequest& request);
  /// Builds (on workers) and measures (on devices of the job's key) one batch of configs and
  /// returns their records in order, each durable in the log; a config the log already holds
  /// is answered from it, never measured again. `abandoned` is polled while waiting: when it
  /// returns true (the driver went away) the batch's queued work is withdrawn and FarmError
  /// kCancelled thrown. FarmError kCancelled / kUnavailable when the job is cancelled or kilnd
  /// stops meanwhile; kFailedPrecondition when no device took a request in time.
  std::vector<records::MeasureRecord> measure_batch(const v1::MeasureBatchRequest& request,
                                                    const std::function<bool()>& abandoned);
  /// Every record of the job's target in its lane whose task's source the log knows, grouped by
  /// task, each group (or run of at most 20,000 records) to `write`.
  void driver_history(const v1::DriverAuth& auth,
                      const std::function<void(const v1::TaskHistory&)>& write);
  /// A shelf entry of the job's target (FarmError kInvalidArgument for a name that is not
  /// "cost-model/<kind>/<the job's target>"), with the target's record count.
  v1::ShelfEntry driver_shelf(const v1::ShelfRequest& request);
  /// Keeps a shelf entry (names as driver_shelf; at most 32 MiB).
  void driver_put_shelf(const v1::PutShelfRequest& request);
  /// Stores the job's bundle from `read_chunk` (called until it returns false or a chunk says
  /// last) and marks the job done. The first chunk carries the auth. FarmError
  /// kFailedPrecondition when the job is done already (its bundle is never replaced).
  uint64_t store_bundle(const std::function<bool(v1::BundleUpload&)>& read_chunk);

 private:
  struct Batch;
  struct SlotRef {
    Batch* batch = nullptr;
    size_t index = 0;
  };
  /// What kilnd knows of a job's running driver (guarded by mu_).
  struct DriverSession {
    std::string secret;
    std::string phase;  ///< last reported
    std::string error;  ///< the user error it reported before exiting
    tracker::TimePoint last_seen;
    int waiting = 0;  ///< MeasureBatch calls in progress: the driver waits for the farm
  };
  void tick_loop();
  void runner_loop();               // job_drivers.cc
  void run_job(tracker::JobId id);  // job_drivers.cc
  /// One try of the job's driver: "" when the job reached a final state or kilnd stops, else why
  /// the try failed and whether another may help.
  struct TryOutcome {
    bool finished = true;  ///< nothing more to do for the job now
    bool retry = false;    ///< a crash, hang or memory exhaustion: another try may go through
    std::string reason;    ///< why the try failed, for people
  };
  TryOutcome run_driver_once(tracker::JobId id);
  /// Waits until none of the job's measure requests is on a device (the next driver must not
  /// propose a config whose result is still coming), at most `limit`.
  void drain_job(tracker::JobId id, tracker::Duration limit);
  void fail_job(tracker::JobId id, const std::string& reason);
  void add_event_locked(const std::string& kind, const std::string& text);
  void refresh_gauges_locked();
  /// Pushes requests to `device` while it can take them; keeps idle_ up to date.
  void feed_locked(tracker::DeviceId device);
  /// Feeds idle devices of `key` until `n` requests went out or none is idle.
  void feed_key_locked(const std::string& key, size_t n);
  void forget_device_locked(tracker::DeviceId device, const std::string& key);
  void give_up_locked(const tracker::GiveUp& g);
  /// Quarantines a misbehaving device and re-queues what it held (an event says why).
  void quarantine_locked(tracker::DeviceId device, const std::string& reason);
  void bump_job_locked(tracker::JobId id);
  /// The slot of a finished request gets its record (or the failure to keep it).
  void settle_measure_locked(tracker::RequestId id, std::optional<records::MeasureRecord> record,
                             const std::string& failure);
  bool job_stopped_locked(tracker::JobId id) const;
  /// The record lane a job reads and writes: its key's devices run emulated or not (one key
  /// never mixes them, tracker/device_registry.h).
  records::Lane job_lane(const tracker::JobRecord& j) const;
  DriverSession& session_locked(const v1::DriverAuth& auth);
  tracker::JobRecord transition_job(tracker::JobId id, tracker::JobState to,
                                    const std::string& error = "");
  std::string model_path(tracker::JobId id) const;
  /// Writes a model's chunks from `read` to `path` up to its checksum (Farm::submit's rules);
  /// returns its size.
  uint64_t receive_model(const std::string& path, uint64_t announced,
                         const std::function<bool(v1::ModelUpload&)>& read);
  std::string driver_log_path(tracker::JobId id) const;
  /// Runs kiln-tuner --check on `model_file` with its inputs bound to `input_shapes`
  /// (--input-shape each): "" when it imports, else why not, naming the model `name` (as the
  /// client named it: the reason goes back to the client, who never saw the file's path here).
  std::string check_model(const std::string& model_file, const std::string& name,
                          const std::map<std::string, std::vector<int64_t>>& input_shapes);

  FarmOptions options_;
  tracker::SystemClock clock_;
  std::string instance_;
  records::RecordLog log_;
  tracker::JobStore store_;
  Metrics metrics_;
  std::string driver_program_;  ///< kiln-tuner
  std::string driver_server_;   ///< kilnd's address for drivers

  mutable std::mutex mu_;
  tracker::Tracker tracker_;
  tracker::BuildQueue builds_;
  std::condition_variable builds_cv_;  ///< a build was queued
  std::condition_variable jobs_cv_;    ///< a job changed (watchers) or became runnable
  std::unordered_map<tracker::DeviceId, WorkSink*> sinks_;   ///< devices with an open stream
  std::map<std::string, std::set<tracker::DeviceId>> idle_;  ///< of those, with room, by key
  std::unordered_map<uint64_t, SlotRef> build_slots_;        ///< build id -> its candidate
  std::unordered_map<uint64_t, SlotRef> measure_slots_;      ///< request id -> its candidate
  std::unordered_map<tracker::JobId, uint64_t> job_versions_;
  std::unordered_map<tracker::JobId, DriverSession> drivers_;  ///< jobs with a running driver
  std::set<tracker::JobId> cancelled_;
  std::deque<tracker::JobId> runnable_;  ///< jobs waiting for a runner
  std::set<tracker::JobId> driven_;      ///< jobs a runner drives now
  std::deque<FarmEvent> events_;
  struct DeviceStats {
    std::map<std::string, uint64_t> errors;  ///< results by error kind
    std::deque<tracker::TimePoint> recent;   ///< result times of the last minute
  };
  std::unordered_map<tracker::DeviceId, DeviceStats> device_stats_;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::thread ticker_;
  std::vector<std::thread> runners_;
};

}  // namespace kiln::server
