#include "tuner/job_driver.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "base/error.h"
#include "compiler/autotune/log_model.h"
#include "compiler/autotune/tune_tasks.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/bundle.h"
#include "tuner/farm_measurer.h"
#include "tuner/farm_records.h"

namespace kiln::tuner {
namespace {

volatile bool never = false;  // read at each level, so the recursion is not made a loop

/// Recursion without end, as a pass recursing as deep as a huge graph would.
[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (never) return frame[0];
  return recurse(depth + 1) + frame[0];
}

}  // namespace

void maybe_inject_fault(const std::string& model_name, const std::string& phase) {
  const char* env = std::getenv("KILN_DRIVER_FAULT");
  if (env == nullptr) return;
  std::istringstream specs(env);
  std::string spec;
  while (std::getline(specs, spec, ';')) {
    const size_t a = spec.find(':');
    const size_t b = a == std::string::npos ? a : spec.find(':', a + 1);
    if (b == std::string::npos) continue;
    if (spec.substr(0, a) != model_name || phase.rfind(spec.substr(b + 1), 0) != 0) continue;
    const std::string action = spec.substr(a + 1, b - a - 1);
    std::cerr << "kiln-tuner: KILN_DRIVER_FAULT: " << action << " while " << phase << std::endl;
    if (action == "crash") {
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    } else if (action == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    } else if (action == "oom") {
      rlimit limit{};
      ::getrlimit(RLIMIT_AS, &limit);
      KILN_ICHECK(limit.rlim_cur != RLIM_INFINITY) << "KILN_DRIVER_FAULT oom needs a memory limit";
      std::vector<std::unique_ptr<char[]>> hog;
      for (;;) hog.emplace_back(new char[64u << 20]);
    } else if (action == "recurse") {
      recurse(0);
    }
  }
}

void JobDriver::enter(const std::string& phase) {
  v1::DriverProgress p;
  p.set_phase(phase);
  enter(std::move(p));
}

void JobDriver::enter(v1::DriverProgress progress) {
  const std::string phase = progress.phase();
  client_.progress(std::move(progress));
  std::cerr << "kiln-tuner: job " << client_.job_id() << ": " << phase << std::endl;
  maybe_inject_fault(name_, phase);
}

namespace {

/// The bundle's configs: each of the job's tasks' best in kilnd's log, or the zero-shot pick of
/// the log's cost model (LogConfigSource), and for a task of another target (the host CPU's groups
/// of a vdla job's heterogeneous build) its template's default: the job tunes its own target's
/// tasks, and kilnd answers for those alone.
class JobConfigSource : public autotune::ConfigSource {
 public:
  JobConfigSource(records::RecordStore& records, std::string target,
                  const autotune::CostModel* model, std::map<std::string, double> template_gains)
      : log_(records, model, std::move(template_gains)), target_(std::move(target)) {}
  space::Config choose(const autotune::Task& task) override {
    return task.target == target_ ? log_.choose(task) : task.default_config;
  }
  const autotune::LogConfigSource& log() const { return log_; }

 private:
  autotune::LogConfigSource log_;
  std::string target_;
};

}  // namespace

void JobDriver::run() {
  const v1::DriverJob job = client_.job();
  const auto received = std::chrono::steady_clock::now();  // when its time left was told
  name_ = job.name();
  const std::string& target = job.target();
  enter("importing the model");
  graph::OnnxImportOptions import;
  for (const v1::InputShape& shape : job.input_shapes()) {
    import.input_shapes[shape.name()] =
        std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
  }
  // Messages name the model as the client named it.
  const graph::Graph g = graph::import_onnx_bytes(client_.model(), job.name(), import);
  graph::BuildOptions extract;
  extract.phase = [&](const std::string& p) { enter(p + " (extracting tasks)"); };
  std::vector<int> calls;  // how many times one run of the model runs each task
  const std::vector<autotune::Task> tasks = graph::extract_tasks(g, target, extract, &calls);
  client_.progress(tuning_progress(tasks));

  FarmRecords records(client_);
  FarmMeasurer measurer(client_);
  autotune::TasksTuneOptions o = tuning_options(
      job, std::chrono::duration<double>(std::chrono::steady_clock::now() - received).count());
  const bool scheduled = o.budget > 0 || o.time_s > 0;
  // Each step of a task is a phase ("tuning task 3/9 (KEY)"), so a crash or a hang is reported
  // with the task it happened at. The fixed split tunes the tasks in order, each in one step, and
  // announces a task the shared log already holds in full too; the scheduler's steps go to any
  // task, each announced as it starts.
  size_t announced = 0;
  auto announce = [&](size_t i) {
    v1::DriverProgress p;
    p.set_phase("tuning task " + std::to_string(i + 1) + "/" + std::to_string(tasks.size()) + " (" +
                tasks[i].key + ")");
    p.set_tuning_task(static_cast<uint32_t>(i));
    enter(std::move(p));
  };
  auto announce_through = [&](size_t last) {
    for (; announced <= last && announced < tasks.size(); ++announced) announce(announced);
  };
  o.on_step = [&](size_t i, const autotune::Task&) {
    if (scheduled)
      announce(i);
    else
      announce_through(i);
  };
  // The job's latency is the model's estimate (every task's best, or a prediction from similar
  // tasks while one is unmeasured, times its calls), not a sum over the tasks tuned so far; its
  // trials are the log's measurements of its tasks, what a budget counts.
  std::vector<uint32_t> done_tasks;  // in the order they got no more trials
  auto report = [&](const autotune::ScheduleStatus& s, bool with_done) {
    v1::DriverProgress p;
    if (with_done) p.mutable_done_tasks()->Add(done_tasks.begin(), done_tasks.end());
    p.set_trials_done(static_cast<uint64_t>(s.measurements));
    if (s.estimated_latency_s > 0) p.set_best_latency_s(s.estimated_latency_s);
    client_.progress(std::move(p));
  };
  o.on_progress = [&](size_t, const autotune::Task&, const autotune::TuneProgress&,
                      const autotune::ScheduleStatus& s) { report(s, false); };
  o.on_task_done = [&](size_t i, const autotune::Task&, const autotune::TaskResult&,
                       const std::string&, const autotune::ScheduleStatus& s) {
    done_tasks.push_back(static_cast<uint32_t>(i));
    report(s, true);
  };
  // The search starts from the cost model pre-trained on every record of the target in the farm's
  // log (other jobs' and models' too), kept in kilnd's log; trained again after the job once the
  // records grew, for the next job and for the bundle's tasks with no successful measurement.
  autotune::LogModelReport r;  // the latest model's
  auto cost_model = [&](const char* when) {
    enter("preparing the cost model (" + std::string(when) + ")");
    std::unique_ptr<autotune::CostModel> m = autotune::pretrained_model(records, target, {}, &r);
    std::cerr << "kiln-tuner: job " << client_.job_id() << ": cost model: " << r.why << std::endl;
    return m;
  };
  const auto model_start = std::chrono::steady_clock::now();
  std::unique_ptr<autotune::CostModel> prior = cost_model("before tuning");
  o.tune.prior = prior.get();
  if (o.time_s > 0) {  // the job's time limit counts the training too (never 0: no limit)
    o.time_s = std::max(
        1e-3,
        o.time_s -
            std::chrono::duration<double>(std::chrono::steady_clock::now() - model_start).count());
  }
  const autotune::TasksTuneReport tuned = autotune::tune_tasks(tasks, calls, records, o, &measurer);
  if (!scheduled && !tasks.empty()) announce_through(tasks.size() - 1);
  std::cerr << "kiln-tuner: job " << client_.job_id() << ": tuning ended (" << tuned.ended
            << "): " << tuned.status.measurements << " measurements in the log ("
            << tuned.status.measured_now << " now)" << std::endl;
  prior = cost_model("after tuning");

  JobConfigSource source(records, target, prior.get(), r.info.template_gains);
  graph::BuildOptions build;
  build.configs = &source;
  build.phase = [&](const std::string& p) { enter(p); };
  build.progress = [&](size_t i, size_t total, const std::string& what) {
    enter(i < total ? "compiling " + what + " (" + std::to_string(i + 1) + "/" +
                          std::to_string(total) + ")"
                    : what);
  };
  const std::string bundle = runtime::serialize_bundle(graph::build_graph(g, target, build));
  std::cerr << "kiln-tuner: job " << client_.job_id() << ": configs: " << source.log().tuned()
            << " measured, " << source.log().predicted() << " predicted by the cost model, "
            << source.log().defaults() << " default" << std::endl;
  enter("uploading the bundle");
  client_.upload(bundle);
}

autotune::TasksTuneOptions tuning_options(const v1::DriverJob& job, double spent_s) {
  autotune::TasksTuneOptions o;
  if (job.trials() > 0) o.tune.trials = static_cast<int>(job.trials());  // 0: a schedule's, no cap
  o.tune.batch = static_cast<int>(job.batch());
  o.tune.explorer = job.explorer();
  o.tune.seed = job.seed();
  o.budget = static_cast<int>(job.budget());
  if (job.has_time_left_s()) {
    // A limit already spent still schedules: no round starts, and the log's best are built.
    constexpr double kSpent = 1e-3;
    o.time_s = std::max(job.time_left_s() - spent_s, kSpent);
  }
  if (o.budget > 0 || o.time_s > 0) {
    o.max_trials = static_cast<int>(job.trials());
    if (job.has_early_stop()) o.patience = static_cast<int>(job.early_stop());
  }
  return o;
}

v1::DriverProgress tuning_progress(const std::vector<autotune::Task>& tasks) {
  v1::DriverProgress p;
  p.set_phase("tuning");
  p.set_has_tasks(true);
  for (const autotune::Task& t : tasks) {
    v1::TaskRef* r = p.add_tasks();
    r->set_task_key(t.key);
    r->set_target(t.target);
    r->set_template_name(t.template_name);
    r->set_workload(t.workload);
  }
  return p;
}

}  // namespace kiln::tuner
