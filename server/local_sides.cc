#include "server/local_sides.h"

#include <filesystem>
#include <iostream>

#include "server/child_process.h"

namespace kiln::server {

LocalSides::LocalSides(std::string tracker, std::string token, std::string tls_ca,
                       std::string log_dir)
    : tracker_(std::move(tracker)),
      token_(std::move(token)),
      tls_ca_(std::move(tls_ca)),
      log_dir_(std::move(log_dir)) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir_, ec);
}

LocalSides::~LocalSides() { stop(); }

void LocalSides::start_workers(int n) {
  const std::string program = find_program("kiln-worker", "KILN_WORKER", KILN_WORKER_BUILD_PATH);
  for (int i = 0; i < n; ++i) {
    const std::string name = "kilnd-local-worker-" + std::to_string(i + 1);
    std::vector<std::string> argv = {program, "--tracker", tracker_, "--name", name};
    if (!tls_ca_.empty()) argv.insert(argv.end(), {"--tls-ca", tls_ca_});
    threads_.emplace_back([this, name, argv] { supervise(name, argv); });
  }
}

void LocalSides::start_agent(const std::string& key, const std::string& target) {
  const std::string program = find_program("kiln-agent", "KILN_AGENT", KILN_AGENT_BUILD_PATH);
  std::vector<std::string> argv = {program, "--tracker", tracker_, "--key",
                                   key,     "--target",  target};
  if (!tls_ca_.empty()) argv.insert(argv.end(), {"--tls-ca", tls_ca_});
  const std::string name = "kilnd-local-agent-" + key;
  threads_.emplace_back([this, name, argv] { supervise(name, argv); });
}

void LocalSides::supervise(std::string name, std::vector<std::string> argv) {
  const std::string log = (std::filesystem::path(log_dir_) / (name + ".log")).string();
  std::vector<std::string> env;
  if (!token_.empty()) env.push_back("KILN_TOKEN=" + token_);
  auto pause = std::chrono::milliseconds(500);
  while (!stopping_) {
    const auto started = std::chrono::steady_clock::now();
    try {
      ChildProcess child = ChildProcess::start(argv, env, log);
      std::optional<ExitStatus> status;
      while (!stopping_ && !(status = child.wait_for(std::chrono::milliseconds(200)))) {
      }
      if (stopping_) {
        child.stop(std::chrono::seconds(3));
        return;
      }
      std::cerr << "kilnd: " << name << " " << status->describe() << " (log " << log
                << "); restarting\n";
    } catch (const std::exception& e) {
      std::cerr << "kilnd: cannot start " << name << ": " << e.what() << "\n";
    }
    // A side that ran a while gets a quick restart; one that keeps failing, a growing pause.
    if (std::chrono::steady_clock::now() - started > std::chrono::seconds(60))
      pause = std::chrono::milliseconds(500);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, pause, [&] { return stopping_.load(); });
    pause = std::min(pause * 2, std::chrono::milliseconds(30000));
  }
}

void LocalSides::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace kiln::server
