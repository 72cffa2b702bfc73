// Loading and running bundles.
#include "deploy/runtime/graph_executor.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/json.h"

namespace kiln::runtime {
namespace {

std::vector<int64_t> shape_of(const Json& j, const std::string& what) {
  std::vector<int64_t> shape;
  for (auto& d : j.as_array(what)) {
    int64_t v = d.as_int(what);
    KILN_USER_CHECK(v >= 0) << what << " has a negative dimension";
    shape.push_back(v);
  }
  return shape;
}

size_t tensor_index(const Json& j, size_t count, const std::string& what) {
  int64_t i = j.as_int(what);
  KILN_USER_CHECK(i >= 0 && static_cast<size_t>(i) < count)
      << what << " refers to tensor " << i << " but the graph has " << count;
  return static_cast<size_t>(i);
}

}  // namespace

GraphExecutor GraphExecutor::load(const std::string& path) { return from_bundle(read_bundle(path), path); }

GraphExecutor GraphExecutor::from_bundle(Bundle bundle, const std::string& origin) {
  Module library = Module::load_library_bytes(bundle.library, "bundle '" + origin + "'");
  return from_parts(bundle.graph_json, std::move(bundle.params), std::move(library), origin);
}

GraphExecutor GraphExecutor::from_parts(const std::string& graph_json,
                                        std::map<std::string, NDArray> params, Module library,
                                        const std::string& origin) {
  GraphExecutor g;
  g.origin_ = origin;
  const std::string where = "bundle '" + origin + "': graph";
  Json graph = Json::parse(graph_json, where);
  KILN_USER_CHECK(graph.at("format", where).as_string(where + " format") == "kiln.graph")
      << where << " has an unknown format";
  int64_t version = graph.at("version", where).as_int(where + " version");
  KILN_USER_CHECK(version == 1 || version == 2)
      << where << " has version " << version << "; this runtime reads versions 1 and 2";
  g.module_ = std::move(library);

  for (auto& s : graph.at("storage", where).as_array(where + " storage")) {
    int64_t bytes = s.at("bytes", where + " storage").as_int(where + " storage bytes");
    KILN_USER_CHECK(bytes >= 0) << where << ": a storage pool has a negative size";
    g.pools_.push_back(NDArray::empty({bytes}, kUInt8));
  }
  const auto& tensors = graph.at("tensors", where).as_array(where + " tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Json& t = tensors[i];
    const std::string what = where + " tensor " + std::to_string(i);
    TensorInfo info;
    info.name = t.at("name", what).as_string(what + " name");
    info.kind = t.at("kind", what).as_string(what + " kind");
    KilnDType dtype = parse_dtype(t.at("dtype", what).as_string(what + " dtype"));
    std::vector<int64_t> shape = shape_of(t.at("shape", what), what + " shape");
    if (info.kind == "param") {
      auto it = params.find(info.name);
      KILN_USER_CHECK(it != params.end()) << what << ": parameter '" << info.name << "' is not in the bundle";
      KILN_USER_CHECK(it->second.defined())  // moved into an earlier tensor
          << what << ": parameter '" << info.name << "' is already the array of another tensor";
      KILN_USER_CHECK(it->second.shape() == shape && dtype_equal(it->second.dtype(), dtype))
          << what << ": parameter '" << info.name << "' is " << dtype_to_string(it->second.dtype())
          << it->second.shape_string() << " in the bundle but the graph expects " << dtype_to_string(dtype);
      info.array = std::move(it->second);
    } else if (info.kind == "intermediate") {
      size_t pool = tensor_index(t.at("storage", what), g.pools_.size(), what + " storage");
      info.array = NDArray::view(g.pools_[pool], t.at("offset", what).as_int(what + " offset"), shape, dtype);
    } else if (info.kind == "input" || info.kind == "output") {
      info.array = NDArray::empty(shape, dtype);
      if (info.kind == "input" && t.has("default")) {
        const std::string& param = t.at("default", what).as_string(what + " default");
        auto it = params.find(param);
        KILN_USER_CHECK(it != params.end() && it->second.defined())
            << what << ": the default of input '" << info.name << "', parameter '" << param
            << "', is not in the bundle (or is the array of a parameter tensor)";
        KILN_USER_CHECK(it->second.shape() == shape && dtype_equal(it->second.dtype(), dtype))
            << what << ": input '" << info.name << "' is " << dtype_to_string(dtype)
            << info.array.shape_string() << ", but its default '" << param << "' is "
            << dtype_to_string(it->second.dtype()) << it->second.shape_string();
        info.array.copy_from_bytes(it->second.data(), static_cast<size_t>(it->second.nbytes()));
        info.has_default = true;
      }
    } else {
      KILN_USER_ERROR() << what << " has unknown kind '" << info.kind
                        << "' (known: input, param, intermediate, output)";
    }
    g.tensors_.push_back(std::move(info));
  }
  for (auto& n : graph.at("nodes", where).as_array(where + " nodes")) {
    Node node;
    node.name = n.at("name", where + " node").as_string(where + " node name");
    const std::string what = where + " node '" + node.name + "'";
    const std::string& func = n.at("func", what).as_string(what + " func");
    KILN_USER_CHECK(g.module_.has_function(func))
        << what << " calls '" << func << "', which the bundle's library does not define";
    node.func = g.module_.function(func);
    for (auto& a : n.at("args", what).as_array(what + " args")) {
      node.args.push_back(tensor_index(a, g.tensors_.size(), what + " args"));
    }
    g.nodes_.push_back(std::move(node));
  }
  for (auto& i : graph.at("inputs", where).as_array(where + " inputs")) {
    g.inputs_.push_back(tensor_index(i, g.tensors_.size(), where + " inputs"));
  }
  for (auto& o : graph.at("outputs", where).as_array(where + " outputs")) {
    g.outputs_.push_back(tensor_index(o, g.tensors_.size(), where + " outputs"));
  }
  return g;
}

const std::string& GraphExecutor::input_name(size_t i) const {
  KILN_USER_CHECK(i < inputs_.size()) << "input " << i << " out of range: the model has " << inputs_.size();
  return tensors_[inputs_[i]].name;
}

const std::string& GraphExecutor::output_name(size_t i) const {
  KILN_USER_CHECK(i < outputs_.size()) << "output " << i << " out of range: the model has " << outputs_.size();
  return tensors_[outputs_[i]].name;
}

const std::vector<int64_t>& GraphExecutor::input_shape(size_t i) const {
  input_name(i);
  return tensors_[inputs_[i]].array.shape();
}

KilnDType GraphExecutor::input_dtype(size_t i) const {
  input_name(i);
  return tensors_[inputs_[i]].array.dtype();
}

bool GraphExecutor::input_has_default(size_t i) const {
  input_name(i);
  return tensors_[inputs_[i]].has_default;
}

void GraphExecutor::check_input(size_t tensor, const NDArray& value) const {
  const TensorInfo& t = tensors_[tensor];
  KILN_USER_CHECK(dtype_equal(value.dtype(), t.array.dtype()))
      << "input '" << t.name << "' must be " << dtype_to_string(t.array.dtype()) << ", got "
      << dtype_to_string(value.dtype());
  KILN_USER_CHECK(value.shape() == t.array.shape())
      << "input '" << t.name << "' must have shape " << t.array.shape_string() << ", got " << value.shape_string();
}

void GraphExecutor::set_input(const std::string& name, const NDArray& value) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (tensors_[inputs_[i]].name == name) return set_input(i, value);
  }
  std::string known;
  for (size_t i = 0; i < inputs_.size(); ++i) known += (i ? ", " : "") + tensors_[inputs_[i]].name;
  KILN_USER_ERROR() << "the model has no input '" << name << "' (its inputs: " << known << ")";
}

void GraphExecutor::set_input(size_t index, const NDArray& value) {
  input_name(index);
  check_input(inputs_[index], value);
  NDArray& dst = tensors_[inputs_[index]].array;
  dst.copy_from_bytes(value.data(), static_cast<size_t>(value.nbytes()));
}

void GraphExecutor::run() {
  std::vector<Arg> args;
  for (auto& n : nodes_) {
    args.clear();
    for (size_t a : n.args) args.emplace_back(tensors_[a].array.tensor());
    n.func.call(args);
  }
}

std::vector<GraphExecutor::NodeTime> GraphExecutor::profile(int runs, std::vector<double>* run_ms) {
  KILN_USER_CHECK(runs > 0) << "profile: the number of runs must be positive, got " << runs;
  run();
  std::vector<std::vector<double>> ms(nodes_.size());
  std::vector<Arg> args;
  if (run_ms != nullptr) run_ms->clear();
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < nodes_.size(); ++i) {
      args.clear();
      for (size_t a : nodes_[i].args) args.emplace_back(tensors_[a].array.tensor());
      const auto t0 = std::chrono::steady_clock::now();
      nodes_[i].func.call(args);
      const auto t1 = std::chrono::steady_clock::now();
      ms[i].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    if (run_ms != nullptr) {
      run_ms->push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
  }
  std::vector<NodeTime> out;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<double>& v = ms[i];
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    out.push_back({nodes_[i].name, nodes_[i].func.name(), v[v.size() / 2]});
  }
  return out;
}

const NDArray& GraphExecutor::output(size_t i) const {
  output_name(i);
  return tensors_[outputs_[i]].array;
}

}  // namespace kiln::runtime
