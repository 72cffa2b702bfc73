// JobStore: jobs as JSON values in RocksDB (keys in job_store.h).
#include "tracker/job_store.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <filesystem>
#include <mutex>

#include "base/error.h"
#include "base/json.h"

namespace kiln::tracker {

using kiln::Json;

namespace {

constexpr const char* kStateNames[] = {"queued", "running", "done", "failed", "cancelled"};
constexpr const char* kNextIdKey = "n";
constexpr const char* kVersionKey = "v";
constexpr const char* kVersion = "1";

std::string be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

uint64_t from_be64(const std::string& s) {
  uint64_t v = 0;
  for (char c : s) v = (v << 8) | static_cast<unsigned char>(c);
  return v;
}

std::string job_key(JobId id) { return "j" + be64(id); }

Json to_json(const JobRecord& j) {
  Json::Object o;
  o["id"] = static_cast<int64_t>(j.id);
  o["owner"] = j.owner;
  o["model_name"] = j.model_name;
  o["target"] = j.target;
  o["device_key"] = j.device_key;
  o["trials"] = static_cast<int64_t>(j.trials);
  if (j.budget > 0) o["budget"] = static_cast<int64_t>(j.budget);
  if (j.time_limit_s > 0) o["time_limit_s"] = j.time_limit_s;
  if (j.early_stop) o["early_stop"] = static_cast<int64_t>(*j.early_stop);
  o["priority"] = static_cast<int64_t>(j.priority);
  if (!j.input_shapes.empty()) {
    Json::Object shapes;
    for (const auto& [name, dims] : j.input_shapes) {
      Json::Array a;
      for (int64_t d : dims) a.emplace_back(d);
      shapes[name] = Json(std::move(a));
    }
    o["input_shapes"] = Json(std::move(shapes));
  }
  o["state"] = job_state_name(j.state);
  o["tasks_total"] = static_cast<int64_t>(j.tasks_total);
  Json::Array keys;
  for (const std::string& k : j.task_keys) keys.emplace_back(k);
  o["task_keys"] = Json(std::move(keys));
  Json::Array done;
  for (uint32_t t : j.done_tasks) done.emplace_back(static_cast<int64_t>(t));
  o["done_tasks"] = Json(std::move(done));
  if (j.tuning_task) o["tuning_task"] = static_cast<int64_t>(*j.tuning_task);
  o["trials_done"] = static_cast<int64_t>(j.trials_done);
  o["trials_failed"] = static_cast<int64_t>(j.trials_failed);
  o["best_latency_s"] = j.best_latency_s;
  o["error"] = j.error;
  o["phase"] = j.phase;
  o["driver_failures"] = static_cast<int64_t>(j.driver_failures);
  o["driver_failure"] = j.driver_failure;
  o["created_ms"] = j.created_ms;
  o["started_ms"] = j.started_ms;
  o["finished_ms"] = j.finished_ms;
  o["updated_ms"] = j.updated_ms;
  return Json(std::move(o));
}

JobRecord from_json(const Json& j, const std::string& origin) {
  auto i64 = [&](const char* k) { return j.at(k, origin).as_int(origin + ": " + k); };
  auto str = [&](const char* k) { return j.at(k, origin).as_string(origin + ": " + k); };
  JobRecord r;
  r.id = static_cast<JobId>(i64("id"));
  r.owner = str("owner");
  r.model_name = str("model_name");
  r.target = str("target");
  r.device_key = str("device_key");
  r.trials = static_cast<uint32_t>(i64("trials"));
  // Absent in jobs without them (and in those stored before they existed).
  if (j.has("budget")) r.budget = static_cast<uint32_t>(i64("budget"));
  if (j.has("time_limit_s"))
    r.time_limit_s = j.at("time_limit_s", origin).as_double(origin + ": time_limit_s");
  if (j.has("early_stop")) r.early_stop = static_cast<uint32_t>(i64("early_stop"));
  r.priority = static_cast<int32_t>(i64("priority"));
  if (j.has("input_shapes")) {  // absent in jobs without (or stored before) input shapes
    const std::string what = origin + ": input_shapes";
    for (const auto& [name, dims] : j.at("input_shapes", origin).as_object(what)) {
      std::vector<int64_t>& shape = r.input_shapes[name];
      for (const Json& d : dims.as_array(what + "." + name))
        shape.push_back(d.as_int(what + "." + name));
    }
  }
  r.state = job_state_from_name(str("state"));
  r.tasks_total = static_cast<uint32_t>(i64("tasks_total"));
  if (j.has("task_keys")) {  // absent in jobs stored before it existed
    for (const Json& k : j.at("task_keys", origin).as_array(origin + ": task_keys"))
      r.task_keys.push_back(k.as_string(origin + ": task_keys[]"));
  }
  if (j.has("done_tasks")) {
    for (const Json& t : j.at("done_tasks", origin).as_array(origin + ": done_tasks"))
      r.done_tasks.push_back(static_cast<uint32_t>(t.as_int(origin + ": done_tasks[]")));
  } else {  // stored before it existed, as a count: the fixed split ends tasks in order
    const auto n = static_cast<uint32_t>(i64("tasks_done"));
    for (uint32_t t = 0; t < n; ++t) r.done_tasks.push_back(t);
  }
  if (j.has("tuning_task")) r.tuning_task = static_cast<uint32_t>(i64("tuning_task"));
  r.trials_done = static_cast<uint64_t>(i64("trials_done"));
  r.trials_failed = static_cast<uint64_t>(i64("trials_failed"));
  r.best_latency_s = j.at("best_latency_s", origin).as_double(origin + ": best_latency_s");
  r.error = str("error");
  // Absent in jobs stored before job drivers existed.
  if (j.has("phase")) r.phase = str("phase");
  if (j.has("driver_failures")) r.driver_failures = static_cast<uint32_t>(i64("driver_failures"));
  if (j.has("driver_failure")) r.driver_failure = str("driver_failure");
  r.created_ms = i64("created_ms");
  r.started_ms = i64("started_ms");
  r.finished_ms = i64("finished_ms");
  r.updated_ms = i64("updated_ms");
  return r;
}

}  // namespace

const char* job_state_name(JobState s) {
  int i = static_cast<int>(s);
  KILN_ICHECK(i >= 0 && i < 5) << "bad JobState " << i;
  return kStateNames[i];
}

JobState job_state_from_name(const std::string& name) {
  for (int i = 0; i < 5; ++i) {
    if (name == kStateNames[i]) return static_cast<JobState>(i);
  }
  KILN_USER_ERROR() << "unknown job state '" << name
                    << "'; the states are queued, running, done, failed, cancelled";
}

bool is_final(JobState s) {
  return s == JobState::kDone || s == JobState::kFailed || s == JobState::kCancelled;
}

bool is_legal_transition(JobState from, JobState to) {
  switch (from) {
    case JobState::kQueued:
      return to == JobState::kRunning || to == JobState::kFailed || to == JobState::kCancelled;
    case JobState::kRunning:
      return to == JobState::kDone || to == JobState::kFailed || to == JobState::kCancelled;
    default:
      return false;
  }
}

struct JobStore::Impl {
  std::string dir;
  std::unique_ptr<rocksdb::DB> db;
  std::function<int64_t()> now_ms;
  mutable std::mutex mu;
  JobId next_id = 1;

  [[noreturn]] void fail(const std::string& what, const rocksdb::Status& s) const {
    KILN_SYSTEM_ERROR() << "job store '" << dir << "': cannot " << what << ": " << s.ToString();
  }

  std::optional<JobRecord> read(JobId id) const {
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), job_key(id), &value);
    if (s.IsNotFound()) return std::nullopt;
    if (!s.ok()) fail("read job " + std::to_string(id), s);
    return from_json(Json::parse(value, "job store '" + dir + "'"),
                     "job store '" + dir + "', job " + std::to_string(id));
  }

  JobRecord must_read(JobId id) const {
    auto j = read(id);
    KILN_USER_CHECK(j.has_value()) << "job " << id << ": no such job in '" << dir << "'";
    return *j;
  }

  void write(const JobRecord& j, bool bump_next_id) {
    rocksdb::WriteBatch batch;
    batch.Put(job_key(j.id), to_json(j).dump());
    if (bump_next_id) batch.Put(kNextIdKey, be64(next_id));
    rocksdb::WriteOptions wo;
    wo.sync = true;
    rocksdb::Status s = db->Write(wo, &batch);
    if (!s.ok()) fail("write job " + std::to_string(j.id), s);
  }

  std::vector<JobRecord> scan(bool unfinished_only) const {
    std::vector<JobRecord> out;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek("j"); it->Valid() && it->key().starts_with("j"); it->Next()) {
      JobRecord j = from_json(Json::parse(it->value().ToString(), "job store '" + dir + "'"),
                              "job store '" + dir + "'");
      if (!unfinished_only || !is_final(j.state)) out.push_back(std::move(j));
    }
    if (!it->status().ok()) fail("list jobs", it->status());
    return out;
  }
};

JobStore JobStore::open(const std::string& dir, std::function<int64_t()> now_ms) {
  namespace fs = std::filesystem;
  KILN_USER_CHECK(!dir.empty()) << "job store: the folder name is empty";
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    KILN_USER_ERROR() << "job store '" << dir << "': exists and is not a folder";
  }
  fs::create_directories(dir, ec);
  if (ec)
    KILN_USER_ERROR() << "job store '" << dir << "': cannot create the folder: " << ec.message();

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->now_ms = now_ms ? std::move(now_ms) : [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  rocksdb::Options options;
  options.create_if_missing = true;
  options.keep_log_file_num = 4;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) {
    std::string msg = s.ToString();
    if (msg.find("lock") != std::string::npos || msg.find("LOCK") != std::string::npos) {
      KILN_USER_ERROR() << "job store '" << dir
                        << "': in use by another process or another JobStore of this process "
                           "(its LOCK is held): "
                        << msg;
    }
    KILN_USER_ERROR() << "job store '" << dir << "': cannot open: " << msg;
  }
  impl->db.reset(db);

  std::string value;
  s = impl->db->Get(rocksdb::ReadOptions(), kVersionKey, &value);
  if (s.ok()) {
    KILN_USER_CHECK(value == kVersion) << "job store '" << dir << "': format version " << value
                                       << ", this Kiln reads version " << kVersion;
  } else if (s.IsNotFound()) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    s = impl->db->Put(wo, kVersionKey, kVersion);
    if (!s.ok()) impl->fail("write the version", s);
  } else {
    impl->fail("read the version", s);
  }
  s = impl->db->Get(rocksdb::ReadOptions(), kNextIdKey, &value);
  if (s.ok()) {
    impl->next_id = from_be64(value);
  } else if (!s.IsNotFound()) {
    impl->fail("read the next job id", s);
  }
  return JobStore(std::move(impl));
}

JobStore::JobStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JobStore::JobStore(JobStore&&) noexcept = default;
JobStore& JobStore::operator=(JobStore&&) noexcept = default;
JobStore::~JobStore() = default;

JobId JobStore::create(JobRecord job) {
  KILN_USER_CHECK(!job.target.empty()) << "new job '" << job.model_name << "': the target is empty";
  KILN_USER_CHECK(!job.device_key.empty())
      << "new job '" << job.model_name << "': the device key is empty";
  KILN_USER_CHECK(job.trials > 0 || job.scheduled())
      << "new job '" << job.model_name << "': it needs trials (per task), a budget or a time limit";
  std::lock_guard lock(impl_->mu);
  int64_t now = impl_->now_ms();
  job.id = impl_->next_id++;
  job.state = JobState::kQueued;
  if (job.created_ms == 0) job.created_ms = now;
  job.started_ms = job.finished_ms = 0;
  job.updated_ms = now;
  impl_->write(job, /*bump_next_id=*/true);
  return job.id;
}

std::optional<JobRecord> JobStore::get(JobId id) const {
  std::lock_guard lock(impl_->mu);
  return impl_->read(id);
}

JobRecord JobStore::transition(JobId id, JobState to, const std::string& error) {
  std::lock_guard lock(impl_->mu);
  JobRecord j = impl_->must_read(id);
  KILN_USER_CHECK(is_legal_transition(j.state, to))
      << "job " << id << " ('" << j.model_name << "'): cannot go from " << job_state_name(j.state)
      << " to " << job_state_name(to) << (is_final(j.state) ? " (it has finished)" : "");
  int64_t now = impl_->now_ms();
  j.state = to;
  if (to == JobState::kRunning) j.started_ms = now;
  if (is_final(to)) j.finished_ms = now;
  if (!error.empty()) j.error = error;
  j.updated_ms = now;
  impl_->write(j, false);
  return j;
}

JobRecord JobStore::update_progress(JobId id, const std::function<void(JobRecord&)>& change) {
  std::lock_guard lock(impl_->mu);
  JobRecord j = impl_->must_read(id);
  JobRecord changed = j;
  change(changed);
  KILN_ICHECK(changed.id == j.id && changed.state == j.state &&
              changed.created_ms == j.created_ms && changed.started_ms == j.started_ms &&
              changed.finished_ms == j.finished_ms)
      << "update_progress of job " << id << " changed its id, state or timestamps";
  changed.updated_ms = impl_->now_ms();
  impl_->write(changed, false);
  return changed;
}

std::vector<JobRecord> JobStore::list() const {
  std::lock_guard lock(impl_->mu);
  return impl_->scan(false);
}

std::vector<JobRecord> JobStore::unfinished() const {
  std::lock_guard lock(impl_->mu);
  return impl_->scan(true);
}

const std::string& JobStore::dir() const { return impl_->dir; }

}  // namespace kiln::tracker
