// A measurement record for the record log's and packs' tests: one config of one task, with its
// costs, as a tuner would have appended it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "records/record.h"

namespace kiln::testing {

/// Config `config` of `task` measured at `costs` (seconds; empty: a failed measurement) on
/// `device` for `target`; its gflops are 1 / its cost, its time and config follow the index.
inline records::MeasureRecord test_record(const std::string& task, uint64_t config,
                                          std::vector<double> costs, const std::string& target,
                                          const std::string& device) {
  records::MeasureRecord r;
  r.target = target;
  r.device = device;
  r.task_key = task;
  r.config_index = config;
  r.config = "tile=[" + std::to_string(config) + ", 1]";
  r.costs_s = std::move(costs);
  r.gflops = r.costs_s.empty() ? 0 : 1.0 / r.cost();
  r.timestamp_ms = 1700000000000 + static_cast<int64_t>(config);
  r.search_seed = 7;
  return r;
}

}  // namespace kiln::testing
