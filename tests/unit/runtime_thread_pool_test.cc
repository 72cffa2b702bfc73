// Tests for the runtime's thread pool: every task runs once, nested launches run inline, errors
// and exceptions come back, resizing, launches from many threads, and a rough latency figure.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/c_abi.h"
#include "deploy/runtime/thread_pool.h"

namespace kiln::runtime {
namespace {

/// Restores the pool size a test changed.
class ThreadPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = num_threads(); }
  void TearDown() override { set_num_threads(saved_); }

 private:
  int saved_ = 1;
};

struct Counts {
  std::vector<std::atomic<int>> hits;
  std::atomic<int> seen_num_tasks{-1};
  explicit Counts(int n) : hits(static_cast<size_t>(n)) {}
};

int32_t count_body(int32_t task_id, int32_t num_tasks, void* closure) {
  auto* c = static_cast<Counts*>(closure);
  c->hits[static_cast<size_t>(task_id)].fetch_add(1);
  c->seen_num_tasks.store(num_tasks);
  return 0;
}

TEST_F(ThreadPoolTest, DefaultSizeIsPositive) {
  EXPECT_GE(num_threads(), 1);
  EXPECT_GE(default_num_threads(), 1);
}

TEST_F(ThreadPoolTest, EveryTaskRunsOnceThroughTheCApi) {
  for (int n : {1, 2, 3, 4, 8}) {
    set_num_threads(n);
    ASSERT_EQ(num_threads(), n);
    Counts c(n);
    ASSERT_EQ(kiln_parallel_launch(count_body, &c), 0);
    EXPECT_EQ(c.seen_num_tasks.load(), n);
    for (auto& h : c.hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST_F(ThreadPoolTest, TaskZeroRunsOnTheCallerAndLongTasksOnWorkers) {
  set_num_threads(4);
  std::vector<std::thread::id> ids(4);
  ASSERT_EQ(parallel_launch([&](int32_t id, int32_t) {
              ids[static_cast<size_t>(id)] = std::this_thread::get_id();
              // Long tasks: each worker claims one before any is done, and the caller is busy.
              std::this_thread::sleep_for(std::chrono::milliseconds(20));
              return 0;
            }),
            0);
  EXPECT_EQ(ids[0], std::this_thread::get_id());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
}

// A task no worker has claimed when the caller is done with task 0 runs on the caller: a worker
// that is asleep (or that the OS has not scheduled) does not hold the launch up. Workers fall
// asleep after 50 us idle; over many launches from idle, the caller takes task 1 at least once
// (the old pool, a task per thread, never ran it there).
TEST_F(ThreadPoolTest, TheCallerRunsTasksNoWorkerHasTaken) {
  set_num_threads(2);
  int on_caller = 0;
  for (int i = 0; i < 100 && on_caller == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the worker falls asleep
    std::thread::id ran_task1;
    ASSERT_EQ(parallel_launch([&](int32_t id, int32_t) {
                if (id == 1) ran_task1 = std::this_thread::get_id();
                return 0;
              }),
              0);
    on_caller += ran_task1 == std::this_thread::get_id();
  }
  EXPECT_GT(on_caller, 0);
}

TEST_F(ThreadPoolTest, ReturnsTheFirstErrorByTaskId) {
  set_num_threads(4);
  EXPECT_EQ(parallel_launch([](int32_t id, int32_t) { return id >= 2 ? 10 + id : 0; }), 12);
  EXPECT_EQ(parallel_launch([](int32_t id, int32_t) { return id == 0 ? 3 : 9; }), 3);
  // The pool is clean for the next launch.
  EXPECT_EQ(parallel_launch([](int32_t, int32_t) { return 0; }), 0);
}

TEST_F(ThreadPoolTest, ExceptionsAreRethrownAfterAllTasksFinish) {
  set_num_threads(3);
  std::atomic<int> finished{0};
  EXPECT_THROW(parallel_launch([&](int32_t id, int32_t) -> int32_t {
                 if (id == 1) throw std::runtime_error("task 1");
                 std::this_thread::sleep_for(std::chrono::milliseconds(5));
                 finished.fetch_add(1);
                 return 0;
               }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);
  EXPECT_EQ(parallel_launch([](int32_t, int32_t) { return 0; }), 0);
}

TEST_F(ThreadPoolTest, NestedLaunchRunsInlineAsOneTask) {
  set_num_threads(4);
  std::vector<std::thread::id> outer(4);
  std::vector<int> inner_tasks(4, -1);
  std::vector<int> inner_same_thread(4, 0);  // not vector<bool>: tasks write distinct slots
  ASSERT_EQ(parallel_launch([&](int32_t id, int32_t) {
              const auto self = std::this_thread::get_id();
              outer[static_cast<size_t>(id)] = self;
              int32_t rc = parallel_launch([&](int32_t inner_id, int32_t inner_n) {
                inner_tasks[static_cast<size_t>(id)] = inner_n;
                inner_same_thread[static_cast<size_t>(id)] = std::this_thread::get_id() == self;
                return inner_id == 0 ? 0 : 1;
              });
              return rc;
            }),
            0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(inner_tasks[static_cast<size_t>(i)], 1);
    EXPECT_TRUE(inner_same_thread[static_cast<size_t>(i)]);
  }
}

TEST_F(ThreadPoolTest, ResizeFromInsideATaskIsAnError) {
  set_num_threads(2);
  std::atomic<int> errors{0};
  parallel_launch([&](int32_t, int32_t) {
    try {
      set_num_threads(3);
    } catch (const Error&) {
      errors.fetch_add(1);
    }
    return 0;
  });
  EXPECT_EQ(errors.load(), 2);
  EXPECT_EQ(num_threads(), 2);
  EXPECT_THROW(set_num_threads(-1), Error);
}

TEST_F(ThreadPoolTest, SetZeroRestoresTheDefault) {
  set_num_threads(3);
  set_num_threads(0);
  EXPECT_EQ(num_threads(), default_num_threads());
}

TEST_F(ThreadPoolTest, ManyLaunchesSumCorrectly) {
  for (int n : {1, 2, 4}) {
    set_num_threads(n);
    std::vector<int64_t> partial(static_cast<size_t>(n));
    for (int iter = 0; iter < 5000; ++iter) {
      const int64_t total = 1000;
      ASSERT_EQ(parallel_launch([&](int32_t id, int32_t tasks) {
                  const int64_t chunk = (total + tasks - 1) / tasks;
                  int64_t sum = 0;
                  for (int64_t i = chunk * id; i < std::min(total, chunk * (id + 1)); ++i) sum += i;
                  partial[static_cast<size_t>(id)] = sum;
                  return 0;
                }),
                0);
      int64_t sum = 0;
      for (int64_t p : partial) sum += p;
      ASSERT_EQ(sum, total * (total - 1) / 2) << "iteration " << iter;
    }
  }
}

TEST_F(ThreadPoolTest, LaunchesAfterIdleSleepWakeTheWorkers) {
  set_num_threads(3);
  for (int iter = 0; iter < 5; ++iter) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let workers fall asleep
    Counts c(3);
    ASSERT_EQ(kiln_parallel_launch(count_body, &c), 0);
    for (auto& h : c.hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST_F(ThreadPoolTest, LongTasksLetTheLauncherSleep) {
  set_num_threads(2);
  std::atomic<int> done{0};
  ASSERT_EQ(parallel_launch([&](int32_t id, int32_t) {
              if (id == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3));
              done.fetch_add(1);
              return 0;
            }),
            0);
  EXPECT_EQ(done.load(), 2);
}

TEST_F(ThreadPoolTest, ConcurrentLaunchersAllComplete) {
  set_num_threads(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> launchers;
  for (int t = 0; t < 4; ++t) {
    launchers.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        std::atomic<int> ran{0};
        std::atomic<int32_t> tasks{0};
        int32_t rc = parallel_launch([&](int32_t, int32_t n) {
          ran.fetch_add(1);
          tasks.store(n);
          return 0;
        });
        // The pool ran every task, or the launch ran inline as one task (pool busy).
        if (rc == 0 && ran.load() == tasks.load()) total.fetch_add(1);
      }
    });
  }
  // Resizing while others launch waits for the launch in progress.
  set_num_threads(2);
  set_num_threads(3);
  for (auto& t : launchers) t.join();
  EXPECT_EQ(total.load(), 4 * 500);
}

TEST_F(ThreadPoolTest, ReportsLaunchLatency) {
  for (int n : {1, 2}) {
    set_num_threads(n);
    std::atomic<int64_t> sink{0};
    const int iters = 20000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      parallel_launch([&](int32_t id, int32_t) {
        sink.fetch_add(id, std::memory_order_relaxed);
        return 0;
      });
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count() /
                iters;
    std::printf("threads=%d: %.2f us per back-to-back launch\n", n, us);
  }
}

}  // namespace
}  // namespace kiln::runtime
