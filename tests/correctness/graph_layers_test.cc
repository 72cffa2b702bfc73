// The layers bench_layers times (tests/models/make_layers.py), at test sizes, through the whole
// graph build (taps trimmed, weights packed, layouts changed, fused) against naive loops:
// dilated 3x3 convolutions whose taps land partly (computed region by region) or wholly in the
// padding, 1-D convolutions
// (plain, strided, a long kernel over one channel, pointwise, depthwise, dilated; and a chain of
// 1-D layers against the build without layouts) and MatMul
// against a constant 2-D weight with a left operand of rank 1 to 4. Each at 1 and 2 threads;
// tolerance 1e-4 relative + 1e-4 absolute (the sums run in another order).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

/// A Conv over [1, cin, (h,) w] with a k (x k) kernel: its parameters and a naive evaluation.
struct ConvCase {
  std::string name;
  int64_t cin, cout, h, w, k, stride = 1, dil = 1, pad = -1, group = 1;
  bool one_d = false;

  int64_t padding() const { return pad >= 0 ? pad : dil * (k - 1) / 2; }
  int64_t out(int64_t in) const { return (in + 2 * padding() - dil * (k - 1) - 1) / stride + 1; }
  Shape x_shape() const { return one_d ? Shape{1, cin, w} : Shape{1, cin, h, w}; }
  Shape w_shape() const {
    return one_d ? Shape{cout, cin / group, k} : Shape{cout, cin / group, k, k};
  }
  Shape y_shape() const { return one_d ? Shape{1, cout, out(w)} : Shape{1, cout, out(h), out(w)}; }

  /// y[o, i, j] = b[o] + sum over c in o's group, taps (a, b) of x[c, ...] * w[o, c', a, b].
  std::vector<float> naive(const NDArray& x, const NDArray& wt, const NDArray& b) const {
    const int64_t kh = one_d ? 1 : k, hh = one_d ? 1 : h, oh = one_d ? 1 : out(h), ow = out(w);
    const int64_t cg = cin / group, og = cout / group, p = padding(), ph = one_d ? 0 : p;
    std::vector<float> y(static_cast<size_t>(cout * oh * ow));
    const float *xs = x.data<float>(), *ws = wt.data<float>(), *bs = b.data<float>();
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bs[o];
          for (int64_t c = 0; c < cg; ++c) {
            const int64_t ci = (o / og) * cg + c;
            for (int64_t a = 0; a < kh; ++a) {
              const int64_t r = i * stride + a * dil - ph;
              if (r < 0 || r >= hh) continue;
              for (int64_t t = 0; t < k; ++t) {
                const int64_t s = j * stride + t * dil - p;
                if (s < 0 || s >= w) continue;
                acc += double(xs[(ci * hh + r) * w + s]) * ws[((o * cg + c) * kh + a) * k + t];
              }
            }
          }
          y[static_cast<size_t>((o * oh + i) * ow + j)] = static_cast<float>(acc);
        }
      }
    }
    return y;
  }
};

/// Builds `g` with the default options, runs it at 1 and 2 threads on `x`, compares with `want`.
void check_build(const Graph& g, const NDArray& x, const std::vector<float>& want,
                 const std::string& tag) {
  runtime::Bundle bundle = build_graph(g, "llvm -mcpu=native", BuildOptions{});
  runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), tag);
  exec.set_input(0, x);
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    exec.run();
    EXPECT_TRUE(testing::all_close(exec.output(0), want, 1e-4, 1e-4))
        << tag << " at " << threads << " threads";
  }
  runtime::set_num_threads(0);
}

void check_conv(const ConvCase& c) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, c.x_shape());
  NDArray wt = testing::random_array(c.w_shape(), 11, -0.5f, 0.5f);
  NDArray b = testing::random_array({c.cout}, 12);
  ValueId w = g.add_constant("w", wt.copy()), bias = g.add_constant("b", b.copy());
  const size_t dims = c.one_d ? 1 : 2;
  Attrs attrs = {{"kernel_shape", Shape(dims, c.k)},
                 {"strides", Shape(dims, c.stride)},
                 {"dilations", Shape(dims, c.dil)},
                 {"pads", Shape(2 * dims, c.padding())},
                 {"group", c.group}};
  g.add_output(g.add_op("Conv", c.name, {x, w, bias}, attrs, kFloat32, c.y_shape()));
  NDArray xs = testing::random_array(c.x_shape(), 13);
  check_build(g, xs, c.naive(xs, wt, b), c.name);
}

TEST(Layers, DilatedConvolutions) {
  // DeepLabV3's atrous rates on a 16x16 map (24 and 36: only the centre tap is live; 12: every
  // tap for some outputs), its dilated backbone's rates, and a strided dilated one.
  for (int64_t rate : {1, 2, 4, 12, 24, 36})
    check_conv({"rate" + std::to_string(rate), 32, 16, 16, 16, 3, 1, rate});
  check_conv({"rate2_stride2", 16, 16, 15, 15, 3, 2, 2});
  // Computed region by region (a quarter or more of the taps in the padding): strided, not
  // square, and with border regions that read only padding (the bias alone).
  check_conv({"rate8_stride2", 16, 16, 16, 16, 3, 2, 8});
  check_conv({"rate6_nonsquare", 16, 24, 9, 20, 3, 1, 6});
  check_conv({"pad_beyond_kernel", 16, 16, 8, 8, 1, 1, 1, 2});
}

TEST(Layers, ImageStems) {
  // The first convolution of image models, over 3 colours (its padding inlined, conv2d.cc's
  // default), on maps whose borders are uneven: ShuffleNet's 3 -> 24 (8-channel blocks),
  // MobileNet's 3 -> 32 and ResNet's 7x7 3 -> 64.
  check_conv({"shufflenet_stem", 3, 24, 37, 36, 3, 2});
  check_conv({"mobilenet_stem", 3, 32, 32, 33, 3, 2});
  check_conv({"resnet_stem", 3, 64, 35, 30, 7, 2});
}

TEST(Layers, OneDimensionalConvolutions) {
  auto one_d = [](ConvCase c) {
    c.one_d = true;
    c.h = 1;
    return c;
  };
  check_conv(one_d({"front", 20, 48, 1, 300, 3}));
  check_conv(one_d({"front_stride2", 48, 48, 1, 300, 3, 2}));
  check_conv(one_d({"m5_first", 1, 32, 1, 800, 80, 4, 1, 0}));
  check_conv(one_d({"k3_odd_length", 24, 40, 1, 97, 3}));
  check_conv(one_d({"pointwise", 64, 32, 1, 50, 1}));
  check_conv(one_d({"depthwise31", 32, 32, 1, 120, 31, 1, 1, -1, 32}));
  check_conv(one_d({"grouped", 32, 64, 1, 60, 5, 1, 1, -1, 4}));
  check_conv(one_d({"dilated", 16, 16, 1, 40, 3, 1, 8}));
  check_conv(one_d({"dilated_dead_taps", 16, 16, 1, 6, 3, 1, 8}));
}

TEST(Layers, OneDimensionalChain) {
  // An audio block: Conv -> Relu -> MaxPool -> Conv -> Add(residual) -> GlobalAveragePool, with
  // the Relu's output a graph output too. lift_conv1d keeps the chain 4-D and blocked; the build
  // without layouts (the 1-D convolutions and pooling lowered as they are) is the reference.
  const Shape pool_attrs_k{2};
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 24, 60});
  auto conv = [&](ValueId in, int64_t cin, int64_t t, uint32_t seed, const char* name) {
    ValueId w = g.add_constant(std::string(name) + "_w",
                               testing::random_array({32, cin, 3}, seed, -0.3f, 0.3f));
    ValueId b = g.add_constant(std::string(name) + "_b", testing::random_array({32}, seed + 1));
    return g.add_op("Conv", name, {in, w, b},
                    {{"kernel_shape", Shape{3}},
                     {"strides", Shape{1}},
                     {"dilations", Shape{1}},
                     {"pads", Shape{1, 1}},
                     {"group", int64_t{1}}},
                    kFloat32, {1, 32, t});
  };
  ValueId r = g.add_op("Relu", "relu", {conv(x, 24, 60, 31, "c1")}, {}, kFloat32, {1, 32, 60});
  ValueId p = g.add_op("MaxPool", "pool", {r},
                       {{"kernel_shape", pool_attrs_k},
                        {"strides", pool_attrs_k},
                        {"dilations", Shape{1}},
                        {"pads", Shape{0, 0}},
                        {"ceil_mode", int64_t{0}}},
                       kFloat32, {1, 32, 30});
  ValueId a =
      g.add_op("Add", "residual", {conv(p, 32, 30, 33, "c2"), p}, {}, kFloat32, {1, 32, 30});
  g.add_output(g.add_op("GlobalAveragePool", "gap", {a}, {}, kFloat32, {1, 32, 1}));
  g.add_output(r);
  NDArray xs = testing::random_array({1, 24, 60}, 34);
  std::vector<std::vector<float>> outs[2];
  for (bool layout : {true, false}) {
    BuildOptions options;
    options.alter_layout = layout;
    BuildReport report;
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(
        build_graph(g, "llvm -mcpu=native", options, &report), "chain");
    if (layout) {  // blocked from the first convolution to the pooling, the Relu's output apart
      EXPECT_EQ(report.convolutions_blocked, 2u);
      EXPECT_EQ(report.layout_conversions, 3u);
    }
    exec.set_input(0, xs);
    exec.run();
    for (size_t i = 0; i < exec.num_outputs(); ++i)
      outs[layout ? 0 : 1].push_back(exec.output(i).to_vector<float>());
  }
  ASSERT_EQ(outs[0].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(testing::all_close(outs[0][i].data(), outs[1][i].data(),
                                   static_cast<int64_t>(outs[1][i].size()), 1e-4, 1e-4))
        << "output " << i;
  }
}

/// MatMul of an input [..., K] by a constant [K, N].
void check_matmul(const std::string& name, const Shape& a_shape, int64_t n) {
  const int64_t k = a_shape.back();
  Graph g;
  ValueId a = g.add_input("a", kFloat32, a_shape);
  NDArray bt = testing::random_array({k, n}, 21, -0.5f, 0.5f);
  ValueId b = g.add_constant("b", bt.copy());
  Shape y_shape = a_shape;
  y_shape.back() = n;
  g.add_output(g.add_op("MatMul", name, {a, b}, {}, kFloat32, y_shape));
  NDArray as = testing::random_array(a_shape, 22);
  const int64_t m = as.num_elements() / k;
  std::vector<float> want(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t r = 0; r < k; ++r)
        acc += double(as.data<float>()[i * k + r]) * bt.data<float>()[r * n + j];
      want[static_cast<size_t>(i * n + j)] = static_cast<float>(acc);
    }
  }
  check_build(g, as, want, name);
}

TEST(Layers, MatMulAgainstAConstantWeight) {
  check_matmul("head_3d", {1, 64, 48}, 500);  // N = 500: no panel width divides it
  check_matmul("head_2d", {64, 48}, 500);
  check_matmul("token", {1, 1, 48}, 1000);
  check_matmul("ffn_batch", {4, 10, 64}, 256);
  check_matmul("rank4_odd", {2, 3, 5, 24}, 37);
  check_matmul("rows_prime", {1, 197, 32}, 96);
}

}  // namespace
}  // namespace kiln::graph
