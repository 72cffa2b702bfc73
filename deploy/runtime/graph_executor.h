// The graph executor: runs a bundle. It loads the bundle's library, lays out the intermediate
// tensors in the pools of the memory plan, and calls the compiled functions in order.
//
// On a device (a GPU bundle, whose nodes call device programs; bundle.h), the same graph runs
// with its tensors in the device's memory: the parameters (and the inputs' defaults) are uploaded
// once when the executor is made, set_input copies an input in, the nodes' programs launch in
// order, and run() copies the outputs out at the end; nothing else crosses between host and
// device. The runtime has no views into a device buffer yet, so the intermediates cannot share
// one buffer per pool: they get one buffer per distinct (pool, offset) of the memory plan, which
// the tensors placed there share (the plan never places two tensors that are live together at
// overlapping bytes), so a chain of equal tensors still reuses its buffers.
//
// With the VDLA (a bundle of format version 3): nodes marked "target": "vdla" call the bundle's
// VDLA programs (deploy/vdla/driver/program.h) on a vdla::Device, the simulator with its cycle
// model; the other nodes call the host library as before. The VDLA shares DRAM with the CPU, as
// the paper's Pynq board does: every tensor of such a graph (pools, parameters, inputs, outputs)
// lives in one vdla::Dram, allocated once when the executor is made (with room set aside for the
// instruction streams, so that no pointer moves), each at a 256-byte boundary; so a VDLA node
// reads and writes the CPU nodes' tensors in place, with no copies. Each VDLA node's run replays
// its program on a fresh CommandQueue, runs it, and frees its stream again; its Stats (cycles,
// GEMM utilization, bytes moved) are kept per node for the last run (vdla_stats()). At load,
// every VDLA node's tensors are checked against its program: their count, each one's bytes, its
// address's alignment to the DMA rows of the buffer it meets, and every DMA's rows within it.
//
// The graph (JSON, written by the compiler's graph build):
//   {"format": "kiln.graph", "version": 1,
//    "storage": [{"bytes": 4096}, ...],                          // pools for intermediates
//    "tensors": [{"name": "x", "dtype": "float32", "shape": [1, 3, 8, 8],
//                 "kind": "input" | "param" | "intermediate" | "output",
//                 "storage": 0, "offset": 0,                       // intermediates
//                 "default": "x_default"}, ...],                   // inputs, version 2
//    "nodes": [{"name": "conv0", "func": "fused_conv2d_relu_0", "args": [0, 1, 2, 3],
//               "flops": 231211008, "bytes": 1806336, "ops": "Conv+Relu"},
//              {"name": "conv1", "func": "vdla_conv1", "args": [...], "target": "vdla"}, ...],
//    "inputs": [0], "outputs": [7]}
// A node calls `func` with the tensors `args` in order (its inputs, then its outputs). Its work,
// for the efficiency report (kernel_efficiency.h), is optional in every version (older bundles
// lack it; older runtimes ignore it): "flops", the operations of one call by the kernel's
// definition (te::count_flops), "bytes", what one call must move at least (each of its tensors
// once), both integers >= 0, and "ops", the fused operators. An input
// with a "default" (a parameter of the bundle, of the input's dtype and shape) holds that value
// until set_input replaces it; such graphs have version 2, which runtimes that read only version 1
// refuse by their version check rather than run without the default.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deploy/runtime/bundle.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/dram.h"
#include "deploy/vdla/driver/program.h"

namespace kiln::runtime {

class GraphExecutor {
 public:
  /// Loads a bundle file to run on `device` (kCpu: a CPU bundle, or one with VDLA programs; kVdla:
  /// a bundle with VDLA programs; kCuda, kOpenCL: a GPU bundle built for that kind); kiln::Error
  /// naming the file and the defect when it cannot, or saying which device the bundle was built for
  /// when it is not `device`, or why there is no such device.
  static GraphExecutor load(const std::string& path, TargetKind device = TargetKind::kCpu);
  /// A CPU bundle (with VDLA programs or not): loads its library (from memory), then from_parts. A
  /// GPU bundle: on_device on device 0 of `device` (DeviceAPI::get).
  static GraphExecutor from_bundle(Bundle bundle, const std::string& origin,
                                   TargetKind device = TargetKind::kCpu);
  /// The executor of `graph_json` over `params` and the functions of `library`, a module already
  /// loaded (a shared object, or any ModuleNode: tests and the fuzzer give their own);
  /// kiln::Error naming `origin` and the defect when the graph is malformed or does not fit them.
  /// Nodes marked "target": "vdla" call `vdla_programs` (see above).
  static GraphExecutor from_parts(const std::string& graph_json,
                                  std::map<std::string, NDArray> params, Module library,
                                  const std::string& origin,
                                  std::vector<vdla::VdlaProgram> vdla_programs = {});
  /// The executor of `graph_json` over `params` and `programs` on `device`: each node calls the
  /// program its "func" names, with the graph's tensors as the program's params (same count, and
  /// each of the param's dtype and shape). kiln::Error naming `origin` and the node, tensor or
  /// program when they do not fit, or when a program does not load on `device`.
  static GraphExecutor on_device(const std::string& graph_json,
                                 std::map<std::string, NDArray> params,
                                 std::vector<DeviceProgram> programs, DeviceAPI& device,
                                 const std::string& origin);

  /// The device the nodes run on; null when they run on the host.
  DeviceAPI* device() const { return device_; }

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
  /// Runs every node in order (on a device: then copies the outputs out, and returns when done).
  void run();

  /// What one call of a node does, as the graph says (see above); unknown in older bundles.
  struct NodeWork {
    std::optional<double> flops;  ///< operations (a multiply-add counts 2)
    std::optional<double> bytes;  ///< bytes moved at least: its tensors' sizes, each once
    std::string ops;              ///< the fused operators ("Conv+Add+Relu"); empty if not given
    std::vector<std::vector<int64_t>> shapes;  ///< its tensors' shapes, in argument order
  };
  /// Where the time of a run goes: one entry per node, in graph order.
  struct NodeTime {
    std::string name;  ///< the node (for a fused kernel, its master's name)
    std::string func;  ///< the compiled function
    double median_ms;  ///< median over the runs
    NodeWork work;
  };
  /// Runs the graph `runs` times (after one warm-up run), timing every node (on a device, by its
  /// events); the outputs are those of the last run. With `run_ms`, also each run's whole time
  /// (ms, wall clock, with a device's copies of the outputs), in order.
  std::vector<NodeTime> profile(int runs, std::vector<double>* run_ms = nullptr);
  /// Whether some node runs on the VDLA.
  bool has_vdla() const { return vdla_device_ != nullptr; }
  /// The VDLA nodes' counters and cycle-model time in the last run, in graph order.
  struct VdlaNodeStats {
    std::string name, func;
    vdla::Stats stats;
  };
  std::vector<VdlaNodeStats> vdla_stats() const;
  /// Their sum over the last run (cycles of the nodes one after the other).
  vdla::Stats vdla_total() const;

  /// Output i after run() (valid until the next run).
  const NDArray& output(size_t i) const;

 private:
  struct TensorInfo {
    std::string name;
    std::string kind;
    /// On the host: the tensor. On a device: the host side of an input, parameter or output (an
    /// intermediate has none); its shape and dtype are the tensor's.
    NDArray array;
    KilnDType dtype{};
    std::vector<int64_t> shape;
    bool has_default = false;  ///< an input that starts with its default value
    int device_buffer = -1;    ///< on a device: its buffer in device_buffers_
    uint64_t dram_addr = 0;    ///< with the VDLA: its address in dram_
  };
  struct Node {
    std::string name;
    std::string func;
    Function host_func;                       ///< on the host
    LoadedDeviceProgram* program = nullptr;   ///< on a device (one of programs_)
    const vdla::VdlaProgram* vdla = nullptr;  ///< on the VDLA (one of vdla_programs_)
    std::vector<uint64_t> vdla_addrs;         ///< its tensors' DRAM addresses
    std::vector<size_t> args;
    NodeWork work;  ///< shapes left empty (profile fills them from args)
  };

  /// Reads the graph: the host's tensors and functions, or (with device_ set) the device's
  /// buffers and the programs of `programs` the nodes call.
  void build(const std::string& graph_json, std::map<std::string, NDArray> params,
             std::vector<DeviceProgram> programs,
             std::vector<vdla::VdlaProgram> vdla_programs = {});
  /// Checks a VDLA node's tensors against its program (see above); kiln::Error naming them.
  void check_vdla_node(const Node& node, const std::string& what) const;
  /// The program a node calls on the device, loaded on first use; kiln::Error naming the node, the
  /// program and the tensor when its arguments do not fit the program's params.
  LoadedDeviceProgram* device_program(const std::string& func, const std::vector<size_t>& args,
                                      std::map<std::string, DeviceProgram>& programs,
                                      const std::string& what);
  void check_input(size_t tensor, const NDArray& value) const;
  void run_node(size_t i);
  double time_node(size_t i);
  /// On a device: waits for the nodes and copies every output out. On the host: nothing.
  void finish_run();

  Module module_;
  DeviceAPI* device_ = nullptr;
  std::vector<NDArray> pools_;
  std::vector<DeviceBuffer> device_buffers_;
  std::map<std::string, std::unique_ptr<LoadedDeviceProgram>> programs_;
  std::vector<TensorInfo> tensors_;
  std::vector<Node> nodes_;
  std::vector<size_t> inputs_, outputs_;
  std::vector<Arg> host_args_;
  std::vector<const DeviceBuffer*> device_args_;
  std::string origin_;
  // With the VDLA: the shared DRAM (kept alive by the arrays placed in it too), the device, the
  // programs by name, each VDLA node's last Stats (by node index) and the bytes set aside for a
  // node's instruction stream.
  std::shared_ptr<vdla::Dram> dram_;
  std::unique_ptr<vdla::Device> vdla_device_;
  std::map<std::string, vdla::VdlaProgram> vdla_programs_;
  std::map<size_t, vdla::Stats> vdla_stats_;
  uint8_t* dram_base_ = nullptr;
};

}  // namespace kiln::runtime
