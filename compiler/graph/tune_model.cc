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
  const std::vector<autotune::Task> tasks = extract_tasks(g, options.target);
  if (options.on_tasks) options.on_tasks(tasks.size());
  std::vector<const autotune::Task*> history;  // earlier tasks: the cost model learns from them
  autotune::Tuner tuner(log, tune);            // one for all tasks: it keeps their features
  for (size_t i = 0; i < tasks.size(); ++i) {
    const autotune::Task& task = tasks[i];
    if (options.on_progress) {
      tuner.set_progress(
          [&](const autotune::TuneProgress& p) { options.on_progress(i, tasks.size(), task, p); });
    }
    const autotune::TaskResult r = tuner.tune(task, history);
    if (options.on_task_done) options.on_task_done(i, tasks.size(), task, r);
    history.push_back(&task);
  }
  autotune::LogConfigSource source(log);
  BuildOptions build = options.build;
  build.configs = &source;
  ModelTuneReport local;
  ModelTuneReport& rep = report != nullptr ? *report : local;
  runtime::Bundle bundle = build_graph(g, options.target, build, &rep.build);
  rep.tasks = tasks.size();
  rep.tuned = source.tuned();
  rep.defaults = source.defaults();
  return bundle;
}

}  // namespace kiln::graph
