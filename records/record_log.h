// The record log: every measurement, durable, in RocksDB.
//
// Each measured config of a tuning task becomes one MeasureRecord (record.h), appended to a
// RecordLog:
//
//   RecordLog log = RecordLog::open("tuning.log");   // a folder; created when missing
//   if (log.count(task, target) >= trials) continue;  // tuned enough already: skip the task
//   if (log.measured(task, target, cfg.index())) continue;  // resumed run: never measure twice
//   log.append(record);                               // durable (fsync'd) when it returns
//   auto best = log.best(task, target);               // the graph build's choice, O(1)
//
// Lanes: a record measured under emulation (MeasureRecord::emulated, an agent under qemu-user)
// says nothing about a real board's speed, so each (target, task) has two lanes, kDevice and
// kEmulated, that never mix: records(), best(), count(), measured() and tasks() read one lane
// (RecordStore's calls read kDevice), and append() files a record in the lane its `emulated`
// flag names.
//
// Keys (one RocksDB database, one kind of key per leading byte; "<t,k>" is target \0 task \0
// in the device lane, target \1 'e' \0 task \0 in the emulated lane):
//   'r' seq                 -> the record's JSON text (seq: 8 bytes big-endian, so iteration
//                              is append order; the counter is recovered at open)
//   'i' <t,k> seq           -> ""           the records of one (target, task), in append order
//   'm' <t,k> config_index  -> ""           measured(): one key per (target, task, config)
//   'n' <t,k>               -> 8-byte count of records of (target, task), errors included
//   'b' <t,k>               -> seq of the best error-free record (lowest cost())
//   'v'                     -> the format version
// One append is one WriteBatch (all of the keys above at once), written with sync = true: a
// record is either wholly there after a crash or not at all, and once append returns it is on
// disk. Appends from several threads of one process are committed in groups: an appender queues
// its record; when no write is in progress it becomes the leader, takes every queued record, and
// writes them all as ONE synced WriteBatch (sequence numbers in queue order, the count and best
// entries carried across the group), then wakes the others with their sequence numbers. So N
// concurrent appends cost about one fsync, not N, and each still returns only once its record is
// on disk; when the write fails, every appender of that group gets the kiln::SystemError and none
// of its records is there. Alone, an appender is its own group of one: the same single batch as
// ever. Reads need no lock. Another process cannot open the same folder while this one has it
// (RocksDB's LOCK file).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "records/record.h"
#include "records/record_store.h"

namespace kiln::records {

/// Which records a query reads: a real device's, or those measured under emulation.
enum class Lane { kDevice, kEmulated };

/// The lane a record belongs to.
inline Lane lane_of(const MeasureRecord& r) { return r.emulated ? Lane::kEmulated : Lane::kDevice; }

class RecordLog final : public RecordStore {
 public:
  /// Opens the log in folder `dir`, creating it when missing. kiln::Error naming the folder when
  /// it cannot be created or opened: not writable, a file, or in use by another RecordLog (in this
  /// process or another one).
  static RecordLog open(const std::string& dir);

  RecordLog(RecordLog&&) noexcept;
  RecordLog& operator=(RecordLog&&) noexcept;
  ~RecordLog();

  /// Appends `r`; it is on disk when this returns. Returns its sequence number (0, 1, 2, ... in
  /// append order over the whole log). Thread-safe; concurrent appends share one sync.
  /// kiln::SystemError when the disk refuses it; kiln::Error when target or task key is empty or
  /// holds a NUL character, or a cost or gflops is negative or not finite.
  uint64_t append(const MeasureRecord& r) override;
  /// The same without waiting: `done(seq, error)` is called once the record's group is on disk
  /// (error null) or failed, on the thread that commits the group (possibly this one, before
  /// append_async returns). `done` must not append itself. kiln::Error at once when the record
  /// is malformed (as append).
  void append_async(MeasureRecord r, std::function<void(uint64_t, std::exception_ptr)> done);

  /// The records of (task, target) in `lane`, in append order.
  std::vector<MeasureRecord> records(const std::string& task_key, const std::string& target,
                                     Lane lane) const;
  /// The error-free record of (task, target) in `lane` with the lowest cost() (the first of
  /// equals); nullopt when there is none.
  std::optional<MeasureRecord> best(const std::string& task_key, const std::string& target,
                                    Lane lane) const;
  /// How many records (task, target) has in `lane`, errors included.
  size_t count(const std::string& task_key, const std::string& target, Lane lane) const;
  /// Whether config `config_index` of (task, target) has a record in `lane` (errors included).
  bool measured(const std::string& task_key, const std::string& target, uint64_t config_index,
                Lane lane = Lane::kDevice) const;
  /// The task keys with records for `target` in `lane`, sorted.
  std::vector<std::string> tasks(const std::string& target, Lane lane = Lane::kDevice) const;

  // RecordStore: the device lane.
  std::vector<MeasureRecord> records(const std::string& task_key,
                                     const std::string& target) const override {
    return records(task_key, target, Lane::kDevice);
  }
  std::optional<MeasureRecord> best(const std::string& task_key,
                                    const std::string& target) const override {
    return best(task_key, target, Lane::kDevice);
  }
  size_t count(const std::string& task_key, const std::string& target) const override {
    return count(task_key, target, Lane::kDevice);
  }

  /// The number of records in the log.
  size_t size() const;
  /// Every record, in append order.
  std::vector<MeasureRecord> all() const;

  /// Writes every record, in append order, one JSON object per line. kiln::Error naming `path`
  /// when it cannot be written.
  void export_jsonl(const std::string& path) const;
  /// Appends the records of a JSON-lines file (blank lines are skipped). The whole file is read
  /// and checked first: a malformed line gives kiln::Error naming the file, the line number and
  /// the field, and then nothing is appended. Returns the number of records appended.
  size_t import_jsonl(const std::string& path);

  const std::string& dir() const;

 private:
  struct Impl;
  explicit RecordLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::records
