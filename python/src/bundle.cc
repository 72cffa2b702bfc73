// The runtime from Python: `_kiln.Executor`, a GraphExecutor over a bundle (a file or bytes).
// Inputs arrive as NumPy arrays (kiln/bundle.py turns DLPack tensors and lists into them) and are
// read in place; `run` releases the GIL, so two Python threads run two bundles at once; outputs
// leave as new NumPy arrays (one copy out of the executor's pool, which the next run overwrites).
#include "deploy/runtime/bundle.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/target_kind.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/kernel_efficiency.h"
#include "deploy/runtime/machine_peak.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using runtime::GraphExecutor;
using runtime::NDArray;

std::vector<int64_t> shape_of(const py::array& a) {
  return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

/// The runtime's dtype of a NumPy array, read from its kind and size (no string on this path, which
/// every run takes); kiln::Error naming the input and the dtype when Kiln has no such type.
KilnDType dtype_of(const py::array& a, const std::string& input) {
  const py::dtype dt = a.dtype();
  const auto bits = static_cast<uint8_t>(dt.itemsize() * 8);
  switch (dt.kind()) {
    case 'f':
      if (bits == 16 || bits == 32 || bits == 64) return KilnDType{kKilnFloat, bits, 1};
      break;
    case 'i':
      return KilnDType{kKilnInt, bits, 1};
    case 'u':
      return KilnDType{kKilnUInt, bits, 1};
    case 'b':
      return runtime::kBool;
    default:
      break;
  }
  throw kiln::Error("input '" + input + "': Kiln has no dtype " +
                    std::string(py::str(dt.attr("name"))));
}

class Executor {
 public:
  Executor(const std::string& path, const std::string& device)
      : graph_(
            std::make_unique<GraphExecutor>(GraphExecutor::load(path, parse_device_kind(device)))) {
  }
  Executor(const py::bytes& data, const std::string& origin, const std::string& device) {
    std::string bytes = data;
    graph_ = std::make_unique<GraphExecutor>(GraphExecutor::from_bundle(
        runtime::deserialize_bundle(bytes, origin), origin, parse_device_kind(device)));
  }

  /// (name, shape, dtype, has_default) per input.
  py::list inputs() const {
    py::list out;
    for (size_t i = 0; i < graph_->num_inputs(); ++i) {
      out.append(py::make_tuple(graph_->input_name(i), graph_->input_shape(i),
                                runtime::dtype_to_string(graph_->input_dtype(i)),
                                graph_->input_has_default(i)));
    }
    return out;
  }
  /// (name, shape, dtype) per output.
  py::list outputs() const {
    py::list out;
    for (size_t i = 0; i < graph_->num_outputs(); ++i) {
      const NDArray& a = graph_->output(i);
      out.append(
          py::make_tuple(graph_->output_name(i), a.shape(), runtime::dtype_to_string(a.dtype())));
    }
    return out;
  }

  /// Copies `value` (C-contiguous) into input `index`; kiln::Error naming the input and both
  /// shapes or dtypes when they differ.
  void set_input(size_t index, const py::array& value) {
    const std::string& name = graph_->input_name(index);
    KILN_USER_CHECK(value.flags() & py::array::c_style)
        << "input '" << name << "' must be C-contiguous";
    const KilnDType dtype = dtype_of(value, name);
    // The array's memory, read in place: set_input copies it into the graph's input tensor.
    NDArray view = NDArray::external(const_cast<void*>(value.data()), value.nbytes(),
                                     shape_of(value), dtype, nullptr);
    graph_->set_input(index, view);
  }

  void run() {
    py::gil_scoped_release release;
    graph_->run();
  }

  /// Every input by position from NumPy arrays, the run, the outputs: kiln.Bundle.run's common
  /// call in one crossing into C++.
  py::list call(const py::tuple& args) {
    KILN_USER_CHECK(args.size() == graph_->num_inputs())
        << "the model has " << graph_->num_inputs() << " inputs, got " << args.size();
    for (size_t i = 0; i < args.size(); ++i) set_input(i, args[i].cast<py::array>());
    run();
    return results();
  }

  py::list results() const {
    py::list out;
    for (size_t i = 0; i < graph_->num_outputs(); ++i) {
      const NDArray& a = graph_->output(i);
      py::array copy(py::dtype(runtime::dtype_to_string(a.dtype())), a.shape());
      std::memcpy(copy.mutable_data(), a.data(), static_cast<size_t>(a.nbytes()));
      out.append(std::move(copy));
    }
    return out;
  }

  /// One dict per node (graph order) with its time and, on the CPU, its efficiency against the
  /// machine's measured roofs (kernel_efficiency.h; None where the bundle does not give its work),
  /// each run's ms, and the machine's peak as a dict (None on a device).
  py::tuple profile(int runs) {
    std::vector<GraphExecutor::NodeTime> nodes;
    std::vector<double> run_ms;
    std::optional<runtime::MachinePeak> peak;
    {
      py::gil_scoped_release release;
      nodes = graph_->profile(runs, &run_ms);
      if (graph_->device() == nullptr) peak = runtime::machine_peak();
    }
    auto opt = [](const std::optional<double>& v) -> py::object {
      return v ? py::object(py::float_(*v)) : py::object(py::none());
    };
    py::list rows;
    const runtime::MachinePeak roofs = peak.value_or(runtime::MachinePeak{});
    for (const runtime::KernelEfficiency& k : runtime::kernel_efficiency(nodes, roofs)) {
      py::dict row;
      row["node"] = k.node;
      row["function"] = k.func;
      row["median_ms"] = k.ms;
      row["share"] = k.share;
      row["ops"] = k.ops;
      row["shapes"] = k.shapes;
      row["flops"] = opt(k.flops);
      row["bytes"] = opt(k.bytes);
      const bool host = peak.has_value();
      row["gflops"] = opt(k.gflops);
      row["gbytes_per_s"] = opt(k.gbytes_per_s);
      row["peak_fraction"] = host ? opt(k.peak_fraction) : py::none();
      row["bandwidth_fraction"] = host ? opt(k.bandwidth_fraction) : py::none();
      row["bound"] = host && k.bound != runtime::Bound::kUnknown
                         ? py::object(py::str(runtime::bound_name(k.bound)))
                         : py::object(py::none());
      row["efficiency"] = host ? opt(k.efficiency) : py::none();
      row["lost_ms"] = host ? opt(k.lost_ms) : py::none();
      rows.append(std::move(row));
    }
    py::object machine = py::none();
    if (peak) {
      py::dict m;
      m["vector_isa"] = peak->vector_isa;
      m["core_flops"] = peak->core_flops;
      m["threads"] = peak->threads;
      m["flops"] = peak->flops;
      m["bytes_per_s"] = peak->bytes_per_s;
      m["balance"] = peak->balance();
      machine = std::move(m);
    }
    return py::make_tuple(rows, run_ms, machine);
  }

  std::string device() const {
    return std::string(graph_->device() == nullptr ? "cpu"
                                                   : device_kind_name(graph_->device()->kind()));
  }

 private:
  std::unique_ptr<GraphExecutor> graph_;
};

}  // namespace

void register_bundle(py::module_& m) {
  py::class_<Executor>(m, "Executor", "A loaded bundle, ready to run (wrapped by kiln.Bundle).")
      .def(py::init<const std::string&, const std::string&>(), py::arg("path"),
           py::arg("device") = "cpu")
      .def(py::init<const py::bytes&, const std::string&, const std::string&>(), py::arg("data"),
           py::arg("origin"), py::arg("device") = "cpu")
      .def("inputs", &Executor::inputs)
      .def("outputs", &Executor::outputs)
      .def("set_input", &Executor::set_input, py::arg("index"), py::arg("value"))
      .def("run", &Executor::run)
      .def("call", &Executor::call, py::arg("args"))
      .def("results", &Executor::results)
      .def("profile", &Executor::profile, py::arg("runs"))
      .def("device", &Executor::device);
}

}  // namespace kiln::python
