// The farm commands of `kiln` (client/farm_commands.cc) against a fake KilnService served in this
// process on 127.0.0.1 (a free port): the real `kiln` binary runs as a subprocess and the fake
// records what it was sent and serves what each case sets up — jobs, devices, a progress stream,
// a bundle in chunks (whole, with a bad checksum, with a gap), errors.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "proto/kiln/v1/service.grpc.pb.h"
#include "rpc/channel.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

v1::JobProgress progress(uint64_t id, v1::JobState state, uint32_t done, uint32_t total,
                         uint64_t trials, uint64_t failed, double best_s) {
  v1::JobProgress p;
  p.set_job_id(id);
  p.set_state(state);
  p.set_tasks_done(done);
  p.set_tasks_total(total);
  p.set_trials_done(trials);
  p.set_trials_failed(failed);
  p.set_best_latency_s(best_s);
  return p;
}

/// A KilnService that serves what the test set up and records what it was sent.
class FakeKiln final : public v1::KilnService::Service {
 public:
  enum class Bundle { kWhole, kBadChecksum, kGap };

  std::mutex mu;
  std::string token;                                         // required when not empty
  std::string authorization;                                 // the last call's metadata
  v1::SubmitModelRequest submitted;                          // the last SubmitModel's job
  std::string model;                                         // ... its chunks, joined
  std::vector<size_t> chunk_sizes;                           // ... their sizes
  std::optional<uint64_t> checksum;                          // ... its last message
  v1::ListJobsRequest listed;                                // the last ListJobs
  v1::CancelJobRequest cancelled;                            // the last CancelJob
  std::map<uint64_t, v1::Job> jobs;                          // GetJob, ListJobs
  std::map<uint64_t, std::vector<v1::JobProgress>> updates;  // WatchJob sends these, in order
  int watch_unavailable = 0;  // the first calls of WatchJob that fail with UNAVAILABLE
  std::vector<v1::DeviceInfo> devices;
  std::string bundle;  // FetchBundle serves it in chunks of kChunk bytes
  Bundle bundle_kind = Bundle::kWhole;
  static constexpr size_t kChunk = 3000;

  grpc::Status SubmitModel(grpc::ServerContext* ctx, grpc::ServerReader<v1::ModelUpload>* reader,
                           v1::SubmitModelResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    if (auto s = admit(*ctx); !s.ok()) return s;
    submitted.Clear();
    model.clear();
    chunk_sizes.clear();
    checksum.reset();
    v1::ModelUpload m;
    while (reader->Read(&m)) {
      if (m.has_job()) submitted = m.job();
      if (m.has_chunk()) {
        model += m.chunk();
        chunk_sizes.push_back(m.chunk().size());
      }
      if (m.has_checksum()) checksum = m.checksum();
    }
    resp->set_job_id(7);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    if (auto s = admit(*ctx); !s.ok()) return s;
    auto it = jobs.find(req->job_id());
    if (it == jobs.end()) return not_found(req->job_id());
    *resp = it->second;
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    if (auto s = admit(*ctx); !s.ok()) return s;
    listed = *req;
    for (const auto& [id, job] : jobs) *resp->add_jobs() = job;
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobProgress>* writer) override {
    std::vector<v1::JobProgress> todo;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto s = admit(*ctx); !s.ok()) return s;
      if (!jobs.count(req->job_id())) return not_found(req->job_id());
      if (watch_unavailable > 0) {
        --watch_unavailable;
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "kilnd is restarting");
      }
      todo = updates[req->job_id()];
    }
    for (const v1::JobProgress& p : todo) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      {
        std::lock_guard<std::mutex> lock(mu);
        *jobs[req->job_id()].mutable_progress() = p;
      }
      if (!writer->Write(p)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                         v1::Job* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    if (auto s = admit(*ctx); !s.ok()) return s;
    auto it = jobs.find(req->job_id());
    if (it == jobs.end()) return not_found(req->job_id());
    cancelled = *req;
    it->second.mutable_progress()->set_state(v1::JOB_STATE_CANCELLED);
    *resp = it->second;
    return grpc::Status::OK;
  }

  grpc::Status FetchBundle(grpc::ServerContext* ctx, const v1::FetchBundleRequest* req,
                           grpc::ServerWriter<v1::BundleChunk>* writer) override {
    std::string bytes;
    Bundle kind;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto s = admit(*ctx); !s.ok()) return s;
      if (!jobs.count(req->job_id())) return not_found(req->job_id());
      bytes = bundle;
      kind = bundle_kind;
    }
    for (size_t off = 0, n = 0; off < bytes.size(); off += kChunk, ++n) {
      if (kind == Bundle::kGap && n == 1) continue;  // the second chunk goes missing
      v1::BundleChunk c;
      c.set_offset(off);
      c.set_data(bytes.substr(off, kChunk));
      c.set_total_size(bytes.size());
      c.set_last(off + kChunk >= bytes.size());
      if (c.last()) c.set_checksum(fnv1a(bytes) + (kind == Bundle::kBadChecksum ? 1 : 0));
      if (!writer->Write(c)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status ListDevices(grpc::ServerContext* ctx, const v1::ListDevicesRequest* req,
                           v1::ListDevicesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    if (auto s = admit(*ctx); !s.ok()) return s;
    for (const auto& d : devices) {
      if (req->key().empty() || d.key() == req->key()) *resp->add_devices() = d;
    }
    return grpc::Status::OK;
  }

 private:
  grpc::Status admit(const grpc::ServerContext& ctx) {
    auto md = ctx.client_metadata().find("authorization");
    authorization =
        md == ctx.client_metadata().end() ? "" : std::string(md->second.data(), md->second.size());
    return rpc::has_token(ctx, token) ? grpc::Status::OK : rpc::unauthenticated(ctx);
  }
  static grpc::Status not_found(uint64_t id) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "job " + std::to_string(id) + " does not exist");
  }
};

struct Result {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&fake_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr);
    ASSERT_GT(port_, 0);
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  std::string path(const std::string& name) const { return dir_.file(name); }
  static void write(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary) << bytes;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  /// Runs `kiln ARGS --server <the fake>` with stdout and stderr captured, without the farm's
  /// environment variables (unless `env` sets some).
  Result kiln(const std::string& args, const std::string& env = "",
              const std::string& server = "") {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string cmd = "env -u KILN_TOKEN -u KILN_SERVER " + env + " '" + KILN_BINARY + "' " +
                            args + " --server " +
                            (server.empty() ? "127.0.0.1:" + std::to_string(port_) : server) +
                            " >'" + out + "' 2>'" + err + "'";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = shell(cmd);
    Result r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read(out);
    r.err = read(err);
    return r;
  }

  /// Runs `cmd` with the shell. The test sets the fake up before and reads what it recorded after,
  /// and its server threads use the same state meanwhile, for calls from another process: an
  /// order that neither the C++ memory model nor ThreadSanitizer sees. Passing through the fake's
  /// mutex on both sides of the command orders them.
  int shell(const std::string& cmd) {
    { std::lock_guard<std::mutex> lock(fake_.mu); }
    const int status = std::system(cmd.c_str());
    { std::lock_guard<std::mutex> lock(fake_.mu); }
    return status;
  }

  /// A job in the fake, RUNNING.
  v1::Job& add_job(uint64_t id, const std::string& model) {
    v1::Job& j = fake_.jobs[id];
    j.set_id(id);
    j.set_owner("alice");
    j.set_model_name(model);
    j.set_target("llvm -mcpu=znver4");
    j.set_device_key("epyc");
    j.set_trials(100);
    j.set_created_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count() -
                     90'000);
    *j.mutable_progress() = progress(id, v1::JOB_STATE_RUNNING, 3, 10, 312, 4, 0.004213);
    return j;
  }

  testing::TempDir dir_{"kiln_client_test"};
  FakeKiln fake_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(ClientTest, SubmitSendsTheModelAndPrintsTheJobId) {
  const std::string model("\x08\x07onnx\0bytes\xff", 13);
  write(path("resnet18.onnx"), model);
  write(path("token"), "s3cret\n");
  fake_.token = "s3cret";
  Result r = kiln("submit '" + path("resnet18.onnx") +
                      "' --target 'llvm -mcpu=znver4' --device-key epyc --trials 64 "
                      "--priority -2 --token-file '" +
                      path("token") + "'",
                  "USER=bob");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "submitted job 7\n");
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_EQ(fake_.model, model);
  EXPECT_EQ(fake_.chunk_sizes, std::vector<size_t>{model.size()});
  EXPECT_EQ(fake_.submitted.model_size(), model.size());
  EXPECT_EQ(fake_.checksum, fnv1a(model));
  EXPECT_EQ(fake_.submitted.name(), "resnet18");  // the file's stem
  EXPECT_EQ(fake_.submitted.target(), "llvm -mcpu=znver4");
  EXPECT_EQ(fake_.submitted.device_key(), "epyc");
  EXPECT_EQ(fake_.submitted.trials(), 64u);
  EXPECT_EQ(fake_.submitted.priority(), -2);
  EXPECT_EQ(fake_.submitted.owner(), "bob");  // $USER
  EXPECT_EQ(fake_.authorization, "Bearer s3cret");
}

TEST_F(ClientTest, SubmitSendsABigModelInChunksWithItsChecksum) {
  std::string model(5u << 19, '\0');  // 2.5 MiB: two whole 1 MiB chunks and a half one
  for (size_t i = 0; i < model.size(); ++i) model[i] = static_cast<char>((i * 7919) >> 5);
  write(path("big.onnx"), model);
  Result r = kiln("submit '" + path("big.onnx") + "' --target llvm --device-key epyc --trials 4");
  ASSERT_EQ(r.code, 0) << r.err;
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_TRUE(fake_.model == model);
  EXPECT_EQ(fake_.chunk_sizes, (std::vector<size_t>{1u << 20, 1u << 20, 1u << 19}));
  EXPECT_EQ(fake_.submitted.model_size(), model.size());
  EXPECT_EQ(fake_.checksum, fnv1a(model));
}

TEST_F(ClientTest, SubmitOfAMissingModelNamesIt) {
  Result r = kiln("submit '" + path("nothing.onnx") +
                  "' --target llvm --device-key epyc "
                  "--trials 4");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot read model '" + path("nothing.onnx") + "'"), std::string::npos)
      << r.err;
}

TEST_F(ClientTest, SubmitTakesNameOwnerAndTheTokenFromTheEnvironment) {
  write(path("m.onnx"), "model");
  fake_.token = "t0k";
  Result r = kiln("submit '" + path("m.onnx") +
                      "' --target cuda --device-key titanx --trials 8 --name net --owner carol",
                  "KILN_TOKEN=t0k");
  ASSERT_EQ(r.code, 0) << r.err;
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_EQ(fake_.submitted.name(), "net");
  EXPECT_EQ(fake_.submitted.owner(), "carol");
  EXPECT_EQ(fake_.authorization, "Bearer t0k");
}

TEST_F(ClientTest, SubmitSendsABudgetATimeLimitAndTheEarlyStop) {
  write(path("m.onnx"), "model");
  Result r = kiln("submit '" + path("m.onnx") +
                  "' --target llvm --device-key epyc --budget 400 --time 10m --early-stop 8");
  ASSERT_EQ(r.code, 0) << r.err;
  {
    std::lock_guard<std::mutex> lock(fake_.mu);
    EXPECT_EQ(fake_.submitted.trials(), 0u);  // no cap per task
    EXPECT_EQ(fake_.submitted.budget(), 400u);
    EXPECT_EQ(fake_.submitted.time_limit_s(), 600.0);
    ASSERT_TRUE(fake_.submitted.has_early_stop());
    EXPECT_EQ(fake_.submitted.early_stop(), 8u);
  }
  // --trials caps each task under a budget; no --early-stop: the farm's default (unset).
  r = kiln("submit '" + path("m.onnx") +
           "' --target llvm --device-key epyc --budget 90 --trials 30");
  ASSERT_EQ(r.code, 0) << r.err;
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_EQ(fake_.submitted.trials(), 30u);
  EXPECT_EQ(fake_.submitted.budget(), 90u);
  EXPECT_EQ(fake_.submitted.time_limit_s(), 0.0);
  EXPECT_FALSE(fake_.submitted.has_early_stop());
}

TEST_F(ClientTest, SubmitWithWatchFollowsTheNewJob) {
  write(path("m.onnx"), "model");
  add_job(7, "m").mutable_progress()->set_state(v1::JOB_STATE_QUEUED);
  fake_.updates[7] = {progress(7, v1::JOB_STATE_RUNNING, 0, 2, 0, 0, 0),
                      progress(7, v1::JOB_STATE_DONE, 2, 2, 200, 0, 0.001)};
  Result r = kiln("submit '" + path("m.onnx") +
                  "' --target cuda --device-key titanx --trials 100 --watch");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("submitted job 7\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job 7 done"), std::string::npos) << r.out;
}

TEST_F(ClientTest, JobsPrintsATable) {
  add_job(3, "resnet18");
  v1::Job& done = add_job(4, "mobilenet");
  *done.mutable_progress() = progress(4, v1::JOB_STATE_DONE, 5, 5, 500, 0, 0.0125);
  done.set_trials(50);  // under a budget and a time limit: each task's cap
  done.set_budget(400);
  done.set_time_limit_s(600);
  done.set_early_stop(8);
  Result r = kiln("jobs --owner alice --state running --state DONE");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, row3, row4;
  std::getline(lines, header);
  std::getline(lines, row3);
  std::getline(lines, row4);
  for (const char* col : {"ID", "STATE", "OWNER", "MODEL", "TARGET", "KEY", "BUDGET", "TASKS",
                          "TRIALS", "FAILED", "BEST(ms)", "AGE"}) {
    EXPECT_NE(header.find(col), std::string::npos) << col << " in " << header;
  }
  for (const char* cell : {"3", "RUNNING", "alice", "resnet18", "llvm -mcpu=znver4", "epyc",
                           "100/task", "3/10", "312", "4.213", "1m3"}) {
    EXPECT_NE(row3.find(cell), std::string::npos) << cell << " in " << row3;
  }
  EXPECT_EQ(row3.rfind("3 ", 0), 0u) << row3;
  for (const char* cell :
       {"DONE", "mobilenet", "400, 10m00s, max 50/task, stop 8", "5/5", "500", "12.500"}) {
    EXPECT_NE(row4.find(cell), std::string::npos) << cell << " in " << row4;
  }
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_EQ(fake_.listed.owner(), "alice");
  ASSERT_EQ(fake_.listed.states_size(), 2);
  EXPECT_EQ(fake_.listed.states(0), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(fake_.listed.states(1), v1::JOB_STATE_DONE);
}

TEST_F(ClientTest, DevicesPrintsATable) {
  for (int i = 1; i <= 2; ++i) {
    v1::DeviceInfo& d = fake_.devices.emplace_back();
    d.set_device_id(10 + i);
    d.set_key(i == 1 ? "rk3399" : "titanx");
    d.set_target(i == 1 ? "llvm -mtriple=aarch64" : "cuda");
    d.set_fingerprint(i == 1 ? "board-a" : "gpu-b");
    d.set_state(i == 1 ? "online" : "busy");
    d.set_completed(40 + i);
    d.set_in_flight(i);
    if (i == 1) {
      d.mutable_capabilities()->set_board("Pine64 RockPro64");
      d.mutable_capabilities()->set_cpu_model("Cortex-A53 + Cortex-A72");
      d.mutable_capabilities()->set_cores(6);
      d.mutable_capabilities()->set_memory_bytes(uint64_t{4} << 30);
    } else {
      d.mutable_capabilities()->set_emulated(true);
    }
  }
  Result r = kiln("devices");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"ID",
                        "KEY",
                        "STATE",
                        "TARGET",
                        "BOARD",
                        "CPU",
                        "CORES",
                        "MEMORY",
                        "DONE",
                        "IN_FLIGHT",
                        "11",
                        "rk3399",
                        "online",
                        "llvm -mtriple=aarch64",
                        "Pine64 RockPro64",
                        "Cortex-A53 + Cortex-A72",
                        " 6 ",
                        "4.0 GiB",
                        "41",
                        "12",
                        "titanx",
                        "busy",
                        "- (emulated)",
                        "gpu-b",
                        "42"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " in\n" << r.out;
  }
  r = kiln("devices --key titanx");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("rk3399"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("titanx"), std::string::npos) << r.out;
}

TEST_F(ClientTest, WatchFollowsAJobToDone) {
  add_job(5, "resnet18");
  fake_.updates[5] = {progress(5, v1::JOB_STATE_RUNNING, 1, 2, 100, 3, 0.02),
                      progress(5, v1::JOB_STATE_RUNNING, 1, 2, 150, 3, 0.015),
                      progress(5, v1::JOB_STATE_DONE, 2, 2, 200, 3, 0.0125)};
  Result r = kiln("watch 5");
  ASSERT_EQ(r.code, 0) << r.err;
  // Not a terminal: one line per update.
  EXPECT_NE(r.out.find("job 5 RUNNING  tasks 1/2  trials 150 (3 failed)  best 15.000 ms"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("job 5 DONE  tasks 2/2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("job 5 done: best 12.500 ms"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
}

TEST_F(ClientTest, WatchUnderABudgetDrawsTheMeasurementsOfTheBudget) {
  v1::Job& j = add_job(5, "resnet18");
  j.set_trials(0);
  j.set_budget(40);
  // Three tasks of four done say little under a budget: the bar is 10 of 40 measurements.
  fake_.updates[5] = {progress(5, v1::JOB_STATE_RUNNING, 3, 4, 10, 0, 0.02),
                      progress(5, v1::JOB_STATE_DONE, 4, 4, 40, 0, 0.0125)};
  Result r = kiln("watch 5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("job 5 RUNNING  tasks 3/4  trials 10/40 (0 failed)  best 20.000 ms  "
                       "[#####               ]"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("trials 40/40 (0 failed)  best 12.500 ms  [####################]"),
            std::string::npos)
      << r.out;
}

TEST_F(ClientTest, WatchUnderATimeLimitDrawsTheTimeSinceTheJobStarted) {
  v1::Job& j = add_job(5, "resnet18");
  j.set_trials(0);
  j.set_time_limit_s(120);
  j.set_started_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count() -
                   60'000);
  fake_.updates[5] = {progress(5, v1::JOB_STATE_RUNNING, 0, 4, 3, 0, 0.02),
                      progress(5, v1::JOB_STATE_DONE, 4, 4, 50, 0, 0.0125)};
  Result r = kiln("watch 5");
  ASSERT_EQ(r.code, 0) << r.err;
  // A minute of two: half the bar (a second more on a slow machine does not fill another cell).
  EXPECT_NE(r.out.find("trials 3 (0 failed)  time 1m00s/2m00s  best 20.000 ms  "
                       "[##########          ]"),
            std::string::npos)
      << r.out;
}

TEST_F(ClientTest, WatchOnATerminalRedrawsOneLine) {
  if (!fs::exists("/usr/bin/script")) GTEST_SKIP() << "no /usr/bin/script to give kiln a terminal";
  add_job(5, "resnet18");
  fake_.updates[5] = {progress(5, v1::JOB_STATE_RUNNING, 1, 2, 100, 0, 0.02),
                      progress(5, v1::JOB_STATE_DONE, 2, 2, 200, 0, 0.0125)};
  // script(1) runs kiln on a pseudo-terminal and copies what it draws to its own stdout.
  const std::string inner =
      std::string("'") + KILN_BINARY + "' watch 5 --server 127.0.0.1:" + std::to_string(port_);
  const std::string out = path("tty.txt");
  const int status = shell("env -u KILN_TOKEN -u KILN_SERVER /usr/bin/script -qec \"" + inner +
                           "\" /dev/null >'" + out + "' 2>&1 </dev/null");
  const std::string drawn = read(out);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << drawn;
  EXPECT_NE(drawn.find("\r\033[Kjob 5 RUNNING  tasks 1/2"), std::string::npos) << drawn;
  EXPECT_NE(drawn.find("\r\033[Kjob 5 DONE  tasks 2/2"), std::string::npos) << drawn;
  EXPECT_NE(drawn.find("job 5 done: best 12.500 ms"), std::string::npos) << drawn;
}

TEST_F(ClientTest, WatchOfAFailedJobExitsWithItsError) {
  add_job(8, "bert");
  fake_.jobs[8].set_error("device epyc-3 lost");
  fake_.updates[8] = {progress(8, v1::JOB_STATE_RUNNING, 1, 4, 10, 10, 0),
                      progress(8, v1::JOB_STATE_FAILED, 1, 4, 10, 10, 0)};
  Result r = kiln("watch 8");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("error: job 8 failed: device epyc-3 lost"), std::string::npos) << r.err;
}

TEST_F(ClientTest, WatchOfACancelledJobExitsWithOne) {
  add_job(9, "bert");
  fake_.updates[9] = {progress(9, v1::JOB_STATE_CANCELLED, 1, 4, 10, 0, 0)};
  Result r = kiln("watch 9");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find("job 9 was cancelled"), std::string::npos) << r.err;
}

TEST_F(ClientTest, WatchRetriesWhenTheStreamIsUnavailable) {
  add_job(5, "resnet18");
  fake_.watch_unavailable = 2;
  fake_.updates[5] = {progress(5, v1::JOB_STATE_DONE, 2, 2, 200, 0, 0.01)};
  Result r = kiln("watch 5");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("kilnd is restarting"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("retrying"), std::string::npos) << r.err;
  EXPECT_EQ(fake_.watch_unavailable, 0);
}

TEST_F(ClientTest, CancelSendsTheReason) {
  add_job(6, "resnet18");
  Result r = kiln("cancel 6 --reason 'wrong target'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("job 6 is CANCELLED"), std::string::npos) << r.out;
  std::lock_guard<std::mutex> lock(fake_.mu);
  EXPECT_EQ(fake_.cancelled.job_id(), 6u);
  EXPECT_EQ(fake_.cancelled.reason(), "wrong target");
}

class FetchTest : public ClientTest {
 protected:
  void SetUp() override {
    ClientTest::SetUp();
    add_job(9, "resnet18");
    for (int i = 0; i < 10'000; ++i) fake_.bundle += static_cast<char>((i * 7919) >> 3);
  }
};

TEST_F(FetchTest, WritesExactlyTheServedBytes) {
  Result r = kiln("fetch 9 -o '" + path("out.kiln") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read(path("out.kiln")), fake_.bundle);
  EXPECT_FALSE(fs::exists(path("out.kiln.tmp")));
}

TEST_F(FetchTest, DefaultsToJobN) {
  const std::string cmd = "cd '" + dir_.path().string() + "' && ";
  const std::string out = path("stdout.txt"), err = path("stderr.txt");
  const int status = shell(cmd + "env -u KILN_TOKEN -u KILN_SERVER '" + KILN_BINARY +
                           "' fetch 9 --server 127.0.0.1:" + std::to_string(port_) + " >'" + out +
                           "' 2>'" + err + "'");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read(err);
  EXPECT_EQ(read(path("job9.kiln")), fake_.bundle);
}

TEST_F(FetchTest, ABadChecksumLeavesNoFile) {
  fake_.bundle_kind = FakeKiln::Bundle::kBadChecksum;
  Result r = kiln("fetch 9 -o '" + path("out.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("job 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.kiln")));
  EXPECT_FALSE(fs::exists(path("out.kiln.tmp")));
}

TEST_F(FetchTest, AGapLeavesNoFile) {
  fake_.bundle_kind = FakeKiln::Bundle::kGap;
  Result r = kiln("fetch 9 -o '" + path("out.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("job 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chunk at offset 6000, expected 3000"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.kiln")));
  EXPECT_FALSE(fs::exists(path("out.kiln.tmp")));
}

TEST_F(ClientTest, ServerErrorsShowTheirMessageAndCode) {
  Result r = kiln("watch 42");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: job 42 does not exist (NOT_FOUND)"), std::string::npos) << r.err;
  r = kiln("fetch 42 -o '" + path("x.kiln") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: job 42 does not exist (NOT_FOUND)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("x.kiln")));
  EXPECT_FALSE(fs::exists(path("x.kiln.tmp")));

  {
    std::lock_guard<std::mutex> lock(fake_.mu);
    fake_.token = "s3cret";
  }
  r = kiln("jobs");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("this farm requires a token"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(UNAUTHENTICATED)"), std::string::npos) << r.err;
  r = kiln("jobs", "KILN_TOKEN=wrong");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("the token is wrong"), std::string::npos) << r.err;
}

TEST_F(ClientTest, AnUnreachableServerIsAQuickError) {
  // A port that was free a moment ago: nothing listens there.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string where = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  ::close(fd);
  Result r = kiln("jobs", "", where);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: cannot reach kilnd at " + where), std::string::npos) << r.err;
  EXPECT_LT(r.seconds, 10.0);
}

TEST_F(ClientTest, CommandLineMistakesAreClearErrors) {
  Result r = kiln("submit '" + path("missing.onnx") + "' --target cuda --device-key k --trials 4");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: cannot read model '" + path("missing.onnx") + "'"),
            std::string::npos)
      << r.err;
  for (const char* job : {"abc", "0", "-3", "12x"}) {
    r = kiln(std::string("watch ") + job);
    EXPECT_EQ(r.code, 2) << job;
    EXPECT_NE(r.err.find("error:"), std::string::npos) << job << ": " << r.err;
    EXPECT_NE(r.err.find(job), std::string::npos) << job << ": " << r.err;
  }
  r = kiln("fetch abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("JOB must be a positive job id, got 'abc'"), std::string::npos) << r.err;
  write(path("m.onnx"), "model");
  r = kiln("submit '" + path("m.onnx") + "' --target cuda --device-key k --trials many");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--trials needs a positive number, got 'many'"), std::string::npos) << r.err;
  r = kiln("submit '" + path("m.onnx") + "' --target cuda --trials 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--device-key"), std::string::npos) << r.err;
  // How much to measure: one of --trials, --budget, --time; --early-stop only with a budget.
  r = kiln("submit '" + path("m.onnx") + "' --target cuda --device-key k");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("kiln submit needs --trials (per task), --budget or --time"),
            std::string::npos)
      << r.err;
  r = kiln("submit '" + path("m.onnx") + "' --target cuda --device-key k --budget -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--budget needs a positive number, got '-1'"), std::string::npos) << r.err;
  r = kiln("submit '" + path("m.onnx") + "' --target cuda --device-key k --time soon");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--time needs a duration such as 90s, 10m or 1h, got 'soon'"),
            std::string::npos)
      << r.err;
  r = kiln("submit '" + path("m.onnx") +
           "' --target cuda --device-key k --trials 8 --early-stop 4");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--early-stop needs --budget or --time"), std::string::npos) << r.err;
  r = kiln("jobs --state sleeping");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--state"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sleeping"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln
