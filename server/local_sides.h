// kilnd's embedded default: compiler workers and a CPU agent inside the kilnd process, each a
// thread running the same kiln::worker::Worker / kiln::agent::Agent as the kiln-worker and
// kiln-agent programs, talking to kilnd through its own gRPC port like remote ones.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kiln::worker {
class Worker;
}
namespace kiln::agent {
class Agent;
}

namespace kiln::server {

class LocalSides {
 public:
  /// `tracker` is kilnd's own address; `tls_ca` the certificate to trust when kilnd uses TLS.
  LocalSides(std::string tracker, std::string token, std::string tls_ca);
  ~LocalSides();
  void start_workers(int n);
  void start_agent(const std::string& key, const std::string& target);
  /// Stops and joins every side; idempotent.
  void stop();

 private:
  std::string tracker_, token_, tls_ca_;
  std::vector<std::unique_ptr<worker::Worker>> workers_;
  std::vector<std::unique_ptr<agent::Agent>> agents_;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::server
