// The transposed convolution of the operator library (ONNX ConvTranspose, NCHW, IOHW weights),
// built with its x86 template at the default config and at evenly spaced points of its config
// space, run, and compared with a naive scatter loop nest in C++.
// Tolerance: 1e-4 relative + 1e-5 absolute.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/elementwise.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using space::Config;
using space::ConfigSpace;
using testing::all_close;
using testing::build_host;
using testing::random_array;
using testing::zeros;
using topi::Ints2;
using topi::Ints4;

struct Case {
  int n, c, h, w, m, kh, kw;  // m: output channels
  Ints2 stride;
  Ints4 pad;
  Ints2 output_padding;
  Ints2 dilation;
  int groups;
};

/// Every input point scatters its products over the output (ONNX ConvTranspose).
std::vector<float> naive_conv_transpose(const Case& p, int oh, int ow, const float* x,
                                        const float* wt) {
  int cg = p.c / p.groups, mg = p.m / p.groups;
  std::vector<double> acc(size_t(p.n) * p.m * oh * ow, 0.0);
  for (int n = 0; n < p.n; ++n)
    for (int c = 0; c < p.c; ++c)
      for (int iy = 0; iy < p.h; ++iy)
        for (int ix = 0; ix < p.w; ++ix)
          for (int f = 0; f < mg; ++f)
            for (int ky = 0; ky < p.kh; ++ky)
              for (int kx = 0; kx < p.kw; ++kx) {
                int y = iy * p.stride[0] + ky * p.dilation[0] - p.pad[0];
                int xx = ix * p.stride[1] + kx * p.dilation[1] - p.pad[1];
                if (y < 0 || y >= oh || xx < 0 || xx >= ow) continue;
                int m = (c / cg) * mg + f;
                acc[((size_t(n) * p.m + m) * oh + y) * ow + xx] +=
                    double(x[((size_t(n) * p.c + c) * p.h + iy) * p.w + ix]) *
                    wt[((size_t(c) * mg + f) * p.kh + ky) * p.kw + kx];
              }
  return std::vector<float>(acc.begin(), acc.end());
}

/// `epilogue`: schedule relu(y) with the transposed convolution computed on its tile.
void check(const Case& p, bool epilogue = false) {
  te::Tensor x = te::placeholder({p.n, p.c, p.h, p.w}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({p.c, p.m / p.groups, p.kh, p.kw}, ir::kFloat32, "w");
  te::Tensor y =
      topi::conv2d_transpose_nchw(x, w, p.stride, p.pad, p.output_padding, p.dilation, p.groups);
  int oh = p.stride[0] * (p.h - 1) + p.output_padding[0] + (p.kh - 1) * p.dilation[0] + 1 -
           p.pad[0] - p.pad[2];
  int ow = p.stride[1] * (p.w - 1) + p.output_padding[1] + (p.kw - 1) * p.dilation[1] + 1 -
           p.pad[1] - p.pad[3];
  ASSERT_EQ(*ir::as_const_int(y->shape()[2]), oh);
  ASSERT_EQ(*ir::as_const_int(y->shape()[3]), ow);
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 1),
          wa = random_array({p.c, p.m / p.groups, p.kh, p.kw}, 2);
  std::vector<float> ref = naive_conv_transpose(p, oh, ow, xa.data<float>(), wa.data<float>());
  if (epilogue)
    for (float& v : ref) v = v > 0 ? v : 0;
  te::Tensor z = epilogue ? topi::relu(y) : y;
  ConfigSpace space = topi::conv2d_transpose_nchw_x86_space(y);
  std::vector<Config> cfgs{topi::conv2d_transpose_nchw_x86_default(space)};
  uint64_t n = space.size();
  for (uint64_t i = 0; i < 5; ++i) cfgs.push_back(space.get(n == 1 ? 0 : i * (n - 1) / 4));
  for (const Config& cfg : cfgs) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({z});
    topi::schedule_conv2d_transpose_nchw_x86(s, y, cfg, epilogue ? z : te::Tensor());
    NDArray out = zeros({p.n, p.m, oh, ow});
    build_host(s, {x, w, z})(xa, wa, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }

  // The same on the kernel packed in panels (packed in the function here; by the graph at build
  // time for constant weights), at the default config and two other points.
  int64_t cols = int64_t(p.m / p.groups) * p.kh * p.kw, bf = 1;
  for (int64_t b : {16, 8, 4, 2}) {
    if (cols % b == 0) {
      bf = b;
      break;
    }
  }
  te::Tensor wp = topi::pack_conv2d_transpose_weight(w, p.groups, bf);
  te::Tensor yp =
      topi::conv2d_transpose_nchw_packed(x, wp, {p.c, p.m / p.groups, p.kh, p.kw}, p.stride, p.pad,
                                         p.output_padding, p.dilation, p.groups);
  te::Tensor zp = epilogue ? topi::relu(yp) : yp;
  ConfigSpace pspace = topi::conv2d_transpose_nchw_x86_space(yp);
  uint64_t pn = pspace.size();
  for (const Config& cfg :
       {topi::conv2d_transpose_nchw_x86_default(pspace), pspace.get(pn / 3), pspace.get(pn / 5)}) {
    SCOPED_TRACE("packed bf=" + std::to_string(bf) + " " + cfg.str());
    te::Schedule s = te::create_schedule({zp});
    topi::schedule_conv2d_transpose_nchw_x86(s, yp, cfg, epilogue ? zp : te::Tensor());
    topi::schedule_layout_transform_x86(s, wp);
    NDArray out = zeros({p.n, p.m, oh, ow});
    build_host(s, {x, w, zp})(xa, wa, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }
}

TEST(TopiConv2dTranspose, Stride2Pad1OutputPadding1) {
  check({1, 8, 7, 7, 8, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, Stride1NoPad) {
  check({1, 4, 9, 8, 6, 3, 3, {1, 1}, {0, 0, 0, 0}, {0, 0}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, Stride2Kernel4AsymmetricPad) {
  check({2, 3, 5, 6, 4, 4, 4, {2, 2}, {1, 2, 2, 1}, {0, 0}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, Stride3Kernel2OddSizes) {
  check({1, 5, 5, 3, 7, 2, 3, {3, 2}, {0, 1, 0, 0}, {2, 1}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, Dilation2) {
  check({1, 4, 6, 6, 4, 3, 3, {1, 1}, {1, 1, 1, 1}, {0, 0}, {2, 2}, 1});
}
TEST(TopiConv2dTranspose, TwoGroups) {
  check({1, 4, 6, 7, 6, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 0}, {1, 1}, 2});
}

TEST(TopiConv2dTranspose, Stride3Pad2) {
  check({1, 6, 4, 5, 16, 5, 4, {3, 3}, {2, 1, 1, 2}, {1, 2}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, Stride2Dilation2) {
  check({1, 3, 4, 5, 5, 3, 2, {2, 2}, {1, 0, 2, 1}, {1, 1}, {2, 2}, 1});
}
TEST(TopiConv2dTranspose, Stride1Pad1Kernel3) {
  check({1, 16, 6, 7, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {0, 0}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, FourGroupsStride2) {
  check({2, 8, 5, 4, 12, 4, 4, {2, 2}, {1, 1, 1, 1}, {0, 1}, {1, 1}, 4});
}
// The DCGAN generator's layers: a 1x1 input (every input point is one tap), 4x4 stride 2 pad 1.
TEST(TopiConv2dTranspose, DcganFirstLayer1x1Input) {
  check({1, 20, 1, 1, 32, 4, 4, {1, 1}, {0, 0, 0, 0}, {0, 0}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, DcganStride2Kernel4) {
  check({1, 32, 8, 8, 16, 4, 4, {2, 2}, {1, 1, 1, 1}, {0, 0}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, DcganLastLayerThreeChannels) {
  check({1, 16, 16, 16, 3, 4, 4, {2, 2}, {1, 1, 1, 1}, {0, 0}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, SmallInputStride2) {  // 2x3 input: every input point, not phase taps
  check({1, 5, 2, 1, 7, 5, 5, {2, 3}, {1, 2, 0, 1}, {1, 2}, {1, 1}, 1});
}
TEST(TopiConv2dTranspose, EpilogueOnTheTile) {
  check({1, 16, 4, 4, 32, 4, 4, {2, 2}, {1, 1, 1, 1}, {0, 0}, {1, 1}, 1}, true);
  check({1, 6, 5, 5, 4, 3, 3, {3, 2}, {0, 1, 1, 0}, {2, 1}, {1, 1}, 2}, true);
}

TEST(TopiConv2dTranspose, PackKernelLayout) {
  // Element [p, c, j] of the packed kernel is GEMM column p * bf + j of channel g * C/G + c.
  te::Tensor w = te::placeholder({4, 3, 2, 2}, ir::kFloat32, "w");  // C=4, M/G=3, 2 groups
  te::Tensor wp = topi::pack_conv2d_transpose_weight(w, 2, 4);
  ASSERT_EQ(*ir::as_const_int(wp->shape()[0]), 6);
  ASSERT_EQ(*ir::as_const_int(wp->shape()[1]), 2);
  te::Schedule s = te::create_schedule({wp});
  NDArray wa = random_array({4, 3, 2, 2}, 3), out = zeros({6, 2, 4});
  build_host(s, {w, wp})(wa, out);
  const float* a = wa.data<float>();
  std::vector<float> ref(48);
  for (int pi = 0; pi < 6; ++pi)
    for (int c = 0; c < 2; ++c)
      for (int j = 0; j < 4; ++j) {
        int f = pi * 4 + j, g = f / 12;
        ref[(pi * 2 + c) * 4 + j] = a[(g * 2 + c) * 12 + f % 12];
      }
  EXPECT_TRUE(all_close(out, ref, 0, 0));
}

// KILN_CONVT_BENCH=1: times the DCGAN generator's 512->256 layer (4x4 -> 8x8) at the default
// config on the kernel as given and packed (passed in packed, as the graph would), one thread.
TEST(TopiConv2dTranspose, BenchPackedVsUnpacked) {
  if (!std::getenv("KILN_CONVT_BENCH")) GTEST_SKIP() << "set KILN_CONVT_BENCH=1";
  struct Shape {
    int c, h, m;
  };
  for (Shape sh : {Shape{512, 4, 256}, Shape{256, 8, 128}, Shape{128, 16, 64}}) {
    Case p{1, sh.c, sh.h, sh.h, sh.m, 4, 4, {2, 2}, {1, 1, 1, 1}, {0, 0}, {1, 1}, 1};
    te::Tensor x = te::placeholder({1, p.c, p.h, p.w}, ir::kFloat32, "x");
    te::Tensor w = te::placeholder({p.c, p.m, 4, 4}, ir::kFloat32, "w");
    te::Tensor wp = te::placeholder({p.m, p.c, 16}, ir::kFloat32, "wp");
    te::Tensor y = topi::conv2d_transpose_nchw(x, w, p.stride, p.pad);
    te::Tensor yp = topi::conv2d_transpose_nchw_packed(x, wp, {p.c, p.m, 4, 4}, p.stride, p.pad);
    NDArray xa = random_array({1, p.c, p.h, p.w}, 1), wa = random_array({p.c, p.m, 4, 4}, 2);
    NDArray wpa = zeros({p.m, p.c, 16});
    for (int pi = 0; pi < p.m; ++pi)
      for (int c = 0; c < p.c; ++c)
        for (int j = 0; j < 16; ++j)
          wpa.data<float>()[(size_t(pi) * p.c + c) * 16 + j] =
              wa.data<float>()[(size_t(c) * p.m + pi) * 16 + j];
    int oh = 2 * p.h;
    std::vector<float> ref = naive_conv_transpose(p, oh, oh, xa.data<float>(), wa.data<float>());
    for (bool packed : {false, true}) {
      te::Tensor out_t = packed ? yp : y;
      te::Schedule s = te::create_schedule({out_t});
      topi::schedule_conv2d_transpose_nchw_x86(
          s, out_t,
          topi::conv2d_transpose_nchw_x86_default(topi::conv2d_transpose_nchw_x86_space(out_t)));
      runtime::Function f =
          compiler::build(s, {x, packed ? wp : w, out_t}, "llvm -mcpu=native", "f").function("f");
      NDArray out = zeros({1, p.m, oh, oh});
      NDArray& wt = packed ? wpa : wa;
      f(xa, wt, out);
      EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
      std::vector<double> ms;
      for (int r = 0; r < 30; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        f(xa, wt, out);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(ms.begin(), ms.end());
      std::printf("case=convt_c%d_h%d_m%d packed=%d median_ms=%.3f min_ms=%.3f\n", p.c, p.h, p.m,
                  int(packed), ms[ms.size() / 2], ms[0]);
    }
  }
}

TEST(TopiConv2dTranspose, DefaultScheduleVectorizesAndParallelizes) {
  te::Tensor x = te::placeholder({1, 16, 8, 8}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({16, 8, 4, 4}, ir::kFloat32, "w");
  te::Tensor y = topi::conv2d_transpose_nchw(x, w, {2, 2}, {1, 1, 1, 1});
  te::Schedule s = te::create_schedule({y});
  topi::schedule_conv2d_transpose_nchw_x86(
      s, y, topi::conv2d_transpose_nchw_x86_default(topi::conv2d_transpose_nchw_x86_space(y)));
  std::string text = ir::to_string(compiler::lower(s, {x, w, y}, "f").body);
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;
}

// An epilogue (tanh here) runs over a row buffer the gather fills, not inlined into the gather's
// expression: inlined, it sat among the gather's loads and made the fused kernel slower than the
// convolution and the tanh as two kernels (the DCGAN generator's last layer).
TEST(TopiConv2dTranspose, EpilogueRunsOverTheGatheredRow) {
  te::Tensor x = te::placeholder({1, 16, 8, 8}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({16, 3, 4, 4}, ir::kFloat32, "w");
  te::Tensor y = topi::conv2d_transpose_nchw(x, w, {2, 2}, {1, 1, 1, 1});
  te::Tensor z = topi::tanh(y);
  te::Schedule s = te::create_schedule({z});
  topi::schedule_conv2d_transpose_nchw_x86(
      s, y, topi::conv2d_transpose_nchw_x86_default(topi::conv2d_transpose_nchw_x86_space(y)), z);
  std::string text = ir::to_string(compiler::lower(s, {x, w, z}, "f").body);
  EXPECT_NE(text.find("allocate conv2d_transpose: float32[16"), std::string::npos) << text;
  EXPECT_NE(text.find("tanh(conv2d_transpose[ramp("), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
