#include "server/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <exception>
#include <iterator>

#include "base/error.h"

namespace kiln::server {

namespace {

constexpr const char* kJobStates[] = {"queued", "running", "done", "failed", "cancelled"};
constexpr const char* kDeviceStates[] = {"online", "busy", "quarantined"};

// The record log's kinds, "none" excluded.
std::vector<std::string> log_error_kinds() {
  std::vector<std::string> kinds;
  for (int i = 0;; ++i) {
    auto kind = static_cast<ErrorKind>(i);
    if (kind == ErrorKind::kNone) continue;
    kinds.emplace_back(error_kind_name(kind));
    if (kind == ErrorKind::kWrongAnswer) break;  // the last kind
  }
  return kinds;
}

const char* give_up_name(tracker::GiveUpKind kind) {
  return kind == tracker::GiveUpKind::kDeviceLost ? "device_lost" : "queue_timeout";
}

void check_state(const std::string& state, const char* const* begin, const char* const* end,
                 const char* what) {
  bool known = std::any_of(begin, end, [&](const char* s) { return state == s; });
  KILN_USER_CHECK(known) << "metrics: unknown " << what << " \"" << state << "\"";
}

// Every family: name, type, help (help without backslashes or newlines: prometheus-cpp 1.0
// writes it unescaped).
struct FamilyInfo {
  const char* name;
  prometheus::MetricType type;
  const char* help;
};
using prometheus::MetricType;
constexpr FamilyInfo kFamilies[] = {
    {"kiln_jobs", MetricType::Gauge, "Tuning jobs by state."},
    {"kiln_devices", MetricType::Gauge,
     "Registered devices by device key and state (online, busy, quarantined)."},
    {"kiln_queue_depth", MetricType::Gauge,
     "Measure requests waiting for a device, by device key."},
    {"kiln_build_queue_depth", MetricType::Gauge, "Builds waiting for a compiler worker."},
    {"kiln_builds_total", MetricType::Counter, "Builds finished, by result (ok, error)."},
    {"kiln_measures_total", MetricType::Counter,
     "Measure requests finished, by result (ok or the error kind)."},
    {"kiln_errors_total", MetricType::Counter,
     "Errors by kind (the record log's kinds, device_lost, queue_timeout)."},
    {"kiln_records_total", MetricType::Counter, "Measure records appended to the record log."},
    {"kiln_build_seconds", MetricType::Histogram, "Time to build one candidate, in seconds."},
    {"kiln_measure_seconds", MetricType::Histogram,
     "Time from dispatch to a device's result, in seconds."},
    {"kiln_queue_wait_seconds", MetricType::Histogram,
     "Time a measure request waited for a device, in seconds."},
};

const FamilyInfo& info(const std::string& name) {
  for (const auto& f : kFamilies)
    if (name == f.name) return f;
  KILN_ICHECK(false) << "metrics: no family " << name;
  return kFamilies[0];
}

// The registry's families in kFamilies' order, with the ones that have no series yet (per-key
// families before the first key) still declared by HELP and TYPE: prometheus-cpp 1.0 leaves a
// family without series out of Collect(), and a dashboard check wants every name present.
// Families others added to the registry follow.
class DeclaringCollectable : public prometheus::Collectable {
 public:
  explicit DeclaringCollectable(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    auto collected = registry_->Collect();
    std::vector<prometheus::MetricFamily> out;
    out.reserve(collected.size() + std::size(kFamilies));
    for (const auto& f : kFamilies) {
      auto it = std::find_if(collected.begin(), collected.end(),
                             [&](const prometheus::MetricFamily& m) { return m.name == f.name; });
      if (it != collected.end()) {
        out.push_back(std::move(*it));
        collected.erase(it);
      } else {
        prometheus::MetricFamily empty;
        empty.name = f.name;
        empty.help = f.help;
        empty.type = f.type;
        out.push_back(std::move(empty));
      }
    }
    for (auto& m : collected) out.push_back(std::move(m));
    return out;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

}  // namespace

const std::vector<double>& Metrics::latency_buckets() {
  static const std::vector<double> buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,   1,      2.5,   5,    10,    30,   60};
  return buckets;
}

std::vector<std::string> Metrics::metric_names() {
  std::vector<std::string> names;
  for (const auto& f : kFamilies) names.emplace_back(f.name);
  return names;
}

std::vector<std::string> Metrics::error_kinds() {
  auto kinds = log_error_kinds();
  kinds.emplace_back("device_lost");
  kinds.emplace_back("queue_timeout");
  return kinds;
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      collectable_(std::make_shared<DeclaringCollectable>(registry_)) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  auto& r = *registry_;
  auto gauge = [&r](const char* name) -> auto& {
    return BuildGauge().Name(name).Help(info(name).help).Register(r);
  };
  auto counter = [&r](const char* name) -> auto& {
    return BuildCounter().Name(name).Help(info(name).help).Register(r);
  };
  auto histogram = [&r](const char* name) -> auto& {
    return BuildHistogram().Name(name).Help(info(name).help).Register(r).Add({}, latency_buckets());
  };

  jobs_ = &gauge("kiln_jobs");
  devices_ = &gauge("kiln_devices");
  queue_depth_ = &gauge("kiln_queue_depth");
  build_queue_depth_ = &gauge("kiln_build_queue_depth").Add({});
  builds_ = &counter("kiln_builds_total");
  measures_ = &counter("kiln_measures_total");
  errors_ = &counter("kiln_errors_total");
  records_ = &counter("kiln_records_total").Add({});
  build_seconds_ = &histogram("kiln_build_seconds");
  measure_seconds_ = &histogram("kiln_measure_seconds");
  queue_wait_seconds_ = &histogram("kiln_queue_wait_seconds");

  // The label values known in advance read 0 from the start.
  for (const char* s : kJobStates) jobs_->Add({{"state", s}});
  builds_->Add({{"result", "ok"}});
  builds_->Add({{"result", "error"}});
  measures_->Add({{"result", "ok"}});
  for (const auto& kind : error_kinds()) {
    measures_->Add({{"result", kind}});
    errors_->Add({{"kind", kind}});
  }
}

Metrics::~Metrics() = default;

prometheus::Gauge& Metrics::job_gauge(const std::string& state) {
  check_state(state, std::begin(kJobStates), std::end(kJobStates), "job state");
  return jobs_->Add({{"state", state}});
}

void Metrics::set_jobs(tracker::JobState state, double n) {
  job_gauge(tracker::job_state_name(state)).Set(n);
}

void Metrics::set_jobs(const std::string& state, double n) { job_gauge(state).Set(n); }

void Metrics::set_job_counts(const std::map<tracker::JobState, size_t>& counts) {
  for (const char* s : kJobStates) {
    auto it = counts.find(tracker::job_state_from_name(s));
    job_gauge(s).Set(it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void Metrics::set_devices(const std::string& key, tracker::DeviceState state, double n) {
  set_devices(key, tracker::device_state_name(state), n);
}

void Metrics::set_devices(const std::string& key, const std::string& state, double n) {
  check_state(state, std::begin(kDeviceStates), std::end(kDeviceStates), "device state");
  {
    std::lock_guard<std::mutex> lock(mu_);
    device_keys_.insert(key);
  }
  devices_->Add({{"key", key}, {"state", state}}).Set(n);
}

void Metrics::set_device_counts(const std::map<std::string, tracker::KeyCounts>& counts) {
  std::set<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys = device_keys_;
  }
  for (const auto& [key, c] : counts) keys.insert(key);
  for (const auto& key : keys) {
    auto it = counts.find(key);
    tracker::KeyCounts c = it == counts.end() ? tracker::KeyCounts{} : it->second;
    set_devices(key, "online", static_cast<double>(c.online));
    set_devices(key, "busy", static_cast<double>(c.busy));
    set_devices(key, "quarantined", static_cast<double>(c.quarantined));
  }
}

void Metrics::set_queue_depth(const std::string& key, double n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_keys_.insert(key);
  }
  queue_depth_->Add({{"key", key}}).Set(n);
}

void Metrics::set_queue_depths(const std::map<std::string, size_t>& depths) {
  std::set<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys = queue_keys_;
  }
  for (const auto& [key, n] : depths) keys.insert(key);
  for (const auto& key : keys) {
    auto it = depths.find(key);
    set_queue_depth(key, it == depths.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void Metrics::set_build_queue_depth(double n) { build_queue_depth_->Set(n); }

void Metrics::count_error(const std::string& kind) { errors_->Add({{"kind", kind}}).Increment(); }

void Metrics::observe_build(double seconds, bool ok) {
  observe_build(seconds, ok ? ErrorKind::kNone : ErrorKind::kCompileError);
}

void Metrics::observe_build(double seconds, ErrorKind error) {
  build_seconds_->Observe(seconds);
  bool ok = error == ErrorKind::kNone;
  builds_->Add({{"result", ok ? "ok" : "error"}}).Increment();
  if (!ok) count_error(error_kind_name(error));
}

void Metrics::observe_measure(double seconds, ErrorKind error) {
  measure_seconds_->Observe(seconds);
  bool ok = error == ErrorKind::kNone;
  std::string result = ok ? "ok" : error_kind_name(error);
  measures_->Add({{"result", result}}).Increment();
  if (!ok) count_error(result);
}

void Metrics::observe_queue_wait(double seconds) { queue_wait_seconds_->Observe(seconds); }

void Metrics::give_up(tracker::GiveUpKind kind) {
  std::string name = give_up_name(kind);
  measures_->Add({{"result", name}}).Increment();
  count_error(name);
}

void Metrics::record_error(const std::string& kind) {
  auto kinds = error_kinds();
  KILN_USER_CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end())
      << "metrics: unknown error kind \"" << kind << "\"";
  count_error(kind);
}

void Metrics::record_appended(double n) { records_->Increment(n); }

std::string Metrics::text() const {
  return prometheus::TextSerializer().Serialize(collectable_->Collect());
}

}  // namespace kiln::server
