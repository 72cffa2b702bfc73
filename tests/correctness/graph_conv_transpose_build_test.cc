// ConvTranspose through the graph build: a transposed convolution with constant weights, then a
// batch norm and an activation, built the default way (the batch norm folded into the weight and
// bias, the weight packed into GEMM panels, the epilogue fused) and with those three passes off,
// run by the graph executor and compared with a naive scatter loop nest (double accumulation) on
// odd shapes: stride 3 with output_padding and uneven pads, groups, dilation, a 1-D layer, GEMM
// columns no panel of 16 divides. (The same shapes against ONNX Runtime: the convt_odd model of
// tests/models.) Tolerance: 1e-4 relative + 1e-5 absolute.
#include <gtest/gtest.h>

#include <cmath>
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

/// One ConvTranspose layer: x [1, c, h, w] (h = 0: 1-D), kernel kh x kw, m output channels.
struct Layer {
  int64_t c, h, w, m, kh, kw, groups;
  Shape strides, pads, output_padding, dilations;  // ONNX's, per spatial axis
  bool bias;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t op, int64_t p0, int64_t p1) {
  return s * (in - 1) + op + (k - 1) * d + 1 - p0 - p1;
}

/// ConvTranspose (every input point scatters its products), then y = relu((y - mean) * gamma /
/// sqrt(var + 1e-5) + beta) per output channel; in double.
std::vector<float> reference(const Layer& l, const float* x, const float* w, const float* bias,
                             const float* bn, int64_t oh, int64_t ow) {
  const bool one_d = l.h == 0;
  const int64_t h = one_d ? 1 : l.h, kh = one_d ? 1 : l.kh;
  const int64_t sh = one_d ? 1 : l.strides[0], sw = l.strides.back();
  const int64_t dh = one_d ? 1 : l.dilations[0], dw = l.dilations.back();
  const int64_t pt = one_d ? 0 : l.pads[0], pl = one_d ? l.pads[0] : l.pads[1];
  const int64_t cg = l.c / l.groups, mg = l.m / l.groups;
  std::vector<double> acc(static_cast<size_t>(l.m * oh * ow), 0.0);
  for (int64_t c = 0; c < l.c; ++c)
    for (int64_t iy = 0; iy < h; ++iy)
      for (int64_t ix = 0; ix < l.w; ++ix)
        for (int64_t f = 0; f < mg; ++f)
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < l.kw; ++kx) {
              const int64_t y = iy * sh + ky * dh - pt, xx = ix * sw + kx * dw - pl;
              if (y < 0 || y >= oh || xx < 0 || xx >= ow) continue;
              const int64_t m = c / cg * mg + f;
              acc[static_cast<size_t>((m * oh + y) * ow + xx)] +=
                  double(x[(c * h + iy) * l.w + ix]) * w[((c * mg + f) * kh + ky) * l.kw + kx];
            }
  std::vector<float> out(acc.size());
  for (int64_t m = 0; m < l.m; ++m) {
    const double gamma = bn[m], beta = bn[l.m + m], mean = bn[2 * l.m + m], var = bn[3 * l.m + m];
    for (int64_t i = 0; i < oh * ow; ++i) {
      double v = acc[static_cast<size_t>(m * oh * ow + i)] + (bias ? bias[m] : 0.0);
      v = (v - mean) * gamma / std::sqrt(var + 1e-5) + beta;
      out[static_cast<size_t>(m * oh * ow + i)] = static_cast<float>(v > 0 ? v : 0);
    }
  }
  return out;
}

void check(const Layer& l) {
  const bool one_d = l.h == 0;
  const int64_t oh = one_d ? 1
                           : out_size(l.h, l.kh, l.strides[0], l.dilations[0], l.output_padding[0],
                                      l.pads[0], l.pads[2]);
  const size_t a = one_d ? 0 : 1;  // the width's index in the per-axis attributes
  const int64_t ow = out_size(l.w, l.kw, l.strides[a], l.dilations[a], l.output_padding[a],
                              l.pads[a], l.pads[a + l.pads.size() / 2]);
  const Shape xs = one_d ? Shape{1, l.c, l.w} : Shape{1, l.c, l.h, l.w};
  const Shape ws =
      one_d ? Shape{l.c, l.m / l.groups, l.kw} : Shape{l.c, l.m / l.groups, l.kh, l.kw};
  const Shape ys = one_d ? Shape{1, l.m, ow} : Shape{1, l.m, oh, ow};
  NDArray xa = testing::random_array(xs, 1), wa = testing::random_array(ws, 2, -0.5f, 0.5f);
  NDArray ba = testing::random_array({l.m}, 3, -0.2f, 0.2f);
  NDArray bn = testing::random_array({4, l.m}, 4, 0.5f, 1.5f);  // gamma, beta, mean, var
  Graph g;
  ValueId x = g.add_input("x", kFloat32, xs);
  std::vector<ValueId> in{x, g.add_constant("w", wa.copy())};
  if (l.bias) in.push_back(g.add_constant("b", ba.copy()));
  Attrs attrs{{"kernel_shape", one_d ? Shape{l.kw} : Shape{l.kh, l.kw}},
              {"strides", l.strides},
              {"pads", l.pads},
              {"output_padding", l.output_padding},
              {"dilations", l.dilations},
              {"group", l.groups}};
  ValueId y = g.add_op("ConvTranspose", "convt", in, attrs, kFloat32, ys);
  std::vector<ValueId> bn_in{y};
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<float> row(bn.data<float>() + r * l.m, bn.data<float>() + (r + 1) * l.m);
    bn_in.push_back(
        g.add_constant("bn" + std::to_string(r), NDArray::from_vector<float>(row, {l.m})));
  }
  ValueId z = g.add_op("BatchNormalization", "bn", bn_in, {{"epsilon", 1e-5f}}, kFloat32, ys);
  g.add_output(g.add_op("Relu", "relu", {z}, {}, kFloat32, ys));
  const std::vector<float> ref =
      reference(l, xa.data<float>(), wa.data<float>(), l.bias ? ba.data<float>() : nullptr,
                bn.data<float>(), oh, ow);
  for (bool passes : {true, false}) {
    BuildOptions options;
    options.fold_batch_norm = passes;
    options.pack_weights = passes;
    options.fuse = passes;
    runtime::Bundle bundle = build_graph(g, "llvm -mcpu=native", options);
    EXPECT_EQ(bundle.graph_json.find(".packed") != std::string::npos, passes);
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "convt");
    exec.set_input("x", xa);
    for (int threads : {1, 2}) {
      runtime::set_num_threads(threads);
      exec.run();
      EXPECT_TRUE(testing::all_close(exec.output(0), ref, 1e-4, 1e-5))
          << (passes ? "folded, packed, fused" : "as given, unfused") << ", " << threads
          << " threads";
    }
  }
  runtime::set_num_threads(0);
}

TEST(ConvTransposeBuild, Stride3OutputPaddingUnevenPads) {
  check({6, 5, 7, 16, 4, 5, 1, {3, 3}, {2, 1, 1, 2}, {1, 2}, {1, 1}, false});
}
TEST(ConvTransposeBuild, TwoGroupsDilation2WithBias) {
  check({16, 6, 9, 12, 3, 3, 2, {2, 2}, {1, 1, 1, 1}, {1, 0}, {2, 2}, true});
}
TEST(ConvTransposeBuild, Stride1ColumnsNotAMultipleOf16) {  // 4 * 9 = 36 columns: panels of 4
  check({12, 10, 11, 4, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {0, 0}, {1, 1}, false});
}
TEST(ConvTransposeBuild, OneDimensionalStride2) {
  check({4, 0, 50, 8, 0, 4, 1, {2}, {1, 2}, {0}, {1}, true});
}
TEST(ConvTransposeBuild, FourGroupsStride3Dilation2) {
  check({8, 4, 5, 12, 3, 2, 4, {3, 2}, {0, 1, 2, 0}, {2, 1}, {2, 2}, false});
}
TEST(ConvTransposeBuild, DcganLayer) {  // 4x4 stride 2 pad 1, the generator's middle layers
  check({64, 8, 8, 32, 4, 4, 1, {2, 2}, {1, 1, 1, 1}, {0, 0}, {1, 1}, false});
}

}  // namespace
}  // namespace kiln::graph
