#include "server/wire.h"

namespace kiln::server {

v1::JobState to_wire(tracker::JobState state) {
  switch (state) {
    case tracker::JobState::kQueued:
      return v1::JOB_STATE_QUEUED;
    case tracker::JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case tracker::JobState::kDone:
      return v1::JOB_STATE_DONE;
    case tracker::JobState::kFailed:
      return v1::JOB_STATE_FAILED;
    case tracker::JobState::kCancelled:
      return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<tracker::JobState> from_wire(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED:
      return tracker::JobState::kQueued;
    case v1::JOB_STATE_RUNNING:
      return tracker::JobState::kRunning;
    case v1::JOB_STATE_DONE:
      return tracker::JobState::kDone;
    case v1::JOB_STATE_FAILED:
      return tracker::JobState::kFailed;
    case v1::JOB_STATE_CANCELLED:
      return tracker::JobState::kCancelled;
    default:
      return std::nullopt;
  }
}

v1::JobProgress progress_of(const tracker::JobRecord& job) {
  v1::JobProgress p;
  p.set_job_id(job.id);
  p.set_state(to_wire(job.state));
  p.set_tasks_total(job.tasks_total);
  p.set_tasks_done(job.tasks_done());
  p.set_trials_done(job.trials_done);
  p.set_trials_failed(job.trials_failed);
  p.set_best_latency_s(job.best_latency_s);
  p.set_updated_ms(job.updated_ms);
  p.set_phase(job.phase);
  return p;
}

v1::Job to_wire(const tracker::JobRecord& job) {
  v1::Job j;
  j.set_id(job.id);
  j.set_owner(job.owner);
  j.set_model_name(job.model_name);
  j.set_target(job.target);
  j.set_device_key(job.device_key);
  j.set_trials(job.trials);
  j.set_budget(job.budget);
  j.set_time_limit_s(job.time_limit_s);
  if (job.early_stop) j.set_early_stop(*job.early_stop);
  j.set_priority(job.priority);
  *j.mutable_progress() = progress_of(job);
  j.set_error(job.error);
  j.set_created_ms(job.created_ms);
  j.set_started_ms(job.started_ms);
  j.set_finished_ms(job.finished_ms);
  return j;
}

}  // namespace kiln::server
