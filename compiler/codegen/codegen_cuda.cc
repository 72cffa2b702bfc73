// CUDA C: the DeviceDialect of NVIDIA GPUs (after TVM's codegen_cuda.cc), and
// print_cuda. Kernels are `extern "C"` so that their PTX entries keep the functions' names.
#include <string>

#include "compiler/codegen/codegen_device_c.h"

namespace kiln::codegen {
namespace {

using ir::DataType;

class CudaDialect final : public DeviceDialect {
 public:
  std::string preamble(bool uses_half, bool /*uses_double*/) const override {
    return uses_half ? "#include <cuda_fp16.h>\n" : "";
  }
  std::string helper_prefix() const override { return "__device__ __forceinline__"; }
  std::string kernel_prefix(int64_t threads_per_block) const override {
    std::string s = "extern \"C\" __global__ void";
    if (threads_per_block > 0) s += " __launch_bounds__(" + std::to_string(threads_per_block) + ")";
    return s;
  }
  std::string pointer_param(const std::string& elem_type, const std::string& name,
                            bool read_only) const override {
    return (read_only ? "const " : "") + elem_type + "* __restrict__ " + name;
  }
  std::string thread_index(const std::string& tag) const override { return tag; }
  std::string shared_array(const std::string& elem_type, const std::string& name,
                           int64_t elements) const override {
    // Aligned for the widest access (float4 / int4).
    return "__shared__ __align__(16) " + elem_type + " " + name + "[" + std::to_string(elements) +
           "];";
  }
  std::string barrier(const std::string& scope) const override {
    return scope == "warp" ? "__syncwarp();" : "__syncthreads();";
  }
  std::string type_name(DataType t) const override {
    const std::string base = element_type_base(t, "longlong");
    if (t.is_vector()) return base + std::to_string(t.lanes());
    static const std::pair<const char*, const char*> kScalar[] = {
        {"char", "signed char"},  {"uchar", "unsigned char"}, {"ushort", "unsigned short"},
        {"uint", "unsigned int"}, {"longlong", "long long"},  {"ulonglong", "unsigned long long"}};
    for (auto [vector_base, scalar] : kScalar) {
      if (base == vector_base) return scalar;
    }
    return base;
  }
  std::string int64_suffix() const override { return "LL"; }
  std::string infinity(DataType t) const override {
    return t.bits() == 64 ? "__longlong_as_double(0x7ff0000000000000LL)"
                          : "__int_as_float(0x7f800000)";
  }
  std::string nan(DataType t) const override {
    return t.bits() == 64 ? "__longlong_as_double(0x7ff8000000000000LL)"
                          : "__int_as_float(0x7fc00000)";
  }
  std::string math_function(const std::string& name, DataType t) const override {
    const std::string f = name == "roundeven" ? "rint" : name;
    return t.bits() == 32 ? f + "f" : f;
  }
  std::string min_max_function(bool is_min, DataType t) const override {
    if (!t.is_float()) return is_min ? "min" : "max";
    return std::string(is_min ? "fmin" : "fmax") + (t.bits() == 32 ? "f" : "");
  }
  bool has_wide_access(DataType t) const override {
    const int lanes = t.lanes(), bits = t.bits();
    if (t.is_float())
      return (bits == 32 && (lanes == 2 || lanes == 4)) || (bits == 64 && lanes == 2) ||
             (bits == 16 && lanes == 2);
    if (t.is_int() || t.is_uint())
      return (bits == 32 && (lanes == 2 || lanes == 4)) || (bits == 8 && lanes == 4);
    return false;
  }
  int wide_access_alignment(DataType t) const override { return t.bytes() * t.lanes(); }
  std::string wide_load(DataType t, const std::string& address) const override {
    return "*(" + type_name(t) + "*)(" + address + ")";
  }
  std::string wide_store(DataType t, const std::string& address,
                         const std::string& value) const override {
    return "*(" + type_name(t) + "*)(" + address + ") = " + value + ";";
  }
  std::string vector_literal(DataType t, const std::vector<std::string>& lanes) const override {
    std::string s = "make_" + type_name(t) + "(";
    for (size_t i = 0; i < lanes.size(); ++i) s += (i ? ", " : "") + lanes[i];
    return s + ")";
  }
  std::string lane_field(DataType /*t*/, int lane) const override {
    return std::string(".") + "xyzw"[lane];
  }
  std::string assertion(const std::string& condition, const std::string& message) const override {
    std::string quoted;
    for (char c : message) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c == '\n' ? ' ' : c;
    }
    return "assert((" + condition + ") && \"" + quoted + "\");";
  }
};

}  // namespace

std::string print_cuda(const std::vector<ir::PrimFunc>& funcs) {
  return print_device_c(funcs, CudaDialect());
}

}  // namespace kiln::codegen
