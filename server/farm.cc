// The Farm's life cycle: construction on a state folder, start (resuming unfinished jobs) and
// stop, the ticker (leases, queue waits, build hand-outs, gauges) and recent events.
#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>

#include "base/error.h"
#include "server/child_process.h"
#include "server/farm_internal.h"
#include "server/wire.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using tracker::JobId;
using tracker::JobRecord;
using tracker::JobState;

std::string default_records_dir(const FarmOptions& o) {
  return o.records_dir.empty() ? (fs::path(o.state_dir) / "records").string() : o.records_dir;
}

std::string prepare_state_dir(const FarmOptions& o) {
  KILN_USER_CHECK(!o.state_dir.empty()) << "kilnd: the state folder (--state) is required";
  std::error_code ec;
  for (const char* sub : {"models", "bundles", "drivers"}) {
    fs::create_directories(fs::path(o.state_dir) / sub, ec);
    KILN_USER_CHECK(!ec) << "kilnd: cannot create '" << (fs::path(o.state_dir) / sub).string()
                         << "': " << ec.message();
  }
  return (fs::path(o.state_dir) / "jobs").string();
}

}  // namespace

std::string random_hex() {
  std::random_device rd;
  std::ostringstream os;
  os << std::hex << rd() << rd() << rd() << rd();
  return os.str();
}

Farm::Farm(FarmOptions options)
    : options_(std::move(options)),
      instance_(random_hex()),
      log_(records::RecordLog::open(default_records_dir(options_))),
      store_(tracker::JobStore::open(prepare_state_dir(options_))),
      driver_program_(options_.driver.program.empty()
                          ? find_program("kiln-tuner", "KILN_TUNER", KILN_TUNER_BUILD_PATH)
                          : options_.driver.program),
      tracker_(clock_, options_.tracker),
      builds_(clock_, options_.builds) {
  KILN_USER_CHECK(options_.max_running_jobs > 0) << "kilnd: max running jobs must be positive";
  KILN_USER_CHECK(options_.driver.max_tries > 0) << "kilnd: driver tries must be positive";
  // Uploads an earlier kilnd was receiving when it stopped are no job's model (the store, opened
  // above, holds the state folder's lock: no other kilnd is receiving into it).
  std::vector<fs::path> stale;
  std::error_code ec;
  for (const fs::directory_entry& e :
       fs::directory_iterator(fs::path(options_.state_dir) / "models", ec)) {
    if (e.path().filename().string().rfind(kUploadPrefix, 0) == 0) stale.push_back(e.path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
}

Farm::~Farm() { stop(); }

void Farm::start(const std::string& driver_server) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  driver_server_ = driver_server;
  size_t resumed = 0;
  for (const JobRecord& j : store_.unfinished()) {
    // A job submitted before start is runnable already: once, or two runners would drive it.
    if (std::find(runnable_.begin(), runnable_.end(), j.id) != runnable_.end()) continue;
    runnable_.push_back(j.id);
    job_versions_[j.id] = 1;
    ++resumed;
  }
  if (resumed > 0) add_event_locked("resume", std::to_string(resumed) + " unfinished jobs resumed");
  refresh_gauges_locked();
  ticker_ = std::thread([this] { tick_loop(); });
  for (int i = 0; i < options_.max_running_jobs; ++i)
    runners_.emplace_back([this] { runner_loop(); });
}

void Farm::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    builds_cv_.notify_all();
    jobs_cv_.notify_all();
    for (auto& [id, sink] : sinks_) sink->close(true, "kilnd is stopping");
    sinks_.clear();
    idle_.clear();
    for (auto& [id, ref] : build_slots_) ref.batch->cv.notify_all();
    for (auto& [id, ref] : measure_slots_) ref.batch->cv.notify_all();
  }
  if (ticker_.joinable()) ticker_.join();
  for (std::thread& t : runners_) t.join();
  runners_.clear();
}

void Farm::add_event_locked(const std::string& kind, const std::string& text) {
  // events_ is guarded by mu_, which every caller holds.
  events_.push_back({clock_.unix_ms(), kind, text});
  while (events_.size() > 500) events_.pop_front();
}

std::vector<FarmEvent> Farm::events(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = std::min(max, events_.size());
  return {events_.end() - static_cast<std::ptrdiff_t>(n), events_.end()};
}

void Farm::tick_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t ticks = 0;
  while (!stopping_) {
    jobs_cv_.wait_for(lock, options_.tick);
    if (stopping_) break;
    const tracker::Maintenance m = tracker_.tick();
    for (const tracker::DroppedDevice& gone : m.dropped) {
      add_event_locked("device_lost", "device " + std::to_string(gone.id) + " (key '" + gone.key +
                                          "') missed its heartbeats; " +
                                          std::to_string(gone.in_flight.size()) +
                                          " request(s) re-queued");
      if (auto sink = sinks_.find(gone.id); sink != sinks_.end()) {
        sink->second->close(
            false, "device " + std::to_string(gone.id) + " missed its heartbeats: register again");
      }
      forget_device_locked(gone.id, gone.key);
      feed_key_locked(gone.key, gone.in_flight.size());
    }
    for (const tracker::GiveUp& g : m.given_up) give_up_locked(g);
    for (const tracker::BuildRequest& b : builds_.expire()) {
      // Handed out twice without an answer: a compile timeout.
      metrics_.observe_build(0, ErrorKind::kCompileTimeout);
      if (auto it = build_slots_.find(b.id); it != build_slots_.end()) {
        v1::Artifact a;
        a.set_error(v1::ERROR_KIND_COMPILE_TIMEOUT);
        a.set_error_msg("no worker finished the build in time (" + std::to_string(b.attempts) +
                        " hand-outs)");
        it->second.batch->slots[it->second.index].artifact = std::move(a);
        it->second.batch->cv.notify_all();
        build_slots_.erase(it);
      }
    }
    refresh_gauges_locked();
    if (++ticks % 5 == 1) {
      std::map<JobState, size_t> counts;
      for (const JobRecord& j : store_.list()) ++counts[j.state];
      metrics_.set_job_counts(counts);
    }
  }
}

void Farm::refresh_gauges_locked() {
  metrics_.set_device_counts(tracker_.devices().counts());
  std::map<std::string, size_t> depths;
  for (const auto& [key, counts] : tracker_.devices().counts())
    depths[key] = tracker_.queue().pending_for_key(key);
  metrics_.set_queue_depths(depths);
  metrics_.set_build_queue_depth(static_cast<double>(builds_.pending()));
}

}  // namespace kiln::server
