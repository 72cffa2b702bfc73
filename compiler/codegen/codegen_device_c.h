// Device C: the source text of GPU kernels, printed from flattened device functions (the `func`
// of a DeviceKernel, docs/gpu.md section 2) as CUDA C (for NVRTC) or OpenCL C (built by the
// OpenCL driver at load time).
//
// One printer walks the IR; a DeviceDialect supplies what differs between the two languages
// (docs/gpu.md section 2): the kernel prefix, parameter qualifiers, thread indices, storage scopes,
// barriers, vector types and math names. What a device function may contain:
//  - params: tensors (global buffers) then scalars;
//  - AttrStmt "thread_extent" over an IterVar tagged blockIdx.{x,y,z} / threadIdx.{x,y,z}: the
//    IterVar's var is the index from there on (printed as `int tx = threadIdx.x;` when used);
//  - Allocate in scope "shared" (printed once at the top of the kernel: OpenCL wants __local
//    arrays at kernel scope) or "local" (a plain array where it stands), constant extents;
//  - Evaluate(Call "kiln.storage_sync"(StringImm "shared")) barriers;
//  - loops, conditions, lets, asserts, scalar and vector loads/stores (Ramp / Broadcast
//    indices, predicates), and every expression of the IR except tensor-level ones.
// Vector values are computed lane by lane; contiguous vector loads and stores of global and
// shared buffers become one wide access (CUDA: `*(float4*)(A + i)` when the index is a known
// multiple of the lanes, buffers being 16-byte aligned; OpenCL: vloadN / vstoreN).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/function.h"

namespace kiln::codegen {

/// The CUDA C of `funcs`: one `extern "C" __global__` kernel per function, named as the
/// function, in one source (helpers and includes first). Raises kiln::Error naming the kernel
/// for IR the device cannot run (a nested "global" allocation, a virtual thread left, a kernel
/// name that is not a C identifier, ...).
std::string print_cuda(const std::vector<ir::PrimFunc>& funcs);

/// The OpenCL C of `funcs`: one `__kernel` per function, in one source.
std::string print_opencl(const std::vector<ir::PrimFunc>& funcs);

/// What differs between device C languages. Types passed here are scalar unless named a vector.
class DeviceDialect {
 public:
  virtual ~DeviceDialect() = default;

  /// Source text before the first kernel (includes, extension pragmas), given what the kernels
  /// use.
  virtual std::string preamble(bool uses_half, bool uses_double) const = 0;
  /// Qualifiers of a helper function defined in the source ("__device__ __forceinline__").
  virtual std::string helper_prefix() const = 0;
  /// Everything before the kernel's name: `extern "C" __global__ void __launch_bounds__(256)`.
  /// `threads_per_block` is 0 when the threadIdx extents are not all constants.
  virtual std::string kernel_prefix(int64_t threads_per_block) const = 0;
  /// A tensor parameter: `const float* __restrict__ A`.
  virtual std::string pointer_param(const std::string& elem_type, const std::string& name,
                                    bool read_only) const = 0;
  /// The int value of a thread index: tag is "threadIdx.x" ... "blockIdx.z".
  virtual std::string thread_index(const std::string& tag) const = 0;
  /// The declaration of a shared (per block) array.
  virtual std::string shared_array(const std::string& elem_type, const std::string& name,
                                   int64_t elements) const = 0;
  /// The statement of a barrier between the threads of a block over `scope` ("shared", "warp").
  virtual std::string barrier(const std::string& scope) const = 0;
  /// The C type of a scalar (or, for vector_type, of a vector that wide accesses use).
  virtual std::string type_name(ir::DataType t) const = 0;
  /// The suffix of a 64-bit integer literal ("LL" / "L").
  virtual std::string int64_suffix() const = 0;
  /// +infinity of a float type (there is no portable literal).
  virtual std::string infinity(ir::DataType t) const = 0;
  /// A quiet NaN of a float type.
  virtual std::string nan(ir::DataType t) const = 0;
  /// The function computing math intrinsic `name` ("exp", "erf", ...) on a float32 / float64,
  /// or "" when the dialect has none. float16 is computed in float32 by the printer.
  virtual std::string math_function(const std::string& name, ir::DataType t) const = 0;
  /// min / max of two scalars of type t.
  virtual std::string min_max_function(bool is_min, ir::DataType t) const = 0;
  /// Whether a wide access of t (a vector type) exists, and its alignment need in bytes (0:
  /// element alignment is enough).
  virtual bool has_wide_access(ir::DataType t) const = 0;
  virtual int wide_access_alignment(ir::DataType t) const = 0;
  /// A wide load of t.lanes() elements from `address` (a pointer expression, e.g. `A + i`).
  virtual std::string wide_load(ir::DataType t, const std::string& address) const = 0;
  /// The statement storing the vector `value` (built by vector_literal or wide_load) at
  /// `address`.
  virtual std::string wide_store(ir::DataType t, const std::string& address,
                                 const std::string& value) const = 0;
  /// A vector of type t from its lanes.
  virtual std::string vector_literal(ir::DataType t,
                                     const std::vector<std::string>& lanes) const = 0;
  /// The field of lane i of a vector value: ".x", ".s5".
  virtual std::string lane_field(ir::DataType t, int lane) const = 0;
  /// The statement checking an assertion inside a kernel.
  virtual std::string assertion(const std::string& condition, const std::string& message) const = 0;
};

/// The OpenCL-style name of t's element type, which both dialects' vector types are built from
/// ("char", "ushort", "float", ...; an unsigned one is "u" + its signed name), with `int64` as the
/// 64-bit integer's name ("long" in OpenCL, "longlong" in CUDA's vector types).
std::string element_type_base(ir::DataType t, const std::string& int64);

/// The device C of `funcs` in `dialect`. print_cuda and print_opencl call this.
std::string print_device_c(const std::vector<ir::PrimFunc>& funcs, const DeviceDialect& dialect);

}  // namespace kiln::codegen
