// The compiler from Python: `_kiln.compile`, `_kiln.tune` and `_kiln.quantize`, the same library
// calls as `kiln compile`, `kiln tune` and `kiln quantize` (client/), with the GIL released while
// they work and their progress handed to a Python callable (which takes the GIL back; a
// KeyboardInterrupt raised there stops the work). Bundles come back as their serialized bytes,
// which kiln.Bundle loads and can save.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/onnx_quantize.h"
#include "compiler/graph/tune_model.h"
#include "deploy/runtime/bundle.h"
#include "python/src/bindings.h"
#include "records/record_log.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;
using Progress = std::function<void(const py::dict&)>;

/// The model: a file when `path` is given, else the serialized ModelProto `data`.
graph::Graph import_model(const std::string& path, const std::optional<py::bytes>& data,
                          const std::string& origin, const Shapes& shapes) {
  graph::OnnxImportOptions import;
  import.input_shapes = shapes;
  if (!path.empty()) return graph::import_onnx(path, import);
  KILN_USER_CHECK(data.has_value()) << "no model given";
  return graph::import_onnx_bytes(std::string(*data), origin, import);
}

/// Calls `progress` (when set) with `event`, holding the GIL; a Python exception there (Ctrl-C)
/// propagates through the C++ caller.
void report(const Progress& progress, const std::function<py::dict()>& event) {
  if (!progress) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  progress(event());
}

graph::BuildOptions build_options(bool fuse, bool layout, const Progress& progress) {
  graph::BuildOptions o;
  o.fuse = fuse;
  o.alter_layout = layout;
  o.progress = [progress](size_t index, size_t total, const std::string& what) {
    report(progress, [&] {
      return py::dict(py::arg("stage") = "build", py::arg("index") = index,
                      py::arg("total") = total, py::arg("what") = what);
    });
  };
  return o;
}

py::dict build_report(const graph::BuildReport& r) {
  return py::dict(
      py::arg("kernels") = r.num_functions, py::arg("distinct_kernels") = r.num_distinct_functions,
      py::arg("operators") = r.num_operators, py::arg("constants_folded") = r.constants_folded,
      py::arg("batch_norms_folded") = r.batch_norms_folded,
      py::arg("convolutions_blocked") = r.convolutions_blocked,
      py::arg("layout_conversions") = r.layout_conversions,
      py::arg("bf16_convolutions") = r.bf16_convolutions,
      py::arg("bf16_products") = r.bf16_products,
      py::arg("intermediate_bytes") = r.intermediate_bytes,
      py::arg("qconvs_realized") = r.qconvs_realized,
      py::arg("integer_convolutions") = r.integer_convolutions,
      py::arg("integer_products") = r.integer_products,
      py::arg("qconvs_kept_float") = r.qconvs_kept_float);
}

py::tuple compile(const std::string& path, const std::optional<py::bytes>& data,
                  const std::string& origin, const std::string& target, const Shapes& shapes,
                  const std::string& records, bool fuse, bool layout, const std::string& precision,
                  const Progress& progress) {
  std::string bundle;
  graph::BuildReport rep;
  int tuned = 0, predicted = 0, defaults = 0;
  {
    py::gil_scoped_release release;
    const graph::Graph g = import_model(path, data, origin, shapes);
    graph::BuildOptions o = build_options(fuse, layout, progress);
    o.precision = graph::parse_precision(precision);
    std::optional<records::RecordLog> log;
    std::optional<autotune::LogConfigSource> source;
    if (!records.empty()) {
      log.emplace(records::RecordLog::open(records));
      source.emplace(autotune::LogConfigSource::with_kept_model(*log, target));
      o.configs = &*source;
    }
    bundle = runtime::serialize_bundle(graph::build_graph(g, target, o, &rep));
    if (source) {
      tuned = source->tuned(), predicted = source->predicted(), defaults = source->defaults();
    }
  }
  py::dict r = build_report(rep);
  r["tuned"] = tuned;
  r["predicted"] = predicted;
  r["defaults"] = defaults;
  return py::make_tuple(py::bytes(bundle), r);
}

py::tuple tune(const std::string& path, const std::optional<py::bytes>& data,
               const std::string& origin, const std::string& target, const Shapes& shapes,
               const std::string& records, int trials, int budget, double time_s,
               const std::string& explorer, const std::string& cost_model, bool transfer, int batch,
               uint64_t seed, int threads, const Progress& progress) {
  std::string bundle;
  graph::ModelTuneReport rep;
  {
    py::gil_scoped_release release;
    const graph::Graph g = import_model(path, data, origin, shapes);
    graph::ModelTuneOptions o;
    o.target = target;
    o.records = records;
    autotune::TasksTuneOptions& tuning = o.tuning;
    // trials 0: not given (200 per task; no cap under a budget or time limit).
    if (trials > 0) tuning.tune.trials = trials;
    tuning.budget = budget;
    tuning.time_s = time_s;
    if (budget > 0 || time_s > 0) tuning.max_trials = trials;
    tuning.tune.explorer = explorer;
    tuning.tune.cost_model = cost_model;
    o.pretrained = transfer;
    tuning.tune.batch = batch;
    tuning.tune.seed = seed;
    if (threads > 0) tuning.tune.local.threads = threads;
    o.build = build_options(true, true, progress);
    size_t total = 0;  // tasks
    o.on_tasks = [&](const std::vector<autotune::Task>& tasks, const std::vector<int>& calls) {
      total = tasks.size();
      report(progress, [&] {
        return py::dict(py::arg("stage") = "tasks", py::arg("total") = tasks.size(),
                        py::arg("calls") = calls);
      });
    };
    // estimated_latency_ms: the model's, every task's best (or a prediction from similar tasks
    // while unmeasured) times its calls; measurements: in the log over all tasks.
    tuning.on_progress = [&](size_t i, const autotune::Task& task, const autotune::TuneProgress& p,
                             const autotune::ScheduleStatus& s) {
      report(progress, [&] {
        py::dict d(py::arg("stage") = "tune", py::arg("task") = i, py::arg("tasks") = total,
                   py::arg("key") = task.key, py::arg("trials_done") = p.trials_done,
                   py::arg("trials_total") = p.trials_total, py::arg("best_gflops") = p.best_gflops,
                   py::arg("eta_s") = p.eta_s);
        d["estimated_latency_ms"] = s.estimated_latency_s * 1e3;
        d["predicted_tasks"] = s.predicted;
        d["measurements"] = s.measurements;
        d["budget"] = s.budget;
        return d;
      });
    };
    tuning.on_task_done = [&](size_t i, const autotune::Task& task, const autotune::TaskResult& r,
                              const std::string& why, const autotune::ScheduleStatus& s) {
      report(progress, [&] {
        py::dict d(py::arg("stage") = "task_done", py::arg("task") = i, py::arg("tasks") = total,
                   py::arg("key") = task.key, py::arg("trials") = r.trials,
                   py::arg("measured_now") = r.measured_now, py::arg("best_gflops") = r.best_gflops,
                   py::arg("errors") = r.errors);
        d["why"] = why;
        d["estimated_latency_ms"] = s.estimated_latency_s * 1e3;
        return d;
      });
    };
    bundle = runtime::serialize_bundle(graph::tune_model(g, o, &rep));
  }
  py::dict r = build_report(rep.build);
  r["tasks"] = rep.tasks;
  r["tuned"] = rep.tuned;
  r["predicted"] = rep.predicted;
  r["defaults"] = rep.defaults;
  r["cost_model"] = rep.after.why;
  r["measurements"] = rep.tuning.status.measurements;
  r["measured_now"] = rep.tuning.status.measured_now;
  r["estimated_latency_ms"] = rep.tuning.status.estimated_latency_s * 1e3;
  r["ended"] = rep.tuning.ended;
  return py::make_tuple(py::bytes(bundle), r);
}

py::tuple quantize(const std::string& path, const std::vector<std::string>& calibration,
                   const Shapes& shapes, const std::string& scales, const Progress& progress) {
  std::string qdq;
  graph::QuantizeReport rep;
  {
    py::gil_scoped_release release;
    graph::QuantizeOptions o;
    o.model = path;
    o.calibration = calibration;
    o.input_shapes = shapes;
    o.scales =
        scales == "pow2" ? graph::QuantizeScales::kPowerOfTwo : graph::QuantizeScales::kFloat;
    o.target = "llvm -mcpu=native";
    o.progress = [&](const std::string& step) {
      report(progress,
             [&] { return py::dict(py::arg("stage") = "quantize", py::arg("what") = step); });
    };
    qdq = graph::quantize_onnx(o, &rep);
  }
  py::dict r(py::arg("batch_norms_folded") = rep.batch_norms_folded,
             py::arg("convolutions_quantized") = rep.convolutions_quantized,
             py::arg("tensors_quantized") = rep.tensors_quantized, py::arg("samples") = rep.samples,
             py::arg("notes") = rep.notes);
  return py::make_tuple(py::bytes(qdq), r);
}

}  // namespace

void register_compile(py::module_& m) {
  m.def("compile", &compile, py::arg("path"), py::arg("data"), py::arg("origin"), py::arg("target"),
        py::arg("input_shapes"), py::arg("records"), py::arg("fuse"), py::arg("layout"),
        py::arg("precision"), py::arg("progress"),
        "Compiles a model (a file, or a ModelProto's bytes) into a bundle: (bytes, report).");
  m.def("tune", &tune, py::arg("path"), py::arg("data"), py::arg("origin"), py::arg("target"),
        py::arg("input_shapes"), py::arg("records"), py::arg("trials"), py::arg("budget"),
        py::arg("time_s"), py::arg("explorer"), py::arg("cost_model"), py::arg("transfer"),
        py::arg("batch"), py::arg("seed"), py::arg("threads"), py::arg("progress"),
        "Tunes a model's operators into a record log, then builds it: (bytes, report).");
  m.def("quantize", &quantize, py::arg("path"), py::arg("calibration"), py::arg("input_shapes"),
        py::arg("scales"), py::arg("progress"),
        "Quantizes a float model file to int8 with calibration .npy files: (QDQ bytes, report).");
}

}  // namespace kiln::python
