// build_graph: lower each node (op_lowering), compile all functions into one shared object, and
// describe the calls in the executor's graph JSON (deploy/runtime/graph_executor.h). Tensors are
// numbered in order of first appearance: the graph inputs, then each node's arguments.
#include "compiler/graph/graph_build.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/op_lowering.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/json.h"

namespace kiln::graph {
namespace {

using runtime::Json;

/// A C identifier from a node name: other characters become '_', a leading digit gets a prefix.
std::string function_name(const std::string& node_name, size_t index) {
  std::string s;
  for (char c : node_name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "node_" + s;
  return s + "_" + std::to_string(index);
}

/// A temporary file removed when this goes out of scope.
struct TempFile {
  std::filesystem::path path;
  TempFile() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("kiln-build-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".so");
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

Json shape_json(const std::vector<int64_t>& shape) {
  Json::Array a;
  for (int64_t d : shape) a.emplace_back(d);
  return a;
}

/// The executor graph's tensors, numbered as they are first met.
class TensorTable {
 public:
  explicit TensorTable(const Graph& g) : g_(g) {}

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
  Json::Array take_storage() { return std::move(storage_); }
  void reserve_names(const std::string& name) { names_.insert(name); }

 private:
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
  std::unordered_map<ValueId, int64_t> index_;
  Json::Array tensors_, storage_;
  std::set<std::string> names_;  ///< names taken (inputs, outputs, parameters)
};

}  // namespace

runtime::Bundle build_graph(const Graph& g, const std::string& target,
                            const BuildOptions& options) {
  g.verify();
  const target::Target tgt = target::Target::parse(target);
  KILN_USER_CHECK(tgt.kind == "llvm")
      << "graph build: target '" << target << "' is not supported; the graph build compiles for "
      << "CPUs through LLVM (\"llvm -mcpu=...\")";
  for (ValueId v : g.outputs()) {
    KILN_USER_CHECK(g.producer(v) >= 0)
        << "graph build: graph output '" << g.value(v).name
        << "' is not computed by any node (a graph input or a constant); Kiln cannot run such a "
           "graph yet";
  }

  runtime::Bundle bundle;
  TensorTable table(g);
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
  const size_t total = g.nodes().size();
  for (size_t i = 0; i < total; ++i) {
    const Node& n = g.nodes()[i];
    std::string fname = function_name(n.name, i);
    for (int k = 1; func_names.count(fname); ++k)
      fname = function_name(n.name, i) + "_" + std::to_string(k);
    func_names.insert(fname);
    if (options.progress) options.progress(i, total, fname);
    if (options.verbose)
      std::cerr << "[" << i + 1 << "/" << total << "] compiling " << fname << "\n";
    LoweredOp op = lower_node(g, n);
    funcs.push_back(compiler::lower(op.schedule, op.args, fname));
    Json::Array args;
    for (ValueId v : op.values) args.emplace_back(table.index(v, &bundle));
    Json::Object node;
    node["name"] = n.name;
    node["func"] = fname;
    node["args"] = std::move(args);
    nodes.emplace_back(std::move(node));
  }
  for (ValueId v : g.outputs()) outputs.emplace_back(table.index(v, &bundle));

  if (options.progress) options.progress(total, total, "generating code");
  if (options.verbose) std::cerr << "generating code for " << funcs.size() << " functions\n";
  TempFile so;
  codegen::export_library(funcs, tgt, so.path.string());
  std::ifstream in(so.path, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "graph build: cannot read the library just written to '"
                             << so.path.string() << "'";
  bundle.library.assign(std::istreambuf_iterator<char>(in), {});

  Json::Object graph;
  graph["format"] = "kiln.graph";
  graph["version"] = 1;
  graph["storage"] = table.take_storage();
  graph["tensors"] = table.take_tensors();
  graph["nodes"] = std::move(nodes);
  graph["inputs"] = std::move(inputs);
  graph["outputs"] = std::move(outputs);
  bundle.graph_json = Json(std::move(graph)).dump();
  return bundle;
}

void compile_onnx(const std::string& onnx_path, const std::string& target,
                  const std::string& out_path, const BuildOptions& options) {
  const Graph g = import_onnx(onnx_path);
  runtime::write_bundle(out_path, build_graph(g, target, options));
}

}  // namespace kiln::graph
