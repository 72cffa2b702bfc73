// The dashboard's HTTP side: the HttpServer's routing and errors in process, then kilnd's JSON API
// (docs/dashboard-api.md) on a live embedded farm: each endpoint's JSON, bad requests (400 for a
// malformed id, 404 for an unknown job or path, 405 for writes), the token (401 naming what is
// missing, never echoed), the embedded page, and /metrics still valid Prometheus text.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/json.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "tests/common/expect_error.h"
#include "tests/common/prometheus_text.h"
#include "tests/common/small_cnn.h"
#include "tests/farm/farm_test_util.h"

namespace kiln {
namespace {

using kiln::Json;
using server::HttpRequest;
using server::HttpResponse;
using server::HttpServer;
using testing::context;
using testing::http_get;
using testing::Kilnd;
using testing::TempDir;

Json parse(const testing::HttpResponse& r) {
  try {
    return Json::parse(r.body, "response");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\n" << r.body;
    return Json();
  }
}

/// Expects status `code` and a JSON error body whose message contains `text`.
void expect_error(const testing::HttpResponse& r, int code, const std::string& text) {
  EXPECT_EQ(r.status, code) << r.body;
  const Json j = parse(r);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j.at("status", "error").as_int("status"), code);
  EXPECT_NE(j.at("error", "error").as_string("error").find(text), std::string::npos) << r.body;
}

uint64_t submit(Kilnd& kilnd, uint32_t trials, const std::string& name = "cnn",
                const std::string& token = "") {
  v1::SubmitModelRequest r;
  r.set_name(name);
  r.set_target("llvm");
  r.set_device_key("cpu");
  r.set_trials(trials);
  r.set_owner("ana");
  v1::SubmitModelResponse resp;
  const grpc::Status st = testing::submit_model(*kilnd.service(), *context(token), r,
                                                testing::small_cnn_model(), &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp.job_id();
}

// --- HttpServer in process ---------------------------------------------------------------------

TEST(HttpServerTest, RoutesExactAndPrefixAndAnswersErrorsInJson) {
  HttpServer http;
  http.route("/a", [](const HttpRequest&) { return HttpResponse::text("exact a"); });
  http.route_prefix("/p/", [](const HttpRequest& r) {
    return HttpResponse::json("{\"path\":\"" + r.path + "\",\"x\":\"" + r.param("x") + "\"}");
  });
  http.route_prefix("/p/deeper/", [](const HttpRequest&) { return HttpResponse::text("deeper"); });
  http.route("/boom",
             [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("kaput"); });
  const int port = http.start("127.0.0.1:0");
  ASSERT_GT(port, 0);
  const std::string addr = "127.0.0.1:" + std::to_string(port);

  EXPECT_EQ(http_get(addr, "/a").body, "exact a");
  const Json p = parse(http_get(addr, "/p/q?y=1&x=7"));
  EXPECT_EQ(p.at("path", "p").as_string("path"), "/p/q");
  EXPECT_EQ(p.at("x", "p").as_string("x"), "7");
  EXPECT_EQ(http_get(addr, "/p/deeper/z").body, "deeper");  // the longest prefix wins
  expect_error(http_get(addr, "/nowhere"), 404, "no such path: /nowhere");
  expect_error(http_get(addr, "/boom"), 500, "kaput");
  expect_error(testing::http_request(addr, "POST", "/a"), 405, "read-only");

  // One server per port; a second start is refused.
  HttpServer other;
  EXPECT_ERROR_CONTAINS(other.start(addr), "cannot serve on \"" + addr + "\"");
  EXPECT_ERROR_CONTAINS(http.start("127.0.0.1:0"), "already serving");
  http.stop();
  http.stop();  // idempotent
  EXPECT_THROW(http_get(addr, "/a"), std::runtime_error);
}

// --- kilnd --------------------------------------------------------------------------------------

TEST(DashboardTest, BadRequestsGetClearErrors) {
  TempDir dir("dashboard_bad");
  Kilnd kilnd(dir, {});
  const std::string& a = kilnd.http_address();
  expect_error(http_get(a, "/api/v1/jobs/abc"), 400, "malformed job id \"abc\"");
  expect_error(http_get(a, "/api/v1/jobs/-1"), 400, "malformed job id \"-1\"");
  expect_error(http_get(a, "/api/v1/jobs/0"), 400, "malformed job id \"0\"");
  expect_error(http_get(a, "/api/v1/jobs/99999999999999999999999"), 400,
               "malformed job id \"99999999999999999999999\"");
  expect_error(http_get(a, "/api/v1/jobs/18446744073709551616"), 400, "malformed job id");
  expect_error(http_get(a, "/api/v1/jobs/42"), 404, "no job 42");
  expect_error(http_get(a, "/api/v1/jobs/1/tasks"), 404, "no such path: /api/v1/jobs/1/tasks");
  expect_error(http_get(a, "/api/v1/nope"), 404, "no such path: /api/v1/nope");
  expect_error(http_get(a, "/api/v2/jobs"), 404, "no such path");
  expect_error(http_get(a, "/nope.html"), 404, "no such path: /nope.html");
  expect_error(http_get(a, "/api/v1/events?since=yesterday"), 400, "malformed 'since'");
  expect_error(testing::http_request(a, "DELETE", "/api/v1/jobs/1"), 405, "read-only");
  // Nothing was created by any of it.
  EXPECT_EQ(parse(http_get(a, "/api/v1/jobs")).at("jobs", "jobs").as_array("jobs").size(), 0u);
}

TEST(DashboardTest, EveryEndpointOnALiveFarm) {
  TempDir dir("dashboard_api");
  Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
                    "--batch", "2", "--repeat", "1"});
  const std::string& a = kilnd.http_address();

  // The page and its assets are embedded; the page loads only from this server.
  const auto page = http_get(a, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<script src=\"/dashboard.js\""), std::string::npos);
  EXPECT_EQ(page.body.find("http://"), std::string::npos) << "no external resources";
  EXPECT_EQ(page.body.find("https://"), std::string::npos) << "no external resources";
  EXPECT_NE(http_get(a, "/dashboard.js").body.find("/api/v1/jobs"), std::string::npos);
  EXPECT_NE(http_get(a, "/dashboard.css").body.find("svg.curve"), std::string::npos);

  // The farm: the local agent, by key.
  ASSERT_TRUE(testing::eventually(
      [&] {
        return parse(http_get(a, "/api/v1/farm")).at("devices", "farm").as_array("d").size() == 1;
      },
      std::chrono::seconds(30)));
  const Json farm = parse(http_get(a, "/api/v1/farm"));
  const Json& dev = farm.at("devices", "farm").as_array("devices")[0];
  EXPECT_EQ(dev.at("key", "device").as_string("key"), "cpu");
  EXPECT_EQ(dev.at("target", "device").as_string("target"), "llvm");
  EXPECT_FALSE(dev.at("fingerprint", "device").as_string("fingerprint").empty());
  // What the board said of itself: arch, CPU, cores, memory, and that it runs natively.
  EXPECT_EQ(dev.at("arch", "device").as_string("arch"), "x86_64");
  EXPECT_FALSE(dev.at("cpu_model", "device").as_string("cpu_model").empty());
  EXPECT_GT(dev.at("cores", "device").as_int("cores"), 0);
  EXPECT_GT(dev.at("memory_bytes", "device").as_int("memory_bytes"), 0);
  EXPECT_FALSE(dev.at("emulated", "device").as_bool("emulated"));
  dev.at("board", "device").as_string("board");  // "" where the machine does not say
  const std::set<std::string> states = {"online", "busy", "quarantined"};
  EXPECT_TRUE(states.count(dev.at("state", "device").as_string("state")));
  EXPECT_TRUE(dev.at("errors", "device").is_object());
  dev.at("measures_per_minute", "device").as_int("measures_per_minute");
  dev.at("in_flight", "device").as_int("in_flight");
  const Json& key = farm.at("keys", "farm").as_array("keys")[0];
  EXPECT_EQ(key.at("key", "key").as_string("key"), "cpu");
  EXPECT_EQ(key.at("online", "k").as_int("o") + key.at("busy", "k").as_int("b") +
                key.at("quarantined", "k").as_int("q"),
            1);
  EXPECT_EQ(key.at("queue_depth", "k").as_int("queue_depth"), 0);
  EXPECT_EQ(farm.at("build_queue_depth", "farm").as_int("build_queue_depth"), 0);
  EXPECT_EQ(farm.at("jobs", "farm").at("running", "jobs").as_int("running"), 0);

  // A job, followed until its first task has two trials. The task's trials are the log's records,
  // the job's trials_done what its driver reported after the batch: both must show them.
  const uint64_t id = submit(kilnd, 2);
  const std::string job_path = "/api/v1/jobs/" + std::to_string(id);
  Json detail;
  ASSERT_TRUE(testing::eventually(
      [&] {
        detail = parse(http_get(a, job_path));
        const Json& job = detail.at("job", "detail");
        const auto& tasks = job.at("tasks", "job").as_array("tasks");
        return !tasks.empty() && tasks[0].at("trials", "task").as_int("trials") >= 2 &&
               job.at("trials_done", "job").as_int("trials_done") >= 2;
      },
      std::chrono::seconds(120)))
      << detail.dump() << "\n"
      << kilnd.process().stderr_text();
  const Json& job = detail.at("job", "detail");
  EXPECT_EQ(static_cast<uint64_t>(job.at("id", "job").as_int("id")), id);
  EXPECT_EQ(job.at("owner", "job").as_string("owner"), "ana");
  EXPECT_EQ(job.at("model", "job").as_string("model"), "cnn");
  EXPECT_EQ(job.at("target", "job").as_string("target"), "llvm");
  EXPECT_EQ(job.at("device_key", "job").as_string("device_key"), "cpu");
  EXPECT_GT(job.at("tasks_total", "job").as_int("tasks_total"), 0);
  EXPECT_GE(job.at("trials_done", "job").as_int("trials_done"), 2);
  const double progress = job.at("progress", "job").as_double("progress");
  EXPECT_GT(progress, 0);
  EXPECT_LE(progress, 1);
  const Json& task = job.at("tasks", "job").as_array("tasks")[0];
  EXPECT_FALSE(task.at("key", "task").as_string("key").empty());
  EXPECT_EQ(task.at("template", "task").as_string("t"),
            task.at("key", "task")
                .as_string("k")
                .substr(0, task.at("template", "task").as_string("t").size()));
  // The curve: (trial, best GFLOP/s so far), trials increasing, best never falling, the last
  // trial always present.
  const auto& curve = task.at("curve", "task").as_array("curve");
  ASSERT_GE(curve.size(), 1u);
  double prev_best = 0;
  int64_t prev_trial = 0;
  for (const Json& pt : curve) {
    const auto& xy = pt.as_array("point");
    ASSERT_EQ(xy.size(), 2u);
    EXPECT_GT(xy[0].as_int("trial"), prev_trial);
    EXPECT_GE(xy[1].as_double("gflops"), prev_best);
    prev_trial = xy[0].as_int("trial");
    prev_best = xy[1].as_double("gflops");
  }
  EXPECT_EQ(prev_trial, task.at("trials", "task").as_int("trials"));
  EXPECT_TRUE(task.at("errors", "task").is_object());
  const auto& configs = task.at("configs", "task").as_array("configs");
  ASSERT_EQ(static_cast<int64_t>(configs.size()), task.at("trials", "task").as_int("trials"));
  EXPECT_FALSE(configs[0].at("config", "config").as_string("config").empty());
  EXPECT_GT(configs[0].at("trial", "c").as_int("trial"),
            configs.back().at("trial", "c").as_int("t"))
      << "newest first";
  configs[0].at("gflops", "config").as_double("gflops");
  configs[0].at("error", "config").as_string("error");

  // The jobs list shows the same job, with progress and an ETA while it runs.
  const Json jobs = parse(http_get(a, "/api/v1/jobs"));
  const auto& list = jobs.at("jobs", "jobs").as_array("jobs");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(static_cast<uint64_t>(list[0].at("id", "j").as_int("id")), id);
  const std::string st = list[0].at("state", "j").as_string("state");
  EXPECT_TRUE(st == "running" || st == "done") << st;
  EXPECT_TRUE(list[0].has("eta_s"));
  EXPECT_TRUE(list[0].has("best_latency_ms"));
  if (st == "running") {
    EXPECT_FALSE(list[0].at("eta_s", "j").is_null()) << jobs.dump();
  }

  // Events: the device joined and the job was submitted; newest first; ?since filters.
  const Json events = parse(http_get(a, "/api/v1/events"));
  const auto& evs = events.at("events", "events").as_array("events");
  std::set<std::string> kinds;
  for (const Json& e : evs) kinds.insert(e.at("kind", "event").as_string("kind"));
  EXPECT_TRUE(kinds.count("device_joined")) << events.dump();
  EXPECT_TRUE(kinds.count("job_state")) << events.dump();
  ASSERT_GE(evs.size(), 2u);
  EXPECT_GE(evs[0].at("unix_ms", "e").as_int("t"), evs.back().at("unix_ms", "e").as_int("t"));
  const int64_t newest = evs[0].at("unix_ms", "e").as_int("t");
  const Json none = parse(http_get(a, "/api/v1/events?since=" + std::to_string(newest)));
  EXPECT_EQ(none.at("events", "e").as_array("e").size(), 0u);

  // /metrics is still served, valid, with every family.
  const auto metrics = http_get(a, "/metrics");
  ASSERT_EQ(metrics.status, 200);
  const auto exp = test::parse_prometheus_text(metrics.body);
  for (const std::string& name : server::Metrics::metric_names())
    EXPECT_NE(exp.find(name), nullptr) << name;
}

TEST(DashboardTest, TheApiAsksForTheTokenAndNeverShowsIt) {
  TempDir dir("dashboard_token");
  const std::string token = "s3cret-t0ken";
  // A local agent (it gets the token too), so that a job can be submitted; no worker: it waits.
  Kilnd kilnd(dir, {"--local-agent", "cpu", "--local-agent-target", "llvm"},
              {"KILN_TOKEN=" + token});
  const std::string& a = kilnd.http_address();
  const std::string auth = "Authorization: Bearer " + token + "\r\n";

  for (const char* path : {"/api/v1/farm", "/api/v1/jobs", "/api/v1/jobs/1", "/api/v1/events"}) {
    expect_error(http_get(a, path), 401, "missing token");
    expect_error(http_get(a, path, "Authorization: Bearer wrong\r\n"), 401, "wrong token");
    expect_error(http_get(a, path, "Authorization: " + token + "\r\n"), 401,
                 "expected 'Bearer <token>'");
    expect_error(http_get(a, path, "Authorization: Bearer " + token + "x\r\n"), 401, "wrong token");
  }
  ASSERT_TRUE(testing::eventually(
      [&] { return http_get(a, "/api/v1/farm", auth).body.find("\"cpu\"") != std::string::npos; },
      std::chrono::seconds(30)));
  // A job whose name is the token: the API masks it.
  const uint64_t id = submit(kilnd, 2, "model-" + token, token);
  const auto jobs = http_get(a, "/api/v1/jobs", auth);
  EXPECT_EQ(jobs.status, 200);
  EXPECT_NE(jobs.body.find("model-***"), std::string::npos) << jobs.body;
  std::string everything;
  for (const std::string& path :
       {std::string("/"), std::string("/dashboard.js"), std::string("/api/v1/farm"),
        std::string("/api/v1/jobs"), "/api/v1/jobs/" + std::to_string(id),
        std::string("/api/v1/events"), std::string("/metrics"), std::string("/api/v1/nope")}) {
    const auto r = http_get(a, path, auth);
    EXPECT_NE(r.status, 401) << path;
    everything += r.body;
  }
  everything += http_get(a, "/api/v1/jobs").body;
  EXPECT_EQ(everything.find(token), std::string::npos);
  // The page and /metrics need no token (the page asks for it; Prometheus scrapes without).
  EXPECT_EQ(http_get(a, "/").status, 200);
  EXPECT_EQ(http_get(a, "/metrics").status, 200);
}

}  // namespace
}  // namespace kiln
