#include "compiler/graph/tune_model.h"

#include <vector>

#include "compiler/autotune/local_measurer.h"
#include "records/record_log.h"

namespace kiln::graph {

runtime::Bundle tune_model(const Graph& g, const ModelTuneOptions& options,
                           ModelTuneReport* report) {
  autotune::TasksTuneOptions tuning = options.tuning;
  tuning.tune.local.device = autotune::local_device_fingerprint(options.target);
  records::RecordLog log = records::RecordLog::open(options.records);
  std::vector<int> calls;
  const std::vector<autotune::Task> tasks = extract_tasks(g, options.target, {}, &calls);
  if (options.on_tasks) options.on_tasks(tasks, calls);
  ModelTuneReport local;
  ModelTuneReport& rep = report != nullptr ? *report : local;
  rep.tuning = autotune::tune_tasks(tasks, calls, log, tuning);
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
