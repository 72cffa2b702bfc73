// The compiler worker against a fake tracker (a grpc::Server on 127.0.0.1 serving GetBuildWork and
// ReportArtifact from queues the test fills) and the task of a small ONNX model (one MatMul), sent
// as its workload: artifacts that load and compute what the task's reference schedule computes,
// errors for bad configs, workloads that do not parse and keys that do not match, reconnection
// after a tracker restart, a refused token, and the kiln-worker binary's flags and signals.
#include "worker/worker.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/lower.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/module.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "rpc/channel.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

extern char** environ;

namespace kiln::worker {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kTarget[] = "llvm";
constexpr uint64_t kJob = 7;

/// y = x (4x32) times a constant 32x16 weight: one dense task.
std::string small_model() {
  testing::OnnxModelBuilder b;
  b.input("x", {4, 32});
  std::vector<float> w(32 * 16);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 37) % 19) / 19.0f - 0.5f;
  b.init_values("w", {32, 16}, w);
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  return b.bytes();
}

/// The tracker side a worker talks to, driven by the test.
class FakeTracker final : public v1::Tracker::Service {
 public:
  std::string token;  // required when not empty

  void push(uint64_t build_id, const v1::TaskRef& task, uint64_t index,
            uint32_t timeout_ms = 60000) {
    v1::BuildRequest b;
    b.set_build_id(build_id);
    b.set_job_id(kJob);
    *b.mutable_task() = task;
    b.mutable_config()->set_index(index);
    b.set_timeout_ms(timeout_ms);
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(b);
    cv_.notify_all();
  }
  /// Waits until `n` artifacts have come back (false after `timeout`).
  bool wait_reports(size_t n, std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return reports_.size() >= n; });
  }
  bool wait_polls(int n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return polls_ >= n; });
  }
  v1::ReportArtifactRequest report(uint64_t build_id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& r : reports_) {
      if (r.build_id() == build_id) return r;
    }
    ADD_FAILURE() << "no artifact for build " << build_id;
    return {};
  }

  grpc::Status GetBuildWork(grpc::ServerContext* ctx, const v1::GetBuildWorkRequest* req,
                            v1::BuildBatch* out) override {
    if (!rpc::has_token(*ctx, token)) return rpc::unauthenticated(*ctx);
    std::unique_lock<std::mutex> lock(mu_);
    ++polls_;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::milliseconds(std::min<uint32_t>(req->wait_ms(), 200)),
                 [&] { return !queue_.empty(); });
    while (!queue_.empty() && out->builds_size() < static_cast<int>(req->max_batch())) {
      *out->add_builds() = queue_.front();
      queue_.pop_front();
    }
    return grpc::Status::OK;
  }
  grpc::Status ReportArtifact(grpc::ServerContext* ctx, const v1::ReportArtifactRequest* req,
                              v1::ReportArtifactResponse* out) override {
    if (!rpc::has_token(*ctx, token)) return rpc::unauthenticated(*ctx);
    std::lock_guard<std::mutex> lock(mu_);
    reports_.push_back(*req);
    out->set_accepted(true);
    cv_.notify_all();
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::BuildRequest> queue_;
  std::vector<v1::ReportArtifactRequest> reports_;
  int polls_ = 0;
};

/// The fake on 127.0.0.1 (a free port, or `port` again after a restart).
class Server {
 public:
  explicit Server(FakeTracker& service, int port = 0) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    EXPECT_TRUE(server_ != nullptr && port_ > 0) << "cannot listen on port " << port;
  }
  ~Server() { stop(); }
  void stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 1s);
    server_.reset();
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

/// A Worker running in a thread; stopped and joined at the end.
class Running {
 public:
  explicit Running(WorkerOptions o) : worker_(with_quiet_log(std::move(o))) {
    thread_ = std::thread([this] {
      try {
        worker_.run();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu_);
        error_ = e.what();
      }
    });
  }
  ~Running() {
    worker_.stop();
    thread_.join();
  }
  Worker& worker() { return worker_; }
  /// Joins run() (it must end by itself) and returns what it threw ("" for nothing).
  std::string join_error() {
    thread_.join();
    thread_ = std::thread([] {});
    return error_;
  }

 private:
  static WorkerOptions with_quiet_log(WorkerOptions o) {
    o.log = [](const std::string&) {};
    o.wait_ms = 200;
    return o;
  }
  Worker worker_;
  std::thread thread_;
  std::mutex mu_;
  std::string error_;
};

/// Waits until the worker counts `n` builds (its count follows the tracker's acknowledgement).
bool wait_done(const Worker& w, uint64_t n, std::chrono::milliseconds timeout = 5s) {
  const auto end = Clock::now() + timeout;
  while (w.builds_done() < n && Clock::now() < end) std::this_thread::sleep_for(5ms);
  return w.builds_done() == n;
}

WorkerOptions options_for(const Server& s) {
  WorkerOptions o;
  o.tracker = s.address();
  o.name = "test-worker";
  o.threads = 2;
  return o;
}

/// The model's task, extracted the way a job driver does it.
autotune::Task the_task() {
  std::vector<autotune::Task> tasks =
      graph::extract_tasks(graph::import_onnx_bytes(small_model(), "test model"), kTarget);
  EXPECT_EQ(tasks.size(), 1u);
  return tasks.at(0);
}

/// What a build request says of `task`: all the worker gets.
v1::TaskRef ref_of(const autotune::Task& task) {
  v1::TaskRef r;
  r.set_task_key(task.key);
  r.set_target(task.target);
  r.set_template_name(task.template_name);
  r.set_workload(task.workload);
  return r;
}

/// The worker's temporary libraries of this process still on disk.
int leftover_files() {
  int n = 0;
  const std::string prefix = "kiln-worker-" + std::to_string(::getpid()) + "-";
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path())) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

std::vector<int64_t> shape_of(const te::Tensor& t) {
  std::vector<int64_t> s;
  for (const ir::Expr& d : t->shape()) s.push_back(*ir::as_const_int(d));
  return s;
}

/// Loads the artifact's library and checks its "candidate" against the reference schedule on
/// random inputs: |out - ref| <= 1e-5 + 1e-4 |ref| (float sums in a different order).
void expect_correct(const autotune::Task& task, const v1::Artifact& a) {
  ASSERT_EQ(a.error(), v1::ERROR_KIND_NONE) << a.error_msg();
  ASSERT_EQ(a.format(), v1::Artifact::FORMAT_SHARED_OBJECT);
  ASSERT_EQ(a.entry(), "candidate");
  EXPECT_EQ(a.task().task_key(), task.key);
  EXPECT_EQ(a.task().template_name(), task.template_name);
  EXPECT_EQ(a.signature(), std::string(task.args().size(), 't'));
  EXPECT_FALSE(a.config().text().empty());
  testing::TempDir dir("kiln_worker_test");
  const std::string so = dir.file("candidate.so");
  {
    std::ofstream out(so, std::ios::binary);
    out << a.data();
  }
  runtime::Function cand = runtime::Module::load_library(so).function("candidate");
  runtime::Function ref =
      compiler::build(task.reference_schedule(), task.args(), kTarget, "reference")
          .function("reference");
  std::vector<runtime::NDArray> got, want;
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    got.push_back(testing::random_array(shape_of(task.inputs[i]), 100 + static_cast<uint32_t>(i)));
    want.push_back(got.back().copy());
  }
  got.push_back(testing::zeros(shape_of(task.out)));
  want.push_back(testing::zeros(shape_of(task.out)));
  std::vector<runtime::Arg> gargs(got.begin(), got.end()), wargs(want.begin(), want.end());
  cand.call(gargs);
  ref.call(wargs);
  EXPECT_TRUE(testing::all_close(got.back(), want.back().to_vector<float>(), 1e-4, 1e-5));
}

TEST(Worker, ArtifactsOfTwoConfigsLoadAndMatchTheReference) {
  const autotune::Task task = the_task();
  ASSERT_GT(task.space.size(), 1u);
  FakeTracker fake;
  Server server(fake);
  const uint64_t last = task.space.size() - 1;
  fake.push(1, ref_of(task), 0);
  fake.push(2, ref_of(task), last);
  Running w(options_for(server));
  ASSERT_TRUE(fake.wait_reports(2));
  const v1::ReportArtifactRequest r1 = fake.report(1), r2 = fake.report(2);
  EXPECT_EQ(r1.worker_id(), "test-worker");
  EXPECT_EQ(r1.artifact().config().index(), 0u);
  EXPECT_EQ(r2.artifact().config().index(), last);
  EXPECT_NE(r1.artifact().config().text(), r2.artifact().config().text());
  expect_correct(task, r1.artifact());
  expect_correct(task, r2.artifact());
  EXPECT_EQ(leftover_files(), 0);
}

TEST(Worker, BuildPastItsLimitIsACompileTimeout) {
  const autotune::Task task = the_task();
  const v1::Artifact a = build_artifact(task, 0, 1e-6);
  EXPECT_EQ(a.error(), v1::ERROR_KIND_COMPILE_TIMEOUT) << a.error_msg();
  EXPECT_NE(a.error_msg().find("ran past"), std::string::npos) << a.error_msg();
  EXPECT_TRUE(a.data().empty());
  FakeTracker fake;
  Server server(fake);
  fake.push(1, ref_of(task), 1, /*timeout_ms=*/1);
  Running w(options_for(server));
  ASSERT_TRUE(fake.wait_reports(1));
  EXPECT_EQ(fake.report(1).artifact().error(), v1::ERROR_KIND_COMPILE_TIMEOUT);
  // The abandoned builds finish in the background and remove their files.
  const auto end = Clock::now() + 20s;
  while (builds_running() > 0 && Clock::now() < end) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(builds_running(), 0);
  EXPECT_EQ(leftover_files(), 0);
}

TEST(Worker, BuildArtifactAloneMatchesTheReference) {
  const autotune::Task task = the_task();
  const v1::Artifact a = build_artifact(task, task.default_config.index(), 60);
  expect_correct(task, a);
  EXPECT_GT(a.build_s(), 0);
}

TEST(Worker, AnOpenclTaskBuildsIntoADeviceProgram) {
  const std::vector<autotune::Task> tasks =
      graph::extract_tasks(graph::import_onnx_bytes(small_model(), "test model"), "opencl");
  ASSERT_EQ(tasks.size(), 1u);
  const autotune::Task& task = tasks[0];
  EXPECT_EQ(task.template_name, "matmul_gpu");
  const v1::Artifact a = build_artifact(task, task.default_config.index(), 60);
  ASSERT_EQ(a.error(), v1::ERROR_KIND_NONE) << a.error_msg();
  EXPECT_EQ(a.format(), v1::Artifact::FORMAT_OPENCL_C);
  EXPECT_EQ(a.entry(), "candidate");
  const runtime::DeviceProgram p =
      runtime::DeviceProgram::from_json(kiln::Json::parse(a.data(), "artifact"), "artifact");
  EXPECT_EQ(p.name, "candidate");
  EXPECT_EQ(p.format, "cl");
  EXPECT_EQ(p.params.size(), 3u);  // x, w, y
  ASSERT_FALSE(p.kernels.empty());
  EXPECT_NE(p.code.find("__kernel void " + p.kernels[0].name), std::string::npos) << p.code;
}

TEST(Worker, BadConfigsAndWorkloadsAreCompileErrorsAndTheWorkerGoesOn) {
  const autotune::Task task = the_task();
  FakeTracker fake;
  Server server(fake);
  const uint64_t size = task.space.size();
  fake.push(1, ref_of(task), size + 5);
  v1::TaskRef garbled = ref_of(task);
  garbled.set_workload("{\"op\": 12");
  fake.push(2, garbled, 0);
  v1::TaskRef other_key = ref_of(task);
  other_key.set_task_key("dense_x86:9x9:nope");
  fake.push(3, other_key, 0);
  v1::TaskRef unknown = ref_of(task);
  unknown.set_template_name("dense_x87");
  fake.push(4, unknown, 0);
  Running w(options_for(server));
  ASSERT_TRUE(fake.wait_reports(4));
  const v1::Artifact a1 = fake.report(1).artifact(), a2 = fake.report(2).artifact();
  const v1::Artifact a3 = fake.report(3).artifact(), a4 = fake.report(4).artifact();
  EXPECT_EQ(a1.error(), v1::ERROR_KIND_COMPILE_ERROR);
  EXPECT_NE(a1.error_msg().find(std::to_string(size + 5)), std::string::npos) << a1.error_msg();
  EXPECT_NE(a1.error_msg().find(std::to_string(size) + " configs"), std::string::npos)
      << a1.error_msg();
  EXPECT_TRUE(a1.data().empty());
  for (const v1::Artifact* a : {&a2, &a3, &a4}) {
    EXPECT_EQ(a->error(), v1::ERROR_KIND_COMPILE_ERROR);
    EXPECT_TRUE(a->data().empty());
  }
  EXPECT_NE(a2.error_msg().find("cannot rebuild task"), std::string::npos) << a2.error_msg();
  EXPECT_NE(a3.error_msg().find("not 'dense_x86:9x9:nope'"), std::string::npos) << a3.error_msg();
  EXPECT_NE(a4.error_msg().find("dense_x87"), std::string::npos) << a4.error_msg();
  EXPECT_EQ(a2.task().task_key(), task.key);
  // Still working: a good build after the bad ones.
  fake.push(5, ref_of(task), 0);
  ASSERT_TRUE(fake.wait_reports(5));
  EXPECT_EQ(fake.report(5).artifact().error(), v1::ERROR_KIND_NONE);
  // build_artifact alone: the same error, no throw.
  const v1::Artifact direct = build_artifact(task, size, 60);
  EXPECT_EQ(direct.error(), v1::ERROR_KIND_COMPILE_ERROR);
  EXPECT_NE(direct.error_msg().find("out of range"), std::string::npos) << direct.error_msg();
}

TEST(Worker, CountsBuildsAndReconnectsAfterTheTrackerRestarts) {
  const autotune::Task task = the_task();
  FakeTracker fake;
  auto server = std::make_unique<Server>(fake);
  const int port = server->port();
  Running w(options_for(*server));
  EXPECT_EQ(w.worker().builds_done(), 0u);
  fake.push(1, ref_of(task), 0);
  ASSERT_TRUE(fake.wait_reports(1));
  EXPECT_TRUE(wait_done(w.worker(), 1)) << w.worker().builds_done();
  server.reset();                                 // the tracker goes away...
  std::this_thread::sleep_for(700ms);             // ...the worker's polls fail for a while...
  server = std::make_unique<Server>(fake, port);  // ...and it comes back on the same port
  fake.push(2, ref_of(task), 1);
  ASSERT_TRUE(fake.wait_reports(2, 15s)) << "the worker did not reconnect";
  EXPECT_EQ(fake.report(2).artifact().error(), v1::ERROR_KIND_NONE);
  EXPECT_TRUE(wait_done(w.worker(), 2)) << w.worker().builds_done();
}

TEST(Worker, WrongTokenMakesRunThrowNamingTheRefusal) {
  FakeTracker fake;
  fake.token = "right";
  Server server(fake);
  WorkerOptions o = options_for(server);
  o.token = "wrong";
  Running w(o);
  const std::string err = w.join_error();
  EXPECT_NE(err.find("tracker " + server.address() + " refused the worker"), std::string::npos)
      << err;
  EXPECT_NE(err.find("token"), std::string::npos) << err;
}

/// Runs kiln-worker with `args`; its stderr goes to `err_file`. Returns the pid.
pid_t spawn_worker(const std::vector<std::string>& args, const std::string& err_file) {
  std::vector<std::string> all = {KILN_WORKER_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

/// Waits for `pid` to exit (up to `timeout`); its exit code, or -1 (killed when it hung).
int wait_exit(pid_t pid, std::chrono::milliseconds timeout = 10s) {
  const auto end = Clock::now() + timeout;
  int status = 0;
  while (Clock::now() < end) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(20ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(WorkerBinary, UnknownFlagExitsTwoNamingIt) {
  testing::TempDir dir("kiln_worker_test");
  const std::string err = dir.file("stderr.txt");
  EXPECT_EQ(wait_exit(spawn_worker({"--tracker", "127.0.0.1:1", "--bogus-flag"}, err)), 2);
  EXPECT_NE(read_text(err).find("error: unknown flag '--bogus-flag'"), std::string::npos)
      << read_text(err);
  EXPECT_EQ(wait_exit(spawn_worker({}, err)), 2);
  EXPECT_NE(read_text(err).find("--tracker"), std::string::npos) << read_text(err);
  EXPECT_EQ(wait_exit(spawn_worker({"--tracker", "127.0.0.1:1", "--batch", "zero"}, err)), 2);
  EXPECT_NE(read_text(err).find("--batch"), std::string::npos) << read_text(err);
}

TEST(WorkerBinary, WrongTokenExitsOneNamingTheRefusal) {
  FakeTracker fake;
  fake.token = "right";
  Server server(fake);
  testing::TempDir dir("kiln_worker_test");
  const std::string token = dir.file("token"), err = dir.file("stderr.txt");
  std::ofstream(token) << "wrong\n";
  EXPECT_EQ(wait_exit(spawn_worker({"--tracker", server.address(), "--token-file", token}, err)),
            1);
  EXPECT_NE(read_text(err).find("refused the worker"), std::string::npos) << read_text(err);
}

TEST(WorkerBinary, SigtermStopsItWithExitZero) {
  FakeTracker fake;
  Server server(fake);
  testing::TempDir dir("kiln_worker_test");
  const std::string err = dir.file("stderr.txt");
  const pid_t pid = spawn_worker({"--tracker", server.address(), "--name", "bin"}, err);
  ASSERT_TRUE(fake.wait_polls(1)) << read_text(err);  // it is polling
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait_exit(pid), 0) << read_text(err);
}

/// Abandoned builds still compiling when the process exits would meet LLVM's static destructors.
class WaitForBuilds : public ::testing::Environment {
 public:
  void TearDown() override {
    const auto end = Clock::now() + 30s;
    while (builds_running() > 0 && Clock::now() < end) std::this_thread::sleep_for(20ms);
  }
};
const auto* const kWaitForBuilds = ::testing::AddGlobalTestEnvironment(new WaitForBuilds);

}  // namespace
}  // namespace kiln::worker
