// The job runners of a Farm: each takes a runnable job, tunes its tasks with autotune::Tuner
// through a FarmMeasurer (builds on workers, measurements on devices), and builds its bundle.
#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/npy.h"
#include "server/farm.h"

namespace kiln::server {
namespace {

namespace fs = std::filesystem;
using tracker::JobId;
using tracker::JobRecord;
using tracker::JobState;

v1::TensorSpec spec_of(const runtime::NDArray& a) {
  v1::TensorSpec s;
  s.set_dtype(runtime::dtype_to_string(a.dtype()));
  for (int64_t d : a.shape()) s.add_shape(d);
  return s;
}

/// The Measurer of a farm job: each batch goes through Farm::measure_batch.
class FarmMeasurer : public autotune::Measurer {
 public:
  FarmMeasurer(Farm& farm, JobId job) : farm_(farm), job_(job) {}

  void begin_task(const autotune::Task& task) override {
    const autotune::TaskReference ref = autotune::compute_reference(task);
    wire_ = {};
    wire_.task_key = task.key;
    wire_.target = task.target;
    wire_.template_name = task.template_name;
    wire_.flops = task.flops;
    for (const runtime::NDArray& in : ref.inputs) wire_.inputs.push_back(spec_of(in));
    wire_.output = spec_of(ref.output);
    wire_.reference_npy = runtime::serialize_npy(ref.output);
    wire_.input_seed = ref.input_seed;
    // The local tuner's check (TuneOptions rtol, atol_scale).
    wire_.rtol = 1e-3;
    wire_.atol = 1e-4 * ref.max_abs + 1e-7;
  }

  std::vector<autotune::MeasureRecord> measure(const autotune::Task& task,
                                               const std::vector<autotune::Candidate>& cands,
                                               uint64_t seed) override {
    std::vector<autotune::MeasureRecord> recs = farm_.measure_batch(job_, wire_, cands, seed);
    const auto failed = std::count_if(recs.begin(), recs.end(), [](const auto& r) {
      return r.error != autotune::ErrorKind::kNone;
    });
    if (failed > 0) {
      farm_.update_job(job_, [&](JobRecord& j) { j.trials_failed += static_cast<uint64_t>(failed); });
    }
    return recs;
  }

 private:
  Farm& farm_;
  JobId job_;
  Farm::TaskWire wire_;
};

}  // namespace

void Farm::runner_loop() {
  while (true) {
    JobId id = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      jobs_cv_.wait(lock, [&] { return stopping_ || !runnable_.empty(); });
      if (stopping_) return;
      // The highest priority first; among equals, the oldest.
      auto best = runnable_.begin();
      int32_t best_priority = INT32_MIN;
      for (auto it = runnable_.begin(); it != runnable_.end(); ++it) {
        const auto j = store_.get(*it);
        const int32_t p = j ? j->priority : INT32_MIN;
        if (p > best_priority) {
          best_priority = p;
          best = it;
        }
      }
      id = *best;
      runnable_.erase(best);
      tracker_.queue().set_priority(id, best_priority == INT32_MIN ? 0 : best_priority);
    }
    run_job(id);
  }
}

void Farm::run_job(JobId id) {
  try {
    JobRecord j = job(id);
    if (tracker::is_final(j.state)) return;
    if (j.state == JobState::kQueued) j = transition_job(id, JobState::kRunning);
    const graph::Graph g = graph::import_onnx(model_path(id));
    const std::vector<autotune::Task> tasks = graph::extract_tasks(g, j.target);
    update_job(id, [&](JobRecord& r) {
      r.tasks_total = static_cast<uint32_t>(tasks.size());
      r.task_keys.clear();
      for (const autotune::Task& t : tasks) r.task_keys.push_back(t.key);
    });

    autotune::TuneOptions opts;
    opts.trials = static_cast<int>(j.trials);
    opts.batch = options_.batch;
    opts.explorer = options_.explorer;
    opts.seed = id;  // a job's search replays from its id
    FarmMeasurer measurer(*this, id);
    autotune::Tuner tuner(log_, opts, &measurer);
    std::vector<const autotune::Task*> history;
    uint64_t done_before = 0;  // trials of the tasks already tuned
    for (size_t i = 0; i < tasks.size(); ++i) {
      const autotune::Task& task = tasks[i];
      tuner.set_progress([&](const autotune::TuneProgress& p) {
        update_job(id, [&](JobRecord& r) {
          r.trials_done = done_before + static_cast<uint64_t>(p.trials_done);
        });
      });
      const autotune::TaskResult result = tuner.tune(task, history);
      done_before += static_cast<uint64_t>(result.trials);
      // The model's estimate: the sum of each task's best kernel time so far.
      double latency = 0;
      for (size_t k = 0; k <= i; ++k) {
        if (auto best = log_.best(tasks[k].key, tasks[k].target)) latency += best->cost();
      }
      update_job(id, [&](JobRecord& r) {
        r.tasks_done = static_cast<uint32_t>(i + 1);
        r.trials_done = done_before;
        r.best_latency_s = latency;
      });
      history.push_back(&task);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ || cancelled_.count(id)) return;
    }
    autotune::LogConfigSource source(log_);
    graph::BuildOptions build;
    build.configs = &source;
    const fs::path bundle = fs::path(options_.state_dir) / "bundles" / (std::to_string(id) + ".kiln");
    const fs::path tmp = bundle.string() + ".tmp";
    runtime::write_bundle(tmp.string(), graph::build_graph(g, j.target, build));
    fs::rename(tmp, bundle);
    transition_job(id, JobState::kDone);
  } catch (const JobStopped&) {
    // Cancelled (already recorded) or the farm is stopping (the job resumes after a restart).
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    const auto j = store_.get(id);
    if (j && !tracker::is_final(j->state)) {
      store_.transition(id, JobState::kFailed, e.what());
      add_event_locked("job_state", "job " + std::to_string(id) + " failed: " + e.what());
      bump_job_locked(id);
    }
  }
}

}  // namespace kiln::server
