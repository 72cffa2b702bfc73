// The Farm's build dispatch: compiler workers long-poll for batches of builds (each carrying its
// task's template, workload and target, and the config) and report the artifacts.
#include <algorithm>

#include "server/farm_internal.h"
#include "server/wire.h"

namespace kiln::server {

std::vector<v1::BuildRequest> Farm::take_builds(const std::string& worker, size_t max,
                                                const std::vector<std::string>& targets,
                                                tracker::Duration wait) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<tracker::BuildRequest> taken;
  while (!stopping_) {
    taken = builds_.take_batch(worker, std::max<size_t>(1, max), targets);
    if (!taken.empty()) break;
    if (builds_cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  std::vector<v1::BuildRequest> out;
  for (const tracker::BuildRequest& b : taken) {
    auto slot = build_slots_.find(b.id);
    if (slot == build_slots_.end()) {
      builds_.complete(b.id, worker);  // its batch is gone (a driver that went away): drop it
      continue;
    }
    v1::BuildRequest w;
    w.set_build_id(b.id);
    w.set_job_id(b.job_id);
    *w.mutable_task() = slot->second.batch->task;
    w.mutable_config()->set_index(b.config_index);
    w.set_timeout_ms(options_.build_timeout_ms);
    out.push_back(std::move(w));
  }
  if (!out.empty()) refresh_gauges_locked();
  return out;
}

bool Farm::report_artifact(uint64_t build_id, const std::string& worker, v1::Artifact artifact) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!builds_.complete(build_id, worker)) return false;
  const std::optional<ErrorKind> kind = from_wire(artifact.error());
  metrics_.observe_build(artifact.build_s(), kind.value_or(ErrorKind::kCompileError));
  if (auto it = build_slots_.find(build_id); it != build_slots_.end()) {
    it->second.batch->slots[it->second.index].artifact = std::move(artifact);
    it->second.batch->cv.notify_all();
    build_slots_.erase(it);
  }
  return true;
}

}  // namespace kiln::server
