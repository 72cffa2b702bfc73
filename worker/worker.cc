// The compiler worker: long-poll -> each build's task rebuilt from its workload (cached) -> lower
// -> build in parallel within the time limit -> report each artifact (a shared object for a CPU
// target; for cuda / opencl a DeviceProgram's JSON, format PTX or OpenCL C; for vdla a
// VdlaProgram's JSON, format VDLA).
#include "worker/worker.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/codegen/build_device.h"
#include "compiler/pass/split_host_device.h"
#include "compiler/target/target.h"
#include "compiler/vdla/program.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "rpc/channel.h"

namespace kiln::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kTaskCacheSize = 64;   // tasks kept, most recently used first
constexpr double kFirstBackoffS = 0.2;  // an unreachable tracker is retried after this,
constexpr double kMaxBackoffS = 5.0;    // doubling up to this
constexpr auto kCallMargin = std::chrono::seconds(30);      // deadline beyond a call's own wait
constexpr auto kPollSlice = std::chrono::milliseconds(50);  // how often a waiting build looks up

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// The runtime's signature string of `f` (c_abi.h): 't' per tensor, 'f' / 'i' per scalar.
std::string signature_of(const ir::PrimFunc& f) {
  std::string sig;
  for (const ir::Param& p : f.params) {
    sig += p.is_tensor() ? 't' : p.var.dtype().is_float() ? 'f' : 'i';
  }
  return sig;
}

/// One build between lowering and reporting: the artifact so far and, when it lowered, the
/// program to compile.
struct Candidate {
  v1::Artifact artifact;
  ir::PrimFunc func;
  std::optional<target::Target> target;
  bool lowered = false;
  double timeout_s = 0;
  Clock::time_point start;
};

void fail(Candidate& c, v1::ErrorKind kind, const std::string& message) {
  c.artifact.set_error(kind);
  c.artifact.set_error_msg(message);
  c.artifact.clear_data();
  c.artifact.set_build_s(seconds_since(c.start));
}

/// The artifact format of `target`'s candidates.
v1::Artifact::Format artifact_format(const std::string& target) {
  switch (target::Target::parse(target).kind) {
    case TargetKind::kCuda:
      return v1::Artifact::FORMAT_PTX;
    case TargetKind::kOpenCL:
      return v1::Artifact::FORMAT_OPENCL_C;
    case TargetKind::kVdla:
      return v1::Artifact::FORMAT_VDLA;
    case TargetKind::kCpu:
      break;
  }
  return v1::Artifact::FORMAT_SHARED_OBJECT;
}

/// Applies config `index` to `task` and lowers it as the tuner does (entry "candidate").
Candidate lower_candidate(const autotune::Task& task, uint64_t index, double timeout_s) {
  Candidate c;
  c.start = Clock::now();
  c.timeout_s = timeout_s;
  v1::Artifact& a = c.artifact;
  a.mutable_task()->set_task_key(task.key);
  a.mutable_task()->set_target(task.target);
  a.mutable_task()->set_template_name(task.template_name);
  a.mutable_config()->set_index(index);
  a.set_entry("candidate");
  a.set_error(v1::ERROR_KIND_NONE);
  const uint64_t size = task.space.size();
  if (index >= size) {
    fail(c, v1::ERROR_KIND_COMPILE_ERROR,
         "config index " + std::to_string(index) + " is out of range: task '" + task.key +
             "' has a space of " + std::to_string(size) + " configs");
    return c;
  }
  try {
    a.set_format(artifact_format(task.target));
    const space::Config cfg = task.space.get(index);
    a.mutable_config()->set_text(cfg.str());
    c.target = target::Target::parse(task.target);
    c.func = task.lower(cfg);
    a.set_signature(signature_of(c.func));
    c.lowered = true;
  } catch (const std::exception& e) {
    fail(c, v1::ERROR_KIND_COMPILE_ERROR, e.what());
  }
  return c;
}

/// What a build thread hands back: the .so bytes or the device program's JSON, or the compiler's
/// message.
struct Built {
  std::string data;
  std::string error;
};

std::atomic<int> g_builds_running{0};

/// The artifact's bytes of `func`, lowered for `target`: a shared object, for a GPU the
/// DeviceProgram (its kernels compiled: PTX by NVRTC, OpenCL C as printed) as JSON, for the VDLA
/// the VdlaProgram (the paper's prototype, vdla::Config{}) as JSON.
std::string artifact_bytes(const ir::PrimFunc& func, const target::Target& target) {
  if (target.kind == TargetKind::kVdla)
    return vdla_compiler::build_program(func, vdla::Config{}).to_json().dump();
  if (!target.is_gpu()) return codegen::link_shared_object({func}, target);
  return codegen::build_device(pass::split_host_device(func), target).to_json().dump();
}

/// Compiles `c.func` into the artifact's bytes in a detached thread (a build abandoned at its time
/// limit ends on its own).
std::future<Built> start_build(const Candidate& c) {
  auto promise = std::make_shared<std::promise<Built>>();
  std::future<Built> result = promise->get_future();
  ++g_builds_running;
  std::thread([promise, f = c.func, tgt = *c.target]() mutable {
    {
      // Everything the build holds goes away in this scope, before the count drops, so that a
      // process waiting for builds_running() == 0 can exit safely.
      auto done = std::move(promise);
      ir::PrimFunc func = std::move(f);
      const target::Target target = std::move(tgt);
      Built b;
      try {
        b.data = artifact_bytes(func, target);
      } catch (const std::exception& e) {
        b.error = e.what();
        if (b.error.empty()) b.error = "the build failed";
      }
      done->set_value(std::move(b));
    }
    --g_builds_running;
  }).detach();
  return result;
}

/// Fills `c.artifact` from its finished build (or its time limit).
void finish(Candidate& c, std::future<Built>& result, Clock::time_point deadline) {
  if (result.wait_until(deadline) == std::future_status::timeout) {
    fail(c, v1::ERROR_KIND_COMPILE_TIMEOUT,
         "the build ran past " + std::to_string(c.timeout_s) + " s");
    return;
  }
  Built b = result.get();
  if (!b.error.empty()) {
    fail(c, v1::ERROR_KIND_COMPILE_ERROR, b.error);
    return;
  }
  c.artifact.set_data(std::move(b.data));
  c.artifact.set_build_s(seconds_since(c.start));
}

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string default_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
    std::snprintf(host, sizeof(host), "worker");
  return std::string(host) + "-" + std::to_string(::getpid());
}

bool refused(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::PERMISSION_DENIED;
}

}  // namespace

int builds_running() { return g_builds_running.load(); }

v1::Artifact build_artifact(const autotune::Task& task, uint64_t config_index, double timeout_s) {
  Candidate c = lower_candidate(task, config_index, timeout_s);
  if (c.lowered) {
    std::future<Built> result = start_build(c);
    finish(c, result, deadline_after(timeout_s));
  }
  return std::move(c.artifact);
}

/// A task rebuilt from a build request's workload, or why it could not be.
struct CachedTask {
  std::string template_name, workload, target;
  std::optional<autotune::Task> task;
  std::string error;
};

struct Worker::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Tracker::Stub> stub;
  std::deque<std::shared_ptr<const CachedTask>> tasks;  ///< most recent first
};

Worker::Worker(WorkerOptions options) : options_(std::move(options)), impl_(new Impl) {
  KILN_USER_CHECK(!options_.tracker.empty()) << "kiln-worker: no tracker address given";
  KILN_USER_CHECK(options_.max_batch > 0)
      << "kiln-worker: the batch must be positive (got " << options_.max_batch << ")";
  KILN_USER_CHECK(options_.threads >= 0)
      << "kiln-worker: threads must be 0 (one per CPU) or more (got " << options_.threads << ")";
  if (options_.name.empty()) options_.name = default_name();
  if (options_.threads == 0) {
    options_.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  impl_->channel = rpc::make_channel(options_.tracker, options_.tls_ca);
  impl_->stub = v1::Tracker::NewStub(impl_->channel);
}

Worker::~Worker() = default;

void Worker::log(const std::string& msg) const {
  if (options_.log) {
    options_.log(msg);
  } else {
    std::cerr << "kiln-worker: " << msg << "\n";
  }
}

void Worker::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  if (current_call_ != nullptr) current_call_->TryCancel();
  cv_.notify_all();
}

bool Worker::sleep_unless_stopped(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopped_; });
}

void Worker::run() {
  const std::string refusal = "tracker " + options_.tracker + " refused the worker: ";
  auto stopped = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  };
  auto unary_context = [&](grpc::ClientContext& ctx) {
    rpc::add_token(ctx, options_.token);
    ctx.set_deadline(std::chrono::system_clock::now() + kCallMargin);
  };

  // The task a build request describes, rebuilt from its workload (cached).
  auto task_of = [&](const v1::TaskRef& ref) -> std::shared_ptr<const CachedTask> {
    auto& cache = impl_->tasks;
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if ((*it)->template_name == ref.template_name() && (*it)->workload == ref.workload() &&
          (*it)->target == ref.target()) {
        auto found = *it;
        cache.erase(it);
        cache.push_front(found);
        return found;
      }
    }
    auto out = std::make_shared<CachedTask>();
    out->template_name = ref.template_name();
    out->workload = ref.workload();
    out->target = ref.target();
    try {
      out->task = autotune::Task::from_workload(ref.template_name(), ref.workload(), ref.target());
      log("task " + out->task->key + " rebuilt from its workload");
    } catch (const std::exception& e) {
      out->error = "cannot rebuild task '" + ref.task_key() + "' from its workload: " + e.what();
      log(out->error);
    }
    cache.push_front(out);
    if (cache.size() > kTaskCacheSize) cache.pop_back();
    return out;
  };

  // Reports one artifact; a tracker that cannot be reached loses it (it hands the build again).
  auto report = [&](uint64_t build_id, v1::Artifact artifact) {
    v1::ReportArtifactRequest req;
    req.set_build_id(build_id);
    req.set_worker_id(options_.name);
    *req.mutable_artifact() = std::move(artifact);
    double backoff = kFirstBackoffS;
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      unary_context(ctx);
      v1::ReportArtifactResponse resp;
      const grpc::Status st = impl_->stub->ReportArtifact(&ctx, req, &resp);
      if (st.ok()) {
        ++builds_done_;
        if (!resp.accepted()) log("the tracker ignored build " + std::to_string(build_id));
        return;
      }
      if (refused(st.error_code())) throw Error(refusal + st.error_message());
      if (attempt >= 2 || !sleep_unless_stopped(backoff)) {
        log("could not report build " + std::to_string(build_id) + ": " + st.error_message());
        return;
      }
      backoff *= 2;
    }
  };

  double backoff = kFirstBackoffS;
  bool unreachable = false;
  while (!stopped()) {
    v1::GetBuildWorkRequest req;
    req.set_worker_id(options_.name);
    req.set_max_batch(static_cast<uint32_t>(options_.max_batch));
    req.set_wait_ms(options_.wait_ms);
    for (const std::string& t : options_.targets) req.add_targets(t);
    v1::BuildBatch batch;
    grpc::Status st;
    {
      grpc::ClientContext ctx;
      rpc::add_token(ctx, options_.token);
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(options_.wait_ms) + kCallMargin);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) break;
        current_call_ = &ctx;
      }
      st = impl_->stub->GetBuildWork(&ctx, req, &batch);
      std::lock_guard<std::mutex> lock(mu_);
      current_call_ = nullptr;
    }
    if (stopped()) break;
    if (!st.ok()) {
      const grpc::StatusCode code = st.error_code();
      if (refused(code)) throw Error(refusal + st.error_message());
      KILN_USER_CHECK(code != grpc::StatusCode::UNIMPLEMENTED &&
                      code != grpc::StatusCode::INVALID_ARGUMENT)
          << "tracker " << options_.tracker << " rejected GetBuildWork: " << st.error_message();
      if (!unreachable) {
        log("tracker " + options_.tracker + " unreachable (" + st.error_message() + "); retrying");
        unreachable = true;
      }
      if (!sleep_unless_stopped(backoff)) break;
      backoff = std::min(backoff * 2, kMaxBackoffS);
      // The channel's own reconnect backoff grows to minutes; ours decides when to try.
      grpc::experimental::ChannelResetConnectionBackoff(impl_->channel.get());
      continue;
    }
    if (unreachable) log("tracker " + options_.tracker + " reachable again");
    unreachable = false;
    backoff = kFirstBackoffS;
    if (batch.builds().empty()) continue;

    // 1. Each build's task, lowered (in this thread, as the tuner does).
    std::vector<Candidate> cands;
    std::vector<uint64_t> build_ids;
    for (const v1::BuildRequest& b : batch.builds()) {
      const double timeout_s =
          b.timeout_ms() > 0 ? b.timeout_ms() / 1000.0 : options_.build_timeout_s;
      const std::shared_ptr<const CachedTask> cached = task_of(b.task());
      std::string error = cached->error;
      if (error.empty() && cached->task->key != b.task().task_key()) {
        // A driver and a worker of different Kiln versions: their programs would differ.
        error = "the workload rebuilds task '" + cached->task->key + "', not '" +
                b.task().task_key() + "' (kiln-worker and the job's driver differ in version?)";
      }
      Candidate c;
      if (error.empty()) {
        c = lower_candidate(*cached->task, b.config().index(), timeout_s);
      } else {
        c.start = Clock::now();
        *c.artifact.mutable_task() = b.task();
        *c.artifact.mutable_config() = b.config();
        c.artifact.set_format(v1::Artifact::FORMAT_SHARED_OBJECT);
        c.artifact.set_entry("candidate");
        fail(c, v1::ERROR_KIND_COMPILE_ERROR, error);
      }
      cands.push_back(std::move(c));
      build_ids.push_back(b.build_id());
    }

    // 2. Builds in parallel, each within its limit, reported as they finish (in order).
    struct Running {
      size_t index;
      std::future<Built> result;
      Clock::time_point deadline;
    };
    std::deque<Running> running;
    size_t next = 0;
    while (next < cands.size() || !running.empty()) {
      while (running.size() < static_cast<size_t>(options_.threads) && next < cands.size()) {
        Candidate& c = cands[next];
        if (!c.lowered) {
          report(build_ids[next], std::move(c.artifact));
        } else {
          running.push_back({next, start_build(c), deadline_after(c.timeout_s)});
        }
        ++next;
      }
      if (running.empty()) continue;
      Running r = std::move(running.front());
      running.pop_front();
      // Wait in slices so that stop() does not wait for a long build (it is abandoned), never
      // past the build's deadline: a build that ends after it is a timeout, however soon after.
      auto next_look = [&] { return std::min(r.deadline, Clock::now() + kPollSlice); };
      while (Clock::now() < r.deadline && !stopped() &&
             r.result.wait_until(next_look()) == std::future_status::timeout) {
      }
      if (stopped()) return;
      finish(cands[r.index], r.result, r.deadline);
      report(build_ids[r.index], std::move(cands[r.index].artifact));
    }
  }
}

}  // namespace kiln::worker
