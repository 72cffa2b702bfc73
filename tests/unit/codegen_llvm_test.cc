// The LLVM back-end end to end: hand-built lowered functions are JIT-compiled (or linked into a
// shared object in memory, or cross-compiled for AArch64), called through the runtime, and compared
// against plain C++ references. Covers vectors (contiguous, strided, predicated), parallel loops on
// 1 and 2 threads, symbolic shapes, allocations (register tile, heap), float16, int8, floor
// division, math intrinsics, argument checks and their messages, and codegen + JIT time of a tiled
// matmul.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/int_math.h"
#include "compiler/codegen/build.h"
#include "compiler/ir/function.h"
#include "compiler/ir/op.h"
#include "compiler/target/target.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"
#include "deploy/runtime/workspace.h"
#include "tests/common/expect_error.h"
#include "tests/common/host_target.h"

namespace kiln::codegen {
namespace {

using ir::Buffer;
using ir::DataType;
using ir::Expr;
using ir::ForKind;
using ir::Param;
using ir::PrimFunc;
using ir::Stmt;
using ir::Var;
using runtime::NDArray;

using testing::host;

Param tensor(const Buffer& b) { return Param{b.data, b}; }
Param scalar(const Var& v) { return Param{v, std::nullopt}; }

PrimFunc func(std::string name, std::vector<Param> params, Stmt body) {
  return PrimFunc{std::move(name), std::move(params), std::move(body)};
}

runtime::Function jit(const PrimFunc& f, const target::Target& t = host()) {
  return build({f}, t).function(f.name);
}

std::vector<float> iota_floats(size_t n, float start = 0, float step = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

/// Restores the runtime's thread count after a test changes it.
class ThreadCountGuard {
 public:
  ThreadCountGuard() : saved_(runtime::num_threads()) {}
  ~ThreadCountGuard() { runtime::set_num_threads(saved_); }

 private:
  int saved_;
};

// ---- basics ----

TEST(CodegenLLVM, VectorAddWithRampIndex) {
  Buffer a = ir::make_buffer("A", ir::kFloat32, {1024});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {1024});
  Buffer c = ir::make_buffer("C", ir::kFloat32, {1024});
  Var i("i");
  const DataType v16 = ir::kFloat32.with_lanes(16);
  Expr idx = ir::ramp(i * 16, 1, 16);
  Stmt body =
      ir::for_loop(i, 0, 64, ForKind::kSerial,
                   ir::store(c.data, ir::load(v16, a.data, idx) + ir::load(v16, b.data, idx), idx));
  runtime::Function f = jit(func("vadd", {tensor(a), tensor(b), tensor(c)}, body));
  EXPECT_EQ(f.signature(), "ttt");
  NDArray A = NDArray::from_vector(iota_floats(1024), {1024});
  NDArray B = NDArray::from_vector(iota_floats(1024, 5, 0.5f), {1024});
  NDArray C = NDArray::empty({1024}, runtime::kFloat32);
  f(A, B, C);
  std::vector<float> out = C.to_vector<float>();
  for (int k = 0; k < 1024; ++k) ASSERT_FLOAT_EQ(out[k], k + 5 + 0.5f * k) << k;
}

TEST(CodegenLLVM, SymbolicShapeBoundFromArgument) {
  Var n("n");
  Buffer a = ir::make_buffer("A", ir::kFloat32, {n});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {n});
  Var i("i");
  Stmt body = ir::for_loop(i, 0, n, ForKind::kSerial,
                           ir::store(b.data, ir::load(ir::kFloat32, a.data, i) * 2.0f + 1.0f, i));
  runtime::Function f = jit(func("scale", {tensor(a), tensor(b)}, body));
  for (int64_t len : {0, 1, 37, 1000}) {
    NDArray A = NDArray::from_vector(iota_floats(static_cast<size_t>(len)), {len});
    NDArray B = NDArray::empty({len}, runtime::kFloat32);
    f(A, B);
    std::vector<float> out = B.to_vector<float>();
    for (int64_t k = 0; k < len; ++k) ASSERT_FLOAT_EQ(out[k], 2.0f * k + 1) << k;
  }
  NDArray A = NDArray::empty({8}, runtime::kFloat32);
  NDArray B = NDArray::empty({9}, runtime::kFloat32);
  EXPECT_ERROR_CONTAINS(f(A, B),
                        "scale: argument 'B' dimension 0 must equal n (n is argument 'A' "
                        "dimension 0)");
}

TEST(CodegenLLVM, ShapeExpressionAndInt64ShapeVar) {
  Var n("n", ir::kInt64);
  Buffer a = ir::make_buffer("A", ir::kFloat32, {n * int64_t{2}});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {n});
  Var i("i", ir::kInt64);
  // B is listed after A but binds n: binding happens before the checks.
  Stmt body =
      ir::for_loop(i, int64_t{0}, n, ForKind::kSerial,
                   ir::store(b.data,
                             ir::load(ir::kFloat32, a.data, i * int64_t{2}) +
                                 ir::load(ir::kFloat32, a.data, i * int64_t{2} + int64_t{1}),
                             i));
  runtime::Function f = jit(func("pairsum", {tensor(a), tensor(b)}, body));
  NDArray A = NDArray::from_vector(iota_floats(10), {10});
  NDArray B = NDArray::empty({5}, runtime::kFloat32);
  f(A, B);
  EXPECT_EQ(B.to_vector<float>(), (std::vector<float>{1, 5, 9, 13, 17}));
  NDArray A2 = NDArray::empty({11}, runtime::kFloat32);
  EXPECT_ERROR_CONTAINS(f(A2, B), "argument 'A' dimension 0 must equal");
}

TEST(CodegenLLVM, ScalarParameters) {
  Var n("n");
  Var alpha("alpha", ir::kFloat32);
  Var shift("shift", ir::kInt32);
  Buffer a = ir::make_buffer("A", ir::kFloat32, {n});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {n});
  Var i("i");
  Stmt body = ir::for_loop(
      i, 0, n, ForKind::kSerial,
      ir::store(b.data, ir::load(ir::kFloat32, a.data, i) * alpha + ir::cast(ir::kFloat32, shift),
                i));
  runtime::Function f =
      jit(func("axpb", {tensor(a), scalar(alpha), scalar(shift), tensor(b)}, body));
  EXPECT_EQ(f.signature(), "tfit");
  NDArray A = NDArray::from_vector(iota_floats(4), {4});
  NDArray B = NDArray::empty({4}, runtime::kFloat32);
  f(A, 0.5, 10, B);
  EXPECT_EQ(B.to_vector<float>(), (std::vector<float>{10, 10.5f, 11, 11.5f}));
  EXPECT_ERROR_CONTAINS(f(A, 0.5, int64_t{1} << 40, B), "argument 'shift' does not fit in int32");
}

// ---- parallel loops ----

PrimFunc parallel_func() {
  Var n("n");
  Buffer a = ir::make_buffer("A", ir::kFloat32, {n, 64});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {n, 64});
  Var i("i"), j("j"), s("s", ir::kFloat32);
  // let s = 3 outside; parallel over rows; the inner loop uses s, n and the row.
  Stmt inner = ir::for_loop(
      j, 0, 64, ForKind::kSerial,
      ir::store(b.data, ir::load(ir::kFloat32, a.data, i * 64 + j) * s + ir::cast(ir::kFloat32, i),
                i * 64 + j));
  Stmt body = ir::let_stmt(s, Expr(3.0f), ir::for_loop(i, 0, n, ForKind::kParallel, inner));
  return func("par", {tensor(a), tensor(b)}, body);
}

TEST(CodegenLLVM, ParallelLoopOnOneAndTwoThreads) {
  ThreadCountGuard guard;
  runtime::Function f = jit(parallel_func());
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    for (int64_t rows : {1, 2, 3, 97}) {
      NDArray A = NDArray::from_vector(iota_floats(static_cast<size_t>(rows * 64)), {rows, 64});
      NDArray B = NDArray::empty({rows, 64}, runtime::kFloat32);
      f(A, B);
      std::vector<float> out = B.to_vector<float>();
      for (int64_t k = 0; k < rows * 64; ++k) {
        ASSERT_FLOAT_EQ(out[k], 3.0f * k + static_cast<float>(k / 64))
            << "threads " << threads << " rows " << rows << " k " << k;
      }
    }
  }
}

TEST(CodegenLLVM, NestedParallelAndParallelInsideSerial) {
  ThreadCountGuard guard;
  Buffer c = ir::make_buffer("C", ir::kInt32, {4, 8, 16});
  Var t("t"), i("i"), j("j");
  // for t (serial): parallel i: parallel j (runs serially inside the body)
  Stmt body = ir::for_loop(
      t, 0, 4, ForKind::kSerial,
      ir::for_loop(i, 0, 8, ForKind::kParallel,
                   ir::for_loop(j, 0, 16, ForKind::kParallel,
                                ir::store(c.data, t * 1000 + i * 100 + j, (t * 8 + i) * 16 + j))));
  runtime::Function f = jit(func("nested", {tensor(c)}, body));
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    NDArray C = NDArray::empty({4, 8, 16}, runtime::kInt32);
    f(C);
    std::vector<int32_t> out = C.to_vector<int32_t>();
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 8; ++b)
        for (int d = 0; d < 16; ++d) ASSERT_EQ(out[(a * 8 + b) * 16 + d], a * 1000 + b * 100 + d);
  }
}

TEST(CodegenLLVM, ErrorInParallelBodyPropagates) {
  ThreadCountGuard guard;
  Buffer a = ir::make_buffer("A", ir::kInt32, {100});
  Var i("i");
  Stmt body =
      ir::for_loop(i, 0, 100, ForKind::kParallel,
                   ir::assert_stmt(ir::load(ir::kInt32, a.data, i) >= 0, "A must be non-negative",
                                   ir::store(a.data, ir::load(ir::kInt32, a.data, i) + 1, i)));
  runtime::Function f = jit(func("check_par", {tensor(a)}, body));
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    std::vector<int32_t> v(100, 1);
    NDArray A = NDArray::from_vector(v, {100});
    f(A);
    EXPECT_EQ(A.to_vector<int32_t>(), std::vector<int32_t>(100, 2));
    v[77] = -1;
    NDArray B = NDArray::from_vector(v, {100});
    EXPECT_ERROR_CONTAINS(f(B), "check_par: A must be non-negative");
  }
}

// ---- allocation ----

/// C[M, N] = A[M, K] * B[K, N] with a 4 x 32 register tile `acc` (scope "local"), fully unrolled
/// in the IR as a tuned schedule would lower it: yo parallel, xo, k serial.
PrimFunc tiled_matmul(int64_t m, int64_t n, int64_t k_extent, const std::string& name) {
  Buffer a = ir::make_buffer("A", ir::kFloat32, {static_cast<int>(m), static_cast<int>(k_extent)});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {static_cast<int>(k_extent), static_cast<int>(n)});
  Buffer c = ir::make_buffer("C", ir::kFloat32, {static_cast<int>(m), static_cast<int>(n)});
  constexpr int kRows = 4, kVec = 16, kCols = 2;
  const int K = static_cast<int>(k_extent), N = static_cast<int>(n);
  const DataType v16 = ir::kFloat32.with_lanes(kVec);
  Var yo("yo"), xo("xo"), k("k");
  Var acc("acc", DataType::Handle());
  std::vector<Stmt> init, update, write;
  for (int yi = 0; yi < kRows; ++yi) {
    for (int xv = 0; xv < kCols; ++xv) {
      Expr acc_idx = ir::ramp(Expr(yi * kCols * kVec + xv * kVec), 1, kVec);
      init.push_back(ir::store(acc, ir::broadcast(Expr(0.0f), kVec), acc_idx));
    }
    Var av("a" + std::to_string(yi), ir::kFloat32);
    std::vector<Stmt> row;
    for (int xv = 0; xv < kCols; ++xv) {
      Expr acc_idx = ir::ramp(Expr(yi * kCols * kVec + xv * kVec), 1, kVec);
      Expr b_idx = ir::ramp(k * N + xo * (kCols * kVec) + xv * kVec, 1, kVec);
      row.push_back(ir::store(
          acc, ir::load(v16, acc, acc_idx) + ir::broadcast(av, kVec) * ir::load(v16, b.data, b_idx),
          acc_idx));
    }
    update.push_back(
        ir::let_stmt(av, ir::load(ir::kFloat32, a.data, (yo * kRows + yi) * K + k), ir::seq(row)));
    for (int xv = 0; xv < kCols; ++xv) {
      Expr acc_idx = ir::ramp(Expr(yi * kCols * kVec + xv * kVec), 1, kVec);
      Expr c_idx = ir::ramp((yo * kRows + yi) * N + xo * (kCols * kVec) + xv * kVec, 1, kVec);
      write.push_back(ir::store(c.data, ir::load(v16, acc, acc_idx), c_idx));
    }
  }
  Stmt tile =
      ir::allocate(acc, ir::kFloat32, {kRows * kCols * kVec}, "local",
                   ir::seq({ir::seq(init), ir::for_loop(k, 0, K, ForKind::kSerial, ir::seq(update)),
                            ir::seq(write)}));
  Stmt body = ir::for_loop(
      yo, 0, static_cast<int>(m / kRows), ForKind::kParallel,
      ir::for_loop(xo, 0, static_cast<int>(n / (kCols * kVec)), ForKind::kSerial, tile));
  return func(name, {tensor(a), tensor(b), tensor(c)}, body);
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

TEST(CodegenLLVM, LocalTileMatmulIsCorrectAndLivesInRegisters) {
  const int64_t M = 64, N = 96, K = 48;
  PrimFunc f = tiled_matmul(M, N, K, "mm_small");
  std::vector<float> a = random_floats(M * K, 1), b = random_floats(K * N, 2);
  NDArray A = NDArray::from_vector(a, {M, K});
  NDArray B = NDArray::from_vector(b, {K, N});
  NDArray C = NDArray::empty({M, N}, runtime::kFloat32);
  jit(f)(A, B, C);
  std::vector<float> out = C.to_vector<float>();
  for (int64_t y = 0; y < M; ++y) {
    for (int64_t x = 0; x < N; ++x) {
      float ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += a[y * K + k] * b[k * N + x];
      ASSERT_NEAR(out[y * N + x], ref, 1e-4f) << y << ", " << x;
    }
  }
  // After optimization the accumulator tile is in registers: no alloca survives.
  const std::string ir_text = emit_llvm_ir({f}, host());
  EXPECT_EQ(ir_text.find("alloca [128 x float]"), std::string::npos) << ir_text;
}

TEST(CodegenLLVM, HeapAllocationOfSymbolicSize) {
  Var n("n");
  Buffer a = ir::make_buffer("A", ir::kFloat32, {n});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {n});
  Var tmp("tmp", DataType::Handle());
  Var i("i"), j("j");
  Stmt body = ir::allocate(
      tmp, ir::kFloat32, {n}, "global",
      ir::seq({ir::for_loop(i, 0, n, ForKind::kSerial,
                            ir::store(tmp, ir::load(ir::kFloat32, a.data, i) + 1.0f, i)),
               ir::for_loop(j, 0, n, ForKind::kSerial,
                            ir::store(b.data, ir::load(ir::kFloat32, tmp, n - 1 - j) * 2.0f, j))}));
  PrimFunc pf = func("heap", {tensor(a), tensor(b)}, body);
  EXPECT_NE(emit_llvm_ir({pf}, host(), false).find("aligned_alloc"), std::string::npos);
  runtime::Function f = jit(pf);
  for (int64_t len : {0, 3, 100000}) {
    NDArray A = NDArray::from_vector(iota_floats(static_cast<size_t>(len)), {len});
    NDArray B = NDArray::empty({len}, runtime::kFloat32);
    f(A, B);
    std::vector<float> out = B.to_vector<float>();
    for (int64_t k = 0; k < len; ++k) ASSERT_FLOAT_EQ(out[k], 2.0f * (len - 1 - k + 1)) << k;
  }
}

TEST(CodegenLLVM, LargeConstantAllocationGoesToTheHeap) {
  Buffer b = ir::make_buffer("B", ir::kInt32, {1});
  Var big("big", DataType::Handle());
  Var i("i");
  const int n = 1 << 20;  // 4 MiB: too big for the stack
  Stmt body = ir::allocate(big, ir::kInt32, {n}, "global",
                           ir::seq({ir::for_loop(i, 0, n, ForKind::kSerial, ir::store(big, i, i)),
                                    ir::store(b.data, ir::load(ir::kInt32, big, n - 1), 0)}));
  PrimFunc pf = func("bigalloc", {tensor(b)}, body);
  const std::string ir_text = emit_llvm_ir({pf}, host(), false);
  EXPECT_NE(ir_text.find("aligned_alloc"), std::string::npos);  // without a runtime
  EXPECT_NE(ir_text.find("@__kiln_workspace_alloc"), std::string::npos);
  // Loaded, the block comes from the runtime's workspace, which keeps it for the next call.
  runtime::Function f = jit(pf);
  const uint64_t kept = runtime::kept_workspace_bytes();
  for (int call = 0; call < 3; ++call) {
    NDArray B = NDArray::empty({1}, runtime::kInt32);
    f(B);
    EXPECT_EQ(B.to_vector<int32_t>()[0], n - 1);
    EXPECT_EQ(runtime::kept_workspace_bytes(), std::max<uint64_t>(kept, uint64_t{4} << 20));
  }
}

// ---- element types ----

uint16_t to_half(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float from_half(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

TEST(CodegenLLVM, Float16ScalarAndVector) {
  Buffer a = ir::make_buffer("A", ir::kFloat16, {64});
  Buffer b = ir::make_buffer("B", ir::kFloat16, {64});
  Buffer c = ir::make_buffer("C", ir::kFloat16, {64});
  Buffer d = ir::make_buffer("D", ir::kFloat32, {64});
  Var i("i"), v("v");
  const DataType h8 = ir::kFloat16.with_lanes(8);
  Expr idx = ir::ramp(v * 8, 1, 8);
  Stmt body = ir::seq(
      {ir::for_loop(v, 0, 8, ForKind::kSerial,
                    ir::store(c.data,
                              ir::load(h8, a.data, idx) * ir::load(h8, b.data, idx) +
                                  ir::make_const(h8, 1.0),
                              idx)),
       ir::for_loop(
           i, 0, 64, ForKind::kSerial,
           ir::store(d.data, ir::cast(ir::kFloat32, ir::load(ir::kFloat16, a.data, i)), i))});
  std::vector<uint16_t> ha(64), hb(64);
  for (int k = 0; k < 64; ++k) {
    ha[k] = to_half(0.25f * k - 3);
    hb[k] = to_half(1.5f - 0.125f * k);
  }
  for (const char* t : {"llvm -mcpu=native", "llvm"}) {
    NDArray A = NDArray::empty({64}, runtime::kFloat16);
    NDArray B = NDArray::empty({64}, runtime::kFloat16);
    NDArray C = NDArray::empty({64}, runtime::kFloat16);
    NDArray D = NDArray::empty({64}, runtime::kFloat32);
    A.copy_from(ha);
    B.copy_from(hb);
    jit(func("half_ops", {tensor(a), tensor(b), tensor(c), tensor(d)}, body),
        target::Target::parse(t))(A, B, C, D);
    std::vector<uint16_t> out = C.to_vector<uint16_t>();
    std::vector<float> outd = D.to_vector<float>();
    for (int k = 0; k < 64; ++k) {
      const float ref = from_half(ha[k]) * from_half(hb[k]) + 1.0f;
      ASSERT_NEAR(from_half(out[k]), ref, std::abs(ref) * 2e-3f + 1e-3f) << t << " " << k;
      ASSERT_EQ(outd[k], from_half(ha[k])) << t << " " << k;
    }
  }
}

TEST(CodegenLLVM, Int8ArithmeticWrapsAndWidens) {
  Buffer a = ir::make_buffer("A", ir::kInt8, {256});
  Buffer b = ir::make_buffer("B", ir::kInt8, {256});
  Buffer c = ir::make_buffer("C", ir::kInt8, {256});
  Buffer d = ir::make_buffer("D", ir::kInt32, {256});
  Var i("i");
  Expr x = ir::load(ir::kInt8, a.data, i), y = ir::load(ir::kInt8, b.data, i);
  Stmt body = ir::for_loop(
      i, 0, 256, ForKind::kSerial,
      ir::seq({ir::store(c.data, x * y + ir::make_const(ir::kInt8, int64_t{3}), i),
               ir::store(d.data, ir::cast(ir::kInt32, x) * ir::cast(ir::kInt32, y), i)}));
  std::vector<int8_t> va(256), vb(256);
  for (int k = 0; k < 256; ++k) {
    va[k] = static_cast<int8_t>(k - 128);
    vb[k] = static_cast<int8_t>(77 - k);
  }
  NDArray A = NDArray::from_vector(va, {256});
  NDArray B = NDArray::from_vector(vb, {256});
  NDArray C = NDArray::empty({256}, runtime::kInt8);
  NDArray D = NDArray::empty({256}, runtime::kInt32);
  jit(func("int8_ops", {tensor(a), tensor(b), tensor(c), tensor(d)}, body))(A, B, C, D);
  std::vector<int8_t> oc = C.to_vector<int8_t>();
  std::vector<int32_t> od = D.to_vector<int32_t>();
  for (int k = 0; k < 256; ++k) {
    ASSERT_EQ(oc[k], static_cast<int8_t>(va[k] * vb[k] + 3)) << k;
    ASSERT_EQ(od[k], int32_t{va[k]} * int32_t{vb[k]}) << k;
  }
}

TEST(CodegenLLVM, BoolOutputsFromComparisonsAndLogic) {
  Buffer a = ir::make_buffer("A", ir::kInt32, {16});
  Buffer o = ir::make_buffer("O", ir::kBool, {16});
  Buffer m = ir::make_buffer("M", ir::kInt32, {16});
  Var i("i");
  Expr x = ir::load(ir::kInt32, a.data, i);
  Stmt body = ir::for_loop(
      i, 0, 16, ForKind::kSerial,
      ir::seq({ir::store(o.data, (x > 3 && x <= 10) || !(x != 0), i),
               ir::store(m.data, ir::select(x < 8, ir::min(x, 5), ir::max(x, 12)), i)}));
  NDArray A = NDArray::from_vector(
      std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {16});
  NDArray O = NDArray::empty({16}, runtime::kBool);
  NDArray M = NDArray::empty({16}, runtime::kInt32);
  jit(func("logic", {tensor(a), tensor(o), tensor(m)}, body))(A, O, M);
  std::vector<uint8_t> ob = O.to_vector<uint8_t>();
  std::vector<int32_t> om = M.to_vector<int32_t>();
  for (int k = 0; k < 16; ++k) {
    EXPECT_EQ(ob[k], ((k > 3 && k <= 10) || k == 0) ? 1 : 0) << k;
    EXPECT_EQ(om[k], k < 8 ? std::min(k, 5) : std::max(k, 12)) << k;
  }
}

TEST(CodegenLLVM, FloorAndTruncatingDivisionOnNegatives) {
  Buffer a = ir::make_buffer("A", ir::kInt32, {32});
  Buffer out = ir::make_buffer("Out", ir::kInt32, {9, 32});
  Var i("i"), d("d");
  Expr x = ir::load(ir::kInt32, a.data, i);
  std::vector<Expr> exprs = {ir::floordiv(x, 3), ir::floormod(x, 3),  ir::floordiv(x, 4),
                             ir::floormod(x, 4), ir::floordiv(x, -3), ir::floormod(x, -3),
                             ir::floordiv(x, d), ir::floormod(x, d),  x / 3 + (x % 3) * 100};
  std::vector<Stmt> stores;
  for (size_t e = 0; e < exprs.size(); ++e) {
    stores.push_back(ir::store(out.data, exprs[e], static_cast<int>(e) * 32 + i));
  }
  // The same through 8-lane vectors.
  Buffer vout = ir::make_buffer("VOut", ir::kInt32, {4, 32});
  Var v("v");
  const DataType i8x = ir::kInt32.with_lanes(8);
  Expr vx = ir::load(i8x, a.data, ir::ramp(v * 8, 1, 8));
  Stmt vec = ir::for_loop(v, 0, 4, ForKind::kSerial,
                          ir::seq({ir::store(vout.data, ir::floordiv(vx, ir::broadcast(Expr(3), 8)),
                                             ir::ramp(v * 8, 1, 8)),
                                   ir::store(vout.data, ir::floormod(vx, ir::broadcast(Expr(3), 8)),
                                             ir::ramp(32 + v * 8, 1, 8)),
                                   ir::store(vout.data, ir::floordiv(vx, ir::broadcast(Expr(8), 8)),
                                             ir::ramp(64 + v * 8, 1, 8)),
                                   ir::store(vout.data, ir::floormod(vx, ir::broadcast(d, 8)),
                                             ir::ramp(96 + v * 8, 1, 8))}));
  Stmt body = ir::seq({ir::for_loop(i, 0, 32, ForKind::kSerial, ir::seq(stores)), vec});
  std::vector<int32_t> va(32);
  for (int k = 0; k < 32; ++k) va[k] = k - 16;
  NDArray A = NDArray::from_vector(va, {32});
  NDArray Out = NDArray::empty({9, 32}, runtime::kInt32);
  NDArray VOut = NDArray::empty({4, 32}, runtime::kInt32);
  jit(func("divs", {tensor(a), scalar(d), tensor(out), tensor(vout)}, body))(A, 5, Out, VOut);
  std::vector<int32_t> o = Out.to_vector<int32_t>();
  std::vector<int32_t> vo = VOut.to_vector<int32_t>();
  for (int k = 0; k < 32; ++k) {
    const int64_t x0 = va[k];
    const int64_t want[9] = {
        floor_div(x0, 3),          x0 - floor_div(x0, 3) * 3, floor_div(x0, 4),
        x0 - floor_div(x0, 4) * 4, floor_div(x0, -3),         x0 - floor_div(x0, -3) * -3,
        floor_div(x0, 5),          x0 - floor_div(x0, 5) * 5, x0 / 3 + (x0 % 3) * 100};
    for (int e = 0; e < 9; ++e) EXPECT_EQ(o[e * 32 + k], want[e]) << "expr " << e << " x " << x0;
    EXPECT_EQ(vo[k], want[0]) << x0;
    EXPECT_EQ(vo[32 + k], want[1]) << x0;
    EXPECT_EQ(vo[64 + k], floor_div(x0, 8)) << x0;
    EXPECT_EQ(vo[96 + k], want[7]) << x0;
  }
}

// shift_right: arithmetic (floor division by 2^b) for signed integers, logical for unsigned, by
// a constant, a scalar and a per-lane amount (int8 requantization's per-channel shift).
TEST(CodegenLLVM, ShiftRightArithmeticAndLogical) {
  Buffer a = ir::make_buffer("A", ir::kInt32, {32});
  Buffer s = ir::make_buffer("S", ir::kInt32, {32});
  Buffer out = ir::make_buffer("Out", ir::kInt32, {4, 32});
  Buffer u = ir::make_buffer("U", ir::DataType::UInt(8), {32});
  Buffer uout = ir::make_buffer("UOut", ir::DataType::UInt(8), {32});
  Var i("i"), d("d"), v("v");
  Expr x = ir::load(ir::kInt32, a.data, i);
  Expr sh = ir::load(ir::kInt32, s.data, i);
  const DataType i32x8 = ir::kInt32.with_lanes(8);
  Expr vx = ir::load(i32x8, a.data, ir::ramp(v * 8, 1, 8));
  Expr vs = ir::load(i32x8, s.data, ir::ramp(v * 8, 1, 8));
  Stmt body = ir::seq({
      ir::for_loop(
          i, 0, 32, ForKind::kSerial,
          ir::seq({ir::store(out.data, ir::shift_right(x, 3), i),
                   ir::store(out.data, ir::shift_right(x, d), 32 + i),
                   ir::store(out.data, ir::shift_right(x, sh), 64 + i),
                   ir::store(uout.data,
                             ir::shift_right(ir::load(ir::DataType::UInt(8), u.data, i),
                                             ir::make_const(ir::DataType::UInt(8), int64_t{2})),
                             i)})),
      ir::for_loop(v, 0, 4, ForKind::kSerial,
                   ir::store(out.data, ir::shift_right(vx, vs), ir::ramp(96 + v * 8, 1, 8))),
  });
  std::vector<int32_t> va(32), vsh(32);
  std::vector<uint8_t> vu(32);
  for (int k = 0; k < 32; ++k) {
    va[k] = (k - 16) * 37 - (k % 3 == 0 ? 1 << 20 : 0);
    vsh[k] = k % 31;
    vu[k] = static_cast<uint8_t>(250 - k * 7);
  }
  NDArray A = NDArray::from_vector(va, {32});
  NDArray S = NDArray::from_vector(vsh, {32});
  NDArray U = NDArray::from_vector(vu, {32});
  NDArray Out = NDArray::empty({4, 32}, runtime::kInt32);
  NDArray UOut = NDArray::empty({32}, runtime::kUInt8);
  jit(func("shr", {tensor(a), tensor(s), scalar(d), tensor(out), tensor(u), tensor(uout)}, body))(
      A, S, 5, Out, U, UOut);
  std::vector<int32_t> o = Out.to_vector<int32_t>();
  std::vector<uint8_t> uo = UOut.to_vector<uint8_t>();
  for (int k = 0; k < 32; ++k) {
    EXPECT_EQ(o[k], floor_div(va[k], 8)) << va[k];
    EXPECT_EQ(o[32 + k], floor_div(va[k], 32)) << va[k];
    EXPECT_EQ(o[64 + k], floor_div(va[k], int64_t{1} << vsh[k])) << va[k] << " >> " << vsh[k];
    EXPECT_EQ(o[96 + k], o[64 + k]) << "vector lane " << k;
    EXPECT_EQ(uo[k], vu[k] >> 2) << int{vu[k]};
  }
  EXPECT_EQ(ir::as_const_int(ir::shift_right(Expr(-9), Expr(1))).value_or(0), -5);
  EXPECT_THROW(ir::shift_right(x, 32), kiln::Error);
  EXPECT_THROW(
      ir::shift_right(ir::make_const(ir::kFloat32, 1.0), ir::make_const(ir::kFloat32, 1.0)),
      kiln::Error);
}

// ---- math ----

TEST(CodegenLLVM, MathIntrinsicsScalarAndVector) {
  struct Case {
    const char* name;
    std::function<Expr(Expr)> make;
    std::function<double(double)> ref;
    float lo, hi;
  };
  std::vector<Case> cases = {
      {"exp", [](Expr x) { return ir::exp(x); }, [](double x) { return std::exp(x); }, -10, 10},
      {"log", [](Expr x) { return ir::log(x); }, [](double x) { return std::log(x); }, 0.01f, 100},
      {"sqrt", [](Expr x) { return ir::sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 100},
      {"tanh", [](Expr x) { return ir::tanh(x); }, [](double x) { return std::tanh(x); }, -5, 5},
      {"erf", [](Expr x) { return ir::call(x.dtype(), "erf", {x}, ir::CallKind::kPureIntrinsic); },
       [](double x) { return std::erf(x); }, -6, 6},
      {"sigmoid", [](Expr x) { return ir::sigmoid(x); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -20, 20},
      {"pow", [](Expr x) { return ir::pow(x, Expr(1.7f)); },
       [](double x) { return std::pow(x, double{1.7f}); }, 0.1f, 10},
      {"fabs", [](Expr x) { return ir::abs(x); }, [](double x) { return std::fabs(x); }, -3, 3},
      {"fma", [](Expr x) { return ir::fma(x, x, Expr(0.5f)); },
       [](double x) { return x * x + 0.5; }, -3, 3},
      {"floor", [](Expr x) { return ir::floor(x); }, [](double x) { return std::floor(x); }, -3, 3},
      {"ceil", [](Expr x) { return ir::ceil(x); }, [](double x) { return std::ceil(x); }, -3, 3},
  };
  const int n = 256;
  for (const Case& c : cases) {
    Buffer a = ir::make_buffer("A", ir::kFloat32, {n});
    Buffer s = ir::make_buffer("S", ir::kFloat32, {n});
    Buffer v = ir::make_buffer("V", ir::kFloat32, {n});
    Var i("i"), j("j");
    const DataType f16 = ir::kFloat32.with_lanes(16);
    Stmt body = ir::seq(
        {ir::for_loop(i, 0, n, ForKind::kSerial,
                      ir::store(s.data, c.make(ir::load(ir::kFloat32, a.data, i)), i)),
         ir::for_loop(j, 0, n / 16, ForKind::kSerial,
                      ir::store(v.data, c.make(ir::load(f16, a.data, ir::ramp(j * 16, 1, 16))),
                                ir::ramp(j * 16, 1, 16)))});
    std::vector<float> in(n);
    for (int k = 0; k < n; ++k) in[k] = c.lo + (c.hi - c.lo) * static_cast<float>(k) / (n - 1);
    NDArray A = NDArray::from_vector(in, {n});
    NDArray S = NDArray::empty({n}, runtime::kFloat32);
    NDArray V = NDArray::empty({n}, runtime::kFloat32);
    jit(func(std::string("math_") + c.name, {tensor(a), tensor(s), tensor(v)}, body))(A, S, V);
    std::vector<float> os = S.to_vector<float>(), ov = V.to_vector<float>();
    for (int k = 0; k < n; ++k) {
      const double ref = c.ref(in[k]);
      const double tol = 1e-5 * std::max(1.0, std::abs(ref));
      ASSERT_NEAR(os[k], ref, tol) << c.name << "(" << in[k] << ") scalar";
      ASSERT_NEAR(ov[k], ref, tol) << c.name << "(" << in[k] << ") vector";
    }
  }
}

// A choice between memory reads on a lane-uniform condition is emitted as branches (a
// concatenation: which input is decided by the outer index); nested, and with the same values
// as a select, for vectors (a broadcast condition) and scalars.
TEST(CodegenLLVM, SelectBetweenLoadsOnAUniformCondition) {
  Buffer a = ir::make_buffer("A", ir::kFloat32, {32});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {16});
  Buffer c = ir::make_buffer("C", ir::kFloat32, {16});
  Buffer v = ir::make_buffer("V", ir::kFloat32, {64});
  Buffer s = ir::make_buffer("S", ir::kFloat32, {64});
  Var i("i"), j("j"), k("k");
  const DataType f16 = ir::kFloat32.with_lanes(16);
  // out[i*16 + l] = A[i*16 + l] for i < 2, B[l] for i == 2, C[l] for i == 3.
  auto concat = [&](Expr row, Expr lane, DataType t) {
    auto at = [&](const Buffer& buf, Expr start) {
      return t.lanes() > 1 ? ir::load(t, buf.data, ir::ramp(start, 1, 16))
                           : ir::load(t, buf.data, start);
    };
    return ir::select(row < 2, at(a, row * 16 + lane),
                      ir::select(row < 3, at(b, lane), at(c, lane)));
  };
  Stmt body = ir::seq(
      {ir::for_loop(i, 0, 4, ForKind::kSerial,
                    ir::store(v.data, concat(i, Expr(0), f16), ir::ramp(i * 16, 1, 16))),
       ir::for_loop(j, 0, 4, ForKind::kSerial,
                    ir::for_loop(k, 0, 16, ForKind::kSerial,
                                 ir::store(s.data, concat(j, k, ir::kFloat32), j * 16 + k)))});
  std::vector<float> va(32), vb(16), vc(16);
  for (int n = 0; n < 32; ++n) va[n] = float(n);
  for (int n = 0; n < 16; ++n) vb[n] = 100.0f + float(n), vc[n] = 200.0f + float(n);
  NDArray A = NDArray::from_vector(va, {32}), B = NDArray::from_vector(vb, {16}),
          C = NDArray::from_vector(vc, {16});
  NDArray V = NDArray::empty({64}, runtime::kFloat32), S = NDArray::empty({64}, runtime::kFloat32);
  jit(func("select_loads", {tensor(a), tensor(b), tensor(c), tensor(v), tensor(s)}, body))(A, B, C,
                                                                                           V, S);
  std::vector<float> ov = V.to_vector<float>(), os = S.to_vector<float>();
  for (int n = 0; n < 64; ++n) {
    const float want = n < 32 ? va[n] : n < 48 ? vb[n - 32] : vc[n - 48];
    EXPECT_EQ(ov[n], want) << "vector, element " << n;
    EXPECT_EQ(os[n], want) << "scalar, element " << n;
  }
}

// ---- vectors: strided, gathered, predicated ----

TEST(CodegenLLVM, StridedGatherScatterAndPredicatedTail) {
  Var n("n");
  Buffer a = ir::make_buffer("A", ir::kFloat32, {64});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {32});
  Buffer c = ir::make_buffer("C", ir::kFloat32, {64});
  Buffer t = ir::make_buffer("T", ir::kFloat32, {n});
  Buffer u = ir::make_buffer("U", ir::kFloat32, {n});
  Var i("i"), j("j");
  const DataType f8 = ir::kFloat32.with_lanes(8);
  // B[i*8 + l] = A[(i*8 + l) * 2]; C[(j*8 + l)*2] = B[j*8 + l] + 1 (odd entries of C untouched);
  // U[k] = T[k] * 3 for k < n, 8 lanes at a time with a predicate on the tail.
  Var w("w");
  Expr lane_idx = ir::ramp(w * 8, 1, 8);
  Stmt body = ir::seq(
      {ir::for_loop(
           i, 0, 4, ForKind::kSerial,
           ir::store(b.data, ir::load(f8, a.data, ir::ramp(i * 16, 2, 8)), ir::ramp(i * 8, 1, 8))),
       ir::for_loop(
           j, 0, 4, ForKind::kSerial,
           ir::store(c.data, ir::load(f8, b.data, ir::ramp(j * 8, 1, 8)) + ir::make_const(f8, 1.0),
                     ir::ramp(j * 16, 2, 8))),
       ir::for_loop(w, 0, ir::floordiv(n + 7, 8), ForKind::kSerial,
                    ir::store(u.data,
                              ir::load(f8, t.data, lane_idx, lane_idx < ir::broadcast(n, 8)) *
                                  ir::make_const(f8, 3.0),
                              lane_idx, lane_idx < ir::broadcast(n, 8)))});
  runtime::Function f =
      jit(func("vec_mem", {tensor(a), tensor(b), tensor(c), tensor(t), tensor(u)}, body));
  NDArray A = NDArray::from_vector(iota_floats(64), {64});
  NDArray B = NDArray::empty({32}, runtime::kFloat32);
  NDArray C = NDArray::from_vector(std::vector<float>(64, -1.0f), {64});
  const int64_t len = 13;
  NDArray T = NDArray::from_vector(iota_floats(len, 1), {len});
  NDArray U = NDArray::empty({len}, runtime::kFloat32);
  f(A, B, C, T, U);
  std::vector<float> ob = B.to_vector<float>(), oc = C.to_vector<float>(),
                     ou = U.to_vector<float>();
  for (int k = 0; k < 32; ++k) EXPECT_EQ(ob[k], 2.0f * k);
  for (int k = 0; k < 64; ++k) EXPECT_EQ(oc[k], k % 2 == 0 ? 2.0f * (k / 2) + 1 : -1.0f) << k;
  for (int k = 0; k < len; ++k) EXPECT_EQ(ou[k], 3.0f * (k + 1));
}

TEST(CodegenLLVM, InterleavedReadOfThreeChannels) {
  // NCHW -> NCHW3c of a 3 x 64 image, 16 pixels of each channel a step: lane l of the 48 reads
  // A[(l % 3) * 64 + p*16 + l / 3], three contiguous reads of 16 interleaved, not a gather.
  Buffer a = ir::make_buffer("A", ir::kFloat32, {192});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {192});
  Var p("p");
  const DataType i48 = DataType::Int(32).with_lanes(48);
  Expr lane = ir::ramp(Expr(0), 1, 48);
  Expr index = ir::floormod(lane, ir::make_const(i48, int64_t{3})) * ir::broadcast(Expr(64), 48) +
               ir::broadcast(p * 16, 48) + ir::floordiv(lane, ir::make_const(i48, int64_t{3}));
  Stmt body = ir::for_loop(p, 0, 4, ForKind::kSerial,
                           ir::store(b.data, ir::load(ir::kFloat32.with_lanes(48), a.data, index),
                                     ir::ramp(p * 48, 1, 48)));
  ir::PrimFunc f = func("interleave3", {tensor(a), tensor(b)}, body);
  NDArray A = NDArray::from_vector(iota_floats(192), {192});
  NDArray B = NDArray::empty({192}, runtime::kFloat32);
  jit(f)(A, B);
  std::vector<float> out = B.to_vector<float>();
  for (int px = 0; px < 64; ++px) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[px * 3 + c], float(c * 64 + px)) << px << ", " << c;
  }
  EXPECT_EQ(emit_llvm_ir({f}, host()).find("gather"), std::string::npos);
}

// ---- statements ----

TEST(CodegenLLVM, IfLetAttrAndAssert) {
  Var n("n");
  Buffer a = ir::make_buffer("A", ir::kInt32, {n});
  Var i("i"), half("half");
  Stmt body = ir::assert_stmt(
      n < 100, "n must be below 100",
      ir::attr_stmt(nullptr, "pragma_unknown_key", Expr(1),
                    ir::let_stmt(half, n / 2,
                                 ir::for_loop(i, 0, n, ForKind::kSerial,
                                              ir::if_then_else(i < half, ir::store(a.data, i, i),
                                                               ir::store(a.data, -i, i))))));
  runtime::Function f = jit(func("stmts", {tensor(a)}, body));
  NDArray A = NDArray::empty({6}, runtime::kInt32);
  f(A);
  EXPECT_EQ(A.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, -3, -4, -5}));
  NDArray Big = NDArray::empty({100}, runtime::kInt32);
  EXPECT_ERROR_CONTAINS(f(Big), "stmts: n must be below 100");
}

// ---- argument checks ----

PrimFunc add_2d() {
  Buffer a = ir::make_buffer("A", ir::kFloat32, {4, 8});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {4, 8});
  Var i("i");
  Stmt body = ir::for_loop(i, 0, 32, ForKind::kSerial,
                           ir::store(b.data, ir::load(ir::kFloat32, a.data, i) + 1.0f, i));
  return func("add2d", {tensor(a), tensor(b)}, body);
}

TEST(CodegenLLVM, ArgumentChecksReportTheProblem) {
  runtime::Function f = jit(add_2d());
  NDArray good = NDArray::empty({4, 8}, runtime::kFloat32);
  NDArray out = NDArray::empty({4, 8}, runtime::kFloat32);
  f(good, out);
  NDArray flat = NDArray::empty({32}, runtime::kFloat32);
  EXPECT_ERROR_CONTAINS(f(flat, out), "add2d: argument 'A' must have 2 dimensions");
  NDArray ints = NDArray::empty({4, 8}, runtime::kInt32);
  EXPECT_ERROR_CONTAINS(f(good, ints), "add2d: argument 'B' must have dtype float32");
  NDArray wrong = NDArray::empty({4, 9}, runtime::kFloat32);
  EXPECT_ERROR_CONTAINS(f(good, wrong), "add2d: argument 'B' dimension 1 must be 8");

  // Strides: compact ones pass, others are refused.
  const int64_t shape[2] = {4, 8};
  const int64_t compact[2] = {8, 1};
  const int64_t transposed[2] = {1, 4};
  KilnTensor view = *good.tensor();
  view.shape = shape;
  view.strides = compact;
  f(&view, out);
  view.strides = transposed;
  EXPECT_ERROR_CONTAINS(f(&view, out), "argument 'A' must be compact row-major");

  // What the runtime would catch first: the raw entry checks them too.
  KilnFunc raw = f.raw();
  KilnArg args[2];
  args[0].tensor = const_cast<KilnTensor*>(good.tensor());
  args[1].tensor = nullptr;
  const char* err = nullptr;
  EXPECT_NE(raw(args, 1, &err), 0);
  EXPECT_STREQ(err, "expects 2 arguments (A, B)");
  EXPECT_NE(raw(args, 2, &err), 0);
  EXPECT_STREQ(err, "argument 'B' is a null tensor");
}

TEST(CodegenLLVM, CompileTimeMistakesRaiseErrors) {
  Buffer a = ir::make_buffer("A", ir::kFloat32, {4});
  Var i("i"), ghost("ghost");
  Stmt uses_ghost =
      ir::for_loop(i, 0, 4, ForKind::kSerial, ir::store(a.data, ir::cast(ir::kFloat32, ghost), i));
  EXPECT_ERROR_CONTAINS(build({func("ghosted", {tensor(a)}, uses_ghost)}, host()),
                        "uses variable 'ghost', which nothing binds");
  Stmt unknown = ir::store(
      a.data, ir::call(ir::kFloat32, "frobnicate", {Expr(1.0f)}, ir::CallKind::kPureIntrinsic), 0);
  EXPECT_ERROR_CONTAINS(build({func("unknown", {tensor(a)}, unknown)}, host()),
                        "unknown pure intrinsic 'frobnicate'");
  Stmt missing = ir::store(
      a.data, ir::call(ir::kFloat32, "kiln_no_such_function", {Expr(1.0f)}, ir::CallKind::kExtern),
      0);
  EXPECT_ERROR_CONTAINS(build({func("missing", {tensor(a)}, missing)}, host()),
                        "kiln_no_such_function");
  Stmt ok = ir::store(a.data, Expr(1.0f), 0);
  EXPECT_ERROR_CONTAINS(build({func("bad name", {tensor(a)}, ok)}, host()), "not a valid symbol");
  EXPECT_ERROR_CONTAINS(
      build({func("twice", {tensor(a)}, ok), func("twice", {tensor(a)}, ok)}, host()),
      "two functions are named 'twice'");
  EXPECT_ERROR_CONTAINS(
      build({func("f", {tensor(a)}, ok)}, target::Target::parse("llvm -mcpu=not-a-cpu")),
      "unknown CPU 'not-a-cpu'");
  EXPECT_ERROR_CONTAINS(
      build({func("f", {tensor(a)}, ok)}, target::Target::parse("llvm -mattr=+notafeature")),
      "unknown CPU feature 'notafeature'");
}

// ---- targets and artifacts ----

TEST(CodegenLLVM, NonHostTargetCannotBeJitted) {
  const auto arm = target::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
#if defined(__x86_64__)
  EXPECT_ERROR_CONTAINS(build({add_2d()}, arm),
                        "target 'llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53' cannot run on "
                        "this machine");
#endif
  EXPECT_ERROR_CONTAINS(build({add_2d()}, target::Target::parse("cuda -arch=sm_80")),
                        "is not an llvm target");
}

TEST(CodegenLLVM, AArch64ObjectAndNeonAssembly) {
  const auto arm = target::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  PrimFunc f = tiled_matmul(16, 32, 16, "mm_arm");
  std::vector<uint8_t> obj = emit_object({f}, arm);
  ASSERT_GT(obj.size(), 64u);
  EXPECT_EQ(obj[0], 0x7f);
  EXPECT_EQ(obj[1], 'E');
  EXPECT_EQ(obj[2], 'L');
  EXPECT_EQ(obj[3], 'F');
  EXPECT_EQ(obj[4], 2);  // ELFCLASS64
  const uint16_t machine = static_cast<uint16_t>(obj[18] | (obj[19] << 8));
  EXPECT_EQ(machine, 183);  // EM_AARCH64
  const std::string as = emit_assembly({f}, arm);
  EXPECT_TRUE(as.find("fmla\tv") != std::string::npos || as.find("fmul\tv") != std::string::npos)
      << as.substr(0, 4000);

  // And a shared object for the board.
  const std::string so = link_shared_object({f}, arm);
  ASSERT_GT(so.size(), 64u);
  EXPECT_EQ(so.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(so[16], 3);  // ET_DYN
  EXPECT_EQ(static_cast<uint8_t>(so[18]), 183);
}

TEST(CodegenLLVM, Avx512RegistersOnThisHost) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 here";
  const std::string as = emit_assembly({tiled_matmul(16, 32, 16, "mm_x86")}, host());
  EXPECT_NE(as.find("zmm"), std::string::npos);
  EXPECT_NE(as.find("vfmadd"), std::string::npos);
#else
  GTEST_SKIP() << "not an x86 host";
#endif
}

TEST(CodegenLLVM, ObjectsCompiledSideBySideShareOneLaunchPointer) {
  // The parallel function in a later part: the first part defines the launch pointer, the
  // runtime sets it once, and the parallel loop of the other object goes through it.
  ThreadCountGuard guard;
  const std::vector<ir::PrimFunc> funcs = {add_2d(), parallel_func()};
  const size_t threads = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(emit_objects(funcs, host()).size(), std::min<size_t>(threads, 2));
  runtime::Module m =
      runtime::Module::load_library_bytes(link_shared_object(funcs, host()), "test 'parts'");
  void* launch = m.symbol("__kiln_parallel_launch");
  ASSERT_NE(launch, nullptr);
  EXPECT_NE(*static_cast<void**>(launch), nullptr);  // set by the runtime when loaded
  runtime::set_num_threads(2);
  NDArray A = NDArray::from_vector(iota_floats(5 * 64), {5, 64});
  NDArray B = NDArray::empty({5, 64}, runtime::kFloat32);
  m.function("par")(A, B);
  std::vector<float> out = B.to_vector<float>();
  for (int k = 0; k < 5 * 64; ++k) ASSERT_FLOAT_EQ(out[k], 3.0f * k + static_cast<float>(k / 64));
}

TEST(CodegenLLVM, LinkedLibraryLoadsAndRuns) {
  ThreadCountGuard guard;
  runtime::Module m = runtime::Module::load_library_bytes(
      link_shared_object({parallel_func(), add_2d()}, host()), "test 'par'");
  EXPECT_EQ(m.kind(), "library");
  EXPECT_EQ(m.name(), "library of test 'par'");
  EXPECT_NE(m.symbol("__kiln_parallel_launch"), nullptr);
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    NDArray A = NDArray::from_vector(iota_floats(5 * 64), {5, 64});
    NDArray B = NDArray::empty({5, 64}, runtime::kFloat32);
    m.function("par")(A, B);
    std::vector<float> out = B.to_vector<float>();
    for (int k = 0; k < 5 * 64; ++k) ASSERT_FLOAT_EQ(out[k], 3.0f * k + static_cast<float>(k / 64));
  }
  NDArray flat = NDArray::empty({32}, runtime::kFloat32);
  NDArray out = NDArray::empty({4, 8}, runtime::kFloat32);
  EXPECT_ERROR_CONTAINS(m.function("add2d")(flat, out), "argument 'A' must have 2 dimensions");
}

TEST(CodegenLLVM, ExportedLibraryIsTheLinkedBytes) {
  const std::string so = ::testing::TempDir() + "kiln_codegen_" + std::to_string(getpid()) + ".so";
  export_library({add_2d()}, host(), so);
  std::ifstream in(so, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(written, link_shared_object({add_2d()}, host()));
  EXPECT_TRUE(runtime::Module::load_library(so).has_function("add2d"));
  std::filesystem::remove(so);

  EXPECT_ERROR_CONTAINS(export_library({add_2d()}, host(), "/nonexistent-dir/x.so"),
                        "export_library: cannot write '/nonexistent-dir/x.so': No such file");
}

/// out[i] = in[i] + k, named "f" whatever k is.
PrimFunc add_constant(float k) {
  Buffer a = ir::make_buffer("A", ir::kFloat32, {4});
  Buffer b = ir::make_buffer("B", ir::kFloat32, {4});
  Var i("i");
  return func("f", {tensor(a), tensor(b)},
              ir::for_loop(i, 0, 4, ForKind::kSerial,
                           ir::store(b.data, ir::load(ir::kFloat32, a.data, i) + k, i)));
}

/// Calls "f" of `m` on {0, 1, 2, 3} and returns out[0].
float first_of(const runtime::Module& m) {
  NDArray A = NDArray::from_vector(iota_floats(4), {4});
  NDArray B = NDArray::empty({4}, runtime::kFloat32);
  m.function("f")(A, B);
  return B.to_vector<float>()[0];
}

TEST(CodegenLLVM, LibrariesFromMemoryNeverAlias) {
  // The loader knows a library by its path, /proc/self/fd/N here: a second library must never be
  // taken for a first one that is still loaded, nor for one that was unloaded.
  auto load = [](float k) {
    return runtime::Module::load_library_bytes(link_shared_object({add_constant(k)}, host()),
                                               "add " + std::to_string(k));
  };
  std::optional<runtime::Module> one = load(1);
  runtime::Module two = load(2);
  EXPECT_FLOAT_EQ(first_of(*one), 1.0f);
  EXPECT_FLOAT_EQ(first_of(two), 2.0f);
  one.reset();
  runtime::Module three = load(3);
  EXPECT_FLOAT_EQ(first_of(three), 3.0f);
  EXPECT_FLOAT_EQ(first_of(two), 2.0f);
  EXPECT_ERROR_CONTAINS(runtime::Module::load_library_bytes("not a library", "bundle 'x.kiln'"),
                        "cannot load the library of bundle 'x.kiln'");
}

TEST(CodegenLLVM, LinksFromSeveralThreads) {
  // lld runs in this process and takes one link at a time; every thread gets its own library.
  std::vector<std::string> libraries(6);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < libraries.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r) {
        libraries[t] = link_shared_object({add_constant(static_cast<float>(t))}, host());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < libraries.size(); ++t) {
    EXPECT_FLOAT_EQ(first_of(runtime::Module::load_library_bytes(libraries[t], "thread")),
                    static_cast<float>(t))
        << t;
  }
}

TEST(CodegenLLVM, JitModulesAreIndependent) {
  // Two builds of functions with the same name do not clash, and a module outlives its builder.
  runtime::Function f1 = jit(add_2d());
  runtime::Function f2 = jit(add_2d());
  NDArray A = NDArray::from_vector(iota_floats(32), {4, 8});
  NDArray B = NDArray::empty({4, 8}, runtime::kFloat32);
  f1(A, B);
  f2(B, A);
  EXPECT_FLOAT_EQ(A.to_vector<float>()[31], 33.0f);
}

TEST(CodegenLLVM, ConcurrentBuildsFromSeveralThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&ok, t] {
      for (int rep = 0; rep < 3; ++rep) {
        PrimFunc f = t % 2 == 0 ? add_2d() : parallel_func();
        runtime::Module m = build({f}, t < 2 ? host() : target::Target::parse("llvm"));
        NDArray A = NDArray::from_vector(iota_floats(32), {4, 8});
        NDArray B = NDArray::empty({4, 8}, runtime::kFloat32);
        if (t % 2 == 0) {
          m.function("add2d")(A, B);
          if (B.to_vector<float>()[31] == 32.0f) ++ok;
        } else {
          NDArray P = NDArray::from_vector(iota_floats(128), {2, 64});
          NDArray Q = NDArray::empty({2, 64}, runtime::kFloat32);
          m.function("par")(P, Q);
          if (Q.to_vector<float>()[127] == 3.0f * 127 + 1) ++ok;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ok.load(), 12);
}

// ---- compile time ----

TEST(CodegenLLVM, TiledMatmul1024CompileTime) {
  const int64_t n = 1024;
  PrimFunc f = tiled_matmul(n, n, n, "mm1024");
  std::vector<double> totals;
  BuildTimings last;
  runtime::Module m;
  for (int rep = 0; rep < 7; ++rep) {
    BuildTimings t;
    const auto t0 = std::chrono::steady_clock::now();
    m = build({f}, host(), &t);
    totals.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    last = t;
  }
  std::sort(totals.begin(), totals.end());
  std::printf(
      "[ timing ] mm1024 build: median %.1f ms (min %.1f, max %.1f); last: codegen %.1f, "
      "optimize %.1f, jit %.1f ms\n",
      totals[totals.size() / 2], totals.front(), totals.back(), last.codegen_ms, last.optimize_ms,
      last.jit_ms);
  EXPECT_LT(totals[totals.size() / 2], 1000.0);  // generous: the goal is well under 100 ms

  // Run it once for a throughput figure and spot-check a few entries.
  std::vector<float> a = random_floats(n * n, 3), b = random_floats(n * n, 4);
  NDArray A = NDArray::from_vector(a, {n, n});
  NDArray B = NDArray::from_vector(b, {n, n});
  NDArray C = NDArray::empty({n, n}, runtime::kFloat32);
  runtime::Function mm = m.function("mm1024");
  mm(A, B, C);
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    mm(A, B, C);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("[ timing ] mm1024 run: %.2f ms, %.1f GFLOP/s on %d threads\n", best * 1e3,
              2.0 * n * n * n / best * 1e-9, runtime::num_threads());
  std::vector<float> out = C.to_vector<float>();
  for (int64_t y : {0, 1, 511, 1023}) {
    for (int64_t x : {0, 17, 600, 1023}) {
      double ref = 0;
      for (int64_t k = 0; k < n; ++k) ref += double{a[y * n + k]} * b[k * n + x];
      ASSERT_NEAR(out[y * n + x], ref, 1e-3) << y << ", " << x;
    }
  }
}

}  // namespace
}  // namespace kiln::codegen
