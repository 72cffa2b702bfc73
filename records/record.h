// A measurement record: one measured config of one tuning task on one device, as the record log
// keeps it, the tuner learns from it and the farm carries it. Its JSON text (one object, one line)
// is the log's value format and its export format; parsing validates every field (the text may
// come from a file a user hands in, or over the network).
//
//   MeasureRecord r = record_from_string(line, "records.jsonl:12");
//   r.cost();   // the fastest repeat
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error_kind.h"

namespace kiln {
class Json;
}

namespace kiln::records {

/// One measurement of one config of one task on one device.
struct MeasureRecord {
  std::string target;    ///< the target string ("llvm -mcpu=znver4")
  std::string device;    ///< the device's fingerprint (CPU model and cores, driver, ...)
  std::string task_key;  ///< the tuning task (operator and workload)
  uint64_t config_index = 0;
  std::string config;                  ///< Config::str(), for humans
  std::vector<double> costs_s;         ///< seconds per run; empty on error
  ErrorKind error = ErrorKind::kNone;  ///< base/error_kind.h
  std::string error_msg;
  double gflops = 0;         ///< 0 on error
  int64_t timestamp_ms = 0;  ///< milliseconds since the Unix epoch
  uint64_t search_seed = 0;  ///< the random seed of the search that chose it (for replay)
  /// Timed while other processes held the measuring CPU beyond the runner's retry allowance
  /// (kernel_runner.h, "Contention"): the costs may be too high. Written to the JSON only when
  /// true.
  bool contended = false;
  /// Measured by a device that runs under emulation (an AArch64 agent under qemu-user): its
  /// costs are not a board's. Such records live in their own lane of the log (record_log.h,
  /// Lane) and never mix with a real device's. Written to the JSON only when true.
  bool emulated = false;

  /// The record's cost: the fastest repeat of costs_s (other processes only ever add time, so the
  /// minimum is the least disturbed estimate); +infinity when it is empty.
  double cost() const;
  bool operator==(const MeasureRecord&) const = default;
};

/// How a task is rebuilt in any process (autotune::Task::from_workload): its template and its
/// workload's canonical JSON. Records name their task by key only; a log that knows the sources
/// can read the features of every record it holds, whichever model it was measured for.
struct TaskSource {
  std::string template_name;
  std::string workload;
  bool operator==(const TaskSource&) const = default;
};

/// kiln::Error naming `origin` and the field when the task key, template or workload is empty,
/// holds a NUL character or is oversized (key and template 1 KiB, workload 64 KiB).
void check_task_source(const std::string& task_key, const TaskSource& source,
                       const std::string& origin);

/// Which records a query reads: a real device's, or those measured under emulation (record_log.h,
/// "Lanes"; a record pack holds one lane of one target).
enum class Lane { kDevice, kEmulated };

/// The lane a record belongs to.
inline Lane lane_of(const MeasureRecord& r) { return r.emulated ? Lane::kEmulated : Lane::kDevice; }

/// "device" or "emulated".
const char* lane_name(Lane lane);

/// What a record log accepts beyond the JSON's types: kiln::Error naming `origin` and the field
/// when the target or task key is empty or holds a NUL character (or the target a \u0001, the
/// emulated lane's marker), or a cost or gflops is negative or not finite.
void check_record(const MeasureRecord& r, const std::string& origin);

/// The current version of a record's JSON text.
inline constexpr int kRecordVersion = 1;

/// The record as a JSON object (with a "version" field). 64-bit unsigned values that do not fit
/// a signed 64-bit integer are written as decimal strings.
kiln::Json record_to_json(const MeasureRecord& r);
/// The record from a JSON object; kiln::Error naming `origin` and the field when it is malformed.
MeasureRecord record_from_json(const kiln::Json& j, const std::string& origin = "record");
/// One line of JSON text (no newline).
std::string record_to_string(const MeasureRecord& r);
/// Parses one line of JSON text; kiln::Error naming `origin` and the field when it is malformed.
MeasureRecord record_from_string(const std::string& text, const std::string& origin = "record");

}  // namespace kiln::records
