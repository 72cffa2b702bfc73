// GatherND, ScatterElements and ScatterND (compiler/topi/scatter.h) on random data against naive
// C++ loops written from the ONNX spec: negative indices, duplicate indices with every reduction
// (none: the last update wins), batch_dims, int32 and int64 indices, float and int32 data. The
// scatters run with their x86 schedule (tensorized into one pass over the indices) and with the
// naive schedule (the reduction over the updates as written), which must agree; the x86 schedule's
// work is checked to be linear in the sizes on a transformer's [1, 197, 384]; indices outside their
// axis (scatters skip them, GatherND clamps); one tensor as data and updates; the GPU schedules on
// OpenCL (PoCL: skipped without an OpenCL device); and the user errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <type_traits>

#include "compiler/ir/functor.h"
#include "compiler/ir/stmt.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/gpu/scatter_gpu.h"
#include "compiler/topi/scatter.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using testing::build_host;
using testing::numel;
using testing::ravel;
using testing::to_exprs;
using testing::unravel;
using topi::ScatterReduction;
using Shape = std::vector<int64_t>;

template <typename T>
ir::DataType ir_type() {
  if constexpr (std::is_same_v<T, float>) return ir::kFloat32;
  if constexpr (std::is_same_v<T, int64_t>) return ir::kInt64;
  return ir::kInt32;
}

/// Random data: floats in [-1, 1), integers in [-4, 4] (small enough for products of duplicates).
template <typename T>
std::vector<T> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> v(static_cast<size_t>(n));
  if constexpr (std::is_same_v<T, float>) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (T& x : v) x = dist(rng);
  } else {
    std::uniform_int_distribution<int> dist(-4, 4);
    for (T& x : v) x = static_cast<T>(dist(rng));
  }
  return v;
}

/// Random indices in [-dim, dim): negative ones and, with few dims, many duplicates.
template <typename I>
std::vector<I> random_indices(int64_t n, const std::function<int64_t(int64_t)>& dim_of,
                              uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<I> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t dim = dim_of(i);
    v[static_cast<size_t>(i)] =
        static_cast<I>(std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng));
  }
  return v;
}

template <typename T>
T combine(ScatterReduction r, T a, T b) {
  switch (r) {
    case ScatterReduction::kAdd:
      return a + b;
    case ScatterReduction::kMul:
      return a * b;
    case ScatterReduction::kMax:
      return std::max(a, b);
    case ScatterReduction::kMin:
      return std::min(a, b);
    default:
      return b;
  }
}

template <typename T>
void expect_equal(const std::vector<T>& actual, const std::vector<T>& expected,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const bool ok = std::is_same_v<T, float>
                        ? std::abs(double(actual[i]) - double(expected[i])) <=
                              1e-5 * std::max(1.0, std::abs(double(expected[i])))
                        : actual[i] == expected[i];
    if (!ok && bad++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << actual[i] << ", expected "
                    << expected[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

// ---- references, from the ONNX spec ----

template <typename T, typename I>
std::vector<T> ref_gather_nd(const std::vector<T>& data, const Shape& ds, const std::vector<I>& ind,
                             const Shape& is, int64_t b) {
  const int64_t k = is.back();
  Shape os(is.begin(), is.end() - 1);
  const Shape rest(ds.begin() + b + k, ds.end());
  const int64_t lead = static_cast<int64_t>(os.size());
  os.insert(os.end(), rest.begin(), rest.end());
  std::vector<T> out;
  for (int64_t f = 0; f < numel(os); ++f) {
    const Shape o = unravel(f, os);
    Shape src(o.begin(), o.begin() + b);
    Shape at(o.begin(), o.begin() + lead);
    at.push_back(0);
    for (int64_t c = 0; c < k; ++c) {
      at.back() = c;
      int64_t v = static_cast<int64_t>(ind[static_cast<size_t>(ravel(at, is))]);
      src.push_back(v < 0 ? v + ds[b + c] : v);
    }
    src.insert(src.end(), o.begin() + lead, o.end());
    out.push_back(data[static_cast<size_t>(ravel(src, ds))]);
  }
  return out;
}

template <typename T, typename I>
std::vector<T> ref_scatter_elements(std::vector<T> out, const Shape& ds, const std::vector<I>& ind,
                                    const std::vector<T>& upd, const Shape& is, int64_t axis,
                                    ScatterReduction r) {
  for (int64_t f = 0; f < numel(is); ++f) {
    Shape p = unravel(f, is);
    int64_t v = static_cast<int64_t>(ind[static_cast<size_t>(f)]);
    p[axis] = v < 0 ? v + ds[axis] : v;
    T& o = out[static_cast<size_t>(ravel(p, ds))];
    o = combine(r, o, upd[static_cast<size_t>(f)]);
  }
  return out;
}

template <typename T, typename I>
std::vector<T> ref_scatter_nd(std::vector<T> out, const Shape& ds, const std::vector<I>& ind,
                              const std::vector<T>& upd, const Shape& is, ScatterReduction r) {
  const int64_t k = is.back();
  const int64_t tuples = numel(Shape(is.begin(), is.end() - 1));
  const int64_t slice = numel(Shape(ds.begin() + k, ds.end()));
  for (int64_t u = 0; u < tuples; ++u) {
    Shape slot;
    for (int64_t c = 0; c < k; ++c) {
      int64_t v = static_cast<int64_t>(ind[static_cast<size_t>(u * k + c)]);
      slot.push_back(v < 0 ? v + ds[c] : v);
    }
    for (int64_t c = k; c < static_cast<int64_t>(ds.size()); ++c) slot.push_back(0);
    const int64_t base = ravel(slot, ds);
    for (int64_t e = 0; e < slice; ++e) {
      T& o = out[static_cast<size_t>(base + e)];
      o = combine(r, o, upd[static_cast<size_t>(u * slice + e)]);
    }
  }
  return out;
}

// ---- running ----

template <typename T>
std::vector<T> run(const te::Schedule& s, const std::vector<te::Tensor>& args,
                   const std::vector<NDArray>& inputs, const Shape& out_shape) {
  auto f = build_host(s, args);
  NDArray out = NDArray::empty(out_shape, runtime::dtype_of<T>());
  std::vector<runtime::Arg> call;
  for (const NDArray& a : inputs) call.emplace_back(a.tensor());
  call.emplace_back(out);
  f.call(call);
  return out.to_vector<T>();
}

template <typename... A>
std::vector<NDArray> arrays(A&&... a) {
  std::vector<NDArray> v;
  (v.push_back(std::forward<A>(a)), ...);
  return v;
}

/// The same on OpenCL (PoCL here): the program built by build_gpu, run on the device.
template <typename T>
std::vector<T> run_opencl(const te::Schedule& s, const std::vector<te::Tensor>& args,
                          const std::vector<NDArray>& inputs, const Shape& out_shape) {
  runtime::DeviceAPI& gpu = runtime::DeviceAPI::get(TargetKind::kOpenCL);
  runtime::LoadedDeviceProgram loaded(
      gpu, compiler::build_gpu(s, args, target::Target::parse("opencl"), "f"));
  NDArray out = NDArray::empty(out_shape, runtime::dtype_of<T>());
  std::vector<runtime::DeviceBuffer> buffers;
  for (const NDArray& a : inputs) {
    buffers.push_back(gpu.alloc(a.nbytes()));
    gpu.copy_to_device(buffers.back(), a.data(), a.nbytes());
  }
  buffers.push_back(gpu.alloc(out.nbytes()));
  std::vector<const runtime::DeviceBuffer*> params;
  for (const auto& b : buffers) params.push_back(&b);
  loaded.launch(params);
  gpu.copy_to_host(out.data(), buffers.back(), out.nbytes());
  return out.to_vector<T>();
}

const char* name_of(ScatterReduction r) {
  const char* names[] = {"none", "add", "mul", "max", "min"};
  return names[static_cast<int>(r)];
}

constexpr ScatterReduction kAll[] = {ScatterReduction::kNone, ScatterReduction::kAdd,
                                     ScatterReduction::kMul, ScatterReduction::kMax,
                                     ScatterReduction::kMin};

/// A scatter `out` (its arguments `args`, inputs `in`) equal to `expected`: on OpenCL with its GPU
/// schedule, or on the host with its x86 schedule and with the naive one.
template <typename T>
void expect_scatter(const te::Tensor& out, const std::vector<te::Tensor>& args,
                    const std::vector<NDArray>& in, const Shape& ds, const std::vector<T>& expected,
                    const std::string& what, bool opencl) {
  if (opencl) {
    te::Schedule g = te::create_schedule({out});
    topi::gpu::schedule_scatter_gpu(g, out, 64);
    expect_equal(run_opencl<T>(g, args, in, ds), expected, what + " (opencl)");
    return;
  }
  te::Schedule s = te::create_schedule({out});
  topi::schedule_scatter_x86(s, out);
  expect_equal(run<T>(s, args, in, ds), expected, what + " (x86)");
  te::Schedule naive = te::create_schedule({out});
  expect_equal(run<T>(naive, args, in, ds), expected, what + " (naive)");
}

template <typename T, typename I>
void check_scatter_elements(const Shape& ds, const Shape& is, int64_t axis, ScatterReduction r,
                            uint32_t seed, bool opencl = false) {
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(ds.size()) : axis;
  te::Tensor data = te::placeholder(to_exprs(ds), ir_type<T>(), "data");
  te::Tensor indices = te::placeholder(to_exprs(is), ir_type<I>(), "indices");
  te::Tensor updates = te::placeholder(to_exprs(is), ir_type<T>(), "updates");
  te::Tensor out = topi::scatter_elements(data, indices, updates, axis, r);
  const auto dv = random_values<T>(numel(ds), seed);
  const auto uv = random_values<T>(numel(is), seed + 1);
  const auto iv = random_indices<I>(
      numel(is), [&](int64_t) { return ds[a]; }, seed + 2);
  const auto expected = ref_scatter_elements(dv, ds, iv, uv, is, a, r);
  const std::vector<NDArray> in = arrays(NDArray::from_vector(dv, ds), NDArray::from_vector(iv, is),
                                         NDArray::from_vector(uv, is));
  const std::string what = std::string("scatter_elements ") + name_of(r) + " axis " +
                           std::to_string(axis) + " " + ir_type<T>().str() + " data, " +
                           ir_type<I>().str() + " indices";
  expect_scatter<T>(out, {data, indices, updates, out}, in, ds, expected, what, opencl);
}

template <typename T, typename I>
void check_scatter_nd(const Shape& ds, const Shape& is, ScatterReduction r, uint32_t seed,
                      bool opencl = false) {
  const int64_t k = is.back();
  Shape us(is.begin(), is.end() - 1);
  us.insert(us.end(), ds.begin() + k, ds.end());
  te::Tensor data = te::placeholder(to_exprs(ds), ir_type<T>(), "data");
  te::Tensor indices = te::placeholder(to_exprs(is), ir_type<I>(), "indices");
  te::Tensor updates = te::placeholder(to_exprs(us), ir_type<T>(), "updates");
  te::Tensor out = topi::scatter_nd(data, indices, updates, r);
  const auto dv = random_values<T>(numel(ds), seed);
  const auto uv = random_values<T>(numel(us), seed + 1);
  const auto iv = random_indices<I>(
      numel(is), [&](int64_t i) { return ds[i % k]; }, seed + 2);
  const auto expected = ref_scatter_nd(dv, ds, iv, uv, is, r);
  const std::vector<NDArray> in = arrays(NDArray::from_vector(dv, ds), NDArray::from_vector(iv, is),
                                         NDArray::from_vector(uv, us));
  const std::string what = std::string("scatter_nd ") + name_of(r) + " k " + std::to_string(k) +
                           " " + ir_type<T>().str() + " data, " + ir_type<I>().str() + " indices";
  expect_scatter<T>(out, {data, indices, updates, out}, in, ds, expected, what, opencl);
}

template <typename T, typename I>
void check_gather_nd(const Shape& ds, const Shape& is, int64_t b, uint32_t seed,
                     bool opencl = false) {
  const int64_t k = is.back();
  te::Tensor data = te::placeholder(to_exprs(ds), ir_type<T>(), "data");
  te::Tensor indices = te::placeholder(to_exprs(is), ir_type<I>(), "indices");
  te::Tensor out = topi::gather_nd(data, indices, b);
  Shape os(is.begin(), is.end() - 1);
  os.insert(os.end(), ds.begin() + b + k, ds.end());
  ASSERT_EQ(static_cast<size_t>(out.ndim()), os.size());
  const auto dv = random_values<T>(numel(ds), seed);
  const auto iv = random_indices<I>(
      numel(is), [&](int64_t i) { return ds[b + i % k]; }, seed + 1);
  const std::vector<NDArray> in =
      arrays(NDArray::from_vector(dv, ds), NDArray::from_vector(iv, is));
  const std::string what = "gather_nd batch_dims " + std::to_string(b) + " " + ir_type<T>().str();
  te::Schedule s = te::create_schedule({out});
  if (opencl) {
    topi::gpu::schedule_gather_nd_gpu(s, out, 64);
    expect_equal(run_opencl<T>(s, {data, indices, out}, in, os), ref_gather_nd(dv, ds, iv, is, b),
                 what + " (opencl)");
    return;
  }
  topi::schedule_injective_x86(s, out);
  expect_equal(run<T>(s, {data, indices, out}, in, os), ref_gather_nd(dv, ds, iv, is, b), what);
}

TEST(TopiScatter, GatherND) {
  check_gather_nd<float, int64_t>({2, 3, 4}, {5, 2}, 0, 1);             // slices of 4
  check_gather_nd<float, int32_t>({3, 4}, {2, 3, 2}, 0, 2);             // elements (k = r)
  check_gather_nd<int32_t, int64_t>({2, 3, 4}, {2, 1}, 0, 3);           // whole [3, 4] blocks
  check_gather_nd<float, int64_t>({2, 3, 4}, {2, 5, 1}, 1, 4);          // batch_dims 1
  check_gather_nd<int32_t, int32_t>({2, 3, 4, 5}, {2, 3, 2, 1}, 2, 5);  // batch_dims 2
  check_gather_nd<float, int64_t>({2, 2, 2}, {2, 1}, 1, 6);             // ONNX's example 5's shapes
}

TEST(TopiScatter, GatherNDOnnxExample) {
  // ONNX's GatherND example 4 (batch_dims 0): data [[[0,1],[2,3]],[[4,5],[6,7]]], indices
  // [[[0,1]],[[1,0]]] -> [[[2,3]],[[4,5]]]; and example 5 with batch_dims 1 and indices [[1],[0]]
  // -> [[2,3],[4,5]].
  te::Tensor data = te::placeholder(to_exprs({2, 2, 2}), ir::kInt32, "data");
  te::Tensor i4 = te::placeholder(to_exprs({2, 1, 2}), ir::kInt64, "indices");
  te::Tensor o4 = topi::gather_nd(data, i4, 0);
  te::Schedule s4 = te::create_schedule({o4});
  const std::vector<int32_t> dv = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(run<int32_t>(s4, {data, i4, o4},
                         arrays(NDArray::from_vector(dv, {2, 2, 2}),
                                NDArray::from_vector(std::vector<int64_t>{0, 1, 1, 0}, {2, 1, 2})),
                         {2, 1, 2}),
            (std::vector<int32_t>{2, 3, 4, 5}));
  te::Tensor i5 = te::placeholder(to_exprs({2, 1}), ir::kInt64, "indices");
  te::Tensor o5 = topi::gather_nd(data, i5, 1);
  te::Schedule s5 = te::create_schedule({o5});
  EXPECT_EQ(run<int32_t>(s5, {data, i5, o5},
                         arrays(NDArray::from_vector(dv, {2, 2, 2}),
                                NDArray::from_vector(std::vector<int64_t>{1, 0}, {2, 1})),
                         {2, 2}),
            (std::vector<int32_t>{2, 3, 4, 5}));
}

TEST(TopiScatter, ScatterElementsEveryReduction) {
  uint32_t seed = 10;
  for (ScatterReduction r : kAll) {
    // indices smaller than data along the other axes; 2 to 5 positions per axis: duplicates.
    check_scatter_elements<float, int64_t>({4, 5, 3}, {3, 4, 2}, 1, r, seed++);
    check_scatter_elements<float, int32_t>({4, 5, 3}, {6, 5, 3}, 0, r, seed++);
    check_scatter_elements<int32_t, int64_t>({4, 5, 3}, {4, 2, 7}, -1, r, seed++);
    check_scatter_elements<int32_t, int32_t>({9}, {12}, 0, r, seed++);
  }
}

TEST(TopiScatter, ScatterElementsOnnxExample) {
  // ONNX's example 2: data [[1,2,3,4,5]], indices [[1,3]], updates [[1.1,2.1]], axis 1.
  te::Tensor data = te::placeholder(to_exprs({1, 5}), ir::kFloat32, "data");
  te::Tensor ind = te::placeholder(to_exprs({1, 2}), ir::kInt64, "indices");
  te::Tensor upd = te::placeholder(to_exprs({1, 2}), ir::kFloat32, "updates");
  te::Tensor out = topi::scatter_elements(data, ind, upd, 1);
  te::Schedule s = te::create_schedule({out});
  topi::schedule_scatter_x86(s, out);
  EXPECT_EQ(run<float>(s, {data, ind, upd, out},
                       arrays(NDArray::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {1, 5}),
                              NDArray::from_vector(std::vector<int64_t>{1, -2}, {1, 2}),
                              NDArray::from_vector(std::vector<float>{1.1f, 2.1f}, {1, 2})),
                       {1, 5}),
            (std::vector<float>{1, 1.1f, 3, 2.1f, 5}));
}

TEST(TopiScatter, ScatterNDEveryReduction) {
  uint32_t seed = 100;
  for (ScatterReduction r : kAll) {
    check_scatter_nd<float, int64_t>({4, 5, 6}, {7, 2}, r, seed++);       // rows of 6, duplicates
    check_scatter_nd<float, int32_t>({4, 5, 6}, {3, 1}, r, seed++);       // [5, 6] blocks
    check_scatter_nd<int32_t, int64_t>({4, 5, 6}, {2, 9, 3}, r, seed++);  // elements
    check_scatter_nd<int32_t, int32_t>({3, 4}, {2, 2, 1}, r, seed++);     // indices of rank 3
  }
}

TEST(TopiScatter, ScatterNDOnnxExample) {
  // ONNX's example 1: data [1..8], indices [[4],[3],[1],[7]], updates [9,10,11,12].
  te::Tensor data = te::placeholder(to_exprs({8}), ir::kFloat32, "data");
  te::Tensor ind = te::placeholder(to_exprs({4, 1}), ir::kInt64, "indices");
  te::Tensor upd = te::placeholder(to_exprs({4}), ir::kFloat32, "updates");
  te::Tensor out = topi::scatter_nd(data, ind, upd);
  te::Schedule s = te::create_schedule({out});
  topi::schedule_scatter_x86(s, out);
  EXPECT_EQ(run<float>(s, {data, ind, upd, out},
                       arrays(NDArray::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {8}),
                              NDArray::from_vector(std::vector<int64_t>{4, 3, 1, 7}, {4, 1}),
                              NDArray::from_vector(std::vector<float>{9, 10, 11, 12}, {4})),
                       {8}),
            (std::vector<float>{1, 11, 3, 10, 9, 6, 7, 12}));
}

TEST(TopiScatter, DuplicatesLastUpdateWins) {
  // Every update hits row 2 (as 2 and -2 of 4): the last one's row is the result.
  te::Tensor data = te::placeholder(to_exprs({4, 3}), ir::kFloat32, "data");
  te::Tensor ind = te::placeholder(to_exprs({3, 1}), ir::kInt32, "indices");
  te::Tensor upd = te::placeholder(to_exprs({3, 3}), ir::kFloat32, "updates");
  te::Tensor out = topi::scatter_nd(data, ind, upd);
  te::Schedule s = te::create_schedule({out});
  topi::schedule_scatter_x86(s, out);
  const auto got = run<float>(
      s, {data, ind, upd, out},
      arrays(NDArray::from_vector(std::vector<float>(12, 0.0f), {4, 3}),
             NDArray::from_vector(std::vector<int32_t>{2, -2, 2}, {3, 1}),
             NDArray::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3})),
      {4, 3});
  EXPECT_EQ(got, (std::vector<float>{0, 0, 0, 0, 0, 0, 7, 8, 9, 0, 0, 0}));
}

TEST(TopiScatter, DataAlsoTheUpdates) {
  // ScatterElements(x, i, x, add): one tensor read as data and as updates; out[i[p]] += x[p].
  te::Tensor x = te::placeholder(to_exprs({2, 3}), ir::kInt32, "x");
  te::Tensor ind = te::placeholder(to_exprs({2, 3}), ir::kInt64, "indices");
  te::Tensor out = topi::scatter_elements(x, ind, x, 1, ScatterReduction::kAdd);
  const std::vector<int32_t> xv = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> iv = {0, 0, -1, 2, 1, 1};
  const auto expected = ref_scatter_elements(xv, {2, 3}, iv, xv, {2, 3}, 1, ScatterReduction::kAdd);
  for (bool tensorized : {true, false}) {
    te::Schedule s = te::create_schedule({out});
    if (tensorized) topi::schedule_scatter_x86(s, out);
    EXPECT_EQ(
        run<int32_t>(s, {x, ind, out},
                     arrays(NDArray::from_vector(xv, {2, 3}), NDArray::from_vector(iv, {2, 3})),
                     {2, 3}),
        expected)
        << (tensorized ? "x86" : "naive");
  }
}

TEST(TopiScatter, IndicesOutsideTheAxisAreSkippedOrClamped) {
  // ScatterND: 9 and -5 lie outside a dimension of 4; their updates are dropped, the others land.
  te::Tensor data = te::placeholder(to_exprs({4}), ir::kFloat32, "data");
  te::Tensor ind = te::placeholder(to_exprs({3, 1}), ir::kInt64, "indices");
  te::Tensor upd = te::placeholder(to_exprs({3}), ir::kFloat32, "updates");
  for (ScatterReduction r : {ScatterReduction::kNone, ScatterReduction::kAdd}) {
    te::Tensor out = topi::scatter_nd(data, ind, upd, r);
    for (bool tensorized : {true, false}) {
      te::Schedule s = te::create_schedule({out});
      if (tensorized) topi::schedule_scatter_x86(s, out);
      EXPECT_EQ(run<float>(s, {data, ind, upd, out},
                           arrays(NDArray::from_vector(std::vector<float>{1, 2, 3, 4}, {4}),
                                  NDArray::from_vector(std::vector<int64_t>{9, -1, -5}, {3, 1}),
                                  NDArray::from_vector(std::vector<float>{10, 20, 30}, {3})),
                           {4}),
                (std::vector<float>{1, 2, 3, r == ScatterReduction::kNone ? 20.0f : 24.0f}))
          << name_of(r) << (tensorized ? " x86" : " naive");
    }
  }
  // GatherND clamps: 7 reads the last row, -9 the first.
  te::Tensor x = te::placeholder(to_exprs({3, 2}), ir::kInt32, "x");
  te::Tensor gi = te::placeholder(to_exprs({2, 1}), ir::kInt32, "gi");
  te::Tensor g = topi::gather_nd(x, gi);
  te::Schedule s = te::create_schedule({g});
  EXPECT_EQ(
      run<int32_t>(s, {x, gi, g},
                   arrays(NDArray::from_vector(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {3, 2}),
                          NDArray::from_vector(std::vector<int32_t>{7, -9}, {2, 1})),
                   {2, 2}),
      (std::vector<int32_t>{5, 6, 1, 2}));
}

/// The number of element stores a lowered program makes (each store counted once per iteration
/// of the loops around it).
class StoreCounter : public ir::IRVisitor {
 public:
  int64_t stores = 0;
  void visit_(const ir::ForNode* op) override {
    const auto e = ir::as_const_int(op->extent);
    const int64_t saved = trips_;
    trips_ *= e ? *e : 1;
    ir::IRVisitor::visit_(op);
    trips_ = saved;
  }
  void visit_(const ir::StoreNode* op) override {
    stores += trips_;
    ir::IRVisitor::visit_(op);
  }

 private:
  int64_t trips_ = 1;
};

TEST(TopiScatter, X86WorkIsLinearOnATransformersTensor) {
  // [1, 197, 384] hit elementwise by 3000 index tuples, and 4 rows of it replaced: the naive
  // reduction would be 75648 x 3001 steps; the x86 schedule fills, then makes one pass.
  const Shape ds = {1, 197, 384};
  for (const Shape& is : {Shape{1, 3000, 3}, Shape{1, 4, 2}}) {
    for (ScatterReduction r : {ScatterReduction::kNone, ScatterReduction::kAdd}) {
      const int64_t k = is.back();
      Shape us(is.begin(), is.end() - 1);
      us.insert(us.end(), ds.begin() + k, ds.end());
      te::Tensor data = te::placeholder(to_exprs(ds), ir::kFloat32, "data");
      te::Tensor ind = te::placeholder(to_exprs(is), ir::kInt64, "indices");
      te::Tensor upd = te::placeholder(to_exprs(us), ir::kFloat32, "updates");
      te::Tensor out = topi::scatter_nd(data, ind, upd, r);
      te::Schedule s = te::create_schedule({out});
      topi::schedule_scatter_x86(s, out);
      StoreCounter c;
      c.visit(compiler::lower(s, {data, ind, upd, out}, "f").body);
      const int64_t linear = 2 * numel(ds) + numel(us) + numel(is);
      EXPECT_LE(c.stores, linear) << name_of(r) << " indices " << is[1] << " x " << k;
      // And it runs, against the reference; its time (the best of 5 calls) is printed, with the
      // naive schedule's for the elementwise add.
      const auto dv = random_values<float>(numel(ds), 1);
      const auto uv = random_values<float>(numel(us), 2);
      const auto iv = random_indices<int64_t>(
          numel(is), [&](int64_t i) { return ds[i % k]; }, 3);
      NDArray da = NDArray::from_vector(dv, ds), ia = NDArray::from_vector(iv, is),
              ua = NDArray::from_vector(uv, us), oa = NDArray::empty(ds, runtime::kFloat32);
      auto best_ms = [&](const te::Schedule& sch, int calls) {
        auto f = build_host(sch, {data, ind, upd, out});
        double best = 1e30;
        for (int i = 0; i < calls; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          f(da, ia, ua, oa);
          best = std::min(
              best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count());
        }
        return best;
      };
      const double ms = best_ms(s, 5);
      expect_equal(oa.to_vector<float>(), ref_scatter_nd(dv, ds, iv, uv, is, r),
                   "transformer scatter_nd");
      std::printf("scatter_nd %s [1,197,384] indices %s: %lld stores, %.3f ms", name_of(r),
                  k == 3 ? "1x3000x3" : "1x4x2", static_cast<long long>(c.stores), ms);
      if (k == 3 && r == ScatterReduction::kAdd) {
        const double naive = best_ms(te::create_schedule({out}), 1);
        expect_equal(oa.to_vector<float>(), ref_scatter_nd(dv, ds, iv, uv, is, r),
                     "transformer scatter_nd (naive)");
        std::printf(" (naive schedule %.1f ms)", naive);
      }
      std::printf("\n");
    }
  }
}

TEST(TopiScatter, GpuSchedulesOnOpenCL) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  check_gather_nd<float, int64_t>({2, 3, 4}, {2, 5, 1}, 1, 4, true);
  check_gather_nd<int32_t, int32_t>({3, 4}, {2, 3, 2}, 0, 2, true);
  uint32_t seed = 300;
  for (ScatterReduction r : kAll) {
    check_scatter_elements<float, int64_t>({4, 5, 3}, {3, 4, 2}, 1, r, seed++, true);
    check_scatter_elements<int32_t, int32_t>({9}, {12}, 0, r, seed++, true);
    check_scatter_nd<float, int64_t>({4, 5, 6}, {7, 2}, r, seed++, true);
    check_scatter_nd<int32_t, int32_t>({4, 5, 6}, {2, 9, 3}, r, seed++, true);
  }
}

TEST(TopiScatter, UserErrors) {
  te::Tensor data = te::placeholder(to_exprs({4, 5, 6}), ir::kFloat32, "data");
  te::Tensor ind = te::placeholder(to_exprs({7, 2}), ir::kInt64, "idx");
  te::Tensor bad_upd = te::placeholder(to_exprs({7, 5}), ir::kFloat32, "upd");
  EXPECT_ERROR_CONTAINS(topi::scatter_nd(data, ind, bad_upd),
                        "scatter_nd: updates 'upd' of shape [7, 5] must have the shape "
                        "indices.shape[:-1] + data.shape[2:] = [7, 6]");
  te::Tensor deep = te::placeholder(to_exprs({7, 4}), ir::kInt64, "deep");
  EXPECT_ERROR_CONTAINS(topi::scatter_nd(data, deep, bad_upd),
                        "scatter_nd: the last dimension of indices 'deep' (shape [7, 4]) is 4, "
                        "but must be in [1, 3] for data 'data' of shape [4, 5, 6]");
  te::Tensor fidx = te::placeholder(to_exprs({7, 2}), ir::kFloat32, "fidx");
  EXPECT_ERROR_CONTAINS(topi::scatter_nd(data, fidx, bad_upd),
                        "indices 'fidx' must be integers, not float32");
  te::Tensor iupd = te::placeholder(to_exprs({7, 6}), ir::kInt32, "iupd");
  EXPECT_ERROR_CONTAINS(topi::scatter_nd(data, ind, iupd),
                        "updates 'iupd' hold int32 but data 'data' holds float32");

  te::Tensor eidx = te::placeholder(to_exprs({4, 6, 6}), ir::kInt32, "eidx");
  te::Tensor eupd = te::placeholder(to_exprs({4, 6, 6}), ir::kFloat32, "eupd");
  EXPECT_ERROR_CONTAINS(topi::scatter_elements(data, eidx, eupd, 0),
                        "scatter_elements: dimension 1 of indices 'eidx' (shape [4, 6, 6]) "
                        "exceeds that of data 'data' (shape [4, 5, 6])");
  te::Tensor eupd2 = te::placeholder(to_exprs({4, 5, 5}), ir::kFloat32, "eupd2");
  EXPECT_ERROR_CONTAINS(topi::scatter_elements(data, eidx, eupd2, 1),
                        "updates 'eupd2' of shape [4, 5, 5] must have the shape of indices "
                        "'eidx', [4, 6, 6]");
  EXPECT_ERROR_CONTAINS(topi::scatter_elements(data, eidx, eupd, 3), "scatter_elements");
  te::Tensor r2 = te::placeholder(to_exprs({4, 6}), ir::kInt32, "r2");
  EXPECT_ERROR_CONTAINS(topi::scatter_elements(data, r2, eupd, 0),
                        "indices 'r2' of shape [4, 6] must have the rank of data 'data'");

  EXPECT_ERROR_CONTAINS(topi::gather_nd(data, deep, 0),
                        "gather_nd: the last dimension of indices 'deep' (shape [7, 4]) is 4, "
                        "but must be in [1, 3]");
  te::Tensor bidx = te::placeholder(to_exprs({3, 2}), ir::kInt64, "bidx");
  EXPECT_ERROR_CONTAINS(topi::gather_nd(data, bidx, 1),
                        "gather_nd: batch dimension 0 of data 'data' (shape [4, 5, 6]) and "
                        "indices 'bidx' (shape [3, 2]) differ");
  EXPECT_ERROR_CONTAINS(topi::gather_nd(data, bidx, 2), "batch_dims 2 must be in [0, 2)");

  EXPECT_ERROR_CONTAINS(topi::parse_scatter_reduction("sum", "ScatterND"),
                        "ScatterND: reduction 'sum' is not one of none, add, mul, max, min");
  EXPECT_EQ(topi::parse_scatter_reduction("max", "ScatterND"), ScatterReduction::kMax);
  te::Tensor plain = te::placeholder(to_exprs({4}), ir::kFloat32, "plain");
  te::Tensor y = topi::exp(plain);
  te::Schedule s = te::create_schedule({y});
  EXPECT_ERROR_CONTAINS(topi::schedule_scatter_x86(s, y),
                        "is not the output of scatter_elements or scatter_nd");
}

}  // namespace
}  // namespace kiln
