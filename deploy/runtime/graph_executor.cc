// Loading and running bundles.
#include "deploy/runtime/graph_executor.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "base/json.h"
#include "base/shape_string.h"
#include "deploy/runtime/dtype.h"

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

/// A node's "flops", "bytes" and "ops" (graph_executor.h), each optional; kiln::Error naming the
/// node and the field when one is there but not an integer >= 0 (or, "ops", not a string).
GraphExecutor::NodeWork node_work(const Json& n, const std::string& what) {
  GraphExecutor::NodeWork work;
  for (const char* field : {"flops", "bytes"}) {
    if (!n.has(field)) continue;
    const std::string name = what + " " + field;
    const int64_t v = n.at(field, what).as_int(name);
    KILN_USER_CHECK(v >= 0) << name << " must be at least 0, got " << v;
    (field[0] == 'f' ? work.flops : work.bytes) = static_cast<double>(v);
  }
  if (n.has("ops")) work.ops = n.at("ops", what).as_string(what + " ops");
  return work;
}

/// Every tensor of a graph with VDLA nodes starts at this boundary (a WGT row, the largest DMA
/// row).
constexpr uint64_t kDramAlign = 256;

/// The DMA row size of the buffer a DMA call meets in DRAM.
int64_t dma_row_bytes(const vdla::DmaCall& d, const vdla::Config& cfg) {
  return d.store                        ? cfg.out_row_bytes()
         : d.mem == vdla::MemType::kWgt ? cfg.wgt_row_bytes()
         : d.mem == vdla::MemType::kAcc ? cfg.acc_row_bytes()
                                        : cfg.inp_row_bytes();
}

/// An upper bound of the DRAM bytes one replay of `p` allocates (its instructions, each call at
/// most two with a no-op, the synchronize epilogue, and every kernel's micro-ops).
uint64_t stream_bytes(const vdla::VdlaProgram& p) {
  uint64_t insns = 16, bytes = 64;
  for (const vdla::DriverCall& c : p.calls) {
    insns += 2;
    if (auto k = std::get_if<vdla::KernelCall>(&c))
      bytes += k->uops.size() * vdla::Config::kUopBytes + 64;
  }
  return bytes + insns * 16 + 16;
}

/// "float32[2, 3]".
std::string type_text(KilnDType dtype, const std::vector<int64_t>& shape) {
  return dtype_to_string(dtype) + shape_string(shape);
}

}  // namespace

GraphExecutor GraphExecutor::load(const std::string& path, TargetKind device) {
  return from_bundle(read_bundle(path), path, device);
}

GraphExecutor GraphExecutor::from_bundle(Bundle bundle, const std::string& origin,
                                         TargetKind device) {
  const TargetKind built_for = bundle_device(bundle);
  if (!is_gpu(built_for)) {
    // The host library runs on the CPU, and a VDLA bundle's VDLA nodes on the simulator.
    KILN_USER_CHECK(device == TargetKind::kCpu || device == built_for)
        << "bundle '" << origin << "' was built for the CPU"
        << (built_for == TargetKind::kVdla ? " and the VDLA" : " (it holds no device code)")
        << "; run it without --device " << device_kind_name(device);
    Module library = Module::load_library_bytes(bundle.library, "bundle '" + origin + "'");
    return from_parts(bundle.graph_json, std::move(bundle.params), std::move(library), origin,
                      std::move(bundle.vdla_programs));
  }
  KILN_USER_CHECK(device == built_for)
      << "bundle '" << origin << "' was built for " << device_kind_name(built_for)
      << "; run it with --device " << device_kind_name(built_for);
  return on_device(bundle.graph_json, std::move(bundle.params), std::move(bundle.device_programs),
                   DeviceAPI::get(built_for), origin);
}

GraphExecutor GraphExecutor::from_parts(const std::string& graph_json,
                                        std::map<std::string, NDArray> params, Module library,
                                        const std::string& origin,
                                        std::vector<vdla::VdlaProgram> vdla_programs) {
  GraphExecutor g;
  g.origin_ = origin;
  g.module_ = std::move(library);
  g.build(graph_json, std::move(params), {}, std::move(vdla_programs));
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
                          std::vector<DeviceProgram> programs,
                          std::vector<vdla::VdlaProgram> vdla_programs) {
  const std::string where = "bundle '" + origin_ + "': graph";
  Json graph = Json::parse(graph_json, where);
  KILN_USER_CHECK(graph.at("format", where).as_string(where + " format") == "kiln.graph")
      << where << " has an unknown format";
  int64_t version = graph.at("version", where).as_int(where + " version");
  KILN_USER_CHECK(version == 1 || version == 2)
      << where << " has version " << version << "; this runtime reads versions 1 and 2";

  // With VDLA nodes every tensor lives in the VDLA's DRAM: its size first, so that it is set
  // aside once and no pointer into it ever moves.
  bool vdla_nodes = false;
  for (auto& n : graph.at("nodes", where).as_array(where + " nodes")) vdla_nodes |= n.has("target");
  for (vdla::VdlaProgram& p : vdla_programs) {
    const std::string name = p.name;
    KILN_USER_CHECK(vdla_programs_.emplace(name, std::move(p)).second)
        << "bundle '" << origin_ << "': vdla program '" << name << "' appears twice";
  }
  if (vdla_nodes) {
    KILN_USER_CHECK(device_ == nullptr)
        << where << ": a node runs on the VDLA, but the graph runs on a GPU";
    uint64_t total = 0, stream = 0;
    auto add = [&](int64_t bytes) {
      total += (static_cast<uint64_t>(bytes) + kDramAlign - 1) / kDramAlign * kDramAlign;
    };
    for (auto& s : graph.at("storage", where).as_array(where + " storage")) {
      add(std::max<int64_t>(0, s.at("bytes", where + " storage").as_int(where + " storage bytes")));
    }
    for (auto& t : graph.at("tensors", where).as_array(where + " tensors")) {
      const std::string what = where + " tensor";
      if (t.at("kind", what).as_string(what + " kind") == "intermediate") continue;
      add(NDArray::nbytes_for(shape_of(t.at("shape", what), what + " shape"),
                              parse_dtype(t.at("dtype", what).as_string(what + " dtype"))));
    }
    for (const auto& [name, p] : vdla_programs_) stream = std::max(stream, stream_bytes(p));
    KILN_USER_CHECK(total + stream <= (uint64_t{1} << 32))
        << where << ": its tensors need " << total
        << " bytes of DRAM, beyond the 4 GiB the VDLA addresses";
    dram_ = std::make_shared<vdla::Dram>();
    dram_->reserve(total + stream + kDramAlign);
    dram_base_ = dram_->bytes().data();
    vdla_device_ = std::make_unique<vdla::Device>(vdla::Config{});
  }
  // A tensor's array in the VDLA's DRAM (its address in `addr`), holding `init` when given.
  auto in_dram = [&](const std::vector<int64_t>& shape, KilnDType dtype, uint64_t* addr) {
    const int64_t bytes = NDArray::nbytes_for(shape, dtype);
    *addr = dram_->alloc(static_cast<uint64_t>(bytes), kDramAlign);
    return NDArray::external(dram_->at(*addr, static_cast<uint64_t>(bytes)), bytes, shape, dtype,
                             dram_);
  };

  std::vector<int64_t> pool_bytes;
  std::vector<uint64_t> pool_addr;
  for (auto& s : graph.at("storage", where).as_array(where + " storage")) {
    int64_t bytes = s.at("bytes", where + " storage").as_int(where + " storage bytes");
    KILN_USER_CHECK(bytes >= 0) << where << ": a storage pool has a negative size";
    pool_bytes.push_back(bytes);
    if (dram_ != nullptr) {
      pool_addr.push_back(0);
      pools_.push_back(in_dram({bytes}, kUInt8, &pool_addr.back()));
    } else if (device_ == nullptr) {
      pools_.push_back(NDArray::empty({bytes}, kUInt8));
    }
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
      KILN_USER_CHECK(it != params.end())
          << what << ": parameter '" << info.name << "' is not in the bundle";
      KILN_USER_CHECK(it->second.defined())  // moved into an earlier tensor
          << what << ": parameter '" << info.name << "' is already the array of another tensor";
      KILN_USER_CHECK(it->second.shape() == shape && dtype_equal(it->second.dtype(), dtype))
          << what << ": parameter '" << info.name << "' is " << dtype_to_string(it->second.dtype())
          << it->second.shape_string() << " in the bundle but the graph expects "
          << dtype_to_string(dtype);
      if (dram_ != nullptr) {
        info.array = in_dram(shape, dtype, &info.dram_addr);
        info.array.copy_from_bytes(it->second.data(), static_cast<size_t>(it->second.nbytes()));
        it->second = NDArray();  // a later tensor naming it is refused as below
      } else {
        info.array = std::move(it->second);
      }
      if (device_ != nullptr) place(info, /*upload=*/true);
    } else if (info.kind == "intermediate") {
      size_t pool = tensor_index(t.at("storage", what), pool_bytes.size(), what + " storage");
      const int64_t offset = t.at("offset", what).as_int(what + " offset");
      if (device_ == nullptr) {
        info.array = NDArray::view(pools_[pool], offset, shape, dtype);
        if (dram_ != nullptr) info.dram_addr = pool_addr[pool] + static_cast<uint64_t>(offset);
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
      info.array =
          dram_ != nullptr ? in_dram(shape, dtype, &info.dram_addr) : NDArray::empty(shape, dtype);
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
    node.work = node_work(n, what);
    if (node.work.bytes) {
      // A kernel moves at most its tensors: a larger claim would inflate its GB/s.
      int64_t held = 0;
      for (size_t a : node.args) held += NDArray::nbytes_for(tensors_[a].shape, tensors_[a].dtype);
      KILN_USER_CHECK(*node.work.bytes <= static_cast<double>(held))
          << what << " bytes is " << static_cast<int64_t>(*node.work.bytes)
          << ", more than its tensors hold (" << held << ")";
    }
    if (n.has("target")) {
      const std::string target = n.at("target", what).as_string(what + " target");
      KILN_USER_CHECK(find_target_kind(target) == TargetKind::kVdla)
          << what << " has target '" << target << "'; the runtime knows 'vdla'";
      auto p = vdla_programs_.find(node.func);
      KILN_USER_CHECK(p != vdla_programs_.end())
          << what << " calls '" << node.func << "', which the bundle's vdla programs do not define";
      node.vdla = &p->second;
      for (size_t a : node.args) node.vdla_addrs.push_back(tensors_[a].dram_addr);
      check_vdla_node(node, what);
    } else if (device_ == nullptr) {
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
  KILN_ICHECK(dram_ == nullptr || dram_->bytes().data() == dram_base_)
      << "the VDLA's DRAM moved while loading";
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

void GraphExecutor::check_vdla_node(const Node& node, const std::string& what) const {
  const vdla::VdlaProgram& p = *node.vdla;
  const vdla::Config& cfg = vdla_device_->config();
  KILN_USER_CHECK(node.args.size() == p.arg_names.size())
      << what << " passes " << node.args.size() << " tensors to vdla program '" << p.name
      << "', which takes " << p.arg_names.size();
  for (size_t k = 0; k < node.args.size(); ++k) {
    const TensorInfo& t = tensors_[node.args[k]];
    const int64_t bytes = NDArray::nbytes_for(t.shape, t.dtype);
    KILN_USER_CHECK(bytes == p.arg_bytes[k])
        << what << " passes tensor '" << t.name << "' (" << type_text(t.dtype, t.shape) << ", "
        << bytes << " bytes) as '" << p.arg_names[k] << "' of vdla program '" << p.name
        << "', which takes " << p.arg_bytes[k] << " bytes";
  }
  for (size_t i = 0; i < p.calls.size(); ++i) {
    auto d = std::get_if<vdla::DmaCall>(&p.calls[i]);
    if (d == nullptr) continue;
    const size_t k = static_cast<size_t>(d->arg);
    const TensorInfo& t = tensors_[node.args[k]];
    const int64_t row = dma_row_bytes(*d, cfg);
    KILN_USER_CHECK(node.vdla_addrs[k] % static_cast<uint64_t>(row) == 0)
        << what << ": tensor '" << t.name << "' at DRAM address " << node.vdla_addrs[k]
        << " is not aligned to the " << row << "-byte rows of call " << i << " of vdla program '"
        << p.name << "'";
    if (d->x_size == 0 || d->y_size == 0) continue;
    const uint64_t last = d->dram_row + uint64_t{d->y_size - 1} * d->x_stride + d->x_size;
    KILN_USER_CHECK(last * static_cast<uint64_t>(row) <= static_cast<uint64_t>(p.arg_bytes[k]))
        << what << ": call " << i << " of vdla program '" << p.name << "' reaches row " << last
        << " of tensor '" << t.name << "', which has " << p.arg_bytes[k] / row << " rows of " << row
        << " bytes";
  }
}

std::vector<GraphExecutor::VdlaNodeStats> GraphExecutor::vdla_stats() const {
  std::vector<VdlaNodeStats> out;
  for (const auto& [i, s] : vdla_stats_) out.push_back({nodes_[i].name, nodes_[i].func, s});
  return out;
}

vdla::Stats GraphExecutor::vdla_total() const {
  vdla::Stats total;
  for (const auto& [i, s] : vdla_stats_) total.add(s);
  return total;
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
  KILN_USER_CHECK(i < inputs_.size())
      << "input " << i << " out of range: the model has " << inputs_.size();
  return tensors_[inputs_[i]].name;
}

const std::string& GraphExecutor::output_name(size_t i) const {
  KILN_USER_CHECK(i < outputs_.size())
      << "output " << i << " out of range: the model has " << outputs_.size();
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
      << "input '" << t.name << "' must have shape " << t.array.shape_string() << ", got "
      << value.shape_string();
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
  if (n.vdla != nullptr) {
    // A fresh queue per run: its stream and micro-kernels go to DRAM after the tensors and are
    // freed again, within the room set aside at load.
    const uint64_t mark = dram_->size();
    vdla::CommandQueue q(*vdla_device_, *dram_);
    n.vdla->emit(q, n.vdla_addrs);
    vdla_stats_[i] = q.synchronize();
    dram_->truncate(mark);
    KILN_ICHECK(dram_->bytes().data() == dram_base_)
        << "the VDLA's DRAM moved during node '" << n.name << "'";
    return;
  }
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
    NodeTime t{nodes_[i].name, nodes_[i].func, v[v.size() / 2], nodes_[i].work};
    for (size_t a : nodes_[i].args) t.work.shapes.push_back(tensors_[a].shape);
    out.push_back(std::move(t));
  }
  return out;
}

const NDArray& GraphExecutor::output(size_t i) const {
  output_name(i);
  return tensors_[outputs_[i]].array;
}

}  // namespace kiln::runtime
