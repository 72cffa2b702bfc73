// Helpers shared by the tests: random arrays, comparing against a reference with a stated
// tolerance, and building a schedule for the host.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/lower.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::testing {

/// An array of `shape` with uniform values in [lo, hi), reproducible from `seed`.
inline runtime::NDArray random_array(const std::vector<int64_t>& shape, uint32_t seed,
                                     float lo = -1.0f, float hi = 1.0f) {
  runtime::NDArray a = runtime::NDArray::empty(shape, runtime::kFloat32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.num_elements(); ++i) p[i] = dist(rng);
  return a;
}

inline runtime::NDArray zeros(const std::vector<int64_t>& shape,
                              KilnDType dtype = runtime::kFloat32) {
  return runtime::NDArray::empty(shape, dtype);
}

/// Checks |actual - expected| <= atol + rtol * |expected| element by element; reports the first
/// few mismatches with their flat index.
inline ::testing::AssertionResult all_close(const float* actual, const float* expected, int64_t n,
                                            double rtol = 1e-5, double atol = 1e-5) {
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    double d = std::fabs(double(actual[i]) - double(expected[i]));
    if (!(d <= atol + rtol * std::fabs(double(expected[i])))) {
      if (bad < 5) {
        first += " [" + std::to_string(i) + "] got " + std::to_string(actual[i]) + " expected " +
                 std::to_string(expected[i]) + ";";
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements differ:" << first;
}

inline ::testing::AssertionResult all_close(const runtime::NDArray& actual,
                                            const std::vector<float>& expected, double rtol = 1e-5,
                                            double atol = 1e-5) {
  if (actual.num_elements() != static_cast<int64_t>(expected.size())) {
    return ::testing::AssertionFailure()
           << "size " << actual.num_elements() << " vs " << expected.size();
  }
  runtime::NDArray& a = const_cast<runtime::NDArray&>(actual);
  return all_close(a.data<float>(), expected.data(), actual.num_elements(), rtol, atol);
}

/// A constant shape as IR expressions, and its number of elements.
inline std::vector<ir::Expr> to_exprs(const std::vector<int64_t>& shape) {
  std::vector<ir::Expr> e;
  for (int64_t d : shape) e.push_back(ir::Expr(static_cast<int>(d)));
  return e;
}
inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
/// The row-major coordinates of element `flat` of an array of shape `shape`, and back.
inline std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
inline int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

/// Builds `sch` for the host as function "f" taking `args`.
inline runtime::Function build_host(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                                    const std::string& name = "f") {
  return compiler::build(sch, args, "llvm", name).function(name);
}

}  // namespace kiln::testing
