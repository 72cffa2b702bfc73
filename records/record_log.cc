// The record log: the RocksDB keys described in record_log.h, group commit, and export/import.
#include "records/record_log.h"

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>

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

bool starts_with(const rocksdb::Slice& s, const std::string& prefix) {
  return s.size() >= prefix.size() && std::memcmp(s.data(), prefix.data(), prefix.size()) == 0;
}

/// What append requires of a record; kiln::Error naming `origin` otherwise.
void check_record(const MeasureRecord& r, const std::string& origin) {
  auto check_name = [&](const std::string& v, const char* name) {
    KILN_USER_CHECK(!v.empty() && v.find('\0') == std::string::npos)
        << origin << ": field '" << name << "' must be non-empty and hold no NUL character";
  };
  check_name(r.target, "target");
  check_name(r.task_key, "task");
  KILN_USER_CHECK(r.target.find('\1') == std::string::npos)
      << origin << ": field 'target' must hold no \\u0001 character (it marks the emulated lane)";
  for (double c : r.costs_s) {
    KILN_USER_CHECK(std::isfinite(c) && c >= 0)
        << origin << ": field 'costs' of task " << r.task_key << " holds " << c
        << "; costs must be finite and non-negative";
  }
  KILN_USER_CHECK(std::isfinite(r.gflops) && r.gflops >= 0)
      << origin << ": field 'gflops' of task " << r.task_key << " is " << r.gflops
      << "; it must be finite and non-negative";
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

RecordLog RecordLog::open(const std::string& dir) {
  namespace fs = std::filesystem;
  KILN_USER_CHECK(!dir.empty()) << "record log: the folder name is empty";
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    KILN_USER_ERROR() << "record log '" << dir << "': exists and is not a folder";
  }
  fs::create_directories(dir, ec);
  if (ec) {
    KILN_USER_ERROR() << "record log '" << dir << "': cannot create the folder: " << ec.message();
  }

  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  rocksdb::Options options;
  options.create_if_missing = true;
  options.keep_log_file_num = 4;  // RocksDB's own LOG files, not records
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) {
    std::string msg = s.ToString();
    if (msg.find("lock") != std::string::npos || msg.find("LOCK") != std::string::npos) {
      KILN_USER_ERROR() << "record log '" << dir
                        << "': in use by another process or another RecordLog of this process "
                           "(its LOCK is held): "
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

void RecordLog::export_jsonl(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_USER_CHECK(f.is_open()) << "record log export: cannot write '" << path << "'";
  impl_->scan("r", [&](const rocksdb::Slice&, const rocksdb::Slice& value) {
    f.write(value.data(), static_cast<std::streamsize>(value.size()));
    f.put('\n');
  });
  f.close();
  KILN_SYSTEM_CHECK(!f.fail()) << "record log export: writing '" << path << "' failed";
}

size_t RecordLog::import_jsonl(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_USER_CHECK(f.is_open()) << "record log import: cannot read '" << path << "'";
  std::vector<MeasureRecord> recs;
  std::string line;
  for (size_t n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string origin = path + ":" + std::to_string(n);
    recs.push_back(record_from_string(line, origin));
    check_record(recs.back(), origin);
  }
  KILN_SYSTEM_CHECK(!f.bad()) << "record log import: reading '" << path << "' failed";
  for (const MeasureRecord& r : recs) append(r);
  return recs.size();
}

}  // namespace kiln::records
