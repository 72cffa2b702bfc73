// The translator from lowered IR to LLVM IR, shared by its source files:
//   codegen_llvm.cc           types, expressions, statements, loops, the error path
//   codegen_llvm_memory.cc    loads, stores (vector, gather/scatter, masked), allocation
//   codegen_llvm_entry.cc     the entry function: argument checks, shape binding, signature
//   codegen_llvm_parallel.cc  outlining of parallel loops into thread-pool closures
//   llvm_intrinsics.cc        math intrinsics (exp, tanh, sigmoid, ...) and calls
//   llvm_bf16.cc              the bf16 pair intrinsics (pack, dot product into an accumulator)
//   codegen_nvptx.cc          GPU kernels for the NVPTX back-end (thread indices, shared memory,
//                             barriers, libdevice math)
// Private to compiler/codegen.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/codegen/codegen_llvm.h"
#include "compiler/ir/expr.h"
#include "compiler/ir/function.h"
#include "compiler/ir/stmt.h"

namespace kiln::codegen::detail {

/// What code generation knows about a buffer's base pointer.
struct BufferInfo {
  int64_t alignment = 1;  ///< bytes the base pointer is known to be aligned to
};

/// The state of the LLVM function being emitted; swapped out while an outlined function (the
/// compute function, a parallel body) is emitted.
struct FunctionState {
  llvm::Function* function = nullptr;
  llvm::Value* error = nullptr;  ///< const char** where messages go
  std::unordered_map<const ir::VarNode*, llvm::Value*> vars;
  std::unordered_map<const ir::VarNode*, BufferInfo> buffers;
  std::vector<llvm::Value*> heap;  ///< live heap allocations, freed on an error return
  bool in_parallel = false;        ///< inside a parallel body: nested parallel loops run serially
  int64_t stack_bytes = 0;         ///< bytes of allocas made for Allocate so far
};

/// Error codes the generated functions return (any non-zero is an error).
inline constexpr int32_t kArgumentError = -1;
inline constexpr int32_t kAssertError = -2;
inline constexpr int32_t kOutOfMemory = -3;

/// An Allocate of at most this many bytes with a constant size becomes an alloca in the
/// function's entry block (so SROA can keep register tiles in registers); larger or symbolic ones
/// go to the heap. A function's allocas are capped at kMaxStackBytes in total.
inline constexpr int64_t kMaxAllocaBytes = 64 * 1024;
inline constexpr int64_t kMaxStackBytes = 256 * 1024;
/// Alignment of allocas and heap allocations.
inline constexpr int64_t kAllocAlignment = 64;

class CodeGenLLVM {
 public:
  CodeGenLLVM(const LLVMTarget& target, llvm::TargetMachine* tm, llvm::LLVMContext* ctx);

  /// Emits the entry, compute function and signature of `f`.
  void add_function(const ir::PrimFunc& f);
  /// Emits `f` as a CUDA kernel (target nvptx64): `void f(ptr params...)` marked a kernel in
  /// nvvm.annotations (codegen_nvptx.cc).
  void add_kernel(const ir::PrimFunc& f);
  /// Verifies and hands over the module.
  std::unique_ptr<llvm::Module> finish();

 private:
  // ---- types (codegen_llvm.cc) ----
  /// The type of a value in registers: bool is i1, handle is ptr, lanes > 1 is a vector.
  llvm::Type* llvm_type(ir::DataType t);
  /// The type of an element in memory: like llvm_type, but bool is i8.
  llvm::Type* memory_type(ir::DataType t);

  // ---- expressions (codegen_llvm.cc; loads in codegen_llvm_memory.cc) ----
  llvm::Value* emit(const ir::Expr& e);
  llvm::Value* emit_cast(ir::DataType to, ir::DataType from, llvm::Value* v);
  llvm::Value* emit_binary(ir::ExprKind kind, ir::DataType t, llvm::Value* a, llvm::Value* b,
                           const ir::Expr& b_expr);
  llvm::Value* emit_compare(ir::ExprKind kind, ir::DataType operand_type, llvm::Value* a,
                            llvm::Value* b);
  llvm::Value* emit_load(const ir::LoadNode* op);
  /// A load whose lane l reads (l % k) * s + b + l / k as k contiguous reads interleaved; null
  /// when the index has another form.
  llvm::Value* emit_interleaved_load(const ir::LoadNode* op);
  llvm::Value* emit_ramp(const ir::RampNode* op);
  /// Splat of a scalar to `lanes` (the value itself when lanes is 1).
  llvm::Value* splat(llvm::Value* v, int lanes);

  /// A select; a branch where it chooses between two memory reads on a lane-uniform condition.
  llvm::Value* emit_select(const ir::SelectNode* op);

  // ---- calls (llvm_intrinsics.cc) ----
  llvm::Value* emit_call(const ir::CallNode* op);
  llvm::Value* emit_pure_intrinsic(const ir::CallNode* op);
  /// dot4_u8s8 (compiler/ir/op.h): vpdpbusd where the target has VNNI, the AArch64 lowering on
  /// AArch64, else widening arithmetic.
  llvm::Value* emit_dot4_u8s8(const ir::CallNode* op);
  /// dot4_u8s8 on AArch64 for n % 4 == 0 lanes (a already 4n bytes; `a_uniform`: the same four in
  /// every lane), in 128-bit pieces: usdot (i8mm), udot with b offset by 128 (dotprod), or NEON
  /// widening multiplies with pairwise sums.
  llvm::Value* emit_dot4_u8s8_neon(llvm::Value* acc, llvm::Value* a, llvm::Value* b,
                                   bool a_uniform);
  /// Sets vnni_512_ / vnni_256_ (x86) or neon_dotprod_ / neon_i8mm_ (AArch64) from the target
  /// machine's CPU and features.
  void detect_dot_product_features(llvm::TargetMachine* tm);
  /// Calls the C function `name` (one argument of element type of `x`) on every lane of x.
  llvm::Value* call_libm_per_lane(const std::string& name, llvm::Value* x);
  // llvm_bf16.cc: bf16x2_pack, and bf16x2_dot added to `acc` (null: to zero).
  static bool is_bf16_intrinsic(const ir::CallNode* op);
  llvm::Value* emit_bf16_intrinsic(const ir::CallNode* op, llvm::Value* acc);
  /// bf16x2_pack of the even and odd elements of 2n contiguous floats (a layout's pairs) as one
  /// read and one conversion; null for any other operands.
  llvm::Value* emit_bf16_pack_contiguous(const ir::CallNode* op);
  // llvm_fast_math.cc: float32 exp/log/tanh/erf as vector-friendly polynomials.
  bool has_fast_math(llvm::Type* t) const;
  llvm::Value* fast_exp(llvm::Value* x);
  llvm::Value* fast_log(llvm::Value* x);
  llvm::Value* fast_tanh(llvm::Value* x);
  llvm::Value* fast_erf(llvm::Value* x);

  // ---- statements (codegen_llvm.cc; stores, allocation in codegen_llvm_memory.cc) ----
  void emit(const ir::Stmt& s);
  /// A sequence; a very large one with its large statements outlined (emit_outlined_call).
  void emit_seq(const ir::Stmt& s);
  /// `s` as a noinline function of the values it uses, called here; its failure returns.
  void emit_outlined_call(const ir::Stmt& s);
  void emit_store(const ir::StoreNode* op);
  void emit_for(const ir::ForNode* op);
  /// for (var = begin; var < end; ++var) body, in the current function.
  void emit_serial_loop(const ir::Var& var, llvm::Value* begin, llvm::Value* end,
                        const ir::Stmt& body, ir::ForKind kind);
  void emit_allocate(const ir::AllocateNode* op);
  void emit_if(const ir::IfThenElseNode* op);
  void emit_assert(const ir::AssertStmtNode* op);

  // ---- GPU kernels (codegen_nvptx.cc) ----
  /// Binds a thread_extent's IterVar to its special register (%tid.x, %ctaid.y, ...).
  void emit_thread_extent(const ir::AttrStmtNode* op);
  /// A "shared" allocation: an addrspace(3) array of the module; "local": an alloca.
  void emit_device_allocate(const ir::AllocateNode* op);
  /// kiln.storage_sync("shared" | "warp").
  void emit_device_barrier(const ir::CallNode* op);
  /// A pure math intrinsic on the GPU: an LLVM intrinsic NVPTX selects natively, or libdevice's
  /// __nv_* function (lane by lane, float16 computed in float32).
  llvm::Value* emit_device_math(const ir::CallNode* op);

  // ---- parallel loops (codegen_llvm_parallel.cc) ----
  void emit_parallel_for(const ir::ForNode* op);
  llvm::GlobalVariable* parallel_launch_global();
  /// The module's internal `kiln.workspace_alloc(i64 bytes) -> ptr` (alloc) or
  /// `kiln.workspace_free(ptr)`: through the runtime's `__kiln_workspace_alloc` / `_free` pointer
  /// when the loader set it, else aligned_alloc / free (c_abi.h).
  llvm::Function* workspace_function(bool alloc);

  // ---- outlining (codegen_llvm_entry.cc) ----
  /// The state of the function being emitted, saved while an outlined one is emitted.
  struct SavedState {
    FunctionState fs;
    llvm::IRBuilderBase::InsertPoint ip;
  };
  /// The variables `body` uses that the current function has bound, in order of first use.
  std::vector<const ir::VarNode*> captured_vars(const ir::Stmt& body);
  /// Starts emitting the internal function `int32 name(ptr error, extra..., captures...)`: the
  /// current state goes to *saved and a fresh one binds each capture to its parameter (pointers
  /// are `noalias` unless two captures share a value). Returns the function.
  llvm::Function* begin_outlined(const std::string& name, const std::vector<llvm::Type*>& extra,
                                 const std::vector<const ir::VarNode*>& captures, bool in_parallel,
                                 SavedState* saved);
  void end_outlined(SavedState* saved);
  /// The entry's argument checks and shape binding for `f`.
  void emit_argument_checks(const ir::PrimFunc& f);

  // ---- helpers ----
  /// A constant C string in the module (deduplicated), as a pointer.
  llvm::Constant* string_constant(const std::string& s);
  /// Branches to the rest of the function when `ok` holds; otherwise stores `message` in
  /// *error, frees the live heap allocations and returns `code`.
  void check_or_fail(llvm::Value* ok, const std::string& message, int32_t code);
  /// Frees live heap allocations and returns `code` (the message is already stored).
  void emit_error_return(llvm::Value* code);
  /// Stores `message` in *error (atomically inside parallel bodies).
  void store_error(llvm::Value* message);
  /// Makes an alloca in the entry block of the current function.
  llvm::Value* entry_alloca(llvm::Type* t, llvm::Value* count, int64_t align,
                            const std::string& name);
  /// Alignment in bytes of an access to `buffer` at element `index` (vector lanes from index).
  uint64_t access_alignment(const ir::VarNode* buffer, const ir::Expr& index, ir::DataType elem);
  llvm::Value* lookup_var(const ir::VarNode* v);
  /// Sets target-cpu/-features and the other attributes every function gets.
  void set_function_attributes(llvm::Function* f);
  /// Declares (once) a C function of the module, e.g. aligned_alloc, free, tanhf.
  llvm::FunctionCallee c_function(const std::string& name, llvm::Type* ret,
                                  const std::vector<llvm::Type*>& params);

  const LLVMTarget& target_;
  llvm::LLVMContext* ctx_;
  std::unique_ptr<llvm::Module> module_;
  llvm::IRBuilder<> builder_;
  FunctionState fs_;
  std::string func_name_;  ///< name of the PrimFunc being emitted (for outlined names)
  int parallel_count_ = 0;
  int outlined_count_ = 0;  ///< parts of the current function outlined by emit_seq
  std::map<std::string, llvm::Constant*> strings_;
  llvm::GlobalVariable* parallel_launch_ = nullptr;
  llvm::Function* workspace_alloc_ = nullptr;
  llvm::Function* workspace_free_ = nullptr;
  bool vnni_512_ = false;      ///< llvm.x86.avx512.vpdpbusd.512 is available
  bool vnni_256_ = false;      ///< llvm.x86.avx512.vpdpbusd.256 is available (AVX-VNNI or VNNI+VL)
  bool neon_dotprod_ = false;  ///< AArch64 udot / sdot (FEAT_DotProd)
  bool neon_i8mm_ = false;     ///< AArch64 usdot (FEAT_I8MM)
  /// The kernel's constant threadIdx.{x,y,z} extents seen so far (-1: not constant).
  std::map<std::string, int64_t> thread_extents_;

  llvm::Type* i1_;
  llvm::Type* i8_;
  llvm::Type* i16_;
  llvm::Type* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
};

}  // namespace kiln::codegen::detail
