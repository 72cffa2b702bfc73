// OpenCL C: the DeviceDialect of OpenCL devices (after TVM's codegen_opencl.cc), and
// print_opencl. Kiln's "shared" scope is OpenCL's __local; Kiln's "local" is OpenCL's private.
#include <string>

#include "compiler/codegen/codegen_device_c.h"

namespace kiln::codegen {
namespace {

using ir::DataType;

class OpenCLDialect final : public DeviceDialect {
 public:
  std::string preamble(bool uses_half, bool uses_double) const override {
    std::string s;
    if (uses_double) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    if (uses_half) s += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n";
    return s;
  }
  std::string helper_prefix() const override { return "static inline"; }
  std::string kernel_prefix(int64_t /*threads_per_block*/) const override {
    return "__kernel void";
  }
  std::string pointer_param(const std::string& elem_type, const std::string& name,
                            bool read_only) const override {
    return std::string("__global ") + (read_only ? "const " : "") + elem_type + "* restrict " +
           name;
  }
  std::string thread_index(const std::string& tag) const override {
    const std::string dim = std::to_string(tag.back() - 'x');
    return (tag.rfind("threadIdx", 0) == 0 ? "(int)get_local_id(" : "(int)get_group_id(") + dim +
           ")";
  }
  std::string shared_array(const std::string& elem_type, const std::string& name,
                           int64_t elements) const override {
    return "__local " + elem_type + " " + name + "[" + std::to_string(elements) + "];";
  }
  std::string barrier(const std::string& /*scope*/) const override {
    return "barrier(CLK_LOCAL_MEM_FENCE);";
  }
  std::string type_name(DataType t) const override {
    const std::string base = element_type_base(t, "long");
    return t.is_vector() ? base + std::to_string(t.lanes()) : base;
  }
  std::string int64_suffix() const override { return "L"; }
  std::string infinity(DataType t) const override {
    return t.bits() == 64 ? "(double)INFINITY" : "INFINITY";
  }
  std::string nan(DataType t) const override { return t.bits() == 64 ? "(double)NAN" : "NAN"; }
  std::string math_function(const std::string& name, DataType /*t*/) const override {
    return name == "roundeven" ? "rint" : name;  // OpenCL's math functions are overloaded
  }
  std::string min_max_function(bool is_min, DataType t) const override {
    if (t.is_float()) return is_min ? "fmin" : "fmax";
    return is_min ? "min" : "max";
  }
  bool has_wide_access(DataType t) const override {
    const int lanes = t.lanes();
    const bool width = lanes == 2 || lanes == 3 || lanes == 4 || lanes == 8 || lanes == 16;
    return width && !t.is_bool() && !(t.is_float() && t.bits() == 16);
  }
  int wide_access_alignment(DataType /*t*/) const override {
    return 0;
  }  // vloadN: element alignment
  std::string wide_load(DataType t, const std::string& address) const override {
    return "vload" + std::to_string(t.lanes()) + "(0, " + address + ")";
  }
  std::string wide_store(DataType t, const std::string& address,
                         const std::string& value) const override {
    return "vstore" + std::to_string(t.lanes()) + "(" + value + ", 0, " + address + ");";
  }
  std::string vector_literal(DataType t, const std::vector<std::string>& lanes) const override {
    std::string s = "((" + type_name(t) + ")(";
    for (size_t i = 0; i < lanes.size(); ++i) s += (i ? ", " : "") + lanes[i];
    return s + "))";
  }
  std::string lane_field(DataType t, int lane) const override {
    if (t.lanes() <= 4) return std::string(".") + "xyzw"[lane];
    return std::string(".s") + "0123456789abcdef"[lane];
  }
  std::string assertion(const std::string& condition, const std::string& message) const override {
    // OpenCL C has no assert and no way to stop a kernel with an error.
    std::string text;
    for (char c : message) text += c == '\n' ? ' ' : c;
    return "// assert " + condition + ": " + text + " (OpenCL C cannot check it)";
  }
};

}  // namespace

std::string print_opencl(const std::vector<ir::PrimFunc>& funcs) {
  return print_device_c(funcs, OpenCLDialect());
}

}  // namespace kiln::codegen
