// The tracker's core in one object: the device registry and the measure queue kept consistent,
// and each result turned into the record the shared log keeps. The gRPC servers (kilnd) call
// this under one lock and append the record (server/farm.cc) outside it, before acknowledging
// the result; it does no networking and no I/O.
//
//   Tracker t(clock, options, &record_log);
//   DeviceId d = t.devices().register_device("rk3399", target, caps);
//   t.queue().enqueue({...});
//   auto req = t.dispatch(d);                       // a request of d's key, or nullopt
//   auto rep = t.report(req->id, d, {.error = ErrorKind::kNone, .costs_s = {1e-3}});
//   log.append(rep->record);                        // then acknowledge
//   auto m = t.tick();                              // expired devices re-queued, stale waits
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "records/record_log.h"
#include "tracker/clock.h"
#include "tracker/device_registry.h"
#include "tracker/measure_queue.h"

namespace kiln::tracker {

struct TrackerOptions {
  RegistryOptions registry;
  QueueOptions queue;
  /// A request waiting longer than this (all attempts) for a device is given up as a queue
  /// timeout; this is apart from the run's own time limit, which starts at dispatch.
  Duration max_queue_wait = std::chrono::minutes(15);
};

/// What a device measured.
struct MeasureOutcome {
  ErrorKind error = ErrorKind::kNone;
  std::vector<double> costs_s;
  std::string error_msg;
  double gflops = 0;
  bool contended = false;  ///< timed while the device's CPU was shared (MeasureRecord::contended)
};

/// The answer to a report.
struct Report {
  Completion completion;
  bool quarantined = false;       ///< this result quarantined the device
  records::MeasureRecord record;  ///< what the record log is to keep of it
};

/// What tick() did.
struct Maintenance {
  std::vector<DroppedDevice> dropped;  ///< devices whose lease ran out
  size_t requeued = 0;                 ///< their requests put back in the queue
  std::vector<GiveUp> given_up;        ///< requests out of attempts or out of queue time
};

/// The record of a finished request. The device field is the device's "fingerprint" capability
/// when it has one, "<key>#<id>" otherwise; gflops is the outcome's, or the request's flops over
/// the record's cost when the outcome has none.
records::MeasureRecord make_record(const MeasureRequest& request, const Device& device,
                                   const MeasureOutcome& outcome, int64_t timestamp_ms);

class Tracker {
 public:
  Tracker(const Clock& clock, TrackerOptions options = {});

  DeviceRegistry& devices() { return devices_; }
  const DeviceRegistry& devices() const { return devices_; }
  MeasureQueue& queue() { return queue_; }
  const MeasureQueue& queue() const { return queue_; }

  /// The next request for `device` (matched by its key), now in flight on it; nullopt when the
  /// device is unknown, quarantined or full, or nothing of its key is pending.
  std::optional<MeasureRequest> dispatch(DeviceId device);
  /// A device's result for a request in flight on it: the request completes, the device is free
  /// again, crashes and run timeouts count toward quarantine, and the record to keep is returned.
  /// nullopt for a stale report (the request is not in flight on that device, e.g. it was
  /// re-queued after the device was dropped).
  std::optional<Report> report(RequestId request, DeviceId device, const MeasureOutcome& outcome);
  /// Quarantines `device` with `reason` (a board that misbehaves: its clock ran backwards, it
  /// reported a negative cost or results it was never asked for) and re-queues what it held, so
  /// another device measures it; the requests given up (out of attempts) are returned. Empty when
  /// the device is unknown.
  std::vector<GiveUp> quarantine(DeviceId device, const std::string& reason);
  /// Drops `device` now (an agent leaving cleanly) and re-queues what it held; the requests
  /// given up (out of attempts) are returned. Empty when the device is unknown.
  std::vector<GiveUp> remove_device(DeviceId device);
  /// Drops devices whose lease ran out and re-queues what they held; gives up requests that
  /// ran out of attempts or waited longer than max_queue_wait.
  Maintenance tick();

 private:
  const Clock& clock_;
  TrackerOptions options_;
  DeviceRegistry devices_;
  MeasureQueue queue_;
};

}  // namespace kiln::tracker
