// The global thread pool behind kiln_parallel_launch.
//
// Protocol. A launch publishes the job (body, closure) in plain fields and the task count with the
// next unclaimed task in `next_` (seq_cst, so it also releases the job), then bumps `generation_`
// to wake the workers. Task 0 is the launcher's; tasks 1..n-1 go to whoever claims them first
// (a compare-and-swap on `next_`): the workers, and the launcher once it has run task 0. A claimed
// task keeps the job's fields valid (the launcher waits for every task), so a claimer reads them
// after its claim. A worker waits for the generation to change: it spins for kSpinTime, then
// sleeps on `work_cv_` after announcing itself in `sleeping_workers_`. The launcher wakes sleepers
// only when that count is non-zero; seq_cst on both sides (store generation / load count vs. store
// count / load generation) guarantees that one of them sees the other. Completion: each task
// writes its result slot and increments `done_`; the launcher spins, then sleeps on `done_cv_`
// behind `launcher_sleeping_`, until done_ == n. The launcher writes the next job only after it
// has seen every task done, so job fields never race. Why claiming: with a task per thread fixed
// in advance, a worker that the OS had not scheduled (another process on its core) held the whole
// launch up, and two threads ran a model twice as slowly as one; now the launcher runs the tasks
// nobody has taken.

#include "deploy/runtime/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "base/error.h"

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;

/// How long an idle worker (or a waiting launcher) spins before it sleeps.
constexpr std::chrono::microseconds kSpinTime{50};

/// True on pool workers, and on a launcher while it runs a task: launches from there run inline.
thread_local bool t_in_parallel = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Spins until done() or kSpinTime has passed; returns done()'s last value.
template <typename Pred>
bool spin_until(Pred done) {
  const Clock::time_point deadline = Clock::now() + kSpinTime;
  for (uint32_t i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0 && Clock::now() > deadline) return done();
  }
}

/// Sets t_in_parallel for a scope.
class InParallelScope {
 public:
  InParallelScope() : saved_(t_in_parallel) { t_in_parallel = true; }
  ~InParallelScope() { t_in_parallel = saved_; }

 private:
  bool saved_;
};

/// One task's outcome.
struct TaskResult {
  int32_t code = 0;
  std::exception_ptr exception;
};

/// Runs one task, turning an exception into code -1 plus the exception.
TaskResult run_task(KilnParallelBody body, void* closure, int32_t id, int32_t n) {
  TaskResult r;
  try {
    r.code = body(id, n, closure);
  } catch (...) {
    r.code = -1;
    r.exception = std::current_exception();
  }
  return r;
}

int cpus_available() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

class ThreadPool {
 public:
  /// The process-wide pool, created (and its workers started) on first use. Never destroyed, so a
  /// launch during static destruction is safe; ShutdownAtExit joins the workers.
  static ThreadPool& global();
  /// The pool if it was created, else null.
  static ThreadPool* created() { return created_.load(std::memory_order_acquire); }

  int size() const { return size_.load(std::memory_order_relaxed); }

  /// Runs body over the pool; the result of the lowest-numbered failing task, or all zero.
  TaskResult launch(KilnParallelBody body, void* closure);

  void resize(int n);

  /// Joins the workers, leaving a pool of size 1 (everything runs on the caller). Skipped if a
  /// launch is in progress or the caller is itself inside a parallel body.
  void shutdown();

 private:
  explicit ThreadPool(int n) { start(n); }

  // Both require launch_mu_ (or construction).
  void start(int n);
  void stop();
  void worker_main(uint64_t generation);
  /// Claims and runs tasks of the current job until none is left unclaimed.
  void run_claimed_tasks();

  static std::atomic<ThreadPool*> created_;

  std::mutex launch_mu_;  // one launch or resize at a time
  std::atomic<int> size_{1};
  std::vector<std::thread> workers_;  // guarded by launch_mu_
  std::vector<TaskResult> results_;   // slot i written by task i during a launch

  // The current job; written by the launcher (holding launch_mu_) before it publishes next_.
  KilnParallelBody body_ = nullptr;
  void* closure_ = nullptr;
  bool stopping_ = false;

  alignas(64) std::atomic<uint64_t> generation_{0};
  /// The current job's task count (bits 16..31) and its next unclaimed task (bits 0..15).
  alignas(64) std::atomic<uint64_t> next_{0};
  /// Tasks of the current job that have finished.
  alignas(64) std::atomic<int32_t> done_{0};
  alignas(64) std::atomic<int32_t> sleeping_workers_{0};
  std::atomic<bool> launcher_sleeping_{false};
  std::mutex sleep_mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
};

std::atomic<ThreadPool*> ThreadPool::created_{nullptr};

ThreadPool& ThreadPool::global() {
  static ThreadPool* pool = [] {
    auto* p = new ThreadPool(default_num_threads());
    created_.store(p, std::memory_order_release);
    return p;
  }();
  return *pool;
}

void ThreadPool::start(int n) {
  results_.assign(static_cast<size_t>(n), TaskResult{});
  stopping_ = false;
  const uint64_t generation = generation_.load();
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int32_t id = 1; id < n; ++id) {
    try {
      workers_.emplace_back(&ThreadPool::worker_main, this, generation);
    } catch (const std::system_error& e) {
      std::fprintf(stderr, "kiln: could only start %d of %d pool threads: %s\n", id, n, e.what());
      break;
    }
  }
  size_.store(static_cast<int>(workers_.size()) + 1, std::memory_order_relaxed);
}

void ThreadPool::stop() {
  if (workers_.empty()) return;
  stopping_ = true;
  generation_.fetch_add(1);
  { std::lock_guard<std::mutex> lock(sleep_mu_); }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  size_.store(1, std::memory_order_relaxed);
}

void ThreadPool::worker_main(uint64_t seen) {
  t_in_parallel = true;
  for (;;) {
    auto changed = [&] { return generation_.load() != seen; };
    if (!spin_until(changed)) {
      std::unique_lock<std::mutex> lock(sleep_mu_);
      sleeping_workers_.fetch_add(1);
      work_cv_.wait(lock, changed);
      sleeping_workers_.fetch_sub(1);
    }
    seen = generation_.load();
    if (stopping_) return;
    run_claimed_tasks();
  }
}

void ThreadPool::run_claimed_tasks() {
  for (;;) {
    uint64_t c = next_.load();
    const auto n = static_cast<int32_t>((c >> 16) & 0xffff);
    const auto task = static_cast<int32_t>(c & 0xffff);
    if (task >= n) return;
    if (!next_.compare_exchange_weak(c, c + 1)) continue;
    results_[static_cast<size_t>(task)] = run_task(body_, closure_, task, n);
    if (done_.fetch_add(1) + 1 == n && launcher_sleeping_.load()) {
      { std::lock_guard<std::mutex> lock(sleep_mu_); }
      done_cv_.notify_one();
    }
  }
}

TaskResult ThreadPool::launch(KilnParallelBody body, void* closure) {
  if (t_in_parallel) return run_task(body, closure, 0, 1);
  std::unique_lock<std::mutex> launch_lock(launch_mu_, std::try_to_lock);
  const int32_t n = launch_lock.owns_lock() ? static_cast<int32_t>(workers_.size()) + 1 : 1;
  if (n == 1) {
    // A pool of one, or another thread holds the pool: run on the caller as one task.
    InParallelScope scope;
    return run_task(body, closure, 0, 1);
  }
  body_ = body;
  closure_ = closure;
  done_.store(0, std::memory_order_relaxed);
  next_.store(static_cast<uint64_t>(n) << 16 | 1);  // publishes the job; task 0 is ours
  generation_.fetch_add(1);
  if (sleeping_workers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(sleep_mu_); }
    work_cv_.notify_all();
  }
  {
    InParallelScope scope;
    results_[0] = run_task(body, closure, 0, n);
    done_.fetch_add(1);
    run_claimed_tasks();  // the tasks no worker has taken yet
  }
  auto done = [&] { return done_.load() == n; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(sleep_mu_);
    launcher_sleeping_.store(true);
    done_cv_.wait(lock, done);
    launcher_sleeping_.store(false);
  }
  for (TaskResult& r : results_) {
    if (r.code != 0) {
      TaskResult first = std::move(r);
      for (TaskResult& rest : results_) rest = TaskResult{};
      return first;
    }
  }
  return TaskResult{};
}

void ThreadPool::resize(int n) {
  KILN_USER_CHECK(n >= 0 && n <= 4096)
      << "set_num_threads: thread count must be in [0, 4096], got " << n;
  KILN_USER_CHECK(!t_in_parallel) << "set_num_threads: cannot resize the thread pool from inside "
                                     "a parallel task";
  if (n == 0) n = default_num_threads();
  std::lock_guard<std::mutex> lock(launch_mu_);
  if (n == static_cast<int>(workers_.size()) + 1) return;
  stop();
  start(n);
}

void ThreadPool::shutdown() {
  if (t_in_parallel) return;
  std::unique_lock<std::mutex> lock(launch_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  stop();
}

/// Joins the pool's workers when the process exits normally.
struct ShutdownAtExit {
  ~ShutdownAtExit() {
    if (ThreadPool* pool = ThreadPool::created()) pool->shutdown();
  }
} g_shutdown_at_exit;

}  // namespace

int default_num_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (*end == '\0' && n >= 1 && n <= 4096) return static_cast<int>(n);
    static std::once_flag warned;
    std::call_once(warned, [env] {
      std::fprintf(stderr, "kiln: ignoring KILN_NUM_THREADS='%s' (want an integer in [1, 4096])\n",
                   env);
    });
  }
  return cpus_available();
}

int num_threads() { return ThreadPool::global().size(); }

void set_num_threads(int n) { ThreadPool::global().resize(n); }

int32_t parallel_launch(const std::function<int32_t(int32_t, int32_t)>& fn) {
  using TaskFn = std::function<int32_t(int32_t, int32_t)>;
  auto trampoline = [](int32_t task_id, int32_t num_tasks, void* closure) -> int32_t {
    return (*static_cast<const TaskFn*>(closure))(task_id, num_tasks);
  };
  TaskResult r =
      ThreadPool::global().launch(trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  if (r.exception) std::rethrow_exception(r.exception);
  return r.code;
}

}  // namespace kiln::runtime

extern "C" int32_t kiln_parallel_launch(KilnParallelBody body, void* closure) {
  try {
    return kiln::runtime::ThreadPool::global().launch(body, closure).code;
  } catch (...) {
    return -1;
  }
}
