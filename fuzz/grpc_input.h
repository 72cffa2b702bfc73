// The input of the grpc fuzz target (grpc_fuzz.cc), which its seeds (grpc_seeds.cc) are written
// in: <method> <flags> <the method's request message>, a client stream's messages each framed as
// <u16 length, little-endian> <message>; and what of the target's farm the seeds name (its target,
// device key and tasks; jobs 1 running, 2 done, 3 cancelled).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/fnv1a.h"
#include "deploy/runtime/bundle.h"
#include "fuzz/fuzz_check.h"
#include "proto/kiln/v1/driver.pb.h"

namespace kiln::fuzz_grpc {

namespace fs = std::filesystem;

inline constexpr const char* kTarget = "llvm";
inline constexpr const char* kDeviceKey = "cpu";
inline constexpr const char* kMeasureKey = "fuzz-measure";  // the measuring device's
inline const std::vector<std::string> kTasks = {"dense:1x10:0123456789abcdef",
                                                "conv2d_nchw:1x8x8x8:fedcba9876543210"};

enum Flag : uint8_t {
  kRealAuth = 1,
  kDoneDriver = 2,
  kResetTasks = 4,
  kFixtureDevice = 8,
  kInFlight = 16
};

enum Method : uint8_t {
  kRegisterDevice,
  kHeartbeat,
  kGetWork,
  kReportResult,
  kGetBuildWork,
  kReportArtifact,
  kSubmitModel,
  kGetJob,
  kListJobs,
  kWatchJob,
  kCancelJob,
  kFetchBundle,
  kListDevices,
  kGetDriverJob,
  kReportDriverProgress,
  kGetTaskRecords,
  kAppendRecords,
  kMeasureBatch,
  kUploadBundle,
  kFetchModel,
  kGetTargetHistory,
  kGetShelf,
  kPutShelf,
  kNumMethods
};

inline void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
  KILN_FUZZ_CHECK(out.good());
}

/// A bundle the farm accepts (read_bundle checks its sections and checksum, not its graph).
inline std::string valid_bundle(const std::string& library) {
  runtime::Bundle b;
  b.graph_json = R"({"format": "kiln.graph", "version": 1})";
  b.library = library;
  return runtime::serialize_bundle(b);
}

/// The bundle in the chunks a driver sends (each with `auth`), the last with the checksum.
inline std::vector<v1::BundleUpload> bundle_chunks(const std::string& bundle,
                                                   const v1::DriverAuth& auth, size_t chunk_bytes) {
  std::vector<v1::BundleUpload> chunks;
  size_t offset = 0;
  do {
    v1::BundleUpload c;
    *c.mutable_auth() = auth;
    const size_t n = std::min(chunk_bytes, bundle.size() - offset);
    c.set_data(bundle.substr(offset, n));
    offset += n;
    if (offset == bundle.size()) {
      c.set_last(true);
      c.set_checksum(fnv1a64(bundle.data(), bundle.size()));
    }
    chunks.push_back(std::move(c));
  } while (offset < bundle.size());
  return chunks;
}

/// Writes fuzz/corpus/grpc's seeds into `folder` (grpc_seeds.cc).
void write_grpc_seeds(const fs::path& folder);

}  // namespace kiln::fuzz_grpc
