// kilnd's embedded default: compiler workers and a CPU agent started by kilnd as child processes
// (kiln-worker, kiln-agent, found beside kilnd), reaching kilnd through its own gRPC port like
// remote ones. A worker compiles candidates of users' models, so it may crash: each side is
// restarted when it ends (after a pause that grows while it keeps failing), and its output goes to
// STATE/sides/<name>.log. They die with kilnd (base/parent_death.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::server {

class LocalSides {
 public:
  /// `tracker` is kilnd's own address; `tls_ca` the certificate to trust when kilnd uses TLS;
  /// `log_dir` where each side's output goes.
  LocalSides(std::string tracker, std::string token, std::string tls_ca, std::string log_dir);
  ~LocalSides();
  void start_workers(int n);
  void start_agent(const std::string& key, const std::string& target);
  /// Stops every side (SIGTERM, then SIGKILL) and joins their threads; idempotent.
  void stop();

 private:
  /// Runs `argv` until stop(), restarting it whenever it ends.
  void supervise(std::string name, std::vector<std::string> argv);

  std::string tracker_, token_, tls_ca_, log_dir_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

}  // namespace kiln::server
