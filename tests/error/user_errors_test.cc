// Every user mistake raises kiln::Error whose message names the problem; an internal error
// (kiln::InternalError) or a crash fails the test.
#include <gtest/gtest.h>

#include <functional>

#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/ndarray.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using ir::IterVar;
using ir::Var;

/// Runs f, expecting kiln::Error whose message contains every one of `parts`.
void expect_user_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    for (auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    return;
  } catch (const std::exception& e) {
    FAIL() << "expected kiln::Error, got another exception: " << e.what();
  }
  FAIL() << "expected kiln::Error, nothing was raised";
}

struct Mm {
  te::Tensor A, B, C;
  te::Schedule s;
};

Mm make_mm(int n = 16) {
  Mm m;
  m.A = te::placeholder({n, n}, ir::kFloat32, "A");
  m.B = te::placeholder({n, n}, ir::kFloat32, "B");
  m.C = topi::matmul(m.A, m.B);
  m.s = te::create_schedule({m.C});
  return m;
}

TEST(UserErrors, MismatchedShapesAtConstruction) {
  te::Tensor A = te::placeholder({4, 5}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({6, 7}, ir::kFloat32, "B");
  expect_user_error([&] { topi::matmul(A, B); }, {"matmul", "inner dimensions", "'A'", "'B'"});
  expect_user_error([&] { A(1); }, {"'A'", "2 dimensions", "indexed with 1"});
}

TEST(UserErrors, MismatchedShapesAtCallTime) {
  Mm m = make_mm(16);
  auto f = testing::build_host(m.s, {m.A, m.B, m.C});
  auto a = testing::zeros({16, 16}), b = testing::zeros({16, 8}), c = testing::zeros({16, 16});
  expect_user_error([&] { f(a, b, c); }, {"B"});
  auto a3 = testing::zeros({16, 16, 1});
  expect_user_error([&] { f(a3, b, c); }, {"A"});
  auto ai = testing::zeros({16, 16}, runtime::kInt32), b2 = testing::zeros({16, 16});
  expect_user_error([&] { f(ai, b2, c); }, {"A"});
  expect_user_error([&] { f(a, b2); }, {"expects 3 arguments"});
}

TEST(UserErrors, SplitOfAxisFromAnotherStage) {
  Mm m = make_mm();
  te::Tensor D = te::compute(
      {16, 16}, [&](Var i, Var j) { return m.C(i, j) * 2.0f; }, "D");
  auto s = te::create_schedule({D});
  expect_user_error([&] { s[D].split(s[m.C].axis(0), 4); },
                    {"split", "'i'", "not a loop of stage 'D'"});
}

TEST(UserErrors, SplitOfAlreadySplitAxis) {
  Mm m = make_mm();
  auto st = m.s[m.C];
  IterVar i = st.axis(0);
  st.split(i, 4);
  expect_user_error([&] { st.split(i, 2); }, {"split", "'i'", "already split", "i.outer"});
}

TEST(UserErrors, NonPositiveFactor) {
  Mm m = make_mm();
  expect_user_error([&] { m.s[m.C].split(m.s[m.C].axis(1), 0); },
                    {"split", "factor", "'j'", "positive", "0"});
}

TEST(UserErrors, ComputeAtLoopThatIsNotAnAncestor) {
  const int n = 16;
  te::Tensor A = te::placeholder({n}, ir::kFloat32, "A");
  te::Tensor B = te::compute(
      {n}, [&](Var i) { return A(i) + 1.0f; }, "B");
  te::Tensor C = te::compute(
      {n}, [&](Var i) { return B(i) * 2.0f; }, "C");
  te::Tensor D = te::compute(
      {n}, [&](Var i) { return A(i) * 3.0f; }, "D");
  auto s = te::create_schedule({C, D});
  // D's loop does not enclose C, which reads B.
  expect_user_error([&] { s[B].compute_at(s[C], s[D].axis(0)); },
                    {"compute_at", "not a loop of stage 'C'"});
  // D does not read B.
  expect_user_error([&] { s[B].compute_at(s[D], s[D].axis(0)); },
                    {"compute_at", "'D' does not read 'B'"});
}

TEST(UserErrors, ComputeAtWithAReaderOutsideTheLoop) {
  // A.shared is computed in C.local's loop k, but A.shared.local, which reads it, stays at the
  // root.
  const int n = 16;
  te::Tensor A = te::placeholder({n, n}, ir::kFloat32, "A");
  ir::IterVar k = te::reduce_axis({0, n}, "k");
  te::Tensor C = te::compute(
      {n, n}, [&](Var i, Var j) { return te::sum(A(i, k) * A(k, j), {k}); }, "C");
  auto s = te::create_schedule({C});
  te::Tensor CL = s.cache_write(C, "local");
  te::Tensor AA = s.cache_read(A, "shared", {CL});
  s.cache_read(AA, "local", {CL});
  s[CL].compute_at(s[C], s[C].axis(1));
  s[AA].compute_at(s[CL], s[CL].reduce_axis(0));
  expect_user_error(
      [&] {
        compiler::lower(s, {A, C}, "f");
      },
      {"compute_at", "'A.shared' is computed inside loop 'k' of 'C.local'",
       "its reader 'A.shared.local' is not computed inside that loop"});
}

TEST(UserErrors, UnknownTargetString) {
  expect_user_error([] { target::Target::parse("llvmx -mcpu=native"); }, {"llvmx"});
  expect_user_error([] { target::Target::parse("llvm -frobnicate=3"); }, {"frobnicate"});
  Mm m = make_mm();
  expect_user_error([&] { compiler::build(m.s, {m.A, m.B, m.C}, "gpu9000", "f"); }, {"gpu9000"});
}

TEST(UserErrors, FuseOfLoopsThatAreNotAdjacent) {
  Mm m = make_mm();
  auto st = m.s[m.C];
  expect_user_error([&] { st.fuse(st.axis(0), st.reduce_axis(0)); }, {"fuse"});
  auto [jo, ji] = st.split(st.axis(1), 4);
  expect_user_error([&] { st.fuse(st.axis(0), ji); },
                    {"fuse", "'i'", "directly enclose", "'j.inner'"});
}

TEST(UserErrors, PlaceholderMissingFromArguments) {
  Mm m = make_mm();
  expect_user_error(
      [&] {
        compiler::lower(m.s, {m.A, m.C}, "f");
      },
      {"placeholder 'B'", "not passed"});
}

TEST(UserErrors, BadSchedulePrimitives) {
  Mm m = make_mm();
  auto st = m.s[m.C];
  expect_user_error([&] { st.parallel(st.reduce_axis(0)); }, {"parallel", "reduction"});
  expect_user_error([&] { st.compute_inline(); }, {"compute_inline", "'C'", "output"});
  expect_user_error([&] { st.reorder({st.axis(0), st.axis(0)}); }, {"reorder", "twice"});
  expect_user_error([&] { m.s[m.A].split(m.s[m.C].axis(0), 2); }, {"'A'", "placeholder"});
  expect_user_error([&] { st.set_scope("texture"); }, {"unknown memory scope", "texture"});
  expect_user_error(
      [&] {
        te::placeholder({4, 0}, ir::kFloat32, "Z");
      },
      {"'Z'", "dimension 1", "positive"});
  expect_user_error([&] { ir::DataType::parse("float12"); }, {"float12"});
}

TEST(UserErrors, ReductionInsideAnExpression) {
  te::Tensor A = te::placeholder({8, 8}, ir::kFloat32, "A");
  IterVar r = te::reduce_axis({0, 8}, "r");
  expect_user_error(
      [&] {
        te::compute(
            {8}, [&](Var i) { return te::sum(A(i, r), {r}) * 2.0f; }, "S");
      },
      {"compute 'S'", "reduction"});
}

// Inlining a chain of stages that each read the previous one at two places doubles the inlined
// expression per stage (2^24 copies of the first here): refused with a reason, not built until
// the memory runs out. Reads at the same place are shared (a let) and cost nothing.
TEST(UserErrors, InliningThatGrowsExponentiallyIsRefused) {
  const int n = 16;
  te::Tensor A = te::placeholder({n}, ir::kFloat32, "A");
  std::vector<te::Tensor> stages{A};
  for (int k = 0; k < 24; ++k) {
    const te::Tensor& prev = stages.back();
    stages.push_back(te::compute(
        {n}, [&](Var i) { return prev(i) + prev(ir::min(i + 1, n - 1)); },
        "S" + std::to_string(k)));
  }
  auto s = te::create_schedule({stages.back()});
  for (size_t k = 1; k + 1 < stages.size(); ++k) s[stages[k]].compute_inline();
  expect_user_error(
      [&] {
        compiler::lower(s, {A, stages.back()}, "f");
      },
      {"stage 'S", "inlining the stages it reads would add",
       "operations to its expression, more than 65536"});

  // The same chain reading its predecessor twice at one place lowers.
  std::vector<te::Tensor> same{A};
  for (int k = 0; k < 24; ++k) {
    const te::Tensor& prev = same.back();
    same.push_back(te::compute(
        {n}, [&](Var i) { return prev(i) * prev(i); }, "T" + std::to_string(k)));
  }
  auto t = te::create_schedule({same.back()});
  for (size_t k = 1; k + 1 < same.size(); ++k) t[same[k]].compute_inline();
  EXPECT_NO_THROW(compiler::lower(t, {A, same.back()}, "g"));
}

}  // namespace
}  // namespace kiln
