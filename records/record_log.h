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
//   't' task                -> the task's source as JSON ({"template":..,"workload":..})
//   's' name                -> bytes kept on the shelf (pre-trained cost models)
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
// (RocksDB's LOCK file): opening a log kilnd or `kiln tune` holds fails at once, naming it.
//
// Packs: export_pack writes one key of the log (a target in one lane) as a record pack
// (record_pack.h) with the sources the log knows of its tasks, import_pack adds one, all or
// nothing, dropping records already present and noting the sources the log lacks; that is how one
// farm's measurements reach another's log and train its cost model (`kiln records export /
// import`).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "records/record.h"
#include "records/record_pack.h"
#include "records/record_store.h"

namespace kiln::records {

class RecordLog final : public RecordStore {
 public:
  /// Opens the log in folder `dir`, creating it when missing. kiln::Error naming the folder when
  /// it cannot be created or opened: not writable, a file, or in use by another RecordLog (in this
  /// process or another one).
  static RecordLog open(const std::string& dir);
  /// Opens an existing log, creating nothing: kiln::Error naming the folder when it is missing or
  /// holds no record log, and as open() otherwise.
  static RecordLog open_existing(const std::string& dir);

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

  // The task sources and the shelf (RecordStore; the device lane).
  void note_task(const std::string& task_key, const TaskSource& source) override;
  /// The source noted for `task_key`; nullopt when none was.
  std::optional<TaskSource> task_source(const std::string& task_key) const;
  size_t count_target(const std::string& target) const override {
    return count_target(target, Lane::kDevice);
  }
  std::vector<TaskHistory> history(const std::string& target) const override {
    return history(target, Lane::kDevice);
  }
  size_t count_target(const std::string& target, Lane lane) const;
  std::vector<TaskHistory> history(const std::string& target, Lane lane) const;
  std::optional<std::string> shelf(const std::string& name) const override;
  /// kiln::Error for an empty name or one holding a NUL, or bytes over 256 MiB.
  void put_shelf(const std::string& name, const std::string& bytes) override;

  /// The number of records in the log.
  size_t size() const;
  /// Every record, in append order.
  std::vector<MeasureRecord> all() const;

  /// Appends every record of `recs` in ONE synced WriteBatch: after a crash all of them are
  /// there or none. Returns the sequence number of the first (size() when `recs` is empty).
  /// Errors as append, checked for every record before anything is written.
  uint64_t append_all(const std::vector<MeasureRecord>& recs);

  /// One key of the log: a target in one lane, what a record pack holds (record_pack.h).
  struct Key {
    std::string target;
    Lane lane = Lane::kDevice;
    size_t tasks = 0;    ///< task keys with records
    size_t records = 0;  ///< errors included
    size_t sources = 0;  ///< of those tasks, the ones whose source the log knows (note_task)
  };
  /// Every key with records, by target then lane (device first).
  std::vector<Key> keys() const;

  /// Writes the records of `target` in `lane`, in append order, and the sources the log knows of
  /// their tasks as a record pack at `path` (record_pack.h; written whole or not at all) and
  /// returns its header. kiln::Error when the log holds none (naming the keys it does hold), or
  /// naming `path` when it cannot be written.
  PackHeader export_pack(const std::string& path, const std::string& target,
                         Lane lane = Lane::kDevice) const;

  /// What import_pack did.
  struct ImportReport {
    PackHeader header;    ///< the pack's
    size_t imported = 0;  ///< records appended
    size_t skipped = 0;   ///< records already in the log (or earlier in the pack): dropped
    size_t sources = 0;   ///< task sources noted that the log did not know
    /// The device fingerprints of the key's timed (error-free) records in the log before the
    /// import and in the pack, sorted: another machine's timings under the same target string
    /// show as a difference.
    std::vector<std::string> log_devices, pack_devices;
  };
  /// Adds a record pack's records to the log. The whole pack is read and checked first
  /// (read_pack: a bad line gives kiln::Error naming the file, the line number and the field, and
  /// nothing is written). The pack's task sources that the log lacks are noted (one synced
  /// batch, before the records: a source alone is harmless; where the log knows another source
  /// for a task, its own stays). A record equal in every field to one the log holds, or to an
  /// earlier one of the pack, is skipped; the rest are appended in the pack's order as one batch
  /// (append_all).
  ImportReport import_pack(const std::string& path);

  const std::string& dir() const;

 private:
  struct Impl;
  static RecordLog open_log(const std::string& dir, bool create);
  explicit RecordLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::records
