// The shape and layout operators of topi (reshape, transpose, squeeze, unsqueeze, concat, pad,
// slice, take), scheduled with the injective x86 schedule, against index arithmetic written out in
// C++; and their user errors. Results are copies, so they must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/transform.h"
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
using testing::ravel;
using testing::to_exprs;
using testing::unravel;
using testing::zeros;
using Shape = std::vector<int64_t>;

Shape shape_of(const te::Tensor& t) {
  Shape s;
  for (const Expr& d : t->shape()) s.push_back(*ir::as_const_int(d));
  return s;
}

/// Builds `y` (from the single input `x` of shape `in`) with the injective schedule, runs it, and
/// compares with ref(output index) -> value.
void check(const te::Tensor& x, const te::Tensor& y, const Shape& expected_shape,
           const std::function<float(const NDArray&, const Shape&)>& ref) {
  ASSERT_EQ(shape_of(y), expected_shape);
  te::Schedule s = te::create_schedule({y});
  topi::schedule_injective_x86(s, y);
  auto f = build_host(s, {x, y});
  Shape in = shape_of(x);
  NDArray a = random_array(in, 17), out = zeros(expected_shape);
  f(a, out);
  std::vector<float> expected(numel(expected_shape));
  for (int64_t i = 0; i < numel(expected_shape); ++i)
    expected[i] = ref(a, unravel(i, expected_shape));
  EXPECT_TRUE(all_close(out, expected, 0, 0)) << y->name();
}

float at(const NDArray& a, const Shape& idx) { return a.data<float>()[ravel(idx, a.shape())]; }

TEST(TopiTransform, InferReshapeShape) {
  EXPECT_EQ(topi::infer_reshape_shape({2, 3, 4}, {0, -1}), (Shape{2, 12}));
  EXPECT_EQ(topi::infer_reshape_shape({2, 3, 4}, {-1}), (Shape{24}));
  EXPECT_EQ(topi::infer_reshape_shape({2, 3, 4}, {4, 0, 2}), (Shape{4, 3, 2}));
  EXPECT_EQ(topi::infer_reshape_shape({6}, {3, -1, 1}), (Shape{3, 2, 1}));
  EXPECT_ERROR_CONTAINS(topi::infer_reshape_shape({2, 3, 4}, {5, -1}),
                        "reshape: cannot reshape [2, 3, 4] (24 elements) into [5, -1]");
  EXPECT_ERROR_CONTAINS(topi::infer_reshape_shape({2, 3}, {-1, -1}), "more than one -1");
  EXPECT_ERROR_CONTAINS(topi::infer_reshape_shape({2, 3}, {4, 2}), "into [4, 2] (8 elements)");
  EXPECT_ERROR_CONTAINS(topi::infer_reshape_shape({2, 3}, {6, 1, 0}), "0 at position 2");
}

TEST(TopiTransform, Reshape) {
  for (auto [in, target, out] : {std::tuple{Shape{2, 3, 4}, Shape{0, -1}, Shape{2, 12}},
                                 {Shape{5, 7}, Shape{35}, Shape{35}},
                                 {Shape{6, 10}, Shape{4, -1, 3}, Shape{4, 5, 3}},
                                 {Shape{1, 33}, Shape{3, 11, 1}, Shape{3, 11, 1}},
                                 // dims kept, with 1s added or dropped around them
                                 {Shape{3, 19, 37}, Shape{1, 3, 19, 37}, Shape{1, 3, 19, 37}},
                                 {Shape{1, 3, 1, 5}, Shape{3, 5}, Shape{3, 5}},
                                 {Shape{4, 1, 1}, Shape{4}, Shape{4}},
                                 {Shape{1}, Shape{1, 1}, Shape{1, 1}},
                                 {Shape{2, 1, 6}, Shape{2, 2, 3, 1}, Shape{2, 2, 3, 1}},
                                 {Shape{6, 1}, Shape{2, 1, 3}, Shape{2, 1, 3}},
                                 // runs that merge and split apart: (2, 6) as (4, 3), then 5 kept
                                 {Shape{2, 6, 5}, Shape{4, 3, 5}, Shape{4, 3, 5}},
                                 {Shape{2, 3, 4, 5}, Shape{6, 20}, Shape{6, 20}}}) {
    te::Tensor x = te::placeholder(to_exprs(in), ir::kFloat32, "x");
    te::Tensor y = topi::reshape(x, target);
    Shape o = out;
    check(x, y, out,
          [&](const NDArray& a, const Shape& idx) { return a.data<float>()[ravel(idx, o)]; });
  }
}

TEST(TopiTransform, ReshapeKeepsAnUnchangedDimsIndex) {
  // [3, 197, 197] -> [1, 3, 197, 197] reads x[i1, i2, i3]: no division by the flat offset's
  // strides (which a vectorized, guarded last axis would keep).
  te::Tensor x = te::placeholder({3, 197, 197}, ir::kFloat32, "x");
  te::Tensor y = topi::reshape(x, {1, 3, 197, 197});
  te::Schedule s = te::create_schedule({y});
  topi::schedule_injective_x86(s, y);
  std::string text = ir::to_string(compiler::lower(s, {x, y}, "f").body);
  EXPECT_EQ(text.find("// x16("), std::string::npos) << text;
  EXPECT_EQ(text.find("% x16("), std::string::npos) << text;
}

TEST(TopiTransform, Transpose) {
  for (auto [in, perm, out] : {std::tuple{Shape{3, 5}, Shape{}, Shape{5, 3}},
                               {Shape{2, 3, 4}, Shape{1, 2, 0}, Shape{3, 4, 2}},
                               {Shape{2, 3, 4, 5}, Shape{0, 2, 3, 1}, Shape{2, 4, 5, 3}},
                               {Shape{17, 19}, Shape{-1, 0}, Shape{19, 17}},
                               // schedule_injective_x86's other forms: a short last axis 16
                               // does not divide after one 16 divides (vectors of 16 x 3), and
                               // long rows 16 does not divide (a predicated last vector per row)
                               {Shape{3, 4, 32}, Shape{1, 2, 0}, Shape{4, 32, 3}},
                               {Shape{2, 37, 5}, Shape{0, 2, 1}, Shape{2, 5, 37}}}) {
    te::Tensor x = te::placeholder(to_exprs(in), ir::kFloat32, "x");
    te::Tensor y = topi::transpose(x, perm);
    Shape p = perm;
    if (p.empty()) p = {1, 0};
    for (auto& v : p) v = v < 0 ? v + int64_t(in.size()) : v;
    check(x, y, out, [&](const NDArray& a, const Shape& idx) {
      Shape src(idx.size());
      for (size_t k = 0; k < idx.size(); ++k) src[p[k]] = idx[k];
      return at(a, src);
    });
  }
}

TEST(TopiTransform, SqueezeUnsqueeze) {
  te::Tensor x = te::placeholder({1, 3, 1, 5}, ir::kFloat32, "x");
  check(x, topi::squeeze(x), {3, 5}, [](const NDArray& a, const Shape& i) {
    return at(a, {0, i[0], 0, i[1]});
  });
  check(x, topi::squeeze(x, {-2}), {1, 3, 5}, [](const NDArray& a, const Shape& i) {
    return at(a, {0, i[1], 0, i[2]});
  });
  te::Tensor z = te::placeholder({3, 5}, ir::kFloat32, "z");
  check(z, topi::unsqueeze(z, {0, -1}), {1, 3, 5, 1}, [](const NDArray& a, const Shape& i) {
    return at(a, {i[1], i[2]});
  });
  check(z, topi::unsqueeze(z, {1}), {3, 1, 5}, [](const NDArray& a, const Shape& i) {
    return at(a, {i[0], i[2]});
  });
}

TEST(TopiTransform, Concat) {
  for (int axis : {0, 1, -1}) {
    const int ax = axis < 0 ? axis + 2 : axis;
    Shape sa{3, 5}, sb{3, 5}, sc{3, 5};
    sb[ax] = 2;
    sc[ax] = 17;
    te::Tensor a = te::placeholder(to_exprs(sa), ir::kFloat32, "a");
    te::Tensor b = te::placeholder(to_exprs(sb), ir::kFloat32, "b");
    te::Tensor c = te::placeholder(to_exprs(sc), ir::kFloat32, "c");
    te::Tensor y = topi::concat({a, b, c}, axis);
    Shape so = sa;
    so[ax] = sa[ax] + sb[ax] + sc[ax];
    ASSERT_EQ(shape_of(y), so);
    te::Schedule s = te::create_schedule({y});
    topi::schedule_injective_x86(s, y);
    auto f = build_host(s, {a, b, c, y});
    NDArray xa = random_array(sa, 1), xb = random_array(sb, 2), xc = random_array(sc, 3),
            out = zeros(so);
    f(xa, xb, xc, out);
    std::vector<float> expected(numel(so));
    for (int64_t i = 0; i < numel(so); ++i) {
      Shape idx = unravel(i, so);
      int64_t p = idx[ax];
      if (p < sa[ax]) {
        expected[i] = at(xa, idx);
      } else if (p < sa[ax] + sb[ax]) {
        idx[ax] = p - sa[ax];
        expected[i] = at(xb, idx);
      } else {
        idx[ax] = p - sa[ax] - sb[ax];
        expected[i] = at(xc, idx);
      }
    }
    EXPECT_TRUE(all_close(out, expected, 0, 0)) << "axis " << axis;
  }
}

int64_t pad_source(int64_t j, int64_t n, topi::PadMode mode) {
  if (mode == topi::PadMode::kEdge) return std::clamp<int64_t>(j, 0, n - 1);
  if (j < 0) j = -j;
  if (j > n - 1) j = 2 * (n - 1) - j;
  return j;
}

TEST(TopiTransform, Pad) {
  Shape in{3, 7};
  Shape before{1, 2}, after{2, 3};
  te::Tensor x = te::placeholder(to_exprs(in), ir::kFloat32, "x");
  check(x, topi::pad(x, before, after, 1.5), {6, 12}, [&](const NDArray& a, const Shape& i) {
    int64_t r = i[0] - before[0], c = i[1] - before[1];
    return (r < 0 || r >= in[0] || c < 0 || c >= in[1]) ? 1.5f : at(a, {r, c});
  });
  for (auto mode : {topi::PadMode::kReflect, topi::PadMode::kEdge}) {
    check(x, topi::pad(x, before, after, 0, mode), {6, 12}, [&](const NDArray& a, const Shape& i) {
      return at(a, {pad_source(i[0] - before[0], in[0], mode),
                    pad_source(i[1] - before[1], in[1], mode)});
    });
  }
  // A negative pad crops.
  check(x, topi::pad(x, {0, -2}, {1, -1}), {4, 4}, [&](const NDArray& a, const Shape& i) {
    return i[0] >= 3 ? 0.0f : at(a, {i[0], i[1] + 2});
  });
}

TEST(TopiTransform, PaddedRowsStayContiguousVectors) {
  // An attention's key matrix padded from 197 to 224 columns, and its rows from 197 to 200 with
  // the columns unpadded: vectors of 16 along the columns read x with contiguous (the last
  // predicated) loads, not gathers through a clamped index.
  te::Tensor x = te::placeholder({3, 197}, ir::kFloat32, "x");
  for (auto [after, shape] :
       {std::pair{Shape{0, 27}, Shape{3, 224}}, {Shape{3, 0}, Shape{6, 197}}}) {
    te::Tensor y = topi::pad(x, {0, 0}, after, 0.0);
    te::Schedule s = te::create_schedule({y});
    topi::schedule_injective_x86(s, y);
    std::string text = ir::to_string(compiler::lower(s, {x, y}, "f").body);
    EXPECT_EQ(text.find("min(ramp("), std::string::npos) << text;
    EXPECT_NE(text.find("x[ramp("), std::string::npos) << text;
    check(x, y, shape, [](const NDArray& a, const Shape& i) {
      return i[0] < 3 && i[1] < 197 ? at(a, {i[0], i[1]}) : 0.0f;
    });
  }
}

TEST(TopiTransform, Slice) {
  te::Tensor x = te::placeholder({10, 12}, ir::kFloat32, "x");
  check(x, topi::slice(x, {1, 2}, {4, 11}), {3, 9}, [](const NDArray& a, const Shape& i) {
    return at(a, {i[0] + 1, i[1] + 2});
  });
  // Negative positions, huge ends (clamped), a step.
  check(x, topi::slice(x, {-3}, {INT64_MAX}, {-1}, {2}), {10, 2},
        [](const NDArray& a, const Shape& i) {
          return at(a, {i[0], 9 + 2 * i[1]});
        });
  // Negative step: from the end backwards.
  check(x, topi::slice(x, {-1, 100}, {INT64_MIN, 0}, {0, 1}, {-3, -4}), {4, 3},
        [](const NDArray& a, const Shape& i) {
          return at(a, {9 - 3 * i[0], 11 - 4 * i[1]});
        });
}

TEST(TopiTransformErrors, NameShapesAndAxes) {
  te::Tensor x = te::placeholder({2, 3, 4}, ir::kFloat32, "x");
  EXPECT_ERROR_CONTAINS(topi::reshape(x, {7, -1}), "cannot reshape [2, 3, 4]");
  EXPECT_ERROR_CONTAINS(topi::transpose(x, {0, 0, 1}),
                        "transpose: perm [0, 0, 1] is not a permutation");
  EXPECT_ERROR_CONTAINS(topi::transpose(x, {0, 1}), "has 2 entries for 'x' of rank 3");
  EXPECT_ERROR_CONTAINS(topi::squeeze(x, {1}),
                        "squeeze: axis 1 of 'x' (shape [2, 3, 4]) has size 3");
  EXPECT_ERROR_CONTAINS(topi::squeeze(x, {3}),
                        "squeeze: axis 3 is out of range for a tensor of rank 3");
  EXPECT_ERROR_CONTAINS(topi::unsqueeze(x, {1, -4}), "name the same axis twice");
  te::Tensor y = te::placeholder({2, 5, 4}, ir::kFloat32, "y");
  EXPECT_ERROR_CONTAINS(topi::concat({x, y}, 2),
                        "concat: shapes [2, 3, 4] and [2, 5, 4] differ in dimension 1");
  EXPECT_ERROR_CONTAINS(topi::concat({x, y}, -4), "concat: axis -4 is out of range");
  EXPECT_ERROR_CONTAINS(topi::pad(x, {0, 3, 0}, {0, 0, 0}, 0, topi::PadMode::kReflect),
                        "reflect mode needs pads smaller than the dimension; axis 1");
  EXPECT_ERROR_CONTAINS(topi::slice(x, {2}, {1}, {0}),
                        "slice: axis 0 of 'x' (shape [2, 3, 4]) is empty");
  EXPECT_ERROR_CONTAINS(topi::slice(x, {0}, {1}, {0}, {0}), "step for axis 0 is 0");
  Expr n = te::var("n");
  te::Tensor s = te::placeholder({n, 4}, ir::kFloat32, "s");
  EXPECT_ERROR_CONTAINS(topi::reshape(s, {-1}),
                        "reshape: 's' has shape [n, 4]; dimension 0 must be a constant");
}

TEST(TopiTransform, TakeAlongEachAxisWithNegativeAndOutOfRangeIndices) {
  // int64 indices of shape [2, 3]: -1 counts from the end; 7 and -9 lie outside and are clamped.
  const std::vector<int64_t> ind = {0, -1, 2, 7, 1, -9};
  for (int64_t axis : {0, 1, -1}) {
    te::Tensor x = te::placeholder(to_exprs({3, 4}), ir::kFloat32, "x");
    te::Tensor i = te::placeholder(to_exprs({2, 3}), ir::kInt64, "i");
    te::Tensor y = topi::take(x, i, axis);
    const int64_t a = axis < 0 ? axis + 2 : axis, dim = a == 0 ? 3 : 4;
    Shape expected = a == 0 ? Shape{2, 3, 4} : Shape{3, 2, 3};
    ASSERT_EQ(shape_of(y), expected);
    te::Schedule s = te::create_schedule({y});
    topi::schedule_injective_x86(s, y);
    auto f = build_host(s, {x, i, y});
    NDArray xa = random_array({3, 4}, 5), out = zeros(expected);
    NDArray ia = NDArray::from_vector(ind, {2, 3});
    f(xa, ia, out);
    std::vector<float> ref;
    for (int64_t k = 0; k < numel(expected); ++k) {
      Shape o = unravel(k, expected);
      auto norm = [&](int64_t j) { return std::clamp<int64_t>(j < 0 ? j + dim : j, 0, dim - 1); };
      int64_t r = a == 0 ? norm(ind[o[0] * 3 + o[1]]) : o[0];
      int64_t c = a == 0 ? o[2] : norm(ind[o[1] * 3 + o[2]]);
      ref.push_back(xa.data<float>()[r * 4 + c]);
    }
    EXPECT_TRUE(all_close(out, ref, 0, 0)) << "axis " << axis;
  }
}

TEST(TopiTransform, TakeRefusesFloatIndices) {
  te::Tensor x = te::placeholder(to_exprs({3, 4}), ir::kFloat32, "x");
  te::Tensor i = te::placeholder(to_exprs({2}), ir::kFloat32, "idx");
  EXPECT_ERROR_CONTAINS(topi::take(x, i, 0), "idx");
}

}  // namespace
}  // namespace kiln
