// The Measurer of a job driver: each batch of candidates goes to kilnd as one MeasureBatch (the
// configs and the self-describing task; kilnd has them built on compiler workers and measured on
// devices of the job's key) and comes back as records already durable in kilnd's log. Only the
// configs travel: the workers lower and build each from the task's workload themselves.
#pragma once

#include "compiler/autotune/measurer.h"
#include "proto/kiln/v1/driver.pb.h"
#include "tuner/farm_client.h"

namespace kiln::tuner {

class FarmMeasurer final : public autotune::Measurer {
 public:
  explicit FarmMeasurer(FarmClient& client) : client_(client) {}

  /// Computes the task's reference (JIT, on this machine) for the devices' output check.
  void begin_task(const autotune::Task& task) override;
  std::vector<records::MeasureRecord> measure(const autotune::Task& task,
                                              const std::vector<autotune::Candidate>& candidates,
                                              uint64_t seed) override;

 private:
  FarmClient& client_;
  v1::MeasureBatchRequest batch_;  ///< the task's part of every batch
};

}  // namespace kiln::tuner
