// The LLVM back-end's outlining of very large sequences (a recurrent network's unrolled time
// steps): a sequence of more than 4096 stores emits each statement of 32-4096 stores as a
// noinline function of the values it uses, called once. Checked: the parts exist (and do not for
// an ordinary kernel), the results equal a plain C++ recurrence, the values a part captures (a
// scalar argument, a let-bound value, a loop variable) reach it, an assertion failing inside a part
// reaches the caller with its message, and parts inside a parallel loop run on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/build.h"
#include "compiler/ir/function.h"
#include "compiler/ir/op.h"
#include "compiler/target/target.h"
#include "deploy/runtime/module.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/expect_error.h"
#include "tests/common/host_target.h"

namespace kiln::codegen {
namespace {

using ir::Buffer;
using ir::Expr;
using ir::ForKind;
using ir::Param;
using ir::PrimFunc;
using ir::Stmt;
using ir::Var;
using runtime::NDArray;

using testing::host;

constexpr int kWidth = 40;  // stores per time step: above the 32 a part needs

/// H[b, t + 1, j] = H[b, t, j] * 0.5 + X[t, j] * scale + bias (j < kWidth) for `steps` steps,
/// every step a sequence of kWidth stores written out, as unrolled recurrent layers lower; each
/// step asserts that `scale` is positive. With `batch_parallel`, the steps run inside a
/// parallel loop over the batch b (else b = 0 only). `bias` is let-bound around the steps.
PrimFunc recurrence(int steps, int batch, bool batch_parallel) {
  Buffer x = ir::make_buffer("X", ir::kFloat32, {steps, kWidth});
  Buffer h = ir::make_buffer("H", ir::kFloat32, {batch, steps + 1, kWidth});
  Var scale("scale", ir::kFloat32), bias("bias", ir::kFloat32), b("b");
  std::vector<Stmt> step_stmts;
  for (int t = 0; t < steps; ++t) {
    std::vector<Stmt> stores;
    for (int j = 0; j < kWidth; ++j) {
      Expr prev = ir::load(ir::kFloat32, h.data, (b * (steps + 1) + t) * kWidth + j);
      Expr in = ir::load(ir::kFloat32, x.data, Expr(t * kWidth + j));
      stores.push_back(ir::store(h.data, prev * 0.5f + in * scale + bias,
                                 (b * (steps + 1) + t + 1) * kWidth + j));
    }
    step_stmts.push_back(
        ir::assert_stmt(scale > 0.0f, "scale must be positive", ir::seq(std::move(stores))));
  }
  Stmt steps_body = ir::let_stmt(bias, scale * 0.25f, ir::seq(std::move(step_stmts)));
  Stmt body = ir::for_loop(b, 0, batch_parallel ? batch : 1,
                           batch_parallel ? ForKind::kParallel : ForKind::kSerial, steps_body);
  return PrimFunc{"recur", {Param{x.data, x}, Param{h.data, h}, Param{scale, std::nullopt}}, body};
}

/// The same recurrence in C++, on the same float operations in the same order.
std::vector<float> reference(const std::vector<float>& x, const std::vector<float>& h0, int steps,
                             int batch, float scale) {
  std::vector<float> h = h0;
  const float bias = scale * 0.25f;
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < steps; ++t) {
      for (int j = 0; j < kWidth; ++j) {
        const float prev = h[(b * (steps + 1) + t) * kWidth + j];
        h[(b * (steps + 1) + t + 1) * kWidth + j] = prev * 0.5f + x[t * kWidth + j] * scale + bias;
      }
    }
  }
  return h;
}

std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i % 97);
  return v;
}

/// `got` equals `want` to float rounding (the compiler may contract a multiply and an add).
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << what << ", element " << i;
  }
}

/// How many outlined parts the unoptimized LLVM IR of `f` defines.
int parts_in(const PrimFunc& f) {
  const std::string ir = emit_llvm_ir({f}, host(), /*optimize=*/false);
  int n = 0;
  for (size_t at = ir.find("define "); at != std::string::npos; at = ir.find("define ", at + 1)) {
    const size_t eol = ir.find('\n', at);
    if (ir.substr(at, eol - at).find("recur_part_") != std::string::npos) ++n;
  }
  return n;
}

TEST(CodegenOutline, LargeSequenceBecomesPartsAndComputesTheSame) {
  const int steps = 120;  // 4800 stores: above the 4096 that turns outlining on
  const PrimFunc f = recurrence(steps, 1, false);
  EXPECT_EQ(parts_in(f), steps);
  runtime::Function fn = build({f}, host()).function("recur");
  const std::vector<float> x = ramp(steps * kWidth, -1.0f, 0.03f);
  const std::vector<float> h0 = ramp((steps + 1) * kWidth, 0.5f, 0.01f);
  NDArray X = NDArray::from_vector(x, {steps, kWidth});
  NDArray H = NDArray::from_vector(h0, {1, steps + 1, kWidth});
  fn(X, H, 0.75f);
  expect_close(H.to_vector<float>(), reference(x, h0, steps, 1, 0.75f), "serial");
  // The assertion fails inside the first part: its message reaches the caller.
  EXPECT_ERROR_CONTAINS(fn(X, H, -1.0f), "recur: scale must be positive");
}

TEST(CodegenOutline, OrdinarySequenceStaysWhole) {
  EXPECT_EQ(parts_in(recurrence(100, 1, false)), 0);  // 4000 stores
}

TEST(CodegenOutline, PartsInsideAParallelLoop) {
  const int steps = 110, batch = 5;
  const PrimFunc f = recurrence(steps, batch, true);
  EXPECT_EQ(parts_in(f), steps);
  runtime::Function fn = build({f}, host()).function("recur");
  const std::vector<float> x = ramp(steps * kWidth, 0.2f, -0.02f);
  const std::vector<float> h0 = ramp(batch * (steps + 1) * kWidth, -0.3f, 0.02f);
  const std::vector<float> want = reference(x, h0, steps, batch, 1.5f);
  const int saved = runtime::num_threads();
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    NDArray X = NDArray::from_vector(x, {steps, kWidth});
    NDArray H = NDArray::from_vector(h0, {batch, steps + 1, kWidth});
    fn(X, H, 1.5f);
    expect_close(H.to_vector<float>(), want, std::to_string(threads) + " threads");
    EXPECT_ERROR_CONTAINS(fn(X, H, 0.0f), "recur: scale must be positive");
  }
  runtime::set_num_threads(saved);
}

}  // namespace
}  // namespace kiln::codegen
