// A job driver's calls to kilnd (the JobDriver service, proto/kiln/v1/driver.proto), each with
// the farm's token and the driver's credentials. What kilnd answers is mapped to what the driver
// does next: a cancelled job or a stopping kilnd -> Stopped (exit quietly); kilnd refusing the
// job's work for the user's sake (no device took a request in time) -> kiln::Error; anything
// else -> kiln::SystemError. Short calls are retried a few times while kilnd is unreachable;
// MeasureBatch never is (kilnd withdraws a batch whose caller went away).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/kiln/v1/driver.grpc.pb.h"
#include "records/record.h"
#include "records/record_store.h"

namespace kiln::tuner {

/// The job was cancelled, kilnd is stopping, or this driver was replaced: nothing more to do.
struct Stopped {
  std::string why;
};

class FarmClient {
 public:
  FarmClient(const std::string& server, const std::string& tls_ca, std::string token, uint64_t job,
             std::string secret);
  ~FarmClient();

  uint64_t job_id() const { return auth_.job_id(); }
  v1::DriverJob job();
  /// The job's ONNX model (FetchModel's chunks, checked for gaps, size and checksum).
  std::string model();
  /// Sends `progress` (its auth is filled in).
  void progress(v1::DriverProgress progress);
  v1::TaskRecords records(const std::string& task_key, bool best_only);
  std::vector<uint64_t> append(const std::vector<records::MeasureRecord>& records);
  std::vector<records::MeasureRecord> measure(v1::MeasureBatchRequest request);
  void upload(const std::string& bundle);
  /// Every record of the job's target whose task's source kilnd knows, by task (GetTargetHistory;
  /// runs of one task joined).
  std::vector<records::TaskHistory> history();
  /// A shelf entry (empty name: only the target's record count).
  v1::ShelfEntry shelf(const std::string& name);
  void put_shelf(const std::string& name, const std::string& data);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  v1::DriverAuth auth_;
};

}  // namespace kiln::tuner
