#include "server/local_sides.h"

#include <iostream>

#include "device_agent/agent.h"
#include "worker/worker.h"

namespace kiln::server {

LocalSides::LocalSides(std::string tracker, std::string token, std::string tls_ca)
    : tracker_(std::move(tracker)), token_(std::move(token)), tls_ca_(std::move(tls_ca)) {}

LocalSides::~LocalSides() { stop(); }

void LocalSides::start_workers(int n) {
  for (int i = 0; i < n; ++i) {
    worker::WorkerOptions o;
    o.tracker = tracker_;
    o.token = token_;
    o.tls_ca = tls_ca_;
    o.name = "kilnd-local-worker-" + std::to_string(i + 1);
    workers_.push_back(std::make_unique<worker::Worker>(o));
    worker::Worker* w = workers_.back().get();
    threads_.emplace_back([w, name = o.name] {
      try {
        w->run();
      } catch (const std::exception& e) {
        std::cerr << "kilnd: local worker " << name << " stopped: " << e.what() << "\n";
      }
    });
  }
}

void LocalSides::start_agent(const std::string& key, const std::string& target) {
  agent::AgentOptions o;
  o.tracker = tracker_;
  o.key = key;
  o.target = target;
  o.token = token_;
  o.tls_ca = tls_ca_;
  agents_.push_back(std::make_unique<agent::Agent>(o));
  agent::Agent* a = agents_.back().get();
  threads_.emplace_back([a, key] {
    try {
      a->run();
    } catch (const std::exception& e) {
      std::cerr << "kilnd: local agent '" << key << "' stopped: " << e.what() << "\n";
    }
  });
}

void LocalSides::stop() {
  for (auto& w : workers_) w->stop();
  for (auto& a : agents_) a->stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace kiln::server
