// The graph executor: runs a bundle. It loads the bundle's library, lays out the intermediate
// tensors in the pools of the memory plan, and calls the compiled functions in order.
//
// The graph (JSON, written by the compiler's graph build):
//   {"format": "kiln.graph", "version": 1,
//    "storage": [{"bytes": 4096}, ...],                          // pools for intermediates
//    "tensors": [{"name": "x", "dtype": "float32", "shape": [1, 3, 8, 8],
//                 "kind": "input" | "param" | "intermediate" | "output",
//                 "storage": 0, "offset": 0,                       // intermediates
//                 "default": "x_default"}, ...],                   // inputs, version 2
//    "nodes": [{"name": "conv0", "func": "fused_conv2d_relu_0", "args": [0, 1, 2, 3]}, ...],
//    "inputs": [0], "outputs": [7]}
// A node calls `func` with the tensors `args` in order (its inputs, then its outputs). An input
// with a "default" (a parameter of the bundle, of the input's dtype and shape) holds that value
// until set_input replaces it; such graphs have version 2, which runtimes that read only version 1
// refuse by their version check rather than run without the default.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "deploy/runtime/bundle.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

class GraphExecutor {
 public:
  /// Loads a bundle file; kiln::Error naming the file and the defect when it cannot.
  static GraphExecutor load(const std::string& path);
  /// Loads the bundle's library (through a private temporary file), then from_parts.
  static GraphExecutor from_bundle(Bundle bundle, const std::string& origin);
  /// The executor of `graph_json` over `params` and the functions of `library`, a module already
  /// loaded (a shared object, or any ModuleNode: tests and the fuzzer give their own);
  /// kiln::Error naming `origin` and the defect when the graph is malformed or does not fit them.
  static GraphExecutor from_parts(const std::string& graph_json,
                                  std::map<std::string, NDArray> params, Module library,
                                  const std::string& origin);

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const std::string& input_name(size_t i) const;
  const std::string& output_name(size_t i) const;
  const std::vector<int64_t>& input_shape(size_t i) const;
  KilnDType input_dtype(size_t i) const;
  /// Whether input i has a default value, so that the caller need not give it.
  bool input_has_default(size_t i) const;

  /// Copies `value` into input `name` (replacing its default, if it has one); kiln::Error naming
  /// the input when its shape or dtype differ.
  void set_input(const std::string& name, const NDArray& value);
  void set_input(size_t index, const NDArray& value);
  /// Runs every node in order.
  void run();

  /// Where the time of a run goes: one entry per node, in graph order.
  struct NodeTime {
    std::string name;   ///< the node (for a fused kernel, its master's name)
    std::string func;   ///< the compiled function
    double median_ms;   ///< median over the runs
  };
  /// Runs the graph `runs` times (after one warm-up run), timing every node; the outputs are those
  /// of the last run. With `run_ms`, also each run's whole time (ms), in order.
  std::vector<NodeTime> profile(int runs, std::vector<double>* run_ms = nullptr);
  /// Output i after run() (valid until the next run).
  const NDArray& output(size_t i) const;

 private:
  struct TensorInfo {
    std::string name;
    std::string kind;
    NDArray array;
    bool has_default = false;  ///< an input that starts with its default value
  };
  struct Node {
    std::string name;
    Function func;
    std::vector<size_t> args;
  };

  void check_input(size_t tensor, const NDArray& value) const;

  Module module_;
  std::vector<NDArray> pools_;
  std::vector<TensorInfo> tensors_;
  std::vector<Node> nodes_;
  std::vector<size_t> inputs_, outputs_;
  std::string origin_;
};

}  // namespace kiln::runtime
