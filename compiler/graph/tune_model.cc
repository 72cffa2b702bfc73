#include "compiler/graph/tune_model.h"

#include <vector>

#include "compiler/autotune/local_measurer.h"
#include "records/record_log.h"

namespace kiln::graph {

runtime::Bundle tune_model(const Graph& g, const ModelTuneOptions& options,
                           ModelTuneReport* report) {
  autotune::TuneOptions tune = options.tune;
  tune.local.device = autotune::local_device_fingerprint(options.target);
  records::RecordLog log = records::RecordLog::open(options.records);
  std::vector<int> calls;
  const std::vector<autotune::Task> tasks = extract_tasks(g, options.target, {}, &calls);
  if (options.on_tasks) options.on_tasks(tasks, calls);
  autotune::TasksTuneOptions o;
  o.tune = tune;
  o.budget = options.budget;
  o.time_s = options.time_s;
  o.max_trials = options.max_trials;
  o.patience = options.patience;
  const size_t total = tasks.size();
  if (options.on_progress) {
    o.on_progress = [&](size_t i, const autotune::Task& task, const autotune::TuneProgress& p,
                        const autotune::ScheduleStatus& s) {
      options.on_progress(i, total, task, p, s);
    };
  }
  if (options.on_task_done) {
    o.on_task_done = [&](size_t i, const autotune::Task& task, const autotune::TaskResult& r,
                         const std::string& why, const autotune::ScheduleStatus& s) {
      options.on_task_done(i, total, task, r, why, s);
    };
  }
  ModelTuneReport local;
  ModelTuneReport& rep = report != nullptr ? *report : local;
  rep.tuning = autotune::tune_tasks(tasks, calls, log, o);
  autotune::LogConfigSource source(log);
  BuildOptions build = options.build;
  build.configs = &source;
  runtime::Bundle bundle = build_graph(g, options.target, build, &rep.build);
  rep.tasks = tasks.size();
  rep.tuned = source.tuned();
  rep.defaults = source.defaults();
  return bundle;
}

}  // namespace kiln::graph
