// The Farm's jobs as the public API sees them: submission (the model checked by a kiln-tuner
// --check process), state, cancellation, watching, and the bundle of a done job.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/fnv1a.h"
#include "compiler/target/target.h"
#include "rpc/model_upload.h"
#include "server/farm_internal.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using tracker::JobId;
using tracker::JobRecord;
using tracker::JobState;

// SubmitModelRequest.input_shapes' limits: more than any model has, few enough that a request
// cannot make kilnd or the --check child's command line large.
constexpr size_t kMaxInputShapes = 256;
constexpr size_t kMaxInputShapeDims = 64;
constexpr size_t kMaxInputNameBytes = 1024;
constexpr size_t kMaxModelNameBytes = 1024;
constexpr int64_t kMaxInputDimSize = int64_t{1} << 31;
constexpr int kMaxTimeLimitS = 30 * 24 * 3600;  // a job's time limit: 30 days

/// A number as a message shows it: "90", "0.5", "nan", "-inf", "1e+09".
std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

/// Refuses (kInvalidArgument, naming the field and its value) how much a submission asks to
/// measure when it makes no sense or is past the farm's limits.
void check_amounts(const Submission& s, const FarmOptions& options) {
  if (!(std::isfinite(s.time_limit_s) && s.time_limit_s >= 0)) {
    throw invalid_argument("SubmitModel: time_limit_s is " + number_text(s.time_limit_s) +
                           "; it must be a finite number of seconds (0: no time limit)");
  }
  if (s.time_limit_s > kMaxTimeLimitS) {
    throw invalid_argument("SubmitModel: time_limit_s " + number_text(s.time_limit_s) +
                           " is over the limit of " + std::to_string(kMaxTimeLimitS) +
                           " seconds (30 days)");
  }
  const bool scheduled = s.budget > 0 || s.time_limit_s > 0;
  if (s.trials == 0 && !scheduled) {
    throw invalid_argument(
        "SubmitModel: trials is missing: give trials (per task), or a budget "
        "or time_limit_s for the whole model");
  }
  if (s.trials > options.max_trials) {
    throw invalid_argument("SubmitModel: trials " + std::to_string(s.trials) +
                           " is over this farm's limit of " + std::to_string(options.max_trials) +
                           " per task");
  }
  if (s.budget > options.max_budget) {
    throw invalid_argument("SubmitModel: budget " + std::to_string(s.budget) +
                           " is over this farm's limit of " + std::to_string(options.max_budget) +
                           " measurements per job");
  }
  if (s.early_stop && !scheduled) {
    throw invalid_argument("SubmitModel: early_stop " + std::to_string(*s.early_stop) +
                           " needs a budget or a time_limit_s (without them each task is tuned "
                           "to its trials, with no early stopping)");
  }
  if (s.early_stop && *s.early_stop > options.max_trials) {
    throw invalid_argument("SubmitModel: early_stop " + std::to_string(*s.early_stop) +
                           " is over this farm's limit of " + std::to_string(options.max_trials) +
                           " trials per task (0: never stop a task early)");
  }
}

/// "0x" and 16 hex digits.
std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::string Farm::model_path(JobId id) const {
  return (fs::path(options_.state_dir) / "models" / (std::to_string(id) + ".onnx")).string();
}

std::string Farm::bundle_path(JobId id) const {
  const JobRecord j = job(id);
  if (j.state != JobState::kDone) {
    throw FarmError(FarmError::Code::kFailedPrecondition,
                    "job " + std::to_string(id) + " is " + tracker::job_state_name(j.state) +
                        ": its bundle exists once it is done");
  }
  return (fs::path(options_.state_dir) / "bundles" / (std::to_string(id) + ".kiln")).string();
}

uint64_t Farm::receive_model(const std::string& path, uint64_t announced,
                             const std::function<bool(v1::ModelUpload&)>& read) {
  std::ofstream out(path, std::ios::binary);
  KILN_SYSTEM_CHECK(out.good()) << "kilnd: cannot write the uploaded model to '" << path << "'";
  uint64_t size = 0, hash = kFnv1a64Basis;
  v1::ModelUpload m;
  while (true) {
    if (!read(m)) {
      throw invalid_argument("SubmitModel: the upload ended after " + std::to_string(size) +
                             " bytes of the model, without its checksum (the client cancelled "
                             "or the connection dropped)");
    }
    switch (m.part_case()) {
      case v1::ModelUpload::kChunk: {
        const std::string& chunk = m.chunk();
        if (chunk.size() > rpc::kMaxModelChunkBytes) {
          throw invalid_argument("SubmitModel: a chunk of " + std::to_string(chunk.size()) +
                                 " bytes, over the limit of " +
                                 std::to_string(rpc::kMaxModelChunkBytes) + " per message");
        }
        size += chunk.size();
        if (size > options_.max_model_bytes) {
          throw FarmError(FarmError::Code::kResourceExhausted,
                          "SubmitModel: the model is over this farm's limit of " +
                              std::to_string(options_.max_model_bytes) + " bytes (" +
                              std::to_string(size) + " bytes arrived)");
        }
        if (announced != 0 && size > announced) {
          throw invalid_argument("SubmitModel: more of the model arrived (" + std::to_string(size) +
                                 " bytes) than its model_size of " + std::to_string(announced) +
                                 " bytes");
        }
        hash = fnv1a64(chunk.data(), chunk.size(), hash);
        out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        KILN_SYSTEM_CHECK(out.good())
            << "kilnd: writing the uploaded model to '" << path << "' failed (is the disk full?)";
        break;
      }
      case v1::ModelUpload::kChecksum: {
        if (size == 0) throw invalid_argument("SubmitModel: the model is empty");
        if (announced != 0 && size != announced) {
          throw invalid_argument("SubmitModel: the model ended after " + std::to_string(size) +
                                 " bytes, short of its model_size of " + std::to_string(announced) +
                                 " bytes");
        }
        if (m.checksum() != hash) {
          throw invalid_argument("SubmitModel: checksum mismatch: the client sent " +
                                 hex64(m.checksum()) + ", the " + std::to_string(size) +
                                 " bytes received hash to " + hex64(hash) + " (FNV-1a)");
        }
        out.close();
        KILN_SYSTEM_CHECK(!out.fail())
            << "kilnd: cannot write the uploaded model to '" << path << "'";
        return size;
      }
      case v1::ModelUpload::kJob:
        throw invalid_argument("SubmitModel: a second job after " + std::to_string(size) +
                               " bytes of the model (the job is the stream's first message only)");
      case v1::ModelUpload::PART_NOT_SET:
        throw invalid_argument(
            "SubmitModel: a message with no part (job, chunk or checksum) after " +
            std::to_string(size) + " bytes of the model");
    }
  }
}

JobId Farm::submit(const Submission& s, const std::function<bool(v1::ModelUpload&)>& read) {
  if (s.model_size > options_.max_model_bytes) {
    throw FarmError(FarmError::Code::kResourceExhausted,
                    "SubmitModel: the model is " + std::to_string(s.model_size) +
                        " bytes (its model_size), over this farm's limit of " +
                        std::to_string(options_.max_model_bytes) + " bytes");
  }
  if (s.target.empty()) throw invalid_argument("SubmitModel: the target is empty");
  if (s.device_key.empty()) throw invalid_argument("SubmitModel: the device key is empty");
  // The name goes into messages and onto kiln-tuner's command line.
  if (s.name.size() > kMaxModelNameBytes || s.name.find('\0') != std::string::npos) {
    throw invalid_argument("SubmitModel: name is not a model's name (" +
                           std::to_string(s.name.size()) + " bytes, at most " +
                           std::to_string(kMaxModelNameBytes) + ", no NUL)");
  }
  check_amounts(s, options_);
  std::map<std::string, std::vector<int64_t>> input_shapes;
  if (s.input_shapes.size() > kMaxInputShapes) {
    throw invalid_argument("SubmitModel: input_shapes has " +
                           std::to_string(s.input_shapes.size()) + " entries, over the limit of " +
                           std::to_string(kMaxInputShapes));
  }
  for (size_t i = 0; i < s.input_shapes.size(); ++i) {
    const auto& [name, dims] = s.input_shapes[i];
    const std::string field = "SubmitModel: input_shapes[" + std::to_string(i) + "]";
    if (name.empty()) throw invalid_argument(field + ".name is empty");
    if (name.size() > kMaxInputNameBytes || name.find('\0') != std::string::npos) {
      throw invalid_argument(field + ".name is not an input's name (" +
                             std::to_string(name.size()) + " bytes, at most " +
                             std::to_string(kMaxInputNameBytes) + ", no NUL)");
    }
    const std::string named = field + " ('" + name + "')";
    if (dims.size() > kMaxInputShapeDims) {
      throw invalid_argument(named + ".dims has " + std::to_string(dims.size()) +
                             " dimensions, over the limit of " +
                             std::to_string(kMaxInputShapeDims));
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] <= 0 || dims[d] > kMaxInputDimSize) {
        throw invalid_argument(named + ".dims[" + std::to_string(d) + "] is " +
                               std::to_string(dims[d]) + "; a size is from 1 to " +
                               std::to_string(kMaxInputDimSize));
      }
    }
    if (!input_shapes.emplace(name, dims).second) {
      throw invalid_argument(named + ": input '" + name + "' is given twice in input_shapes");
    }
  }
  target::Target parsed;
  try {
    parsed = target::Target::parse(s.target);
  } catch (const std::exception& e) {
    throw invalid_argument("SubmitModel: unknown target '" + s.target + "': " + e.what());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tracker_.devices().counts().count(s.device_key)) {
      std::string known;
      for (const auto& [key, n] : tracker_.devices().counts())
        known += (known.empty() ? "" : ", ") + key;
      throw FarmError(FarmError::Code::kNotFound,
                      "SubmitModel: no device of key '" + s.device_key + "' is registered (" +
                          (known.empty() ? std::string("none is") : "known keys: " + known) + ")");
    }
  }
  // The model arrives into a temporary file (never into memory), removed unless it becomes the
  // job's. It must import: a bad file is the submitter's error, not a failed job later. It is
  // read by a kiln-tuner --check process, never here.
  const std::string tmp = (fs::path(options_.state_dir) / "models" /
                           (std::string(kUploadPrefix) + random_hex() + ".onnx"))
                              .string();
  struct RemoveTmp {
    const std::string& path;
    ~RemoveTmp() {
      std::error_code ec;
      fs::remove(path, ec);
    }
  } remove_tmp{tmp};
  receive_model(tmp, s.model_size, read);
  if (const std::string why = check_model(tmp, s.name, input_shapes); !why.empty())
    throw invalid_argument("SubmitModel: the model does not import: " + why);
  JobRecord j;
  j.owner = s.owner;
  j.model_name = s.name;
  j.target = s.target;
  j.device_key = s.device_key;
  j.trials = s.trials;
  j.budget = s.budget;
  j.time_limit_s = s.time_limit_s;
  j.early_stop = s.early_stop;
  j.priority = s.priority;
  j.input_shapes = std::move(input_shapes);
  const JobId id = store_.create(j);
  fs::rename(tmp, model_path(id));
  std::lock_guard<std::mutex> lock(mu_);
  job_versions_[id] = 1;
  // start() may have found the new job in the store already.
  if (std::find(runnable_.begin(), runnable_.end(), id) == runnable_.end()) runnable_.push_back(id);
  add_event_locked("job_state", "job " + std::to_string(id) + " (" + s.name + ") submitted by " +
                                    (s.owner.empty() ? "anonymous" : s.owner));
  jobs_cv_.notify_all();
  refresh_gauges_locked();
  return id;
}

JobRecord Farm::job(JobId id) const {
  std::optional<JobRecord> j = store_.get(id);
  if (!j) throw FarmError(FarmError::Code::kNotFound, "no job " + std::to_string(id));
  return *j;
}

std::vector<JobRecord> Farm::jobs() const { return store_.list(); }

JobRecord Farm::cancel(JobId id, const std::string& reason) {
  const JobRecord j = job(id);
  if (tracker::is_final(j.state)) {
    throw FarmError(
        FarmError::Code::kFailedPrecondition,
        "job " + std::to_string(id) + " is already " + tracker::job_state_name(j.state));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const JobRecord now = store_.transition(id, JobState::kCancelled,
                                          reason.empty() ? "cancelled by its owner" : reason);
  cancelled_.insert(id);
  tracker_.queue().cancel_job(id);
  builds_.cancel_job(id);
  for (auto& [bid, ref] : build_slots_)
    if (ref.batch->job == id) ref.batch->cv.notify_all();
  for (auto& [rid, ref] : measure_slots_)
    if (ref.batch->job == id) ref.batch->cv.notify_all();
  add_event_locked("job_state", "job " + std::to_string(id) + " cancelled");
  bump_job_locked(id);
  refresh_gauges_locked();
  return now;
}

uint64_t Farm::wait_job(JobId id, uint64_t seen, tracker::Duration wait) {
  job(id);  // kNotFound for an unknown job
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (!stopping_ && job_versions_[id] == seen) {
    if (jobs_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  return job_versions_[id];
}

void Farm::bump_job_locked(JobId id) {
  ++job_versions_[id];
  jobs_cv_.notify_all();
}

JobRecord Farm::update_job(JobId id, const std::function<void(JobRecord&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord j = store_.update_progress(id, change);
  bump_job_locked(id);
  return j;
}

JobRecord Farm::transition_job(JobId id, JobState to, const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  JobRecord j = store_.transition(id, to, error);
  add_event_locked("job_state", "job " + std::to_string(id) + " " + tracker::job_state_name(to) +
                                    (error.empty() ? "" : ": " + error));
  bump_job_locked(id);
  refresh_gauges_locked();
  return j;
}

bool Farm::job_stopped_locked(JobId id) const { return stopping_ || cancelled_.count(id) > 0; }

std::string Farm::driver_log_path(JobId id) const {
  return (fs::path(options_.state_dir) / "drivers" / (std::to_string(id) + ".log")).string();
}

}  // namespace kiln::server
