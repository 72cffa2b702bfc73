// Winograd F(2x2, 3x3) and F(4x4, 3x3) blocked convolutions (topi/conv2d_winograd.h), built with
// their x86 template at the default configs (AVX-512 and AVX2) and at evenly spaced points of the
// space, run, and compared with a naive loop nest in float64 over the untransformed kernel.
// Tolerance (inputs and weights in [-1, 1), up to 64 input channels), max |out - ref| against the
// largest |ref|: F(4x4) 2e-5, F(2x2) 2e-6 (F(4x4)'s transforms scale by up to 8 and 1/24; the
// float32 direct sum's error is about 2e-7 on these cases).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "compiler/topi/conv2d_winograd.h"
#include "compiler/topi/transform.h"
#include "compiler/topi/workload.h"
#include "tests/common/expect_error.h"
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
using topi::Ints4;

struct Case {
  int n, c, h, w, o;
  Ints4 pad;
  int ib, ob;  ///< channel blocks of the input and the output
};

/// The 3x3 stride-1 convolution of NCHW x with OIHW w, in NCHW[ob]c, plus bias and ReLU when
/// `bias` is given.
std::vector<float> naive_blocked(const Case& p, const float* x, const float* w, int oh, int ow,
                                 const float* bias = nullptr) {
  std::vector<float> out(size_t(p.n) * p.o * oh * ow);
  for (int n = 0; n < p.n; ++n)
    for (int f = 0; f < p.o; ++f)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx) {
          double acc = 0;
          for (int c = 0; c < p.c; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = y + ky - p.pad[0], ix = xx + kx - p.pad[1];
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc += double(x[((size_t(n) * p.c + c) * p.h + iy) * p.w + ix]) *
                       w[((size_t(f) * p.c + c) * 3 + ky) * 3 + kx];
              }
          if (bias != nullptr) acc = std::max(acc + bias[f], 0.0);
          const size_t at =
              (((size_t(n) * (p.o / p.ob) + f / p.ob) * oh + y) * ow + xx) * p.ob + f % p.ob;
          out[at] = float(acc);
        }
  return out;
}

/// NCHW -> NCHW[b]c.
NDArray blocked(const NDArray& a, int b) {
  const auto& s = a.shape();
  NDArray r = zeros({s[0], s[1] / b, s[2], s[3], b});
  const float* src = a.data<float>();
  float* dst = r.data<float>();
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < s[2] * s[3]; ++i)
        dst[(((n * (s[1] / b) + c / b) * s[2] * s[3]) + i) * b + c % b] =
            src[(n * s[1] + c) * s[2] * s[3] + i];
  return r;
}

void check_winograd(const Case& p, int m, double bound, bool epilogue = false) {
  const int alpha = m + 2;
  const int oh = p.h + p.pad[0] + p.pad[2] - 2, ow = p.w + p.pad[1] + p.pad[3] - 2;
  te::Tensor xb = te::placeholder({p.n, p.c / p.ib, p.h, p.w, p.ib}, ir::kFloat32, "xb");
  te::Tensor u = te::placeholder({alpha, alpha, p.o / p.ob, p.c, p.ob}, ir::kFloat32, "u");
  te::Tensor bias = te::placeholder({p.o}, ir::kFloat32, "bias");
  te::Tensor y = topi::conv2d_nchwc_winograd(xb, u, p.pad, m);
  te::Tensor out = y;
  if (epilogue) {
    out = te::compute(
        y->shape(),
        [&](const std::vector<ir::Var>& i) {
          return ir::max(y(std::vector<ir::Expr>(i.begin(), i.end())) + bias(i[1] * p.ob + i[4]),
                         ir::make_zero(ir::kFloat32));
        },
        "bias_relu");
  }
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 3), wa = random_array({p.o, p.c, 3, 3}, 4),
          ba = random_array({p.o}, 5);
  const std::vector<float> ref = naive_blocked(p, xa.data<float>(), wa.data<float>(), oh, ow,
                                               epilogue ? ba.data<float>() : nullptr);
  NDArray xba = blocked(xa, p.ib);
  NDArray ua = zeros({alpha, alpha, p.o / p.ob, p.c, p.ob});
  const std::vector<float> uv =
      topi::winograd_kernel_transform(wa.data<float>(), p.o, p.c, m, p.ob, p.o, p.c);
  std::copy(uv.begin(), uv.end(), ua.data<float>());

  const ConfigSpace space = topi::conv2d_nchwc_winograd_x86_space(y);
  std::vector<Config> cfgs;
  for (const char* cpu : {"skylake-avx512", "haswell"}) {
    cfgs.push_back(topi::conv2d_nchwc_winograd_x86_default(
        y, space, target::Target::parse(std::string("llvm -mcpu=") + cpu)));
  }
  const uint64_t size = space.size();
  for (uint64_t i = 0; i < 4; ++i) cfgs.push_back(space.get(size == 1 ? 0 : i * (size - 1) / 3));
  for (const Config& cfg : cfgs) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({out});
    topi::schedule_conv2d_nchwc_winograd_x86(s, y, cfg, out);
    NDArray res = zeros({p.n, p.o / p.ob, oh, ow, p.ob});
    if (epilogue) {
      build_host(s, {xb, u, bias, out})(xba, ua, ba, res);
    } else {
      build_host(s, {xb, u, out})(xba, ua, res);
    }
    // Relative to the largest output: Winograd's error grows with the tile's magnitudes, not the
    // element's own (a small output next to large ones differs by as much as they do).
    double ref_max = 0, err = 0;
    const float* got = res.data<float>();
    for (size_t i = 0; i < ref.size(); ++i) {
      ref_max = std::max(ref_max, std::fabs(double(ref[i])));
      err = std::max(err, std::fabs(double(got[i]) - ref[i]));
    }
    EXPECT_LE(err, bound * ref_max) << "max |diff| " << err << " of max |ref| " << ref_max;
  }
}

/// max |out - ref| / max |ref| (float64 reference): F(4x4) 2e-5, F(2x2) 2e-6 (measured at most
/// 4.2e-6 for F(4x4) here; the float32 direct sum's is about 2e-7).
constexpr double kF4 = 2e-5, kF2 = 2e-6;

TEST(TopiConv2dWinograd, F4WholeTiles) {
  check_winograd({1, 32, 8, 8, 32, {1, 1, 1, 1}, 16, 16}, 4, kF4);
}

TEST(TopiConv2dWinograd, F4PartialTilesBatch2UnevenPadding) {
  // 9 x 7 outputs: tiles of 4 leave 3 rows and 3 columns of the last ones.
  check_winograd({2, 16, 9, 6, 48, {1, 0, 1, 3}, 8, 16}, 4, kF4);
}

TEST(TopiConv2dWinograd, F2PartialTilesNoPadding) {
  check_winograd({1, 64, 9, 10, 16, {0, 0, 0, 0}, 16, 8}, 2, kF2);
}

TEST(TopiConv2dWinograd, F4WithBiasReluEpilogue) {
  check_winograd({1, 16, 14, 14, 32, {1, 1, 1, 1}, 16, 16}, 4, kF4, /*epilogue=*/true);
}

TEST(TopiConv2dWinograd, F2WithBiasReluEpilogue) {
  check_winograd({1, 16, 7, 7, 16, {1, 1, 1, 1}, 16, 16}, 2, kF2, /*epilogue=*/true);
}

TEST(TopiConv2dWinograd, WorkloadRebuildsTheSameProgram) {
  te::Tensor xb = te::placeholder({1, 2, 10, 10, 16}, ir::kFloat32, "xb");
  te::Tensor u = te::placeholder({6, 6, 4, 32, 8}, ir::kFloat32, "u");
  te::Tensor y = topi::conv2d_nchwc_winograd(xb, u, {1, 1, 1, 1}, 4);
  const std::string text = *topi::workload_of(y);
  te::Tensor z = topi::compute_from_workload(topi::Workload::parse(text));
  EXPECT_EQ(*topi::workload_of(z), text);
  EXPECT_EQ(topi::const_shape(z, "z"), (std::vector<int64_t>{1, 4, 10, 10, 8}));
}

TEST(TopiConv2dWinograd, BadShapesNameTheProblem) {
  te::Tensor xb = te::placeholder({1, 2, 10, 10, 16}, ir::kFloat32, "xb");
  te::Tensor u4 = te::placeholder({6, 6, 4, 32, 8}, ir::kFloat32, "u");
  te::Tensor u_channels = te::placeholder({6, 6, 4, 16, 8}, ir::kFloat32, "u16");
  EXPECT_ERROR_CONTAINS(topi::conv2d_nchwc_winograd(xb, u4, {1, 1, 1, 1}, 3), "not supported");
  EXPECT_ERROR_CONTAINS(topi::conv2d_nchwc_winograd(xb, u4, {1, 1, 1, 1}, 2), "not a transform");
  EXPECT_ERROR_CONTAINS(topi::conv2d_nchwc_winograd(xb, u_channels, {1, 1, 1, 1}, 4), "32 input");
  // A workload of data [1, 2, 10, 10, 16], tile `tile` and a kernel of `kernel` (its JSON shape).
  auto workload = [](int tile, const std::string& kernel) {
    return topi::Workload::parse(
        R"({"attrs":{"pads":[1,1,1,1],"tile":)" + std::to_string(tile) +
        R"(},"compute":"conv2d_nchwc_winograd","inputs":[{"dtype":"float32",)"
        R"("shape":[1,2,10,10,16]},{"dtype":"float32","shape":)" +
        kernel + "}]}");
  };
  EXPECT_ERROR_CONTAINS(workload(3, "[5,5,4,32,8]"), "attrs.tile = 3");
  EXPECT_ERROR_CONTAINS(workload(4, "[6,6,4,16,8]"), "inputs[1].shape[3]");
}

}  // namespace
}  // namespace kiln
