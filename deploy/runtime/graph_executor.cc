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

/// "float32[2, 3]".
std::string type_text(KilnDType dtype, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return dtype_to_string(dtype) + "[" + dims + "]";
}

}  // namespace

GraphExecutor GraphExecutor::load(const std::string& path, DeviceKind device) {
  return from_bundle(read_bundle(path), path, device);
}

GraphExecutor GraphExecutor::from_bundle(Bundle bundle, const std::string& origin,
                                         DeviceKind device) {
  const DeviceKind built_for = bundle_device(bundle);
  if (built_for == DeviceKind::kCPU) {
    KILN_USER_CHECK(device == DeviceKind::kCPU)
        << "bundle '" << origin << "' was built for the CPU (it holds no device code); run it "
        << "without --device " << device_kind_name(device);
    Module library = Module::load_library_bytes(bundle.library, "bundle '" + origin + "'");
    return from_parts(bundle.graph_json, std::move(bundle.params), std::move(library), origin);
  }
  KILN_USER_CHECK(device == built_for)
      << "bundle '" << origin << "' was built for " << device_kind_name(built_for)
      << "; run it with --device " << device_kind_name(built_for);
  return on_device(bundle.graph_json, std::move(bundle.params), std::move(bundle.device_programs),
                   DeviceAPI::get(built_for), origin);
}

GraphExecutor GraphExecutor::from_parts(const std::string& graph_json,
                                        std::map<std::string, NDArray> params, Module library,
                                        const std::string& origin) {
  GraphExecutor g;
  g.origin_ = origin;
  g.module_ = std::move(library);
  g.build(graph_json, std::move(params), {});
  return g;
}

GraphExecutor GraphExecutor::on_device(const std::string& graph_json,
                                       std::map<std::string, NDArray> params,
                                       std::vector<DeviceProgram> programs, DeviceAPI& device,
                                       const std::string& origin) {
  GraphExecutor g;
  g.origin_ = origin;
  g.device_ = &device;
  g.build(graph_json, std::move(params), std::move(programs));
  return g;
}

void GraphExecutor::build(const std::string& graph_json, std::map<std::string, NDArray> params,
                          std::vector<DeviceProgram> programs) {
  const std::string where = "bundle '" + origin_ + "': graph";
  Json graph = Json::parse(graph_json, where);
  KILN_USER_CHECK(graph.at("format", where).as_string(where + " format") == "kiln.graph")
      << where << " has an unknown format";
  int64_t version = graph.at("version", where).as_int(where + " version");
  KILN_USER_CHECK(version == 1 || version == 2)
      << where << " has version " << version << "; this runtime reads versions 1 and 2";

  std::vector<int64_t> pool_bytes;
  for (auto& s : graph.at("storage", where).as_array(where + " storage")) {
    int64_t bytes = s.at("bytes", where + " storage").as_int(where + " storage bytes");
    KILN_USER_CHECK(bytes >= 0) << where << ": a storage pool has a negative size";
    pool_bytes.push_back(bytes);
    if (device_ == nullptr) pools_.push_back(NDArray::empty({bytes}, kUInt8));
  }
  // On a device: the intermediates at each (pool, offset), which share one buffer of their
  // largest size.
  std::map<std::pair<size_t, int64_t>, std::vector<size_t>> placements;
  // On a device: a buffer for a parameter, an input or an output, holding its host array's
  // elements when `upload` (an output's are computed there).
  auto place = [&](TensorInfo& info, bool upload) {
    info.device_buffer = static_cast<int>(device_buffers_.size());
    device_buffers_.push_back(device_->alloc(info.array.nbytes()));
    if (upload) {
      device_->copy_to_device(device_buffers_.back(), info.array.data(), info.array.nbytes());
    }
  };
  const auto& tensors = graph.at("tensors", where).as_array(where + " tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Json& t = tensors[i];
    const std::string what = where + " tensor " + std::to_string(i);
    TensorInfo info;
    info.name = t.at("name", what).as_string(what + " name");
    info.kind = t.at("kind", what).as_string(what + " kind");
    info.dtype = parse_dtype(t.at("dtype", what).as_string(what + " dtype"));
    info.shape = shape_of(t.at("shape", what), what + " shape");
    const KilnDType dtype = info.dtype;
    const std::vector<int64_t>& shape = info.shape;
    if (info.kind == "param") {
      auto it = params.find(info.name);
      KILN_USER_CHECK(it != params.end()) << what << ": parameter '" << info.name << "' is not in the bundle";
      KILN_USER_CHECK(it->second.defined())  // moved into an earlier tensor
          << what << ": parameter '" << info.name << "' is already the array of another tensor";
      KILN_USER_CHECK(it->second.shape() == shape && dtype_equal(it->second.dtype(), dtype))
          << what << ": parameter '" << info.name << "' is " << dtype_to_string(it->second.dtype())
          << it->second.shape_string() << " in the bundle but the graph expects " << dtype_to_string(dtype);
      info.array = std::move(it->second);
      if (device_ != nullptr) place(info, /*upload=*/true);
    } else if (info.kind == "intermediate") {
      size_t pool = tensor_index(t.at("storage", what), pool_bytes.size(), what + " storage");
      const int64_t offset = t.at("offset", what).as_int(what + " offset");
      if (device_ == nullptr) {
        info.array = NDArray::view(pools_[pool], offset, shape, dtype);
      } else {
        const int64_t bytes = NDArray::nbytes_for(shape, dtype);
        // As a difference: an offset near 2^63 must not overflow the sum and pass.
        KILN_USER_CHECK(offset >= 0 && offset <= pool_bytes[pool] &&
                        bytes <= pool_bytes[pool] - offset)
            << what << ": " << bytes << " bytes at offset " << offset << " do not fit in pool "
            << pool << " of " << pool_bytes[pool] << " bytes";
        placements[{pool, offset}].push_back(i);
      }
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
      if (device_ != nullptr) place(info, /*upload=*/info.kind == "input");
    } else {
      KILN_USER_ERROR() << what << " has unknown kind '" << info.kind
                        << "' (known: input, param, intermediate, output)";
    }
    tensors_.push_back(std::move(info));
  }
  for (const auto& [place, sharing] : placements) {
    int64_t bytes = 0;
    for (size_t i : sharing) {
      bytes = std::max(bytes, NDArray::nbytes_for(tensors_[i].shape, tensors_[i].dtype));
    }
    for (size_t i : sharing) tensors_[i].device_buffer = static_cast<int>(device_buffers_.size());
    device_buffers_.push_back(device_->alloc(bytes));
  }

  std::map<std::string, DeviceProgram> by_name;
  for (DeviceProgram& p : programs) {
    const std::string name = p.name;
    KILN_USER_CHECK(by_name.emplace(name, std::move(p)).second)
        << "bundle '" << origin_ << "': device program '" << name << "' appears twice";
  }
  for (auto& n : graph.at("nodes", where).as_array(where + " nodes")) {
    Node node;
    node.name = n.at("name", where + " node").as_string(where + " node name");
    const std::string what = where + " node '" + node.name + "'";
    node.func = n.at("func", what).as_string(what + " func");
    for (auto& a : n.at("args", what).as_array(what + " args")) {
      node.args.push_back(tensor_index(a, tensors_.size(), what + " args"));
    }
    if (device_ == nullptr) {
      KILN_USER_CHECK(module_.has_function(node.func))
          << what << " calls '" << node.func << "', which the bundle's library does not define";
      node.host_func = module_.function(node.func);
    } else {
      node.program = device_program(node.func, node.args, by_name, what);
    }
    nodes_.push_back(std::move(node));
  }
  for (auto& i : graph.at("inputs", where).as_array(where + " inputs")) {
    inputs_.push_back(tensor_index(i, tensors_.size(), where + " inputs"));
  }
  for (auto& o : graph.at("outputs", where).as_array(where + " outputs")) {
    outputs_.push_back(tensor_index(o, tensors_.size(), where + " outputs"));
  }
  if (device_ == nullptr) return;
  // On a device an intermediate has no host side to read or write.
  for (size_t i : inputs_) {
    KILN_USER_CHECK(tensors_[i].kind != "intermediate")
        << where << ": input '" << tensors_[i].name << "' is an intermediate tensor";
  }
  for (size_t o : outputs_) {
    KILN_USER_CHECK(tensors_[o].kind != "intermediate")
        << where << ": output '" << tensors_[o].name << "' is an intermediate tensor";
  }
}

LoadedDeviceProgram* GraphExecutor::device_program(const std::string& func,
                                                   const std::vector<size_t>& args,
                                                   std::map<std::string, DeviceProgram>& programs,
                                                   const std::string& what) {
  auto loaded = programs_.find(func);
  if (loaded == programs_.end()) {
    auto source = programs.find(func);
    KILN_USER_CHECK(source != programs.end())
        << what << " calls '" << func << "', which the bundle's device programs do not define";
    auto program = std::make_unique<LoadedDeviceProgram>(*device_, std::move(source->second));
    loaded = programs_.emplace(func, std::move(program)).first;
    programs.erase(source);
  }
  const std::vector<DeviceProgram::Tensor>& params = loaded->second->program().params;
  KILN_USER_CHECK(args.size() == params.size())
      << what << " passes " << args.size() << " tensors to device program '" << func
      << "', which takes " << params.size();
  for (size_t k = 0; k < args.size(); ++k) {
    const TensorInfo& t = tensors_[args[k]];
    KILN_USER_CHECK(dtype_equal(t.dtype, params[k].dtype) && t.shape == params[k].shape)
        << what << " passes tensor '" << t.name << "' (" << type_text(t.dtype, t.shape) << ") as '"
        << params[k].name << "' of device program '" << func << "', which takes "
        << type_text(params[k].dtype, params[k].shape);
  }
  return loaded->second.get();
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
  TensorInfo& t = tensors_[inputs_[index]];
  t.array.copy_from_bytes(value.data(), static_cast<size_t>(value.nbytes()));
  if (device_ != nullptr) {
    device_->copy_to_device(device_buffers_[t.device_buffer], value.data(), value.nbytes());
  }
}

void GraphExecutor::run_node(size_t i) {
  const Node& n = nodes_[i];
  if (n.program != nullptr) {
    device_args_.clear();
    for (size_t a : n.args) device_args_.push_back(&device_buffers_[tensors_[a].device_buffer]);
    n.program->launch(device_args_);
    return;
  }
  host_args_.clear();
  for (size_t a : n.args) host_args_.emplace_back(tensors_[a].array.tensor());
  n.host_func.call(host_args_);
}

double GraphExecutor::time_node(size_t i) {
  if (device_ != nullptr) return device_->time_ms([&] { run_node(i); });
  const auto t0 = std::chrono::steady_clock::now();
  run_node(i);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void GraphExecutor::finish_run() {
  if (device_ == nullptr) return;
  for (size_t o : outputs_) {  // each copy waits for the launches before it
    TensorInfo& t = tensors_[o];
    device_->copy_to_host(t.array.data(), device_buffers_[t.device_buffer], t.array.nbytes());
  }
}

void GraphExecutor::run() {
  for (size_t i = 0; i < nodes_.size(); ++i) run_node(i);
  finish_run();
}

std::vector<GraphExecutor::NodeTime> GraphExecutor::profile(int runs, std::vector<double>* run_ms) {
  KILN_USER_CHECK(runs > 0) << "profile: the number of runs must be positive, got " << runs;
  run();
  std::vector<std::vector<double>> ms(nodes_.size());
  if (run_ms != nullptr) run_ms->clear();
  for (int r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < nodes_.size(); ++i) ms[i].push_back(time_node(i));
    finish_run();
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
    out.push_back({nodes_[i].name, nodes_[i].func, v[v.size() / 2]});
  }
  return out;
}

const NDArray& GraphExecutor::output(size_t i) const {
  output_name(i);
  return tensors_[outputs_[i]].array;
}

}  // namespace kiln::runtime
