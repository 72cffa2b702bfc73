#include "tuner/farm_records.h"

#include "rpc/wire.h"

namespace kiln::tuner {

std::vector<records::MeasureRecord> FarmRecords::records(const std::string& task_key,
                                                         const std::string&) const {
  const v1::TaskRecords got = client_.records(task_key, false);
  std::vector<records::MeasureRecord> out;
  for (int i = 0; i < got.records_size(); ++i)
    out.push_back(rpc::from_wire(got.records(i), "kilnd's record " + std::to_string(i)));
  return out;
}

std::optional<records::MeasureRecord> FarmRecords::best(const std::string& task_key,
                                                        const std::string&) const {
  const v1::TaskRecords got = client_.records(task_key, true);
  if (!got.has_best()) return std::nullopt;
  return rpc::from_wire(got.best(), "kilnd's best record");
}

size_t FarmRecords::count(const std::string& task_key, const std::string&) const {
  return client_.records(task_key, true).count();
}

uint64_t FarmRecords::append(const records::MeasureRecord& r) { return client_.append({r}).at(0); }

size_t FarmRecords::count_target(const std::string&) const {
  return client_.shelf("").target_records();
}

std::vector<records::TaskHistory> FarmRecords::history(const std::string&) const {
  return client_.history();
}

std::optional<std::string> FarmRecords::shelf(const std::string& name) const {
  v1::ShelfEntry e = client_.shelf(name);
  if (!e.found()) return std::nullopt;
  return std::move(*e.mutable_data());
}

void FarmRecords::put_shelf(const std::string& name, const std::string& bytes) {
  client_.put_shelf(name, bytes);
}

}  // namespace kiln::tuner
