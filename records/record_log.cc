// The record log: the RocksDB keys described in record_log.h, group commit, and export/import.
#include "records/record_log.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "base/json.h"

namespace kiln::records {

using kiln::Json;

namespace {

// ---- keys ----

std::string be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

uint64_t from_be64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

/// The target part of a key: target \0 (device lane) or target \1 'e' \0 (emulated lane).
std::string target_part(const std::string& target, Lane lane) {
  std::string s = target;
  if (lane == Lane::kEmulated) s += "\1e";
  s.push_back('\0');
  return s;
}

/// The target part, then task \0.
std::string task_part(const std::string& target, const std::string& task, Lane lane) {
  std::string s = target_part(target, lane);
  s += task;
  s.push_back('\0');
  return s;
}

std::string record_key(uint64_t seq) { return "r" + be64(seq); }
std::string index_prefix(const std::string& target, const std::string& task, Lane lane) {
  return "i" + task_part(target, task, lane);
}
std::string measured_key(const std::string& target, const std::string& task, uint64_t config,
                         Lane lane) {
  return "m" + task_part(target, task, lane) + be64(config);
}
std::string count_key(const std::string& target, const std::string& task, Lane lane) {
  return "n" + task_part(target, task, lane);
}
std::string best_key(const std::string& target, const std::string& task, Lane lane) {
  return "b" + task_part(target, task, lane);
}
constexpr const char* kVersionKey = "v";
std::string source_key(const std::string& task) { return "t" + task; }

/// A task's source as the log keeps it: {"template":..,"workload":..}.
std::string source_value(const TaskSource& source) {
  Json::Object o;
  o["template"] = Json(source.template_name);
  o["workload"] = Json(source.workload);
  return Json(std::move(o)).dump();
}

bool starts_with(const rocksdb::Slice& s, const std::string& prefix) {
  return s.size() >= prefix.size() && std::memcmp(s.data(), prefix.data(), prefix.size()) == 0;
}

}  // namespace

// ---- the log ----

struct RecordLog::Impl {
  std::string dir;
  std::unique_ptr<rocksdb::DB> db;
  /// One append waiting in the queue or being committed (it lives on its appender's stack).
  struct Append {
    const MeasureRecord* record = nullptr;
    std::string text;  ///< the record's JSON text
    uint64_t seq = 0;
    bool done = false;  ///< committed, or failed with `error`
    std::exception_ptr error;
    /// append_async: the record (owned here) and what to call when the group is committed; the
    /// entry is deleted after the call.
    std::unique_ptr<MeasureRecord> owned;
    std::function<void(uint64_t, std::exception_ptr)> on_done;
  };
  /// Commits groups while appends are queued; called by the one appender that set `writing`,
  /// with `lock` held, and returns with it held and `writing` cleared.
  void lead(std::unique_lock<std::mutex>& lock);
  /// Guards queue and writing (not the database: only the leader writes, one at a time).
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::vector<Append*> queue;  ///< appends waiting for the next group, in arrival order
  bool writing = false;        ///< a leader is committing a group
  /// The sequence number of the next record (= the number of records).
  std::atomic<uint64_t> next_seq{0};

  /// Writes `group` as one synced WriteBatch, setting each one's seq; kiln::Error otherwise
  /// (then nothing of the group is written).
  void commit(const std::vector<Append*>& group);

  [[noreturn]] void fail(const std::string& doing, const rocksdb::Status& s) const {
    KILN_SYSTEM_ERROR() << "record log '" << dir << "': " << doing << ": " << s.ToString();
  }

  std::optional<std::string> get(const std::string& key) const {
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), key, &value);
    if (s.IsNotFound()) return std::nullopt;
    if (!s.ok()) fail("read", s);
    return value;
  }

  MeasureRecord record_at(uint64_t seq) const {
    auto text = get(record_key(seq));
    KILN_SYSTEM_CHECK(text.has_value())
        << "record log '" << dir << "' is corrupt: record " << seq << " is indexed but missing";
    return record_from_string(*text, "record log '" + dir + "' record " + std::to_string(seq));
  }

  /// The records of `target` in `lane`, every task's, in append order.
  std::vector<MeasureRecord> records_of(const std::string& target, Lane lane) const;

  /// Calls `fn(key, value)` for every key starting with `prefix`, in key order.
  template <typename Fn>
  void scan(const std::string& prefix, Fn fn) const {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && starts_with(it->key(), prefix); it->Next()) {
      fn(it->key(), it->value());
    }
    if (!it->status().ok()) fail("read", it->status());
  }
};

RecordLog::RecordLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecordLog::RecordLog(RecordLog&&) noexcept = default;
RecordLog& RecordLog::operator=(RecordLog&&) noexcept = default;
RecordLog::~RecordLog() = default;

const std::string& RecordLog::dir() const { return impl_->dir; }

RecordLog RecordLog::open(const std::string& dir) { return open_log(dir, true); }

RecordLog RecordLog::open_existing(const std::string& dir) { return open_log(dir, false); }

RecordLog RecordLog::open_log(const std::string& dir, bool create) {
  namespace fs = std::filesystem;
  KILN_USER_CHECK(!dir.empty()) << "record log: the folder name is empty";
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    KILN_USER_ERROR() << "record log '" << dir << "': exists and is not a folder";
  }
  if (create) {
    fs::create_directories(dir, ec);
    if (ec) {
      KILN_USER_ERROR() << "record log '" << dir << "': cannot create the folder: " << ec.message();
    }
  } else {
    KILN_USER_CHECK(fs::is_directory(dir, ec)) << "record log '" << dir << "': no such folder";
    // RocksDB's CURRENT file names its manifest: every database has one.
    KILN_USER_CHECK(fs::exists(fs::path(dir) / "CURRENT", ec))
        << "record log '" << dir << "': the folder holds no record log";
  }

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  rocksdb::Options options;
  options.create_if_missing = create;
  options.keep_log_file_num = 4;  // RocksDB's own LOG files, not records
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) {
    std::string msg = s.ToString();
    // RocksDB takes its LOCK file without waiting: a log in use fails here at once.
    if (msg.find("lock") != std::string::npos || msg.find("LOCK") != std::string::npos) {
      KILN_USER_ERROR() << "record log '" << dir
                        << "': in use by another process (a kilnd whose state it is, or a kiln "
                           "tune writing it?) or another RecordLog of this process (its LOCK is "
                           "held): "
                        << msg;
    }
    KILN_USER_ERROR() << "record log '" << dir << "': cannot open: " << msg;
  }
  impl->db.reset(db);

  // The format version: written when the log is new, checked otherwise.
  std::string version = std::to_string(kRecordVersion);
  if (auto v = impl->get(kVersionKey)) {
    KILN_USER_CHECK(*v == version) << "record log '" << dir << "': format version " << *v
                                   << ", this Kiln reads version " << version;
  } else {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    rocksdb::Status ws = impl->db->Put(wo, kVersionKey, version);
    if (!ws.ok()) impl->fail("write the version", ws);
  }

  // The sequence counter: one past the last record.
  {
    std::unique_ptr<rocksdb::Iterator> it(impl->db->NewIterator(rocksdb::ReadOptions()));
    it->SeekForPrev("r" + std::string(8, '\xff'));
    if (it->Valid() && it->key().size() == 9 && it->key()[0] == 'r') {
      impl->next_seq = from_be64(it->key().data() + 1) + 1;
    }
    if (!it->status().ok()) impl->fail("read", it->status());
  }
  return RecordLog(std::move(impl));
}

uint64_t RecordLog::append(const MeasureRecord& r) {
  check_record(r, "record log '" + impl_->dir + "'");
  Impl::Append me;
  me.record = &r;
  me.text = record_to_string(r);

  std::unique_lock<std::mutex> lock(impl_->queue_mu);
  impl_->queue.push_back(&me);
  // A follower waits for the leader of its group; when no write is in progress, the first
  // appender to see it becomes the leader of everything queued by then.
  impl_->queue_cv.wait(lock, [&] { return me.done || !impl_->writing; });
  if (!me.done) {
    impl_->writing = true;
    impl_->lead(lock);
  }
  if (me.error) std::rethrow_exception(me.error);
  return me.seq;
}

void RecordLog::append_async(MeasureRecord r,
                             std::function<void(uint64_t, std::exception_ptr)> done) {
  check_record(r, "record log '" + impl_->dir + "'");
  auto* me = new Impl::Append;
  me->owned = std::make_unique<MeasureRecord>(std::move(r));
  me->record = me->owned.get();
  me->text = record_to_string(*me->record);
  me->on_done = std::move(done);
  std::unique_lock<std::mutex> lock(impl_->queue_mu);
  impl_->queue.push_back(me);
  if (impl_->writing) return;  // the leader at work takes it into its next group
  impl_->writing = true;
  impl_->lead(lock);
}

void RecordLog::Impl::lead(std::unique_lock<std::mutex>& lock) {
  while (!queue.empty()) {
    std::vector<Append*> group(queue.begin(), queue.end());
    queue.clear();
    lock.unlock();
    std::exception_ptr error;
    try {
      commit(group);
    } catch (...) {
      error = std::current_exception();
    }
    // Asynchronous appends are answered (and freed) here, without any lock held.
    std::vector<Append*> waiting;
    for (Append* a : group) {
      if (a->on_done) {
        a->on_done(a->seq, error);
        delete a;
      } else {
        waiting.push_back(a);
      }
    }
    lock.lock();
    for (Append* a : waiting) {
      a->error = error;
      a->done = true;
    }
    // Woken without the lock held (the group's entries are not touched after it is released).
    lock.unlock();
    queue_cv.notify_all();
    lock.lock();
  }
  writing = false;
  lock.unlock();
  queue_cv.notify_all();  // an appender waiting for `writing` to clear may lead now
  lock.lock();
}

void RecordLog::Impl::commit(const std::vector<Append*>& group) {
  // Only the leader runs this (writing is set): next_seq and the count and best entries are
  // its alone. Entries touched earlier in the group are read from `counts` and `bests`, not from
  // the database, which does not hold them yet.
  const uint64_t first = next_seq.load();
  std::unordered_map<std::string, uint64_t> counts;
  std::unordered_map<std::string, double> bests;  // best key -> its cost (+inf: none yet)
  rocksdb::WriteBatch batch;
  uint64_t seq = first;
  for (Append* a : group) {
    const MeasureRecord& r = *a->record;
    const Lane lane = lane_of(r);
    a->seq = seq++;
    batch.Put(record_key(a->seq), a->text);
    batch.Put(index_prefix(r.target, r.task_key, lane) + be64(a->seq), "");
    batch.Put(measured_key(r.target, r.task_key, r.config_index, lane), "");

    const std::string ck = count_key(r.target, r.task_key, lane);
    auto [count, new_count] = counts.try_emplace(ck, 0);
    if (new_count) {
      if (auto c = get(ck)) {
        KILN_SYSTEM_CHECK(c->size() == 8) << "record log '" << dir << "' is corrupt: bad count";
        count->second = from_be64(c->data());
      }
    }
    batch.Put(ck, be64(++count->second));

    if (r.error == ErrorKind::kNone && !r.costs_s.empty()) {
      const std::string bk = best_key(r.target, r.task_key, lane);
      auto [best, new_best] = bests.try_emplace(bk, std::numeric_limits<double>::infinity());
      bool better = true;
      if (new_best) {
        if (auto b = get(bk)) {
          best->second = record_from_string(*b, "record log '" + dir + "' best entry").cost();
          better = r.cost() < best->second;
        }
      } else {
        better = r.cost() < best->second;
      }
      if (better) {
        best->second = r.cost();
        batch.Put(bk, a->text);  // a later Put of the same key in the batch wins
      }
    }
  }

  rocksdb::WriteOptions wo;
  wo.sync = true;  // on disk when append returns: an acknowledged record survives a crash
  rocksdb::Status s = db->Write(wo, &batch);
  if (!s.ok()) {
    fail(group.size() == 1 ? "append a record of task " + group[0]->record->task_key
                           : "append " + std::to_string(group.size()) + " records",
         s);
  }
  next_seq.store(seq);
}

std::vector<MeasureRecord> RecordLog::records(const std::string& task_key,
                                              const std::string& target, Lane lane) const {
  std::vector<uint64_t> seqs;
  const std::string prefix = index_prefix(target, task_key, lane);
  impl_->scan(prefix, [&](const rocksdb::Slice& key, const rocksdb::Slice&) {
    if (key.size() == prefix.size() + 8) seqs.push_back(from_be64(key.data() + prefix.size()));
  });
  std::vector<MeasureRecord> out;
  out.reserve(seqs.size());
  for (uint64_t seq : seqs) out.push_back(impl_->record_at(seq));
  return out;
}

std::optional<MeasureRecord> RecordLog::best(const std::string& task_key, const std::string& target,
                                             Lane lane) const {
  auto text = impl_->get(best_key(target, task_key, lane));
  if (!text) return std::nullopt;
  return record_from_string(*text, "record log '" + impl_->dir + "' best entry of " + task_key);
}

size_t RecordLog::count(const std::string& task_key, const std::string& target, Lane lane) const {
  auto c = impl_->get(count_key(target, task_key, lane));
  if (!c) return 0;
  KILN_SYSTEM_CHECK(c->size() == 8) << "record log '" << impl_->dir << "' is corrupt: bad count";
  return static_cast<size_t>(from_be64(c->data()));
}

bool RecordLog::measured(const std::string& task_key, const std::string& target,
                         uint64_t config_index, Lane lane) const {
  return impl_->get(measured_key(target, task_key, config_index, lane)).has_value();
}

std::vector<std::string> RecordLog::tasks(const std::string& target, Lane lane) const {
  std::vector<std::string> out;
  const std::string prefix = "n" + target_part(target, lane);
  impl_->scan(prefix, [&](const rocksdb::Slice& key, const rocksdb::Slice&) {
    // prefix, task, '\0'
    if (key.size() > prefix.size()) {
      out.emplace_back(key.data() + prefix.size(), key.size() - prefix.size() - 1);
    }
  });
  return out;
}

void RecordLog::note_task(const std::string& task_key, const TaskSource& source) {
  check_task_source(task_key, source, "record log '" + impl_->dir + "'");
  if (task_source(task_key) == source) return;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = impl_->db->Put(wo, source_key(task_key), source_value(source));
  if (!s.ok()) impl_->fail("write the source of task " + task_key, s);
}

std::optional<TaskSource> RecordLog::task_source(const std::string& task_key) const {
  auto text = impl_->get(source_key(task_key));
  if (!text) return std::nullopt;
  const std::string what = "record log '" + impl_->dir + "' source of task " + task_key;
  const Json j = Json::parse(*text, what);
  return TaskSource{j.at("template", what).as_string(what + ": template"),
                    j.at("workload", what).as_string(what + ": workload")};
}

size_t RecordLog::count_target(const std::string& target, Lane lane) const {
  size_t n = 0;
  impl_->scan("n" + target_part(target, lane),
              [&](const rocksdb::Slice&, const rocksdb::Slice& value) {
                if (value.size() == 8) n += static_cast<size_t>(from_be64(value.data()));
              });
  return n;
}

std::vector<TaskHistory> RecordLog::history(const std::string& target, Lane lane) const {
  std::vector<TaskHistory> out;
  std::unordered_map<std::string, size_t> at;  // task key -> its place in out
  std::unordered_set<std::string> unknown;     // tasks with no source
  for (MeasureRecord& r : impl_->records_of(target, lane)) {
    auto it = at.find(r.task_key);
    if (it == at.end()) {
      if (unknown.count(r.task_key)) continue;
      std::optional<TaskSource> source = task_source(r.task_key);
      if (!source) {
        unknown.insert(r.task_key);
        continue;
      }
      it = at.emplace(r.task_key, out.size()).first;
      out.push_back({r.task_key, std::move(*source), {}});
    }
    out[it->second].records.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> RecordLog::shelf(const std::string& name) const {
  return impl_->get("s" + name);
}

void RecordLog::put_shelf(const std::string& name, const std::string& bytes) {
  KILN_USER_CHECK(!name.empty() && name.find('\0') == std::string::npos)
      << "record log '" << impl_->dir << "': a shelf name must be non-empty and hold no NUL";
  KILN_USER_CHECK(bytes.size() <= (size_t{256} << 20))
      << "record log '" << impl_->dir << "': " << bytes.size() << " bytes for shelf '" << name
      << "', over the 256 MiB a shelf holds";
  rocksdb::WriteOptions wo;
  wo.sync = true;
  rocksdb::Status s = impl_->db->Put(wo, "s" + name, bytes);
  if (!s.ok()) impl_->fail("keep '" + name + "'", s);
}

size_t RecordLog::size() const { return static_cast<size_t>(impl_->next_seq.load()); }

std::vector<MeasureRecord> RecordLog::all() const {
  std::vector<MeasureRecord> out;
  impl_->scan("r", [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
    out.push_back(record_from_string(
        value.ToString(),
        "record log '" + impl_->dir + "' record " + std::to_string(from_be64(key.data() + 1))));
  });
  return out;
}

uint64_t RecordLog::append_all(const std::vector<MeasureRecord>& recs) {
  for (const MeasureRecord& r : recs) check_record(r, "record log '" + impl_->dir + "'");
  if (recs.empty()) return size();
  std::vector<Impl::Append> mine(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    mine[i].record = &recs[i];
    mine[i].text = record_to_string(recs[i]);
  }
  std::unique_lock<std::mutex> lock(impl_->queue_mu);
  // Queued under one hold of the lock, so that one leader takes them all into one group: one
  // WriteBatch.
  for (Impl::Append& a : mine) impl_->queue.push_back(&a);
  impl_->queue_cv.wait(lock, [&] { return mine.front().done || !impl_->writing; });
  if (!mine.front().done) {
    impl_->writing = true;
    impl_->lead(lock);
  }
  if (mine.front().error) std::rethrow_exception(mine.front().error);
  return mine.front().seq;
}

std::vector<RecordLog::Key> RecordLog::keys() const {
  std::vector<Key> out;
  // 'n' target [\1 'e'] \0 task \0 -> count: one key per (target, lane, task). In byte order
  // (\0 and \1 before any other byte of a target) each key's entries are contiguous, by target then
  // lane.
  impl_->scan("n", [&](const rocksdb::Slice& key, const rocksdb::Slice& value) {
    const std::string k = key.ToString();
    const size_t end = k.find_first_of(std::string("\0\1", 2), 1);
    if (end == std::string::npos || value.size() != 8) return;
    const std::string target = k.substr(1, end - 1);
    const Lane lane = k[end] == '\1' ? Lane::kEmulated : Lane::kDevice;
    if (out.empty() || out.back().target != target || out.back().lane != lane) {
      out.push_back({target, lane, 0, 0});
    }
    out.back().tasks += 1;
    out.back().records += static_cast<size_t>(from_be64(value.data()));
    // target part, then task \0
    const size_t task_at = end + (lane == Lane::kEmulated ? 3 : 1);
    if (k.size() > task_at && impl_->get(source_key(k.substr(task_at, k.size() - task_at - 1)))) {
      out.back().sources += 1;
    }
  });
  return out;
}

std::vector<MeasureRecord> RecordLog::Impl::records_of(const std::string& target, Lane lane) const {
  // 'i' target-part task \0 seq: every task of the key under one prefix.
  std::vector<uint64_t> seqs;
  const std::string prefix = "i" + target_part(target, lane);
  scan(prefix, [&](const rocksdb::Slice& key, const rocksdb::Slice&) {
    if (key.size() >= prefix.size() + 9) seqs.push_back(from_be64(key.data() + key.size() - 8));
  });
  std::sort(seqs.begin(), seqs.end());
  std::vector<MeasureRecord> out;
  out.reserve(seqs.size());
  for (uint64_t seq : seqs) out.push_back(record_at(seq));
  return out;
}

namespace {

/// "1 task", "3 tasks".
std::string counted(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// "'llvm' (12 records of 3 tasks), 'llvm' emulated lane (...)", or "nothing".
std::string describe(const std::vector<RecordLog::Key>& keys) {
  if (keys.empty()) return "nothing";
  std::string s;
  for (const RecordLog::Key& k : keys) {
    if (!s.empty()) s += ", ";
    s += "'" + k.target + "'" + (k.lane == Lane::kEmulated ? " emulated lane" : "") + " (" +
         counted(k.records, "record") + " of " + counted(k.tasks, "task") + ")";
  }
  return s;
}

}  // namespace

PackHeader RecordLog::export_pack(const std::string& path, const std::string& target,
                                  Lane lane) const {
  const std::vector<MeasureRecord> recs = impl_->records_of(target, lane);
  KILN_USER_CHECK(!recs.empty()) << "record log '" << impl_->dir << "' holds no records of target '"
                                 << target << "' in the " << lane_name(lane) << " lane; it holds "
                                 << describe(keys());
  PackSources sources;
  std::set<std::string> tasks;
  for (const MeasureRecord& r : recs) {
    if (!tasks.insert(r.task_key).second) continue;
    if (std::optional<TaskSource> source = task_source(r.task_key)) {
      sources.emplace(r.task_key, std::move(*source));
    }
  }
  return write_pack(path, target, lane, recs, sources);
}

RecordLog::ImportReport RecordLog::import_pack(const std::string& path) {
  RecordPack pack = read_pack(path);
  ImportReport report;
  report.header = pack.header;
  // A record is present when its JSON text (every field) is.
  std::unordered_set<std::string> present;
  std::set<std::string> log_devices, pack_devices;
  for (const MeasureRecord& r : impl_->records_of(pack.header.target, pack.header.lane)) {
    present.insert(record_to_string(r));
    if (r.error == ErrorKind::kNone) log_devices.insert(r.device);
  }
  std::vector<MeasureRecord> fresh;
  for (MeasureRecord& r : pack.records) {
    if (r.error == ErrorKind::kNone) pack_devices.insert(r.device);
    if (present.insert(record_to_string(r)).second) {
      fresh.push_back(std::move(r));
    } else {
      ++report.skipped;
    }
  }
  report.log_devices.assign(log_devices.begin(), log_devices.end());
  report.pack_devices.assign(pack_devices.begin(), pack_devices.end());
  // The sources the log lacks, in one synced batch (read_pack checked them: check_task_source).
  rocksdb::WriteBatch sources;
  for (const auto& [task, source] : pack.sources) {
    if (impl_->get(source_key(task))) continue;
    sources.Put(source_key(task), source_value(source));
    ++report.sources;
  }
  if (report.sources > 0) {
    rocksdb::WriteOptions wo;
    wo.sync = true;
    rocksdb::Status s = impl_->db->Write(wo, &sources);
    if (!s.ok()) impl_->fail("write " + std::to_string(report.sources) + " task sources", s);
  }
  append_all(fresh);
  report.imported = fresh.size();
  return report;
}

}  // namespace kiln::records
