// server/metrics: every family in valid Prometheus text (checked by the parser in
// tests/common/prometheus_text.h), counters and histograms that move, and the parser's own
// strictness. (kilnd's /metrics over HTTP is tested in tests/farm/dashboard_test.cc.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics.h"
#include "tests/common/expect_error.h"
#include "tests/common/prometheus_text.h"

namespace kiln {
namespace {

using server::Metrics;
using test::parse_prometheus_text;
using test::PrometheusTextError;
using test::PromExposition;

PromExposition parse(const Metrics& m) {
  std::string text = m.text();
  try {
    return parse_prometheus_text(text);
  } catch (const PrometheusTextError& e) {
    ADD_FAILURE() << e.what() << "\n" << text;
    throw;
  }
}

TEST(ServerMetrics, EveryFamilyPresentWithItsType) {
  Metrics m;
  m.set_devices("rk3399", "online", 1);  // per-key families get a sample
  m.set_queue_depth("rk3399", 0);
  auto exp = parse(m);
  const std::map<std::string, std::string> types = {
      {"kiln_jobs", "gauge"},
      {"kiln_devices", "gauge"},
      {"kiln_queue_depth", "gauge"},
      {"kiln_build_queue_depth", "gauge"},
      {"kiln_builds_total", "counter"},
      {"kiln_measures_total", "counter"},
      {"kiln_errors_total", "counter"},
      {"kiln_records_total", "counter"},
      {"kiln_build_seconds", "histogram"},
      {"kiln_measure_seconds", "histogram"},
      {"kiln_queue_wait_seconds", "histogram"},
  };
  auto names = Metrics::metric_names();
  ASSERT_EQ(names.size(), types.size());
  for (const auto& name : names) {
    ASSERT_TRUE(types.count(name)) << name;
    const auto* f = exp.find(name);
    ASSERT_NE(f, nullptr) << name << " missing from\n" << m.text();
    EXPECT_EQ(f->type, types.at(name)) << name;
    EXPECT_TRUE(f->has_help) << name;
    EXPECT_FALSE(f->samples.empty()) << name;
  }
  EXPECT_EQ(exp.families.size(), names.size());
}

TEST(ServerMetrics, FamiliesWithoutSamplesStillDeclared) {
  // Before any device key is known, the per-key families still have HELP and TYPE (what a
  // dashboard check looks for).
  Metrics m;
  auto exp = parse(m);
  for (const auto& name : Metrics::metric_names()) EXPECT_NE(exp.find(name), nullptr) << name;
  EXPECT_TRUE(exp.find("kiln_devices")->samples.empty());
}

TEST(ServerMetrics, KnownLabelValuesStartAtZero) {
  Metrics m;
  auto exp = parse(m);
  for (const char* s : {"queued", "running", "done", "failed", "cancelled"})
    EXPECT_EQ(exp.value("kiln_jobs", {{"state", s}}), 0) << s;
  EXPECT_EQ(exp.value("kiln_builds_total", {{"result", "ok"}}), 0);
  EXPECT_EQ(exp.value("kiln_builds_total", {{"result", "error"}}), 0);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "ok"}}), 0);
  auto kinds = Metrics::error_kinds();
  EXPECT_EQ(kinds, (std::vector<std::string>{"compile_error", "compile_timeout", "runtime_error",
                                             "run_timeout", "crash", "wrong_answer", "device_lost",
                                             "queue_timeout"}));
  for (const auto& k : kinds) {
    EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", k}}), 0) << k;
    EXPECT_EQ(exp.value("kiln_measures_total", {{"result", k}}), 0) << k;
  }
  EXPECT_EQ(exp.value("kiln_records_total"), 0);
  EXPECT_EQ(exp.value("kiln_build_queue_depth"), 0);
  EXPECT_EQ(exp.value("kiln_build_seconds_count"), 0);
}

TEST(ServerMetrics, GaugesFollowTheTrackerState) {
  Metrics m;
  m.set_jobs(tracker::JobState::kRunning, 3);
  m.set_jobs("queued", 2);
  m.set_device_counts({{"rk3399", {.online = 2, .busy = 1, .quarantined = 1}},
                       {"titanx", {.online = 0, .busy = 4, .quarantined = 0}}});
  m.set_queue_depths({{"rk3399", 17}, {"titanx", 0}});
  m.set_build_queue_depth(5);
  auto exp = parse(m);
  EXPECT_EQ(exp.value("kiln_jobs", {{"state", "running"}}), 3);
  EXPECT_EQ(exp.value("kiln_jobs", {{"state", "queued"}}), 2);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "rk3399"}, {"state", "online"}}), 2);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "rk3399"}, {"state", "busy"}}), 1);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "rk3399"}, {"state", "quarantined"}}), 1);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "titanx"}, {"state", "busy"}}), 4);
  EXPECT_EQ(exp.value("kiln_queue_depth", {{"key", "rk3399"}}), 17);
  EXPECT_EQ(exp.value("kiln_build_queue_depth"), 5);

  // A key that disappears reads 0 rather than its last value; set_job_counts zeroes the rest.
  m.set_device_counts({{"titanx", {.online = 1, .busy = 0, .quarantined = 0}}});
  m.set_queue_depths({{"titanx", 2}});
  m.set_job_counts({{tracker::JobState::kDone, 7}});
  exp = parse(m);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "rk3399"}, {"state", "online"}}), 0);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "rk3399"}, {"state", "quarantined"}}), 0);
  EXPECT_EQ(exp.value("kiln_devices", {{"key", "titanx"}, {"state", "online"}}), 1);
  EXPECT_EQ(exp.value("kiln_queue_depth", {{"key", "rk3399"}}), 0);
  EXPECT_EQ(exp.value("kiln_queue_depth", {{"key", "titanx"}}), 2);
  EXPECT_EQ(exp.value("kiln_jobs", {{"state", "done"}}), 7);
  EXPECT_EQ(exp.value("kiln_jobs", {{"state", "running"}}), 0);

  m.set_devices("rk3399", tracker::DeviceState::kBusy, 9);
  EXPECT_EQ(parse(m).value("kiln_devices", {{"key", "rk3399"}, {"state", "busy"}}), 9);

  EXPECT_ERROR_CONTAINS(m.set_jobs("paused", 1), "unknown job state \"paused\"");
  EXPECT_ERROR_CONTAINS(m.set_devices("k", "asleep", 1), "unknown device state \"asleep\"");
  EXPECT_ERROR_CONTAINS(m.record_error("gremlins"), "unknown error kind \"gremlins\"");
}

TEST(ServerMetrics, CountersMoveAfterUpdates) {
  Metrics m;
  m.observe_build(0.5, true);
  m.observe_build(0.7, true);
  m.observe_build(2.0, false);
  m.observe_build(90.0, ErrorKind::kCompileTimeout);
  m.observe_measure(0.003, ErrorKind::kNone);
  m.observe_measure(0.004, ErrorKind::kNone);
  m.observe_measure(1.5, ErrorKind::kCrash);
  m.observe_measure(10, ErrorKind::kRunTimeout);
  m.observe_queue_wait(0.2);
  m.give_up(tracker::GiveUpKind::kDeviceLost);
  m.give_up(tracker::GiveUpKind::kQueueTimeout);
  m.give_up(tracker::GiveUpKind::kQueueTimeout);
  m.record_error("wrong_answer");
  m.record_appended();
  m.record_appended(3);
  auto exp = parse(m);
  EXPECT_EQ(exp.value("kiln_builds_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(exp.value("kiln_builds_total", {{"result", "error"}}), 2);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "ok"}}), 2);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "crash"}}), 1);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "run_timeout"}}), 1);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "device_lost"}}), 1);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "queue_timeout"}}), 2);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "compile_error"}}), 1);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "compile_timeout"}}), 1);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "crash"}}), 1);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "run_timeout"}}), 1);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "device_lost"}}), 1);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "queue_timeout"}}), 2);
  EXPECT_EQ(exp.value("kiln_errors_total", {{"kind", "wrong_answer"}}), 1);
  EXPECT_EQ(exp.sum("kiln_errors_total"), 8);
  EXPECT_EQ(exp.value("kiln_records_total"), 4);

  EXPECT_EQ(exp.value("kiln_build_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(exp.value("kiln_build_seconds_sum"), 93.2);
  EXPECT_EQ(exp.value("kiln_build_seconds_bucket", {{"le", "+Inf"}}), 4);
  EXPECT_EQ(exp.value("kiln_measure_seconds_count"), 4);
  EXPECT_EQ(exp.value("kiln_queue_wait_seconds_count"), 1);
}

TEST(ServerMetrics, HistogramsAreConsistent) {
  Metrics m;
  const auto& bounds = Metrics::latency_buckets();
  EXPECT_EQ(bounds.front(), 0.001);
  EXPECT_EQ(bounds.back(), 60.0);
  for (size_t i = 1; i < bounds.size(); ++i) EXPECT_LT(bounds[i - 1], bounds[i]);
  for (double s : {0.0005, 0.001, 0.02, 0.02, 0.3, 4.0, 59.0, 61.0, 1000.0}) {
    m.observe_measure(s, ErrorKind::kNone);
    m.observe_queue_wait(s);
  }
  auto exp = parse(m);  // the parser checks cumulative buckets and +Inf == _count
  for (const char* name : {"kiln_measure_seconds", "kiln_queue_wait_seconds"}) {
    const auto* f = exp.find(name);
    ASSERT_NE(f, nullptr);
    size_t buckets = 0;
    for (const auto& s : f->samples) buckets += s.name == std::string(name) + "_bucket";
    EXPECT_EQ(buckets, bounds.size() + 1) << name;  // + le="+Inf"
    EXPECT_EQ(exp.value(std::string(name) + "_count"), 9);
  }
  // 0.0005 and 0.001 fall in le=0.001 (upper bounds are inclusive); 61 and 1000 only in +Inf.
  double first = -1, last_finite = -1;
  for (const auto& s : exp.find("kiln_measure_seconds")->samples) {
    if (s.name != "kiln_measure_seconds_bucket") continue;
    double le = s.labels.at("le") == "+Inf" ? INFINITY : std::stod(s.labels.at("le"));
    if (le == 0.001) first = s.value;
    if (le == 60) last_finite = s.value;
  }
  EXPECT_EQ(first, 2);
  EXPECT_EQ(last_finite, 7);
}

TEST(ServerMetrics, ConcurrentUpdatesAreCounted) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < 1000; ++i) {
        m.observe_measure(0.01, ErrorKind::kNone);
        m.set_queue_depth("key" + std::to_string(t), i);
        m.record_appended();
        if (i % 100 == 0) (void)m.text();
      }
    });
  for (auto& th : threads) th.join();
  auto exp = parse(m);
  EXPECT_EQ(exp.value("kiln_measures_total", {{"result", "ok"}}), 4000);
  EXPECT_EQ(exp.value("kiln_records_total"), 4000);
  EXPECT_EQ(exp.value("kiln_measure_seconds_count"), 4000);
  EXPECT_EQ(exp.value("kiln_queue_depth", {{"key", "key2"}}), 999);
}

// --- the parser itself -------------------------------------------------------------------------

const char* kGood =
    "# HELP req_total Requests \\\\ handled,\\nby code.\n"
    "# TYPE req_total counter\n"
    "req_total{code=\"200\",path=\"/a\\\"b\\\\c\\nd\"} 10 1700000000000\n"
    "req_total{code=\"500\",} 2\n"
    "\n"
    "# a free comment\n"
    "# TYPE temp gauge\n"
    "temp -3.5e1\n"
    "# TYPE lat histogram\n"
    "lat_bucket{le=\"0.1\"} 1\n"
    "lat_bucket{le=\"1\"} 3\n"
    "lat_bucket{le=\"+Inf\"} 4\n"
    "lat_sum 7.25\n"
    "lat_count 4\n"
    "# TYPE rpc summary\n"
    "rpc{quantile=\"0.5\"} NaN\n"
    "rpc_sum 0\n"
    "rpc_count 0\n"
    "bare_metric +Inf\n";

TEST(PrometheusTextParser, ParsesTheFormat) {
  auto exp = parse_prometheus_text(kGood);
  ASSERT_EQ(exp.families.size(), 5u);
  const auto* req = exp.find("req_total");
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->type, "counter");
  EXPECT_EQ(req->help, "Requests \\ handled,\nby code.");
  ASSERT_EQ(req->samples.size(), 2u);
  EXPECT_EQ(req->samples[0].labels.at("path"), "/a\"b\\c\nd");
  EXPECT_EQ(req->samples[0].timestamp_ms, 1700000000000);
  EXPECT_EQ(exp.value("req_total", {{"code", "500"}}), 2);
  EXPECT_EQ(exp.value("temp"), -35);
  EXPECT_EQ(exp.find("lat")->samples.size(), 5u);
  EXPECT_TRUE(std::isnan(exp.value("rpc", {{"quantile", "0.5"}})));
  EXPECT_EQ(exp.find("bare_metric")->type, "untyped");
  EXPECT_TRUE(std::isinf(exp.value("bare_metric")));
  EXPECT_EQ(exp.sum("req_total"), 12);
  EXPECT_THROW(exp.value("req_total", {{"code", "404"}}), PrometheusTextError);
}

// Parsing `text` fails with a message containing `needle`.
void expect_rejected(const std::string& text, const std::string& needle) {
  try {
    parse_prometheus_text(text);
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const PrometheusTextError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected: " << needle;
  }
}

TEST(PrometheusTextParser, RejectsMalformedText) {
  expect_rejected("a 1", "line 1: the text does not end with a newline");
  expect_rejected("a 1\n9bad 2\n", "line 2: bad metric name");
  expect_rejected("a{x=\"1\" 1\n", "line 1: expected , or }");
  expect_rejected("a{x=1} 1\n", "expected =\" after label x");
  expect_rejected("a{x=\"1\\t\"} 1\n", "bad escape \\t");
  expect_rejected("a{x=\"1} 1\n", "unterminated value of label x");
  expect_rejected("a{x=\"1\",x=\"2\"} 1\n", "duplicate label x");
  expect_rejected("a{1x=\"1\"} 1\n", "bad label name");
  expect_rejected("a\n", "expected a space before the value");
  expect_rejected("a 1x\n", "bad value \"1x\"");
  expect_rejected("a 0x10\n", "bad value");
  expect_rejected("a 1 12:00\n", "bad timestamp");
  expect_rejected("a 1\na 2\n", "line 2: duplicate sample a{}");
  expect_rejected("# TYPE a counter\n# TYPE a gauge\n", "line 2: second # TYPE for a");
  expect_rejected("# HELP a x\n# HELP a y\n", "second # HELP for a");
  expect_rejected("# TYPE a meter\n", "unknown type \"meter\"");
  expect_rejected("# HELP a bad \\q\n", "bad escape \\q in # HELP");
  expect_rejected("a 1\n# TYPE a gauge\n", "line 2: # TYPE for a after its samples");
  expect_rejected("# TYPE c counter\nc -1\n", "counter c is negative");
  expect_rejected("a 1\nb 1\na{x=\"y\"} 2\n", "line 3: the lines of family a are not together");
  expect_rejected("a 1\r\n", "carriage return");
}

TEST(PrometheusTextParser, RejectsInconsistentHistograms) {
  const std::string head = "# TYPE h histogram\n";
  // Not cumulative.
  expect_rejected(head +
                      "h_bucket{le=\"0.1\"} 3\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\n"
                      "h_sum 1\nh_count 3\n",
                  "line 3: histogram h{} buckets are not cumulative");
  // +Inf differs from _count.
  expect_rejected(head + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 4\n",
                  "le=\"+Inf\" bucket (3.000000) differs from _count (4.000000)");
  // No +Inf bucket.
  expect_rejected(head + "h_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n", "no le=\"+Inf\" bucket");
  // Missing _count / _sum / buckets.
  expect_rejected(head + "h_bucket{le=\"+Inf\"} 2\nh_sum 1\n", "histogram h{} has no _count");
  expect_rejected(head + "h_bucket{le=\"+Inf\"} 2\nh_count 2\n", "has no _sum");
  expect_rejected(head + "h_sum 1\nh_count 2\n", "has no buckets");
  // A bucket without le, a bad le, the same le twice, a plain sample of the histogram's name.
  expect_rejected(head + "h_bucket 2\n", "line 2: histogram bucket h_bucket without an le label");
  expect_rejected(head + "h_bucket{le=\"x\"} 2\nh_sum 1\nh_count 2\n", "bad le \"x\"");
  expect_rejected(head +
                      "h_bucket{le=\"1\"} 2\nh_bucket{le=\"1.0\"} 2\nh_bucket{le=\"+Inf\"} 2\n"
                      "h_sum 1\nh_count 2\n",
                  "two buckets with le 1.0");
  expect_rejected(head + "h 2\n", "sample h does not fit histogram family h");
  // Per label set: one series consistent, the other not.
  expect_rejected(head +
                      "h_bucket{k=\"a\",le=\"+Inf\"} 1\nh_sum{k=\"a\"} 1\nh_count{k=\"a\"} 1\n"
                      "h_bucket{k=\"b\",le=\"+Inf\"} 1\nh_sum{k=\"b\"} 1\nh_count{k=\"b\"} 2\n",
                  "histogram h{k=\"b\"}");
  // A histogram's sample after another family.
  expect_rejected(head + "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\nx 1\nh_sum{k=\"z\"} 1\n",
                  "line 6: sample h_sum apart from the lines of family h");
}

}  // namespace
}  // namespace kiln
