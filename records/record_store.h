// What the tuning loop needs of a record log, whoever keeps it: the records of a task, its best,
// how many it has, and appending one; and what a cost model trained on the whole log needs
// (autotune/log_model.h): how each task is rebuilt (its source), every task's records of a target,
// and a shelf to keep the trained model on. RecordLog (record_log.h) is the store in a local folder
// (`kiln tune`, kilnd); a job driver of the farm reads and appends through kilnd, which owns the
// shared log (tuner/farm_records.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "records/record.h"

namespace kiln::records {

/// One task's records of a target, with its source.
struct TaskHistory {
  std::string task_key;
  TaskSource source;
  std::vector<MeasureRecord> records;  ///< in append order
};

/// The shelf entry of `kind`'s cost model of `target` (autotune/log_model.h keeps it there).
inline std::string cost_model_shelf(const std::string& target, const std::string& kind) {
  return "cost-model/" + kind + "/" + target;
}

class RecordStore {
 public:
  virtual ~RecordStore() = default;
  /// The records of (task, target), in append order.
  virtual std::vector<MeasureRecord> records(const std::string& task_key,
                                             const std::string& target) const = 0;
  /// The error-free record of (task, target) with the lowest cost() (the first of equals);
  /// nullopt when there is none.
  virtual std::optional<MeasureRecord> best(const std::string& task_key,
                                            const std::string& target) const = 0;
  /// How many records (task, target) has, errors included.
  virtual size_t count(const std::string& task_key, const std::string& target) const = 0;
  /// Appends `r`; it is durable when this returns. Returns its sequence number in the store.
  virtual uint64_t append(const MeasureRecord& r) = 0;

  /// Remembers how task `task_key` is rebuilt (the Tuner notes every task it tunes). Default:
  /// nothing (a store that learns the sources otherwise).
  virtual void note_task(const std::string& task_key, const TaskSource& source) {
    (void)task_key;
    (void)source;
  }
  /// How many records `target` has over all its tasks, errors included (0 by default).
  virtual size_t count_target(const std::string& target) const {
    (void)target;
    return 0;
  }
  /// Every task of `target` whose source the store knows, with its records (none by default).
  virtual std::vector<TaskHistory> history(const std::string& target) const {
    (void)target;
    return {};
  }
  /// The bytes kept under `name` on the store's shelf (a pre-trained cost model); nullopt when
  /// there are none (and by default).
  virtual std::optional<std::string> shelf(const std::string& name) const {
    (void)name;
    return std::nullopt;
  }
  /// Keeps `bytes` under `name`, durably, replacing what was there (by default: nowhere).
  virtual void put_shelf(const std::string& name, const std::string& bytes) {
    (void)name;
    (void)bytes;
  }
};

}  // namespace kiln::records
