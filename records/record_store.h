// What the tuning loop needs of a record log, whoever keeps it: the records of a task, its best,
// how many it has, and appending one. RecordLog (record_log.h) is the store in a local folder
// (`kiln tune`, kilnd); a job driver of the farm reads and appends through kilnd, which owns the
// shared log (tuner/farm_records.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "records/record.h"

namespace kiln::records {

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
};

}  // namespace kiln::records
