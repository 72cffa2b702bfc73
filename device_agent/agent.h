// The device agent: what a board of the farm runs. It registers with the tracker (inside kilnd),
// renews its lease with heartbeats, takes measure requests from the GetWork stream, measures each
// compiled kernel in a guarded child process (kiln-runner, deploy/runtime/measure_child.h) and
// reports the result. It links the runtime only, never the compiler: a board carries no LLVM.
//
//   AgentOptions o;
//   o.tracker = "farm.lan:7071";
//   o.key = "rk3399";
//   o.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
//   o.token = rpc::read_token(token_file);
//   Agent agent(std::move(o));
//   std::thread watcher([&] { wait_for_sigterm(); agent.stop(); });
//   agent.run();   // until stop(); kiln::Error when the tracker refuses the device
//
// Failures and what the agent does about them:
//  - tracker unreachable: registration is retried with backoff (0.2 s doubling to 5 s) forever;
//  - the tracker refuses the device (bad token, bad key): run() throws kiln::Error;
//  - a cuda / opencl target without such a device here (or a CUDA device of another -arch): the
//    constructor throws kiln::Error and the agent never registers (agent_device.h);
//  - a vdla target: the device is the VDLA's simulator and cycle model, in kiln-runner. The agent
//    registers as a board "VDLA cycle model" and never as emulated: the cycle model's time does
//    not depend on the host (the same cycles on any CPU, under qemu too), so its records are the
//    VDLA's own timings, not a host's distorted by emulation;
//  - the lease is lost (a heartbeat answers known=false, or heartbeats keep failing), the work
//    stream ends (tracker restarted, network): the agent registers again (a new device id);
//  - a kernel fails, crashes or hangs: that is the request's result; the agent never dies of one.
// A request stamped with another tracker instance than the one the agent registered with is not
// run (it belongs to a tracker that no longer knows this device).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deploy/runtime/device_api.h"
#include "deploy/runtime/random_fill.h"
#include "device_agent/agent_device.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace kiln::v1 {
class MeasureRequest;
class MeasureResult;
}  // namespace kiln::v1

namespace kiln::agent {

struct AgentOptions {
  std::string tracker;      ///< "host:port" of the tracker
  std::string key, target;  ///< the device key and the target string (both required)
  std::string token;        ///< the farm's token (already read), "" for none
  std::string tls_ca;       ///< CA file for TLS, "" for plaintext
  /// default: "<CPU model from /proc/cpuinfo> x<nproc>", or the GPU's description for a cuda or
  /// opencl target (agent_device.h)
  std::string fingerprint;
  std::string runner;  ///< kiln-runner's path; default runtime::default_runner_path()
  int threads = 0;     ///< kernel thread pool when a request says 0 (0: the runtime's default)
  /// default: a fresh folder under the temp dir (kiln-agent-<pid>-<n>), removed at the end; the
  /// folders of agents killed before they could remove theirs go when the next one starts
  std::string work_dir;
  /// The emulator this agent runs under, as a command ("qemu-aarch64-static -L /usr/aarch64-...
  /// linux-gnu"): the agent reports itself emulated and starts kiln-runner through it (for a
  /// machine without binfmt_misc). Empty: the runner starts directly, and the agent still finds
  /// out from /proc/cpuinfo whether it runs emulated (board_info.h).
  std::vector<std::string> emulator;
  /// Where the board's description is read from ("" for /; tests point it at a fake root).
  std::string system_root;
  std::function<void(const std::string&)> log;  ///< one line per event; default stderr
};

class Agent {
 public:
  /// Checks the options (kiln::Error naming a missing or bad one) and opens the channel.
  explicit Agent(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Registers and serves work until stop(). Throws kiln::Error for a permanent failure (the
  /// tracker refused the registration). A measurement under way when stop() is called finishes
  /// first (it is bounded by its run timeout).
  void run();

  /// Makes run() return soon. Thread-safe; may be called before run() and more than once.
  void stop();

  /// Results reported and accepted by the tracker.
  uint64_t measured() const { return measured_.load(); }

 private:
  struct Session;   // one registration: device id, lease, tracker instance
  class CallGuard;  // lets stop() cancel an RPC under way

  bool stopping() const { return stop_.load(); }
  /// Waits `seconds` or until stop(); false when stopped.
  bool pause(double seconds);
  void log(const std::string& line);

  std::unique_ptr<Session> register_device();
  void heartbeat_loop(Session& session);
  void serve(Session& session);
  void handle(Session& session, const v1::MeasureRequest& request);
  v1::MeasureResult measure(const v1::MeasureRequest& request);
  /// The .npy of fill_input(seed, range) for one input, made once and cached; `request_seed` (the
  /// request's input_seed) groups the files for forget_old_inputs.
  std::string input_file(uint64_t request_seed, uint64_t seed, const std::string& dtype,
                         const std::vector<int64_t>& shape,
                         const std::optional<runtime::ValueRange>& range);
  /// Notes a request's seed; removes the files of seeds no request of the last 64 used.
  void forget_old_inputs(uint64_t seed);
  void report(Session& session, const v1::MeasureResult& result);

  AgentOptions options_;
  std::function<void(const std::string&)> log_;
  std::mutex log_mu_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string work_dir_;
  bool own_work_dir_ = false;
  bool emulated_ = false;
  AgentDevice device_;  ///< where kernels run

  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> measured_{0};
  std::mutex mu_;
  std::condition_variable cv_;                // stop(), a session's end
  std::set<grpc::ClientContext*> calls_;      // GUARDED_BY(mu_): RPCs stop() cancels
  grpc::ClientContext* work_call_ = nullptr;  // GUARDED_BY(mu_): the GetWork stream

  // Inputs shared by a task's requests (one task = one seed); only the serving thread uses them.
  std::map<std::string, std::string> inputs_;            // cache key -> .npy path
  std::map<uint64_t, std::set<std::string>> seed_keys_;  // seed -> its cache keys
  std::deque<uint64_t> recent_seeds_;                    // seeds of the last requests
};

/// Removes the default work folders under `temp_dir` (kiln-agent-<pid>-<n>) whose agent process is
/// gone: one killed (SIGKILL, a power cut) cannot remove its own, and a board would fill up with
/// them. A folder whose process still runs, or whose name is not of that form, stays. Returns how
/// many it removed.
size_t remove_stale_work_dirs(const std::string& temp_dir);

}  // namespace kiln::agent
