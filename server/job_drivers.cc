// The job drivers: kilnd never reads a user's model. Each runnable job gets a runner thread that
// starts a driver process (kiln-tuner, tuner/) and watches it: the driver imports the model,
// extracts its tasks, tunes them through this farm (the JobDriver service: measure_batch, records)
// and uploads the bundle. A driver that crashes, hangs (no sign of life for idle_timeout while not
// waiting for a batch) or runs out of memory fails its try; after max_tries such tries the job
// fails with the reason ("the compiler crashed on this model (SIGSEGV) while folding constants"),
// persisted, so a restarted kilnd never runs a poisoned job again. A model's own fault (it does
// not compile) fails the job at once with the compiler's message. kilnd, the other jobs, the
// workers and the agents go on regardless.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/fnv1a.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/measure_child.h"
#include "rpc/driver_contract.h"
#include "server/child_process.h"
#include "server/farm_internal.h"
#include "server/wire.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using tracker::JobId;
using tracker::JobRecord;
using tracker::JobState;

/// The last non-empty line of `text`, without a leading "error: ".
std::string last_line(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string line = text.substr(start, end + 1 - start);
  if (line.rfind("error: ", 0) == 0) line.erase(0, 7);
  return line;
}

std::string seconds(tracker::Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

/// What every driver process gets in its environment besides kilnd's: a memory limit counts
/// address space, and glibc reserves 64 MiB of it per thread arena (a driver runs a thread per
/// CPU in places), so the arenas are capped.
std::vector<std::string> driver_environment(const DriverOptions& d) {
  std::vector<std::string> env;
  if (d.memory_limit_mb > 0) env.push_back("MALLOC_ARENA_MAX=4");
  return env;
}

/// Whether a driver killed by `status`'s signal died of memory exhaustion: an allocation that
/// failed where nothing caught it ends in std::terminate's SIGABRT, its log saying so. A SIGSEGV
/// never is (a stack stopped by the memory limit exits kDriverOutOfMemory, base/stack_overflow.h).
bool died_out_of_memory(const ExitStatus& status, const std::string& log_tail) {
  return status.signo == SIGABRT && (log_tail.find("out of memory") != std::string::npos ||
                                     log_tail.find("std::bad_alloc") != std::string::npos);
}

/// Why a driver that overflowed its stack failed (rpc::kDriverStackOverflow), `where` the phase.
std::string stack_overflow_reason(const std::string& where) {
  return "the compiler overflowed its stack on this model" + where +
         " (a recursion as deep as the model: a compiler bug, not retried)";
}

}  // namespace

// --- running each job's driver -----------------------------------------------------------

void Farm::runner_loop() {
  while (true) {
    JobId id = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      jobs_cv_.wait(lock, [&] { return stopping_ || !runnable_.empty(); });
      if (stopping_) return;
      // The highest priority first; among equals, the oldest.
      auto best = runnable_.begin();
      int32_t best_priority = INT32_MIN;
      for (auto it = runnable_.begin(); it != runnable_.end(); ++it) {
        const auto j = store_.get(*it);
        const int32_t p = j ? j->priority : INT32_MIN;
        if (p > best_priority) {
          best_priority = p;
          best = it;
        }
      }
      id = *best;
      runnable_.erase(best);
      // A job is driven by one runner at a time, however often it was made runnable (a
      // submission racing the resume of start()).
      if (!driven_.insert(id).second) continue;
      tracker_.queue().set_priority(id, best_priority == INT32_MIN ? 0 : best_priority);
    }
    run_job(id);
    std::lock_guard<std::mutex> lock(mu_);
    driven_.erase(id);
  }
}

void Farm::run_job(JobId id) {
  try {
    while (!stopping_) {
      const std::optional<JobRecord> j = store_.get(id);
      if (!j || tracker::is_final(j->state)) return;
      if (j->driver_failures >= static_cast<uint32_t>(options_.driver.max_tries)) {
        fail_job(id, j->driver_failure + " (" + std::to_string(j->driver_failures) + " tries)");
        return;
      }
      if (driver_server_.empty()) {
        fail_job(id, "kilnd has no address for job drivers (started without one)");
        return;
      }
      if (j->state == JobState::kQueued) transition_job(id, JobState::kRunning);
      const TryOutcome o = run_driver_once(id);
      if (o.finished) return;
      if (!o.retry) {
        fail_job(id, o.reason);
        return;
      }
      const JobRecord now = update_job(id, [&](JobRecord& r) {
        ++r.driver_failures;
        r.driver_failure = o.reason;
      });
      {
        std::lock_guard<std::mutex> lock(mu_);
        add_event_locked("retry", "job " + std::to_string(id) + ": try " +
                                      std::to_string(now.driver_failures) + " of " +
                                      std::to_string(options_.driver.max_tries) +
                                      " failed: " + o.reason);
      }
      if (now.driver_failures >= static_cast<uint32_t>(options_.driver.max_tries)) {
        fail_job(id, o.reason + " (" + std::to_string(now.driver_failures) + " tries)");
        return;
      }
      drain_job(id, std::chrono::minutes(2));
    }
  } catch (const std::exception& e) {
    if (!stopping_) fail_job(id, e.what());
  }
}

Farm::TryOutcome Farm::run_driver_once(JobId id) {
  const std::string secret = random_hex();
  {
    std::lock_guard<std::mutex> lock(mu_);
    drivers_[id] = DriverSession{secret, "starting", "", clock_.now(), 0};
  }
  struct Forget {  // the session goes with the try, whatever happens
    Farm& f;
    JobId id;
    ~Forget() {
      std::lock_guard<std::mutex> lock(f.mu_);
      f.drivers_.erase(id);
      // What the driver queued and no device took yet is withdrawn; what is on a device completes
      // and is recorded (drain_job waits for it before another try).
      f.tracker_.queue().cancel_job(id);
      f.builds_.cancel_job(id);
      f.refresh_gauges_locked();
    }
  } forget{*this, id};

  const DriverOptions& d = options_.driver;
  std::vector<std::string> argv = {driver_program_, "--server", driver_server_, "--job",
                                   std::to_string(id)};
  if (!d.tls_ca.empty()) argv.insert(argv.end(), {"--tls-ca", d.tls_ca});
  if (d.memory_limit_mb > 0)
    argv.insert(argv.end(), {"--memory-limit-mb", std::to_string(d.memory_limit_mb)});
  std::vector<std::string> env = driver_environment(d);
  env.push_back(std::string(rpc::kDriverSecretEnv) + "=" + secret);
  if (!d.token.empty()) env.push_back("KILN_TOKEN=" + d.token);
  const std::string log_path = driver_log_path(id);
  ChildProcess child = ChildProcess::start(argv, env, log_path);

  bool hung = false;
  std::optional<ExitStatus> status;
  while (!(status = child.wait_for(std::chrono::milliseconds(100)))) {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_ || cancelled_.count(id)) {
      lock.unlock();
      child.stop(std::chrono::seconds(2));
      return {};
    }
    const DriverSession& s = drivers_.at(id);
    if (!hung && s.waiting == 0 && clock_.now() - s.last_seen > d.idle_timeout) {
      hung = true;
      child.signal(SIGKILL);
    }
  }
  DriverSession session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    session = drivers_.at(id);
    if (stopping_) return {};
  }
  const std::optional<JobRecord> j = store_.get(id);
  if (!j || tracker::is_final(j->state)) return {};  // uploaded its bundle, or cancelled

  const std::string where = session.phase.empty() ? "" : " while " + session.phase;
  const std::string tail = file_tail(log_path, 8192);
  const std::string told = session.error.empty() ? last_line(tail) : session.error;
  const std::string limit = std::to_string(d.memory_limit_mb) + " MiB";
  if (hung) {
    return {false, true,
            "the compiler made no progress for " + seconds(d.idle_timeout) + where +
                " (time limit; killed)"};
  }
  if (status->signaled) {
    if (died_out_of_memory(*status, tail))
      return {false, true, "the compiler ran out of memory (limit " + limit + ")" + where};
    return {
        false, true,
        "the compiler crashed on this model (" + runtime::signal_name(status->signo) + ")" + where};
  }
  switch (status->code) {
    case rpc::kDriverUserError:
      return {false, false, told};
    case rpc::kDriverInternal:
      return {false, false, "the compiler failed on this model" + where + ": " + told};
    case rpc::kDriverOutOfMemory:
      return {false, true, "the compiler ran out of memory (limit " + limit + ")" + where};
    case rpc::kDriverStackOverflow:
      return {false, false, stack_overflow_reason(where)};
    case rpc::kDriverDone:
      return {false, true, "the job driver exited without uploading a bundle" + where};
    default:
      return {false, true, "the job driver " + status->describe() + where + ": " + told};
  }
}

void Farm::drain_job(JobId id, tracker::Duration limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_ && tracker_.queue().in_flight(id) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    jobs_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void Farm::fail_job(JobId id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto j = store_.get(id);
  if (!j || tracker::is_final(j->state)) return;
  store_.transition(id, JobState::kFailed, reason);
  add_event_locked("job_state", "job " + std::to_string(id) + " failed: " + reason);
  bump_job_locked(id);
  refresh_gauges_locked();
}

std::string Farm::check_model(const std::string& model_file, const std::string& name,
                              const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  const DriverOptions& d = options_.driver;
  std::vector<std::string> argv = {driver_program_, "--check", model_file, "--name=" + name};
  for (const auto& [name, dims] : input_shapes) {
    std::string value = name + "=";
    for (size_t i = 0; i < dims.size(); ++i) value += (i ? "," : "") + std::to_string(dims[i]);
    argv.insert(argv.end(), {"--input-shape", value});
  }
  if (d.memory_limit_mb > 0)
    argv.insert(argv.end(), {"--memory-limit-mb", std::to_string(d.memory_limit_mb)});
  const std::string log_path = model_file + ".check.log";
  struct RemoveLog {
    const std::string& path;
    ~RemoveLog() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_log{log_path};
  ChildProcess child = ChildProcess::start(argv, driver_environment(d), log_path);
  const auto status =
      child.wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(d.check_timeout));
  if (!status) {
    child.stop(std::chrono::seconds(1));
    return "the compiler took more than " + seconds(d.check_timeout) + " to import it (time limit)";
  }
  const std::string tail = file_tail(log_path, 8192);
  if (status->exited(rpc::kDriverDone)) return "";
  if (status->signaled) {
    if (died_out_of_memory(*status, tail))
      return "the compiler ran out of memory (limit " + std::to_string(d.memory_limit_mb) +
             " MiB) while importing it";
    return "the compiler crashed on this model (" + runtime::signal_name(status->signo) +
           ") while importing it";
  }
  if (status->exited(rpc::kDriverUserError)) {
    std::string message = tail;
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    if (message.rfind("error: ", 0) == 0) message.erase(0, 7);
    return message;
  }
  if (status->exited(rpc::kDriverInternal))
    return "the compiler failed on this model while importing it: " + last_line(tail);
  if (status->exited(rpc::kDriverOutOfMemory))
    return "the compiler ran out of memory (limit " + std::to_string(d.memory_limit_mb) +
           " MiB) while importing it";
  if (status->exited(rpc::kDriverStackOverflow))
    return stack_overflow_reason(" while importing it");
  KILN_SYSTEM_ERROR() << "kilnd: the model check (" << driver_program_ << " --check) "
                      << status->describe() << ": " << last_line(tail);
  return "";
}

// --- what drivers may ask -----------------------------------------------------------------

Farm::DriverSession& Farm::session_locked(const v1::DriverAuth& auth) {
  auto it = drivers_.find(auth.job_id());
  if (it == drivers_.end() || auth.secret().empty() || it->second.secret != auth.secret()) {
    throw FarmError(FarmError::Code::kPermissionDenied,
                    "not the current driver of job " + std::to_string(auth.job_id()));
  }
  return it->second;
}

JobRecord Farm::driver_job(const v1::DriverAuth& auth) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) throw FarmError(FarmError::Code::kUnavailable, "kilnd is stopping");
  session_locked(auth).last_seen = clock_.now();
  if (cancelled_.count(auth.job_id())) {
    throw FarmError(FarmError::Code::kCancelled,
                    "job " + std::to_string(auth.job_id()) + " was cancelled");
  }
  return store_.get(auth.job_id()).value();
}

std::string Farm::driver_model_path(const v1::DriverAuth& auth) {
  const std::string path = model_path(driver_job(auth).id);
  KILN_SYSTEM_CHECK(fs::is_regular_file(path))
      << "job " << auth.job_id() << " has no model file '" << path << "'";
  return path;
}

v1::DriverJob Farm::driver_job_spec(const v1::DriverAuth& auth) {
  const JobRecord j = driver_job(auth);
  v1::DriverJob out;
  out.set_job_id(j.id);
  out.set_name(j.model_name);
  out.set_target(j.target);
  out.set_trials(j.trials);
  out.set_budget(j.budget);
  if (j.time_limit_s > 0) {
    // The job's limit counts from when it started running: a retried or resumed driver gets
    // what is left (the job store's clock, which set started_ms).
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const int64_t started_ms = j.started_ms > 0 ? j.started_ms : now_ms;
    out.set_time_left_s(j.time_limit_s - static_cast<double>(now_ms - started_ms) / 1e3);
  }
  if (j.early_stop) out.set_early_stop(*j.early_stop);
  out.set_batch(static_cast<uint32_t>(options_.batch));
  out.set_explorer(options_.explorer);
  out.set_seed(j.id);  // a job's search replays from its id
  for (const auto& [name, dims] : j.input_shapes) {
    v1::InputShape* shape = out.add_input_shapes();
    shape->set_name(name);
    for (int64_t d : dims) shape->add_dims(d);
  }
  return out;
}

void Farm::driver_progress(const v1::DriverProgress& p) {
  const JobRecord j = driver_job(p.auth());
  if (p.has_tasks() && p.tasks_size() > 100000)
    throw invalid_argument("ReportDriverProgress: more than 100000 tasks");
  // (The job store could not read an infinite or NaN latency back: the job would be unreadable.)
  if (p.has_best_latency_s() && !(std::isfinite(p.best_latency_s()) && p.best_latency_s() >= 0)) {
    throw invalid_argument("ReportDriverProgress: best_latency_s is " +
                           std::to_string(p.best_latency_s()) +
                           "; it must be finite and non-negative");
  }
  // The task indices refer to the tasks this message sets, or else to the job's.
  const size_t tasks = p.has_tasks() ? static_cast<size_t>(p.tasks_size()) : j.task_keys.size();
  std::vector<bool> seen(tasks, false);
  for (uint32_t t : p.done_tasks()) {
    if (t >= tasks || seen[t]) {
      throw invalid_argument("ReportDriverProgress: done_tasks holds " + std::to_string(t) +
                             (t >= tasks ? ", not a task of the " + std::to_string(tasks)
                                         : " twice; each of the " + std::to_string(tasks)) +
                             " the job has");
    }
    seen[t] = true;
  }
  if (p.has_tuning_task() && p.tuning_task() >= tasks) {
    throw invalid_argument("ReportDriverProgress: tuning_task " + std::to_string(p.tuning_task()) +
                           " is not a task of the " + std::to_string(tasks) + " the job has");
  }
  for (int i = 0; i < p.tasks_size(); ++i) {
    const v1::TaskRef& t = p.tasks(i);
    if (t.task_key().find('\0') != std::string::npos) {  // (the record log keys on it)
      throw invalid_argument("ReportDriverProgress: the key of task " + std::to_string(i) +
                             " holds a NUL character");
    }
    if (t.task_key().empty() || t.task_key().size() > 1024 || t.target() != j.target) {
      throw invalid_argument("ReportDriverProgress: task '" + t.task_key() +
                             "' needs a key (at most 1024 bytes) and the job's target");
    }
    if (t.template_name().empty() && t.workload().empty()) continue;  // no source told
    try {
      records::check_task_source(t.task_key(), {t.template_name(), t.workload()},
                                 "ReportDriverProgress");
    } catch (const Error& e) {
      throw invalid_argument(e.what());
    }
  }
  // The log learns how to rebuild each task, so that a cost model trained on the whole log (by a
  // later job's driver) reads the features of its records.
  for (const v1::TaskRef& t : p.tasks()) {
    if (!t.template_name().empty()) log_.note_task(t.task_key(), {t.template_name(), t.workload()});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    DriverSession& s = session_locked(p.auth());
    if (!p.phase().empty()) s.phase = p.phase();
    if (!p.error().empty()) s.error = p.error();
  }
  update_job(j.id, [&](JobRecord& r) {
    if (!p.phase().empty()) r.phase = p.phase();
    if (p.has_tasks()) {
      r.task_keys.clear();
      for (const v1::TaskRef& t : p.tasks()) r.task_keys.push_back(t.task_key());
      r.tasks_total = static_cast<uint32_t>(r.task_keys.size());
      r.done_tasks.clear();
      r.tuning_task.reset();
    }
    if (p.done_tasks_size() > 0) r.done_tasks.assign(p.done_tasks().begin(), p.done_tasks().end());
    if (p.has_tuning_task()) r.tuning_task = p.tuning_task();
    if (p.has_trials_done()) r.trials_done = p.trials_done();
    if (p.has_best_latency_s()) r.best_latency_s = p.best_latency_s();
  });
}

records::Lane Farm::job_lane(const JobRecord& j) const {
  std::lock_guard<std::mutex> lock(mu_);
  return tracker_.devices().key_emulated(j.device_key) ? records::Lane::kEmulated
                                                       : records::Lane::kDevice;
}

v1::TaskRecords Farm::driver_records(const v1::TaskRecordsRequest& req) {
  const JobRecord j = driver_job(req.auth());
  if (std::find(j.task_keys.begin(), j.task_keys.end(), req.task_key()) == j.task_keys.end()) {
    throw invalid_argument("GetTaskRecords: task '" + req.task_key() + "' is not one of job " +
                           std::to_string(j.id) + "'s tasks");
  }
  const records::Lane lane = job_lane(j);
  v1::TaskRecords out;
  if (!req.best_only()) {
    for (const records::MeasureRecord& r : log_.records(req.task_key(), j.target, lane))
      *out.add_records() = to_wire(r);
  }
  if (auto best = log_.best(req.task_key(), j.target, lane)) {
    *out.mutable_best() = to_wire(*best);
  }
  out.set_count(log_.count(req.task_key(), j.target, lane));
  return out;
}

namespace {

/// The log's key of a driver's shelf entry: `name` checked to be "cost-model/<kind>/<target>"
/// (the only entries drivers keep), an emulated lane's kept apart from the device lane's.
std::string shelf_key(const std::string& name, const std::string& target, records::Lane lane,
                      const char* who) {
  const std::string prefix = "cost-model/";
  const size_t slash = name.find('/', prefix.size());
  const std::string kind =
      slash == std::string::npos ? "" : name.substr(prefix.size(), slash - prefix.size());
  const bool kind_ok =
      !kind.empty() && kind.size() <= 16 && std::all_of(kind.begin(), kind.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
      });
  if (name.rfind(prefix, 0) != 0 || !kind_ok || name != records::cost_model_shelf(target, kind)) {
    throw invalid_argument(std::string(who) + ": shelf entry '" + name.substr(0, 200) +
                           "' is not 'cost-model/<kind>/" + target + "'");
  }
  return lane == records::Lane::kEmulated ? "emulated/" + name : name;
}

}  // namespace

void Farm::driver_history(const v1::DriverAuth& auth,
                          const std::function<void(const v1::TaskHistory&)>& write) {
  const JobRecord j = driver_job(auth);
  constexpr size_t kRun = 20000;  // records per message, well under the message size limit
  for (const records::TaskHistory& h : log_.history(j.target, job_lane(j))) {
    for (size_t at = 0; at < h.records.size(); at += kRun) {
      v1::TaskHistory m;
      m.set_task_key(h.task_key);
      m.set_template_name(h.source.template_name);
      m.set_workload(h.source.workload);
      for (size_t i = at; i < std::min(h.records.size(), at + kRun); ++i)
        *m.add_records() = to_wire(h.records[i]);
      write(m);
    }
  }
}

v1::ShelfEntry Farm::driver_shelf(const v1::ShelfRequest& req) {
  const JobRecord j = driver_job(req.auth());
  const records::Lane lane = job_lane(j);
  v1::ShelfEntry out;
  out.set_target_records(log_.count_target(j.target, lane));
  if (req.name().empty()) return out;
  if (auto bytes = log_.shelf(shelf_key(req.name(), j.target, lane, "GetShelf"))) {
    out.set_found(true);
    out.set_data(std::move(*bytes));
  }
  return out;
}

void Farm::driver_put_shelf(const v1::PutShelfRequest& req) {
  const JobRecord j = driver_job(req.auth());
  const std::string key = shelf_key(req.name(), j.target, job_lane(j), "PutShelf");
  if (req.data().size() > (size_t{32} << 20)) {
    throw invalid_argument("PutShelf: " + std::to_string(req.data().size()) +
                           " bytes, over the 32 MiB a shelf entry holds");
  }
  log_.put_shelf(key, req.data());
}

std::vector<uint64_t> Farm::driver_append(const v1::AppendRecordsRequest& req) {
  const JobRecord j = driver_job(req.auth());
  std::vector<records::MeasureRecord> recs;
  for (int i = 0; i < req.records_size(); ++i) {
    const std::string origin = "AppendRecords: record " + std::to_string(i);
    records::MeasureRecord r;
    try {
      r = from_wire(req.records(i), origin);
    } catch (const Error& e) {
      throw invalid_argument(e.what());
    }
    if (r.target != j.target)
      throw invalid_argument(origin + ": target '" + r.target + "' is not the job's");
    if (std::find(j.task_keys.begin(), j.task_keys.end(), r.task_key) == j.task_keys.end())
      throw invalid_argument(origin + ": task '" + r.task_key + "' is not one of the job's tasks");
    recs.push_back(std::move(r));
  }
  // The driver's own records (configs that do not lower, ...) join the lane its job measures in.
  const records::Lane lane = job_lane(j);
  std::vector<uint64_t> seqs;
  for (records::MeasureRecord& r : recs) {
    r.emulated = lane == records::Lane::kEmulated;
    if (log_.measured(r.task_key, r.target, r.config_index, lane)) {  // never twice
      seqs.push_back(0);
      continue;
    }
    seqs.push_back(log_.append(r));
    metrics_.record_appended();
  }
  return seqs;
}

uint64_t Farm::store_bundle(const std::function<bool(v1::BundleUpload&)>& read_chunk) {
  v1::BundleUpload chunk;
  if (!read_chunk(chunk)) throw invalid_argument("UploadBundle: no chunk");
  const JobRecord j = driver_job(chunk.auth());
  const fs::path final_path =
      fs::path(options_.state_dir) / "bundles" / (std::to_string(j.id) + ".kiln");
  const fs::path tmp = final_path.string() + ".upload-" + random_hex();
  struct RemoveTmp {
    const fs::path& p;
    ~RemoveTmp() {
      std::error_code ec;
      fs::remove(p, ec);
    }
  } remove_tmp{tmp};
  uint64_t size = 0, hash = kFnv1a64Basis;
  {
    std::ofstream out(tmp, std::ios::binary);
    KILN_SYSTEM_CHECK(out.good()) << "kilnd: cannot write '" << tmp.string() << "'";
    while (true) {
      size += chunk.data().size();
      if (size > options_.max_bundle_bytes) {
        throw FarmError(FarmError::Code::kResourceExhausted,
                        "UploadBundle: the bundle is over this farm's limit of " +
                            std::to_string(options_.max_bundle_bytes) + " bytes");
      }
      hash = fnv1a64(chunk.data().data(), chunk.data().size(), hash);
      out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
      if (chunk.last()) break;
      if (!read_chunk(chunk))
        throw invalid_argument("UploadBundle: the stream ended before the last chunk");
    }
    out.close();
    KILN_SYSTEM_CHECK(!out.fail()) << "kilnd: writing '" << tmp.string() << "' failed";
  }
  if (chunk.checksum() != hash) throw invalid_argument("UploadBundle: the checksum does not match");
  try {
    runtime::check_bundle_file(tmp.string());  // its checksum and sections, in place
  } catch (const Error& e) {
    throw invalid_argument(std::string("UploadBundle: not a bundle: ") + e.what());
  }
  // Still the job's driver, the job not cancelled, and not done already: a done job's bundle is
  // never replaced.
  if (const JobRecord now = driver_job(chunk.auth()); tracker::is_final(now.state)) {
    throw FarmError(FarmError::Code::kFailedPrecondition,
                    "UploadBundle: job " + std::to_string(j.id) + " is already " +
                        tracker::job_state_name(now.state));
  }
  fs::rename(tmp, final_path);
  transition_job(j.id, JobState::kDone);
  return size;
}

}  // namespace kiln::server
