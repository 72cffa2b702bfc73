// The devices of the farm: who is there (key, target, capabilities), who is alive (leases renewed
// by heartbeats), what each one is running, and who is quarantined.
//
//   DeviceRegistry reg(clock, {.lease = std::chrono::seconds(10), .quarantine_after = 3});
//   DeviceId d = reg.register_device("rk3399", "llvm -mtriple=aarch64-linux-gnu", {});
//   reg.heartbeat(d);                        // renews the lease; false when already dropped
//   for (auto& gone : reg.expire()) queue.requeue(gone.in_flight, "device lost");
//   reg.record_outcome(d, ErrorKind::kCrash);  // the Nth crash/timeout in a row quarantines
//
// Not thread-safe: the server holds one lock around the tracker's state.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "records/record_log.h"
#include "tracker/clock.h"
#include "tracker/ids.h"

namespace kiln::tracker {

/// What a device is doing, for matching and metrics.
enum class DeviceState {
  kOnline,       ///< registered, alive, with room for work
  kBusy,         ///< running as many requests as its capacity allows
  kQuarantined,  ///< gets no work until released (its runs kept crashing or timing out)
};

/// "online", "busy", "quarantined".
const char* device_state_name(DeviceState s);

struct RegistryOptions {
  /// A device that sends no heartbeat for this long is dropped.
  Duration lease = std::chrono::seconds(10);
  /// Consecutive crash / run-timeout results that quarantine a device (0: never).
  int quarantine_after = 3;
  /// Requests one device runs at once.
  int capacity = 1;
  /// Results for requests a device was never given that quarantine it (0: never).
  int quarantine_after_strays = 3;
  /// How far back a device's clock reading may be from its latest before the clock counts as
  /// running backwards: a heartbeat and a result are sent concurrently, and a result is retried
  /// for seconds with the reading of its first try, so readings arrive out of order.
  Duration clock_slack = std::chrono::seconds(30);
};

/// How many of its last requests a device remembers (Device::recent_requests).
inline constexpr size_t kRecentRequests = 256;

struct Device {
  DeviceId id = 0;
  std::string key;     ///< requests are matched by it ("rk3399", "titanx")
  std::string target;  ///< the target string it runs
  std::map<std::string, std::string> capabilities;  ///< limits and fingerprint, as reported
  TimePoint registered_at{};
  TimePoint lease_until{};       ///< dropped by expire() once now() passes this
  int consecutive_failures = 0;  ///< crash / run-timeout results in a row
  bool quarantined = false;
  std::string quarantine_reason;
  std::set<RequestId> in_flight;  ///< requests dispatched to it and not yet reported
  uint64_t completed = 0;         ///< results reported (errors included)
  /// Runs under emulation (an agent under qemu-user): its records go to the emulated lane.
  bool emulated = false;
  /// The latest reading of the device's monotonic clock (0: none yet).
  uint64_t clock_ms = 0;
  /// The last requests given to it (ids, oldest first; at most kRecentRequests): a result for a
  /// request outside them was never given to this device.
  std::deque<RequestId> recent_requests;
  int stray_results = 0;  ///< results for requests it was never given

  DeviceState state(int capacity) const;
};

/// A dropped device and the requests it held (to re-queue elsewhere).
struct DroppedDevice {
  DeviceId id = 0;
  std::string key;
  std::vector<RequestId> in_flight;
};

/// Devices of one key by state.
struct KeyCounts {
  size_t online = 0;
  size_t busy = 0;
  size_t quarantined = 0;
  bool operator==(const KeyCounts&) const = default;
};

class DeviceRegistry {
 public:
  explicit DeviceRegistry(const Clock& clock, RegistryOptions options = {});

  /// Adds a device with a fresh lease and returns its id (1, 2, ...; never reused). kiln::Error
  /// when key or target is empty, or when the key's registered devices differ from it in
  /// `emulated`: one key is measured either on real devices or under emulation, never both, so
  /// that a job's records all come from one lane (records/record_log.h, Lane).
  DeviceId register_device(const std::string& key, const std::string& target,
                           std::map<std::string, std::string> capabilities = {},
                           bool emulated = false);
  /// Whether the registered devices of `key` run under emulation (false when there are none).
  bool key_emulated(const std::string& key) const;
  /// Renews the lease of `id`. False when the device is unknown (dropped: it must register
  /// again, and its old in-flight work has been re-queued).
  bool heartbeat(DeviceId id);
  /// Drops every device whose lease has run out; returns them with the requests they held.
  std::vector<DroppedDevice> expire();
  /// Drops `id` now (an agent leaving cleanly); nullopt when unknown.
  std::optional<DroppedDevice> remove(DeviceId id);

  /// Whether `id` is known, not quarantined and below its capacity.
  bool can_take_work(DeviceId id) const;
  /// Records that `request` runs on `id`. InternalError when `id` is unknown.
  void assign(DeviceId id, RequestId request);
  /// Records that `request` finished on `id` (no-op when either is unknown).
  void release(DeviceId id, RequestId request);

  /// Counts one result of `id`: crash and run timeout add to its failures in a row, any other
  /// result resets them. Returns true when this result quarantined the device.
  bool record_outcome(DeviceId id, ErrorKind error);
  /// Notes a reading of the device's monotonic clock (0: none, ignored). Returns a reason when
  /// the clock ran backwards, by more than clock_slack, from the latest reading: the caller
  /// quarantines the device.
  std::optional<std::string> observe_clock(DeviceId id, uint64_t clock_ms);
  /// Whether `request` is one of the last requests given to `id`.
  bool was_given(DeviceId id, RequestId request) const;
  /// Counts a result `id` sent for `request`, which it was never given. Returns a reason once
  /// such results reach quarantine_after_strays: the caller quarantines the device.
  std::optional<std::string> record_stray_result(DeviceId id, RequestId request);
  /// Takes `id` out of matching with `reason` (kiln::Error when unknown).
  void quarantine(DeviceId id, const std::string& reason);
  /// Puts a quarantined device back (an operator's decision); kiln::Error when unknown.
  void release_quarantine(DeviceId id);

  /// The device, or nullptr when unknown. Valid until the next call that adds or drops devices.
  const Device* find(DeviceId id) const;
  /// Every device, by id.
  std::vector<Device> list() const;
  /// Devices per key by state (for metrics and the dashboard).
  std::map<std::string, KeyCounts> counts() const;
  size_t size() const { return devices_.size(); }
  const RegistryOptions& options() const { return options_; }

 private:
  Device& get(DeviceId id, const char* what);

  const Clock& clock_;
  RegistryOptions options_;
  DeviceId next_id_ = 1;
  std::unordered_map<DeviceId, Device> devices_;
};

}  // namespace kiln::tracker
