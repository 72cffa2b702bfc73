#include "compiler/codegen/build_device.h"

#include <cstdlib>

#include "base/error.h"
#include "compiler/codegen/codegen_device_c.h"
#include "compiler/codegen/nvrtc.h"
#include "compiler/ir/op.h"
#include "deploy/runtime/dtype.h"

namespace kiln::codegen {
namespace {

KilnDType runtime_dtype(ir::DataType t) {
  const std::string s = t.str();
  return runtime::parse_dtype(s);
}

/// KILN_CUDA_PTX=nvptx: every arch's PTX from the given compiler, so that both paths can run
/// on one GPU (scripts/gpu-check.sh).
bool nvptx_forced() {
  const char* v = std::getenv("KILN_CUDA_PTX");
  return v != nullptr && std::string(v) == "nvptx";
}

std::vector<ir::PrimFunc> kernel_funcs(const pass::DeviceFunction& f) {
  std::vector<ir::PrimFunc> funcs;
  for (const auto& k : f.kernels) funcs.push_back(k.func);
  return funcs;
}

}  // namespace

std::string device_source(const pass::DeviceFunction& f, const target::Target& target) {
  KILN_USER_CHECK(target.is_gpu()) << "device code for '" << f.name << "': target '" << target.str()
                                   << "' is not a GPU (cuda, opencl)";
  return target.kind == TargetKind::kCuda ? print_cuda(kernel_funcs(f))
                                          : print_opencl(kernel_funcs(f));
}

runtime::DeviceProgram build_device(const pass::DeviceFunction& f, const target::Target& target,
                                    const PtxCompiler& older_arch_ptx) {
  runtime::DeviceProgram p;
  p.name = f.name;
  p.target = target.str();
  if (target.kind == TargetKind::kCuda) {
    p.format = "ptx";
    if (!older_arch_ptx || (nvrtc_accepts(target.arch) && !nvptx_forced())) {
      p.code = nvrtc_compile(device_source(f, target), target.arch, f.name + ".cu");
    } else {
      p.code = older_arch_ptx(kernel_funcs(f), target.arch);
    }
    // CUDA 13's ptxas, like its NVRTC, assembles for sm_75 and newer only.
    if (nvrtc_accepts(target.arch) && !find_ptxas().empty()) {
      check_kernel_resources(ptxas_resources(p.code, target.arch), target);
    }
  } else {
    p.format = "cl";
    p.code = device_source(f, target);
  }
  for (const ir::Param& param : f.params) {
    KILN_USER_CHECK(param.is_tensor())
        << "device function '" << f.name << "': scalar parameter '" << param.var.name()
        << "' (device programs take tensors only)";
    runtime::DeviceProgram::Tensor t;
    t.name = param.buffer->name;
    t.dtype = runtime_dtype(param.buffer->dtype);
    for (const ir::Expr& d : param.buffer->shape) {
      auto v = ir::as_const_int(d);
      KILN_USER_CHECK(v.has_value())
          << "device function '" << f.name << "': tensor '" << t.name << "' has a symbolic shape";
      t.shape.push_back(*v);
    }
    p.params.push_back(std::move(t));
  }
  for (const pass::Workspace& w : f.workspaces) {
    p.workspace_bytes.push_back(w.elements * runtime::dtype_bytes(runtime_dtype(w.dtype)));
  }
  for (const pass::DeviceKernel& k : f.kernels) {
    runtime::DeviceProgram::Kernel rk;
    rk.name = k.func.name;
    rk.launch = k.launch;
    rk.args = k.args;
    for (size_t i = 0; i < k.args.size(); ++i) {
      KILN_USER_CHECK(k.func.params[i].is_tensor())
          << "kernel '" << rk.name << "': scalar parameter '" << k.func.params[i].var.name()
          << "' (device programs pass tensors only)";
    }
    p.kernels.push_back(std::move(rk));
  }
  return p;
}

}  // namespace kiln::codegen
