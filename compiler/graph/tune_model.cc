#include "compiler/graph/tune_model.h"

#include <memory>
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
  autotune::LogModelOptions model_options;
  model_options.kind = tuning.tune.cost_model;
  std::unique_ptr<autotune::CostModel> prior;
  if (options.pretrained) {
    prior = autotune::pretrained_model(log, options.target, model_options, &rep.model);
    if (options.on_model) options.on_model(rep.model);
  }
  tuning.tune.prior = prior.get();
  rep.tuning = autotune::tune_tasks(tasks, calls, log, tuning);
  // What this run measured trains the kept model (once past the growth threshold), for the next
  // run and for the zero-shot configs of tasks with no successful measurement.
  if (options.pretrained) {
    prior = autotune::pretrained_model(log, options.target, model_options, &rep.after);
  }
  autotune::LogConfigSource source(log, prior.get(), rep.after.info.template_gains);
  BuildOptions build = options.build;
  build.configs = &source;
  runtime::Bundle bundle = build_graph(g, options.target, build, &rep.build);
  rep.tasks = tasks.size();
  rep.tuned = source.tuned();
  rep.predicted = source.predicted();
  rep.defaults = source.defaults();
  return bundle;
}

}  // namespace kiln::graph
