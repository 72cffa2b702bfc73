#include "server/services.h"

#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/fnv1a.h"
#include "rpc/channel.h"
#include "rpc/reactor_order.h"
#include "server/wire.h"

namespace kiln::server {
namespace {

using grpc::Status;
using grpc::StatusCode;

/// Runs `body`, turning exceptions into statuses.
template <typename F>
Status guarded(F&& body) {
  try {
    return body();
  } catch (const FarmError& e) {
    return to_status(e);
  } catch (const kiln::Error& e) {
    return Status(StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const kiln::SystemError& e) {
    return Status(StatusCode::UNAVAILABLE, e.what());
  } catch (const std::exception& e) {
    return Status(StatusCode::INTERNAL, e.what());
  }
}

#define KILN_CHECK_TOKEN(ctx, token) \
  if (!rpc::has_token(*(ctx), (token))) return rpc::unauthenticated(*(ctx))

/// Streams the file at `path` in BundleChunks of `chunk` bytes (offset, total size; the last
/// with the FNV-1a of the whole). INTERNAL naming `what` when it cannot be read.
Status stream_file(const std::string& path, uint32_t chunk,
                   grpc::ServerWriter<v1::BundleChunk>* writer, const std::string& what) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status(StatusCode::INTERNAL, what + " '" + path + "' is missing");
  const uint64_t total = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  uint64_t offset = 0, hash = kFnv1a64Basis;
  std::string buf;
  do {
    const uint64_t n = std::min<uint64_t>(chunk, total - offset);
    buf.resize(n);
    in.read(buf.data(), static_cast<std::streamsize>(n));
    if (!in) return Status(StatusCode::INTERNAL, "reading " + what + " '" + path + "' failed");
    hash = fnv1a64(buf.data(), buf.size(), hash);
    v1::BundleChunk c;
    c.set_offset(offset);
    c.set_data(buf);
    c.set_total_size(total);
    offset += n;
    if (offset == total) {
      c.set_last(true);
      c.set_checksum(hash);
    }
    if (!writer->Write(c)) return Status::CANCELLED;
  } while (offset < total);
  return Status::OK;
}

Status missing(const char* rpc, const char* field) {
  return Status(StatusCode::INVALID_ARGUMENT, std::string(rpc) + ": " + field + " is missing");
}

}  // namespace

Status to_status(const FarmError& e) {
  switch (e.code()) {
    case FarmError::Code::kInvalidArgument:
      return Status(StatusCode::INVALID_ARGUMENT, e.what());
    case FarmError::Code::kNotFound:
      return Status(StatusCode::NOT_FOUND, e.what());
    case FarmError::Code::kFailedPrecondition:
      return Status(StatusCode::FAILED_PRECONDITION, e.what());
    case FarmError::Code::kResourceExhausted:
      return Status(StatusCode::RESOURCE_EXHAUSTED, e.what());
    case FarmError::Code::kPermissionDenied:
      return Status(StatusCode::PERMISSION_DENIED, e.what());
    case FarmError::Code::kCancelled:
      return Status(StatusCode::CANCELLED, e.what());
    case FarmError::Code::kUnavailable:
      return Status(StatusCode::UNAVAILABLE, e.what());
  }
  return Status(StatusCode::INTERNAL, e.what());
}

// --- Tracker ------------------------------------------------------------------------------

Status TrackerService::RegisterDevice(grpc::ServerContext* ctx,
                                      const v1::RegisterDeviceRequest* req,
                                      v1::RegisterDeviceResponse* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    const Farm::Registration r = farm_.register_device(*req);
    resp->set_device_id(r.id);
    resp->set_lease_ms(r.lease_ms);
    resp->set_tracker_instance(farm_.instance());
    return Status::OK;
  });
}

Status TrackerService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                 v1::HeartbeatResponse* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    const Farm::Lease l = farm_.heartbeat(req->device_id(), req->device_clock_ms());
    resp->set_known(l.known);
    resp->set_lease_ms(l.lease_ms);
    resp->set_quarantined(l.quarantined);
    resp->set_quarantine_reason(l.reason);
    return Status::OK;
  });
}

namespace {

/// A stream that ends at once with `status` (a refused GetWork).
class FinishedStream final : public grpc::ServerWriteReactor<v1::MeasureRequest> {
 public:
  explicit FinishedStream(const Status& status) {
    rpc::handed_to_grpc(this);
    Finish(status);
  }
  void OnDone() override {
    rpc::reacting(this);
    delete this;
  }
};

/// One device's GetWork stream: the farm delivers requests to it (under the farm's lock) and it
/// writes them one at a time. Lock order: the farm's lock, then this stream's.
class WorkStream final : public grpc::ServerWriteReactor<v1::MeasureRequest>, public WorkSink {
 public:
  WorkStream(Farm& farm, uint64_t device) : farm_(farm), device_(device) {}

  /// Attaches to the farm (which may deliver at once) or finishes.
  void start() {
    rpc::handed_to_grpc(this);
    switch (farm_.attach(device_, this)) {
      case Farm::Attach::kAttached:
        return;
      case Farm::Attach::kUnknownDevice:
        finish(Status(StatusCode::NOT_FOUND,
                      "device " + std::to_string(device_) + " is not registered (register again)"));
        return;
      case Farm::Attach::kStopping:
        finish(Status(StatusCode::UNAVAILABLE, "kilnd is stopping"));
        return;
    }
  }

  void deliver(v1::MeasureRequest wire) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;  // the device is being dropped; its work is re-queued
    pending_.push_back(std::move(wire));
    if (!writing_) write_next_locked();
  }
  void close(bool stopping, const std::string& why) override {
    finish(Status(stopping ? StatusCode::UNAVAILABLE : StatusCode::NOT_FOUND, why));
  }

  void OnWriteDone(bool ok) override {
    rpc::reacting(this);
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (finish_after_write_) {
        rpc::handed_to_grpc(this);
        Finish(final_);
        return;
      }
      if (ok) {
        if (!pending_.empty()) write_next_locked();
        return;
      }
    }
    farm_.device_gone(device_, "went away while a request was sent to it");
    finish(Status::CANCELLED);
  }
  void OnCancel() override {
    rpc::reacting(this);
    farm_.device_gone(device_, "closed its work stream");
    finish(Status::CANCELLED);
  }
  void OnDone() override {
    rpc::reacting(this);
    farm_.detach(device_, this);
    delete this;
  }

 private:
  void write_next_locked() {
    current_ = std::move(pending_.front());
    pending_.pop_front();
    writing_ = true;
    rpc::handed_to_grpc(this);
    StartWrite(&current_);
  }
  void finish(const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    pending_.clear();
    if (writing_) {
      final_ = status;
      finish_after_write_ = true;  // a write is in flight: finish when it is done
    } else {
      rpc::handed_to_grpc(this);
      Finish(status);
    }
  }

  Farm& farm_;
  const uint64_t device_;
  std::mutex mu_;
  std::deque<v1::MeasureRequest> pending_;
  v1::MeasureRequest current_;
  bool writing_ = false;
  bool finishing_ = false;
  bool finish_after_write_ = false;
  Status final_;
};

}  // namespace

grpc::ServerWriteReactor<v1::MeasureRequest>* TrackerService::GetWork(
    grpc::CallbackServerContext* ctx, const v1::GetWorkRequest* req) {
  if (!rpc::has_token(*ctx, token_)) return new FinishedStream(rpc::unauthenticated(*ctx));
  if (req->device_id() == 0) return new FinishedStream(missing("GetWork", "device_id"));
  auto* stream = new WorkStream(farm_, req->device_id());
  stream->start();
  return stream;
}

grpc::ServerUnaryReactor* TrackerService::ReportResult(grpc::CallbackServerContext* ctx,
                                                       const v1::MeasureResult* req,
                                                       v1::ReportResultResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (!rpc::has_token(*ctx, token_)) {
    reactor->Finish(rpc::unauthenticated(*ctx));
  } else if (req->request_id() == 0) {
    reactor->Finish(missing("ReportResult", "request_id"));
  } else if (req->device_id() == 0) {
    reactor->Finish(missing("ReportResult", "device_id"));
  } else {
    try {
      farm_.report_result(*req, [reactor, resp](bool accepted, std::exception_ptr error) {
        if (!error) {
          resp->set_accepted(accepted);
          reactor->Finish(Status::OK);
          return;
        }
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          reactor->Finish(Status(StatusCode::INTERNAL, e.what()));
        } catch (...) {
          reactor->Finish(Status(StatusCode::INTERNAL, "the record log failed"));
        }
      });
    } catch (const std::exception& e) {
      reactor->Finish(Status(StatusCode::INTERNAL, e.what()));
    }
  }
  return reactor;
}

Status TrackerService::GetBuildWork(grpc::ServerContext* ctx, const v1::GetBuildWorkRequest* req,
                                    v1::BuildBatch* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  if (req->worker_id().empty()) return missing("GetBuildWork", "worker_id");
  return guarded([&] {
    const std::vector<std::string> targets(req->targets().begin(), req->targets().end());
    const uint32_t wait_ms = std::min<uint32_t>(req->wait_ms(), 30000);
    for (v1::BuildRequest& b :
         farm_.take_builds(req->worker_id(), req->max_batch() ? req->max_batch() : 1, targets,
                           std::chrono::milliseconds(wait_ms))) {
      *resp->add_builds() = std::move(b);
    }
    return Status::OK;
  });
}

Status TrackerService::ReportArtifact(grpc::ServerContext* ctx,
                                      const v1::ReportArtifactRequest* req,
                                      v1::ReportArtifactResponse* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  if (req->build_id() == 0) return missing("ReportArtifact", "build_id");
  if (req->worker_id().empty()) return missing("ReportArtifact", "worker_id");
  if (!req->has_artifact()) return missing("ReportArtifact", "artifact");
  return guarded([&] {
    resp->set_accepted(farm_.report_artifact(req->build_id(), req->worker_id(), req->artifact()));
    return Status::OK;
  });
}

// --- KilnService --------------------------------------------------------------------------

bool KilnService::admit_submit(const std::string& peer) {
  // "ipv4:127.0.0.1:5555" -> "ipv4:127.0.0.1": one budget per address, not per connection.
  const std::string address = peer.substr(0, peer.rfind(':'));
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(rate_mu_);
  auto& [window_start, count] = submits_[address];
  if (now - window_start >= std::chrono::minutes(1)) {
    window_start = now;
    count = 0;
  }
  return ++count <= options_.submits_per_minute;
}

Status KilnService::SubmitModel(grpc::ServerContext* ctx,
                                grpc::ServerReader<v1::ModelUpload>* reader,
                                v1::SubmitModelResponse* resp) {
  return submit_model(
      ctx, [reader](v1::ModelUpload& m) { return reader->Read(&m); }, resp);
}

Status KilnService::submit_model(grpc::ServerContext* ctx,
                                 const std::function<bool(v1::ModelUpload&)>& read,
                                 v1::SubmitModelResponse* resp) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  v1::ModelUpload first;
  if (!read(first) || !first.has_job()) {
    return Status(StatusCode::INVALID_ARGUMENT,
                  "SubmitModel: the stream's first message must be the job (ModelUpload.job), "
                  "before the model's chunks");
  }
  const v1::SubmitModelRequest& req = first.job();
  if (req.target().empty()) return missing("SubmitModel", "target");
  if (req.device_key().empty()) return missing("SubmitModel", "device_key");
  if (!admit_submit(ctx->peer())) {
    return Status(StatusCode::RESOURCE_EXHAUSTED,
                  "SubmitModel: more than " + std::to_string(options_.submits_per_minute) +
                      " submissions in a minute from " + ctx->peer());
  }
  return guarded([&] {
    Submission s;
    s.name = req.name().empty() ? "model" : req.name();
    s.target = req.target();
    s.device_key = req.device_key();
    s.owner = req.owner();
    s.trials = req.trials();
    s.budget = req.budget();
    s.time_limit_s = req.time_limit_s();
    if (req.has_early_stop()) s.early_stop = req.early_stop();
    s.priority = req.priority();
    s.model_size = req.model_size();
    for (const v1::InputShape& shape : req.input_shapes()) {
      s.input_shapes.emplace_back(shape.name(),
                                  std::vector<int64_t>(shape.dims().begin(), shape.dims().end()));
    }
    resp->set_job_id(farm_.submit(s, read));
    return Status::OK;
  });
}

Status KilnService::GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* resp) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  if (req->job_id() == 0) return missing("GetJob", "job_id");
  return guarded([&] {
    *resp = to_wire(farm_.job(req->job_id()));
    return Status::OK;
  });
}

Status KilnService::ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                             v1::ListJobsResponse* resp) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  std::set<tracker::JobState> states;
  for (int s : req->states()) {
    const auto st = from_wire(static_cast<v1::JobState>(s));
    if (!st) {
      return Status(StatusCode::INVALID_ARGUMENT,
                    "ListJobs: unknown job state " + std::to_string(s));
    }
    states.insert(*st);
  }
  return guarded([&] {
    for (const tracker::JobRecord& j : farm_.jobs()) {
      if (!req->owner().empty() && j.owner != req->owner()) continue;
      if (!states.empty() && !states.count(j.state)) continue;
      *resp->add_jobs() = to_wire(j);
    }
    return Status::OK;
  });
}

Status KilnService::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                             grpc::ServerWriter<v1::JobProgress>* writer) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  if (req->job_id() == 0) return missing("WatchJob", "job_id");
  return guarded([&] {
    uint64_t seen = 0;
    while (true) {
      const tracker::JobRecord j = farm_.job(req->job_id());
      if (!writer->Write(progress_of(j))) return Status::CANCELLED;
      if (tracker::is_final(j.state)) return Status::OK;
      uint64_t now = seen;
      while (now == seen) {
        if (ctx->IsCancelled()) return Status::CANCELLED;
        if (farm_.stopping()) return Status(StatusCode::UNAVAILABLE, "kilnd is stopping");
        now = farm_.wait_job(req->job_id(), seen, std::chrono::milliseconds(500));
      }
      seen = now;
    }
  });
}

Status KilnService::CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                              v1::Job* resp) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  if (req->job_id() == 0) return missing("CancelJob", "job_id");
  return guarded([&] {
    *resp = to_wire(farm_.cancel(req->job_id(), req->reason()));
    return Status::OK;
  });
}

Status KilnService::FetchBundle(grpc::ServerContext* ctx, const v1::FetchBundleRequest* req,
                                grpc::ServerWriter<v1::BundleChunk>* writer) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  if (req->job_id() == 0) return missing("FetchBundle", "job_id");
  return guarded([&] {
    const uint32_t chunk = std::clamp<uint32_t>(
        req->chunk_bytes() ? req->chunk_bytes() : options_.default_chunk_bytes, 4096, 4u << 20);
    return stream_file(farm_.bundle_path(req->job_id()), chunk, writer,
                       "job " + std::to_string(req->job_id()) + " is done but its bundle");
  });
}

Status KilnService::ListDevices(grpc::ServerContext* ctx, const v1::ListDevicesRequest* req,
                                v1::ListDevicesResponse* resp) {
  KILN_CHECK_TOKEN(ctx, options_.token);
  return guarded([&] {
    for (v1::DeviceInfo& d : farm_.devices(req->key())) *resp->add_devices() = std::move(d);
    return Status::OK;
  });
}

// --- JobDriver ----------------------------------------------------------------------------

Status JobDriverService::GetDriverJob(grpc::ServerContext* ctx, const v1::DriverJobRequest* req,
                                      v1::DriverJob* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    *resp = farm_.driver_job_spec(req->auth());
    return Status::OK;
  });
}

Status JobDriverService::FetchModel(grpc::ServerContext* ctx, const v1::DriverJobRequest* req,
                                    grpc::ServerWriter<v1::BundleChunk>* writer) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    return stream_file(farm_.driver_model_path(req->auth()), 1u << 20, writer,
                       "job " + std::to_string(req->auth().job_id()) + "'s model");
  });
}

Status JobDriverService::ReportDriverProgress(grpc::ServerContext* ctx,
                                              const v1::DriverProgress* req,
                                              v1::DriverProgressResponse*) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    farm_.driver_progress(*req);
    return Status::OK;
  });
}

Status JobDriverService::GetTaskRecords(grpc::ServerContext* ctx, const v1::TaskRecordsRequest* req,
                                        v1::TaskRecords* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    *resp = farm_.driver_records(*req);
    return Status::OK;
  });
}

Status JobDriverService::AppendRecords(grpc::ServerContext* ctx,
                                       const v1::AppendRecordsRequest* req,
                                       v1::AppendRecordsResponse* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    for (uint64_t seq : farm_.driver_append(*req)) resp->add_seqs(seq);
    return Status::OK;
  });
}

Status JobDriverService::MeasureBatch(grpc::ServerContext* ctx, const v1::MeasureBatchRequest* req,
                                      v1::MeasureBatchResponse* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    for (const records::MeasureRecord& r :
         farm_.measure_batch(*req, [ctx] { return ctx->IsCancelled(); })) {
      *resp->add_records() = to_wire(r);
    }
    return Status::OK;
  });
}

Status JobDriverService::UploadBundle(grpc::ServerContext* ctx,
                                      grpc::ServerReader<v1::BundleUpload>* reader,
                                      v1::UploadBundleResponse* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    resp->set_bytes(farm_.store_bundle([&](v1::BundleUpload& c) { return reader->Read(&c); }));
    return Status::OK;
  });
}

Status JobDriverService::GetTargetHistory(grpc::ServerContext* ctx, const v1::DriverJobRequest* req,
                                          grpc::ServerWriter<v1::TaskHistory>* writer) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    farm_.driver_history(req->auth(), [&](const v1::TaskHistory& h) { writer->Write(h); });
    return Status::OK;
  });
}

Status JobDriverService::GetShelf(grpc::ServerContext* ctx, const v1::ShelfRequest* req,
                                  v1::ShelfEntry* resp) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    *resp = farm_.driver_shelf(*req);
    return Status::OK;
  });
}

Status JobDriverService::PutShelf(grpc::ServerContext* ctx, const v1::PutShelfRequest* req,
                                  v1::PutShelfResponse*) {
  KILN_CHECK_TOKEN(ctx, token_);
  return guarded([&] {
    farm_.driver_put_shelf(*req);
    return Status::OK;
  });
}

}  // namespace kiln::server
