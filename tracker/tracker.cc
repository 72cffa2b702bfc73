#include "tracker/tracker.h"

#include <cmath>

#include "base/error.h"

namespace kiln::tracker {

records::MeasureRecord make_record(const MeasureRequest& request, const Device& device,
                                   const MeasureOutcome& outcome, int64_t timestamp_ms) {
  records::MeasureRecord r;
  r.target = request.target;
  auto fp = device.capabilities.find("fingerprint");
  r.device =
      fp != device.capabilities.end() ? fp->second : device.key + "#" + std::to_string(device.id);
  r.task_key = request.task_key;
  r.emulated = device.emulated;
  r.config_index = request.config_index;
  r.config = request.config_text;
  r.search_seed = request.search_seed;
  if (outcome.error == ErrorKind::kNone) r.costs_s = outcome.costs_s;
  r.error = outcome.error;
  r.error_msg = outcome.error_msg;
  if (outcome.error == ErrorKind::kNone) {
    r.contended = outcome.contended;
    r.gflops = outcome.gflops;
    if (r.gflops == 0 && request.flops > 0 && !r.costs_s.empty() && r.cost() > 0) {
      const double gflops = request.flops / r.cost() / 1e9;
      if (std::isfinite(gflops)) r.gflops = gflops;  // (a cost of 1e-320 s overflows)
    }
  }
  r.timestamp_ms = timestamp_ms;
  return r;
}

Tracker::Tracker(const Clock& clock, TrackerOptions options)
    : clock_(clock),
      options_(options),
      devices_(clock, options.registry),
      queue_(clock, options.queue) {}

std::optional<MeasureRequest> Tracker::dispatch(DeviceId device) {
  if (!devices_.can_take_work(device)) return std::nullopt;
  const Device* d = devices_.find(device);
  auto req = queue_.next_for(device, d->key);
  if (req) devices_.assign(device, req->id);
  return req;
}

std::optional<Report> Tracker::report(RequestId request, DeviceId device,
                                      const MeasureOutcome& outcome) {
  const MeasureRequest* pending = queue_.find(request);
  if (!pending || pending->device != device) return std::nullopt;
  const Device* d = devices_.find(device);
  if (!d) return std::nullopt;  // dropped; tick() re-queues its requests
  Report rep;
  rep.record = make_record(*pending, *d, outcome, clock_.unix_ms());
  rep.completion = *queue_.complete(request, device);
  devices_.release(device, request);
  rep.quarantined = devices_.record_outcome(device, outcome.error);
  return rep;
}

std::vector<GiveUp> Tracker::quarantine(DeviceId device, const std::string& reason) {
  const Device* d = devices_.find(device);
  if (!d) return {};
  const std::vector<RequestId> held(d->in_flight.begin(), d->in_flight.end());
  devices_.quarantine(device, reason);
  for (RequestId r : held) devices_.release(device, r);
  return queue_.requeue(held, "device " + std::to_string(device) + " was quarantined: " + reason);
}

std::vector<GiveUp> Tracker::remove_device(DeviceId device) {
  auto gone = devices_.remove(device);
  if (!gone) return {};
  return queue_.requeue(gone->in_flight,
                        "device " + std::to_string(device) + " (key '" + gone->key + "') left");
}

Maintenance Tracker::tick() {
  Maintenance m;
  m.dropped = devices_.expire();
  for (const DroppedDevice& gone : m.dropped) {
    auto lost = queue_.requeue(gone.in_flight, "device " + std::to_string(gone.id) + " (key '" +
                                                   gone.key + "') missed its heartbeats");
    m.requeued += gone.in_flight.size() - lost.size();
    for (auto& g : lost) m.given_up.push_back(std::move(g));
  }
  for (auto& g : queue_.expire_queued(options_.max_queue_wait)) m.given_up.push_back(std::move(g));
  return m;
}

}  // namespace kiln::tracker
