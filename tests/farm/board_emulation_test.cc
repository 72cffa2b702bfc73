// A board under emulation, end to end: kilnd and a compiler worker on this x86 machine, the
// AArch64 kiln-agent (build/arm64, scripts/build-arm64.sh) under qemu-aarch64-static registering
// with key a53 and target "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53". The DQN model is
// submitted for that key and tuned (16 trials per task, kernels cross-compiled by the x86 worker,
// measured under qemu), the bundle fetched and run under qemu with the AArch64 kiln-run, and its
// output compared with ONNX Runtime's on x86 (tests/models/make_models.py). The records are
// marked emulated and kept in the log's emulated lane. Skipped, with the reason, where qemu or
// the AArch64 build is missing.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "onnx/onnx_pb.h"
#include "records/record_log.h"
#include "tests/common/child_process.h"
#include "tests/farm/farm_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::context;
using testing::Kilnd;
using testing::TempDir;

constexpr const char* kTarget = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";
constexpr uint32_t kTrials = 16;

std::string read(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// qemu-aarch64-static's path, "" when it is not on PATH.
std::string find_qemu() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d) / "qemu-aarch64-static";
    if (::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string arm64(const std::string& rel) { return std::string(KILN_ARM64_BUILD_DIR) + "/" + rel; }

TEST(BoardEmulation, DqnTunedForAnEmulatedA53RunsThereAndMatchesOnnxRuntime) {
  const std::string qemu = find_qemu();
  if (qemu.empty())
    GTEST_SKIP() << "qemu-aarch64-static is not installed (scripts/setup.sh installs it)";
  for (const char* p :
       {"device_agent/kiln-agent", "deploy/runtime/kiln-runner", "deploy/runtime/kiln-run"}) {
    if (::access(arm64(p).c_str(), X_OK) != 0)
      GTEST_SKIP() << arm64(p) << " is missing: build the AArch64 programs with "
                   << "scripts/build-arm64.sh";
  }
  const std::string data = KILN_MODELS_DATA_DIR;
  ASSERT_TRUE(fs::exists(data + "/dqn.onnx")) << "the models fixture writes " << data;

  TempDir dir("board_emulation");
  Kilnd kilnd(
      dir, {"--local-workers", "1", "--batch", "8", "--repeat", "2", "--run-timeout-ms", "60000"});
  auto service = kilnd.service();
  ChildProcess agent({qemu, arm64("device_agent/kiln-agent"), "--tracker", kilnd.grpc_address(),
                      "--key", "a53", "--target", kTarget, "--emulator", qemu, "--runner",
                      arm64("deploy/runtime/kiln-runner"), "--work-dir", dir.file("agent")},
                     dir.file("agent.log"));
  ASSERT_TRUE(testing::wait_for_devices(*service, 1, std::chrono::seconds(120)))
      << agent.stderr_text();

  // The board as the farm sees it: emulated, AArch64, the host's CPU behind qemu.
  {
    v1::ListDevicesResponse devices;
    ASSERT_TRUE(service->ListDevices(context().get(), {}, &devices).ok());
    const v1::DeviceInfo& d = devices.devices(0);
    EXPECT_EQ(d.key(), "a53");
    EXPECT_TRUE(d.capabilities().emulated());
    EXPECT_EQ(d.capabilities().arch(), "aarch64");
    EXPECT_EQ(d.capabilities().board().rfind("qemu-user", 0), 0u) << d.capabilities().board();
    EXPECT_NE(d.capabilities().cpu_model().find("aarch64 emulated on"), std::string::npos)
        << d.capabilities().cpu_model();
    EXPECT_GT(d.capabilities().cores(), 0u);
  }

  const std::string dqn = read(data + "/dqn.onnx");
  v1::SubmitModelRequest submit;
  submit.set_name("dqn");
  submit.set_target(kTarget);
  submit.set_device_key("a53");
  submit.set_trials(kTrials);
  v1::SubmitModelResponse submitted;
  {
    const grpc::Status st = testing::submit_model(*service, *context(), submit, dqn, &submitted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  v1::WatchJobRequest watch;
  watch.set_job_id(submitted.job_id());
  auto wctx = context("", std::chrono::seconds(1500));
  auto reader = service->WatchJob(wctx.get(), watch);
  v1::JobProgress p;
  while (reader->Read(&p)) {
  }
  ASSERT_TRUE(reader->Finish().ok());
  v1::Job job;
  {
    v1::GetJobRequest get;
    get.set_job_id(submitted.job_id());
    ASSERT_TRUE(service->GetJob(context().get(), get, &job).ok());
  }
  ASSERT_EQ(p.state(), v1::JOB_STATE_DONE) << job.error() << "\nkilnd:\n"
                                           << kilnd.process().stderr_text() << "\nagent:\n"
                                           << agent.stderr_text();
  EXPECT_GT(p.tasks_total(), 0u);
  EXPECT_GE(p.trials_done(), kTrials * p.tasks_total());

  // Fetch the bundle and run it under qemu with the board's kiln-run.
  ASSERT_TRUE(testing::fetch_bundle(*service, submitted.job_id(), dir.file("dqn.kiln")));
  onnx::ModelProto model;
  ASSERT_TRUE(model.ParseFromString(dqn));
  const std::string input = model.graph().input(0).name();
  {
    ChildProcess run({qemu, arm64("deploy/runtime/kiln-run"), dir.file("dqn.kiln"), "--input",
                      input + "=" + data + "/dqn.input.npy", "-o", dir.file("out")},
                     dir.file("kiln-run.log"));
    const int status = run.wait();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "kiln-run under qemu: status " << status << "\n"
        << run.stderr_text();
  }
  const std::string output = model.graph().output(0).name();
  const runtime::NDArray got = runtime::load_npy(dir.file("out") + "/" + output + ".npy");
  const runtime::NDArray want = runtime::load_npy(data + "/dqn.expected.npy");
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(g[i]) - w[i]));
    max_ref = std::max(max_ref, std::abs(double(w[i])));
  }
  EXPECT_LE(max_diff, 1e-4 * std::max(1.0, max_ref)) << "max|ref| " << max_ref;
  std::cout << "board_emulation: tasks=" << p.tasks_total() << " trials=" << p.trials_done()
            << " best_latency_ms=" << p.best_latency_s() * 1e3 << " max_diff=" << max_diff
            << " max_ref=" << max_ref << "\n";

  // The records: in the emulated lane, marked, at least kTrials per task; none in the real one.
  kilnd.kill(SIGTERM);
  agent.signal(SIGTERM);
  agent.wait();
  records::RecordLog log = records::RecordLog::open(kilnd.state_dir() + "/records");
  const std::vector<std::string> tasks = log.tasks(kTarget, records::Lane::kEmulated);
  EXPECT_EQ(tasks.size(), p.tasks_total());
  EXPECT_TRUE(log.tasks(kTarget).empty()) << "no emulated timing in a real board's lane";
  for (const std::string& task : tasks) {
    const auto recs = log.records(task, kTarget, records::Lane::kEmulated);
    EXPECT_GE(recs.size(), kTrials) << task;
    std::cout << "board_emulation: task " << task << " records=" << recs.size() << "\n";
    for (const records::MeasureRecord& r : recs) EXPECT_TRUE(r.emulated) << task;
    EXPECT_TRUE(log.best(task, kTarget, records::Lane::kEmulated)) << task;
  }
}

}  // namespace
}  // namespace kiln
