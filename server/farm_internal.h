// What the Farm's files (farm.cc, device_dispatch.cc, build_dispatch.cc, jobs.cc,
// measure_batch.cc, job_drivers.cc) share and nothing else sees: a batch in flight and small
// helpers.
#pragma once

#include <condition_variable>
#include <optional>
#include <string>
#include <vector>

#include "proto/kiln/v1/common.pb.h"
#include "records/record.h"
#include "server/farm.h"
#include "tracker/measure_queue.h"

namespace kiln::server {

/// One batch of configs of one job, as it moves from builds to measurements.
struct Farm::Batch {
  struct Slot {
    std::optional<v1::Artifact> artifact;          ///< set when its build finished
    std::optional<records::MeasureRecord> record;  ///< set when measured (appended)
    std::optional<tracker::GiveUp> given_up;       ///< set when the queue gave it up
    std::string failure;                           ///< set when its record could not be kept
  };
  tracker::JobId job = 0;
  v1::TaskRef task;  ///< what each build builds (template, workload, target)
  std::vector<Slot> slots;
  std::condition_variable cv;
};

inline FarmError invalid_argument(const std::string& m) {
  return FarmError(FarmError::Code::kInvalidArgument, m);
}

/// A random hex string (instance ids, driver secrets, upload names).
std::string random_hex();

/// How the temporary files of models being uploaded are named in <state_dir>/models (those an
/// earlier kilnd left when it stopped mid-upload are removed when the next one starts).
inline constexpr char kUploadPrefix[] = "upload-";

}  // namespace kiln::server
