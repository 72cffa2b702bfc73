// How a whole model's output is compared with ONNX Runtime's, shared by model_test (the paper's
// models) and zoo_test (torchvision's): the relative error max|kiln - ort| / max|ort| (the infinity
// norm of the difference over the infinity norm of the reference), which must be <= 1e-4. A
// normalized norm is used rather than an elementwise ratio because outputs near zero (logits,
// tanh pixels) have no meaningful elementwise relative error when summation orders differ; the
// largest elementwise |kiln - ort| / |ort| (over elements with |ort| >= 1e-3 * max|ort|) is kept
// for information only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "deploy/runtime/ndarray.h"

namespace kiln::graph::model_compare {

constexpr double kTolerance = 1e-4;

struct Errors {
  double relative = 0;     ///< max|a-b| / max|b|
  double elementwise = 0;  ///< max |a-b|/|b| over |b| >= 1e-3 max|b| (information only)
  double max_abs_diff = 0;
};

/// The errors of `got` against `want` (float32, same shape; gtest failures otherwise, and for a
/// NaN or an infinity in `got`).
inline Errors compare(const runtime::NDArray& got, const runtime::NDArray& want) {
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.num_elements(), want.num_elements());
  Errors e;
  if (got.num_elements() != want.num_elements()) return e;
  const float* a = got.data<float>();
  const float* b = want.data<float>();
  double max_ref = 0;
  bool finite = true;
  for (int64_t i = 0; i < want.num_elements(); ++i)
    max_ref = std::max(max_ref, std::fabs(double(b[i])));
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    if (!std::isfinite(a[i])) finite = false;
    double d = std::fabs(double(a[i]) - double(b[i]));
    e.max_abs_diff = std::max(e.max_abs_diff, d);
    if (std::fabs(b[i]) >= 1e-3 * max_ref)
      e.elementwise = std::max(e.elementwise, d / std::fabs(b[i]));
  }
  EXPECT_TRUE(finite) << "the output holds a NaN or an infinity";
  e.relative = max_ref > 0 ? e.max_abs_diff / max_ref : e.max_abs_diff;
  if (!finite) e.relative = INFINITY;
  return e;
}

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kiln::graph::model_compare
