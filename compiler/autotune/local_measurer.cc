// LocalMeasurer: reference files, parallel builds with a time limit (shared objects for CPU
// targets, DeviceProgram JSON files for GPU ones, VdlaProgram JSON files for the VDLA), one
// guarded child per measurement, records.
#include "compiler/autotune/local_measurer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <fstream>
#include <future>
#include <memory>
#include <thread>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/codegen/build_device.h"
#include "compiler/pass/split_host_device.h"
#include "compiler/target/target.h"
#include "compiler/vdla/program.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/measure_child.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/vdla_run.h"

namespace kiln::autotune {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BuildOutcome {
  ErrorKind error = ErrorKind::kNone;
  std::string message;
};

/// Writes what the runner loads for candidate `f` to `path`: a shared object for a CPU target,
/// the DeviceProgram's JSON (f is lower_device_program's) for a GPU one, the VdlaProgram's JSON
/// (f is lower_vdla's; the paper's prototype, vdla::Config{}) for the VDLA.
void build_candidate(const ir::PrimFunc& f, const target::Target& tgt, const std::string& path) {
  std::string json;
  if (tgt.kind == TargetKind::kVdla) {
    json = vdla_compiler::build_program(f, vdla::Config{}).to_json().dump();
  } else if (tgt.is_gpu()) {
    json = codegen::build_device(pass::split_host_device(f), tgt).to_json().dump();
  } else {
    codegen::export_library({f}, tgt, path);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << json;
  KILN_SYSTEM_CHECK(out.good()) << "cannot write the " << tgt.kind << " program to " << path;
}

/// Builds funcs[i] into paths[i], at most `threads` at once (0: one per CPU). A build still running
/// `timeout_s` after it started is reported as kCompileTimeout and abandoned: its thread finishes
/// in the background and its file is never used.
std::vector<BuildOutcome> build_parallel(const std::vector<ir::PrimFunc>& funcs,
                                         const std::vector<std::string>& paths,
                                         const target::Target& tgt, int threads, double timeout_s) {
  const size_t parallel = threads > 0 ? static_cast<size_t>(threads)
                                      : std::max<size_t>(1, std::thread::hardware_concurrency());
  std::vector<BuildOutcome> out(funcs.size());
  struct Running {
    size_t index;
    std::future<std::string> result;  ///< empty: built; else the error
    Clock::time_point deadline;
  };
  std::deque<Running> running;
  size_t next = 0;
  while (next < funcs.size() || !running.empty()) {
    while (running.size() < parallel && next < funcs.size()) {
      auto promise = std::make_shared<std::promise<std::string>>();
      running.push_back({next, promise->get_future(),
                         Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(timeout_s))});
      std::thread([promise, f = funcs[next], tgt, path = paths[next]] {
        try {
          build_candidate(f, tgt, path);
          promise->set_value("");
        } catch (const std::exception& e) {
          promise->set_value(e.what());
        }
      }).detach();
      ++next;
    }
    Running r = std::move(running.front());
    running.pop_front();
    if (r.result.wait_until(r.deadline) == std::future_status::timeout) {
      out[r.index] = {ErrorKind::kCompileTimeout,
                      "the build ran past " + std::to_string(timeout_s) + " s"};
    } else if (std::string err = r.result.get(); !err.empty()) {
      out[r.index] = {ErrorKind::kCompileError, err};
    }
  }
  return out;
}

}  // namespace

std::string host_device_fingerprint() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  return model + " x" + std::to_string(std::thread::hardware_concurrency());
}

std::string local_device_fingerprint(const std::string& target) {
  const target::Target t = target::Target::parse(target);
  if (t.kind == TargetKind::kVdla) return runtime::vdla_device_description();
  if (!t.is_gpu()) return host_device_fingerprint();
  return runtime::DeviceAPI::get(t.kind).description();
}

LocalMeasurer::LocalMeasurer(records::RecordStore& log, LocalMeasureOptions options)
    : log_(log), options_(std::move(options)) {}

LocalMeasurer::~LocalMeasurer() {
  for (const auto& [key, ref] : references_) {
    std::error_code ec;
    fs::remove_all(ref.dir, ec);
  }
}

void LocalMeasurer::begin_task(const Task& task) {
  task_key_.clear();  // until the reference is there
  if (auto it = references_.find(task.key); it != references_.end()) {
    ref_ = &it->second;
    task_key_ = task.key;
    return;
  }
  const TaskReference computed = compute_reference(task);
  static std::atomic<int> counter{0};
  Reference ref;
  ref.dir = fs::temp_directory_path() /
            ("kiln-tune-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(ref.dir);
  for (size_t i = 0; i < computed.inputs.size(); ++i) {
    ref.inputs.push_back((ref.dir / ("input" + std::to_string(i) + ".npy")).string());
    runtime::save_npy(ref.inputs.back(), computed.inputs[i]);
  }
  ref.output = (ref.dir / "reference.npy").string();
  runtime::save_npy(ref.output, computed.output);
  ref.max_abs = computed.max_abs;
  ref_ = &references_.emplace(task.key, std::move(ref)).first->second;
  task_key_ = task.key;
}

std::vector<records::MeasureRecord> LocalMeasurer::measure(const Task& task,
                                                           const std::vector<Candidate>& candidates,
                                                           uint64_t seed) {
  KILN_ICHECK(!task_key_.empty() && task.key == task_key_)
      << "LocalMeasurer::measure of task '" << task.key << "' after begin_task of '" << task_key_
      << "'";
  // An integer output (the VDLA's int8) must match its reference exactly.
  const bool exact = !task.out->dtype().is_float();
  const Tolerance tol = exact
                            ? Tolerance{0, 0}
                            : Tolerance{options_.rtol, options_.atol_scale * ref_->max_abs + 1e-7};
  std::vector<int64_t> oshape;
  for (const ir::Expr& d : task.out->shape()) oshape.push_back(*ir::as_const_int(d));

  // 1. Build every candidate in parallel, each within the compile time limit.
  const target::Target tgt = target::Target::parse(task.target);
  const bool gpu = task.on_gpu(), vdla = task.on_vdla();
  std::vector<ir::PrimFunc> funcs;
  std::vector<std::string> paths;
  for (const Candidate& c : candidates) {
    funcs.push_back(c.func);
    paths.push_back(
        (ref_->dir / ("candidate" + std::to_string(next_file_++) + (gpu || vdla ? ".json" : ".so")))
            .string());
  }
  const std::vector<BuildOutcome> built =
      build_parallel(funcs, paths, tgt, options_.build_threads, options_.build_timeout_s);

  // 2. Measure them one at a time, so that no two measurements share the machine; each record is
  //    in the log before the next candidate runs.
  std::vector<records::MeasureRecord> records;
  records.reserve(candidates.size());
  for (size_t k = 0; k < candidates.size(); ++k) {
    records::MeasureRecord rec;
    rec.target = task.target;
    rec.device = options_.device;
    rec.task_key = task.key;
    rec.config_index = candidates[k].config_index;
    rec.config = candidates[k].config;
    rec.search_seed = seed;
    if (built[k].error != ErrorKind::kNone) {
      rec.error = built[k].error;
      rec.error_msg = built[k].message;
    } else {
      runtime::RunRequest req;
      req.library = paths[k];
      req.function = "candidate";
      req.device = tgt.kind;
      for (const std::string& in : ref_->inputs)
        req.args.push_back(runtime::RunArg::make_input(in));
      req.args.push_back(runtime::RunArg::make_output(task.out->dtype().str(), oshape, ref_->output,
                                                      tol.rtol, tol.atol));
      req.repeat = options_.repeat;
      req.min_repeat_ms = options_.min_repeat_ms;
      req.cooldown_ms = options_.cooldown_ms;
      req.flush_cache = options_.flush_cache;
      req.threads = options_.threads;
      req.disturbed_retry_ms = options_.disturbed_retry_ms * (last_contended_ ? 0.1 : 1.0);
      const runtime::RunResult run = runtime::measure_in_child(req, options_.run_timeout_s);
      rec.error = run.error;
      rec.error_msg = run.message;
      rec.costs_s = run.costs_s;
      rec.contended = run.contended;
      if (run.ok()) last_contended_ = run.contended;
    }
    std::error_code ec;
    fs::remove(paths[k], ec);
    finish_record(rec, task);
    log_.append(rec);
    records.push_back(std::move(rec));
  }
  return records;
}

}  // namespace kiln::autotune
