// Contention on purpose, for the tests of disturbed measurements: CpuCompetitor pins the calling
// thread (and the child processes it starts from now on) to one of its CPUs, and runs a thread
// pinned to that same CPU that spins until stop(), the given time, or the object's end, when the
// calling thread gets its CPUs back.
//
//   CpuCompetitor busy(0.3);   // 0.3 s of a spinning neighbour on this thread's CPU
//   ... measure ...
//   busy.stop();
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>

namespace kiln::testing {

class CpuCompetitor {
 public:
  explicit CpuCompetitor(double seconds = 1e9) {
    if (::sched_getaffinity(0, sizeof(saved_), &saved_) != 0)
      throw std::runtime_error("sched_getaffinity failed");
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved_)) ++cpu;
    CPU_ZERO(&one_);
    CPU_SET(cpu, &one_);
    if (::sched_setaffinity(0, sizeof(one_), &one_) != 0)
      throw std::runtime_error("sched_setaffinity failed");
    thread_ = std::thread([this, seconds] {
      ::sched_setaffinity(0, sizeof(one_), &one_);
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
      volatile uint64_t spin = 0;
      while (!stop_ && std::chrono::steady_clock::now() < end) spin = spin + 1;
    });
  }
  ~CpuCompetitor() {
    stop();
    ::sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  CpuCompetitor(const CpuCompetitor&) = delete;
  CpuCompetitor& operator=(const CpuCompetitor&) = delete;

  /// Ends the spinning (the calling thread stays on its one CPU until the object's end).
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  cpu_set_t saved_, one_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace kiln::testing
