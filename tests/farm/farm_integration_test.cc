// The farm as real processes on 127.0.0.1: kilnd, kiln-worker and kiln-agent programs.
//  1. Two workers and three agents under two keys tune two jobs; the work spreads over the
//     agents of a key and over the workers; the fetched bundle computes what a local compile
//     does; /metrics stays valid Prometheus text and its counters move.
//  2. An agent SIGKILLed while it measures: its request is re-run on another device and the job
//     completes.
//  3. kilnd SIGKILLed in the middle of a job and started again on the same state: the job
//     resumes and completes, every result an agent saw acknowledged is in the record log, and no
//     config of any task is measured twice.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "records/record_log.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/prometheus_text.h"
#include "tests/common/small_cnn.h"
#include "tests/farm/farm_test_util.h"
#include "tests/farm/small_cnn_check.h"

namespace kiln {
namespace {

using testing::ChildProcess;
using testing::context;
using testing::eventually;
using testing::Kilnd;
using testing::TempDir;
using namespace std::chrono_literals;

class FarmIntegrationTest : public ::testing::Test {
 protected:
  std::unique_ptr<ChildProcess> worker(Kilnd& k, const std::string& name) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{KILN_WORKER_BINARY, "--tracker", k.grpc_address(), "--name", name,
                                 "--threads", "1"},
        dir_.file(name + ".log"));
  }
  std::unique_ptr<ChildProcess> agent(Kilnd& k, const std::string& name, const std::string& key,
                                      const std::string& target = "llvm") {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{KILN_AGENT_BINARY, "--tracker", k.grpc_address(), "--key", key,
                                 "--target", target, "--fingerprint", name, "--threads", "1"},
        dir_.file(name + ".log"));
  }
  uint64_t submit(Kilnd& k, const std::string& key, const std::string& target, uint32_t trials) {
    v1::SubmitModelRequest r;
    r.set_name("cnn");
    r.set_target(target);
    r.set_device_key(key);
    r.set_trials(trials);
    v1::SubmitModelResponse resp;
    const grpc::Status st =
        testing::submit_model(*k.service(), *context(), r, testing::small_cnn_model(), &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.job_id();
  }
  v1::Job job(Kilnd& k, uint64_t id) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job j;
    k.service()->GetJob(context().get(), req, &j);
    return j;
  }
  /// Waits for the job to finish; returns its final state.
  v1::JobState wait_done(Kilnd& k, uint64_t id, std::chrono::seconds timeout) {
    v1::Job j;
    eventually(
        [&] {
          j = job(k, id);
          const auto s = j.progress().state();
          return s == v1::JOB_STATE_DONE || s == v1::JOB_STATE_FAILED ||
                 s == v1::JOB_STATE_CANCELLED;
        },
        timeout);
    EXPECT_EQ(j.progress().state(), v1::JOB_STATE_DONE) << j.error();
    return j.progress().state();
  }
  std::vector<v1::DeviceInfo> devices(Kilnd& k) {
    v1::ListDevicesResponse d;
    k.service()->ListDevices(context().get(), {}, &d);
    return {d.devices().begin(), d.devices().end()};
  }
  std::string fetch(Kilnd& k, uint64_t id) {
    v1::FetchBundleRequest req;
    req.set_job_id(id);
    auto ctx = context();
    auto reader = k.service()->FetchBundle(ctx.get(), req);
    std::string bytes;
    v1::BundleChunk c;
    while (reader->Read(&c)) bytes += c.data();
    EXPECT_TRUE(reader->Finish().ok());
    return bytes;
  }
  test::PromExposition metrics(Kilnd& k) {
    return test::parse_prometheus_text(testing::http_get(k.http_address(), "/metrics").body);
  }

  TempDir dir_{"farm_it"};
};

TEST_F(FarmIntegrationTest, TuningSpreadsOverAgentsAndWorkersAndTheBundleMatches) {
  Kilnd k(dir_, {"--batch", "4", "--repeat", "2"});
  const auto before = metrics(k);
  auto w1 = worker(k, "w1");
  auto w2 = worker(k, "w2");
  auto a1 = agent(k, "a1", "a");
  auto a2 = agent(k, "a2", "a");
  auto b1 = agent(k, "b1", "b", "llvm -mcpu=x86-64");
  ASSERT_TRUE(eventually([&] { return devices(k).size() == 3; }, 30s));

  const uint64_t ja = submit(k, "a", "llvm", 12);
  const uint64_t jb = submit(k, "b", "llvm -mcpu=x86-64", 4);
  ASSERT_EQ(wait_done(k, ja, 300s), v1::JOB_STATE_DONE);
  ASSERT_EQ(wait_done(k, jb, 300s), v1::JOB_STATE_DONE);

  // Every agent measured, both of key "a" shared job a, and both workers built.
  std::map<std::string, uint64_t> completed;
  for (const v1::DeviceInfo& d : devices(k)) completed[d.fingerprint()] = d.completed();
  EXPECT_GT(completed["a1"], 0u);
  EXPECT_GT(completed["a2"], 0u);
  EXPECT_GT(completed["b1"], 0u);
  EXPECT_NE(w1->stderr_text().find("rebuilt from its workload"), std::string::npos)
      << w1->stderr_text();
  EXPECT_NE(w2->stderr_text().find("rebuilt from its workload"), std::string::npos)
      << w2->stderr_text();

  // The fetched bundle computes what a local compile computes.
  std::ofstream(dir_.file("a.kiln"), std::ios::binary) << fetch(k, ja);
  EXPECT_TRUE(testing::small_cnn_bundle_matches_local(dir_, dir_.file("a.kiln"), 11));

  // /metrics: valid, and its counters moved.
  const auto after = metrics(k);
  EXPECT_GT(after.value("kiln_measures_total", {{"result", "ok"}}),
            before.value("kiln_measures_total", {{"result", "ok"}}));
  EXPECT_GT(after.value("kiln_builds_total", {{"result", "ok"}}),
            before.value("kiln_builds_total", {{"result", "ok"}}));
  EXPECT_GE(after.value("kiln_records_total"), completed["a1"] + completed["a2"] + completed["b1"]);
  EXPECT_GT(after.value("kiln_measure_seconds_count"), 0.0);
  // kiln_jobs is refreshed by kilnd's ticker: both jobs show as done within a second or so.
  EXPECT_TRUE(eventually(
      [&] {
        return metrics(k).value("kiln_jobs", {{"state", "done"}}) == 2;
      },
      5s));
  EXPECT_EQ(after.value("kiln_devices", {{"key", "a"}, {"state", "online"}}) +
                after.value("kiln_devices", {{"key", "a"}, {"state", "busy"}}),
            2.0);
}

TEST_F(FarmIntegrationTest, AnAgentKilledWhileMeasuringHasItsWorkRunElsewhere) {
  Kilnd k(dir_, {"--batch", "4", "--repeat", "3", "--lease-ms", "3000"});
  auto w = worker(k, "w1");
  std::map<std::string, std::unique_ptr<ChildProcess>> agents;
  agents["a1"] = agent(k, "a1", "a");
  agents["a2"] = agent(k, "a2", "a");
  ASSERT_TRUE(eventually([&] { return devices(k).size() == 2; }, 30s));
  const uint64_t id = submit(k, "a", "llvm", 16);

  // SIGKILL the first agent seen running a request.
  std::string victim;
  ASSERT_TRUE(eventually(
      [&] {
        for (const v1::DeviceInfo& d : devices(k)) {
          if (d.in_flight() > 0 && d.completed() > 0) {
            victim = d.fingerprint();
            return true;
          }
        }
        return false;
      },
      120s));
  agents[victim]->signal(SIGKILL);
  agents[victim]->wait();
  const auto requeued_before = metrics(k).value("kiln_measures_total", {{"result", "ok"}});

  ASSERT_EQ(wait_done(k, id, 300s), v1::JOB_STATE_DONE);
  // The survivor did the rest, including the request the victim held.
  const std::string survivor = victim == "a1" ? "a2" : "a1";
  std::vector<v1::DeviceInfo> left = devices(k);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].fingerprint(), survivor);
  EXPECT_GT(metrics(k).value("kiln_measures_total", {{"result", "ok"}}), requeued_before);
  const v1::Job j = job(k, id);
  EXPECT_EQ(j.progress().tasks_done(), j.progress().tasks_total());
}

TEST_F(FarmIntegrationTest, KilndKilledMidJobResumesAndLosesNoAcknowledgedRecord) {
  auto k = std::make_unique<Kilnd>(dir_, std::vector<std::string>{"--batch", "4", "--repeat", "2"});
  auto w = worker(*k, "w1");
  auto a = agent(*k, "a1", "a");
  ASSERT_TRUE(eventually([&] { return devices(*k).size() == 1; }, 30s));
  const uint64_t id = submit(*k, "a", "llvm", 12);
  ASSERT_TRUE(eventually([&] { return job(*k, id).progress().trials_done() >= 6; }, 120s));
  k->kill(SIGKILL);

  // What the agent saw acknowledged before the kill: "request N (<task> #<config>): ..." then
  // "request N acknowledged".
  const std::string log = a->stderr_text();
  std::map<std::string, std::pair<std::string, uint64_t>> measured;
  std::set<std::pair<std::string, uint64_t>> acked;
  static const std::regex run_re("request (\\d+) \\((\\S+) #(\\d+)\\): ");
  static const std::regex ack_re("request (\\d+) acknowledged");
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, run_re)) measured[m[1]] = {m[2], std::stoull(m[3])};
    if (std::regex_search(line, m, ack_re)) acked.insert(measured.at(m[1]));
  }
  ASSERT_GE(acked.size(), 4u) << log;

  k->start();  // same state folder and ports; the agent and the worker reconnect
  ASSERT_EQ(wait_done(*k, id, 300s), v1::JOB_STATE_DONE);
  k->kill(SIGTERM);

  records::RecordLog records = records::RecordLog::open(k->state_dir() + "/records");
  for (const auto& [task, config] : acked)
    EXPECT_TRUE(records.measured(task, "llvm", config)) << task << " #" << config;
  for (const std::string& task : records.tasks("llvm")) {
    std::set<uint64_t> configs;
    for (const records::MeasureRecord& r : records.records(task, "llvm"))
      EXPECT_TRUE(configs.insert(r.config_index).second)
          << task << " #" << r.config_index << " twice";
  }
  EXPECT_NE(a->stderr_text().find("registering again"), std::string::npos);
}

}  // namespace
}  // namespace kiln
