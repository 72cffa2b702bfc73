// build_graph: fuse the nodes into groups (fuse.h), lower each group to one function
// (op_lowering), compile all functions into one shared object (for a GPU target: each into a
// device program, compiler::build_gpu), and describe the calls in the executor's graph JSON
// (deploy/runtime/graph_executor.h). Tensors are numbered in order of first
// appearance: the graph inputs, then each function's arguments.
#include "compiler/graph/graph_build.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "base/json.h"
#include "compiler/codegen/build.h"
#include "compiler/graph/alter_layout.h"
#include "compiler/graph/channel_gather.h"
#include "compiler/graph/fold_batch_norm.h"
#include "compiler/graph/fold_constants.h"
#include "compiler/graph/fold_pad.h"
#include "compiler/graph/fuse.h"
#include "compiler/graph/lift_conv1d.h"
#include "compiler/graph/memory_plan.h"
#include "compiler/graph/offload_vdla.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/op_lowering.h"
#include "compiler/graph/pack_weights.h"
#include "compiler/graph/pad_groups.h"
#include "compiler/graph/realize_qconv.h"
#include "compiler/graph/realize_qlinear.h"
#include "compiler/graph/sink_reshapes.h"
#include "compiler/graph/split_to_slices.h"
#include "compiler/graph/tensor_limits.h"
#include "compiler/graph/trim_conv_taps.h"
#include "compiler/ir/equal.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "compiler/te/flop_count.h"
#include "compiler/vdla/conv2d_schedule.h"
#include "compiler/vdla/program.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph {
namespace {

using kiln::Json;

/// A C identifier from a node name: other characters become '_', a leading digit gets a prefix.
std::string function_name(const std::string& node_name, size_t index) {
  std::string s;
  for (char c : node_name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "node_" + s;
  return s + "_" + std::to_string(index);
}

/// A kernel's work, for the runtime's efficiency report (kernel_efficiency.h): "flops", the
/// operations of its definition (te::count_flops; left out when it cannot be counted), "bytes",
/// what it must move at least (each tensor it reads or writes once, weights included), and "ops",
/// the group's operators in order ("Conv+Add+Relu").
void add_work(Json::Object& node, std::optional<double> flops, const Graph& g,
              const std::vector<ValueId>& values, const std::vector<std::string>& ops) {
  if (flops) node["flops"] = static_cast<int64_t>(std::llround(*flops));
  int64_t bytes = 0;
  for (ValueId v : std::set<ValueId>(values.begin(), values.end()))
    bytes += runtime::NDArray::nbytes_for(g.value(v).shape, g.value(v).dtype);
  node["bytes"] = bytes;
  std::string text;
  for (const std::string& op : ops) text += (text.empty() ? "" : "+") + op;
  node["ops"] = text;
}

Json shape_json(const std::vector<int64_t>& shape) {
  Json::Array a;
  for (int64_t d : shape) a.emplace_back(d);
  return a;
}

/// The executor graph's tensors, numbered as they are first met.
class TensorTable {
 public:
  /// With a memory plan, intermediates go where it places them; without, each gets its own pool.
  TensorTable(const Graph& g, const MemoryPlan* plan) : g_(g), plan_(plan) {
    if (plan_ == nullptr) return;
    for (int64_t bytes : plan_->pool_bytes) {
      Json::Object pool;
      pool["bytes"] = std::max<int64_t>(1, bytes);
      storage_.emplace_back(std::move(pool));
    }
  }

  /// The index of `v`, adding it (and its pool or parameter) on first use.
  int64_t index(ValueId v, runtime::Bundle* bundle) {
    auto it = index_.find(v);
    if (it != index_.end()) return it->second;
    const Value& val = g_.value(v);
    Json::Object t;
    t["dtype"] = runtime::dtype_to_string(val.dtype);
    t["shape"] = shape_json(val.shape);
    std::string name = val.name;
    if (val.is_constant()) {
      name = unique_param_name(val.name);
      bundle->params.emplace(name, val.data->copy());
      t["kind"] = "param";
    } else if (g_.is_output(v)) {
      t["kind"] = "output";
    } else if (is_graph_input(v)) {
      t["kind"] = "input";
      if (const auto dflt = g_.input_default(v)) {  // the executor starts with it
        const std::string param = unique_param_name(val.name + "_default");
        bundle->params.emplace(param, dflt->copy());
        t["default"] = param;
        has_defaults_ = true;
      }
    } else if (const auto* place = placement_of(v)) {
      t["kind"] = "intermediate";
      t["storage"] = static_cast<int64_t>(place->first);
      t["offset"] = place->second;
    } else {
      const int64_t bytes =
          std::max<int64_t>(1, val.num_elements() * runtime::dtype_bytes(val.dtype));
      Json::Object pool;
      pool["bytes"] = bytes;
      t["kind"] = "intermediate";
      t["storage"] = static_cast<int64_t>(storage_.size());
      t["offset"] = int64_t{0};
      storage_.emplace_back(std::move(pool));
    }
    t["name"] = name;
    const auto i = static_cast<int64_t>(tensors_.size());
    tensors_.emplace_back(std::move(t));
    index_[v] = i;
    return i;
  }

  Json::Array take_tensors() { return std::move(tensors_); }
  /// Whether a graph input has a default value (a parameter the executor starts it with).
  bool has_defaults() const { return has_defaults_; }
  Json::Array take_storage() { return std::move(storage_); }
  void reserve_names(const std::string& name) { names_.insert(name); }

 private:
  /// Where the memory plan puts `v` (pool, offset), or null.
  const std::pair<int, int64_t>* placement_of(ValueId v) const {
    if (plan_ == nullptr) return nullptr;
    auto it = plan_->placement.find(v);
    return it == plan_->placement.end() ? nullptr : &it->second;
  }
  bool is_graph_input(ValueId v) const {
    for (ValueId i : g_.inputs()) {
      if (i == v) return true;
    }
    return false;
  }
  std::string unique_param_name(const std::string& base) {
    std::string name = base.empty() ? "param" : base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    return name;
  }

  const Graph& g_;
  const MemoryPlan* plan_;
  std::unordered_map<ValueId, int64_t> index_;
  Json::Array tensors_, storage_;
  std::set<std::string> names_;  ///< names taken (inputs, outputs, parameters)
  bool has_defaults_ = false;
};

}  // namespace

namespace {

/// The heterogeneous target: the VDLA for what it supports, this CPU for the rest.
bool is_vdla(const std::string& target) {
  return target::Target::parse(target).kind == TargetKind::kVdla;
}
constexpr const char* kVdlaHost = "llvm -mcpu=native";

/// Refuses Precision::kBf16 for a target without vdpbf16ps, naming what its CPU has.
void check_bf16_target(const target::Target& tgt) {
  KILN_USER_CHECK(tgt.kind == TargetKind::kCpu)
      << "--precision bf16 is for x86 CPUs with avx512_bf16; target '" << tgt.str()
      << "' is not a CPU";
  const std::vector<std::string> features = codegen::enabled_cpu_features(tgt);
  auto has = [&](const char* f) {
    return std::find(features.begin(), features.end(), f) != features.end();
  };
  if (tgt.arch_name() == "x86_64" && has("avx512bf16")) return;
  std::string vector_features;
  for (const char* f : {"sse4.2", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni",
                        "avxvnni", "neon", "bf16"}) {
    if (has(f)) vector_features += std::string(vector_features.empty() ? "" : ", ") + f;
  }
  const std::string cpu = tgt.cpu.empty()       ? "the generic " + tgt.arch_name() + " CPU"
                          : tgt.cpu == "native" ? "this machine's CPU"
                                                : "CPU '" + tgt.cpu + "'";
  KILN_USER_ERROR() << "--precision bf16 needs avx512_bf16 (vdpbf16ps); target '" << tgt.str()
                    << "' (" << cpu << ") has "
                    << (vector_features.empty() ? "none of the vector extensions" : vector_features)
                    << " but not avx512_bf16";
}

/// How many nodes of `g` carry attribute `name`.
size_t count_attr(const Graph& g, const char* name) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.has_attr(name) ? 1 : 0;
  return n;
}

/// The graph passes of the build, in order, on a copy of `input`.
Graph prepare_graph(const Graph& input, const std::string& target_name, const BuildOptions& options,
                    BuildReport& rep) {
  auto enter = [&](const char* phase) {
    if (options.phase) options.phase(phase);
  };
  const bool vdla = is_vdla(target_name);
  const std::string target = vdla ? kVdlaHost : target_name;
  const target::Target tgt = target::Target::parse(target);
  input.verify();
  check_tensor_sizes(input);  // before constant folding allocates any of them
  rep.num_operators = input.nodes().size();
  Graph g = input;  // constants are shared, so the copy is cheap
  // Each part of a Split a Slice of its own, fused with its readers (an attention's Q, K and V);
  // first, so that the parts of a constant fold.
  split_to_slices(g);
  enter("folding constants");
  // DequantizeLinear of constants (quantized weights and biases) stay for the realize passes.
  rep.constants_folded = fold_constants(g, kFoldMaxElements, /*keep_dequantize=*/true);
  enter("realizing integer convolutions");
  // The VDLA runs QConv (power-of-two scales) and takes those patterns first; on the CPU every
  // quantized convolution and product becomes ConvInteger / MatMulInteger with ORT's
  // requantization. The report's reasons are the last pass's: what stays float.
  if (vdla) {
    rep.qconvs_realized = realize_qconv(g).realized;
    g.remove_dead_nodes();
  }
  RealizeQLinearReport qlinear = realize_qlinear(g);
  rep.integer_convolutions = qlinear.convolutions;
  rep.integer_products = qlinear.products;
  rep.qconvs_kept_float = std::move(qlinear.kept_float);
  g.remove_dead_nodes();
  rep.constants_folded += fold_constants(g);  // the weights of convolutions left in float
  // A Pad of zeros as the padding of the convolutions and average pools reading it.
  if (fold_pad(g) > 0) g.remove_dead_nodes();
  g.verify();
  if (options.fold_batch_norm) {
    enter("folding batch norms");
    rep.batch_norms_folded = fold_batch_norm(g);
    g.remove_dead_nodes();
    g.verify();
  }
  // Taps that read only padding (dilated convolutions on small maps), after batch norms scaled
  // the weights.
  rep.convolutions_trimmed = trim_conv_taps(g);
  // The GPU templates read NCHW data and the products' weights as the model gives them; an LSTM's
  // are packed for them too, once here rather than on every run.
  const bool bf16 = options.precision == Precision::kBf16;
  if (bf16) check_bf16_target(tgt);
  if (options.pack_weights) {
    enter("packing weights");
    // Constant weights into the kernels' layouts (bf16 pairs for the dense products with bf16).
    const size_t before = count_attr(g, "packed_bf16");
    // The int8 convolutions read their data in alter_layout's blocks of 16 where it will run.
    pack_weights(g, /*dense=*/!tgt.is_gpu(), bf16,
                 /*int8_blocks16=*/options.alter_layout && !tgt.is_gpu());
    rep.bf16_products = count_attr(g, "packed_bf16") - before;
  }
  if (options.alter_layout && !tgt.is_gpu()) {
    enter("changing layouts");
    // Channel shuffles as gathers of channels, which then run on the convolutions' blocks.
    rep.channel_gathers = gather_channel_permutations(g);
    lift_conv1d(g);    // 1-D convolutions as 2-D ones of height 1, to be blocked like them
    sink_reshapes(g);  // chains of 1-D layers, and of 3-D ones over frames as rows, kept 4-D
    // Padded blocks where the target's vectors hold 16 floats (AVX-512): a full vector for a
    // channel count like RegNet's 440 rather than half ones.
    const int pad_to = options.pad_channels_to >= 0 ? options.pad_channels_to
                       : tgt.vector_bits >= 512     ? 16
                                                    : 0;
    const AlterLayoutOptions layout_options{pad_to, bf16, options.winograd};
    // Grouped convolutions whose groups are not whole blocks (RegNet's 120 channels a group in
    // 16s) padded group by group rather than merged two by two.
    rep.groups_padded = pad_groups(g, layout_options).padded;
    const AlterLayoutReport layout = alter_layout(g, layout_options);
    rep.convolutions_blocked = layout.convolutions_blocked;
    rep.bf16_convolutions = layout.bf16;
    rep.layout_conversions = layout.conversions;
  }
  if (vdla && options.offload_vdla) {
    enter("offloading to the VDLA");
    VdlaOffloadReport off = offload_vdla(g, options.configs);
    g.remove_dead_nodes();
    g.verify();
    rep.vdla_convolutions = off.convolutions;
    rep.vdla_offloaded = off.offloaded;
    rep.vdla_placed = std::move(off.placed);
    rep.vdla_kept_on_cpu = std::move(off.kept_on_cpu);
  }
  for (ValueId v : g.outputs()) {
    KILN_USER_CHECK(g.producer(v) >= 0)
        << "graph build: graph output '" << g.value(v).name
        << "' is not computed by any node (a graph input or a constant); Kiln cannot run such a "
           "graph yet";
  }
  return g;
}

/// Records the task of every tunable operator it is asked about, and how many operators are of
/// each task, answering with the default.
class TaskRecorder : public autotune::ConfigSource {
 public:
  space::Config choose(const autotune::Task& task) override {
    auto [it, added] = index_.emplace(task.key, tasks_.size());
    if (added) {
      tasks_.push_back(task);
      calls_.push_back(0);
    }
    ++calls_[it->second];
    return task.default_config;
  }
  std::vector<autotune::Task> take(std::vector<int>* calls) {
    if (calls != nullptr) *calls = std::move(calls_);
    return std::move(tasks_);
  }

 private:
  std::map<std::string, size_t> index_;  ///< task key -> its place in tasks_
  std::vector<autotune::Task> tasks_;
  std::vector<int> calls_;
};

}  // namespace

std::vector<autotune::Task> extract_tasks(const Graph& input, const std::string& target,
                                          const BuildOptions& options, std::vector<int>* calls) {
  BuildReport rep;
  TaskRecorder recorder;
  if (is_vdla(target)) {
    // The VDLA's tasks: offload_vdla asks the recorder for the config of every QConv it offloads
    // (a vdla_conv2d task of target vdla). The groups left on the host CPU are not a vdla job's
    // to tune: they are measured on a CPU, under their llvm target (a job of its own).
    BuildOptions offload = options;
    offload.configs = &recorder;
    prepare_graph(input, target, offload, rep);
    return recorder.take(calls);
  }
  const Graph g = prepare_graph(input, target, options, rep);
  if (options.phase) options.phase("fusing operators");
  for (const FusedGroup& group : fuse_ops(g, options.fuse))
    lower_group(g, group, &recorder, target);
  return recorder.take(calls);
}

runtime::Bundle build_graph(const Graph& input, const std::string& target_name,
                            const BuildOptions& options, BuildReport* report) {
  BuildReport local_report;
  BuildReport& rep = report != nullptr ? *report : local_report;
  rep = BuildReport{};
  const Graph g = prepare_graph(input, target_name, options, rep);
  const std::string target = is_vdla(target_name) ? kVdlaHost : target_name;
  const target::Target tgt = target::Target::parse(target);
  const bool gpu = tgt.is_gpu();
  if (options.phase) options.phase("fusing operators");
  const std::vector<FusedGroup> groups = fuse_ops(g, options.fuse);
  std::optional<MemoryPlan> plan;
  if (options.plan_memory) {
    plan = plan_memory(g, groups);
    verify_memory_plan(g, groups, *plan);
    rep.intermediate_bytes_without_reuse = plan->bytes_without_reuse;
  }

  runtime::Bundle bundle;
  TensorTable table(g, plan ? &*plan : nullptr);
  for (ValueId v : g.inputs()) table.reserve_names(g.value(v).name);
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.outputs) {
      if (v != kNoValue) table.reserve_names(g.value(v).name);
    }
  }
  Json::Array inputs, outputs, nodes;
  for (ValueId v : g.inputs()) inputs.emplace_back(table.index(v, &bundle));

  std::vector<ir::PrimFunc> funcs;
  std::set<std::string> func_names;
  std::map<std::vector<uint64_t>, std::string> kernel_by_program;
  const size_t total = groups.size();
  for (size_t i = 0; i < total; ++i) {
    const FusedGroup& group = groups[i];
    const Node& n = g.nodes()[group.master];
    std::string fname = function_name(n.name, i);
    for (int k = 1; func_names.count(fname); ++k)
      fname = function_name(n.name, i) + "_" + std::to_string(k);
    func_names.insert(fname);
    if (options.progress) options.progress(i, total, fname);
    if (options.verbose) {
      std::string ops;
      for (size_t ni : group.nodes) ops += (ops.empty() ? "" : ", ") + g.nodes()[ni].op;
      std::cerr << "[" << i + 1 << "/" << total << "] compiling " << fname << " (" << ops << ")\n";
    }
    if (n.op == "VdlaQConv") {
      // A VDLA program (offload_vdla.h); its tensors are the node's, in the program's order.
      KILN_ICHECK(group.nodes.size() == 1) << "vdla: " << n.name << " was fused with other nodes";
      const vdla::Config cfg;
      const topi::VdlaConv2d conv = vdla_qconv_compute(n);
      bundle.vdla_programs.push_back(vdla_compiler::build_vdla(
          vdla_compiler::schedule_vdla_conv2d(conv, vdla_qconv_config(n), cfg), conv.args(), fname,
          cfg));
      Json::Array args;
      for (ValueId v : n.inputs) args.emplace_back(table.index(v, &bundle));
      args.emplace_back(table.index(n.outputs[0], &bundle));
      Json::Object node;
      node["name"] = n.name;
      node["func"] = fname;
      node["args"] = std::move(args);
      node["target"] = std::string(target_kind_name(TargetKind::kVdla));
      nodes.emplace_back(std::move(node));
      continue;
    }
    LoweredOp op = lower_group(g, group, options.configs, target);
    try {
      if (gpu) {
        bundle.device_programs.push_back(compiler::build_gpu(op.schedule, op.args, tgt, fname));
      } else {
        ir::PrimFunc f = compiler::lower(op.schedule, op.args, fname);
        // Groups that lower to the same program up to renaming (the repeated blocks of a
        // network) share one function: LLVM optimizes and emits each distinct kernel once.
        auto [it, fresh] = kernel_by_program.emplace(ir::structural_encoding(f), fname);
        if (fresh) {
          funcs.push_back(std::move(f));
        } else {
          func_names.erase(fname);
          fname = it->second;
        }
      }
    } catch (const kiln::Error& e) {
      // The loop compiler names stages; the user knows the node.
      const std::string msg = e.what();
      const std::string what = msg.rfind("error: ", 0) == 0 ? msg.substr(7) : msg;
      KILN_USER_ERROR() << "graph build: kernel '" << fname << "' (node '" << n.name << "', "
                        << n.op << "): " << what;
    }
    Json::Array args;
    for (ValueId v : op.values) args.emplace_back(table.index(v, &bundle));
    Json::Object node;
    node["name"] = n.name;
    node["func"] = fname;
    node["args"] = std::move(args);
    std::vector<std::string> ops;
    for (size_t ni : group.nodes) ops.push_back(g.nodes()[ni].op);
    add_work(node, te::count_flops(op.args), g, op.values, ops);
    nodes.emplace_back(std::move(node));
  }
  for (ValueId v : g.outputs()) outputs.emplace_back(table.index(v, &bundle));

  if (gpu) {
    if (options.progress) options.progress(total, total, "done");
  } else {
    if (options.progress) options.progress(total, total, "generating code");
    if (options.verbose) std::cerr << "generating code for " << funcs.size() << " functions\n";
    bundle.library = codegen::link_shared_object(funcs, tgt);
  }

  rep.num_functions = total;
  rep.num_distinct_functions = gpu ? total : funcs.size();
  Json::Array storage = table.take_storage();
  for (const Json& pool : storage)
    rep.intermediate_bytes += pool.at("bytes", "pool").as_int("bytes");
  if (!plan) rep.intermediate_bytes_without_reuse = rep.intermediate_bytes;

  Json::Object graph;
  graph["format"] = "kiln.graph";
  // Version 2 only where an input has a default, so that runtimes that read version 1 (which
  // would ignore the default) refuse such a bundle by its version, and read all others.
  graph["version"] = table.has_defaults() ? 2 : 1;
  graph["storage"] = std::move(storage);
  graph["tensors"] = table.take_tensors();
  if (options.precision != Precision::kFloat32)
    graph["precision"] = precision_name(options.precision);
  graph["nodes"] = std::move(nodes);
  graph["inputs"] = std::move(inputs);
  graph["outputs"] = std::move(outputs);
  bundle.graph_json = Json(std::move(graph)).dump();
  return bundle;
}

const char* precision_name(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::kFloat32;
  if (s == "bf16") return Precision::kBf16;
  KILN_USER_ERROR() << "unknown precision '" << s << "' (known: fp32, bf16)";
}

void compile_onnx(const std::string& onnx_path, const std::string& target,
                  const std::string& out_path, const BuildOptions& options, BuildReport* report,
                  const OnnxImportOptions& import) {
  const Graph g = import_onnx(onnx_path, import);
  runtime::write_bundle(out_path, build_graph(g, target, options, report));
}

}  // namespace kiln::graph
