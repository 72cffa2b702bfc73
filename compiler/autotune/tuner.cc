// The tuning loop: reference, explorer, candidates (lower -> dedupe -> build -> measure in a
// child), records, model refit.
#include "compiler/autotune/tuner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "compiler/autotune/cost_model.h"
#include "compiler/autotune/explorer.h"
#include "compiler/autotune/features.h"
#include "compiler/codegen/build.h"
#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "deploy/runtime/measure_child.h"
#include "deploy/runtime/npy.h"

namespace kiln::autotune {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// A folder for one task's files (inputs, references, candidate libraries), removed afterwards.
struct WorkDir {
  fs::path path;
  WorkDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() /
           ("kiln-tune-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ErrorKind from_run_error(runtime::ErrorKind e) {
  switch (e) {
    case runtime::ErrorKind::kNone:
      return ErrorKind::kNone;
    case runtime::ErrorKind::kRuntimeError:
      return ErrorKind::kRuntimeError;
    case runtime::ErrorKind::kRunTimeout:
      return ErrorKind::kRunTimeout;
    case runtime::ErrorKind::kCrash:
      return ErrorKind::kCrash;
    case runtime::ErrorKind::kWrongAnswer:
      return ErrorKind::kWrongAnswer;
  }
  return ErrorKind::kRuntimeError;
}

/// Random inputs for the task's placeholders (uniform in [-1, 1), seeded by the task key), and
/// the reference outputs of its naive schedule, as .npy files in `dir`.
struct Reference {
  std::vector<std::string> inputs;
  std::string output;
  double max_abs = 0;
};

Reference make_reference(const Task& task, const WorkDir& dir) {
  std::mt19937_64 rng(std::hash<std::string>{}(task.key));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<runtime::NDArray> arrays;
  Reference ref;
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const te::Tensor& t = task.inputs[i];
    KILN_USER_CHECK(t->dtype() == ir::kFloat32)
        << "tuning task '" << task.key << "': input '" << t->name() << "' is " << t->dtype().str()
        << "; the tuner measures float32 workloads";
    std::vector<int64_t> shape;
    for (const ir::Expr& d : t->shape()) shape.push_back(*ir::as_const_int(d));
    runtime::NDArray a = runtime::NDArray::empty(shape, runtime::kFloat32);
    float* p = a.data<float>();
    for (int64_t k = 0; k < a.num_elements(); ++k) p[k] = dist(rng);
    ref.inputs.push_back(dir.file("input" + std::to_string(i) + ".npy"));
    runtime::save_npy(ref.inputs.back(), a);
    arrays.push_back(std::move(a));
  }
  std::vector<int64_t> oshape;
  for (const ir::Expr& d : task.out->shape()) oshape.push_back(*ir::as_const_int(d));
  arrays.push_back(runtime::NDArray::empty(oshape, runtime::kFloat32));
  runtime::Function f =
      compiler::build(task.reference_schedule(), task.args(), "llvm", "reference").function("reference");
  std::vector<runtime::Arg> args(arrays.begin(), arrays.end());
  f.call(args);
  const runtime::NDArray& out = arrays.back();
  for (int64_t k = 0; k < out.num_elements(); ++k)
    ref.max_abs = std::max<double>(ref.max_abs, std::fabs(out.data<float>()[k]));
  ref.output = dir.file("reference.npy");
  runtime::save_npy(ref.output, out);
  return ref;
}

std::unique_ptr<Explorer> make_explorer(const TuneOptions& o, const ConfigSpace& space) {
  if (o.explorer == "random") return std::make_unique<RandomExplorer>(space, o.seed);
  if (o.explorer == "grid") return std::make_unique<GridExplorer>(space);
  if (o.explorer == "ga") return std::make_unique<GeneticExplorer>(space, o.seed);
  KILN_USER_CHECK(o.explorer == "xgb")
      << "tune: unknown explorer '" << o.explorer << "' (known: xgb, random, grid, ga)";
  // Fewer, shorter chains than TVM's defaults: every scored state is lowered for its features.
  ModelExplorerOptions mo;
  mo.parallel_size = 32;
  mo.n_iter = 80;
  mo.early_stop = 20;
  return std::make_unique<ModelExplorer>(space, o.seed, ScoreFn{}, mo);
}

/// Features of configs of one task, kept in `cache` (the Tuner's, so that later tasks reading
/// this one's records for transfer do not lower its configs again).
class FeatureCache {
 public:
  FeatureCache(const Task& task, bool loop, std::unordered_map<uint64_t, std::vector<float>>& cache)
      : task_(task), loop_(loop), cache_(cache) {}

  /// The features of config `index` whose program `f` was just lowered (no second lowering).
  void put(uint64_t index, const ir::PrimFunc& f) {
    if (loop_ && !cache_.count(index)) cache_.emplace(index, loop_features(f));
  }

  const std::vector<float>& get(uint64_t index) {
    auto it = cache_.find(index);
    if (it != cache_.end()) return it->second;
    std::vector<float> f;
    const Config cfg = task_.space.get(index);
    if (loop_) {
      try {
        f = loop_features(compiler::lower(task_.schedule(cfg), task_.args(), "candidate"));
      } catch (const std::exception&) {
        f.assign(kLoopFeatureLength, 0.0f);  // a config that does not lower scores as nothing
      }
    } else {
      f = knob_features(task_.space, cfg);
    }
    return cache_.emplace(index, std::move(f)).first->second;
  }

 private:
  const Task& task_;
  bool loop_;
  std::unordered_map<uint64_t, std::vector<float>>& cache_;
};

struct BuildOutcome {
  ErrorKind error = ErrorKind::kNone;
  std::string message;
};

/// Builds funcs[i] into paths[i], at most `threads` at once (0: one per CPU). A build still running
/// `timeout_s` after it started is reported as kCompileTimeout and abandoned: its thread finishes
/// in the background and its file is never used.
std::vector<BuildOutcome> build_parallel(const std::vector<ir::PrimFunc>& funcs,
                                         const std::vector<std::string>& paths,
                                         const target::Target& tgt, int threads,
                                         double timeout_s) {
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
          codegen::export_library({f}, tgt, path);
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

Tuner::Tuner(RecordLog& log, TuneOptions options)
    : log_(log), options_(std::move(options)), device_(host_device_fingerprint()) {
  KILN_USER_CHECK(options_.trials > 0 && options_.batch > 0)
      << "tune: trials and batch must be positive (got " << options_.trials << " and "
      << options_.batch << ")";
  KILN_USER_CHECK(options_.features == "loop" || options_.features == "knob")
      << "tune: unknown features '" << options_.features << "' (known: loop, knob)";
}

TaskResult Tuner::tune(const Task& task, const std::vector<const Task*>& history) {
  const auto t0 = Clock::now();
  TaskResult result;
  result.task_key = task.key;
  const std::string& target = task.target;
  std::vector<MeasureRecord> earlier = log_.records(task.key, target);
  auto finish = [&] {
    result.trials = static_cast<int>(log_.count(task.key, target));
    if (auto best = log_.best(task.key, target)) {
      result.has_best = true;
      result.best_gflops = best->gflops;
      result.best_config = best->config_index;
    }
    return result;
  };
  if (static_cast<int>(earlier.size()) >= options_.trials) return finish();

  std::unique_ptr<Explorer> explorer = make_explorer(options_, task.space);
  const bool use_model = options_.explorer == "xgb";
  const bool loop = options_.features == "loop";
  FeatureCache features(task, loop, features_[task.key]);
  CostModel model;

  // What the model learns from: this task's measurements, and the earlier tasks' (transfer).
  std::vector<std::vector<float>> x;
  std::vector<double> y;
  std::vector<int> group;
  double best = 0;
  for (const MeasureRecord& r : earlier) {
    if (r.config_index >= task.space.size()) continue;
    explorer->update({r.config_index}, {r.gflops});
    best = std::max(best, r.gflops);
    if (use_model) {
      x.push_back(features.get(r.config_index));
      y.push_back(r.gflops);
      group.push_back(0);
    }
  }
  if (use_model) {
    int gid = 1;
    for (const Task* h : history) {
      if (h->key == task.key) continue;
      FeatureCache hf(*h, loop, features_[h->key]);
      const std::vector<MeasureRecord> recs = log_.records(h->key, target);
      for (size_t i = 0; i < recs.size() && i < 200; ++i) {
        if (recs[i].config_index >= h->space.size()) continue;
        const std::vector<float>& f = hf.get(recs[i].config_index);
        if (!x.empty() && f.size() != x.front().size()) continue;
        x.push_back(f);
        y.push_back(recs[i].gflops);
        group.push_back(gid);
      }
      ++gid;
    }
  }
  auto* model_explorer = dynamic_cast<ModelExplorer*>(explorer.get());
  auto refit = [&] {
    if (!use_model || x.size() < 2) return;
    model.fit(x, y, group);
    model_explorer->set_score_fn([&](const std::vector<uint64_t>& idx) {
      std::vector<std::vector<float>> rows;
      rows.reserve(idx.size());
      for (uint64_t i : idx) rows.push_back(features.get(i));
      return model.predict(rows);
    });
  };
  refit();

  const WorkDir dir;
  const Reference ref = make_reference(task, dir);
  const target::Target tgt = target::Target::parse(target);
  std::unordered_map<uint64_t, MeasureRecord> by_program;  // structural hash -> measurement
  int done = static_cast<int>(earlier.size());
  int candidate = 0;

  while (done < options_.trials && !explorer->exhausted()) {
    // The template's default is measured first, so that the log's best is never a config worse
    // than what an untuned build would use (up to measurement noise).
    std::vector<uint64_t> batch;
    const uint64_t dflt = task.default_config.index();
    if (options_.default_first && !explorer->visited(dflt)) {
      explorer->mark_visited(dflt);
      batch.push_back(dflt);
    }
    for (uint64_t i : explorer->next_batch(static_cast<size_t>(
             std::min(options_.batch, options_.trials - done) - static_cast<int>(batch.size())))) {
      batch.push_back(i);
    }
    if (batch.empty()) break;
    // 1. Lower every candidate; a program equal to one measured before (or earlier in the batch)
    //    is measured once.
    struct Candidate {
      MeasureRecord rec;
      uint64_t hash = 0;
      ir::PrimFunc func;
      int same_as = -1;  ///< an earlier candidate of the batch with the same program
      bool reused = false;
      bool lowered = false;
    };
    std::vector<Candidate> cands(batch.size());
    std::unordered_map<uint64_t, int> first_in_batch;
    std::vector<int> to_build;
    for (size_t k = 0; k < batch.size(); ++k) {
      Candidate& c = cands[k];
      const Config cfg = task.space.get(batch[k]);
      c.rec.target = target;
      c.rec.device = device_;
      c.rec.task_key = task.key;
      c.rec.config_index = batch[k];
      c.rec.config = cfg.str();
      c.rec.search_seed = options_.seed;
      try {
        c.func = compiler::lower(task.schedule(cfg), task.args(), "candidate");
        c.hash = ir::structural_hash(c.func);
        if (use_model) features.put(batch[k], c.func);
        c.lowered = true;
      } catch (const std::exception& e) {
        c.rec.error = ErrorKind::kCompileError;
        c.rec.error_msg = e.what();
        continue;
      }
      if (auto it = by_program.find(c.hash); it != by_program.end()) {
        c.rec.costs_s = it->second.costs_s;
        c.rec.error = it->second.error;
        c.rec.error_msg = it->second.error_msg;
        c.reused = true;
      } else if (auto b = first_in_batch.find(c.hash); b != first_in_batch.end()) {
        c.same_as = b->second;
        c.reused = true;
      } else {
        first_in_batch.emplace(c.hash, static_cast<int>(k));
        to_build.push_back(static_cast<int>(k));
      }
    }
    // 2. Build the distinct programs in parallel, each within the compile time limit.
    std::vector<ir::PrimFunc> funcs;
    std::vector<std::string> paths;
    for (int k : to_build) {
      funcs.push_back(cands[static_cast<size_t>(k)].func);
      paths.push_back(dir.file("candidate" + std::to_string(candidate++) + ".so"));
    }
    const std::vector<BuildOutcome> built =
        build_parallel(funcs, paths, tgt, options_.build_threads, options_.build_timeout_s);
    // 3. Measure them one at a time, so that no two measurements share the machine.
    for (size_t b = 0; b < to_build.size(); ++b) {
      Candidate& c = cands[static_cast<size_t>(to_build[b])];
      if (built[b].error != ErrorKind::kNone) {
        c.rec.error = built[b].error;
        c.rec.error_msg = built[b].message;
      } else {
        runtime::RunRequest req;
        req.library = paths[b];
        req.function = "candidate";
        for (const std::string& in : ref.inputs) req.args.push_back(runtime::RunArg::make_input(in));
        std::vector<int64_t> oshape;
        for (const ir::Expr& d : task.out->shape()) oshape.push_back(*ir::as_const_int(d));
        req.args.push_back(runtime::RunArg::make_output(
            "float32", oshape, ref.output, options_.rtol, options_.atol_scale * ref.max_abs + 1e-7));
        req.repeat = options_.repeat;
        req.min_repeat_ms = options_.min_repeat_ms;
        req.cooldown_ms = options_.cooldown_ms;
        req.flush_cache = options_.flush_cache;
        req.threads = options_.threads;
        const runtime::RunResult run = runtime::measure_in_child(req, options_.run_timeout_s);
        c.rec.error = from_run_error(run.error);
        c.rec.error_msg = run.message;
        c.rec.costs_s = run.costs_s;
      }
      std::error_code ec;
      fs::remove(paths[b], ec);
      by_program.emplace(c.hash, c.rec);
    }
    // 4. Records, in batch order.
    std::vector<double> throughput;
    for (size_t k = 0; k < cands.size(); ++k) {
      Candidate& c = cands[k];
      if (c.same_as >= 0) {
        const MeasureRecord& m = cands[static_cast<size_t>(c.same_as)].rec;
        c.rec.costs_s = m.costs_s;
        c.rec.error = m.error;
        c.rec.error_msg = m.error_msg;
      }
      MeasureRecord& rec = c.rec;
      if (rec.error == ErrorKind::kNone && !rec.costs_s.empty()) {
        rec.gflops = task.flops / rec.cost() / 1e9;
      } else {
        rec.costs_s.clear();
        ++result.errors[error_kind_name(rec.error)];
      }
      rec.timestamp_ms = now_ms();
      log_.append(rec);
      ++done;
      ++result.measured_now;
      if (c.reused) ++result.reused;
      best = std::max(best, rec.gflops);
      result.curve.push_back(best);
      throughput.push_back(rec.gflops);
      if (use_model) {
        x.push_back(features.get(batch[k]));
        y.push_back(rec.gflops);
        group.push_back(0);
      }
    }
    explorer->update(batch, throughput);
    refit();
    if (options_.progress) {
      TuneProgress p;
      p.task_key = task.key;
      p.trials_done = done;
      p.trials_total = options_.trials;
      p.best_gflops = best;
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
      const int now = result.measured_now;
      p.eta_s = now > 0 ? p.elapsed_s / now * (options_.trials - done) : 0;
      options_.progress(p);
    }
  }
  return finish();
}

Config LogConfigSource::choose(const Task& task) {
  if (auto best = log_.best(task.key, task.target); best && best->config_index < task.space.size()) {
    ++tuned_;
    return task.space.get(best->config_index);
  }
  ++defaults_;
  return task.default_config;
}

}  // namespace kiln::autotune
