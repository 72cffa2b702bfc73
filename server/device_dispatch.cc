// The Farm's device dispatch: agents register and heartbeat, attach their GetWork streams, and
// report results; requests are pushed to a device the moment it can take one, and a result's
// record is appended asynchronously (the log's group commit) before it is acknowledged.
#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "compiler/target/target.h"
#include "server/farm_internal.h"
#include "server/wire.h"

namespace kiln::server {

using tracker::DeviceId;

Farm::Registration Farm::register_device(const v1::RegisterDeviceRequest& r) {
  if (r.key().empty()) throw invalid_argument("RegisterDevice: the device key is empty");
  if (r.target().empty()) throw invalid_argument("RegisterDevice: the target is empty");
  target::Target t;
  try {
    t = target::Target::parse(r.target());
  } catch (const std::exception& e) {
    throw invalid_argument("RegisterDevice: unknown target '" + r.target() + "': " + e.what());
  }
  const v1::DeviceCapabilities& c = r.capabilities();
  // An llvm target without -mtriple means the farm's own architecture: a board of another one
  // would be sent kernels it cannot load.
  if (!c.arch().empty() && t.kind == TargetKind::kCpu && c.arch() != t.arch_name()) {
    throw invalid_argument("RegisterDevice: the device runs " + c.arch() + " but target '" +
                           r.target() + "' builds " + t.arch_name() + " code" +
                           (t.triple.empty() ? "; give -mtriple=" + c.arch() + "-linux-gnu" : ""));
  }
  std::map<std::string, std::string> caps;
  if (!c.cpu_model().empty()) caps["cpu_model"] = c.cpu_model();
  if (c.cores()) caps["cores"] = std::to_string(c.cores());
  if (c.memory_bytes()) caps["memory_bytes"] = std::to_string(c.memory_bytes());
  if (!c.driver().empty()) caps["driver"] = c.driver();
  if (!c.board().empty()) caps["board"] = c.board();
  if (!c.arch().empty()) caps["arch"] = c.arch();
  for (const auto& [k, v] : c.extra()) caps["extra." + k] = v;
  if (!r.fingerprint().empty()) caps["fingerprint"] = r.fingerprint();
  std::lock_guard<std::mutex> lock(mu_);
  DeviceId id = 0;
  try {
    id = tracker_.devices().register_device(r.key(), r.target(), caps, c.emulated());
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
    throw invalid_argument(msg);
  }
  add_event_locked("device_joined", "device " + std::to_string(id) + " (key '" + r.key() + "', " +
                                        (r.fingerprint().empty() ? r.target() : r.fingerprint()) +
                                        (c.emulated() ? ", emulated" : "") + ") joined");
  refresh_gauges_locked();
  return {id, static_cast<uint32_t>(tracker::to_ms(options_.tracker.registry.lease))};
}

Farm::Lease Farm::heartbeat(DeviceId id, uint64_t device_clock_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Lease l;
  l.lease_ms = static_cast<uint32_t>(tracker::to_ms(options_.tracker.registry.lease));
  l.known = tracker_.devices().heartbeat(id);
  if (auto why = tracker_.devices().observe_clock(id, device_clock_ms)) quarantine_locked(id, *why);
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
    old->second->close(false,
                       "another work stream of device " + std::to_string(device) + " opened");
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
  add_event_locked("device_lost",
                   "device " + std::to_string(device) + " (key '" + key + "') " + why +
                       (held ? "; " + std::to_string(held) + " request(s) re-queued" : ""));
  feed_key_locked(key, held);
  refresh_gauges_locked();
}

void Farm::report_result(const v1::MeasureResult& r,
                         std::function<void(bool, std::exception_ptr)> done) {
  tracker::MeasureOutcome outcome;
  std::optional<double> bad_cost;
  const std::optional<ErrorKind> kind = from_wire(r.error());
  if (!kind) {
    outcome.error = ErrorKind::kRuntimeError;
    outcome.error_msg = "the device reported error kind " + v1::ErrorKind_Name(r.error()) +
                        (r.error_msg().empty() ? "" : ": " + r.error_msg());
  } else {
    outcome.error = *kind;
    outcome.error_msg = r.error_msg();
    outcome.costs_s.assign(r.costs_s().begin(), r.costs_s().end());
    outcome.contended = r.contended();
    if (outcome.error == ErrorKind::kNone && outcome.costs_s.empty()) {
      outcome.error = ErrorKind::kRuntimeError;
      outcome.error_msg = "the device reported success without costs";
    }
    // The record log keeps finite, non-negative costs only; a device that reports others is
    // not to be trusted (below).
    const auto bad = std::find_if(outcome.costs_s.begin(), outcome.costs_s.end(),
                                  [](double c) { return !(std::isfinite(c) && c >= 0); });
    if (bad != outcome.costs_s.end()) bad_cost = *bad;
  }
  std::unique_lock<std::mutex> lock(mu_);
  const tracker::DeviceId device = r.device_id();
  const tracker::MeasureRequest* pending = tracker_.queue().find(r.request_id());
  if (!pending || pending->device != device) {
    // A stale result (the request was re-queued, cancelled or given up) is refused quietly; a
    // result for a request this device was never given is a board misbehaving.
    if (tracker_.devices().find(device) && !tracker_.devices().was_given(device, r.request_id())) {
      add_event_locked("stray_result",
                       "device " + std::to_string(device) + " sent a result for request " +
                           std::to_string(r.request_id()) + ", which it was never given: refused");
      if (auto why = tracker_.devices().record_stray_result(device, r.request_id()))
        quarantine_locked(device, *why);
    }
    lock.unlock();
    done(false, nullptr);
    return;
  }
  // A board whose clock runs backwards, or whose timer gives negative costs, cannot be trusted
  // with timings: it is quarantined and what it held (this request too) goes to another device.
  std::optional<std::string> distrust =
      tracker_.devices().observe_clock(device, r.device_clock_ms());
  if (!distrust && bad_cost) {
    distrust =
        "it reported a cost of " + std::to_string(*bad_cost) + " s: its timer cannot be trusted";
  }
  if (distrust) {
    quarantine_locked(device, *distrust);
    lock.unlock();
    done(false, nullptr);
    return;
  }
  const std::optional<tracker::Report> rep = tracker_.report(r.request_id(), device, outcome);
  if (!rep) {
    lock.unlock();
    done(false, nullptr);
    return;
  }
  metrics_.observe_measure(std::chrono::duration<double>(rep->completion.run).count(),
                           outcome.error);
  metrics_.observe_queue_wait(std::chrono::duration<double>(rep->completion.queued).count());
  DeviceStats& stats = device_stats_[r.device_id()];
  if (outcome.error != ErrorKind::kNone) ++stats.errors[error_kind_name(outcome.error)];
  stats.recent.push_back(clock_.now());
  while (!stats.recent.empty() && clock_.now() - stats.recent.front() > std::chrono::minutes(1))
    stats.recent.pop_front();
  if (rep->quarantined) {
    const tracker::Device* d = tracker_.devices().find(r.device_id());
    add_event_locked("quarantine",
                     "device " + std::to_string(r.device_id()) + " quarantined: " +
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
        settle_measure_locked(id, std::nullopt,
                              "the record log could not keep the result: " + what);
      } else {
        metrics_.record_appended();
        settle_measure_locked(id, record, "");
      }
    }
    done(!error, error);
  });
}

void Farm::quarantine_locked(DeviceId device, const std::string& reason) {
  const tracker::Device* d = tracker_.devices().find(device);
  if (!d) return;
  const std::string key = d->key;
  const size_t held = d->in_flight.size();
  for (const tracker::GiveUp& g : tracker_.quarantine(device, reason)) give_up_locked(g);
  idle_[key].erase(device);
  add_event_locked("quarantine",
                   "device " + std::to_string(device) + " quarantined: " + reason +
                       (held ? "; " + std::to_string(held) + " request(s) re-queued" : ""));
  feed_key_locked(key, held);
  refresh_gauges_locked();
}

void Farm::settle_measure_locked(tracker::RequestId id,
                                 std::optional<records::MeasureRecord> record,
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
    info.set_registered_ms(clock_.unix_ms() - tracker::to_ms(clock_.now() - d.registered_at));
    v1::DeviceCapabilities* c = info.mutable_capabilities();
    c->set_cpu_model(cap("cpu_model"));
    if (!cap("cores").empty()) c->set_cores(static_cast<uint32_t>(std::stoul(cap("cores"))));
    if (!cap("memory_bytes").empty()) c->set_memory_bytes(std::stoull(cap("memory_bytes")));
    c->set_driver(cap("driver"));
    c->set_board(cap("board"));
    c->set_arch(cap("arch"));
    c->set_emulated(d.emulated);
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

}  // namespace kiln::server
