#include "tracker/device_registry.h"

#include <algorithm>

#include "base/error.h"

namespace kiln::tracker {

const char* device_state_name(DeviceState s) {
  switch (s) {
    case DeviceState::kOnline:
      return "online";
    case DeviceState::kBusy:
      return "busy";
    case DeviceState::kQuarantined:
      return "quarantined";
  }
  KILN_UNREACHABLE();
}

DeviceState Device::state(int capacity) const {
  if (quarantined) return DeviceState::kQuarantined;
  return static_cast<int>(in_flight.size()) >= capacity ? DeviceState::kBusy : DeviceState::kOnline;
}

DeviceRegistry::DeviceRegistry(const Clock& clock, RegistryOptions options)
    : clock_(clock), options_(options) {
  KILN_USER_CHECK(options_.lease.count() > 0) << "device registry: the lease must be positive";
  KILN_USER_CHECK(options_.capacity >= 1)
      << "device registry: capacity must be at least 1, not " << options_.capacity;
  KILN_USER_CHECK(options_.quarantine_after >= 0)
      << "device registry: quarantine_after must not be negative";
}

DeviceId DeviceRegistry::register_device(const std::string& key, const std::string& target,
                                         std::map<std::string, std::string> capabilities,
                                         bool emulated) {
  KILN_USER_CHECK(!key.empty()) << "register device: the device key is empty";
  KILN_USER_CHECK(!target.empty())
      << "register device: the target string of a device with key '" << key << "' is empty";
  for (const auto& [other_id, other] : devices_) {
    if (other.key != key || other.emulated == emulated) continue;
    KILN_USER_ERROR() << "register device: key '" << key << "' is measured "
                      << (other.emulated ? "under emulation" : "on real devices") << " (device "
                      << other_id << "); " << (emulated ? "an emulated agent" : "a real device")
                      << " must register under another key, so that their timings never mix";
  }
  Device d;
  d.emulated = emulated;
  d.id = next_id_++;
  d.key = key;
  d.target = target;
  d.capabilities = std::move(capabilities);
  d.registered_at = clock_.now();
  d.lease_until = d.registered_at + options_.lease;
  DeviceId id = d.id;
  devices_.emplace(id, std::move(d));
  return id;
}

bool DeviceRegistry::key_emulated(const std::string& key) const {
  for (const auto& [id, d] : devices_)
    if (d.key == key) return d.emulated;
  return false;
}

bool DeviceRegistry::heartbeat(DeviceId id) {
  auto it = devices_.find(id);
  if (it == devices_.end()) return false;
  it->second.lease_until = clock_.now() + options_.lease;
  return true;
}

std::vector<DroppedDevice> DeviceRegistry::expire() {
  TimePoint now = clock_.now();
  std::vector<DeviceId> gone;
  for (const auto& [id, d] : devices_) {
    if (now > d.lease_until) gone.push_back(id);
  }
  std::sort(gone.begin(), gone.end());
  std::vector<DroppedDevice> out;
  out.reserve(gone.size());
  for (DeviceId id : gone) out.push_back(*remove(id));
  return out;
}

std::optional<DroppedDevice> DeviceRegistry::remove(DeviceId id) {
  auto it = devices_.find(id);
  if (it == devices_.end()) return std::nullopt;
  DroppedDevice dropped{
      id, it->second.key, {it->second.in_flight.begin(), it->second.in_flight.end()}};
  devices_.erase(it);
  return dropped;
}

bool DeviceRegistry::can_take_work(DeviceId id) const {
  const Device* d = find(id);
  return d && d->state(options_.capacity) == DeviceState::kOnline;
}

Device& DeviceRegistry::get(DeviceId id, const char* what) {
  auto it = devices_.find(id);
  KILN_USER_CHECK(it != devices_.end()) << what << ": no device with id " << id
                                        << " (never registered, or dropped when its lease ran out)";
  return it->second;
}

void DeviceRegistry::assign(DeviceId id, RequestId request) {
  auto it = devices_.find(id);
  KILN_ICHECK(it != devices_.end()) << "assign to unknown device " << id;
  it->second.in_flight.insert(request);
  it->second.recent_requests.push_back(request);
  if (it->second.recent_requests.size() > kRecentRequests) it->second.recent_requests.pop_front();
}

std::optional<std::string> DeviceRegistry::observe_clock(DeviceId id, uint64_t clock_ms) {
  auto it = devices_.find(id);
  if (it == devices_.end() || clock_ms == 0) return std::nullopt;
  Device& d = it->second;
  const uint64_t last = d.clock_ms;
  d.clock_ms = std::max(d.clock_ms, clock_ms);
  if (clock_ms + static_cast<uint64_t>(to_ms(options_.clock_slack)) >= last) return std::nullopt;
  return "its clock ran backwards (from " + std::to_string(last) + " ms to " +
         std::to_string(clock_ms) + " ms): its timings cannot be trusted";
}

bool DeviceRegistry::was_given(DeviceId id, RequestId request) const {
  const Device* d = find(id);
  return d && std::find(d->recent_requests.begin(), d->recent_requests.end(), request) !=
                  d->recent_requests.end();
}

std::optional<std::string> DeviceRegistry::record_stray_result(DeviceId id, RequestId request) {
  auto it = devices_.find(id);
  if (it == devices_.end()) return std::nullopt;
  Device& d = it->second;
  ++d.stray_results;
  if (options_.quarantine_after_strays == 0 || d.stray_results < options_.quarantine_after_strays)
    return std::nullopt;
  return "it sent " + std::to_string(d.stray_results) +
         " results for requests it was never given (the last: request " + std::to_string(request) +
         ")";
}

void DeviceRegistry::release(DeviceId id, RequestId request) {
  auto it = devices_.find(id);
  if (it != devices_.end()) it->second.in_flight.erase(request);
}

bool DeviceRegistry::record_outcome(DeviceId id, ErrorKind error) {
  auto it = devices_.find(id);
  if (it == devices_.end()) return false;
  Device& d = it->second;
  ++d.completed;
  if (error != ErrorKind::kCrash && error != ErrorKind::kRunTimeout) {
    d.consecutive_failures = 0;
    return false;
  }
  ++d.consecutive_failures;
  if (d.quarantined || options_.quarantine_after == 0 ||
      d.consecutive_failures < options_.quarantine_after) {
    return false;
  }
  d.quarantined = true;
  d.quarantine_reason = std::to_string(d.consecutive_failures) +
                        " crashed or timed-out runs in a row (the last: " + error_kind_name(error) +
                        ")";
  return true;
}

void DeviceRegistry::quarantine(DeviceId id, const std::string& reason) {
  Device& d = get(id, "quarantine");
  d.quarantined = true;
  d.quarantine_reason = reason;
}

void DeviceRegistry::release_quarantine(DeviceId id) {
  Device& d = get(id, "release quarantine");
  d.quarantined = false;
  d.quarantine_reason.clear();
  d.consecutive_failures = 0;
}

const Device* DeviceRegistry::find(DeviceId id) const {
  auto it = devices_.find(id);
  return it == devices_.end() ? nullptr : &it->second;
}

std::vector<Device> DeviceRegistry::list() const {
  std::vector<Device> out;
  out.reserve(devices_.size());
  for (const auto& [id, d] : devices_) out.push_back(d);
  std::sort(out.begin(), out.end(), [](const Device& a, const Device& b) { return a.id < b.id; });
  return out;
}

std::map<std::string, KeyCounts> DeviceRegistry::counts() const {
  std::map<std::string, KeyCounts> out;
  for (const auto& [id, d] : devices_) {
    KeyCounts& c = out[d.key];
    switch (d.state(options_.capacity)) {
      case DeviceState::kOnline:
        ++c.online;
        break;
      case DeviceState::kBusy:
        ++c.busy;
        break;
      case DeviceState::kQuarantined:
        ++c.quarantined;
        break;
    }
  }
  return out;
}

}  // namespace kiln::tracker
