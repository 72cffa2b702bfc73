// SubmitModel's upload stream against kilnd as a process on 127.0.0.1: a model in chunks makes a
// job holding exactly its bytes; a model over --max-model-bytes (announced or not), a bad checksum,
// a stream cut short or cancelled mid-way, and a stream without its job are refused with messages
// naming the sizes or values, and leave no file in kilnd's models folder and no job; an upload a
// killed kilnd left behind is gone after its restart.
#include "rpc/model_upload.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/fnv1a.h"
#include "tests/common/small_cnn.h"
#include "tests/farm/farm_test_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using grpc::StatusCode;
using testing::context;
using testing::Kilnd;
using testing::TempDir;

#define EXPECT_STATUS(status, code, text)                                                \
  do {                                                                                   \
    const grpc::Status st_ = (status);                                                   \
    EXPECT_EQ(st_.error_code(), code) << st_.error_message();                            \
    EXPECT_NE(st_.error_message().find(text), std::string::npos) << st_.error_message(); \
  } while (0)

/// The names of the files in kilnd's models folder: the jobs' models and uploads in progress.
std::vector<std::string> model_files(const Kilnd& k) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(fs::path(k.state_dir()) / "models"))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

int job_count(Kilnd& k) {
  v1::ListJobsResponse list;
  EXPECT_TRUE(k.service()->ListJobs(context().get(), {}, &list).ok());
  return list.jobs_size();
}

/// Registers a device of key "cpu" (nothing measures on it: jobs only need its key to exist).
void register_cpu(Kilnd& k) {
  v1::RegisterDeviceRequest reg;
  reg.set_key("cpu");
  reg.set_target("llvm");
  v1::RegisterDeviceResponse resp;
  ASSERT_TRUE(k.tracker()->RegisterDevice(context().get(), reg, &resp).ok());
}

v1::SubmitModelRequest cnn_job() {
  v1::SubmitModelRequest r;
  r.set_name("cnn");
  r.set_target("llvm");
  r.set_device_key("cpu");
  r.set_trials(4);
  return r;
}

v1::ModelUpload job_message(const v1::SubmitModelRequest& job) {
  v1::ModelUpload m;
  *m.mutable_job() = job;
  return m;
}
v1::ModelUpload chunk_message(const std::string& bytes) {
  v1::ModelUpload m;
  m.set_chunk(bytes);
  return m;
}
v1::ModelUpload checksum_message(uint64_t checksum) {
  v1::ModelUpload m;
  m.set_checksum(checksum);
  return m;
}

/// SubmitModel with exactly `messages` (WritesDone after them): the status.
grpc::Status send(Kilnd& k, const std::vector<v1::ModelUpload>& messages) {
  auto service = k.service();
  auto ctx = context();
  v1::SubmitModelResponse resp;
  auto writer = service->SubmitModel(ctx.get(), &resp);
  for (const v1::ModelUpload& m : messages) {
    if (!writer->Write(m)) break;  // kilnd ended the call: Finish says why
  }
  writer->WritesDone();
  return writer->Finish();
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

TEST(ModelUploadTest, AModelInChunksMakesAJobHoldingExactlyItsBytes) {
  TempDir dir("upload_chunks");
  Kilnd kilnd(dir, {"--max-running-jobs", "1"});
  register_cpu(kilnd);
  auto service = kilnd.service();
  const std::string model = testing::small_cnn_model();
  ASSERT_GT(model.size(), 3000u);

  // Announced, in chunks of 1000 bytes.
  std::istringstream in(model);
  v1::SubmitModelResponse resp;
  auto ctx = context();
  const grpc::Status st =
      rpc::submit_model(*service, *ctx, cnn_job(), in, model.size(), &resp, {}, 1000);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const std::string stored =
      (fs::path(kilnd.state_dir()) / "models" / (std::to_string(resp.job_id()) + ".onnx")).string();
  std::ifstream f(stored, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(f), {}};
  EXPECT_TRUE(bytes == model) << stored << " holds " << bytes.size() << " bytes";

  // Not announced (model_size 0): the same, as long as the checksum holds.
  std::vector<v1::ModelUpload> messages = {job_message(cnn_job())};
  for (size_t at = 0; at < model.size(); at += 4096)
    messages.push_back(chunk_message(model.substr(at, 4096)));
  messages.push_back(checksum_message(fnv1a64(model.data(), model.size())));
  EXPECT_TRUE(send(kilnd, messages).ok());

  EXPECT_EQ(job_count(kilnd), 2);
  const std::vector<std::string> files = model_files(kilnd);
  EXPECT_EQ(files.size(), 2u);
  for (const std::string& name : files) EXPECT_EQ(name.rfind("upload-", 0), std::string::npos);
}

TEST(ModelUploadTest, AModelOverTheLimitIsRefusedWithBothSizesAndLeavesNothing) {
  TempDir dir("upload_limit");
  Kilnd kilnd(dir, {"--max-model-bytes", "20000", "--max-running-jobs", "1"});
  register_cpu(kilnd);
  const std::string big(30000, 'x');

  // Announced: refused at once, before the chunks.
  v1::SubmitModelRequest job = cnn_job();
  job.set_model_size(big.size());
  EXPECT_STATUS(send(kilnd, {job_message(job)}), StatusCode::RESOURCE_EXHAUSTED,
                "the model is 30000 bytes (its model_size), over this farm's limit of 20000 bytes");

  // Not announced: refused by the chunk that goes past the limit.
  std::vector<v1::ModelUpload> messages = {job_message(cnn_job())};
  for (size_t at = 0; at < big.size(); at += 8000)
    messages.push_back(chunk_message(big.substr(at, 8000)));
  messages.push_back(checksum_message(fnv1a64(big.data(), big.size())));
  EXPECT_STATUS(send(kilnd, messages), StatusCode::RESOURCE_EXHAUSTED,
                "over this farm's limit of 20000 bytes (24000 bytes arrived)");

  // Announced too small, then sent in full: refused as the bytes pass the announced size.
  job.set_model_size(10000);
  messages[0] = job_message(job);
  EXPECT_STATUS(send(kilnd, messages), StatusCode::INVALID_ARGUMENT,
                "more of the model arrived (16000 bytes) than its model_size of 10000 bytes");

  EXPECT_TRUE(model_files(kilnd).empty());
  EXPECT_EQ(job_count(kilnd), 0);
}

TEST(ModelUploadTest, ABadChecksumOrSizeIsRefusedNamingBothAndLeavesNothing) {
  TempDir dir("upload_checksum");
  Kilnd kilnd(dir, {"--max-running-jobs", "1"});
  register_cpu(kilnd);
  const std::string model = testing::small_cnn_model();
  const uint64_t sum = fnv1a64(model.data(), model.size());

  EXPECT_STATUS(
      send(kilnd, {job_message(cnn_job()), chunk_message(model), checksum_message(sum ^ 1)}),
      StatusCode::INVALID_ARGUMENT,
      "checksum mismatch: the client sent " + hex64(sum ^ 1) + ", the " +
          std::to_string(model.size()) + " bytes received hash to " + hex64(sum));

  v1::SubmitModelRequest job = cnn_job();
  job.set_model_size(model.size() + 10);
  EXPECT_STATUS(send(kilnd, {job_message(job), chunk_message(model), checksum_message(sum)}),
                StatusCode::INVALID_ARGUMENT,
                "the model ended after " + std::to_string(model.size()) +
                    " bytes, short of its model_size of " + std::to_string(model.size() + 10));

  EXPECT_STATUS(send(kilnd, {job_message(cnn_job()), checksum_message(kFnv1a64Basis)}),
                StatusCode::INVALID_ARGUMENT, "the model is empty");

  EXPECT_TRUE(model_files(kilnd).empty());
  EXPECT_EQ(job_count(kilnd), 0);
}

TEST(ModelUploadTest, AStreamCutShortOrCancelledMidWayLeavesNothing) {
  TempDir dir("upload_cancel");
  Kilnd kilnd(dir, {"--max-running-jobs", "1"});
  register_cpu(kilnd);
  const std::string model = testing::small_cnn_model();

  // No job first; the job twice; the stream ending before the checksum.
  EXPECT_STATUS(send(kilnd, {chunk_message(model)}), StatusCode::INVALID_ARGUMENT,
                "the stream's first message must be the job");
  EXPECT_STATUS(send(kilnd, {job_message(cnn_job()), chunk_message(model), job_message(cnn_job())}),
                StatusCode::INVALID_ARGUMENT, "a second job after " + std::to_string(model.size()));
  EXPECT_STATUS(send(kilnd, {job_message(cnn_job()), chunk_message(model)}),
                StatusCode::INVALID_ARGUMENT,
                "the upload ended after " + std::to_string(model.size()) +
                    " bytes of the model, without its checksum");
  // A chunk over gRPC's default message size (kilnd accepts 64 MiB messages for other calls).
  EXPECT_STATUS(send(kilnd, {job_message(cnn_job()), chunk_message(std::string(5u << 20, 'x'))}),
                StatusCode::INVALID_ARGUMENT, "over the limit of 4194304 per message");

  // A client that cancels mid-stream: what arrived was on disk (not in kilnd's memory), and goes.
  {
    auto service = kilnd.service();
    auto ctx = context();
    v1::SubmitModelResponse resp;
    auto writer = service->SubmitModel(ctx.get(), &resp);
    v1::SubmitModelRequest job = cnn_job();
    job.set_model_size(16u << 20);
    ASSERT_TRUE(writer->Write(job_message(job)));
    const std::string mib(1u << 20, 'm');
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(writer->Write(chunk_message(mib)));
    const fs::path models = fs::path(kilnd.state_dir()) / "models";
    EXPECT_TRUE(testing::eventually(
        [&] {
          const std::vector<std::string> files = model_files(kilnd);
          std::error_code ec;
          return files.size() == 1 && files[0].rfind("upload-", 0) == 0 &&
                 fs::file_size(models / files[0], ec) == (3u << 20);
        },
        std::chrono::seconds(10)))
        << "the 3 MiB sent are not in an upload file";
    ctx->TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), StatusCode::CANCELLED);
  }
  EXPECT_TRUE(
      testing::eventually([&] { return model_files(kilnd).empty(); }, std::chrono::seconds(10)))
      << model_files(kilnd).size() << " files left";
  EXPECT_EQ(job_count(kilnd), 0);
}

TEST(ModelUploadTest, AnUploadAKilledKilndLeftIsGoneAfterItsRestart) {
  TempDir dir("upload_restart");
  Kilnd kilnd(dir, {"--max-running-jobs", "1"});
  kilnd.kill(SIGKILL);
  const fs::path models = fs::path(kilnd.state_dir()) / "models";
  std::ofstream(models / "upload-0123abcd.onnx") << "half a model";
  std::ofstream(models / "7.onnx") << "a job's model";
  kilnd.start();
  EXPECT_EQ(model_files(kilnd), std::vector<std::string>{"7.onnx"});
}

}  // namespace
}  // namespace kiln
