// The graph build: an imported graph in, a bundle out (the executor's graph JSON, one shared object
// with a compiled function per fused group of nodes, the parameters). In order: nodes of constants
// computed at build time (fold_constants.h), batch norms folded into convolutions, constant dense
// and LSTM weights packed (pack_weights.h), convolutions moved to NCHW[x]c (alter_layout.h), nodes
// fused into kernels (fuse.h), intermediates placed in shared pools by liveness (memory_plan.h);
// most steps can be switched off for ablations.
//
//   runtime::Bundle b = graph::build_graph(graph::import_onnx("net.onnx"), "llvm -mcpu=native");
//   runtime::write_bundle("net.kiln", b);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/bundle.h"

namespace kiln::graph {

/// The arithmetic of convolutions and dense layers (everything else is float32 either way).
enum class Precision : uint8_t {
  kFloat32,
  /// bf16 operands, float32 sums and outputs: weights converted to bf16 at build time (round to
  /// nearest even) and packed in pairs along the reduction, activations converted by the kernels
  /// that read them (topi/conv2d_bf16.h); the plain blocked convolutions (alter_layout.h) and
  /// the packed Gemm / MatMul products (pack_weights.h). Needs an x86 target with avx512bf16
  /// (vdpbf16ps): any other is refused, naming what it has. The bundle's graph says
  /// "precision": "bf16".
  kBf16,
};
/// "fp32" or "bf16".
const char* precision_name(Precision p);
/// The precision named `s` ("fp32", "bf16"); kiln::Error naming `s` and the known names.
Precision parse_precision(const std::string& s);

struct BuildOptions {
  /// Called before function `index` (of `total`) is lowered, with its name; called
  /// once more with index == total and "generating code" before LLVM compiles and links them all.
  std::function<void(size_t index, size_t total, const std::string& what)> progress;
  /// Called as each graph pass starts ("folding constants", "realizing integer convolutions",
  /// "folding batch norms", "packing weights", "changing layouts", "fusing operators"): where a
  /// long or failing build is.
  std::function<void(const std::string& phase)> phase;
  /// Prints one line per function (its operators) to stderr.
  bool verbose = false;
  /// Folds batch norms into the preceding convolution or dense weights first.
  bool fold_batch_norm = true;
  /// Places intermediates by liveness in one shared pool (memory_plan.h); off: one pool each.
  bool plan_memory = true;
  /// Fuses operators into kernels (fuse.h); off: one kernel per node (the fusion ablation).
  bool fuse = true;
  /// Rewrites constant Gemm / MatMul / LSTM weights into the layouts their kernels read
  /// contiguously (pack_weights.h); off: the kernels read the weights as the model gives them.
  /// CPU targets only, as alter_layout.
  bool pack_weights = true;
  /// Moves convolutions and the elementwise chains between them to NCHW[x]c (alter_layout.h).
  bool alter_layout = true;
  /// alter_layout's padded blocks (AlterLayoutOptions::pad_to): -1 by the target (16 where its
  /// vectors hold 16 floats, else none), 0 none, else blocks of this many channels.
  int pad_channels_to = -1;
  /// Plain 3x3 convolutions of stride 1 by Winograd's F(m x m, 3 x 3) where it pays
  /// (AlterLayoutOptions::winograd); off: every convolution direct (for comparisons, or where
  /// F(4x4)'s rounding, about one more decimal digit than the direct sum's, matters).
  bool winograd = true;
  /// The products' arithmetic (see Precision).
  Precision precision = Precision::kFloat32;
  /// Target vdla: puts the QConv nodes the VDLA supports on it (offload_vdla.h); off, every
  /// QConv runs on the host CPU: the offload ablation, and the bit-exact reference of the VDLA's
  /// results (the CPU target itself computes quantized convolutions in ONNX Runtime's arithmetic).
  bool offload_vdla = true;
  /// Chooses the config of every tunable operator (the tuner's log); null: templates' defaults.
  autotune::ConfigSource* configs = nullptr;
};

/// What a build did, for reports and benchmarks.
struct BuildReport {
  size_t num_operators = 0;  ///< nodes of the graph given to the build
  size_t num_functions = 0;  ///< kernels in the bundle (fused groups)
  /// Distinct kernels compiled: groups whose lowered programs are equal up to renaming share one.
  size_t num_distinct_functions = 0;
  size_t constants_folded = 0;  ///< nodes computed at build time (fold_constants.h)
  size_t batch_norms_folded = 0;
  size_t qconvs_realized = 0;  ///< target vdla: power-of-two convolutions made QConv nodes
  /// Quantized convolutions made ConvInteger, and Gemm / MatMul made MatMulInteger, each with
  /// its requantization (realize_qlinear.h).
  size_t integer_convolutions = 0;
  size_t integer_products = 0;
  /// Why each quantized convolution or product that was not realized stays float.
  std::vector<std::string> qconvs_kept_float;
  size_t convolutions_trimmed = 0;  ///< taps reading only padding dropped (trim_conv_taps.h)
  size_t convolutions_blocked = 0;  ///< moved to NCHW[x]c by alter_layout
  size_t groups_padded = 0;       ///< grouped convolutions given whole-block groups (pad_groups.h)
  size_t layout_conversions = 0;  ///< LayoutTransform nodes it inserted
  size_t channel_gathers = 0;     ///< channel shuffles' gathers (channel_gather.h)
  /// Precision::kBf16: convolutions and dense products given bf16 operands.
  size_t bf16_convolutions = 0;
  size_t bf16_products = 0;
  int64_t intermediate_bytes_without_reuse = 0;  ///< one buffer per intermediate tensor
  int64_t intermediate_bytes = 0;                ///< what the bundle's pools hold
  /// Target vdla (offload_vdla.h): QConv nodes seen and offloaded, where each went and why a
  /// QConv stayed on the CPU, one line each.
  size_t vdla_convolutions = 0;
  size_t vdla_offloaded = 0;
  std::vector<std::string> vdla_placed;
  std::vector<std::string> vdla_kept_on_cpu;
};

/// Compiles the nodes of `g` for `target` into a bundle: an llvm CPU target string (one shared
/// object); "vdla" (the heterogeneous build: the QConv nodes the VDLA supports run there, each a
/// VDLA program called by a node with "target": "vdla", everything else on the host CPU,
/// "llvm -mcpu=native"; offload_vdla.h, a bundle of format version 3); or "cuda ..." /
/// "opencl ..." (a GPU bundle: one device program per group, the groups
/// scheduled with the GPU templates in NCHW, without alter_layout and weight packing; see
/// op_lowering.h). kiln::Error naming the node for an operator without a lowering (or, for a GPU,
/// without a GPU schedule yet) or a graph the executor cannot express (a graph output that no node
/// computes).
runtime::Bundle build_graph(const Graph& g, const std::string& target,
                            const BuildOptions& options = {}, BuildReport* report = nullptr);

/// The distinct tuning tasks of `g` (one per tunable operator workload, in order of first use):
/// the tunable operators build_graph would schedule, after the same graph passes. For target
/// "vdla" the VDLA's tasks only: a "vdla_conv2d" task (target vdla) per distinct QConv that
/// offload_vdla puts on the VDLA (the groups left on the host CPU are tuned for their llvm target).
/// `calls`, when given, gets per task the number of the graph's operators that are that task
/// (what one run of the model runs it: its weight when a budget is shared).
std::vector<autotune::Task> extract_tasks(const Graph& g, const std::string& target,
                                          const BuildOptions& options = {},
                                          std::vector<int>* calls = nullptr);

/// import_onnx, build_graph and write_bundle in one call.
/// `import` binds the model's symbolic input dimensions (OnnxImportOptions::input_shapes).
void compile_onnx(const std::string& onnx_path, const std::string& target,
                  const std::string& out_path, const BuildOptions& options = {},
                  BuildReport* report = nullptr, const OnnxImportOptions& import = {});

}  // namespace kiln::graph
