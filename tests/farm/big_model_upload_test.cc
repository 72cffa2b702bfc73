// A model far over gRPC's message limits (300 MiB: one constant initializer feeding a MatMul) is
// submitted to kilnd as a process through SubmitModel's chunked stream, read from its file as it
// goes, and accepted; kilnd's resident memory stays well below the model's size throughout (it
// writes the chunks to disk as they arrive), and the job's driver gets the model (FetchModel) and
// extracts its task. Prints the model's size, kilnd's peak resident memory and the upload's time.
// Slow: it writes, checks and imports 300 MiB.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "rpc/model_upload.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/farm/farm_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::context;
using testing::Kilnd;
using testing::TempDir;

constexpr int64_t kK = 8192, kN = 9600;  // W: 8192 x 9600 floats, 300 MiB

/// A /proc/<pid>/status field in bytes ("VmRSS", "VmHWM"); -1 when it cannot be read.
int64_t status_bytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

/// y = x · W with W a 300 MiB constant, written to `path` without holding it twice.
void write_big_model(const std::string& path) {
  testing::OnnxModelBuilder m;
  m.input("x", {1, kK});
  onnx::TensorProto* w = m.graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(kK);
  w->add_dims(kN);
  std::string* raw = w->mutable_raw_data();
  raw->resize(static_cast<size_t>(kK * kN) * sizeof(float));
  float* f = reinterpret_cast<float*>(raw->data());
  for (int64_t i = 0; i < kK * kN; ++i) f[i] = static_cast<float>(i % 251) * 1e-3f - 0.1f;
  m.node("MatMul", "mm", {"x", "w"}, {"y"});
  m.output("y");
  ASSERT_TRUE(m.write(path)) << "cannot write " << path;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

TEST(BigModelUploadTest, A300MiBModelIsAcceptedWhileKilndStaysFarBelowItsSize) {
  TempDir dir("upload_big");
  Kilnd kilnd(dir, {"--max-model-bytes", std::to_string(512u << 20), "--max-running-jobs", "1"});
  {
    v1::RegisterDeviceRequest reg;
    reg.set_key("cpu");
    reg.set_target("llvm");
    v1::RegisterDeviceResponse resp;
    ASSERT_TRUE(kilnd.tracker()->RegisterDevice(context().get(), reg, &resp).ok());
  }
  const std::string path = dir.file("big.onnx");
  write_big_model(path);
  const uint64_t size = fs::file_size(path);
  ASSERT_GT(size, 300u << 20);

  const pid_t pid = kilnd.process().pid();
  const int64_t rss_before = status_bytes(pid, "VmRSS");
  ASSERT_GT(rss_before, 0) << "cannot read /proc/" << pid << "/status";
  // VmHWM is the peak since kilnd started; samples of VmRSS show the upload's own course.
  std::atomic<bool> done{false};
  std::atomic<int64_t> rss_peak{rss_before};
  std::thread sampler([&] {
    while (!done) {
      rss_peak = std::max<int64_t>(rss_peak, status_bytes(pid, "VmRSS"));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  v1::SubmitModelRequest job;
  job.set_name("big");
  job.set_target("llvm");
  job.set_device_key("cpu");
  job.set_trials(1);
  std::ifstream in(path, std::ios::binary);
  v1::SubmitModelResponse resp;
  auto ctx = context("", std::chrono::seconds(110));
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t sent_all = 0;
  double upload_s = 0;
  const grpc::Status st =
      rpc::submit_model(*kilnd.service(), *ctx, job, in, size, &resp, [&](uint64_t sent) {
        if (sent == size) {
          sent_all = sent;
          upload_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
      });
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  sampler.join();
  const int64_t hwm = status_bytes(pid, "VmHWM");
  ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << kilnd.process().stderr_text();
  EXPECT_EQ(sent_all, size);

  const int64_t growth = std::max<int64_t>(hwm, rss_peak) - rss_before;
  std::printf(
      "model %.1f MiB: sent in %.2f s (%.0f MiB/s), job %llu answered after %.2f s (the "
      "--check child included); kilnd RSS %.1f MiB before, peak %.1f MiB sampled, VmHWM %.1f "
      "MiB: growth %.1f MiB (%.1f%% of the model)\n",
      mib(static_cast<int64_t>(size)), upload_s, mib(static_cast<int64_t>(size)) / upload_s,
      static_cast<unsigned long long>(resp.job_id()), total_s, mib(rss_before), mib(rss_peak),
      mib(hwm), mib(growth), 100.0 * static_cast<double>(growth) / static_cast<double>(size));
  EXPECT_LT(growth, static_cast<int64_t>(size / 2))
      << "kilnd's resident memory grew by " << mib(growth) << " MiB for a " << mib(size)
      << " MiB model";

  // The job holds the whole model; no upload file is left.
  const fs::path models = fs::path(kilnd.state_dir()) / "models";
  EXPECT_EQ(fs::file_size(models / (std::to_string(resp.job_id()) + ".onnx")), size);
  for (const fs::directory_entry& e : fs::directory_iterator(models))
    EXPECT_NE(e.path().filename().string().rfind("upload-", 0), 0u) << e.path();

  // Its driver gets the model too (FetchModel's chunks): it imports it and extracts the task.
  v1::Job j;
  const auto t1 = std::chrono::steady_clock::now();
  EXPECT_TRUE(testing::eventually(
      [&] {
        v1::GetJobRequest get;
        get.set_job_id(resp.job_id());
        return kilnd.service()->GetJob(context().get(), get, &j).ok() &&
               (j.progress().tasks_total() > 0 || j.progress().state() == v1::JOB_STATE_FAILED);
      },
      std::chrono::seconds(90)))
      << "phase: " << j.progress().phase();
  EXPECT_EQ(j.progress().tasks_total(), 1u) << j.error();
  const int64_t hwm_after_driver = status_bytes(pid, "VmHWM");
  std::printf(
      "its driver fetched and imported it and extracted %u task(s) in %.2f s; kilnd's VmHWM "
      "then %.1f MiB\n",
      j.progress().tasks_total(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(),
      mib(hwm_after_driver));
  EXPECT_LT(hwm_after_driver - rss_before, static_cast<int64_t>(size / 2))
      << "kilnd's resident memory grew by " << mib(hwm_after_driver - rss_before)
      << " MiB sending the model to its driver";
  v1::CancelJobRequest cancel;  // nothing measures on the registered device
  cancel.set_job_id(resp.job_id());
  v1::Job cancelled;
  EXPECT_TRUE(kilnd.service()->CancelJob(context().get(), cancel, &cancelled).ok());
}

}  // namespace
}  // namespace kiln
