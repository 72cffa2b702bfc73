// The task scheduler on fake timings (no task is lowered, built or run): a task that stops
// improving gets no more trials, the budget is spent exactly, a task with more weight (calls or
// time) gets more, no task gets more than its space or cap, a run resumed from its measurements
// spends exactly the rest, the fixed split of --trials, and the model's estimated latency.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "compiler/autotune/task_scheduler.h"
#include "tests/common/expect_error.h"

namespace kiln::autotune {
namespace {

/// The time of task `task`'s measurement number `n` (from 0).
using Timing = std::function<double(size_t task, int n)>;

/// Runs `s` to its end (or for `max_steps` steps), measuring with `time`; the steps taken.
std::vector<ScheduleStep> run(TaskScheduler& s, const Timing& time, int max_steps = -1) {
  std::vector<ScheduleStep> steps;
  while (max_steps < 0 || static_cast<int>(steps.size()) < max_steps) {
    const std::optional<ScheduleStep> step = s.next();
    if (!step) break;
    EXPECT_GT(step->trials, s.trials(step->task)) << "a step that asks for nothing";
    EXPECT_LE(static_cast<uint64_t>(step->trials), s.task(step->task).space);
    if (s.options().by_gain) {
      EXPECT_LE(step->trials - s.trials(step->task), s.options().round);
    }
    std::vector<double> seconds;
    for (int n = s.trials(step->task); n < step->trials; ++n) {
      seconds.push_back(time(step->task, n));
    }
    s.add(step->task, seconds);
    steps.push_back(*step);
  }
  return steps;
}

ScheduledTask task(const std::string& key, int calls = 1, double flops = 1e9, uint64_t space = 1000,
                   const std::string& group = "conv") {
  return {key, group, flops, calls, space};
}

/// Keeps improving: 2% per trial (more than min_gain over any window).
double improving(int n) { return 1e-3 * std::pow(0.98, n); }

TEST(TaskScheduler, ATaskThatStopsImprovingGetsNoMoreTrials) {
  ScheduleOptions o;
  o.budget = 400;
  o.round = 16;
  o.patience = 32;
  TaskScheduler s({task("flat"), task("climbing")}, o);
  // "flat" finds nothing better than its first config; "climbing" gains 2% per trial.
  const std::vector<ScheduleStep> steps =
      run(s, [](size_t t, int n) { return t == 0 ? 1e-3 : improving(n); });
  EXPECT_EQ(s.done_reason(0), "stopped improving");
  EXPECT_EQ(s.done_reason(1), "");
  // Its first round, then at most `patience` more trials before the rule sees it.
  EXPECT_GE(s.trials(0), 16);
  EXPECT_LE(s.trials(0), 16 + 32);
  EXPECT_EQ(s.trials(0) + s.trials(1), 400);
  // Once stopped, never picked again.
  int flat = 0;
  for (const ScheduleStep& step : steps) {
    if (step.task == 0) flat = step.trials;
  }
  EXPECT_EQ(flat, s.trials(0));

  // A task whose measurements all fail stops the same way.
  TaskScheduler f({task("failing"), task("climbing")}, o);
  run(f, [](size_t t, int n) {
    return t == 0 ? std::numeric_limits<double>::infinity() : improving(n);
  });
  EXPECT_EQ(f.done_reason(0), "stopped improving");
  EXPECT_LE(f.trials(0), 16 + 32);
  EXPECT_EQ(f.measurements(), 400);

  // patience 0: no early stop, the flat task keeps getting rounds.
  o.patience = 0;
  TaskScheduler never({task("flat"), task("climbing")}, o);
  run(never, [](size_t t, int n) { return t == 0 ? 1e-3 : improving(n); });
  EXPECT_EQ(never.done_reason(0), "");
  EXPECT_GT(never.trials(0), 16 + 32);
}

TEST(TaskScheduler, TheBudgetIsSpentExactly) {
  for (int budget : {1, 3, 5, 17, 80, 123, 500}) {
    ScheduleOptions o;
    o.budget = budget;
    o.round = 16;
    std::vector<ScheduledTask> tasks;
    for (int i = 0; i < 5; ++i) tasks.push_back(task("t" + std::to_string(i), 1, 1e9 * (i + 1)));
    TaskScheduler s(tasks, o);
    run(s, [](size_t, int n) { return improving(n); });
    int total = 0;
    for (size_t i = 0; i < tasks.size(); ++i) total += s.trials(i);
    EXPECT_EQ(total, budget) << "budget " << budget;
    EXPECT_EQ(s.measurements(), budget);
    EXPECT_FALSE(s.next().has_value());
    if (budget < 5) {
      // Fewer measurements than tasks: one each (the default config) for the heaviest tasks.
      for (size_t i = 0; i < tasks.size(); ++i) {
        EXPECT_EQ(s.trials(i), i >= tasks.size() - static_cast<size_t>(budget) ? 1 : 0)
            << "budget " << budget << ", task " << i;
      }
    } else {
      // Every task has its first round, of an equal share where the budget is small.
      for (size_t i = 0; i < tasks.size(); ++i) {
        EXPECT_GE(s.trials(i), std::min(16, budget / 5)) << "budget " << budget << " task " << i;
      }
    }
  }
}

TEST(TaskScheduler, AShorterFirstRoundThenFullRounds) {
  // With a pre-trained model choosing it, each task's first round is first_round trials; the
  // rounds after it are whole again.
  ScheduleOptions o;
  o.budget = 100;
  o.round = 16;
  o.first_round = 4;
  std::vector<ScheduledTask> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back(task("t" + std::to_string(i), 1, 1e9 * (i + 1)));
  TaskScheduler s(tasks, o);
  const std::vector<ScheduleStep> steps = run(s, [](size_t, int n) { return improving(n); });
  ASSERT_GE(steps.size(), 4u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(steps[k].trials, 4) << "first round of task " << k;
  EXPECT_EQ(steps[3].trials - 4, 16);  // a whole round
  EXPECT_EQ(s.measurements(), 100);
}

TEST(TaskScheduler, ATaskWithMoreWeightGetsMore) {
  ScheduleOptions o;
  o.budget = 480;
  o.round = 16;
  // The same curves, flattening as tuning curves do; "called4" runs four times per inference,
  // "slow" takes four times as long (and has four times the flops: the same throughput).
  TaskScheduler s({task("called1"), task("called4", 4), task("slow", 1, 4e9)}, o);
  run(s, [](size_t t, int n) { return (t == 2 ? 4 : 1) * 1e-3 * (0.3 + 0.7 / (1 + n / 10.0)); });
  EXPECT_GT(s.trials(1), s.trials(0) + 32);
  EXPECT_GT(s.trials(2), s.trials(0) + 32);
  EXPECT_EQ(s.trials(0) + s.trials(1) + s.trials(2), 480);
}

TEST(TaskScheduler, NoTaskGetsMoreThanItsSpaceOrCap) {
  ScheduleOptions o;
  o.budget = 500;
  o.round = 16;
  o.trials = 50;
  TaskScheduler s({task("small", 1, 1e9, 10), task("medium", 1, 1e9, 40), task("large")}, o);
  run(s, [](size_t, int n) { return improving(n); });
  EXPECT_EQ(s.trials(0), 10);
  EXPECT_EQ(s.done_reason(0), "space exhausted");
  EXPECT_EQ(s.trials(1), 40);
  EXPECT_EQ(s.done_reason(1), "space exhausted");
  EXPECT_EQ(s.trials(2), 50);
  EXPECT_EQ(s.done_reason(2), "trial cap");
  EXPECT_EQ(s.measurements(), 100);  // the budget was more than the tasks can take

  // A task whose explorer runs out before its space's size (configs that do not exist in it).
  o.trials = 0;
  TaskScheduler e({task("a", 1, 1e9, 100), task("b")}, o);
  auto step = e.next();
  ASSERT_TRUE(step.has_value());
  e.add(step->task, std::vector<double>(5, 1e-3));
  e.exhausted(step->task);
  EXPECT_EQ(e.done_reason(step->task), "space exhausted");
  const std::vector<ScheduleStep> rest = run(e, [](size_t, int n) { return improving(n); });
  for (const ScheduleStep& st : rest) EXPECT_NE(st.task, step->task);
}

TEST(TaskScheduler, AResumedRunSpendsExactlyTheRest) {
  ScheduleOptions o;
  o.budget = 300;
  o.round = 16;
  const std::vector<ScheduledTask> tasks = {task("a"), task("b", 3), task("c", 1, 2e9),
                                            task("d", 1, 1e9, 1000, "dense")};
  auto time = [](size_t t, int n) {
    return (1 + static_cast<double>(t)) * (t == 3 ? 1e-3 : improving(n));
  };
  TaskScheduler whole(tasks, o);
  run(whole, time);

  // Killed after some steps, then started again from what the log holds.
  TaskScheduler killed(tasks, o);
  run(killed, time, 7);
  std::vector<int> before(tasks.size());
  TaskScheduler resumed(tasks, o);
  for (size_t i = 0; i < tasks.size(); ++i) {
    before[i] = killed.trials(i);
    std::vector<double> seconds;
    for (int n = 0; n < before[i]; ++n) seconds.push_back(time(i, n));
    resumed.add(i, seconds);
  }
  EXPECT_EQ(resumed.measurements(), killed.measurements());
  run(resumed, time);
  for (size_t i = 0; i < tasks.size(); ++i) {
    // Killed at a step's end, the resumed run decides as the whole run did.
    EXPECT_EQ(resumed.trials(i), whole.trials(i)) << "task " << i;
    EXPECT_GE(resumed.trials(i), before[i]);
  }
  EXPECT_EQ(resumed.measurements(), 300);

  // Killed within a step (5 measurements of a round landed): the rest of the budget, exactly.
  TaskScheduler partial(tasks, o);
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::vector<double> seconds;
    for (int n = 0; n < before[i] + (i == 1 ? 5 : 0); ++n) seconds.push_back(time(i, n));
    partial.add(i, seconds);
  }
  run(partial, time);
  EXPECT_EQ(partial.measurements(), 300);

  // A log already past the budget: nothing more.
  TaskScheduler spent(tasks, o);
  spent.add(0, std::vector<double>(301, 1e-3));
  EXPECT_FALSE(spent.next().has_value());
}

TEST(TaskScheduler, WithoutGainsTheFixedSplitTunesEachTaskToItsTrialsInTurn) {
  ScheduleOptions o;
  o.by_gain = false;
  o.trials = 20;
  o.round = 16;
  TaskScheduler s({task("a"), task("b", 5, 1e9, 12), task("c")}, o);
  s.add(2, std::vector<double>(7, 1e-3));  // resumed: c has 7 already
  const std::vector<ScheduleStep> steps = run(s, [](size_t, int) { return 1e-3; });  // flat
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].task, 0u);
  EXPECT_EQ(steps[0].trials, 20);
  EXPECT_EQ(steps[1].task, 1u);
  EXPECT_EQ(steps[1].trials, 12);  // its space
  EXPECT_EQ(steps[2].task, 2u);
  EXPECT_EQ(steps[2].trials, 20);
  EXPECT_EQ(s.done_reason(0), "trial cap");
}

TEST(TaskScheduler, TheEstimatedLatencyIsEveryTasksBestTimesItsCalls) {
  ScheduleOptions o;
  o.budget = 1000;
  TaskScheduler s({task("a", 2), task("b"), task("c", 1, 3e9), task("d", 1, 2e9, 100, "pool")}, o);
  EXPECT_EQ(s.estimated_latency_s(), 0);  // nothing measured, nothing to predict from
  EXPECT_EQ(s.predicted(), 4);
  s.add(0, {3e-3, 1e-3, std::numeric_limits<double>::infinity()});  // 1e12 flops/s
  s.add(1, {2e-3});                                                 // 5e11 flops/s
  // c and d predicted at the median throughput of c's group (7.5e11), and of all for d.
  EXPECT_EQ(s.predicted(), 2);
  EXPECT_DOUBLE_EQ(s.estimated_latency_s(), 2 * 1e-3 + 2e-3 + 3e9 / 7.5e11 + 2e9 / 7.5e11);
  s.add(2, {1e-3});
  s.add(3, {5e-3});
  EXPECT_EQ(s.predicted(), 0);
  EXPECT_DOUBLE_EQ(s.estimated_latency_s(), 2 * 1e-3 + 2e-3 + 1e-3 + 5e-3);

  // It only falls once every task has a measurement.
  double last = s.estimated_latency_s();
  for (int k = 0; k < 20; ++k) {
    run(
        s, [](size_t t, int n) { return (1 + static_cast<double>(t)) * improving(n); }, 1);
    EXPECT_LE(s.estimated_latency_s(), last);
    last = s.estimated_latency_s();
  }
}

TEST(TaskScheduler, BadOptionsAreRefused) {
  ScheduleOptions o;
  o.budget = -1;
  EXPECT_ERROR_CONTAINS(TaskScheduler({task("a")}, o), "budget must be >= 0");
  o = {};
  o.round = 0;
  EXPECT_ERROR_CONTAINS(TaskScheduler({task("a")}, o), "round must be > 0");
  o = {};
  EXPECT_ERROR_CONTAINS(TaskScheduler({task("a", 0)}, o), "task a has 0 calls");
  EXPECT_ERROR_CONTAINS(TaskScheduler({task("a", 1, 1e9, 0)}, o), "empty config space");
  o.by_gain = false;
  EXPECT_ERROR_CONTAINS(TaskScheduler({task("a")}, o), "fixed split needs trials");
}

}  // namespace
}  // namespace kiln::autotune
