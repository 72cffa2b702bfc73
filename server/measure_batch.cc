// A job driver's batch: the configs of one task are built on the compiler workers (each build
// carries the task's template, workload and target: all a worker needs), what built is measured
// on devices of the job's key, and every record is durable in the log before the batch answers.
// A config the log already holds is answered from it, so no config is ever measured twice.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "deploy/runtime/dtype.h"
#include "server/farm_internal.h"
#include "server/wire.h"

namespace kiln::server {
namespace {

using tracker::JobId;
using tracker::JobRecord;

constexpr int kMaxConfigs = 4096;  // per batch
constexpr int kMaxTensorRank = 8;
constexpr int64_t kMaxTensorElements = int64_t{1} << 31;
constexpr size_t kMaxInputs = 64;

/// kInvalidArgument unless `spec` names a known dtype and a shape of positive dims, and a value
/// range, when it has one, has both ends, low <= high.
void check_spec(const v1::TensorSpec& spec, const std::string& what) {
  try {
    runtime::parse_dtype(spec.dtype());
  } catch (const Error&) {
    throw invalid_argument("MeasureBatch: " + what + " has an unknown dtype '" + spec.dtype() +
                           "'");
  }
  if (spec.shape_size() > kMaxTensorRank) {
    throw invalid_argument("MeasureBatch: " + what + " has rank " +
                           std::to_string(spec.shape_size()) + ", over " +
                           std::to_string(kMaxTensorRank));
  }
  int64_t elements = 1;
  for (int64_t d : spec.shape()) {
    if (d <= 0 || d > kMaxTensorElements || elements > kMaxTensorElements / d) {
      throw invalid_argument("MeasureBatch: " + what + " has dimension " + std::to_string(d) +
                             " (dimensions must be positive, at most 2^31 elements in all)");
    }
    elements *= d;
  }
  if (spec.has_low() != spec.has_high() || (spec.has_low() && spec.low() > spec.high())) {
    throw invalid_argument("MeasureBatch: " + what + " has a value range [" +
                           (spec.has_low() ? std::to_string(spec.low()) : "?") + ", " +
                           (spec.has_high() ? std::to_string(spec.high()) : "?") +
                           "]: give both ends, low <= high");
  }
}

}  // namespace

std::vector<records::MeasureRecord> Farm::measure_batch(const v1::MeasureBatchRequest& req,
                                                        const std::function<bool()>& abandoned) {
  // The request is checked before anything is queued: what reaches a worker or a device is sane.
  const JobRecord rec = driver_job(req.auth());
  const v1::TaskRef& task = req.task();
  if (std::find(rec.task_keys.begin(), rec.task_keys.end(), task.task_key()) ==
      rec.task_keys.end()) {
    throw invalid_argument("MeasureBatch: task '" + task.task_key() + "' is not one of job " +
                           std::to_string(rec.id) + "'s tasks");
  }
  if (task.target() != rec.target) {
    throw invalid_argument("MeasureBatch: target '" + task.target() + "' is not job " +
                           std::to_string(rec.id) + "'s target '" + rec.target + "'");
  }
  if (task.template_name().empty() || task.workload().empty())
    throw invalid_argument("MeasureBatch: the task's template and workload are required");
  if (req.configs_size() == 0 || req.configs_size() > kMaxConfigs) {
    throw invalid_argument("MeasureBatch: " + std::to_string(req.configs_size()) +
                           " configs; a batch has 1 to " + std::to_string(kMaxConfigs));
  }
  if (req.inputs_size() == 0 || static_cast<size_t>(req.inputs_size()) > kMaxInputs)
    throw invalid_argument("MeasureBatch: the task needs 1 to 64 inputs");
  for (int i = 0; i < req.inputs_size(); ++i)
    check_spec(req.inputs(i), "input " + std::to_string(i));
  check_spec(req.output(), "the output");
  if (!(req.rtol() >= 0) || !(req.atol() >= 0))
    throw invalid_argument("MeasureBatch: rtol and atol must be non-negative");
  if (!(std::isfinite(req.flops()) && req.flops() >= 0))
    throw invalid_argument("MeasureBatch: flops must be finite and non-negative");
  {
    std::unordered_set<uint64_t> seen;
    for (const v1::Config& c : req.configs()) {
      if (!seen.insert(c.index()).second) {
        throw invalid_argument("MeasureBatch: config " + std::to_string(c.index()) +
                               " appears twice in the batch");
      }
    }
  }
  const size_t n = static_cast<size_t>(req.configs_size());
  const JobId job = rec.id;
  const records::Lane lane = job_lane(rec);
  std::vector<records::MeasureRecord> out(n);
  std::vector<bool> answered(n, false);

  // Configs the log already holds (a driver that resumed): their record, never a new one.
  {
    std::unordered_map<uint64_t, records::MeasureRecord> known;
    bool any = false;
    for (const v1::Config& c : req.configs())
      any = any || log_.measured(task.task_key(), rec.target, c.index(), lane);
    if (any) {
      for (records::MeasureRecord& r : log_.records(task.task_key(), rec.target, lane))
        known.emplace(r.config_index, std::move(r));
    }
    for (size_t i = 0; i < n; ++i) {
      if (auto it = known.find(req.configs(static_cast<int>(i)).index()); it != known.end()) {
        out[i] = it->second;
        answered[i] = true;
      }
    }
  }

  Batch batch;
  batch.job = job;
  batch.task = task;
  batch.slots.resize(n);
  std::unique_lock<std::mutex> lock(mu_);
  // Whatever happens, no slot map may keep pointing at this batch once it is gone, and the
  // driver counts as waiting for the farm (not idle) meanwhile.
  ++session_locked(req.auth()).waiting;
  struct Cleanup {
    Farm& f;
    Batch& b;
    const v1::DriverAuth& auth;
    std::unique_lock<std::mutex>& lock;
    ~Cleanup() {
      if (!lock.owns_lock()) lock.lock();
      for (auto* m : {&f.build_slots_, &f.measure_slots_})
        std::erase_if(*m, [&](const auto& kv) { return kv.second.batch == &b; });
      if (auto it = f.drivers_.find(b.job);
          it != f.drivers_.end() && it->second.secret == auth.secret()) {
        --it->second.waiting;
        it->second.last_seen = f.clock_.now();
      }
    }
  } cleanup{*this, batch, req.auth(), lock};
  // Throws when the batch cannot go on; the job's queued work is withdrawn when its driver left.
  auto check_going = [&] {
    if (stopping_) throw FarmError(FarmError::Code::kUnavailable, "kilnd is stopping");
    if (cancelled_.count(job))
      throw FarmError(FarmError::Code::kCancelled, "job " + std::to_string(job) + " was cancelled");
    if (abandoned && abandoned()) {
      tracker_.queue().cancel_job(job);
      builds_.cancel_job(job);
      throw FarmError(FarmError::Code::kCancelled,
                      "the driver of job " + std::to_string(job) + " went away");
    }
  };
  check_going();

  // 1. Builds, on the workers.
  bool building = false;
  for (size_t i = 0; i < n; ++i) {
    if (answered[i]) continue;
    const uint64_t id = builds_.enqueue(
        {job, task.task_key(), req.configs(static_cast<int>(i)).index(), rec.target});
    build_slots_[id] = {&batch, i};
    building = true;
  }
  if (building) {
    builds_cv_.notify_all();
    refresh_gauges_locked();
  }
  auto built = [&] {
    for (size_t i = 0; i < n; ++i)
      if (!answered[i] && !batch.slots[i].artifact) return false;
    return true;
  };
  while (!built()) {
    check_going();
    batch.cv.wait_for(lock, std::chrono::milliseconds(200));
  }

  // 2. Measurements of what built, on devices of the job's key; build failures are records now.
  std::vector<size_t> failed_builds;
  std::vector<bool> sent(n, false);  // to a device (its artifact moved into the request)
  size_t measuring = 0;
  for (size_t i = 0; i < n; ++i) {
    if (answered[i]) continue;
    const v1::Config& cfg = req.configs(static_cast<int>(i));
    Batch::Slot& slot = batch.slots[i];
    v1::Artifact& art = *slot.artifact;
    if (art.error() != v1::ERROR_KIND_NONE) {
      failed_builds.push_back(i);
      continue;
    }
    v1::MeasureRequest w;
    w.set_job_id(job);
    *w.mutable_task() = task;
    *w.mutable_config() = cfg;
    w.set_device_key(rec.device_key);
    *w.mutable_artifact() = std::move(art);
    slot.artifact->Clear();
    v1::MeasureOptions* o = w.mutable_options();
    o->set_number(1);
    o->set_repeat(options_.repeat);
    o->set_min_repeat_ms(options_.min_repeat_ms);
    o->set_run_timeout_ms(options_.run_timeout_ms);
    o->set_threads(options_.threads);
    w.set_reference(req.reference());
    *w.mutable_inputs() = req.inputs();
    *w.mutable_output() = req.output();
    w.set_input_seed(req.input_seed());
    w.set_rtol(req.rtol());
    w.set_atol(req.atol());
    tracker::MeasureSpec spec;
    spec.job_id = job;
    spec.task_key = task.task_key();
    spec.config_index = cfg.index();
    spec.target = rec.target;
    spec.device_key = rec.device_key;
    spec.payload = w.SerializeAsString();
    spec.config_text = cfg.text();
    spec.search_seed = req.search_seed();
    spec.flops = req.flops();
    measure_slots_[tracker_.queue().enqueue(std::move(spec))] = {&batch, i};
    sent[i] = true;
    ++measuring;
  }
  feed_key_locked(rec.device_key, measuring);
  refresh_gauges_locked();
  lock.unlock();
  for (size_t i : failed_builds) {
    const v1::Artifact& art = *batch.slots[i].artifact;
    records::MeasureRecord& r = out[i];
    r.target = rec.target;
    r.device = "worker";
    r.task_key = task.task_key();
    r.config_index = req.configs(static_cast<int>(i)).index();
    r.config = req.configs(static_cast<int>(i)).text();
    r.error = from_wire(art.error()).value_or(ErrorKind::kCompileError);
    r.error_msg = art.error_msg();
    r.timestamp_ms = clock_.unix_ms();
    r.search_seed = req.search_seed();
    r.emulated = lane == records::Lane::kEmulated;
    log_.append(r);
    metrics_.record_appended();
  }
  lock.lock();
  while (true) {
    bool done = true;
    for (size_t i = 0; i < n; ++i) {
      const Batch::Slot& s = batch.slots[i];
      if (sent[i] && !s.record && !s.given_up && s.failure.empty()) done = false;
    }
    if (done) break;
    check_going();
    batch.cv.wait_for(lock, std::chrono::milliseconds(200));
  }
  lock.unlock();
  uint64_t failed = failed_builds.size();
  for (size_t i = 0; i < n; ++i) {
    Batch::Slot& s = batch.slots[i];
    if (!s.failure.empty()) KILN_SYSTEM_ERROR() << "job " << job << ": " << s.failure;
    if (s.record) {
      out[i] = *s.record;
      failed += s.record->error != ErrorKind::kNone;
    } else if (s.given_up) {
      if (s.given_up->kind == tracker::GiveUpKind::kQueueTimeout) {
        throw FarmError(FarmError::Code::kFailedPrecondition,
                        "job " + std::to_string(job) + ": no device of key '" + rec.device_key +
                            "' took a measure request in time (" + s.given_up->reason + ")");
      }
      // Lost devices on every attempt: the config may be what kills them; it stays measured, as
      // an error, so that the search moves on.
      records::MeasureRecord& r = out[i];
      r.target = rec.target;
      r.device = rec.device_key;
      r.task_key = task.task_key();
      r.config_index = req.configs(static_cast<int>(i)).index();
      r.config = req.configs(static_cast<int>(i)).text();
      r.error = ErrorKind::kRuntimeError;
      r.error_msg = "device lost on every attempt: " + s.given_up->reason;
      r.timestamp_ms = clock_.unix_ms();
      r.search_seed = req.search_seed();
      r.emulated = lane == records::Lane::kEmulated;
      log_.append(r);
      metrics_.record_appended();
      ++failed;
    }
  }
  if (failed > 0) update_job(job, [&](JobRecord& j) { j.trials_failed += failed; });
  return out;
}

}  // namespace kiln::server
