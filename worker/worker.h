// The compiler worker: the farm's build side. It long-polls the tracker for builds (task, config),
// rebuilds each task from the workload the request carries (autotune::Task::from_workload: the
// operator's compute, shapes and attributes; never a user's model), caches the most recent ones,
// lowers and compiles the config into a shared object
// exactly as the tuner does (entry "candidate"), and reports the artifact, which the tracker
// hands to a device agent to measure. A bad config never stops the worker: its artifact carries
// COMPILE_ERROR or COMPILE_TIMEOUT instead of code.
//
//   worker::WorkerOptions o;
//   o.tracker = "127.0.0.1:7071";
//   o.token = rpc::read_token(token_file);
//   worker::Worker w(o);
//   std::thread t([&] { w.run(); });   // until w.stop(); throws when the tracker refuses it
//   ...
//   w.stop();
//   t.join();
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "proto/kiln/v1/common.pb.h"

namespace grpc {
class ClientContext;
}

namespace kiln::worker {

struct WorkerOptions {
  std::string tracker;               ///< "host:port"
  std::string token, tls_ca;         ///< resolved token ("" none), CA file ("" plaintext)
  std::string name;                  ///< worker id; default "<hostname>-<pid>"
  int max_batch = 4;                 ///< builds asked for at once
  int threads = 0;                   ///< builds run at once; 0 = one per CPU
  std::vector<std::string> targets;  ///< targets it builds for; empty = any
  uint32_t wait_ms = 1000;           ///< long-poll wait
  double build_timeout_s = 60;       ///< used when a BuildRequest's timeout_ms is 0
  std::function<void(const std::string&)> log;  ///< default: stderr "kiln-worker: ..."
};

/// Builds config `config_index` of `task` the way the tuner does; never throws for a bad config:
/// the artifact's error is COMPILE_ERROR (message) or COMPILE_TIMEOUT. Format SHARED_OBJECT,
/// data = the .so bytes, entry "candidate", task {task_key, target, template_name},
/// config {index, text}, build_s.
kiln::v1::Artifact build_artifact(const autotune::Task& task, uint64_t config_index,
                                  double timeout_s);

/// Build threads still running in this process, those abandoned at their time limit included.
/// A process should not return from main (run static destructors, LLVM's among them) while one
/// runs: wait for 0 or leave with _Exit.
int builds_running();

class Worker {
 public:
  explicit Worker(WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Takes, builds and reports builds until stop(). An unreachable tracker is retried (backoff
  /// 0.2 s doubling to 5 s); kiln::Error when the tracker refuses the worker (UNAUTHENTICATED,
  /// PERMISSION_DENIED) or answers with another permanent error.
  void run();
  /// Makes run() return soon (it cancels the long-poll); thread-safe, callable before run().
  void stop();
  /// Artifacts reported so far (failed builds included).
  uint64_t builds_done() const { return builds_done_.load(); }

  const std::string& name() const { return options_.name; }

 private:
  struct Impl;
  void log(const std::string& msg) const;
  /// Sleeps up to `seconds`; false when stop() came first.
  bool sleep_unless_stopped(double seconds);

  WorkerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::atomic<uint64_t> builds_done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;                         ///< guarded by mu_
  grpc::ClientContext* current_call_ = nullptr;  ///< the long-poll in flight; guarded by mu_
};

}  // namespace kiln::worker
