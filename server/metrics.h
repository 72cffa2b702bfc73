// Kiln's Prometheus metrics: one prometheus::Registry with every family kilnd exports on /metrics.
//
//   Metrics m;
//   m.set_jobs(tracker::JobState::kRunning, 3);
//   m.set_device_counts(tracker.devices().counts());   // kiln_devices{key,state}
//   m.set_queue_depth("rk3399", tracker.queue().pending_for_key("rk3399"));
//   m.observe_build(0.8, /*ok=*/true);
//   m.observe_measure(0.02, ErrorKind::kNone);
//   std::string text = m.text();                       // what kilnd's GET /metrics returns
//
// Families (all prefixed kiln_; metric_names() lists them):
//   kiln_jobs{state}                      gauge    jobs by state (queued, running, done, failed,
//                                                  cancelled)
//   kiln_devices{key,state}               gauge    devices by key and state (online, busy,
//                                                  quarantined)
//   kiln_queue_depth{key}                 gauge    measure requests waiting per device key
//   kiln_build_queue_depth                gauge    builds waiting for a compiler worker
//   kiln_builds_total{result}             counter  builds finished, result ok | error
//   kiln_measures_total{result}           counter  measure requests finished: ok, or the error
//                                                  kind (the record log's, device_lost,
//                                                  queue_timeout)
//   kiln_errors_total{kind}               counter  errors by kind (compile_error, compile_timeout,
//                                                  runtime_error, run_timeout, crash, wrong_answer,
//                                                  device_lost, queue_timeout)
//   kiln_records_total                    counter  records appended to the record log
//   kiln_build_seconds                    histogram  build latency
//   kiln_measure_seconds                  histogram  measure latency (dispatch to result)
//   kiln_queue_wait_seconds               histogram  time a request waited for a device
// Builds per second and measures per second are rate(kiln_builds_total[1m]) and
// rate(kiln_measures_total[1m]).
//
// Every label value known in advance (job states, results, error kinds) is created at
// construction, so those series read 0 before anything happens; per-key series appear with the
// first update for that key, and until then their family is declared (HELP, TYPE) with no
// samples, so every name in metric_names() is always in the text. Thread-safe: any method may be
// called from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "records/record_log.h"
#include "tracker/device_registry.h"
#include "tracker/job_store.h"
#include "tracker/measure_queue.h"

namespace prometheus {
class Collectable;
class Counter;
template <typename T>
class Family;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace kiln::server {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  /// The histograms' bucket upper bounds in seconds (1 ms to 60 s; +Inf is implicit).
  static const std::vector<double>& latency_buckets();
  /// Every family name this object exports, e.g. "kiln_jobs", "kiln_build_seconds".
  static std::vector<std::string> metric_names();
  /// The error kinds of kiln_errors_total: the record log's kinds except "none", then
  /// "device_lost" and "queue_timeout".
  static std::vector<std::string> error_kinds();

  // --- gauges ---------------------------------------------------------------------------------
  /// kiln_jobs{state}. kiln::Error for an unknown state name.
  void set_jobs(tracker::JobState state, double n);
  void set_jobs(const std::string& state, double n);
  /// Sets every state at once; states absent from `counts` read 0.
  void set_job_counts(const std::map<tracker::JobState, size_t>& counts);

  /// kiln_devices{key,state}; state is "online", "busy" or "quarantined" (kiln::Error otherwise).
  void set_devices(const std::string& key, tracker::DeviceState state, double n);
  void set_devices(const std::string& key, const std::string& state, double n);
  /// All keys from DeviceRegistry::counts(); keys seen before and absent now read 0.
  void set_device_counts(const std::map<std::string, tracker::KeyCounts>& counts);

  /// kiln_queue_depth{key}: measure requests waiting for a device of `key`.
  void set_queue_depth(const std::string& key, double n);
  /// All keys at once; keys seen before and absent now read 0.
  void set_queue_depths(const std::map<std::string, size_t>& depths);
  /// kiln_build_queue_depth.
  void set_build_queue_depth(double n);

  // --- events ---------------------------------------------------------------------------------
  /// One finished build: kiln_build_seconds, kiln_builds_total{result=ok|error}; a failed build
  /// also counts kiln_errors_total{kind=compile_error}.
  void observe_build(double seconds, bool ok);
  /// The same with the error kind (kNone: ok; compile_timeout, ...: an error of that kind).
  void observe_build(double seconds, ErrorKind error);
  /// One finished measure request (a device's result): kiln_measure_seconds,
  /// kiln_measures_total{result=ok or the kind}, and kiln_errors_total{kind} when it failed.
  void observe_measure(double seconds, ErrorKind error);
  /// The time a request waited for a device (MeasureQueue's Completion::queued).
  void observe_queue_wait(double seconds);
  /// A request the queue gave up on: kiln_measures_total{result} and kiln_errors_total{kind}
  /// with kind device_lost or queue_timeout.
  void give_up(tracker::GiveUpKind kind);
  /// Counts kiln_errors_total{kind} alone (kiln::Error for a kind not in error_kinds()).
  void record_error(const std::string& kind);
  /// kiln_records_total += n (records appended to the record log).
  void record_appended(double n = 1);

  // --- export ---------------------------------------------------------------------------------
  /// The registry in Prometheus text format 0.0.4 (what GET /metrics returns).
  std::string text() const;
  /// What text() serializes: the registry's families in metric_names() order, those without
  /// series yet still declared (HELP and TYPE).
  std::shared_ptr<prometheus::Collectable> collectable() const { return collectable_; }
  /// The registry itself (kilnd may add families of its own; they follow ours in text()).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  prometheus::Gauge& job_gauge(const std::string& state);
  void count_error(const std::string& kind);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> collectable_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Family<prometheus::Gauge>* devices_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Gauge* build_queue_depth_;
  prometheus::Family<prometheus::Counter>* builds_;
  prometheus::Family<prometheus::Counter>* measures_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Counter* records_;
  prometheus::Histogram* build_seconds_;
  prometheus::Histogram* measure_seconds_;
  prometheus::Histogram* queue_wait_seconds_;

  mutable std::mutex mu_;  ///< guards the key sets below
  std::set<std::string> device_keys_;
  std::set<std::string> queue_keys_;
};

}  // namespace kiln::server
