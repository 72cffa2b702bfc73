// batch_norm_inference, softmax, log_softmax (over the last, a middle and the first axis, with
// negative axes) and flatten, against plain C++ references. Tolerance: 1e-5 relative + 1e-6
// absolute; the references accumulate in double.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/nn.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using ir::Expr;
using runtime::NDArray;
using testing::all_close;
using testing::build_host;
using testing::numel;
using testing::random_array;
using testing::to_exprs;
using testing::zeros;
using Shape = std::vector<int64_t>;

TEST(TopiNN, BatchNormInference) {
  for (Shape shape : {Shape{2, 3, 5, 7}, Shape{1, 16, 9, 9}, Shape{4, 5}}) {
    const int64_t n = shape[0], c = shape[1], inner = numel(shape) / (n * c);
    te::Tensor x = te::placeholder(to_exprs(shape), ir::kFloat32, "x");
    std::vector<te::Tensor> p;
    for (const char* name : {"gamma", "beta", "mean", "var"})
      p.push_back(te::placeholder({int(c)}, ir::kFloat32, name));
    te::Tensor y = topi::batch_norm_inference(x, p[0], p[1], p[2], p[3], 1e-3);
    te::Schedule s = te::create_schedule({y});
    topi::schedule_injective_x86(s, y);
    auto f = build_host(s, {x, p[0], p[1], p[2], p[3], y});
    NDArray a = random_array(shape, 1, -3, 3), g = random_array({c}, 2), b = random_array({c}, 3),
            m = random_array({c}, 4), v = random_array({c}, 5, 0.1f, 2.0f), out = zeros(shape);
    f(a, g, b, m, v, out);
    std::vector<float> expected(numel(shape));
    for (int64_t i = 0; i < numel(shape); ++i) {
      int64_t ch = (i / inner) % c;
      double xv = a.data<float>()[i];
      expected[i] = float((xv - m.data<float>()[ch]) /
                              std::sqrt(double(v.data<float>()[ch]) + 1e-3) * g.data<float>()[ch] +
                          b.data<float>()[ch]);
    }
    EXPECT_TRUE(all_close(out, expected, 1e-5, 1e-6));
  }
}

/// Softmax (or log-softmax) along `axis` in double.
std::vector<float> ref_softmax(const NDArray& x, int axis, bool log) {
  const Shape& s = x.shape();
  int64_t outer = 1, len = s[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  const float* p = x.data<float>();
  std::vector<float> out(x.num_elements());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return (o * len + k) * inner + in; };
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; ++k) mx = std::max(mx, double(p[at(k)]));
      for (int64_t k = 0; k < len; ++k) sum += std::exp(double(p[at(k)]) - mx);
      for (int64_t k = 0; k < len; ++k) {
        double v = double(p[at(k)]) - mx;
        out[at(k)] = float(log ? v - std::log(sum) : std::exp(v) / sum);
      }
    }
  return out;
}

void check_softmax(const Shape& shape, int64_t axis, bool log,
                   topi::RowFold fold = topi::RowFold::kSerial) {
  te::Tensor x = te::placeholder(to_exprs(shape), ir::kFloat32, "x");
  te::Tensor y = log ? topi::log_softmax(x, axis, "log_softmax", fold)
                     : topi::softmax(x, axis, "softmax", fold);
  te::Schedule s = te::create_schedule({y});
  topi::schedule_softmax_x86(s, y);
  auto f = build_host(s, {x, y});
  // Large values: the max-subtraction must keep exp from overflowing.
  NDArray a = random_array(shape, 9, -40, 90), out = zeros(shape);
  f(a, out);
  int ax = int(axis < 0 ? axis + int64_t(shape.size()) : axis);
  EXPECT_TRUE(all_close(out, ref_softmax(a, ax, log), 1e-5, 1e-6))
      << (log ? "log_softmax" : "softmax") << " axis " << axis;
}

TEST(TopiNN, Softmax) {
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    check_softmax({37}, -1, false);
    check_softmax({5, 67}, -1, false);
    check_softmax({300, 100}, 1, false);
    check_softmax({2, 9, 4, 5}, 1, false);
    check_softmax({2, 9, 4, 5}, -3, false);
    check_softmax({7, 3, 17}, 0, false);
    check_softmax({4, 1, 6}, 1, false);  // a softmax over one element is 1
  }
  runtime::set_num_threads(0);
}

/// Whether y reads a stage named NAME.max.lanes (the rows folded in vector lanes).
bool folds_in_lanes(const te::Tensor& y) {
  std::vector<te::Tensor> todo{y};
  while (!todo.empty()) {
    te::Tensor t = todo.back();
    todo.pop_back();
    if (t->name() == y->name() + ".max.lanes") return true;
    for (const te::Tensor& in : t->inputs()) todo.push_back(in);
  }
  return false;
}

TEST(TopiNN, SoftmaxFoldsRowsInVectorLanes) {
  // Rows of 197 (12 whole chunks of 16 and 5 more), 32 (no rest), 45, 100; 31 is too short to
  // fold in lanes and a softmax over another axis than the last folds serially.
  for (bool log : {false, true}) {
    check_softmax({3, 197}, -1, log, topi::RowFold::kVectorLanes);
    check_softmax({2, 3, 32}, 2, log, topi::RowFold::kVectorLanes);
    check_softmax({5, 45}, 1, log, topi::RowFold::kVectorLanes);
    check_softmax({300, 100}, 1, log, topi::RowFold::kVectorLanes);
    check_softmax({4, 31}, 1, log, topi::RowFold::kVectorLanes);
    check_softmax({2, 40, 5}, 1, log, topi::RowFold::kVectorLanes);
  }
  te::Tensor x = te::placeholder({4, 197}, ir::kFloat32, "x");
  EXPECT_TRUE(folds_in_lanes(topi::softmax(x, 1, "softmax", topi::RowFold::kVectorLanes)));
  EXPECT_FALSE(folds_in_lanes(topi::softmax(x, 1)));
  EXPECT_FALSE(folds_in_lanes(topi::softmax(x, 0, "softmax", topi::RowFold::kVectorLanes)));
  te::Tensor short_rows = te::placeholder({4, 31}, ir::kFloat32, "x");
  EXPECT_FALSE(
      folds_in_lanes(topi::softmax(short_rows, 1, "softmax", topi::RowFold::kVectorLanes)));
  // Along the last axis every stage is computed at the output's row: one parallel loop, with a
  // row's exponentials in a buffer of one row.
  te::Tensor y = topi::softmax(x, 1, "softmax", topi::RowFold::kVectorLanes);
  te::Schedule s = te::create_schedule({y});
  topi::schedule_softmax_x86(s, y);
  const std::string text = ir::to_string(compiler::lower(s, {x, y}, "f").body);
  size_t parallel = 0;
  for (size_t at = text.find("parallel for"); at != std::string::npos;
       at = text.find("parallel for", at + 1)) {
    ++parallel;
  }
  EXPECT_EQ(parallel, 1u) << text;
  EXPECT_NE(text.find("softmax.exp: float32[197"), std::string::npos) << text;
}

TEST(TopiNN, SoftmaxPredicatesOnlyTheLastVectorOfARow) {
  // An attention's rows of 1500 (93 vectors of 16 and 12 more): the loops over a row's vectors
  // run unpredicated, the last vector alone is masked (pass::partition_loops), in the
  // exponentials and in the output, where every vector of the row was masked before.
  for (bool log : {false, true}) check_softmax({3, 1500}, -1, log, topi::RowFold::kVectorLanes);
  te::Tensor x = te::placeholder({4, 1500}, ir::kFloat32, "x");
  te::Tensor y = topi::softmax(x, 1, "softmax", topi::RowFold::kVectorLanes);
  te::Schedule s = te::create_schedule({y});
  topi::schedule_softmax_x86(s, y);
  const std::string text = ir::to_string(compiler::lower(s, {x, y}, "f").body);
  // Each masked access (`[ramp(...) if mask]`) sits in the row's loop, 2 spaces deep, not in
  // a loop over the row's vectors.
  size_t masked = 0;
  for (size_t at = text.find(" if ramp("); at != std::string::npos;
       at = text.find(" if ramp(", at + 1)) {
    const size_t line = text.rfind('\n', at) + 1;
    const size_t indent = text.find_first_not_of(' ', line) - line;
    EXPECT_EQ(indent, 2u) << text.substr(line, text.find('\n', at) - line);
    ++masked;
  }
  EXPECT_GT(masked, 0u) << text;
}

TEST(TopiNN, LogSoftmax) {
  check_softmax({37}, -1, true);
  check_softmax({5, 67}, -1, true);
  check_softmax({2, 9, 4, 5}, 1, true);
  check_softmax({7, 3, 17}, 0, true);
}

TEST(TopiNN, SoftmaxOfAnInlinedProducer) {
  // softmax(2 * x) with the scaling inlined into the softmax stages that read it.
  te::Tensor x = te::placeholder({6, 45}, ir::kFloat32, "x");
  te::Tensor two = te::placeholder({1}, ir::kFloat32, "two");
  te::Tensor scaled = topi::mul(x, two, "scaled");
  for (topi::RowFold fold : {topi::RowFold::kSerial, topi::RowFold::kVectorLanes}) {
    te::Tensor y = topi::softmax(scaled, 1, "softmax", fold);
    te::Schedule s = te::create_schedule({y});
    s[scaled].compute_inline();
    topi::schedule_softmax_x86(s, y);
    NDArray a = random_array({6, 45}, 5, -3, 3), t = NDArray::from_vector<float>({2.0f}, {1});
    NDArray out = zeros({6, 45});
    build_host(s, {x, two, y})(a, t, out);
    NDArray doubled = a.copy();
    for (int64_t i = 0; i < doubled.num_elements(); ++i) doubled.data<float>()[i] *= 2.0f;
    EXPECT_TRUE(all_close(out, ref_softmax(doubled, 1, false), 1e-5, 1e-6));
  }
}

TEST(TopiNN, Flatten) {
  for (auto [axis, rows] :
       {std::pair{1, 2}, {0, 1}, {3, 2 * 3 * 4}, {-1, 2 * 3 * 4}, {4, 120}, {-4, 1}}) {
    Shape shape{2, 3, 4, 5};
    te::Tensor x = te::placeholder(to_exprs(shape), ir::kFloat32, "x");
    te::Tensor y = topi::flatten(x, axis);
    ASSERT_EQ(y.ndim(), 2u);
    EXPECT_EQ(*ir::as_const_int(y->shape()[0]), rows) << axis;
    EXPECT_EQ(*ir::as_const_int(y->shape()[1]), 120 / rows) << axis;
    te::Schedule s = te::create_schedule({y});
    topi::schedule_injective_x86(s, y);
    NDArray a = random_array(shape, 3), out = zeros({rows, 120 / rows});
    build_host(s, {x, y})(a, out);
    EXPECT_TRUE(all_close(out, a.to_vector<float>(), 0, 0));
  }
}

TEST(TopiNNErrors, NameShapesAndAxes) {
  te::Tensor x = te::placeholder({2, 3, 4, 4}, ir::kFloat32, "x");
  te::Tensor c3 = te::placeholder({3}, ir::kFloat32, "c3");
  te::Tensor c4 = te::placeholder({4}, ir::kFloat32, "c4");
  EXPECT_ERROR_CONTAINS(topi::batch_norm_inference(x, c3, c3, c4, c3),
                        "'c4' (float32, shape [4]) must be a 1-D float32 tensor of size C = 3");
  EXPECT_ERROR_CONTAINS(topi::batch_norm_inference(c3, c3, c3, c3, c3),
                        "it needs at least 2 dimensions");
  EXPECT_ERROR_CONTAINS(topi::softmax(x, 4),
                        "softmax: axis 4 is out of range for a tensor of rank 4");
  EXPECT_ERROR_CONTAINS(topi::log_softmax(x, -5), "log_softmax: axis -5 is out of range");
  EXPECT_ERROR_CONTAINS(topi::flatten(x, 5), "flatten: axis 5 is out of range for 'x' of rank 4");
  te::Tensor i = te::placeholder({3}, ir::kInt32, "i");
  EXPECT_ERROR_CONTAINS(topi::softmax(i), "softmax: 'i' must be a floating-point tensor");
}

}  // namespace
}  // namespace kiln
