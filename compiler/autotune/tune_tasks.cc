// The scheduled tuning loop: the log's records into the scheduler, then step after step.
#include "compiler/autotune/tune_tasks.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "base/error.h"

namespace kiln::autotune {
namespace {

/// Each record's time from index `from` on, as the scheduler takes them (a failure: infinity).
std::vector<double> seconds_of(const std::vector<records::MeasureRecord>& records, size_t from) {
  std::vector<double> seconds;
  for (size_t k = from; k < records.size(); ++k) {
    const records::MeasureRecord& r = records[k];
    seconds.push_back(r.error == ErrorKind::kNone && !r.costs_s.empty()
                          ? r.cost()
                          : std::numeric_limits<double>::infinity());
  }
  return seconds;
}

using Clock = std::chrono::steady_clock;

/// `step`'s result added to `sum`, the task's results of earlier steps.
void accumulate(TaskResult& sum, const TaskResult& step) {
  sum.task_key = step.task_key;
  sum.trials = step.trials;
  sum.measured_now += step.measured_now;
  sum.reused += step.reused;
  if (step.has_best) {
    sum.has_best = true;
    sum.best_gflops = step.best_gflops;
    sum.best_config = step.best_config;
  }
  for (const auto& [kind, n] : step.errors) sum.errors[kind] += n;
  sum.contended += step.contended;
  sum.curve.insert(sum.curve.end(), step.curve.begin(), step.curve.end());
}

}  // namespace

TasksTuneReport tune_tasks(const std::vector<Task>& tasks, const std::vector<int>& calls,
                           records::RecordStore& log, const TasksTuneOptions& options,
                           Measurer* measurer) {
  KILN_USER_CHECK(calls.size() == tasks.size())
      << "tune: " << calls.size() << " call counts for " << tasks.size() << " tasks";
  KILN_USER_CHECK(options.time_s >= 0)
      << "tune: the time limit must be >= 0 seconds, got " << options.time_s;
  const auto t0 = Clock::now();
  const bool by_gain = options.budget > 0 || options.time_s > 0;
  ScheduleOptions so;
  so.budget = options.budget;
  so.by_gain = by_gain;
  so.trials = by_gain ? options.max_trials : options.tune.trials;
  so.round = options.tune.batch;
  so.first_round = options.first_round > 0 ? options.first_round
                   : options.tune.prior    ? std::max(1, options.tune.batch / 4)
                                           : 0;
  so.patience = options.patience;
  so.min_gain = options.min_gain;
  std::vector<ScheduledTask> st;
  for (size_t i = 0; i < tasks.size(); ++i) {
    st.push_back(
        {tasks[i].key, tasks[i].template_name, tasks[i].flops, calls[i], tasks[i].space.size()});
  }
  TaskScheduler scheduler(std::move(st), so);

  // What earlier runs measured counts: against the budget, and in every task's history.
  for (size_t i = 0; i < tasks.size(); ++i) {
    scheduler.add(i, seconds_of(log.records(tasks[i].key, tasks[i].target), 0));
  }
  const int measured_before = scheduler.measurements();
  auto status = [&] {
    ScheduleStatus s;
    s.estimated_latency_s = scheduler.estimated_latency_s();
    s.predicted = scheduler.predicted();
    s.measurements = scheduler.measurements();
    s.measured_now = s.measurements - measured_before;
    s.budget = options.budget;
    s.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return s;
  };

  TasksTuneReport report;
  report.results.resize(tasks.size());
  report.why.resize(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) report.results[i].task_key = tasks[i].key;
  std::vector<bool> reported(tasks.size(), false);
  auto task_done = [&](size_t i, const std::string& why) {
    report.why[i] = why;
    reported[i] = true;
    if (options.on_task_done) options.on_task_done(i, tasks[i], report.results[i], why, status());
  };

  // Every task is every other's history: the cost model learns from all measured so far.
  std::vector<const Task*> history;
  for (const Task& t : tasks) history.push_back(&t);
  Tuner tuner(log, options.tune, measurer);  // one for all steps: it keeps the features
  report.ended = "every task done";
  while (true) {
    if (options.time_s > 0 &&
        std::chrono::duration<double>(Clock::now() - t0).count() >= options.time_s) {
      report.ended = "time limit";
      break;
    }
    const std::optional<ScheduleStep> step = scheduler.next();
    if (!step) {
      if (options.budget > 0 && scheduler.measurements() >= options.budget) {
        report.ended = "budget spent";
      }
      break;
    }
    const size_t i = step->task;
    tuner.set_progress([&](const TuneProgress& p) {
      scheduler.add(i, p.costs_s);
      if (options.on_progress) options.on_progress(i, tasks[i], p, status());
    });
    if (options.on_step) options.on_step(i, tasks[i]);
    const TaskResult r = tuner.tune(tasks[i], history, step->trials);
    accumulate(report.results[i], r);
    // The explorer ran out of configs: the space (less its configs the log's records name
    // outside it, which count as trials) is spent.
    if (r.trials < step->trials) scheduler.exhausted(i);
    // A shared log (a farm's) may also hold what another job measured of the same task meanwhile:
    // those records count too, in the order the log keeps them.
    if (scheduler.trials(i) < r.trials) {
      scheduler.add(i, seconds_of(log.records(tasks[i].key, tasks[i].target),
                                  static_cast<size_t>(scheduler.trials(i))));
    }
    KILN_ICHECK(scheduler.trials(i) == r.trials)
        << "task " << tasks[i].key << ": the scheduler counts " << scheduler.trials(i)
        << " trials, the log " << r.trials;
    if (const std::string why = scheduler.done_reason(i); !why.empty()) task_done(i, why);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (reported[i]) continue;
    report.results[i].trials = scheduler.trials(i);
    if (auto best = log.best(tasks[i].key, tasks[i].target)) {
      report.results[i].has_best = true;
      report.results[i].best_gflops = best->gflops;
      report.results[i].best_config = best->config_index;
    }
    const std::string why = scheduler.done_reason(i);
    task_done(i, !why.empty() ? why : report.ended);
  }
  report.status = status();
  return report;
}

}  // namespace kiln::autotune
