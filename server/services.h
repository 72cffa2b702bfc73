// kilnd's three gRPC services over one Farm: the Tracker service (device agents and compiler
// workers, proto/kiln/v1/tracker.proto), the public KilnService (proto/kiln/v1/service.proto) and
// the JobDriver service (the job drivers kilnd starts, proto/kiln/v1/driver.proto). Each checks
// the farm's token first (rpc::has_token) and turns a FarmError into its status code, a user's
// mistake (kiln::Error) into INVALID_ARGUMENT, an environment failure (kiln::SystemError: a disk
// full, a file that cannot be written) into UNAVAILABLE, and anything else into INTERNAL; none
// holds a lock of its own.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "proto/kiln/v1/driver.grpc.pb.h"
#include "proto/kiln/v1/service.grpc.pb.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "server/farm.h"

namespace kiln::server {

/// The gRPC status for a farm error (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION,
/// RESOURCE_EXHAUSTED, PERMISSION_DENIED, CANCELLED, UNAVAILABLE).
grpc::Status to_status(const FarmError& e);

/// GetWork and ReportResult use gRPC's callback API (a reactor per device stream, fed by the farm,
/// and results answered when their record is on disk: no thread per device or per result); the
/// other methods are synchronous.
class TrackerService final
    : public v1::Tracker::WithCallbackMethod_GetWork<
          v1::Tracker::WithCallbackMethod_ReportResult<v1::Tracker::Service>> {
 public:
  TrackerService(Farm& farm, std::string token) : farm_(farm), token_(std::move(token)) {}

  grpc::Status RegisterDevice(grpc::ServerContext* ctx, const v1::RegisterDeviceRequest* req,
                              v1::RegisterDeviceResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  /// Streams requests to the device until the agent goes away (the device is then dropped and
  /// its work re-queued at once), the device is unknown or dropped (NOT_FOUND: register again) or
  /// kilnd stops (UNAVAILABLE).
  grpc::ServerWriteReactor<v1::MeasureRequest>* GetWork(grpc::CallbackServerContext* ctx,
                                                        const v1::GetWorkRequest* req) override;
  grpc::ServerUnaryReactor* ReportResult(grpc::CallbackServerContext* ctx,
                                         const v1::MeasureResult* req,
                                         v1::ReportResultResponse* resp) override;
  grpc::Status GetBuildWork(grpc::ServerContext* ctx, const v1::GetBuildWorkRequest* req,
                            v1::BuildBatch* resp) override;
  grpc::Status ReportArtifact(grpc::ServerContext* ctx, const v1::ReportArtifactRequest* req,
                              v1::ReportArtifactResponse* resp) override;

 private:
  Farm& farm_;
  std::string token_;
};

struct KilnServiceOptions {
  std::string token;
  /// SubmitModel calls one client address may make per minute (RESOURCE_EXHAUSTED beyond).
  int submits_per_minute = 60;
  uint32_t default_chunk_bytes = 1u << 20;
};

class KilnService final : public v1::KilnService::Service {
 public:
  KilnService(Farm& farm, KilnServiceOptions options) : farm_(farm), options_(std::move(options)) {}

  /// The model's upload stream: submit_model over the call's messages.
  grpc::Status SubmitModel(grpc::ServerContext* ctx, grpc::ServerReader<v1::ModelUpload>* reader,
                           v1::SubmitModelResponse* resp) override;
  /// SubmitModel's body over any source of ModelUpload messages (`read`: false at the stream's
  /// end): the token, the first message (the job: its required fields), the rate limit, then
  /// Farm::submit, which reads the rest. The fuzz target feeds it parsed messages.
  grpc::Status submit_model(grpc::ServerContext* ctx,
                            const std::function<bool(v1::ModelUpload&)>& read,
                            v1::SubmitModelResponse* resp);
  grpc::Status GetJob(grpc::ServerContext* ctx, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobProgress>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status FetchBundle(grpc::ServerContext* ctx, const v1::FetchBundleRequest* req,
                           grpc::ServerWriter<v1::BundleChunk>* writer) override;
  grpc::Status ListDevices(grpc::ServerContext* ctx, const v1::ListDevicesRequest* req,
                           v1::ListDevicesResponse* resp) override;

 private:
  /// False when `peer` (its address without the port) used up its submissions of the minute.
  bool admit_submit(const std::string& peer);

  Farm& farm_;
  KilnServiceOptions options_;
  std::mutex rate_mu_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, int>> submits_;
};

/// The job drivers' calls; each is authorized by its DriverAuth (Farm::driver_job) after the
/// token.
class JobDriverService final : public v1::JobDriver::Service {
 public:
  JobDriverService(Farm& farm, std::string token) : farm_(farm), token_(std::move(token)) {}

  grpc::Status GetDriverJob(grpc::ServerContext* ctx, const v1::DriverJobRequest* req,
                            v1::DriverJob* resp) override;
  grpc::Status FetchModel(grpc::ServerContext* ctx, const v1::DriverJobRequest* req,
                          grpc::ServerWriter<v1::BundleChunk>* writer) override;
  grpc::Status ReportDriverProgress(grpc::ServerContext* ctx, const v1::DriverProgress* req,
                                    v1::DriverProgressResponse* resp) override;
  grpc::Status GetTaskRecords(grpc::ServerContext* ctx, const v1::TaskRecordsRequest* req,
                              v1::TaskRecords* resp) override;
  grpc::Status AppendRecords(grpc::ServerContext* ctx, const v1::AppendRecordsRequest* req,
                             v1::AppendRecordsResponse* resp) override;
  /// Long: answers once the batch is built, measured and recorded. A driver that goes away
  /// meanwhile (the call is cancelled) has its batch's queued work withdrawn.
  grpc::Status MeasureBatch(grpc::ServerContext* ctx, const v1::MeasureBatchRequest* req,
                            v1::MeasureBatchResponse* resp) override;
  grpc::Status UploadBundle(grpc::ServerContext* ctx, grpc::ServerReader<v1::BundleUpload>* reader,
                            v1::UploadBundleResponse* resp) override;
  grpc::Status GetTargetHistory(grpc::ServerContext* ctx, const v1::DriverJobRequest* req,
                                grpc::ServerWriter<v1::TaskHistory>* writer) override;
  grpc::Status GetShelf(grpc::ServerContext* ctx, const v1::ShelfRequest* req,
                        v1::ShelfEntry* resp) override;
  grpc::Status PutShelf(grpc::ServerContext* ctx, const v1::PutShelfRequest* req,
                        v1::PutShelfResponse* resp) override;

 private:
  Farm& farm_;
  std::string token_;
};

}  // namespace kiln::server
