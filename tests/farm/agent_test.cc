// The device agent (device_agent/agent.h, kiln-agent) against a fake tracker served in this
// process on 127.0.0.1: good kernels measured on the inputs fill_uniform makes, wrong answers,
// crashes, hangs, work of another tracker instance, a tracker restart, a lost lease, a refused
// token, and the kiln-agent program's command line and SIGTERM.
#include "device_agent/agent.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/random_fill.h"
#include "device_agent/agent_device.h"
#include "device_agent/board_info.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "rpc/channel.h"
#include "tests/common/temp_dir.h"

extern char** environ;

namespace kiln::agent {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int64_t kN = 1000;
constexpr uint64_t kSeed = 4242;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A Tracker that hands out the requests queued in it, in order, to whoever asks for work, and
// records what comes back.
class FakeTracker final : public v1::Tracker::Service {
 public:
  FakeTracker(std::string instance, uint64_t first_device_id)
      : instance_(std::move(instance)), next_device_id_(first_device_id) {}

  std::string token;  // the farm's token ("" none)
  uint32_t lease_ms = 3000;
  std::atomic<bool> quarantined{false};  // heartbeats say the device is quarantined

  grpc::Status RegisterDevice(grpc::ServerContext* ctx, const v1::RegisterDeviceRequest* req,
                              v1::RegisterDeviceResponse* resp) override {
    if (!rpc::has_token(*ctx, token)) return rpc::unauthenticated(*ctx);
    std::lock_guard<std::mutex> lock(mu_);
    registrations_.push_back(*req);
    device_id_ = next_device_id_++;
    forget_ = false;
    resp->set_device_id(device_id_);
    resp->set_lease_ms(lease_ms);
    resp->set_tracker_instance(instance_);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    if (!rpc::has_token(*ctx, token)) return rpc::unauthenticated(*ctx);
    std::lock_guard<std::mutex> lock(mu_);
    ++heartbeats_;
    resp->set_known(!forget_ && req->device_id() == device_id_);
    resp->set_lease_ms(lease_ms);
    resp->set_quarantined(quarantined);
    if (quarantined) resp->set_quarantine_reason("too many crashes");
    return grpc::Status::OK;
  }

  grpc::Status GetWork(grpc::ServerContext* ctx, const v1::GetWorkRequest* req,
                       grpc::ServerWriter<v1::MeasureRequest>* writer) override {
    if (!rpc::has_token(*ctx, token)) return rpc::unauthenticated(*ctx);
    std::unique_lock<std::mutex> lock(mu_);
    ++work_streams_;
    cv_.notify_all();
    for (;;) {
      cv_.wait_for(lock, 20ms, [&] { return closing_ || !queue_.empty(); });
      if (closing_ || ctx->IsCancelled()) return grpc::Status::OK;
      if (queue_.empty()) continue;
      v1::MeasureRequest r = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      const bool ok = writer->Write(r);
      lock.lock();
      if (!ok) return grpc::Status::OK;
    }
  }

  grpc::Status ReportResult(grpc::ServerContext* ctx, const v1::MeasureResult* result,
                            v1::ReportResultResponse* resp) override {
    if (!rpc::has_token(*ctx, token)) return rpc::unauthenticated(*ctx);
    std::lock_guard<std::mutex> lock(mu_);
    results_.push_back(*result);
    resp->set_accepted(true);
    cv_.notify_all();
    return grpc::Status::OK;
  }

  void push(v1::MeasureRequest r) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(r));
    cv_.notify_all();
  }
  /// The next heartbeats answer known=false (until the device registers again).
  void forget_device() {
    std::lock_guard<std::mutex> lock(mu_);
    forget_ = true;
  }
  /// Ends every GetWork stream (before the server shuts down).
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();
  }

  size_t result_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_.size();
  }
  std::vector<v1::MeasureResult> results() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_;
  }
  std::vector<v1::RegisterDeviceRequest> registrations() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  size_t registration_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_.size();
  }
  int heartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }
  int work_streams() {
    std::lock_guard<std::mutex> lock(mu_);
    return work_streams_;
  }
  const std::string& instance() const { return instance_; }

 private:
  const std::string instance_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_device_id_;
  uint64_t device_id_ = 0;
  bool forget_ = false;
  bool closing_ = false;
  int heartbeats_ = 0;
  int work_streams_ = 0;
  std::deque<v1::MeasureRequest> queue_;
  std::vector<v1::MeasureResult> results_;
  std::vector<v1::RegisterDeviceRequest> registrations_;
};

// Whether `pred` comes true within `timeout` (polled).
bool eventually(std::chrono::milliseconds timeout, const std::function<bool()>& pred) {
  const auto end = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A FakeTracker served on 127.0.0.1 (a free port, or the one given).
class TrackerServer {
 public:
  explicit TrackerServer(std::string instance, int port = 0, uint64_t first_device_id = 1)
      : service(std::move(instance), first_device_id) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0)
      throw std::runtime_error("cannot serve on port " + std::to_string(port));
  }
  ~TrackerServer() { stop(); }
  void stop() {
    if (!server_) return;
    service.close();
    server_->Shutdown(std::chrono::system_clock::now() + 2s);
    server_->Wait();
    server_.reset();
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  FakeTracker service;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// An agent running in a thread of this process, its log kept for the checks.
class AgentThread {
 public:
  AgentThread(const std::string& tracker, const std::string& work_dir, std::string token = "") {
    AgentOptions o;
    o.tracker = tracker;
    o.key = "test-board";
    o.target = "llvm";
    o.token = std::move(token);
    o.runner = KILN_RUNNER_PATH;
    o.work_dir = work_dir;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(line);
    };
    agent_ = std::make_unique<Agent>(std::move(o));
    thread_ = std::thread([this] {
      try {
        agent_->run();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = e.what();
      }
      finished_ = true;
    });
  }
  ~AgentThread() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    agent_->stop();
    thread_.join();
  }
  bool finished() const { return finished_; }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const auto& l : log_) all += l + "\n";
    return all;
  }
  Agent& agent() { return *agent_; }

 private:
  std::mutex mu_;
  std::vector<std::string> log_;
  std::string error_;
  std::atomic<bool> finished_{false};
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

// The inputs the agent must make: fill_uniform(seed) over float32[kN].
runtime::NDArray seeded_input(uint64_t seed) {
  runtime::NDArray a = runtime::NDArray::empty({kN}, runtime::kFloat32);
  runtime::fill_uniform(a, seed);
  return a;
}

// The .npy of seeded_input(seed) + c: add_one's expected output when c = 1.
std::string reference_plus(uint64_t seed, float c) {
  std::vector<float> v = seeded_input(seed).to_vector<float>();
  for (float& x : v) x += c;
  return runtime::serialize_npy(runtime::NDArray::from_vector(v, {kN}));
}

class AgentTest : public ::testing::Test {
 protected:
  // A request to run `entry` of the test module on fill_uniform(kSeed) with `reference`.
  v1::MeasureRequest request(const std::string& entry, const std::string& instance,
                             std::string reference = "", uint32_t run_timeout_ms = 5000) {
    v1::MeasureRequest r;
    r.set_request_id(next_request_id_++);
    r.set_job_id(1);
    r.mutable_task()->set_task_key("test:" + entry);
    r.set_device_key("test-board");
    v1::Artifact* a = r.mutable_artifact();
    a->set_format(v1::Artifact::FORMAT_SHARED_OBJECT);
    a->set_data(module_);
    a->set_entry(entry);
    v1::MeasureOptions* o = r.mutable_options();
    o->set_number(2);
    o->set_repeat(3);
    o->set_run_timeout_ms(run_timeout_ms);
    r.set_reference(std::move(reference));
    v1::TensorSpec* in = r.add_inputs();
    in->set_dtype("float32");
    in->add_shape(kN);
    r.mutable_output()->set_dtype("float32");
    r.mutable_output()->add_shape(kN);
    r.set_input_seed(kSeed);
    r.set_rtol(1e-5);
    r.set_atol(1e-6);
    r.set_tracker_instance(instance);
    return r;
  }

  kiln::testing::TempDir dir_{"kiln_agent"};
  const std::string module_ = read_file(KILN_MEASURE_TEST_MODULE);
  uint64_t next_request_id_ = 100;
};

// Waits for `n` results at `tracker`.
::testing::AssertionResult has_results(TrackerServer& tracker, size_t n, AgentThread& agent,
                                       std::chrono::milliseconds timeout = 20s) {
  if (eventually(timeout, [&] { return tracker.service.result_count() >= n; })) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "got " << tracker.service.result_count() << " of " << n << " results; agent log:\n"
         << agent.log();
}

TEST_F(AgentTest, RegistersWithKeyTargetAndCapabilities) {
  TrackerServer tracker("inst-A");
  AgentThread agent(tracker.address(), dir_.path().string());
  ASSERT_TRUE(eventually(10s, [&] { return tracker.service.work_streams() > 0; })) << agent.log();
  auto regs = tracker.service.registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].key(), "test-board");
  EXPECT_EQ(regs[0].target(), "llvm");
  EXPECT_EQ(regs[0].capabilities().driver(), "kiln-runner");
  EXPECT_GT(regs[0].capabilities().cores(), 0u);
  EXPECT_GT(regs[0].capabilities().memory_bytes(), 0u);
  EXPECT_FALSE(regs[0].capabilities().cpu_model().empty());
  EXPECT_EQ(regs[0].capabilities().arch(), agent::program_arch());
  EXPECT_FALSE(regs[0].capabilities().emulated()) << "this test runs natively";
  // The default fingerprint: "<CPU model> x<cores>".
  EXPECT_EQ(regs[0].fingerprint(), regs[0].capabilities().cpu_model() + " x" +
                                       std::to_string(regs[0].capabilities().cores()));
  agent.stop();
  EXPECT_TRUE(agent.error().empty()) << agent.error();
}

TEST_F(AgentTest, MeasuresGoodKernelOnSeededInputsAndFlagsWrongReference) {
  TrackerServer tracker("inst-A");
  AgentThread agent(tracker.address(), dir_.path().string());
  // add_one on fill_uniform(kSeed): the reference is computed here, so NONE proves the inputs.
  tracker.service.push(request("add_one", "inst-A", reference_plus(kSeed, 1.0f)));
  // The same kernel against the reference of another seed's inputs.
  tracker.service.push(request("add_one", "inst-A", reference_plus(kSeed + 1, 1.0f)));
  ASSERT_TRUE(has_results(tracker, 2, agent));
  auto results = tracker.service.results();
  EXPECT_EQ(results[0].request_id(), 100u);
  EXPECT_EQ(results[0].device_id(), 1u);
  EXPECT_EQ(results[0].error(), v1::ERROR_KIND_NONE) << results[0].error_msg();
  ASSERT_EQ(results[0].costs_s_size(), 3);
  for (double c : results[0].costs_s()) EXPECT_GT(c, 0);
  EXPECT_EQ(results[1].request_id(), 101u);
  EXPECT_EQ(results[1].error(), v1::ERROR_KIND_WRONG_ANSWER) << results[1].error_msg();
  EXPECT_EQ(results[1].costs_s_size(), 0);
  EXPECT_TRUE(eventually(5s, [&] { return agent.agent().measured() == 2; }));
  // Kernels are removed once reported; the two requests of one seed shared one input file.
  EXPECT_FALSE(std::filesystem::exists(dir_.file("100.so")));
  int inputs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    inputs += e.path().extension() == ".npy";
  }
  EXPECT_EQ(inputs, 1);
  agent.stop();
  EXPECT_TRUE(agent.error().empty()) << agent.error();
}

TEST_F(AgentTest, CrashIsAResultAndTheAgentGoesOn) {
  TrackerServer tracker("inst-A");
  AgentThread agent(tracker.address(), dir_.path().string());
  tracker.service.push(request("crash", "inst-A", reference_plus(kSeed, 1.0f)));
  tracker.service.push(request("add_one", "inst-A", reference_plus(kSeed, 1.0f)));
  ASSERT_TRUE(has_results(tracker, 2, agent));
  auto results = tracker.service.results();
  EXPECT_EQ(results[0].error(), v1::ERROR_KIND_CRASH);
  EXPECT_NE(results[0].error_msg().find("SIGSEGV"), std::string::npos) << results[0].error_msg();
  EXPECT_EQ(results[1].error(), v1::ERROR_KIND_NONE) << results[1].error_msg();
  EXPECT_FALSE(agent.finished());
}

TEST_F(AgentTest, HangIsARunTimeoutWithinTheLimit) {
  TrackerServer tracker("inst-A");
  AgentThread agent(tracker.address(), dir_.path().string());
  ASSERT_TRUE(eventually(10s, [&] { return tracker.service.work_streams() > 0; })) << agent.log();
  const auto start = Clock::now();
  tracker.service.push(request("hang", "inst-A", "", /*run_timeout_ms=*/500));
  ASSERT_TRUE(has_results(tracker, 1, agent));
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  auto results = tracker.service.results();
  EXPECT_EQ(results[0].error(), v1::ERROR_KIND_RUN_TIMEOUT) << results[0].error_msg();
  EXPECT_GE(results[0].run_ms(), 400u);
  EXPECT_LT(waited, 3.0);
  tracker.service.push(request("add_one", "inst-A", reference_plus(kSeed, 1.0f)));
  ASSERT_TRUE(has_results(tracker, 2, agent));
  EXPECT_EQ(tracker.service.results()[1].error(), v1::ERROR_KIND_NONE);
}

TEST_F(AgentTest, WorkOfAnotherTrackerInstanceIsNotRun) {
  TrackerServer tracker("inst-A");
  AgentThread agent(tracker.address(), dir_.path().string());
  tracker.service.push(request("add_one", "inst-OLD", reference_plus(kSeed, 1.0f)));
  tracker.service.push(request("add_one", "inst-A", reference_plus(kSeed, 1.0f)));
  ASSERT_TRUE(has_results(tracker, 1, agent));
  std::this_thread::sleep_for(200ms);  // time for a wrong second report
  auto results = tracker.service.results();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].request_id(), 101u);
  EXPECT_EQ(results[0].error(), v1::ERROR_KIND_NONE);
  EXPECT_NE(agent.log().find("request 100 comes from tracker instance 'inst-OLD'"),
            std::string::npos)
      << agent.log();
}

TEST_F(AgentTest, RegistersAgainWithATrackerRestartedOnTheSamePort) {
  auto first = std::make_unique<TrackerServer>("inst-A");
  const int port = first->port();
  AgentThread agent(first->address(), dir_.path().string());
  first->service.push(request("add_one", "inst-A", reference_plus(kSeed, 1.0f)));
  ASSERT_TRUE(has_results(*first, 1, agent));
  first.reset();  // the tracker goes away

  std::this_thread::sleep_for(300ms);  // the agent retries against nothing for a while
  TrackerServer second("inst-B", port, /*first_device_id=*/7);
  second.service.push(request("add_one", "inst-B", reference_plus(kSeed, 1.0f)));
  ASSERT_TRUE(has_results(second, 1, agent, 15s));
  auto results = second.service.results();
  EXPECT_EQ(results[0].device_id(), 7u);  // the new registration's id
  EXPECT_EQ(results[0].error(), v1::ERROR_KIND_NONE) << results[0].error_msg();
  // The agent counts a measurement once its report returns, a moment after the tracker has it.
  EXPECT_TRUE(eventually(5s, [&] { return agent.agent().measured() == 2; }));
}

TEST_F(AgentTest, RegistersAgainWhenTheTrackerForgetsTheDevice) {
  TrackerServer tracker("inst-A");
  tracker.service.lease_ms = 300;  // heartbeats every 100 ms
  AgentThread agent(tracker.address(), dir_.path().string());
  ASSERT_TRUE(eventually(10s, [&] { return tracker.service.work_streams() > 0; })) << agent.log();
  tracker.service.forget_device();
  ASSERT_TRUE(eventually(10s, [&] { return tracker.service.registration_count() >= 2; }))
      << agent.log();
  tracker.service.push(request("add_one", "inst-A", reference_plus(kSeed, 1.0f)));
  ASSERT_TRUE(has_results(tracker, 1, agent));
  EXPECT_EQ(tracker.service.results()[0].device_id(), 2u);
}

TEST_F(AgentTest, QuarantineIsLoggedOnce) {
  TrackerServer tracker("inst-A");
  tracker.service.lease_ms = 300;  // heartbeats every 100 ms
  tracker.service.quarantined = true;
  AgentThread agent(tracker.address(), dir_.path().string());
  ASSERT_TRUE(eventually(10s, [&] { return tracker.service.heartbeats() >= 4; })) << agent.log();
  const std::string log = agent.log();
  const size_t first = log.find("is quarantined: too many crashes");
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("is quarantined", first + 1), std::string::npos) << log;
  EXPECT_EQ(tracker.service.registration_count(), 1u);
}

TEST_F(AgentTest, InputFilesOfOldSeedsAreRemoved) {
  TrackerServer tracker("inst-A");
  AgentThread agent(tracker.address(), dir_.path().string());
  constexpr int kRequests = 70;  // more seeds than the agent keeps files for (64)
  for (int i = 0; i < kRequests; ++i) {
    v1::MeasureRequest r = request("add_one", "inst-A");
    r.set_input_seed(1000 + 10 * i);
    tracker.service.push(std::move(r));
  }
  ASSERT_TRUE(has_results(tracker, kRequests, agent));
  int inputs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    inputs += e.path().extension() == ".npy";
  }
  EXPECT_EQ(inputs, 64);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("input_1000_float32_1000.npy")));
  EXPECT_TRUE(std::filesystem::exists(dir_.file("input_1690_float32_1000.npy")));
}

TEST_F(AgentTest, BadTokenIsRefused) {
  TrackerServer tracker("inst-A");
  tracker.service.token = "the-right-token";
  AgentThread agent(tracker.address(), dir_.path().string(), "a-wrong-token");
  ASSERT_TRUE(eventually(10s, [&] { return agent.finished(); })) << agent.log();
  const std::string error = agent.error();
  EXPECT_NE(error.find("tracker " + tracker.address() + " refused registration"), std::string::npos)
      << error;
  EXPECT_NE(error.find("token is wrong"), std::string::npos) << error;
}

/// A fake system root holding `files` (path under the root -> content).
std::string fake_root(const std::filesystem::path& dir,
                      const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [path, content] : files) {
    const std::filesystem::path p = dir / path.substr(1);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
  return dir.string();
}

constexpr const char* kA53Cpuinfo =
    "processor\t: 0\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd03\n"
    "CPU revision\t: 4\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd03\n";
constexpr const char* kX86Cpuinfo =
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n"
    "flags\t\t: fpu vme avx2\n";

// A Raspberry Pi 3 as its files describe it: the device tree names the board, cpuinfo's part
// numbers name the cores (big.LITTLE boards list each kind once).
TEST_F(AgentTest, BoardInfoOfAnArmBoardFromItsFiles) {
  const std::string root =
      fake_root(dir_.path() / "rpi3",
                {{"/proc/cpuinfo", kA53Cpuinfo},
                 {"/proc/device-tree/model", std::string("Raspberry Pi 3 Model B Rev 1.2") + '\0'},
                 {"/proc/meminfo", "MemTotal:         948304 kB\nMemFree: 1 kB\n"}});
  const agent::BoardInfo b = agent::read_board_info(root);
  EXPECT_EQ(b.board, b.emulated ? "qemu-user on Raspberry Pi 3 Model B Rev 1.2"
                                : "Raspberry Pi 3 Model B Rev 1.2");
  EXPECT_EQ(b.cpuinfo_arch, "aarch64");
  EXPECT_EQ(b.memory_bytes, 948304u * 1024);
  if (agent::program_arch() == "aarch64") {
    EXPECT_EQ(b.cpu_model, "Cortex-A53");
    EXPECT_FALSE(b.emulated);
  } else {
    // An x86 program that reads an ARM cpuinfo: the mirror image of an AArch64 agent under qemu.
    EXPECT_TRUE(b.emulated);
  }
  EXPECT_EQ(agent::arm_cpu_name(0x41, 0xd08), "Cortex-A72");
  EXPECT_EQ(agent::arm_cpu_name(0x51, 0xd03), "") << "another implementer's part numbers";

  const std::string rk = fake_root(
      dir_.path() / "rk3399", {{"/proc/cpuinfo",
                                "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd03\n"
                                "processor\t: 4\nCPU implementer\t: 0x41\nCPU part\t: 0xd08\n"},
                               {"/sys/firmware/devicetree/base/model", "Pine64 RockPro64"}});
  const agent::BoardInfo r = agent::read_board_info(rk);
  EXPECT_EQ(r.board, r.emulated ? "qemu-user on Pine64 RockPro64" : "Pine64 RockPro64");
  if (!r.emulated) {
    EXPECT_EQ(r.cpu_model, "Cortex-A53 + Cortex-A72");
  }
}

// An x86 machine: cpuinfo's model name, the DMI product name as the board; an AArch64 agent
// reading it (under qemu-user) knows it is emulated and says so in its CPU and board.
TEST_F(AgentTest, BoardInfoOfAnX86MachineAndEmulation) {
  const std::string root = fake_root(
      dir_.path() / "x86",
      {{"/proc/cpuinfo", kX86Cpuinfo}, {"/sys/class/dmi/id/product_name", "Standard PC\n"}});
  const agent::BoardInfo b = agent::read_board_info(root);
  EXPECT_EQ(b.cpuinfo_arch, "x86_64");
  if (agent::program_arch() == "x86_64") {
    EXPECT_FALSE(b.emulated);
    EXPECT_EQ(b.cpu_model, "AMD EPYC 9R14");
    EXPECT_EQ(b.board, "Standard PC");
  } else {
    EXPECT_TRUE(b.emulated);
    EXPECT_EQ(b.cpu_model, agent::program_arch() + " emulated on AMD EPYC 9R14");
    EXPECT_EQ(b.board, "qemu-user on Standard PC");
  }
  const agent::BoardInfo none = agent::read_board_info((dir_.path() / "nothing").string());
  EXPECT_EQ(none.cpu_model, "unknown CPU");
  EXPECT_FALSE(none.emulated) << "nothing known, nothing claimed";
}

TEST(AgentOptionsTest, MissingOptionsAreNamed) {
  AgentOptions o;
  o.tracker = "127.0.0.1:1";
  o.target = "llvm";
  try {
    Agent agent(o);
    ADD_FAILURE() << "an agent without a key";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("device key"), std::string::npos) << e.what();
  }
}

// A GPU target asks for its device before the agent registers: where there is none (or a CUDA
// device of another architecture) the agent is refused at construction, with the reason.
TEST(AgentOptionsTest, AGpuTargetNeedsItsDevice) {
  AgentOptions o;
  o.tracker = "127.0.0.1:1";
  o.key = "titanx";
  o.target = "cuda -arch=sm_10";  // no CUDA device is that old
  try {
    Agent agent(o);
    ADD_FAILURE() << "an agent for sm_10 registered";
  } catch (const kiln::Error& e) {
    const std::string msg = e.what();
    if (runtime::DeviceAPI::available(TargetKind::kCuda)) {
      EXPECT_NE(msg.find("builds for sm_10, but this machine's CUDA device is sm_"),
                std::string::npos)
          << msg;
    } else {
      EXPECT_NE(msg.find("target 'cuda -arch=sm_10' needs a CUDA device, and this machine has "
                         "none: no CUDA device"),
                std::string::npos)
          << msg;
    }
  }
  EXPECT_EQ(probe_agent_device("llvm -mcpu=native").kind, TargetKind::kCpu);
  if (runtime::DeviceAPI::available(TargetKind::kOpenCL)) {
    const AgentDevice mali = probe_agent_device("opencl -device=mali");
    EXPECT_EQ(mali.kind, TargetKind::kOpenCL);
    EXPECT_EQ(mali.description.rfind("opencl:0 ", 0), 0u) << mali.description;
  }
}

// kiln-agent started with `args`, its stderr going to `stderr_file`.
pid_t spawn_agent(const std::vector<std::string>& args, const std::string& stderr_file) {
  std::vector<std::string> all = {KILN_AGENT_PATH};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// The exit status of `pid` within `timeout`, or -1 (the process is then killed).
int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(10ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(AgentTest, ProgramRejectsAnUnknownFlag) {
  const std::string err = dir_.file("stderr.txt");
  pid_t pid = spawn_agent(
      {"--tracker", "127.0.0.1:1", "--key", "k", "--target", "llvm", "--frobnicate", "3"}, err);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_exit(pid, 10s), 2);
  EXPECT_NE(read_file(err).find("error: unknown flag '--frobnicate'"), std::string::npos)
      << read_file(err);

  pid = spawn_agent({"--tracker", "127.0.0.1:1", "--key", "k"}, err);
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_exit(pid, 10s), 2);
  EXPECT_NE(read_file(err).find("--target"), std::string::npos) << read_file(err);
}

TEST_F(AgentTest, ProgramStopsOnSigterm) {
  TrackerServer tracker("inst-A");
  const std::string err = dir_.file("stderr.txt");
  pid_t pid = spawn_agent({"--tracker", tracker.address(), "--key", "k", "--target", "llvm",
                           "--runner", KILN_RUNNER_PATH, "--work-dir", dir_.file("work")},
                          err);
  ASSERT_GT(pid, 0);
  // Serving: registered and waiting on the work stream.
  const bool serving = eventually(10s, [&] { return tracker.service.work_streams() > 0; });
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 10s), 0) << read_file(err);
  EXPECT_TRUE(serving) << read_file(err);
  EXPECT_NE(read_file(err).find("registered with tracker"), std::string::npos) << read_file(err);
}

// The default work folders of agents that were killed go when the next agent starts; a running
// agent's, and folders of other names, stay.
TEST(AgentWorkDirs, StaleOnesOfDeadAgentsAreRemoved) {
  kiln::testing::TempDir tmp("agent_dirs");
  // A pid that is surely gone: a child that has exited and been reaped.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(dead, &status, 0), dead);
  namespace fs = std::filesystem;
  auto make = [&](const std::string& name) {
    fs::create_directories(tmp.path() / name);
    std::ofstream(tmp.path() / name / "8.so") << "x";
  };
  const std::string stale = "kiln-agent-" + std::to_string(dead) + "-123";
  const std::string alive = "kiln-agent-" + std::to_string(::getppid()) + "-456";
  make(stale);
  make(alive);
  make("kiln-agent-notapid-1");
  make("kiln-after");
  EXPECT_EQ(remove_stale_work_dirs(tmp.path().string()), 1u);
  EXPECT_FALSE(fs::exists(tmp.path() / stale));
  EXPECT_TRUE(fs::exists(tmp.path() / alive));
  EXPECT_TRUE(fs::exists(tmp.path() / "kiln-agent-notapid-1"));
  EXPECT_TRUE(fs::exists(tmp.path() / "kiln-after"));
  EXPECT_EQ(remove_stale_work_dirs((tmp.path() / "missing").string()), 0u);
}

}  // namespace
}  // namespace kiln::agent
