#include "deploy/runtime/device_program.h"

#include <array>
#include <cctype>

#include "base/error.h"
#include "deploy/runtime/dtype.h"

namespace kiln::runtime {
namespace {

Json ints(const std::vector<int64_t>& v) {
  Json::Array a;
  for (int64_t x : v) a.emplace_back(x);
  return a;
}

Json ints3(const std::array<int64_t, 3>& v) { return ints({v[0], v[1], v[2]}); }

std::vector<int64_t> read_ints(const Json& j, const std::string& what) {
  std::vector<int64_t> out;
  for (const Json& x : j.as_array(what)) out.push_back(x.as_int(what));
  return out;
}

std::array<int64_t, 3> read_extents(const Json& j, const std::string& what) {
  std::vector<int64_t> v = read_ints(j, what);
  KILN_USER_CHECK(v.size() == 3) << what << ": 3 extents (x, y, z) expected, got " << v.size();
  for (int64_t x : v)
    KILN_USER_CHECK(x > 0 && x <= (int64_t{1} << 31))
        << what << ": extent " << x << " out of range";
  return {v[0], v[1], v[2]};
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

int64_t DeviceProgram::Tensor::bytes() const {
  int64_t n = dtype_bytes(dtype);
  for (int64_t d : shape) n *= d;
  return n;
}

Json DeviceProgram::to_json() const {
  Json::Array ps, ks, ws;
  for (const Tensor& t : params) {
    ps.emplace_back(Json::Object{
        {"name", t.name}, {"dtype", dtype_to_string(t.dtype)}, {"shape", ints(t.shape)}});
  }
  for (int64_t w : workspace_bytes) ws.emplace_back(w);
  for (const Kernel& k : kernels) {
    Json::Array args;
    for (int a : k.args) args.emplace_back(a);
    ks.emplace_back(Json::Object{{"name", k.name},
                                 {"grid", ints3(k.launch.grid)},
                                 {"block", ints3(k.launch.block)},
                                 {"dyn_shared_bytes", k.launch.dyn_shared_bytes},
                                 {"args", args}});
  }
  return Json::Object{{"name", name}, {"target", target},      {"format", format}, {"code", code},
                      {"params", ps}, {"workspace_bytes", ws}, {"kernels", ks}};
}

DeviceProgram DeviceProgram::from_json(const Json& j, const std::string& origin) {
  const std::string what = "device program in " + origin;
  DeviceProgram p;
  p.name = j.at("name", what).as_string(what + ": name");
  p.target = j.at("target", what).as_string(what + ": target");
  p.format = j.at("format", what).as_string(what + ": format");
  KILN_USER_CHECK(p.format == "ptx" || p.format == "cl")
      << what << ": format '" << p.format << "' is not one of ptx, cl";
  p.code = j.at("code", what).as_string(what + ": code");
  for (const Json& t : j.at("params", what).as_array(what + ": params")) {
    const std::string tw = what + ": params";
    Tensor x;
    x.name = t.at("name", tw).as_string(tw + ": name");
    x.dtype = parse_dtype(t.at("dtype", tw).as_string(tw + ": dtype"));
    x.shape = read_ints(t.at("shape", tw), tw + " '" + x.name + "': shape");
    int64_t elements = 1;
    for (int64_t d : x.shape) {
      KILN_USER_CHECK(d >= 0 && (d == 0 || elements <= (int64_t{1} << 40) / d))
          << tw << " '" << x.name << "': shape dimension " << d << " out of range";
      elements *= d;
    }
    p.params.push_back(std::move(x));
  }
  for (const Json& w : j.at("workspace_bytes", what).as_array(what + ": workspace_bytes")) {
    int64_t b = w.as_int(what + ": workspace_bytes");
    KILN_USER_CHECK(b > 0 && b <= (int64_t{1} << 40))
        << what << ": workspace of " << b << " bytes out of range";
    p.workspace_bytes.push_back(b);
  }
  const int np = static_cast<int>(p.params.size()), nw = static_cast<int>(p.workspace_bytes.size());
  for (const Json& k : j.at("kernels", what).as_array(what + ": kernels")) {
    const std::string kw = what + ": kernels";
    Kernel x;
    x.name = k.at("name", kw).as_string(kw + ": name");
    KILN_USER_CHECK(is_identifier(x.name)) << kw << ": '" << x.name << "' is not a kernel name";
    x.launch.grid = read_extents(k.at("grid", kw), kw + " '" + x.name + "': grid");
    x.launch.block = read_extents(k.at("block", kw), kw + " '" + x.name + "': block");
    x.launch.dyn_shared_bytes = k.at("dyn_shared_bytes", kw).as_int(kw + ": dyn_shared_bytes");
    KILN_USER_CHECK(x.launch.dyn_shared_bytes >= 0 &&
                    x.launch.dyn_shared_bytes <= (int64_t{1} << 30))
        << kw << " '" << x.name << "': dyn_shared_bytes out of range";
    for (const Json& a : k.at("args", kw).as_array(kw + ": args")) {
      int64_t i = a.as_int(kw + ": args");
      KILN_USER_CHECK((i >= 0 && i < np) || (i < 0 && -1 - i < nw))
          << kw << " '" << x.name << "': argument " << i << " names no tensor (" << np
          << ") or workspace (" << nw << ")";
      x.args.push_back(static_cast<int>(i));
    }
    p.kernels.push_back(std::move(x));
  }
  KILN_USER_CHECK(!p.kernels.empty()) << what << ": no kernels";
  return p;
}

LoadedDeviceProgram::LoadedDeviceProgram(DeviceAPI& device, DeviceProgram program)
    : device_(&device), program_(std::move(program)) {
  KILN_USER_CHECK(program_.format == device.module_format())
      << "device program '" << program_.name << "' holds " << program_.format << " code, but "
      << device.description() << " loads " << device.module_format();
  module_ = device.load_module(program_.code, program_.format);
  for (const auto& k : program_.kernels) kernels_.push_back(module_.kernel(k.name));
  for (int64_t b : program_.workspace_bytes) workspaces_.push_back(device.alloc(b));
}

void LoadedDeviceProgram::launch(std::span<const DeviceBuffer* const> params) {
  KILN_USER_CHECK(params.size() == program_.params.size())
      << "device program '" << program_.name << "' takes " << program_.params.size()
      << " tensors, got " << params.size();
  for (size_t i = 0; i < params.size(); ++i) {
    const DeviceProgram::Tensor& t = program_.params[i];
    KILN_USER_CHECK(params[i] && params[i]->defined())
        << "device program '" << program_.name << "': no buffer for tensor '" << t.name << "'";
    KILN_USER_CHECK(params[i]->device() == device_)
        << "device program '" << program_.name << "': the buffer of '" << t.name
        << "' is on another device";
    KILN_USER_CHECK(params[i]->bytes() >= t.bytes())
        << "device program '" << program_.name << "': the buffer of '" << t.name << "' has "
        << params[i]->bytes() << " bytes, the tensor needs " << t.bytes();
  }
  std::vector<KernelArg> args;
  for (size_t k = 0; k < kernels_.size(); ++k) {
    args.clear();
    for (int a : program_.kernels[k].args) {
      args.emplace_back(a >= 0 ? *params[a] : workspaces_[-1 - a]);
    }
    device_->launch(kernels_[k], program_.kernels[k].launch, args);
  }
}

}  // namespace kiln::runtime
