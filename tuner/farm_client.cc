#include "tuner/farm_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/fnv1a.h"
#include "rpc/channel.h"
#include "rpc/wire.h"

namespace kiln::tuner {
namespace {

using grpc::StatusCode;

constexpr auto kShortCall = std::chrono::seconds(60);
constexpr size_t kUploadChunk = 1u << 20;

}  // namespace

struct FarmClient::Impl {
  std::unique_ptr<v1::JobDriver::Stub> stub;
  std::string token;

  std::unique_ptr<grpc::ClientContext> context(bool long_call) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    rpc::add_token(*ctx, token);
    if (!long_call) ctx->set_deadline(std::chrono::system_clock::now() + kShortCall);
    return ctx;
  }

  /// Throws what `status` of `call` means for the driver (see the header).
  [[noreturn]] static void fail(const char* call, const grpc::Status& status) {
    const std::string what = std::string(call) + ": " + status.error_message();
    switch (status.error_code()) {
      case StatusCode::CANCELLED:
      case StatusCode::PERMISSION_DENIED:
        throw Stopped{what};
      case StatusCode::FAILED_PRECONDITION:
        KILN_USER_ERROR() << status.error_message();
      default:
        KILN_SYSTEM_ERROR() << "kilnd refused " << what << " (" << status.error_code() << ")";
    }
    KILN_UNREACHABLE();
  }

  /// Calls `call` until it answers, retrying UNAVAILABLE a few times.
  template <typename Call>
  void short_call(const char* name, Call&& call) const {
    auto pause = std::chrono::milliseconds(200);
    for (int attempt = 0;; ++attempt) {
      auto ctx = context(false);
      const grpc::Status st = call(ctx.get());
      if (st.ok()) return;
      const bool stopping = st.error_message().find("kilnd is stopping") != std::string::npos;
      if (st.error_code() == StatusCode::UNAVAILABLE && stopping) throw Stopped{st.error_message()};
      if (st.error_code() != StatusCode::UNAVAILABLE || attempt >= 4) fail(name, st);
      std::this_thread::sleep_for(pause);
      pause *= 2;
    }
  }
};

FarmClient::FarmClient(const std::string& server, const std::string& tls_ca, std::string token,
                       uint64_t job, std::string secret)
    : impl_(std::make_unique<Impl>()) {
  impl_->stub = v1::JobDriver::NewStub(rpc::make_channel(server, tls_ca));
  impl_->token = std::move(token);
  auth_.set_job_id(job);
  auth_.set_secret(std::move(secret));
}

FarmClient::~FarmClient() = default;

v1::DriverJob FarmClient::job() {
  v1::DriverJobRequest req;
  *req.mutable_auth() = auth_;
  v1::DriverJob out;
  impl_->short_call("GetDriverJob", [&](grpc::ClientContext* c) {
    return impl_->stub->GetDriverJob(c, req, &out);
  });
  return out;
}

std::string FarmClient::model() {
  v1::DriverJobRequest req;
  *req.mutable_auth() = auth_;
  auto ctx = impl_->context(true);  // a big model takes a while
  auto reader = impl_->stub->FetchModel(ctx.get(), req);
  std::string bytes;
  uint64_t hash = kFnv1a64Basis;
  bool last = false;
  v1::BundleChunk c;
  while (reader->Read(&c)) {
    KILN_SYSTEM_CHECK(!last && c.offset() == bytes.size() &&
                      c.offset() + c.data().size() <= c.total_size())
        << "FetchModel: a chunk of " << c.data().size() << " bytes at offset " << c.offset()
        << " of " << c.total_size() << ", after " << bytes.size() << " bytes"
        << (last ? " and the last chunk" : "");
    if (bytes.empty()) bytes.reserve(c.total_size());  // the model once in memory, not twice
    bytes += c.data();
    hash = fnv1a64(c.data().data(), c.data().size(), hash);
    if (c.last()) {
      last = true;
      KILN_SYSTEM_CHECK(bytes.size() == c.total_size() && c.checksum() == hash)
          << "FetchModel: the model's " << bytes.size() << " bytes of " << c.total_size()
          << " do not match its checksum";
    }
  }
  const grpc::Status st = reader->Finish();
  if (!st.ok()) Impl::fail("FetchModel", st);
  KILN_SYSTEM_CHECK(last) << "FetchModel: the stream ended after " << bytes.size()
                          << " bytes, without its last chunk";
  return bytes;
}

void FarmClient::progress(v1::DriverProgress progress) {
  *progress.mutable_auth() = auth_;
  v1::DriverProgressResponse out;
  impl_->short_call("ReportDriverProgress", [&](grpc::ClientContext* c) {
    return impl_->stub->ReportDriverProgress(c, progress, &out);
  });
}

v1::TaskRecords FarmClient::records(const std::string& task_key, bool best_only) {
  v1::TaskRecordsRequest req;
  *req.mutable_auth() = auth_;
  req.set_task_key(task_key);
  req.set_best_only(best_only);
  v1::TaskRecords out;
  impl_->short_call("GetTaskRecords", [&](grpc::ClientContext* c) {
    return impl_->stub->GetTaskRecords(c, req, &out);
  });
  return out;
}

std::vector<records::TaskHistory> FarmClient::history() {
  v1::DriverJobRequest req;
  *req.mutable_auth() = auth_;
  auto ctx = impl_->context(true);  // a big log takes a while
  auto reader = impl_->stub->GetTargetHistory(ctx.get(), req);
  std::vector<records::TaskHistory> out;
  v1::TaskHistory m;
  while (reader->Read(&m)) {
    if (out.empty() || out.back().task_key != m.task_key()) {
      out.push_back({m.task_key(), {m.template_name(), m.workload()}, {}});
    }
    for (int i = 0; i < m.records_size(); ++i) {
      out.back().records.push_back(
          rpc::from_wire(m.records(i), "kilnd's record of task " + m.task_key()));
    }
  }
  const grpc::Status st = reader->Finish();
  if (!st.ok()) Impl::fail("GetTargetHistory", st);
  return out;
}

v1::ShelfEntry FarmClient::shelf(const std::string& name) {
  v1::ShelfRequest req;
  *req.mutable_auth() = auth_;
  req.set_name(name);
  v1::ShelfEntry out;
  impl_->short_call("GetShelf",
                    [&](grpc::ClientContext* c) { return impl_->stub->GetShelf(c, req, &out); });
  return out;
}

void FarmClient::put_shelf(const std::string& name, const std::string& data) {
  v1::PutShelfRequest req;
  *req.mutable_auth() = auth_;
  req.set_name(name);
  req.set_data(data);
  v1::PutShelfResponse out;
  impl_->short_call("PutShelf",
                    [&](grpc::ClientContext* c) { return impl_->stub->PutShelf(c, req, &out); });
}

std::vector<uint64_t> FarmClient::append(const std::vector<records::MeasureRecord>& recs) {
  v1::AppendRecordsRequest req;
  *req.mutable_auth() = auth_;
  for (const records::MeasureRecord& r : recs) *req.add_records() = rpc::to_wire(r);
  v1::AppendRecordsResponse out;
  impl_->short_call("AppendRecords", [&](grpc::ClientContext* c) {
    return impl_->stub->AppendRecords(c, req, &out);
  });
  return {out.seqs().begin(), out.seqs().end()};
}

std::vector<records::MeasureRecord> FarmClient::measure(v1::MeasureBatchRequest req) {
  *req.mutable_auth() = auth_;
  v1::MeasureBatchResponse out;
  auto ctx = impl_->context(true);
  const grpc::Status st = impl_->stub->MeasureBatch(ctx.get(), req, &out);
  if (!st.ok()) {
    if (st.error_code() == StatusCode::UNAVAILABLE &&
        st.error_message().find("kilnd is stopping") != std::string::npos) {
      throw Stopped{st.error_message()};
    }
    Impl::fail("MeasureBatch", st);
  }
  KILN_SYSTEM_CHECK(out.records_size() == req.configs_size())
      << "MeasureBatch: kilnd answered " << out.records_size() << " records for "
      << req.configs_size() << " configs";
  std::vector<records::MeasureRecord> recs;
  for (int i = 0; i < out.records_size(); ++i)
    recs.push_back(rpc::from_wire(out.records(i), "MeasureBatch record " + std::to_string(i)));
  return recs;
}

void FarmClient::upload(const std::string& bundle) {
  auto ctx = impl_->context(true);
  v1::UploadBundleResponse out;
  auto writer = impl_->stub->UploadBundle(ctx.get(), &out);
  size_t offset = 0;
  do {
    v1::BundleUpload chunk;
    *chunk.mutable_auth() = auth_;
    const size_t n = std::min(kUploadChunk, bundle.size() - offset);
    chunk.set_data(bundle.substr(offset, n));
    offset += n;
    if (offset == bundle.size()) {
      chunk.set_last(true);
      chunk.set_checksum(fnv1a64(bundle.data(), bundle.size()));
    }
    if (!writer->Write(chunk)) break;
  } while (offset < bundle.size());
  writer->WritesDone();
  const grpc::Status st = writer->Finish();
  if (!st.ok()) Impl::fail("UploadBundle", st);
}

}  // namespace kiln::tuner
