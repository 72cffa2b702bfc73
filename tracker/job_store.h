// Tuning jobs, persisted in RocksDB so a restarted tracker resumes every unfinished one.
//
//   JobStore store = JobStore::open("state/jobs");         // a folder; created when missing
//   JobId id = store.create({.owner = "ana", .model_name = "resnet18", .target = "llvm ...",
//                            .device_key = "rk3399", .trials = 200});   // state: queued
//   store.transition(id, JobState::kRunning);               // validated: see below
//   store.update_progress(id, [](JobRecord& j) { ++j.trials_done; });
//   for (const JobRecord& j : store.unfinished()) resume(j); // after a restart
//
// States: queued -> running -> done | failed; queued -> failed; queued | running -> cancelled.
// done, failed and cancelled are final. Any other transition is a kiln::Error naming the job and
// both states. Keys: 'j' + job id (8 bytes big-endian) -> the job as JSON; 'n' -> the next id.
// Every change is one synced write: once a call returns, it survives a crash. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tracker/ids.h"

namespace kiln::tracker {

enum class JobState { kQueued, kRunning, kDone, kFailed, kCancelled };

/// "queued", "running", "done", "failed", "cancelled".
const char* job_state_name(JobState s);
/// The state named `name`; kiln::Error listing the names otherwise.
JobState job_state_from_name(const std::string& name);
/// Whether `s` is done, failed or cancelled.
bool is_final(JobState s);
/// Whether from -> to is allowed (see the header comment).
bool is_legal_transition(JobState from, JobState to);

struct JobRecord {
  JobId id = 0;  ///< set by create()
  std::string owner;
  std::string model_name;
  std::string target;
  std::string device_key;
  /// How much to measure (SubmitModelRequest's fields): without a budget or time limit, each
  /// task in turn to `trials` (the fixed split); with them, the task scheduler, `trials` capping
  /// each task (0: no cap).
  uint32_t trials = 0;
  uint32_t budget = 0;                 ///< measurements over all tasks; 0: none
  double time_limit_s = 0;             ///< seconds of tuning from started_ms on; 0: none
  std::optional<uint32_t> early_stop;  ///< the scheduler's patience; unset: its default
  int32_t priority = 0;
  /// The shapes its model's inputs are compiled for (`--input-shape`), by name.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  JobState state = JobState::kQueued;
  uint32_t tasks_total = 0;
  std::vector<std::string> task_keys;  ///< the model's tuning tasks, in tuning order
  /// The tasks (indices into task_keys) that get no more trials, in the order they ended.
  std::vector<uint32_t> done_tasks;
  std::optional<uint32_t> tuning_task;  ///< the task whose round runs now, while tuning
  uint64_t trials_done = 0;             ///< measurements finished, errors included
  uint64_t trials_failed = 0;           ///< of those, with an error
  double best_latency_s = 0;            ///< best end-to-end estimate; 0 when none yet
  std::string error;                    ///< why it failed or was cancelled
  std::string phase;                    ///< what its driver is doing ("folding constants", ...)
  uint32_t driver_failures = 0;  ///< tries of its driver that crashed, hung or ran out of memory
  std::string driver_failure;    ///< why the last of those failed
  int64_t created_ms = 0;        ///< Unix ms, set by create() when 0
  int64_t started_ms = 0;        ///< set on the move to running
  int64_t finished_ms = 0;       ///< set on the move to a final state
  int64_t updated_ms = 0;        ///< set on every change

  /// Whether tuning is scheduled by a budget or time limit rather than the fixed split.
  bool scheduled() const { return budget > 0 || time_limit_s > 0; }
  uint32_t tasks_done() const { return static_cast<uint32_t>(done_tasks.size()); }

  bool operator==(const JobRecord&) const = default;
};

class JobStore {
 public:
  /// Opens the store in folder `dir`, creating it when missing. `now_ms` gives the timestamps
  /// (Unix ms; the system clock when empty). kiln::Error naming the folder when it cannot be
  /// opened (not writable, a file, in use by another process or JobStore).
  static JobStore open(const std::string& dir, std::function<int64_t()> now_ms = {});

  JobStore(JobStore&&) noexcept;
  JobStore& operator=(JobStore&&) noexcept;
  ~JobStore();

  /// Stores a new job in state queued and returns its id (1, 2, ...; never reused, also across
  /// reopen). kiln::Error when target or device key is empty, or when trials, budget and time
  /// limit are all 0.
  JobId create(JobRecord job);
  /// The job, or nullopt when unknown.
  std::optional<JobRecord> get(JobId id) const;
  /// Moves a job to `to`; `error` is recorded for failed and cancelled. Returns the new record.
  /// kiln::Error naming the job and both states when not allowed, or when the job is unknown.
  JobRecord transition(JobId id, JobState to, const std::string& error = "");
  /// Changes a job's counters through `change` (which must not change id, state or timestamps)
  /// and persists it. Returns the new record; kiln::Error when the job is unknown.
  JobRecord update_progress(JobId id, const std::function<void(JobRecord&)>& change);
  /// Every job, by id.
  std::vector<JobRecord> list() const;
  /// The jobs in state queued or running, by id: what a restarted tracker resumes.
  std::vector<JobRecord> unfinished() const;

  const std::string& dir() const;

 private:
  struct Impl;
  explicit JobStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::tracker
