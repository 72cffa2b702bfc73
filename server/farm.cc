#include "server/farm.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/target/target.h"
#include "server/wire.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using tracker::DeviceId;
using tracker::JobId;
using tracker::JobRecord;
using tracker::JobState;

std::string random_instance() {
  std::random_device rd;
  std::ostringstream os;
  os << std::hex << rd() << rd();
  return os.str();
}

std::string default_records_dir(const FarmOptions& o) {
  return o.records_dir.empty() ? (fs::path(o.state_dir) / "records").string() : o.records_dir;
}

std::string prepare_state_dir(const FarmOptions& o) {
  KILN_USER_CHECK(!o.state_dir.empty()) << "kilnd: the state folder (--state) is required";
  std::error_code ec;
  for (const char* sub : {"models", "bundles"}) {
    fs::create_directories(fs::path(o.state_dir) / sub, ec);
    KILN_USER_CHECK(!ec) << "kilnd: cannot create '" << (fs::path(o.state_dir) / sub).string()
                         << "': " << ec.message();
  }
  return (fs::path(o.state_dir) / "jobs").string();
}

FarmError invalid(const std::string& m) {
  return FarmError(FarmError::Code::kInvalidArgument, m);
}

}  // namespace

/// One batch of candidates of one job, as it moves from builds to measurements.
struct Farm::Batch {
  struct Slot {
    std::optional<v1::Artifact> artifact;           ///< set when its build finished
    std::optional<autotune::MeasureRecord> record;  ///< set when measured (appended)
    std::optional<tracker::GiveUp> given_up;        ///< set when the queue gave it up
    std::string failure;                            ///< set when its record could not be kept
  };
  JobId job = 0;
  std::vector<Slot> slots;
  std::condition_variable cv;
};

Farm::Farm(FarmOptions options)
    : options_(std::move(options)),
      instance_(random_instance()),
      log_(autotune::RecordLog::open(default_records_dir(options_))),
      store_(tracker::JobStore::open(prepare_state_dir(options_))),
      tracker_(clock_, options_.tracker),
      builds_(clock_, options_.builds) {
  KILN_USER_CHECK(options_.max_running_jobs > 0) << "kilnd: max running jobs must be positive";
}

Farm::~Farm() { stop(); }

void Farm::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  for (const JobRecord& j : store_.unfinished()) {
    runnable_.push_back(j.id);
    job_versions_[j.id] = 1;
  }
  if (!runnable_.empty()) add_event_locked("resume", std::to_string(runnable_.size()) + " unfinished jobs resumed");
  refresh_gauges_locked();
  ticker_ = std::thread([this] { tick_loop(); });
  for (int i = 0; i < options_.max_running_jobs; ++i) runners_.emplace_back([this] { runner_loop(); });
}

void Farm::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    builds_cv_.notify_all();
    jobs_cv_.notify_all();
    for (auto& [id, sink] : sinks_) sink->close(true, "kilnd is stopping");
    sinks_.clear();
    idle_.clear();
    for (auto& [id, ref] : build_slots_) ref.batch->cv.notify_all();
    for (auto& [id, ref] : measure_slots_) ref.batch->cv.notify_all();
  }
  if (ticker_.joinable()) ticker_.join();
  for (std::thread& t : runners_) t.join();
  runners_.clear();
}

void Farm::add_event_locked(const std::string& kind, const std::string& text) {
  // events_ is guarded by mu_, which every caller holds.
  events_.push_back({clock_.unix_ms(), kind, text});
  while (events_.size() > 500) events_.pop_front();
}

std::vector<FarmEvent> Farm::events(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min(max, events_.size());
  return {events_.end() - static_cast<std::ptrdiff_t>(n), events_.end()};
}

// --- device agents ------------------------------------------------------------------------

Farm::Registration Farm::register_device(const v1::RegisterDeviceRequest& r) {
  if (r.key().empty()) throw invalid("RegisterDevice: the device key is empty");
  if (r.target().empty()) throw invalid("RegisterDevice: the target is empty");
  try {
    target::Target::parse(r.target());
  } catch (const std::exception& e) {
    throw invalid("RegisterDevice: unknown target '" + r.target() + "': " + e.what());
  }
  std::map<std::string, std::string> caps;
  const v1::DeviceCapabilities& c = r.capabilities();
  if (!c.cpu_model().empty()) caps["cpu_model"] = c.cpu_model();
  if (c.cores()) caps["cores"] = std::to_string(c.cores());
  if (c.memory_bytes()) caps["memory_bytes"] = std::to_string(c.memory_bytes());
  if (!c.driver().empty()) caps["driver"] = c.driver();
  for (const auto& [k, v] : c.extra()) caps["extra." + k] = v;
  if (!r.fingerprint().empty()) caps["fingerprint"] = r.fingerprint();
  std::lock_guard<std::mutex> lock(mu_);
  const DeviceId id = tracker_.devices().register_device(r.key(), r.target(), caps);
  add_event_locked("device_joined", "device " + std::to_string(id) + " (key '" + r.key() + "', " +
                                 (r.fingerprint().empty() ? r.target() : r.fingerprint()) +
                                 ") joined");
  refresh_gauges_locked();
  return {id, static_cast<uint32_t>(tracker::to_ms(options_.tracker.registry.lease))};
}

Farm::Lease Farm::heartbeat(DeviceId id) {
  std::lock_guard<std::mutex> lock(mu_);
  Lease l;
  l.lease_ms = static_cast<uint32_t>(tracker::to_ms(options_.tracker.registry.lease));
  l.known = tracker_.devices().heartbeat(id);
  if (const tracker::Device* d = tracker_.devices().find(id)) {
    l.quarantined = d->quarantined;
    l.reason = d->quarantine_reason;
  }
  return l;
}

Farm::Attach Farm::attach(DeviceId device, WorkSink* sink) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Attach::kStopping;
  if (!tracker_.devices().find(device)) return Attach::kUnknownDevice;
  if (auto old = sinks_.find(device); old != sinks_.end() && old->second != sink)
    old->second->close(false, "another work stream of device " + std::to_string(device) + " opened");
  sinks_[device] = sink;
  feed_locked(device);
  return Attach::kAttached;
}

void Farm::detach(DeviceId device, WorkSink* sink) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sinks_.find(device);
  if (it == sinks_.end() || it->second != sink) return;
  sinks_.erase(it);
  for (auto& [key, ids] : idle_) ids.erase(device);
}

void Farm::feed_locked(DeviceId device) {
  auto sink = sinks_.find(device);
  const tracker::Device* d = tracker_.devices().find(device);
  if (sink == sinks_.end() || !d) return;
  const std::string key = d->key;
  while (auto req = tracker_.dispatch(device)) {
    v1::MeasureRequest wire;
    wire.ParseFromString(req->payload);
    wire.set_request_id(req->id);
    wire.set_attempt(static_cast<uint32_t>(req->attempts));
    wire.set_queued_ms(static_cast<uint32_t>(tracker::to_ms(req->queued)));
    wire.set_tracker_instance(instance_);
    sink->second->deliver(std::move(wire));
  }
  if (tracker_.devices().can_take_work(device)) {
    idle_[key].insert(device);
  } else {
    idle_[key].erase(device);
  }
}

void Farm::feed_key_locked(const std::string& key, size_t n) {
  auto it = idle_.find(key);
  if (it == idle_.end()) return;
  const size_t queued_before = tracker_.queue().pending_for_key(key);
  // A copy: feeding a device takes it out of the idle set.
  const std::vector<DeviceId> idle(it->second.begin(), it->second.end());
  for (DeviceId id : idle) {
    if (queued_before - tracker_.queue().pending_for_key(key) >= n) break;
    if (tracker_.queue().pending_for_key(key) == 0) break;
    feed_locked(id);
  }
}

void Farm::forget_device_locked(DeviceId device, const std::string& key) {
  sinks_.erase(device);
  idle_[key].erase(device);
  device_stats_.erase(device);
}

void Farm::device_gone(DeviceId device, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  const tracker::Device* d = tracker_.devices().find(device);
  if (!d) return;
  const std::string key = d->key;
  const size_t held = d->in_flight.size();
  for (const tracker::GiveUp& g : tracker_.remove_device(device)) give_up_locked(g);
  forget_device_locked(device, key);
  add_event_locked("device_lost", "device " + std::to_string(device) + " (key '" + key + "') " + why +
                               (held ? "; " + std::to_string(held) + " request(s) re-queued" : ""));
  feed_key_locked(key, held);
  refresh_gauges_locked();
}

void Farm::report_result(const v1::MeasureResult& r,
                         std::function<void(bool, std::exception_ptr)> done) {
  tracker::MeasureOutcome outcome;
  const std::optional<autotune::ErrorKind> kind = from_wire(r.error());
  if (!kind) {
    outcome.error = autotune::ErrorKind::kRuntimeError;
    outcome.error_msg = "the device reported error kind " + v1::ErrorKind_Name(r.error()) +
                        (r.error_msg().empty() ? "" : ": " + r.error_msg());
  } else {
    outcome.error = *kind;
    outcome.error_msg = r.error_msg();
    outcome.costs_s.assign(r.costs_s().begin(), r.costs_s().end());
    outcome.contended = r.contended();
    if (outcome.error == autotune::ErrorKind::kNone && outcome.costs_s.empty()) {
      outcome.error = autotune::ErrorKind::kRuntimeError;
      outcome.error_msg = "the device reported success without costs";
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  const std::optional<tracker::Report> rep = tracker_.report(r.request_id(), r.device_id(), outcome);
  if (!rep) {
    lock.unlock();
    done(false, nullptr);
    return;
  }
  metrics_.observe_measure(std::chrono::duration<double>(rep->completion.run).count(), outcome.error);
  metrics_.observe_queue_wait(std::chrono::duration<double>(rep->completion.queued).count());
  DeviceStats& stats = device_stats_[r.device_id()];
  if (outcome.error != autotune::ErrorKind::kNone) ++stats.errors[autotune::error_kind_name(outcome.error)];
  stats.recent.push_back(clock_.now());
  while (!stats.recent.empty() && clock_.now() - stats.recent.front() > std::chrono::minutes(1))
    stats.recent.pop_front();
  if (rep->quarantined) {
    const tracker::Device* d = tracker_.devices().find(r.device_id());
    add_event_locked("quarantine", "device " + std::to_string(r.device_id()) + " quarantined: " +
                                       (d ? d->quarantine_reason : std::string("repeated failures")));
  }
  // The device is free: its next request goes out while this one's record is written.
  feed_locked(r.device_id());
  lock.unlock();
  // The record is durable before the result is acknowledged; appends of concurrent reports are
  // committed together by the log (one sync for many), and no thread waits for the disk.
  const tracker::RequestId id = r.request_id();
  log_.append_async(rep->record, [this, id, record = rep->record, done = std::move(done)](
                                     uint64_t, std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (error) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        settle_measure_locked(id, std::nullopt, "the record log could not keep the result: " + what);
      } else {
        metrics_.record_appended();
        settle_measure_locked(id, record, "");
      }
    }
    done(!error, error);
  });
}

void Farm::settle_measure_locked(tracker::RequestId id, std::optional<autotune::MeasureRecord> record,
                                 const std::string& failure) {
  auto it = measure_slots_.find(id);
  if (it == measure_slots_.end()) return;
  Batch::Slot& slot = it->second.batch->slots[it->second.index];
  slot.record = std::move(record);
  slot.failure = failure;
  it->second.batch->cv.notify_all();
  measure_slots_.erase(it);
}

tracker::RequestId Farm::enqueue_measure(tracker::MeasureSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = spec.device_key;
  const tracker::RequestId id = tracker_.queue().enqueue(std::move(spec));
  feed_key_locked(key, 1);
  return id;
}

std::vector<v1::DeviceInfo> Farm::devices(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::DeviceInfo> out;
  const int capacity = tracker_.devices().options().capacity;
  for (const tracker::Device& d : tracker_.devices().list()) {
    if (!key.empty() && d.key != key) continue;
    v1::DeviceInfo info;
    info.set_device_id(d.id);
    info.set_key(d.key);
    info.set_target(d.target);
    auto cap = [&](const std::string& k) {
      auto it = d.capabilities.find(k);
      return it == d.capabilities.end() ? std::string() : it->second;
    };
    info.set_fingerprint(cap("fingerprint"));
    info.set_state(tracker::device_state_name(d.state(capacity)));
    info.set_quarantine_reason(d.quarantine_reason);
    info.set_completed(d.completed);
    info.set_in_flight(static_cast<uint32_t>(d.in_flight.size()));
    info.set_registered_ms(clock_.unix_ms() -
                           tracker::to_ms(clock_.now() - d.registered_at));
    v1::DeviceCapabilities* c = info.mutable_capabilities();
    c->set_cpu_model(cap("cpu_model"));
    if (!cap("cores").empty()) c->set_cores(static_cast<uint32_t>(std::stoul(cap("cores"))));
    if (!cap("memory_bytes").empty()) c->set_memory_bytes(std::stoull(cap("memory_bytes")));
    c->set_driver(cap("driver"));
    if (auto st = device_stats_.find(d.id); st != device_stats_.end()) {
      for (const auto& [kind, n] : st->second.errors) (*info.mutable_errors())[kind] = n;
      const auto since = clock_.now() - std::chrono::minutes(1);
      info.set_measures_last_minute(static_cast<uint32_t>(std::count_if(
          st->second.recent.begin(), st->second.recent.end(), [&](auto t) { return t >= since; })));
    }
    for (const auto& [k, v] : d.capabilities)
      if (k.rfind("extra.", 0) == 0) (*c->mutable_extra())[k.substr(6)] = v;
    out.push_back(std::move(info));
  }
  return out;
}

// --- compiler workers ---------------------------------------------------------------------

std::vector<v1::BuildRequest> Farm::take_builds(const std::string& worker, size_t max,
                                                const std::vector<std::string>& targets,
                                                tracker::Duration wait) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<tracker::BuildRequest> taken;
  while (!stopping_) {
    taken = builds_.take_batch(worker, std::max<size_t>(1, max), targets);
    if (!taken.empty()) break;
    if (builds_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  std::vector<v1::BuildRequest> out;
  for (const tracker::BuildRequest& b : taken) {
    v1::BuildRequest w;
    w.set_build_id(b.id);
    w.set_job_id(b.job_id);
    w.mutable_task()->set_task_key(b.task_key);
    w.mutable_task()->set_target(b.target);
    if (auto t = build_templates_.find(b.id); t != build_templates_.end())
      w.mutable_task()->set_template_name(t->second);
    w.mutable_config()->set_index(b.config_index);
    w.set_timeout_ms(options_.build_timeout_ms);
    out.push_back(std::move(w));
  }
  if (!out.empty()) refresh_gauges_locked();
  return out;
}

bool Farm::report_artifact(uint64_t build_id, const std::string& worker, v1::Artifact artifact) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!builds_.complete(build_id, worker)) return false;
  const std::optional<autotune::ErrorKind> kind = from_wire(artifact.error());
  metrics_.observe_build(artifact.build_s(), kind.value_or(autotune::ErrorKind::kCompileError));
  build_templates_.erase(build_id);
  if (auto it = build_slots_.find(build_id); it != build_slots_.end()) {
    it->second.batch->slots[it->second.index].artifact = std::move(artifact);
    it->second.batch->cv.notify_all();
    build_slots_.erase(it);
  }
  return true;
}

v1::JobModel Farm::job_model(JobId id) const {
  const JobRecord j = job(id);
  std::ifstream in(model_path(id), std::ios::binary);
  if (!in) {
    throw FarmError(FarmError::Code::kNotFound,
                    "job " + std::to_string(id) + " has no model file '" + model_path(id) + "'");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  v1::JobModel m;
  m.set_job_id(id);
  m.set_model(ss.str());
  m.set_target(j.target);
  return m;
}

// --- the public API -----------------------------------------------------------------------

std::string Farm::model_path(JobId id) const {
  return (fs::path(options_.state_dir) / "models" / (std::to_string(id) + ".onnx")).string();
}

std::string Farm::bundle_path(JobId id) const {
  const JobRecord j = job(id);
  if (j.state != JobState::kDone) {
    throw FarmError(FarmError::Code::kFailedPrecondition,
                    "job " + std::to_string(id) + " is " + tracker::job_state_name(j.state) +
                        ": its bundle exists once it is done");
  }
  return (fs::path(options_.state_dir) / "bundles" / (std::to_string(id) + ".kiln")).string();
}

JobId Farm::submit(const Submission& s) {
  if (s.model.empty()) throw invalid("SubmitModel: the model is empty");
  if (s.model.size() > options_.max_model_bytes) {
    throw FarmError(FarmError::Code::kResourceExhausted,
                    "SubmitModel: the model is " + std::to_string(s.model.size()) +
                        " bytes, over this farm's limit of " +
                        std::to_string(options_.max_model_bytes));
  }
  if (s.target.empty()) throw invalid("SubmitModel: the target is empty");
  if (s.device_key.empty()) throw invalid("SubmitModel: the device key is empty");
  if (s.trials == 0) throw invalid("SubmitModel: trials must be positive");
  if (s.trials > options_.max_trials) {
    throw invalid("SubmitModel: trials " + std::to_string(s.trials) + " is over this farm's limit of " +
                  std::to_string(options_.max_trials) + " per task");
  }
  try {
    target::Target::parse(s.target);
  } catch (const std::exception& e) {
    throw invalid("SubmitModel: unknown target '" + s.target + "': " + e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tracker_.devices().counts().count(s.device_key)) {
      std::string known;
      for (const auto& [key, n] : tracker_.devices().counts()) known += (known.empty() ? "" : ", ") + key;
      throw FarmError(FarmError::Code::kNotFound,
                      "SubmitModel: no device of key '" + s.device_key + "' is registered (" +
                          (known.empty() ? std::string("none is") : "known keys: " + known) + ")");
    }
  }
  // The model must import: a bad file is the submitter's error, not a failed job later.
  const std::string tmp = (fs::path(options_.state_dir) / "models" /
                           ("upload-" + random_instance() + ".onnx")).string();
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(s.model.data(), static_cast<std::streamsize>(s.model.size()));
    KILN_USER_CHECK(out.good()) << "kilnd: cannot write '" << tmp << "'";
  }
  try {
    graph::import_onnx(tmp);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw invalid(std::string("SubmitModel: the model does not import: ") + e.what());
  }
  JobRecord j;
  j.owner = s.owner;
  j.model_name = s.name;
  j.target = s.target;
  j.device_key = s.device_key;
  j.trials = s.trials;
  j.priority = s.priority;
  const JobId id = store_.create(j);
  fs::rename(tmp, model_path(id));
  std::lock_guard<std::mutex> lock(mu_);
  job_versions_[id] = 1;
  runnable_.push_back(id);
  add_event_locked("job_state", "job " + std::to_string(id) + " (" + s.name + ") submitted by " +
                             (s.owner.empty() ? "anonymous" : s.owner));
  jobs_cv_.notify_all();
  refresh_gauges_locked();
  return id;
}

JobRecord Farm::job(JobId id) const {
  std::optional<JobRecord> j = store_.get(id);
  if (!j) throw FarmError(FarmError::Code::kNotFound, "no job " + std::to_string(id));
  return *j;
}

std::vector<JobRecord> Farm::jobs() const { return store_.list(); }

JobRecord Farm::cancel(JobId id, const std::string& reason) {
  const JobRecord j = job(id);
  if (tracker::is_final(j.state)) {
    throw FarmError(FarmError::Code::kFailedPrecondition,
                    "job " + std::to_string(id) + " is already " + tracker::job_state_name(j.state));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const JobRecord now =
      store_.transition(id, JobState::kCancelled, reason.empty() ? "cancelled by its owner" : reason);
  cancelled_.insert(id);
  tracker_.queue().cancel_job(id);
  builds_.cancel_job(id);
  for (auto& [bid, ref] : build_slots_)
    if (ref.batch->job == id) ref.batch->cv.notify_all();
  for (auto& [rid, ref] : measure_slots_)
    if (ref.batch->job == id) ref.batch->cv.notify_all();
  add_event_locked("job_state", "job " + std::to_string(id) + " cancelled");
  bump_job_locked(id);
  refresh_gauges_locked();
  return now;
}

uint64_t Farm::wait_job(JobId id, uint64_t seen, tracker::Duration wait) {
  job(id);  // kNotFound for an unknown job
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!stopping_ && job_versions_[id] == seen) {
    if (jobs_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  return job_versions_[id];
}

void Farm::bump_job_locked(JobId id) {
  ++job_versions_[id];
  jobs_cv_.notify_all();
}

JobRecord Farm::update_job(JobId id, const std::function<void(JobRecord&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord j = store_.update_progress(id, change);
  bump_job_locked(id);
  return j;
}

JobRecord Farm::transition_job(JobId id, JobState to, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord j = store_.transition(id, to, error);
  add_event_locked("job_state", "job " + std::to_string(id) + " " + tracker::job_state_name(to) +
                             (error.empty() ? "" : ": " + error));
  bump_job_locked(id);
  refresh_gauges_locked();
  return j;
}

bool Farm::job_stopped_locked(JobId id) const { return stopping_ || cancelled_.count(id) > 0; }

// --- the tuning of jobs -------------------------------------------------------------------

std::vector<autotune::MeasureRecord> Farm::measure_batch(JobId job, const TaskWire& task,
                                                         const std::vector<autotune::Candidate>& cands,
                                                         uint64_t seed) {
  Batch batch;
  batch.job = job;
  batch.slots.resize(cands.size());
  std::unique_lock<std::mutex> lock(mu_);
  // Whatever happens, no slot map may keep pointing at this batch once it is gone.
  struct Cleanup {
    Farm& f;
    Batch& b;
    ~Cleanup() {
      for (auto* m : {&f.build_slots_, &f.measure_slots_})
        std::erase_if(*m, [&](const auto& kv) { return kv.second.batch == &b; });
    }
  } cleanup{*this, batch};
  if (job_stopped_locked(job)) throw JobStopped{};
  const JobRecord rec = store_.get(job).value();

  // 1. Builds, on the workers.
  for (size_t i = 0; i < cands.size(); ++i) {
    const uint64_t id = builds_.enqueue({job, task.task_key, cands[i].config_index, task.target});
    build_slots_[id] = {&batch, i};
    build_templates_[id] = task.template_name;
  }
  builds_cv_.notify_all();
  refresh_gauges_locked();
  auto all = [&](auto has) {
    return std::all_of(batch.slots.begin(), batch.slots.end(), has);
  };
  while (!all([](const Batch::Slot& s) { return s.artifact.has_value(); })) {
    if (job_stopped_locked(job)) throw JobStopped{};
    batch.cv.wait_for(lock, std::chrono::milliseconds(500));
  }

  // 2. Measurements of what built, on devices of the job's key; build failures are records now.
  std::vector<autotune::MeasureRecord> out(cands.size());
  std::vector<size_t> failed_builds;
  std::vector<bool> sent(cands.size(), false);  // to a device (its artifact moved into the request)
  size_t measuring = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    Batch::Slot& slot = batch.slots[i];
    v1::Artifact& art = *slot.artifact;
    if (art.error() != v1::ERROR_KIND_NONE) {
      failed_builds.push_back(i);
      continue;
    }
    v1::MeasureRequest w;
    w.set_job_id(job);
    w.mutable_task()->set_task_key(task.task_key);
    w.mutable_task()->set_target(task.target);
    w.mutable_task()->set_template_name(task.template_name);
    w.mutable_config()->set_index(cands[i].config_index);
    w.mutable_config()->set_text(cands[i].config);
    w.set_device_key(rec.device_key);
    *w.mutable_artifact() = std::move(art);
    slot.artifact->Clear();
    v1::MeasureOptions* o = w.mutable_options();
    o->set_number(1);
    o->set_repeat(options_.repeat);
    o->set_min_repeat_ms(options_.min_repeat_ms);
    o->set_run_timeout_ms(options_.run_timeout_ms);
    o->set_threads(options_.threads);
    w.set_reference(task.reference_npy);
    for (const v1::TensorSpec& t : task.inputs) *w.add_inputs() = t;
    *w.mutable_output() = task.output;
    w.set_input_seed(task.input_seed);
    w.set_rtol(task.rtol);
    w.set_atol(task.atol);
    tracker::MeasureSpec spec;
    spec.job_id = job;
    spec.task_key = task.task_key;
    spec.config_index = cands[i].config_index;
    spec.target = task.target;
    spec.device_key = rec.device_key;
    spec.payload = w.SerializeAsString();
    spec.config_text = cands[i].config;
    spec.search_seed = seed;
    spec.flops = task.flops;
    measure_slots_[tracker_.queue().enqueue(std::move(spec))] = {&batch, i};
    sent[i] = true;
    ++measuring;
  }
  feed_key_locked(rec.device_key, measuring);
  refresh_gauges_locked();
  lock.unlock();
  for (size_t i : failed_builds) {
    const v1::Artifact& art = *batch.slots[i].artifact;
    autotune::MeasureRecord& r = out[i];
    r.target = task.target;
    r.device = "worker";
    r.task_key = task.task_key;
    r.config_index = cands[i].config_index;
    r.config = cands[i].config;
    r.error = from_wire(art.error()).value_or(autotune::ErrorKind::kCompileError);
    r.error_msg = art.error_msg();
    r.timestamp_ms = clock_.unix_ms();
    r.search_seed = seed;
    log_.append(r);
    metrics_.record_appended();
  }
  lock.lock();
  while (true) {
    bool done = true;
    for (size_t i = 0; i < cands.size(); ++i) {
      const Batch::Slot& s = batch.slots[i];
      if (sent[i] && !s.record && !s.given_up && s.failure.empty()) done = false;
    }
    if (done) break;
    if (job_stopped_locked(job)) throw JobStopped{};
    batch.cv.wait_for(lock, std::chrono::milliseconds(500));
  }
  lock.unlock();
  for (size_t i = 0; i < cands.size(); ++i) {
    Batch::Slot& s = batch.slots[i];
    KILN_USER_CHECK(s.failure.empty()) << "job " << job << ": " << s.failure;
    if (s.record) {
      out[i] = *s.record;
    } else if (s.given_up) {
      if (s.given_up->kind == tracker::GiveUpKind::kQueueTimeout) {
        KILN_USER_ERROR() << "job " << job << ": no device of key '" << rec.device_key
                          << "' took a measure request in time (" << s.given_up->reason << ")";
      }
      // Lost devices on every attempt: the config may be what kills them; it stays measured, as
      // an error, so that the search moves on.
      autotune::MeasureRecord& r = out[i];
      r.target = task.target;
      r.device = rec.device_key;
      r.task_key = task.task_key;
      r.config_index = cands[i].config_index;
      r.config = cands[i].config;
      r.error = autotune::ErrorKind::kRuntimeError;
      r.error_msg = "device lost on every attempt: " + s.given_up->reason;
      r.timestamp_ms = clock_.unix_ms();
      r.search_seed = seed;
      log_.append(r);
      metrics_.record_appended();
    }
  }
  return out;
}

void Farm::give_up_locked(const tracker::GiveUp& g) {
  metrics_.give_up(g.kind);
  add_event_locked("retry", "request " + std::to_string(g.request.id) + " of job " +
                         std::to_string(g.request.job_id) + " given up: " + g.reason);
  if (auto it = measure_slots_.find(g.request.id); it != measure_slots_.end()) {
    it->second.batch->slots[it->second.index].given_up = g;
    it->second.batch->cv.notify_all();
    measure_slots_.erase(it);
  }
}

void Farm::tick_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t ticks = 0;
  while (!stopping_) {
    jobs_cv_.wait_for(lock, options_.tick);
    if (stopping_) break;
    const tracker::Maintenance m = tracker_.tick();
    for (const tracker::DroppedDevice& gone : m.dropped) {
      add_event_locked("device_lost", "device " + std::to_string(gone.id) + " (key '" + gone.key +
                                   "') missed its heartbeats; " +
                                   std::to_string(gone.in_flight.size()) + " request(s) re-queued");
      if (auto sink = sinks_.find(gone.id); sink != sinks_.end()) {
        sink->second->close(false, "device " + std::to_string(gone.id) +
                                       " missed its heartbeats: register again");
      }
      forget_device_locked(gone.id, gone.key);
      feed_key_locked(gone.key, gone.in_flight.size());
    }
    for (const tracker::GiveUp& g : m.given_up) give_up_locked(g);
    for (const tracker::BuildRequest& b : builds_.expire()) {
      // Handed out twice without an answer: a compile timeout.
      metrics_.observe_build(0, autotune::ErrorKind::kCompileTimeout);
      if (auto it = build_slots_.find(b.id); it != build_slots_.end()) {
        v1::Artifact a;
        a.set_error(v1::ERROR_KIND_COMPILE_TIMEOUT);
        a.set_error_msg("no worker finished the build in time (" + std::to_string(b.attempts) +
                        " hand-outs)");
        it->second.batch->slots[it->second.index].artifact = std::move(a);
        it->second.batch->cv.notify_all();
        build_slots_.erase(it);
      }
    }
    refresh_gauges_locked();
    if (++ticks % 5 == 1) {
      std::map<JobState, size_t> counts;
      for (const JobRecord& j : store_.list()) ++counts[j.state];
      metrics_.set_job_counts(counts);
    }
  }
}

void Farm::refresh_gauges_locked() {
  metrics_.set_device_counts(tracker_.devices().counts());
  std::map<std::string, size_t> depths;
  for (const auto& [key, counts] : tracker_.devices().counts())
    depths[key] = tracker_.queue().pending_for_key(key);
  metrics_.set_queue_depths(depths);
  metrics_.set_build_queue_depth(static_cast<double>(builds_.pending()));
}

}  // namespace kiln::server
