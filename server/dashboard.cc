#include "server/dashboard.h"

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "rpc/job_progress.h"
#include "server/wire.h"
#include "tracker/job_store.h"

namespace kiln::server {

namespace {

// A JSON text built in place: the API's bodies are flat enough that a writer is simpler (and
// faster for thousands of records) than a tree.
class JsonOut {
 public:
  JsonOut& begin_object() { return open('{'); }
  JsonOut& end_object() { return close('}'); }
  JsonOut& begin_array() { return open('['); }
  JsonOut& end_array() { return close(']'); }
  JsonOut& key(std::string_view k) {
    comma();
    string(k);
    s_ += ':';
    after_key_ = true;
    return *this;
  }
  JsonOut& value(std::string_view v) {
    comma();
    string(v);
    return *this;
  }
  JsonOut& value(const char* v) { return value(std::string_view(v)); }
  JsonOut& value(const std::string& v) { return value(std::string_view(v)); }
  JsonOut& value(bool v) {
    comma();
    s_ += v ? "true" : "false";
    return *this;
  }
  JsonOut& value(int64_t v) {
    comma();
    s_ += std::to_string(v);
    return *this;
  }
  JsonOut& value(uint64_t v) {
    comma();
    s_ += std::to_string(v);
    return *this;
  }
  JsonOut& value(uint32_t v) { return value(uint64_t{v}); }
  JsonOut& value(int v) { return value(int64_t{v}); }
  /// Doubles with 4 significant digits (the page shows fewer); null when not finite.
  JsonOut& value(double v) {
    comma();
    if (!std::isfinite(v)) {
      s_ += "null";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4g", v);
      s_ += buf;
    }
    return *this;
  }
  JsonOut& null() {
    comma();
    s_ += "null";
    return *this;
  }
  template <typename T>
  JsonOut& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }
  std::string take() { return std::move(s_); }

 private:
  JsonOut& open(char c) {
    comma();
    s_ += c;
    first_ = true;
    return *this;
  }
  JsonOut& close(char c) {
    s_ += c;
    first_ = false;
    return *this;
  }
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_ && !s_.empty()) s_ += ',';
    first_ = false;
  }
  void string(std::string_view v) {
    s_ += '"';
    for (unsigned char c : v) {
      switch (c) {
        case '"':
          s_ += "\\\"";
          break;
        case '\\':
          s_ += "\\\\";
          break;
        case '\n':
          s_ += "\\n";
          break;
        case '\r':
          s_ += "\\r";
          break;
        case '\t':
          s_ += "\\t";
          break;
        case '<':
          s_ += "\\u003c";
          break;  // never "</script>" in a body
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            s_ += buf;
          } else {
            s_ += static_cast<char>(c);
          }
      }
    }
    s_ += '"';
  }

  std::string s_;
  bool first_ = true;
  bool after_key_ = false;
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The template of a task key "<template>:<shape>:<hash>".
std::string template_of(const std::string& task_key) {
  return task_key.substr(0, task_key.find(':'));
}

// Whether `a` and `b` are equal, in time independent of where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.size() + 1)]);
  return diff == 0;
}

// A job id: decimal digits only, 1 .. 2^64-1. False for anything else.
bool parse_id(const std::string& s, tracker::JobId* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (v == 0) return false;
  *out = v;
  return true;
}

// The parts of a job every view shows. Its latency is the driver's estimate of the model's
// (every task's best kernel time times its calls, a prediction while a task is unmeasured); before
// the driver's first estimate, the sum of the log's best kernels of the tasks measured so far
// (O(1) per task). `latency_tasks` counts the tasks with a measured best.
void write_job(JsonOut& j, const tracker::JobRecord& r, const records::RecordLog& log,
               int64_t now) {
  const v1::Job wire = to_wire(r);
  // Measurements planned in all: the budget, or tasks x trials in the fixed split; 0 when only a
  // time limit bounds the job.
  const uint64_t total = rpc::planned_measurements(wire);
  double logged_s = 0;
  uint32_t tasks_with_best = 0;
  for (const auto& key : r.task_keys) {
    if (auto best = log.best(key, r.target)) {
      logged_s += best->cost();
      ++tasks_with_best;
    }
  }
  const double latency_s = r.best_latency_s > 0 ? r.best_latency_s : logged_s;
  j.field("id", uint64_t{r.id})
      .field("state", tracker::job_state_name(r.state))
      .field("owner", r.owner)
      .field("model", r.model_name)
      .field("target", r.target)
      .field("device_key", r.device_key)
      .field("priority", int64_t{r.priority})
      .field("trials_per_task", r.trials)
      .field("budget", r.budget)
      .field("time_limit_s", r.time_limit_s);
  j.key("early_stop");
  if (r.early_stop)
    j.value(*r.early_stop);
  else
    j.null();
  j.field("tasks_total", r.tasks_total)
      .field("tasks_done", r.tasks_done())
      .field("trials_total", total)
      .field("trials_done", r.trials_done)
      .field("trials_failed", r.trials_failed)
      .field("progress", rpc::job_progress(wire, now));
  j.key("best_latency_ms");
  if (latency_s > 0)
    j.value(latency_s * 1e3);
  else
    j.null();
  j.field("latency_tasks", tasks_with_best);
  // ETA from the pace since the job started: trials left / (trials done per second), and at
  // most what is left of a time limit.
  j.key("eta_s");
  const int64_t elapsed_ms = (r.finished_ms > 0 ? r.finished_ms : now) - r.started_ms;
  std::optional<double> eta_s;
  if (r.state == tracker::JobState::kRunning && r.started_ms > 0 && r.trials_done > 0 &&
      total > r.trials_done && elapsed_ms > 0) {
    const double per_s = static_cast<double>(r.trials_done) * 1e3 / static_cast<double>(elapsed_ms);
    eta_s = static_cast<double>(total - r.trials_done) / per_s;
  } else if (r.state == tracker::JobState::kRunning && total > 0 && r.trials_done >= total) {
    eta_s = 0.0;
  }
  if (r.state == tracker::JobState::kRunning && r.started_ms > 0 && r.time_limit_s > 0) {
    const double left_s = std::max(0.0, r.time_limit_s - rpc::limited_seconds_elapsed(wire, now));
    eta_s = eta_s ? std::min(*eta_s, left_s) : left_s;
  }
  if (eta_s)
    j.value(*eta_s);
  else
    j.null();
  j.key("trials_per_minute");
  if (r.started_ms > 0 && elapsed_ms > 0) {
    j.value(static_cast<double>(r.trials_done) * 60e3 / static_cast<double>(elapsed_ms));
  } else {
    j.null();
  }
  j.field("error", r.error)
      .field("phase", r.phase)
      .field("driver_failures", r.driver_failures)
      .field("driver_failure", r.driver_failure)
      .field("created_ms", r.created_ms)
      .field("started_ms", r.started_ms)
      .field("finished_ms", r.finished_ms)
      .field("updated_ms", r.updated_ms);
}

}  // namespace

Dashboard::Dashboard(Farm& farm, std::string token) : farm_(farm), token_(std::move(token)) {}

void Dashboard::install(HttpServer& http) {
  for (const DashboardAsset& a : dashboard_assets()) {
    HttpResponse r = HttpResponse::text(std::string(a.data), std::string(a.content_type));
    if (a.path == "/") {
      // The page runs only its own script and talks only to this server.
      r.headers.emplace_back("Content-Security-Policy",
                             "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                             "script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
    }
    http.route(std::string(a.path), [r](const HttpRequest&) { return r; });
  }
  Metrics& metrics = farm_.metrics();
  http.route("/metrics", [&metrics](const HttpRequest&) {
    return HttpResponse::text(metrics.text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.route_prefix("/api/", [this](const HttpRequest& r) { return api(r); });
}

HttpResponse Dashboard::api(const HttpRequest& request) const {
  if (!token_.empty()) {
    const std::string auth = request.header("authorization");
    HttpResponse denied;
    if (auth.empty()) {
      denied = HttpResponse::error(401,
                                   "missing token: this farm needs the header "
                                   "'Authorization: Bearer <token>'");
    } else if (auth.rfind("Bearer ", 0) != 0) {
      denied = HttpResponse::error(401,
                                   "malformed Authorization header: expected "
                                   "'Bearer <token>'");
    } else if (!same_secret(auth.substr(7), token_)) {
      denied = HttpResponse::error(401, "wrong token in the Authorization header");
    }
    if (denied.status == 401) {
      denied.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kiln\"");
      return denied;
    }
  }
  HttpResponse resp;
  const std::string& p = request.path;
  const std::string jobs_prefix = "/api/v1/jobs/";
  if (p == "/api/v1/farm") {
    resp = HttpResponse::json(farm_json());
  } else if (p == "/api/v1/jobs") {
    resp = HttpResponse::json(jobs_json());
  } else if (p == "/api/v1/events") {
    const std::string since = request.param("since");
    tracker::JobId v = 0;
    if (!since.empty() && since != "0" && !parse_id(since, &v))
      return HttpResponse::error(400,
                                 "malformed 'since' \"" + since + "\": expected Unix milliseconds");
    resp = HttpResponse::json(events_json(static_cast<int64_t>(v)));
  } else if (p.rfind(jobs_prefix, 0) == 0) {
    const std::string text = p.substr(jobs_prefix.size());
    if (text.find('/') != std::string::npos) return HttpResponse::error(404, "no such path: " + p);
    tracker::JobId id = 0;
    if (!parse_id(text, &id))
      return HttpResponse::error(
          400, "malformed job id \"" + text + "\": expected a positive integer (1, 2, ...)");
    try {
      resp = HttpResponse::json(job_json(id));
    } catch (const FarmError& e) {
      if (e.code() != FarmError::Code::kNotFound) throw;
      return HttpResponse::error(404, "no job " + std::to_string(id));
    }
  } else {
    return HttpResponse::error(404, "no such path: " + p +
                                        " (known: /api/v1/farm, /api/v1/jobs, /api/v1/jobs/<id>, "
                                        "/api/v1/events)");
  }
  // A safety net: whatever a job or an event carries, the token never leaves in a body.
  if (!token_.empty()) {
    for (size_t at = resp.body.find(token_); at != std::string::npos;
         at = resp.body.find(token_, at))
      resp.body.replace(at, token_.size(), "***");
  }
  return resp;
}

std::string Dashboard::farm_json() const {
  const std::vector<v1::DeviceInfo> devices = farm_.devices("");
  const std::vector<tracker::JobRecord> jobs = farm_.jobs();
  struct KeyInfo {
    uint64_t online = 0, busy = 0, quarantined = 0, in_flight = 0, per_minute = 0, queued = 0;
    std::map<std::string, uint64_t> errors;
  };
  std::map<std::string, KeyInfo> keys;
  // Queue depths: the gauges the farm's ticker keeps (refreshed every tick) in its metrics.
  uint64_t build_queue = 0;
  for (const auto& family : farm_.metrics().collectable()->Collect()) {
    if (family.name == "kiln_queue_depth") {
      for (const auto& m : family.metric) {
        for (const auto& label : m.label)
          if (label.name == "key") keys[label.value].queued = static_cast<uint64_t>(m.gauge.value);
      }
    } else if (family.name == "kiln_build_queue_depth" && !family.metric.empty()) {
      build_queue = static_cast<uint64_t>(family.metric[0].gauge.value);
    }
  }
  JsonOut j;
  j.begin_object().field("time_ms", now_ms());
  j.key("devices").begin_array();
  for (const v1::DeviceInfo& d : devices) {
    KeyInfo& k = keys[d.key()];
    if (d.state() == "online")
      ++k.online;
    else if (d.state() == "busy")
      ++k.busy;
    else if (d.state() == "quarantined")
      ++k.quarantined;
    k.in_flight += d.in_flight();
    k.per_minute += d.measures_last_minute();
    j.begin_object()
        .field("id", uint64_t{d.device_id()})
        .field("key", d.key())
        .field("target", d.target())
        .field("fingerprint", d.fingerprint())
        .field("cpu_model", d.capabilities().cpu_model())
        .field("cores", d.capabilities().cores())
        .field("memory_bytes", uint64_t{d.capabilities().memory_bytes()})
        .field("board", d.capabilities().board())
        .field("arch", d.capabilities().arch())
        .field("emulated", d.capabilities().emulated())
        .field("state", d.state())
        .field("quarantine_reason", d.quarantine_reason())
        .field("completed", uint64_t{d.completed()})
        .field("in_flight", d.in_flight())
        .field("measures_per_minute", d.measures_last_minute())
        .field("registered_ms", int64_t{d.registered_ms()});
    std::map<std::string, uint64_t> errors(d.errors().begin(), d.errors().end());
    j.key("errors").begin_object();
    for (const auto& [kind, n] : errors) {
      j.field(kind, n);
      k.errors[kind] += n;
    }
    j.end_object().end_object();
  }
  j.end_array();
  j.key("keys").begin_array();
  for (const auto& [key, k] : keys) {
    // A key known only from its (empty) queue gauge: its devices are long gone.
    if (k.online + k.busy + k.quarantined == 0 && k.queued == 0) continue;
    j.begin_object()
        .field("key", key)
        .field("online", k.online)
        .field("busy", k.busy)
        .field("quarantined", k.quarantined)
        .field("in_flight", k.in_flight)
        .field("queue_depth", k.queued)
        .field("measures_per_minute", k.per_minute);
    j.key("errors").begin_object();
    for (const auto& [kind, n] : k.errors) j.field(kind, n);
    j.end_object().end_object();
  }
  j.end_array();
  j.field("build_queue_depth", build_queue);
  std::map<std::string, uint64_t> states = {
      {"queued", 0}, {"running", 0}, {"done", 0}, {"failed", 0}, {"cancelled", 0}};
  for (const auto& r : jobs) ++states[tracker::job_state_name(r.state)];
  j.key("jobs").begin_object();
  for (const auto& [state, n] : states) j.field(state, n);
  j.end_object();
  j.end_object();
  return j.take();
}

std::string Dashboard::jobs_json() const {
  std::vector<tracker::JobRecord> jobs = farm_.jobs();
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  const int64_t now = now_ms();
  JsonOut j;
  j.begin_object().field("time_ms", now).key("jobs").begin_array();
  for (const auto& r : jobs) {
    j.begin_object();
    write_job(j, r, farm_.records(), now);
    j.end_object();
  }
  j.end_array().end_object();
  return j.take();
}

std::string Dashboard::job_json(tracker::JobId id) const {
  const tracker::JobRecord r = farm_.job(id);
  const records::RecordLog& log = farm_.records();
  const int64_t now = now_ms();
  JsonOut j;
  j.begin_object().field("time_ms", now).key("job").begin_object();
  write_job(j, r, log, now);
  j.key("tasks").begin_array();
  for (size_t t = 0; t < r.task_keys.size(); ++t) {
    const std::string& key = r.task_keys[t];
    const std::vector<records::MeasureRecord> records = log.records(key, r.target);
    // The curve: best GFLOP/s after each trial, as the trials where it changed (plus the last).
    std::vector<std::pair<size_t, double>> curve;
    std::map<std::string, uint64_t> errors;
    double best = 0;
    const records::MeasureRecord* best_record = nullptr;
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& m = records[i];
      if (m.error != ErrorKind::kNone) {
        ++errors[error_kind_name(m.error)];
      } else if (m.gflops > best) {
        best = m.gflops;
        best_record = &m;
        curve.emplace_back(i + 1, best);
      }
    }
    if (!records.empty() && (curve.empty() || curve.back().first != records.size()))
      curve.emplace_back(records.size(), best);
    if (curve.size() > kCurvePoints) {  // keep the first, the last, evenly spaced between
      std::vector<std::pair<size_t, double>> kept;
      for (size_t k = 0; k < kCurvePoints; ++k)
        kept.push_back(curve[k * (curve.size() - 1) / (kCurvePoints - 1)]);
      curve = std::move(kept);
    }
    const bool done = std::find(r.done_tasks.begin(), r.done_tasks.end(), t) != r.done_tasks.end();
    const char* status = done ? "done"
                         : (r.tuning_task == t && r.state == tracker::JobState::kRunning)
                             ? "tuning"
                             : "waiting";
    j.begin_object()
        .field("key", key)
        .field("template", template_of(key))
        .field("status", status)
        .field("trials", uint64_t{records.size()})
        .field("trials_budget", r.trials);
    uint64_t failed = 0;
    for (const auto& [kind, n] : errors) failed += n;
    j.field("trials_failed", failed);
    j.key("best");
    if (best_record) {
      j.begin_object()
          .field("gflops", best_record->gflops)
          .field("latency_us", best_record->cost() * 1e6)
          .field("config", best_record->config)
          .field("config_index", best_record->config_index)
          .end_object();
    } else {
      j.null();
    }
    j.key("curve").begin_array();
    for (const auto& [trial, g] : curve)
      j.begin_array().value(uint64_t{trial}).value(g).end_array();
    j.end_array();
    j.key("errors").begin_object();
    for (const auto& [kind, n] : errors) j.field(kind, n);
    j.end_object();
    j.field("configs_total", uint64_t{records.size()});
    j.key("configs").begin_array();  // the newest first
    const size_t first = records.size() > kConfigsPerTask ? records.size() - kConfigsPerTask : 0;
    for (size_t i = records.size(); i-- > first;) {
      const auto& m = records[i];
      j.begin_object()
          .field("trial", uint64_t{i + 1})
          .field("config", m.config)
          .field("gflops", m.gflops);
      j.key("latency_us");
      if (m.error == ErrorKind::kNone)
        j.value(m.cost() * 1e6);
      else
        j.null();
      j.field("error", error_kind_name(m.error))
          .field("error_msg", m.error_msg.substr(0, 200))
          .field("timestamp_ms", m.timestamp_ms)
          .end_object();
    }
    j.end_array().end_object();
  }
  j.end_array().end_object().end_object();
  return j.take();
}

std::string Dashboard::events_json(int64_t since_ms) const {
  const std::vector<FarmEvent> events = farm_.events(100);
  JsonOut j;
  j.begin_object().field("time_ms", now_ms()).key("events").begin_array();
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->unix_ms <= since_ms) continue;
    j.begin_object()
        .field("unix_ms", it->unix_ms)
        .field("kind", it->kind)
        .field("text", it->text)
        .end_object();
  }
  j.end_array().end_object();
  return j.take();
}

}  // namespace kiln::server
