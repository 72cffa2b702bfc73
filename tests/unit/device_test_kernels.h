// Device functions built by hand with the IR constructors, as the GPU lowering will hand them to
// code generation (docs/gpu.md): the paper's shared-memory tiled matmul and small kernels that
// exercise one printing rule each. Shared by the device codegen, NVRTC and OpenCL tests.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/ir/op.h"

namespace kiln::testing {

/// A thread_extent attribute binding `iv` over `extent` around `body`.
inline ir::Stmt thread_extent(const ir::IterVar& iv, int64_t extent, ir::Stmt body) {
  return ir::attr_stmt(iv.node(), ir::attr::kThreadExtent, ir::make_const(ir::kInt32, extent),
                       std::move(body));
}

inline ir::IterVar thread_axis(const std::string& name, const std::string& tag, int64_t extent) {
  return ir::IterVar(ir::Var(name), ir::Range(0, ir::make_const(ir::kInt32, extent)),
                     ir::IterVarType::kThreadIndex, tag);
}

inline ir::Stmt storage_sync() {
  return ir::evaluate(ir::call(ir::kInt32, "kiln.storage_sync", {ir::make_string("shared")},
                               ir::CallKind::kIntrinsic));
}

inline ir::Param tensor_param(const ir::Buffer& b) { return ir::Param{b.data, b}; }

/// The tiled matmul of the paper (section 4.2): C[N, N] = A[N, N] * B[N, N] in 32x32 blocks
/// of 8x8 threads, each computing 4x4 outputs in a local accumulator; per step of 8 along k
/// the block copies its A and B tiles to shared memory, each thread one float4 of each.
constexpr int kMatmulN = 64;
constexpr int kMatmulBlockTile = 32;
constexpr int kMatmulThreads = 8;

inline ir::PrimFunc tiled_matmul() {
  using namespace ir;
  const int n = kMatmulN, tile = kMatmulBlockTile, kt = 8;
  Buffer A = make_buffer("A", kFloat32, {n, n});
  Buffer B = make_buffer("B", kFloat32, {n, n});
  Buffer C = make_buffer("C", kFloat32, {n, n});
  IterVar by = thread_axis("by", "blockIdx.y", n / tile);
  IterVar bx = thread_axis("bx", "blockIdx.x", n / tile);
  IterVar ty = thread_axis("ty", "threadIdx.y", kMatmulThreads);
  IterVar tx = thread_axis("tx", "threadIdx.x", kMatmulThreads);
  Var AA("AA", DataType::Handle()), BB("BB", DataType::Handle()), CL("CL", DataType::Handle());
  Var k("k"), kk("kk"), i("i"), j("j");
  const Expr ty_ = ty, tx_ = tx, by_ = by, bx_ = bx;

  Stmt init = for_loop(i, 0, 4, ForKind::kUnrolled,
                       for_loop(j, 0, 4, ForKind::kUnrolled, store(CL, 0.0f, i * 4 + j)));
  // AA[row][kk] (32 x 8) and BB[kk][col] (8 x 32): thread (ty, tx) copies elements
  // ty*32 + tx*4 + [0, 4) of each tile.
  Expr slot = ty_ * 32 + tx_ * 4;
  Expr a_index = (by_ * tile + ty_ * 4 + floordiv(tx_, 2)) * n + k * kt + floormod(tx_, 2) * 4;
  Expr b_index = (k * kt + ty_) * n + bx_ * tile + tx_ * 4;
  Stmt fetch_a =
      store(AA, load(DataType::Float(32, 4), A.data, ramp(a_index, 1, 4)), ramp(slot, 1, 4));
  Stmt fetch_b =
      store(BB, load(DataType::Float(32, 4), B.data, ramp(b_index, 1, 4)), ramp(slot, 1, 4));
  Expr acc = i * 4 + j;
  Stmt update = store(CL,
                      load(kFloat32, CL, acc) + load(kFloat32, AA, (ty_ * 4 + i) * kt + kk) *
                                                    load(kFloat32, BB, kk * tile + tx_ * 4 + j),
                      acc);
  Stmt compute = for_loop(
      kk, 0, kt, ForKind::kSerial,
      for_loop(i, 0, 4, ForKind::kUnrolled, for_loop(j, 0, 4, ForKind::kUnrolled, update)));
  Stmt k_loop = for_loop(k, 0, n / kt, ForKind::kSerial,
                         seq({storage_sync(), fetch_a, fetch_b, storage_sync(), compute}));
  Stmt write = for_loop(i, 0, 4, ForKind::kUnrolled,
                        store(C.data, load(DataType::Float(32, 4), CL, ramp(i * 4, 1, 4)),
                              ramp((by_ * tile + ty_ * 4 + i) * n + bx_ * tile + tx_ * 4, 1, 4)));
  Stmt body = allocate(AA, kFloat32, {tile * kt}, "shared",
                       allocate(BB, kFloat32, {kt * tile}, "shared",
                                allocate(CL, kFloat32, {16}, "local", seq({init, k_loop, write}))));
  body = thread_extent(
      by, n / tile,
      thread_extent(bx, n / tile,
                    thread_extent(ty, kMatmulThreads, thread_extent(tx, kMatmulThreads, body))));
  return PrimFunc{"tiled_matmul", {tensor_param(A), tensor_param(B), tensor_param(C)}, body};
}

/// Integer division and remainder of negative numbers: one block of 16 threads; thread t
/// writes out[t*8 + 0..7] = x[t] / n, x[t] % n (truncating), floordiv(x[t], 4),
/// floormod(x[t], 4), floordiv(x[t], 3), floormod(x[t], 3), floordiv(x[t], n),
/// floordiv(t + 5, 3) (provably non-negative).
constexpr int kDivModThreads = 16;
inline ir::PrimFunc div_mod() {
  using namespace ir;
  Buffer X = make_buffer("x", kInt32, {kDivModThreads});
  Buffer Out = make_buffer("out", kInt32, {kDivModThreads * 8});
  Var n("n");
  IterVar tx = thread_axis("tx", "threadIdx.x", kDivModThreads);
  const Expr t = tx, x = load(kInt32, X.data, t);
  const std::vector<Expr> values = {
      x / n,          x % n,          floordiv(x, 4), floormod(x, 4),
      floordiv(x, 3), floormod(x, 3), floordiv(x, n), floordiv(t + 5, 3)};
  std::vector<Stmt> stores;
  for (size_t i = 0; i < values.size(); ++i) {
    stores.push_back(store(Out.data, values[i], t * 8 + static_cast<int>(i)));
  }
  return PrimFunc{"div_mod",
                  {tensor_param(X), tensor_param(Out), Param{n, std::nullopt}},
                  thread_extent(tx, kDivModThreads, seq(stores))};
}

/// Every math intrinsic of the IR, in the order of kMathIntrinsics.
inline const std::vector<std::string>& math_intrinsics() {
  static const std::vector<std::string> names = {
      "exp",   "exp2",      "log",   "log2", "log10", "sqrt",    "fabs", "floor", "ceil", "trunc",
      "round", "roundeven", "sin",   "cos",  "tan",   "asin",    "acos", "atan",  "sinh", "cosh",
      "asinh", "acosh",     "atanh", "tanh", "erf",   "sigmoid", "pow",  "fma"};
  return names;
}

/// One thread per intrinsic: out[i] = intrinsic_i(x[i]) (pow(x, y), fma(x, y, y) with y = x[i+1]),
/// over tensors of `t`.
inline ir::PrimFunc math(const std::string& name, ir::DataType t) {
  using namespace ir;
  const int count = static_cast<int>(math_intrinsics().size());
  Buffer X = make_buffer("x", t, {count + 1});
  Buffer Out = make_buffer("out", t, {count});
  std::vector<Stmt> stores;
  for (int i = 0; i < count; ++i) {
    const std::string& f = math_intrinsics()[i];
    Expr x = load(t, X.data, i), y = load(t, X.data, i + 1);
    std::vector<Expr> args = {x};
    if (f == "pow") args = {x, y};
    if (f == "fma") args = {x, y, y};
    stores.push_back(store(Out.data, call(t, f, args, CallKind::kPureIntrinsic), i));
  }
  IterVar bx = thread_axis("bx", "blockIdx.x", 1);
  return PrimFunc{name, {tensor_param(X), tensor_param(Out)}, thread_extent(bx, 1, seq(stores))};
}

/// Vector accesses: one block of 16 threads over float tensors x[64] and out[64]. Thread t
/// writes out[4t, 4t+4) = x[4t, 4t+4) * 2 + 1 (contiguous, aligned), then
/// out[4t, 4t+4) = x[t + 16 * [0, 4)] (a gather), then, where 4t + lane < 62,
/// out[4t, 4t+4) = max(out[4t, 4t+4), float(n)) (a predicated store that reads what it writes).
inline ir::PrimFunc vectors() {
  using namespace ir;
  Buffer X = make_buffer("x", kFloat32, {64});
  Buffer Out = make_buffer("out", kFloat32, {64});
  Var n("n");
  IterVar tx = thread_axis("tx", "threadIdx.x", 16);
  const Expr t = tx;
  const DataType f4 = DataType::Float(32, 4);
  Stmt contiguous =
      store(Out.data, load(f4, X.data, ramp(t * 4, 1, 4)) * broadcast(2.0f, 4) + broadcast(1.0f, 4),
            ramp(t * 4, 1, 4));
  Stmt gather = store(Out.data, load(f4, X.data, ramp(t, 16, 4)), ramp(t * 4, 1, 4));
  Expr own = ramp(t * 4, 1, 4);
  Expr inside = own < broadcast(Expr(62), 4);
  Stmt predicated = store(
      Out.data, max(load(f4, Out.data, own, inside), broadcast(cast(kFloat32, n), 4)), own, inside);
  return PrimFunc{"vectors",
                  {tensor_param(X), tensor_param(Out), Param{n, std::nullopt}},
                  thread_extent(tx, 16, seq({contiguous, gather, predicated}))};
}

/// Lets, selects, casts, conditions, asserts, constants and a scalar parameter.
inline ir::PrimFunc misc() {
  using namespace ir;
  Buffer X = make_buffer("x", kFloat32, {128});
  Buffer Out = make_buffer("out", kFloat32, {128});
  Var n("n"), m("m"), y("y", kFloat32);
  IterVar tx = thread_axis("tx", "threadIdx.x", 32);
  const Expr t = tx, xt = load(kFloat32, X.data, t);
  Stmt body = seq({
      if_then_else(t < n, store(Out.data, select(xt > 0.0f, xt, xt * 0.1f), t),
                   store(Out.data, min_value(kFloat32), t)),
      store(Out.data, let(y, load(kFloat32, X.data, m) * 2.0f, y * y), t + 32),
      store(Out.data, cast(kFloat32, cast(kInt64, t) * make_const(kInt64, int64_t{3000000000})),
            t + 64),
      store(Out.data, cast(kFloat32, !(t == 3) || (t >= 5 && n != -2)), t + 96),
  });
  body = let_stmt(m, min(t * 2, n - 1), assert_stmt(n > 0, "n must be positive", body));
  return PrimFunc{"misc",
                  {tensor_param(X), tensor_param(Out), Param{n, std::nullopt}},
                  thread_extent(tx, 32, body)};
}

/// A vector Let and a vector Select: out[4t, 4t+4) = let v = x[4t, 4t+4) in
/// select(v > 0, v, v * 0.5), one block of 16 threads over float tensors of 64.
inline ir::PrimFunc vector_let() {
  using namespace ir;
  Buffer X = make_buffer("x", kFloat32, {64});
  Buffer Out = make_buffer("out", kFloat32, {64});
  IterVar tx = thread_axis("tx", "threadIdx.x", 16);
  Var v("v", DataType::Float(32, 4));
  Expr own = ramp(Expr(tx) * 4, 1, 4);
  Expr value = let(v, load(DataType::Float(32, 4), X.data, own),
                   select(v > broadcast(0.0f, 4), v, v * broadcast(0.5f, 4)));
  return PrimFunc{"vector_let",
                  {tensor_param(X), tensor_param(Out)},
                  thread_extent(tx, 16, store(Out.data, value, own))};
}

}  // namespace kiln::testing
