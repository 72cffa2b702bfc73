// The ONNX reductions and LayerNormalization along the last axis folded in vector lanes
// (RowFold::kVectorLanes: rows of 197 = 12 whole chunks of 16 and 5 more, 32, 45 and 100;
// 31 folds in one stage), against plain C++ references accumulated in double and against the
// one-stage fold. Tolerance: 1e-5 relative + 1e-6 absolute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "compiler/topi/reduce.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using testing::all_close;
using testing::build_host;
using testing::random_array;
using testing::to_exprs;
using testing::zeros;
using Shape = std::vector<int64_t>;
using topi::ReduceOp;
using topi::RowFold;

/// Whether `t` reads, directly or not, a stage whose name ends with ".lanes".
bool reads_lanes(const te::Tensor& t) {
  std::vector<te::Tensor> todo{t};
  while (!todo.empty()) {
    te::Tensor u = todo.back();
    todo.pop_back();
    if (u->name().ends_with(".lanes")) return true;
    for (const te::Tensor& in : u->inputs()) todo.push_back(in);
  }
  return false;
}

/// op over the last axis of x ([rows, n]), row by row, in double.
std::vector<float> ref_rows(const NDArray& x, int64_t rows, int64_t n, ReduceOp op) {
  std::vector<float> out;
  const float* p = x.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = p + r * n;
    double sum = 0, sq = 0, l1 = 0, prod = 1, mx = -INFINITY, mn = INFINITY;
    for (int64_t k = 0; k < n; ++k) {
      sum += row[k], sq += double(row[k]) * row[k], l1 += std::abs(row[k]), prod *= row[k];
      mx = std::max<double>(mx, row[k]), mn = std::min<double>(mn, row[k]);
    }
    double lse = 0;
    for (int64_t k = 0; k < n; ++k) lse += std::exp(double(row[k]) - mx);
    switch (op) {
      case ReduceOp::kSum:
        out.push_back(float(sum));
        break;
      case ReduceOp::kMean:
        out.push_back(float(sum / double(n)));
        break;
      case ReduceOp::kMax:
        out.push_back(float(mx));
        break;
      case ReduceOp::kMin:
        out.push_back(float(mn));
        break;
      case ReduceOp::kProd:
        out.push_back(float(prod));
        break;
      case ReduceOp::kL1:
        out.push_back(float(l1));
        break;
      case ReduceOp::kL2:
        out.push_back(float(std::sqrt(sq)));
        break;
      case ReduceOp::kLogSum:
        out.push_back(float(std::log(sum)));
        break;
      case ReduceOp::kLogSumExp:
        out.push_back(float(std::log(lse) + mx));
        break;
      case ReduceOp::kSumSquare:
        out.push_back(float(sq));
        break;
    }
  }
  return out;
}

TEST(TopiReduce, LastAxisInVectorLanes) {
  const std::vector<ReduceOp> ops = {ReduceOp::kSum,      ReduceOp::kMean,   ReduceOp::kMax,
                                     ReduceOp::kMin,      ReduceOp::kProd,   ReduceOp::kL1,
                                     ReduceOp::kL2,       ReduceOp::kLogSum, ReduceOp::kLogSumExp,
                                     ReduceOp::kSumSquare};
  for (int64_t n : {197, 32, 45, 100, 31}) {
    for (bool keepdims : {true, false}) {
      for (ReduceOp op : ops) {
        SCOPED_TRACE("n " + std::to_string(n) + " keepdims " + std::to_string(keepdims) + " op " +
                     std::to_string(int(op)));
        const Shape shape{2, 3, n};
        te::Tensor x = te::placeholder(to_exprs(shape), ir::kFloat32, "x");
        te::Tensor y = topi::reduce(x, op, {-1}, keepdims, "r", RowFold::kVectorLanes);
        EXPECT_EQ(reads_lanes(y), n >= 32);
        te::Schedule s = te::create_schedule({y});
        topi::schedule_reduce_x86(s, y);
        // Products of 197 factors stay finite near 1; the logarithms need positive sums.
        const bool near_one = op == ReduceOp::kProd;
        const bool positive = op == ReduceOp::kLogSum;
        NDArray a = random_array(shape, 7,
                                 near_one   ? 0.9f
                                 : positive ? 0.1f
                                            : -3.0f,
                                 near_one ? 1.1f : 3.0f);
        Shape out_shape = keepdims ? Shape{2, 3, 1} : Shape{2, 3};
        NDArray out = zeros(out_shape);
        build_host(s, {x, y})(a, out);
        EXPECT_TRUE(all_close(out, ref_rows(a, 6, n, op), 1e-5, 1e-6));
      }
    }
  }
}

TEST(TopiReduce, LayerNormInVectorLanes) {
  for (int64_t n : {192, 197, 40}) {
    const Shape shape{5, n};
    te::Tensor x = te::placeholder(to_exprs(shape), ir::kFloat32, "x");
    te::Tensor scale = te::placeholder({int(n)}, ir::kFloat32, "scale");
    te::Tensor bias = te::placeholder({int(n)}, ir::kFloat32, "bias");
    NDArray a = random_array(shape, 3, -2, 5), g = random_array({n}, 4), b = random_array({n}, 5);
    NDArray outs[2] = {zeros(shape), zeros(shape)};
    for (RowFold fold : {RowFold::kSerial, RowFold::kVectorLanes}) {
      topi::LayerNormOutputs o = topi::layer_norm(x, scale, bias, -1, 1e-5, "ln", false, fold);
      EXPECT_EQ(reads_lanes(o.y), fold == RowFold::kVectorLanes);
      te::Schedule s = te::create_schedule({o.y});
      topi::schedule_layer_norm_x86(s, o);
      build_host(s, {x, scale, bias, o.y})(a, g, b, outs[int(fold)]);
    }
    // The reference: (x - mean) / sqrt(var + eps) * scale + bias, in double.
    std::vector<float> ref;
    for (int64_t r = 0; r < 5; ++r) {
      const float* row = a.data<float>() + r * n;
      double mean = 0, var = 0;
      for (int64_t k = 0; k < n; ++k) mean += row[k];
      mean /= double(n);
      for (int64_t k = 0; k < n; ++k) var += (row[k] - mean) * (row[k] - mean);
      var /= double(n);
      for (int64_t k = 0; k < n; ++k) {
        ref.push_back(float((row[k] - mean) / std::sqrt(var + 1e-5) * g.data<float>()[k] +
                            b.data<float>()[k]));
      }
    }
    EXPECT_TRUE(all_close(outs[0], ref, 1e-5, 1e-5)) << "serial, n " << n;
    EXPECT_TRUE(all_close(outs[1], ref, 1e-5, 1e-5)) << "lanes, n " << n;
  }
}

}  // namespace
}  // namespace kiln
