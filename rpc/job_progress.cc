#include "rpc/job_progress.h"

#include <algorithm>

namespace kiln::rpc {

bool is_scheduled(const v1::Job& job) { return job.budget() > 0 || job.time_limit_s() > 0; }

uint64_t planned_measurements(const v1::Job& job) {
  if (job.budget() > 0) return job.budget();
  if (is_scheduled(job)) return 0;
  return uint64_t{job.progress().tasks_total()} * job.trials();
}

double limited_seconds_elapsed(const v1::Job& job, int64_t now_ms) {
  if (job.time_limit_s() <= 0 || job.started_ms() <= 0) return 0;
  const int64_t end_ms = job.finished_ms() > 0 ? job.finished_ms() : now_ms;
  return std::max<int64_t>(0, end_ms - job.started_ms()) / 1e3;
}

double job_progress(const v1::Job& job, int64_t now_ms) {
  const v1::JobProgress& p = job.progress();
  if (p.state() == v1::JOB_STATE_DONE) return 1;
  double fraction = 0;
  if (const uint64_t planned = planned_measurements(job); planned > 0)
    fraction = static_cast<double>(p.trials_done()) / static_cast<double>(planned);
  if (job.time_limit_s() > 0)
    fraction = std::max(fraction, limited_seconds_elapsed(job, now_ms) / job.time_limit_s());
  if (!is_scheduled(job) && p.tasks_total() > 0)
    fraction = std::max(fraction, static_cast<double>(p.tasks_done()) / p.tasks_total());
  return std::clamp(fraction, 0.0, 1.0);
}

}  // namespace kiln::rpc
