#include "tracker/build_queue.h"

#include <algorithm>

#include "base/error.h"

namespace kiln::tracker {

BuildQueue::BuildQueue(const Clock& clock, BuildQueueOptions options)
    : clock_(clock), options_(options) {
  KILN_USER_CHECK(options_.max_attempts >= 1)
      << "build queue: max_attempts must be at least 1, not " << options_.max_attempts;
  KILN_USER_CHECK(options_.build_timeout.count() > 0)
      << "build queue: the build timeout must be positive";
}

void BuildQueue::push(BuildRequest& b, bool front) {
  b.enqueued_at = clock_.now();
  b.worker.clear();
  auto& q = jobs_[b.job_id].ids;
  if (front) {
    q.push_front(b.id);
  } else {
    q.push_back(b.id);
  }
  ++pending_;
}

BuildId BuildQueue::enqueue(BuildSpec spec) {
  KILN_USER_CHECK(spec.job_id != 0)
      << "build of task '" << spec.task_key << "': job id 0 is not a job";
  KILN_USER_CHECK(!spec.task_key.empty())
      << "build for job " << spec.job_id << ": the task key is empty";
  KILN_USER_CHECK(!spec.target.empty()) << "build of task '" << spec.task_key << "' for job "
                                        << spec.job_id << ": the target is empty";
  BuildRequest b;
  static_cast<BuildSpec&>(b) = std::move(spec);
  b.id = next_id_++;
  auto [it, inserted] = builds_.emplace(b.id, std::move(b));
  push(it->second, /*front=*/false);
  return it->first;
}

std::vector<BuildRequest> BuildQueue::take_batch(const std::string& worker, size_t max,
                                                 const std::vector<std::string>& targets) {
  KILN_USER_CHECK(!worker.empty()) << "take builds: the worker name is empty";
  std::vector<BuildRequest> out;
  auto wanted = [&](const BuildRequest& b) {
    return targets.empty() || std::find(targets.begin(), targets.end(), b.target) != targets.end();
  };
  TimePoint now = clock_.now();
  while (out.size() < max) {
    // Jobs that have a build this worker can take, least recently served first.
    std::vector<std::pair<uint64_t, JobId>> order;
    for (const auto& [job, q] : jobs_) {
      if (!q.ids.empty()) order.emplace_back(q.last_served, job);
    }
    std::sort(order.begin(), order.end());
    bool took = false;
    for (const auto& [served, job] : order) {
      if (out.size() >= max) break;
      JobQueue& q = jobs_.at(job);
      auto it = std::find_if(q.ids.begin(), q.ids.end(),
                             [&](BuildId id) { return wanted(builds_.at(id)); });
      if (it == q.ids.end()) continue;
      BuildRequest& b = builds_.at(*it);
      q.ids.erase(it);
      --pending_;
      q.last_served = ++serve_counter_;
      b.handed_at = now;
      b.worker = worker;
      out.push_back(b);
      took = true;
    }
    if (!took) break;
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = it->second.ids.empty() ? jobs_.erase(it) : std::next(it);
  }
  return out;
}

std::optional<BuildRequest> BuildQueue::complete(BuildId id, const std::string& worker) {
  auto it = builds_.find(id);
  if (it == builds_.end() || it->second.worker.empty() || it->second.worker != worker) {
    return std::nullopt;
  }
  BuildRequest b = std::move(it->second);
  builds_.erase(it);
  return b;
}

std::vector<BuildRequest> BuildQueue::expire() {
  TimePoint now = clock_.now();
  std::vector<BuildId> late;
  for (const auto& [id, b] : builds_) {
    if (!b.worker.empty() && now - b.handed_at > options_.build_timeout) late.push_back(id);
  }
  std::sort(late.begin(), late.end());
  std::vector<BuildRequest> given_up;
  // Re-queue in reverse so the oldest ends up first at the front of its job's queue.
  for (auto rit = late.rbegin(); rit != late.rend(); ++rit) {
    BuildRequest& b = builds_.at(*rit);
    ++b.attempts;
    if (b.attempts >= options_.max_attempts) {
      given_up.push_back(std::move(b));
      builds_.erase(*rit);
    } else {
      auto it = jobs_.find(b.job_id);
      uint64_t served = it == jobs_.end() ? 0 : it->second.last_served;
      push(b, /*front=*/true);
      jobs_[b.job_id].last_served = served;
    }
  }
  std::reverse(given_up.begin(), given_up.end());
  return given_up;
}

size_t BuildQueue::cancel_job(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  size_t n = it->second.ids.size();
  for (BuildId id : it->second.ids) builds_.erase(id);
  pending_ -= n;
  jobs_.erase(it);
  return n;
}

}  // namespace kiln::tracker
