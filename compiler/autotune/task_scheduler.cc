// The task scheduler's bookkeeping and its choice of the next step.
#include "compiler/autotune/task_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace kiln::autotune {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

double TaskScheduler::State::best() const { return best_after.empty() ? kInf : best_after.back(); }

double TaskScheduler::State::best_at(int n) const {
  return n <= 0 ? kInf : best_after[static_cast<size_t>(n - 1)];
}

TaskScheduler::TaskScheduler(std::vector<ScheduledTask> tasks, ScheduleOptions options)
    : tasks_(std::move(tasks)), options_(options), state_(tasks_.size()) {
  KILN_USER_CHECK(options_.budget >= 0)
      << "tune: the budget must be >= 0 measurements, got " << options_.budget;
  KILN_USER_CHECK(options_.trials >= 0)
      << "tune: the trials per task must be >= 0, got " << options_.trials;
  KILN_USER_CHECK(options_.by_gain || options_.trials > 0)
      << "tune: the fixed split needs trials per task > 0";
  KILN_USER_CHECK(options_.round > 0) << "tune: the round must be > 0, got " << options_.round;
  KILN_USER_CHECK(options_.patience >= 0)
      << "tune: the early stop's patience must be >= 0 trials, got " << options_.patience;
  for (const ScheduledTask& t : tasks_) {
    KILN_USER_CHECK(t.calls >= 1) << "tune: task " << t.key << " has " << t.calls << " calls";
    KILN_USER_CHECK(t.space >= 1) << "tune: task " << t.key << " has an empty config space";
  }
  for (size_t i = 0; i < tasks_.size(); ++i) first_order_.push_back(i);
  std::stable_sort(first_order_.begin(), first_order_.end(), [&](size_t a, size_t b) {
    return tasks_[a].calls * tasks_[a].flops > tasks_[b].calls * tasks_[b].flops;
  });
  // With a budget too small for a full round of every task, each gets an equal share (the first
  // `budget` tasks one trial, the default config, when it is smaller than the task count).
  first_ = options_.first_round > 0 ? options_.first_round : options_.round;
  if (options_.budget > 0 && !tasks_.empty()) {
    first_ = std::min(first_, std::max(1, options_.budget / static_cast<int>(tasks_.size())));
  }
}

void TaskScheduler::add(size_t task, const std::vector<double>& seconds) {
  State& s = state_.at(task);
  for (double t : seconds) {
    const double cost = std::isfinite(t) && t > 0 ? t : kInf;
    s.best_after.push_back(std::min(s.best(), cost));
    ++s.trials;
    ++measurements_;
  }
}

void TaskScheduler::exhausted(size_t task) { state_.at(task).exhausted = true; }

int TaskScheduler::cap(size_t i) const {
  const uint64_t space = tasks_[i].space;
  const int by_space = space > static_cast<uint64_t>(std::numeric_limits<int>::max())
                           ? std::numeric_limits<int>::max()
                           : static_cast<int>(space);
  return options_.trials > 0 ? std::min(options_.trials, by_space) : by_space;
}

int TaskScheduler::first_round(size_t i) const { return std::min(first_, cap(i)); }

bool TaskScheduler::stopped_improving(size_t i) const {
  const State& s = state_[i];
  const int k = options_.patience;
  if (!options_.by_gain || k == 0 || s.trials <= k || s.trials < first_round(i)) return false;
  // No gain above min_gain over the last k trials (also: no success at all in them).
  const double before = s.best_at(s.trials - k);
  return !std::isfinite(before) ? !std::isfinite(s.best())
                                : before <= s.best() * (1 + options_.min_gain);
}

std::string TaskScheduler::done_reason(size_t i) const {
  const State& s = state_.at(i);
  if (s.exhausted || static_cast<uint64_t>(s.trials) >= tasks_[i].space) return "space exhausted";
  if (s.trials >= cap(i)) return "trial cap";
  if (stopped_improving(i)) return "stopped improving";
  return "";
}

double TaskScheduler::predicted_s(size_t i) const {
  std::vector<double> group, all;  // throughputs (flops/s) of the measured tasks
  for (size_t j = 0; j < tasks_.size(); ++j) {
    const double b = state_[j].best();
    if (j == i || !std::isfinite(b) || tasks_[j].flops <= 0) continue;
    all.push_back(tasks_[j].flops / b);
    if (tasks_[j].group == tasks_[i].group) group.push_back(all.back());
  }
  const std::vector<double>& like = group.empty() ? all : group;
  if (like.empty() || tasks_[i].flops <= 0) return 0;
  return tasks_[i].flops / median(like);
}

double TaskScheduler::estimated_latency_s() const {
  double sum = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const double b = state_[i].best();
    sum += tasks_[i].calls * (std::isfinite(b) ? b : predicted_s(i));
  }
  return sum;
}

int TaskScheduler::predicted() const {
  int n = 0;
  for (const State& s : state_) n += std::isfinite(s.best()) ? 0 : 1;
  return n;
}

double TaskScheduler::gain(size_t i) const {
  const State& s = state_[i];
  double b = s.best();
  if (!std::isfinite(b)) b = predicted_s(i);  // nothing ran yet: what similar tasks suggest
  if (b <= 0) return 0;
  // The recent slope: how much the best fell per trial over the last round.
  const int window = std::min(options_.round, s.trials - 1);
  double slope = 0;
  if (window > 0 && std::isfinite(s.best_at(s.trials - window))) {
    slope = (s.best_at(s.trials - window) - b) / window;
  }
  // The optimistic guess: a best that keeps falling like 1/trials, or, far behind the fastest
  // similar task, the gap to 1/beta of that task's throughput.
  double fastest = 0;  // flops/s in the task's group
  for (size_t j = 0; j < tasks_.size(); ++j) {
    const double bj = state_[j].best();
    if (tasks_[j].group == tasks_[i].group && std::isfinite(bj) && tasks_[j].flops > 0) {
      fastest = std::max(fastest, tasks_[j].flops / bj);
    }
  }
  double optimistic = b / std::max(1, s.trials);
  if (fastest > 0 && tasks_[i].flops > 0) {
    optimistic = std::max(optimistic, b - options_.beta * tasks_[i].flops / fastest);
  }
  return tasks_[i].calls * (options_.alpha * slope + (1 - options_.alpha) * optimistic);
}

std::optional<ScheduleStep> TaskScheduler::next() {
  const int left =
      options_.budget > 0 ? options_.budget - measurements_ : std::numeric_limits<int>::max();
  if (left <= 0) return std::nullopt;
  if (!options_.by_gain) {
    for (size_t i = 0; i < tasks_.size(); ++i) {
      const int trials = state_[i].trials;
      if (done_reason(i).empty()) return ScheduleStep{i, trials + std::min(cap(i) - trials, left)};
    }
    return std::nullopt;
  }
  // Every task's first round, the heaviest tasks first.
  for (size_t i : first_order_) {
    const int trials = state_[i].trials;
    if (trials < first_round(i) && done_reason(i).empty()) {
      return ScheduleStep{i, trials + std::min(first_round(i) - trials, left)};
    }
  }
  std::optional<size_t> pick;
  double pick_gain = -1;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    if (!done_reason(i).empty()) continue;
    const double g = gain(i);
    if (g > pick_gain) pick = i, pick_gain = g;
  }
  if (!pick) return std::nullopt;
  const int trials = state_[*pick].trials;
  return ScheduleStep{*pick, trials + std::min({options_.round, cap(*pick) - trials, left})};
}

}  // namespace kiln::autotune
