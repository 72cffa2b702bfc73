// The record store of a job driver: kilnd owns the shared record log, so the tuner's reads and
// appends go through it (each call one JobDriver request; appends are durable once answered).
#pragma once

#include "records/record_store.h"
#include "tuner/farm_client.h"

namespace kiln::tuner {

class FarmRecords final : public records::RecordStore {
 public:
  explicit FarmRecords(FarmClient& client) : client_(client) {}
  /// `target` must be the job's: kilnd answers for the job's target only.
  std::vector<records::MeasureRecord> records(const std::string& task_key,
                                              const std::string& target) const override;
  std::optional<records::MeasureRecord> best(const std::string& task_key,
                                             const std::string& target) const override;
  size_t count(const std::string& task_key, const std::string& target) const override;
  uint64_t append(const records::MeasureRecord& r) override;
  // What a cost model trained on the farm's whole log needs (kilnd learns the tasks' sources from
  // the tasks drivers report, so note_task is not needed here).
  size_t count_target(const std::string& target) const override;
  std::vector<records::TaskHistory> history(const std::string& target) const override;
  std::optional<std::string> shelf(const std::string& name) const override;
  void put_shelf(const std::string& name, const std::string& bytes) override;

 private:
  FarmClient& client_;
};

}  // namespace kiln::tuner
