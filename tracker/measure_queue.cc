#include "tracker/measure_queue.h"

#include <algorithm>

#include "base/error.h"

namespace kiln::tracker {

MeasureQueue::MeasureQueue(const Clock& clock, QueueOptions options)
    : clock_(clock), options_(options) {
  KILN_USER_CHECK(options_.max_attempts >= 1)
      << "measure queue: max_attempts must be at least 1, not " << options_.max_attempts;
}

void MeasureQueue::set_priority(JobId job, int priority) { jobs_[job].priority = priority; }

void MeasureQueue::push(MeasureRequest& r, bool front) {
  r.enqueued_at = clock_.now();
  r.device = 0;
  auto& q = by_key_[r.device_key][r.job_id];
  if (front) {
    q.push_front(r.id);
  } else {
    q.push_back(r.id);
  }
  ++jobs_[r.job_id].pending;
  ++pending_;
}

RequestId MeasureQueue::enqueue(MeasureSpec spec) {
  KILN_USER_CHECK(spec.job_id != 0)
      << "measure request of task '" << spec.task_key << "': job id 0 is not a job";
  KILN_USER_CHECK(!spec.device_key.empty())
      << "measure request of job " << spec.job_id << ", task '" << spec.task_key
      << "': the device key is empty";
  MeasureRequest r;
  static_cast<MeasureSpec&>(r) = std::move(spec);
  r.id = next_id_++;
  auto [it, inserted] = requests_.emplace(r.id, std::move(r));
  push(it->second, /*front=*/false);
  return it->first;
}

std::optional<MeasureRequest> MeasureQueue::next_for(DeviceId device,
                                                     const std::string& device_key) {
  auto kit = by_key_.find(device_key);
  if (kit == by_key_.end()) return std::nullopt;
  JobQueues& queues = kit->second;
  // The highest priority, then the least recently served, then the lowest job id.
  JobQueues::iterator best = queues.end();
  const JobInfo* best_info = nullptr;
  for (auto it = queues.begin(); it != queues.end(); ++it) {
    const JobInfo& info = jobs_.at(it->first);
    if (!best_info || info.priority > best_info->priority ||
        (info.priority == best_info->priority && info.last_served < best_info->last_served)) {
      best = it;
      best_info = &info;
    }
  }
  if (best == queues.end()) return std::nullopt;
  RequestId id = best->second.front();
  best->second.pop_front();
  JobInfo& info = jobs_.at(best->first);
  info.last_served = ++serve_counter_;
  ++info.dispatched;
  --info.pending;
  --pending_;
  if (best->second.empty()) queues.erase(best);
  if (queues.empty()) by_key_.erase(kit);

  MeasureRequest& r = requests_.at(id);
  r.dispatched_at = clock_.now();
  r.queued += r.dispatched_at - r.enqueued_at;
  r.device = device;
  in_flight_[device].insert(id);
  return r;
}

std::optional<Completion> MeasureQueue::complete(RequestId id, DeviceId device) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second.device != device || device == 0) return std::nullopt;
  auto fit = in_flight_.find(device);
  if (fit != in_flight_.end()) {
    fit->second.erase(id);
    if (fit->second.empty()) in_flight_.erase(fit);
  }
  Completion c;
  c.request = std::move(it->second);
  c.queued = c.request.queued;
  c.run = clock_.now() - c.request.dispatched_at;
  requests_.erase(it);
  return c;
}

std::vector<GiveUp> MeasureQueue::requeue(const std::vector<RequestId>& ids,
                                          const std::string& reason) {
  std::vector<GiveUp> given_up;
  for (RequestId id : ids) {
    auto it = requests_.find(id);
    if (it == requests_.end() || it->second.device == 0) continue;  // unknown or pending
    MeasureRequest& r = it->second;
    auto fit = in_flight_.find(r.device);
    if (fit != in_flight_.end()) {
      fit->second.erase(id);
      if (fit->second.empty()) in_flight_.erase(fit);
    }
    ++r.attempts;
    if (r.attempts >= options_.max_attempts) {
      r.device = 0;
      given_up.push_back(
          {std::move(r), GiveUpKind::kDeviceLost,
           reason + " on each of " + std::to_string(options_.max_attempts) + " attempts"});
      requests_.erase(it);
      continue;
    }
    push(r, /*front=*/true);
  }
  return given_up;
}

void MeasureQueue::remove_pending(const std::vector<RequestId>& ids) {
  std::unordered_set<RequestId> drop(ids.begin(), ids.end());
  for (auto kit = by_key_.begin(); kit != by_key_.end();) {
    for (auto jit = kit->second.begin(); jit != kit->second.end();) {
      auto& q = jit->second;
      size_t before = q.size();
      q.erase(std::remove_if(q.begin(), q.end(), [&](RequestId r) { return drop.count(r) > 0; }),
              q.end());
      size_t removed = before - q.size();
      jobs_[jit->first].pending -= removed;
      pending_ -= removed;
      jit = q.empty() ? kit->second.erase(jit) : std::next(jit);
    }
    kit = kit->second.empty() ? by_key_.erase(kit) : std::next(kit);
  }
  for (RequestId id : ids) requests_.erase(id);
}

std::vector<GiveUp> MeasureQueue::expire_queued(Duration max_wait) {
  TimePoint now = clock_.now();
  std::vector<GiveUp> out;
  std::vector<RequestId> ids;
  for (const auto& [id, r] : requests_) {
    if (r.device != 0) continue;
    Duration waited = r.queued + (now - r.enqueued_at);
    if (waited > max_wait) {
      ids.push_back(id);
      GiveUp g{r, GiveUpKind::kQueueTimeout,
               "waited " + std::to_string(to_ms(waited)) +
                   " ms in the queue for a device of key '" + r.device_key + "' (limit " +
                   std::to_string(to_ms(max_wait)) + " ms)"};
      g.request.queued = waited;
      out.push_back(std::move(g));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const GiveUp& a, const GiveUp& b) { return a.request.id < b.request.id; });
  remove_pending(ids);
  return out;
}

size_t MeasureQueue::in_flight(JobId job) const {
  size_t n = 0;
  for (const auto& [id, r] : requests_) n += r.job_id == job && r.device != 0;
  return n;
}

size_t MeasureQueue::cancel_job(JobId job) {
  std::vector<RequestId> ids;
  for (const auto& [id, r] : requests_) {
    if (r.job_id == job && r.device == 0) ids.push_back(id);
  }
  remove_pending(ids);
  return ids.size();
}

const MeasureRequest* MeasureQueue::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : &it->second;
}

size_t MeasureQueue::pending(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.pending;
}

size_t MeasureQueue::pending_for_key(const std::string& device_key) const {
  auto it = by_key_.find(device_key);
  if (it == by_key_.end()) return 0;
  size_t n = 0;
  for (const auto& [job, q] : it->second) n += q.size();
  return n;
}

std::vector<RequestId> MeasureQueue::in_flight_on(DeviceId device) const {
  auto it = in_flight_.find(device);
  if (it == in_flight_.end()) return {};
  std::vector<RequestId> out(it->second.begin(), it->second.end());
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t MeasureQueue::dispatched(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.dispatched;
}

}  // namespace kiln::tracker
