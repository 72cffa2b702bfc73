// The dashboard: kilnd's live page and the read-only JSON API it is drawn from, over a Farm,
// served by kilnd's HttpServer beside /metrics. docs/dashboard-api.md documents the API.
//
//   Dashboard dash(farm, token);          // token "" = the API is open
//   HttpServer http;
//   dash.install(http);                   // /, its assets, /api/v1/..., /metrics
//   int port = http.start("127.0.0.1:0");
//
// Routes:
//   GET /                     the page (HTML, CSS and JS embedded at build time: dashboard/*)
//   GET /metrics              Prometheus text (Metrics::text()); never asks for the token
//   GET /api/v1/farm          devices, counts by key and state, jobs by state
//   GET /api/v1/jobs          every job, newest first, with progress, best latency and ETA
//   GET /api/v1/jobs/<id>     one job and its tasks: tuning curve, error histogram, configs
//   GET /api/v1/events        recent events, newest first (?since=<unix ms> for newer ones)
// With a token, /api/v1/* answers 401 unless the request carries `Authorization: Bearer <token>`;
// the token is never part of any response. Unknown job: 404; malformed id: 400; unknown path:
// 404; every error body is {"error": "...", "status": N}.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/farm.h"
#include "server/http_server.h"

namespace kiln::server {

/// One file of the page, embedded at build time (generated from server/dashboard/).
struct DashboardAsset {
  std::string_view path;          ///< "/", "/dashboard.css", ...
  std::string_view content_type;  ///< "text/html; charset=utf-8", ...
  std::string_view data;
};
/// Every embedded asset.
const std::vector<DashboardAsset>& dashboard_assets();

class Dashboard {
 public:
  /// Most configs listed per task on a job's page (the newest ones).
  static constexpr size_t kConfigsPerTask = 40;
  /// Most points of a task's tuning curve (the trials where the best changed, and the last one).
  static constexpr size_t kCurvePoints = 400;

  Dashboard(Farm& farm, std::string token);

  /// Adds every route above to `http`.
  void install(HttpServer& http);

  /// The API's answer to `request` (auth, routing below /api/v1/, errors).
  HttpResponse api(const HttpRequest& request) const;

  // The JSON bodies, for tests and benchmarks.
  std::string farm_json() const;
  std::string jobs_json() const;
  /// FarmError kNotFound for an unknown job.
  std::string job_json(tracker::JobId id) const;
  std::string events_json(int64_t since_ms) const;

 private:
  Farm& farm_;
  std::string token_;
};

}  // namespace kiln::server
