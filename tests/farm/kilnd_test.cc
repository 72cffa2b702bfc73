// kilnd as a process on 127.0.0.1: bad requests answered with the right gRPC status and a message
// naming the problem, the token, TLS, /metrics in Prometheus text format, and the embedded
// default (a worker and a CPU agent started by kilnd) tuning a small CNN whose fetched bundle
// computes what a local compile computes: per task, under a budget (spent exactly, the rounds
// after the first where the model gains most) and under a time limit (no round started after it).
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "base/json.h"
#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "server/metrics.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/prometheus_text.h"
#include "tests/common/small_cnn.h"
#include "tests/farm/farm_test_util.h"
#include "tests/farm/small_cnn_check.h"

namespace kiln {
namespace {

using grpc::StatusCode;
using kiln::Json;
using testing::context;
using testing::Kilnd;
using testing::TempDir;

std::string read(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

v1::SubmitModelRequest good_submission() {
  v1::SubmitModelRequest r;
  r.set_name("cnn");
  r.set_target("llvm");
  r.set_device_key("cpu");
  r.set_trials(4);
  r.set_owner("ana");
  return r;
}

/// The status of SubmitModel(r) with `model` (the small CNN when empty) uploaded in chunks.
grpc::Status submit(v1::KilnService::Stub& s, const v1::SubmitModelRequest& r,
                    uint64_t* id = nullptr, const std::string& token = "",
                    const std::string& model = "") {
  v1::SubmitModelResponse resp;
  auto ctx = context(token);
  grpc::Status st =
      testing::submit_model(s, *ctx, r, model.empty() ? testing::small_cnn_model() : model, &resp);
  if (id) *id = resp.job_id();
  return st;
}

#define EXPECT_STATUS(status, code, text)                                                \
  do {                                                                                   \
    const grpc::Status st_ = (status);                                                   \
    EXPECT_EQ(st_.error_code(), code) << st_.error_message();                            \
    EXPECT_NE(st_.error_message().find(text), std::string::npos) << st_.error_message(); \
  } while (0)

TEST(KilndTest, BadRequestsGetTheRightStatusAndName) {
  TempDir dir("kilnd_bad");
  Kilnd kilnd(dir, {"--max-model-bytes", "20000", "--max-running-jobs", "1"});
  auto tracker = kilnd.tracker();
  auto service = kilnd.service();

  // Devices: a key and a target are required; the target must be one Kiln knows.
  v1::RegisterDeviceRequest reg;
  v1::RegisterDeviceResponse reg_resp;
  reg.set_target("llvm");
  EXPECT_STATUS(tracker->RegisterDevice(context().get(), reg, &reg_resp),
                StatusCode::INVALID_ARGUMENT, "device key is empty");
  reg.set_key("cpu");
  reg.set_target("verilog");
  EXPECT_STATUS(tracker->RegisterDevice(context().get(), reg, &reg_resp),
                StatusCode::INVALID_ARGUMENT, "unknown target 'verilog'");
  reg.set_target("llvm");
  reg.mutable_capabilities()->set_arch("aarch64");  // a board whose target builds x86 code
  EXPECT_STATUS(tracker->RegisterDevice(context().get(), reg, &reg_resp),
                StatusCode::INVALID_ARGUMENT, "give -mtriple=aarch64-linux-gnu");
  reg.mutable_capabilities()->clear_arch();
  ASSERT_TRUE(tracker->RegisterDevice(context().get(), reg, &reg_resp).ok());
  EXPECT_GT(reg_resp.device_id(), 0u);
  EXPECT_FALSE(reg_resp.tracker_instance().empty());

  // Submissions: each missing field is named.
  for (const char* field : {"target", "device_key", "trials"}) {
    v1::SubmitModelRequest r = good_submission();
    r.GetReflection()->ClearField(&r, r.GetDescriptor()->FindFieldByName(field));
    EXPECT_STATUS(submit(*service, r), StatusCode::INVALID_ARGUMENT,
                  std::string(field) + " is missing");
  }
  // How much to measure: each value refused names its field and the value.
  auto refused = [&](const std::function<void(v1::SubmitModelRequest&)>& change,
                     const std::string& text) {
    v1::SubmitModelRequest r = good_submission();
    change(r);
    EXPECT_STATUS(submit(*service, r), StatusCode::INVALID_ARGUMENT, text);
  };
  refused(
      [](auto& r) {
        r.set_budget(12);
        r.set_time_limit_s(std::nan(""));
      },
      "time_limit_s is nan; it must be a finite number of seconds");
  refused([](auto& r) { r.set_time_limit_s(-5); }, "time_limit_s is -5");
  refused([](auto& r) { r.set_time_limit_s(INFINITY); }, "time_limit_s is inf");
  refused([](auto& r) { r.set_time_limit_s(1e9); },
          "time_limit_s 1e+09 is over the limit of 2592000 seconds (30 days)");
  refused([](auto& r) { r.set_budget(2000000); },
          "budget 2000000 is over this farm's limit of 1000000 measurements per job");
  refused([](auto& r) { r.set_early_stop(8); }, "early_stop 8 needs a budget or a time_limit_s");
  refused(
      [](auto& r) {
        r.set_budget(100);
        r.set_early_stop(20000);
      },
      "early_stop 20000 is over this farm's limit of 10000 trials per task");
  refused(
      [](auto& r) {
        r.set_budget(100);
        r.set_trials(20000);
      },
      "trials 20000 is over this farm's limit of 10000 per task");
  v1::SubmitModelRequest r = good_submission();
  r.set_target("verilog");
  EXPECT_STATUS(submit(*service, r), StatusCode::INVALID_ARGUMENT, "unknown target 'verilog'");
  r = good_submission();
  r.set_device_key("tpu");
  EXPECT_STATUS(submit(*service, r), StatusCode::NOT_FOUND, "no device of key 'tpu'");
  EXPECT_STATUS(submit(*service, r), StatusCode::NOT_FOUND, "known keys: cpu");
  r = good_submission();
  EXPECT_STATUS(submit(*service, r, nullptr, "", "this is not an ONNX model"),
                StatusCode::INVALID_ARGUMENT, "does not import");
  EXPECT_STATUS(submit(*service, r, nullptr, "", std::string(30000, 'x')),
                StatusCode::RESOURCE_EXHAUSTED, "limit of 20000 bytes");

  // A budget or a time limit stands for trials, which then caps each task; the job says so.
  {
    v1::SubmitModelRequest budgeted = good_submission();
    budgeted.clear_trials();
    budgeted.set_budget(40);
    budgeted.set_time_limit_s(90);
    budgeted.set_early_stop(0);
    uint64_t id = 0;
    ASSERT_TRUE(submit(*service, budgeted, &id).ok());
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::Job job;
    ASSERT_TRUE(service->GetJob(context().get(), get, &job).ok());
    EXPECT_EQ(job.trials(), 0u);
    EXPECT_EQ(job.budget(), 40u);
    EXPECT_EQ(job.time_limit_s(), 90.0);
    ASSERT_TRUE(job.has_early_stop());
    EXPECT_EQ(job.early_stop(), 0u);
    v1::CancelJobRequest cancel;
    cancel.set_job_id(id);
    ASSERT_TRUE(service->CancelJob(context().get(), cancel, &job).ok());
  }

  // Jobs: unknown ids, a bundle before the job is done, cancelling twice.
  v1::Job job;
  v1::GetJobRequest get;
  EXPECT_STATUS(service->GetJob(context().get(), get, &job), StatusCode::INVALID_ARGUMENT,
                "job_id is missing");
  get.set_job_id(99);
  EXPECT_STATUS(service->GetJob(context().get(), get, &job), StatusCode::NOT_FOUND, "no job 99");
  uint64_t id = 0;
  ASSERT_TRUE(submit(*service, good_submission(), &id).ok());
  v1::FetchBundleRequest fetch;
  fetch.set_job_id(id);
  {
    auto ctx = context();
    auto reader = service->FetchBundle(ctx.get(), fetch);
    v1::BundleChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    EXPECT_STATUS(reader->Finish(), StatusCode::FAILED_PRECONDITION, "once it is done");
  }
  v1::CancelJobRequest cancel;
  cancel.set_job_id(id);
  ASSERT_TRUE(service->CancelJob(context().get(), cancel, &job).ok());
  EXPECT_EQ(job.progress().state(), v1::JOB_STATE_CANCELLED);
  EXPECT_STATUS(service->CancelJob(context().get(), cancel, &job), StatusCode::FAILED_PRECONDITION,
                "already cancelled");

  // The tracker's side: missing ids, stale results, unknown devices.
  v1::MeasureResult result;
  v1::ReportResultResponse ack;
  EXPECT_STATUS(tracker->ReportResult(context().get(), result, &ack), StatusCode::INVALID_ARGUMENT,
                "request_id is missing");
  result.set_request_id(12345);
  result.set_device_id(reg_resp.device_id());
  ASSERT_TRUE(tracker->ReportResult(context().get(), result, &ack).ok());
  EXPECT_FALSE(ack.accepted());
  v1::GetWorkRequest work;
  work.set_device_id(777);
  {
    auto ctx = context();
    auto reader = tracker->GetWork(ctx.get(), work);
    v1::MeasureRequest m;
    EXPECT_FALSE(reader->Read(&m));
    EXPECT_STATUS(reader->Finish(), StatusCode::NOT_FOUND, "device 777 is not registered");
  }

  // The job drivers' service: only the driver kilnd started for a job, with its secret, is
  // answered; nobody else can read a job's model, append records or upload its bundle.
  auto driver = v1::JobDriver::NewStub(kilnd.channel());
  v1::DriverJobRequest who;
  v1::DriverJob spec;
  EXPECT_STATUS(driver->GetDriverJob(context().get(), who, &spec), StatusCode::PERMISSION_DENIED,
                "not the current driver of job 0");
  who.mutable_auth()->set_job_id(id);
  who.mutable_auth()->set_secret("guess");
  EXPECT_STATUS(driver->GetDriverJob(context().get(), who, &spec), StatusCode::PERMISSION_DENIED,
                "not the current driver of job");
  {
    auto ctx = context();
    auto model = driver->FetchModel(ctx.get(), who);
    v1::BundleChunk chunk;
    EXPECT_FALSE(model->Read(&chunk));
    EXPECT_STATUS(model->Finish(), StatusCode::PERMISSION_DENIED, "not the current driver of job");
  }
  v1::AppendRecordsRequest append;
  *append.mutable_auth() = who.auth();
  append.add_records()->set_task_key("t");
  v1::AppendRecordsResponse appended;
  EXPECT_STATUS(driver->AppendRecords(context().get(), append, &appended),
                StatusCode::PERMISSION_DENIED, "not the current driver");
  {
    auto ctx = context();
    v1::UploadBundleResponse up;
    auto writer = driver->UploadBundle(ctx.get(), &up);
    v1::BundleUpload chunk;
    *chunk.mutable_auth() = who.auth();
    chunk.set_data("not a bundle");
    chunk.set_last(true);
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_STATUS(writer->Finish(), StatusCode::PERMISSION_DENIED, "not the current driver");
  }

  // None of this hurt kilnd.
  v1::ListJobsResponse list;
  ASSERT_TRUE(service->ListJobs(context().get(), {}, &list).ok());
  EXPECT_EQ(list.jobs_size(), 2);
}

TEST(KilndTest, SubmissionsPastTheRateLimitAreRefused) {
  TempDir dir("kilnd_rate");
  Kilnd kilnd(dir, {"--submits-per-minute", "2", "--max-running-jobs", "1"});
  v1::RegisterDeviceRequest reg;
  reg.set_key("cpu");
  reg.set_target("llvm");
  v1::RegisterDeviceResponse resp;
  ASSERT_TRUE(kilnd.tracker()->RegisterDevice(context().get(), reg, &resp).ok());
  auto service = kilnd.service();
  EXPECT_TRUE(submit(*service, good_submission()).ok());
  EXPECT_TRUE(submit(*service, good_submission()).ok());
  EXPECT_STATUS(submit(*service, good_submission()), StatusCode::RESOURCE_EXHAUSTED,
                "more than 2 submissions in a minute");
  // Other calls are not limited.
  v1::ListJobsResponse list;
  ASSERT_TRUE(service->ListJobs(context().get(), {}, &list).ok());
  EXPECT_EQ(list.jobs_size(), 2);
}

TEST(KilndTest, TheTokenIsRequiredOnBothServices) {
  TempDir dir("kilnd_token");
  std::ofstream(dir.file("token")) << "s3cret\n";
  Kilnd kilnd(dir, {"--token-file", dir.file("token")});
  auto service = kilnd.service();
  auto tracker = kilnd.tracker();
  v1::ListJobsResponse list;
  EXPECT_STATUS(service->ListJobs(context().get(), {}, &list), StatusCode::UNAUTHENTICATED,
                "requires a token");
  EXPECT_STATUS(service->ListJobs(context("wrong").get(), {}, &list), StatusCode::UNAUTHENTICATED,
                "token is wrong");
  EXPECT_TRUE(service->ListJobs(context("s3cret").get(), {}, &list).ok());
  v1::RegisterDeviceRequest reg;
  reg.set_key("cpu");
  reg.set_target("llvm");
  v1::RegisterDeviceResponse resp;
  EXPECT_STATUS(tracker->RegisterDevice(context().get(), reg, &resp), StatusCode::UNAUTHENTICATED,
                "requires a token");
  EXPECT_TRUE(tracker->RegisterDevice(context("s3cret").get(), reg, &resp).ok());
  EXPECT_STATUS(submit(*service, good_submission(), nullptr, "nope"), StatusCode::UNAUTHENTICATED,
                "token is wrong");
  // The token never appears in what kilnd says.
  EXPECT_EQ(kilnd.process().stderr_text().find("s3cret"), std::string::npos);
  EXPECT_EQ(testing::http_get(kilnd.http_address(), "/metrics").body.find("s3cret"),
            std::string::npos);
}

TEST(KilndTest, TlsWithTheFarmsCertificate) {
  TempDir dir("kilnd_tls");
  const std::string cmd =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      dir.file("key.pem") + " -out " + dir.file("cert.pem") + " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make a certificate";
  Kilnd kilnd(dir, {"--tls-cert", dir.file("cert.pem"), "--tls-key", dir.file("key.pem")});
  v1::ListJobsResponse list;
  auto secure = kilnd.service(dir.file("cert.pem"));
  EXPECT_TRUE(secure->ListJobs(context().get(), {}, &list).ok());
  auto plain = kilnd.service();
  const grpc::Status st = plain->ListJobs(context("", std::chrono::seconds(3)).get(), {}, &list);
  EXPECT_FALSE(st.ok());
}

TEST(KilndTest, MetricsAreValidPrometheusText) {
  TempDir dir("kilnd_metrics");
  Kilnd kilnd(dir, {});
  const testing::HttpResponse r = testing::http_get(kilnd.http_address(), "/metrics");
  ASSERT_EQ(r.status, 200);
  const auto exp = test::parse_prometheus_text(r.body);
  for (const std::string& name : server::Metrics::metric_names())
    EXPECT_NE(exp.find(name), nullptr) << name;
}

TEST(KilndTest, EmbeddedFarmTunesAModelAndTheFetchedBundleMatchesALocalCompile) {
  TempDir dir("kilnd_embedded");
  Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
                    "--batch", "4", "--repeat", "1"});
  auto service = kilnd.service();
  // The local agent registers through kilnd's own port.
  ASSERT_TRUE(testing::wait_for_devices(*service, 1));
  uint64_t id = 0;
  ASSERT_TRUE(submit(*service, good_submission(), &id).ok());

  // Follow it to the end.
  v1::WatchJobRequest watch;
  watch.set_job_id(id);
  auto ctx = context("", std::chrono::seconds(300));
  auto reader = service->WatchJob(ctx.get(), watch);
  v1::JobProgress p;
  std::vector<uint64_t> trials;
  while (reader->Read(&p)) trials.push_back(p.trials_done());
  ASSERT_TRUE(reader->Finish().ok());
  if (p.state() != v1::JOB_STATE_DONE) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::Job job;
    service->GetJob(context().get(), get, &job);
    FAIL() << "job ended " << v1::JobState_Name(p.state()) << ": " << job.error() << "\n"
           << kilnd.process().stderr_text();
  }
  EXPECT_EQ(p.tasks_total(), 4u);
  EXPECT_EQ(p.tasks_done(), 4u);
  EXPECT_GE(p.trials_done(), 8u);
  EXPECT_GT(p.best_latency_s(), 0.0);
  EXPECT_GT(trials.size(), 2u);  // progress came as it happened

  // Fetch the bundle.
  v1::FetchBundleRequest fetch;
  fetch.set_job_id(id);
  fetch.set_chunk_bytes(8192);
  auto fctx = context();
  auto chunks = service->FetchBundle(fctx.get(), fetch);
  std::string bytes;
  v1::BundleChunk c;
  int n = 0;
  while (chunks->Read(&c)) {
    EXPECT_EQ(c.offset(), bytes.size());
    bytes += c.data();
    ++n;
  }
  ASSERT_TRUE(chunks->Finish().ok());
  EXPECT_TRUE(c.last());
  EXPECT_EQ(c.total_size(), bytes.size());
  EXPECT_GT(n, 1);
  std::ofstream(dir.file("fetched.kiln"), std::ios::binary) << bytes;

  // It computes what a local compile of the same model computes.
  EXPECT_TRUE(testing::small_cnn_bundle_matches_local(dir, dir.file("fetched.kiln"), 7));

  // The device measured, and /metrics saw it.
  v1::ListDevicesResponse devices;
  ASSERT_TRUE(service->ListDevices(context().get(), {}, &devices).ok());
  ASSERT_EQ(devices.devices_size(), 1);
  EXPECT_GT(devices.devices(0).completed(), 0u);
  const auto exp =
      test::parse_prometheus_text(testing::http_get(kilnd.http_address(), "/metrics").body);
  EXPECT_GT(exp.value("kiln_measures_total", {{"result", "ok"}}), 0.0);
  EXPECT_GT(exp.value("kiln_records_total", {}), 0.0);
  EXPECT_GT(exp.value("kiln_builds_total", {{"result", "ok"}}), 0.0);

  // SIGTERM: a clean exit.
  kilnd.process().signal(SIGTERM);
  ASSERT_TRUE(kilnd.process().wait_for_exit(std::chrono::seconds(20)));
  EXPECT_TRUE(WIFEXITED(kilnd.process().wait()) && WEXITSTATUS(kilnd.process().wait()) == 0);
  (void)read;
}

TEST(KilndTest, EmbeddedFarmSpendsABudgetWhereTheModelGainsMost) {
  TempDir dir("kilnd_budget");
  Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
                    "--batch", "4", "--repeat", "1"});
  auto service = kilnd.service();
  ASSERT_TRUE(testing::wait_for_devices(*service, 1));
  // 14 measurements over the small CNN's 4 tasks, no cap per task: a first round of 3 each (the
  // budget's share), then 2 more where the model's estimated latency drops most.
  constexpr uint64_t kBudget = 14;
  v1::SubmitModelRequest r = good_submission();
  r.clear_trials();
  r.set_budget(kBudget);
  r.set_early_stop(0);
  uint64_t id = 0;
  ASSERT_TRUE(submit(*service, r, &id).ok());

  v1::WatchJobRequest watch;
  watch.set_job_id(id);
  auto ctx = context("", std::chrono::seconds(300));
  auto reader = service->WatchJob(ctx.get(), watch);
  v1::JobProgress p;
  std::set<std::string> phases;
  uint64_t most = 0;
  while (reader->Read(&p)) {
    most = std::max<uint64_t>(most, p.trials_done());
    if (p.phase().rfind("tuning task ", 0) == 0) phases.insert(p.phase());
  }
  ASSERT_TRUE(reader->Finish().ok());
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  ASSERT_TRUE(service->GetJob(context().get(), get, &job).ok());
  ASSERT_EQ(p.state(), v1::JOB_STATE_DONE) << job.error() << "\n" << kilnd.process().stderr_text();
  EXPECT_EQ(job.budget(), kBudget);
  EXPECT_EQ(job.trials(), 0u);
  EXPECT_EQ(p.tasks_total(), 4u);
  EXPECT_EQ(p.tasks_done(), 4u);
  EXPECT_EQ(p.trials_done(), kBudget);  // the budget, spent exactly
  EXPECT_EQ(most, kBudget);             // and never past it
  EXPECT_EQ(phases.size(), 4u) << "each task's rounds were announced";

  // The record log holds exactly the budget's records: every task its first round, some more.
  const Json detail = Json::parse(
      testing::http_get(kilnd.http_address(), "/api/v1/jobs/" + std::to_string(id)).body, "job");
  const Json& dj = detail.at("job", "detail");
  EXPECT_EQ(dj.at("budget", "job").as_int("budget"), static_cast<int64_t>(kBudget));
  EXPECT_EQ(dj.at("trials_total", "job").as_int("trials_total"), static_cast<int64_t>(kBudget));
  EXPECT_EQ(dj.at("progress", "job").as_double("progress"), 1.0);
  int64_t records = 0, most_of_a_task = 0;
  for (const Json& task : dj.at("tasks", "job").as_array("tasks")) {
    const int64_t n = task.at("trials", "task").as_int("trials");
    EXPECT_GE(n, 3) << detail.dump();
    EXPECT_EQ(task.at("status", "task").as_string("status"), "done");
    records += n;
    most_of_a_task = std::max(most_of_a_task, n);
  }
  EXPECT_EQ(records, static_cast<int64_t>(kBudget)) << detail.dump();
  EXPECT_GT(most_of_a_task, 3) << "the rounds after the first went where the model gains most";

  // Its bundle computes what a local compile of the same model computes.
  v1::FetchBundleRequest fetch;
  fetch.set_job_id(id);
  auto fctx = context();
  auto chunks = service->FetchBundle(fctx.get(), fetch);
  std::string bytes;
  v1::BundleChunk c;
  while (chunks->Read(&c)) bytes += c.data();
  ASSERT_TRUE(chunks->Finish().ok());
  std::ofstream(dir.file("budget.kiln"), std::ios::binary) << bytes;
  EXPECT_TRUE(testing::small_cnn_bundle_matches_local(dir, dir.file("budget.kiln"), 7));
}

TEST(KilndTest, EmbeddedFarmStartsNoRoundAfterTheTimeLimit) {
  TempDir dir("kilnd_time");
  Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
                    "--batch", "4", "--repeat", "1"});
  auto service = kilnd.service();
  ASSERT_TRUE(testing::wait_for_devices(*service, 1));
  constexpr double kLimitS = 3;
  v1::SubmitModelRequest r = good_submission();
  r.clear_trials();
  r.set_time_limit_s(kLimitS);
  uint64_t id = 0;
  ASSERT_TRUE(submit(*service, r, &id).ok());

  // Each round is announced as a phase when it starts: when kilnd recorded it.
  v1::WatchJobRequest watch;
  watch.set_job_id(id);
  auto ctx = context("", std::chrono::seconds(300));
  auto reader = service->WatchJob(ctx.get(), watch);
  v1::JobProgress p;
  std::vector<int64_t> round_starts_ms;
  std::string last_phase;
  while (reader->Read(&p)) {
    if (p.phase() != last_phase && p.phase().rfind("tuning task ", 0) == 0)
      round_starts_ms.push_back(p.updated_ms());
    last_phase = p.phase();
  }
  ASSERT_TRUE(reader->Finish().ok());
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  ASSERT_TRUE(service->GetJob(context().get(), get, &job).ok());
  ASSERT_EQ(p.state(), v1::JOB_STATE_DONE) << job.error() << "\n" << kilnd.process().stderr_text();
  EXPECT_EQ(job.time_limit_s(), kLimitS);
  EXPECT_EQ(job.budget(), 0u);
  // The limit counts from the job's start (its import included): no round started after it, and
  // the one running then finished before the bundle was built.
  for (int64_t t : round_starts_ms)
    EXPECT_LE(t, job.started_ms() + static_cast<int64_t>(kLimitS * 1e3)) << "a round started late";
  EXPECT_EQ(p.tasks_done(), 4u);  // every task done once tuning ends
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  const Json detail = Json::parse(testing::http_get(kilnd.http_address(), path).body, "job");
  EXPECT_EQ(detail.at("job", "d").at("time_limit_s", "job").as_double("time_limit_s"), kLimitS);
  EXPECT_EQ(detail.at("job", "d").at("trials_total", "job").as_int("trials_total"), 0)
      << "only the time bounds it";

  v1::FetchBundleRequest fetch;
  fetch.set_job_id(id);
  auto fctx = context();
  auto chunks = service->FetchBundle(fctx.get(), fetch);
  std::string bytes;
  v1::BundleChunk c;
  while (chunks->Read(&c)) bytes += c.data();
  ASSERT_TRUE(chunks->Finish().ok());
  std::ofstream(dir.file("timed.kiln"), std::ios::binary) << bytes;
  EXPECT_TRUE(testing::small_cnn_bundle_matches_local(dir, dir.file("timed.kiln"), 7));
}

}  // namespace
}  // namespace kiln
