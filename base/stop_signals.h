// SIGINT and SIGTERM for Kiln's long-running programs (kilnd, kiln-agent, kiln-worker): blocked
// in every thread and taken by sigwait, never handled in a signal handler, so a signal cannot
// interrupt gRPC's threads or a build half-way.
//
//   int main() {
//     StopSignals signals;                 // first: threads started later inherit the mask
//     Server server(...);
//     signals.watch([&](const char* name) { server.stop(); });   // on a thread of its own
//     server.run();
//   }                                      // ~StopSignals wakes and joins the watcher
//
//   const char* name = signals.wait();     // or: wait in this thread ("SIGINT" / "SIGTERM")
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

namespace kiln {

class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  ~StopSignals() {
    if (!watcher_.joinable()) return;
    done_ = true;
    pthread_kill(watcher_.native_handle(), SIGTERM);  // wakes sigwait when no signal came
    watcher_.join();
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// Starts a thread that calls `on_stop` with the signal's name on the first SIGINT or SIGTERM.
  void watch(std::function<void(const char* name)> on_stop) {
    watcher_ = std::thread([this, on_stop = std::move(on_stop)] {
      const char* name = wait();
      if (!done_) on_stop(name);
    });
  }
  /// Waits in the calling thread for SIGINT or SIGTERM; returns its name.
  const char* wait() {
    int signo = 0;
    sigwait(&set_, &signo);
    return signo == SIGINT ? "SIGINT" : "SIGTERM";
  }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

}  // namespace kiln
