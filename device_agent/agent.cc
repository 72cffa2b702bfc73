#include "device_agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/measure_child.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/random_fill.h"
#include "deploy/vdla/driver/program.h"
#include "device_agent/agent_device.h"
#include "device_agent/board_info.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/wire.h"

namespace kiln::agent {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kFirstBackoffS = 0.2;  // registration retries: 0.2 s doubling ...
constexpr double kMaxBackoffS = 5.0;    // ... to 5 s
constexpr int kHeartbeatFailures = 3;   // failed heartbeats in a row that mean the lease is lost
constexpr double kReportRetryS = 10.0;  // how long a result is retried while UNAVAILABLE
constexpr double kDefaultRunTimeoutS = 10.0;
constexpr size_t kRecentSeeds = 64;  // input files are kept for the seeds of this many requests
constexpr auto kCallDeadline = std::chrono::seconds(10);  // unary calls to the tracker

/// The agent's monotonic clock, sent with heartbeats and results: one that runs backwards tells
/// the tracker the board's timings cannot be trusted.
uint64_t monotonic_ms() {
  return static_cast<uint64_t>(
             std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
                 .count()) +
         1;  // never 0, which means "not sent"
}

std::string status_text(const grpc::Status& s) {
  std::ostringstream os;
  os << s.error_code() << " " << s.error_message();
  return os.str();
}

std::string fresh_temp_dir() {
  remove_stale_work_dirs(fs::temp_directory_path().string());
  std::random_device rd;
  for (;;) {
    fs::path p = fs::temp_directory_path() / ("kiln-agent-" + std::to_string(::getpid()) + "-" +
                                              std::to_string(rd() % 1000000));
    if (fs::create_directory(p)) return p.string();
  }
}

void remove_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

}  // namespace

size_t remove_stale_work_dirs(const std::string& temp_dir) {
  size_t removed = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(temp_dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "kiln-agent-";
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos || dash == prefix.size()) continue;
    const std::string pid_text = name.substr(prefix.size(), dash - prefix.size());
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid <= 0 || pid == ::getpid()) continue;
    // Signal 0 checks existence; EPERM means it exists under another user.
    if (::kill(pid, 0) == 0 || errno == EPERM) continue;
    std::error_code rm;
    if (fs::remove_all(e.path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

// One registration with the tracker. `ended` and `lost` are guarded by Agent::mu_.
struct Agent::Session {
  uint64_t device_id = 0;
  uint32_t lease_ms = 0;
  std::string instance;
  bool ended = false;  // the work stream is over: the heartbeat thread stops
  bool lost = false;   // the tracker no longer knows us: end the work stream
};

// Registers an RPC's context with the agent for its duration, so that stop() can cancel it.
class Agent::CallGuard {
 public:
  CallGuard(Agent& agent, grpc::ClientContext& ctx) : agent_(agent), ctx_(ctx) {
    rpc::add_token(ctx, agent.options_.token);
    std::lock_guard<std::mutex> lock(agent_.mu_);
    agent_.calls_.insert(&ctx_);
    if (agent_.stopping()) ctx_.TryCancel();
  }
  ~CallGuard() {
    std::lock_guard<std::mutex> lock(agent_.mu_);
    agent_.calls_.erase(&ctx_);
  }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  Agent& agent_;
  grpc::ClientContext& ctx_;
};

Agent::Agent(AgentOptions options) : options_(std::move(options)) {
  KILN_USER_CHECK(!options_.tracker.empty()) << "kiln-agent: the tracker address is missing";
  KILN_USER_CHECK(options_.tracker.find(':') != std::string::npos)
      << "kiln-agent: the tracker address '" << options_.tracker << "' is not host:port";
  KILN_USER_CHECK(!options_.key.empty()) << "kiln-agent: the device key is missing";
  KILN_USER_CHECK(!options_.target.empty()) << "kiln-agent: the target is missing";
  KILN_USER_CHECK(options_.threads >= 0)
      << "kiln-agent: threads must be 0 or more, got " << options_.threads;
  const AgentDevice device = probe_agent_device(options_.target);
  device_ = device;
  const BoardInfo board = read_board_info(options_.system_root);
  // The VDLA's cycles are the same on any host, emulated or not (agent.h).
  emulated_ = device.kind != TargetKind::kVdla && (board.emulated || !options_.emulator.empty());
  if (options_.fingerprint.empty() && !device.description.empty()) {
    options_.fingerprint = device.description;
  } else if (options_.fingerprint.empty()) {
    options_.fingerprint = board.cpu_model + " x" + std::to_string(board.cores);
    if (emulated_ && !board.emulated) options_.fingerprint += " (emulated)";
  }
  if (options_.runner.empty()) options_.runner = runtime::default_runner_path();
  log_ = options_.log ? options_.log : [](const std::string& line) {
    std::cerr << "kiln-agent: " << line << "\n";
  };
  channel_ = rpc::make_channel(options_.tracker, options_.tls_ca);  // reads the CA file now
}

Agent::~Agent() = default;

void Agent::log(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);
  log_(line);
}

void Agent::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  for (grpc::ClientContext* ctx : calls_) ctx->TryCancel();
  cv_.notify_all();
}

bool Agent::pause(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping(); });
  return !stopping();
}

void Agent::run() {
  if (options_.work_dir.empty()) {
    work_dir_ = fresh_temp_dir();
    own_work_dir_ = true;
  } else {
    work_dir_ = options_.work_dir;
    fs::create_directories(work_dir_);
  }
  auto cleanup = [&] {
    std::error_code ec;
    if (own_work_dir_) {
      fs::remove_all(work_dir_, ec);
    } else {
      for (const auto& [key, path] : inputs_) fs::remove(path, ec);
    }
    inputs_.clear();
    seed_keys_.clear();
    recent_seeds_.clear();
  };
  try {
    while (!stopping()) {
      std::unique_ptr<Session> session = register_device();
      if (!session) break;  // stopped
      std::thread heartbeat([&] { heartbeat_loop(*session); });
      auto end_session = [&] {
        {
          std::lock_guard<std::mutex> lock(mu_);
          session->ended = true;
        }
        cv_.notify_all();
        heartbeat.join();
      };
      try {
        serve(*session);
      } catch (...) {
        end_session();
        throw;
      }
      end_session();
      // A stream that ends at once (a tracker going down) must not make us spin.
      if (!stopping()) pause(kFirstBackoffS);
    }
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  log("stopped after " + std::to_string(measured()) + " measurements");
}

std::unique_ptr<Agent::Session> Agent::register_device() {
  v1::RegisterDeviceRequest req;
  req.set_key(options_.key);
  req.set_target(options_.target);
  req.set_fingerprint(options_.fingerprint);
  const BoardInfo board = read_board_info(options_.system_root);
  v1::DeviceCapabilities* caps = req.mutable_capabilities();
  caps->set_cpu_model(board.cpu_model);
  caps->set_cores(board.cores);
  caps->set_memory_bytes(board.memory_bytes);
  caps->set_driver("kiln-runner");
  caps->set_board(board.board);
  caps->set_arch(board.arch);
  if (device_.kind == TargetKind::kVdla) {
    // The board is the simulator: its model and the configuration it runs, not the host's CPU.
    caps->set_board("VDLA cycle model (software simulator of the paper's accelerator)");
    caps->set_cpu_model(device_.description);
    caps->set_driver("kiln-runner (device vdla)");
  }
  caps->set_emulated(emulated_);

  double backoff = kFirstBackoffS;
  for (int attempt = 1; !stopping(); ++attempt) {
    auto stub = v1::Tracker::NewStub(channel_);
    v1::RegisterDeviceResponse resp;
    grpc::Status status;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
      CallGuard guard(*this, ctx);
      status = stub->RegisterDevice(&ctx, req, &resp);
    }
    if (status.ok()) {
      auto s = std::make_unique<Session>();
      s->device_id = resp.device_id();
      s->lease_ms = std::max<uint32_t>(resp.lease_ms(), 300);
      s->instance = resp.tracker_instance();
      log("registered with tracker " + options_.tracker + " as device " +
          std::to_string(s->device_id) + " (key " + options_.key + ", lease " +
          std::to_string(resp.lease_ms()) + " ms" + (emulated_ ? ", emulated" : "") + ")");
      return s;
    }
    if (stopping()) break;
    switch (status.error_code()) {
      case grpc::StatusCode::UNAUTHENTICATED:
      case grpc::StatusCode::PERMISSION_DENIED:
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::UNIMPLEMENTED:  // not a Kiln tracker at that address
        KILN_USER_ERROR() << "tracker " << options_.tracker
                          << " refused registration: " << status.error_message();
      default:
        break;  // UNAVAILABLE, DEADLINE_EXCEEDED and the like: the tracker may come back
    }
    // Log the first failures, then about once a minute.
    if (attempt <= 3 || attempt % 12 == 0) {
      std::ostringstream os;
      os << "tracker " << options_.tracker << " unreachable (" << status_text(status)
         << "); retrying in " << backoff << " s";
      log(os.str());
    }
    if (!pause(backoff)) break;
    backoff = std::min(backoff * 2, kMaxBackoffS);
  }
  return nullptr;
}

void Agent::heartbeat_loop(Session& session) {
  auto stub = v1::Tracker::NewStub(channel_);
  const auto interval = std::chrono::milliseconds(session.lease_ms / 3);
  int failures = 0;
  bool quarantine_logged = false;
  auto lose = [&](const std::string& why) {
    log("lost the lease of device " + std::to_string(session.device_id) + " (" + why +
        "); registering again");
    std::lock_guard<std::mutex> lock(mu_);
    session.lost = true;
    if (work_call_) work_call_->TryCancel();
  };
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, interval, [&] { return stopping() || session.ended; })) return;
    }
    v1::HeartbeatRequest req;
    req.set_device_id(session.device_id);
    req.set_device_clock_ms(monotonic_ms());
    v1::HeartbeatResponse resp;
    grpc::Status status;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::max<std::chrono::milliseconds>(interval, std::chrono::seconds(1)));
      CallGuard guard(*this, ctx);
      status = stub->Heartbeat(&ctx, req, &resp);
    }
    if (stopping()) return;
    if (!status.ok()) {
      if (++failures >= kHeartbeatFailures) {
        lose(std::to_string(failures) + " heartbeats failed, last: " + status_text(status));
        return;
      }
      continue;
    }
    failures = 0;
    if (!resp.known()) {
      lose("the tracker does not know it");
      return;
    }
    if (resp.quarantined() && !quarantine_logged) {
      log("device " + std::to_string(session.device_id) +
          " is quarantined: " + resp.quarantine_reason());
    }
    quarantine_logged = resp.quarantined();  // logged again if released and quarantined anew
  }
}

void Agent::serve(Session& session) {
  auto stub = v1::Tracker::NewStub(channel_);
  grpc::ClientContext ctx;
  CallGuard guard(*this, ctx);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (session.lost || stopping()) return;
    work_call_ = &ctx;
  }
  v1::GetWorkRequest req;
  req.set_device_id(session.device_id);
  auto reader = stub->GetWork(&ctx, req);
  v1::MeasureRequest request;
  while (reader->Read(&request)) handle(session, request);
  grpc::Status status = reader->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_call_ = nullptr;
  }
  if (!stopping() && !session.lost) {
    log("the work stream ended (" + status_text(status) + "); registering again");
  }
}

void Agent::handle(Session& session, const v1::MeasureRequest& request) {
  const std::string id = std::to_string(request.request_id());
  if (request.tracker_instance() != session.instance) {
    log("request " + id + " comes from tracker instance '" + request.tracker_instance() +
        "', not '" + session.instance + "' this device registered with: not run");
    return;
  }
  v1::MeasureResult result = measure(request);
  result.set_device_id(session.device_id);
  result.set_device_clock_ms(monotonic_ms());
  std::ostringstream os;
  os << "request " << id << " (" << request.task().task_key() << " #" << request.config().index()
     << "): " << v1::ErrorKind_Name(result.error());
  if (result.costs_s_size() > 0) os << ", " << result.costs_s(0) * 1e6 << " us";
  if (device_.kind == TargetKind::kVdla && result.costs_s_size() > 0) {
    os << " (" << std::llround(result.costs_s(0) * vdla::Config{}.clock_mhz * 1e6) << " cycles at "
       << vdla::Config{}.clock_mhz << " MHz; the cycle model is deterministic: one run)";
  }
  if (!result.error_msg().empty()) os << ": " << result.error_msg();
  log(os.str());
  report(session, result);
}

std::string Agent::input_file(uint64_t request_seed, uint64_t seed, const std::string& dtype,
                              const std::vector<int64_t>& shape,
                              const std::optional<runtime::ValueRange>& range) {
  std::string key = std::to_string(seed) + "_" + dtype;
  if (range) {
    key += "_r";
    key += std::to_string(range->low);
    key += '_';
    key += std::to_string(range->high);
  }
  for (int64_t d : shape) {
    key += '_';  // not "_" + to_string(d): GCC 12 -O3 warns falsely (-Wrestrict) on that
    key += std::to_string(d);
  }
  seed_keys_[request_seed].insert(key);
  auto it = inputs_.find(key);
  if (it != inputs_.end()) return it->second;
  runtime::NDArray a = runtime::NDArray::empty(shape, runtime::parse_dtype(dtype));
  runtime::fill_input(a, seed, range);
  std::string path = (fs::path(work_dir_) / ("input_" + key + ".npy")).string();
  runtime::save_npy(path, a);
  inputs_[key] = path;
  return path;
}

void Agent::forget_old_inputs(uint64_t seed) {
  recent_seeds_.erase(std::remove(recent_seeds_.begin(), recent_seeds_.end(), seed),
                      recent_seeds_.end());
  recent_seeds_.push_back(seed);
  while (recent_seeds_.size() > kRecentSeeds) {
    const uint64_t old = recent_seeds_.front();
    recent_seeds_.pop_front();
    for (const std::string& key : seed_keys_[old]) {
      auto it = inputs_.find(key);
      if (it == inputs_.end()) continue;
      remove_quietly(it->second);
      inputs_.erase(it);
    }
    seed_keys_.erase(old);
  }
}

v1::MeasureResult Agent::measure(const v1::MeasureRequest& request) {
  v1::MeasureResult result;
  result.set_request_id(request.request_id());
  const std::string stem = (fs::path(work_dir_) / std::to_string(request.request_id())).string();
  const bool gpu = is_gpu(device_.kind);
  const bool on_vdla = device_.kind == TargetKind::kVdla;
  const std::string library = stem + (gpu || on_vdla ? ".json" : ".so");
  const std::string reference = stem + ".ref.npy";
  const auto start = Clock::now();
  try {
    const v1::Artifact::Format expected =
        on_vdla                               ? v1::Artifact::FORMAT_VDLA
        : device_.kind == TargetKind::kCuda   ? v1::Artifact::FORMAT_PTX
        : device_.kind == TargetKind::kOpenCL ? v1::Artifact::FORMAT_OPENCL_C
                                              : v1::Artifact::FORMAT_SHARED_OBJECT;
    KILN_USER_CHECK(request.artifact().format() == expected)
        << "artifact format " << v1::Artifact::Format_Name(request.artifact().format())
        << " cannot be run by this agent (target '" << options_.target << "' runs "
        << v1::Artifact::Format_Name(expected) << ")";
    KILN_USER_CHECK(!request.artifact().entry().empty()) << "the artifact has no entry function";
    if (gpu) {
      // Checked at the door: a device program, named as its entry (the runner checks it again).
      const runtime::DeviceProgram program = runtime::DeviceProgram::from_json(
          kiln::Json::parse(request.artifact().data(), "the artifact"), "the artifact");
      KILN_USER_CHECK(program.name == request.artifact().entry())
          << "the artifact's device program is '" << program.name << "', not its entry '"
          << request.artifact().entry() << "'";
    }
    if (on_vdla) {
      // Checked at the door too: a VDLA program, named as its entry (the runner checks it again).
      const vdla::VdlaProgram program = vdla::VdlaProgram::from_json(
          kiln::Json::parse(request.artifact().data(), "the artifact"), "the artifact");
      KILN_USER_CHECK(program.name == request.artifact().entry())
          << "the artifact's VDLA program is '" << program.name << "', not its entry '"
          << request.artifact().entry() << "'";
    }
    {
      std::ofstream out(library, std::ios::binary);
      out.write(request.artifact().data().data(),
                static_cast<std::streamsize>(request.artifact().data().size()));
      KILN_USER_CHECK(out.good()) << "cannot write the kernel to " << library;
    }
    runtime::RunRequest run;
    run.library = library;
    run.function = request.artifact().entry();
    run.device = device_.kind;
    forget_old_inputs(request.input_seed());
    for (int i = 0; i < request.inputs_size(); ++i) {
      const v1::TensorSpec& spec = request.inputs(i);
      const std::vector<int64_t> shape(spec.shape().begin(), spec.shape().end());
      const uint64_t seed = request.input_seed() + static_cast<uint64_t>(i);
      std::optional<runtime::ValueRange> range;
      if (spec.has_low() || spec.has_high()) range = runtime::ValueRange{spec.low(), spec.high()};
      std::string path = input_file(request.input_seed(), seed,
                                    spec.dtype().empty() ? "float32" : spec.dtype(), shape, range);
      run.args.push_back(runtime::RunArg::make_input(std::move(path)));
    }
    std::string ref_path;
    if (!request.reference().empty()) {
      std::ofstream out(reference, std::ios::binary);
      out.write(request.reference().data(),
                static_cast<std::streamsize>(request.reference().size()));
      KILN_USER_CHECK(out.good()) << "cannot write the reference to " << reference;
      ref_path = reference;
    }
    // proto3 cannot tell "unset" from 0: no tolerance at all means the runtime's defaults.
    runtime::RunArg defaults = runtime::RunArg::make_output("float32", {});
    const bool no_tolerance = request.rtol() == 0 && request.atol() == 0;
    const v1::TensorSpec& out = request.output();
    run.args.push_back(
        runtime::RunArg::make_output(out.dtype().empty() ? "float32" : out.dtype(),
                                     std::vector<int64_t>(out.shape().begin(), out.shape().end()),
                                     ref_path, no_tolerance ? defaults.rtol : request.rtol(),
                                     no_tolerance ? defaults.atol : request.atol()));
    const v1::MeasureOptions& o = request.options();
    run.number = std::max<uint32_t>(o.number(), 1);
    run.repeat = std::max<uint32_t>(o.repeat(), 1);
    run.min_repeat_ms = o.min_repeat_ms();
    run.cooldown_ms = o.cooldown_ms();
    run.flush_cache = o.flush_cache();
    run.threads = o.threads() != 0 ? static_cast<int>(o.threads()) : options_.threads;
    const double timeout_s =
        o.run_timeout_ms() != 0 ? o.run_timeout_ms() / 1000.0 : kDefaultRunTimeoutS;

    runtime::RunResult r =
        runtime::measure_in_child(run, timeout_s, options_.runner, options_.emulator);
    result.set_error(rpc::to_wire(r.error));
    result.set_error_msg(r.message);
    if (r.ok()) {
      for (double c : r.costs_s) result.add_costs_s(c);
      result.set_contended(r.contended);
    }
  } catch (const std::exception& e) {
    // A request the agent cannot run (a missing runner, an odd dtype) is that request's error.
    std::string msg = e.what();
    if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
    result.set_error(v1::ERROR_KIND_RUNTIME_ERROR);
    result.set_error_msg(msg);
    result.clear_costs_s();
  }
  result.set_run_ms(static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()));
  remove_quietly(library);
  remove_quietly(reference);
  return result;
}

void Agent::report(Session& session, const v1::MeasureResult& result) {
  auto stub = v1::Tracker::NewStub(channel_);
  const auto give_up = Clock::now() + std::chrono::duration<double>(kReportRetryS);
  double backoff = kFirstBackoffS;
  for (;;) {
    v1::ReportResultResponse resp;
    grpc::Status status;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
      CallGuard guard(*this, ctx);
      status = stub->ReportResult(&ctx, result, &resp);
    }
    if (status.ok()) {
      if (resp.accepted()) {
        ++measured_;
        log("request " + std::to_string(result.request_id()) + " acknowledged");
      } else {
        log("request " + std::to_string(result.request_id()) +
            ": the tracker did not accept the result (re-queued or unknown)");
      }
      return;
    }
    if (stopping() || status.error_code() != grpc::StatusCode::UNAVAILABLE ||
        Clock::now() + std::chrono::duration<double>(backoff) > give_up) {
      log("request " + std::to_string(result.request_id()) + " of device " +
          std::to_string(session.device_id) + ": the result was lost (" + status_text(status) +
          ")");
      return;
    }
    if (!pause(backoff)) return;
    backoff = std::min(backoff * 2, 2.0);
  }
}

}  // namespace kiln::agent
