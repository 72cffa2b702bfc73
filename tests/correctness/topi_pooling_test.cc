// The pooling operators of the operator library (max and average over a window, global max and
// average), each built with the x86 template at the default config and at evenly spaced points of
// its config space, run, and compared with a naive loop nest in C++.
// Tolerance: 1e-4 relative + 1e-5 absolute.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/pooling.h"
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

enum class Kind { kMax, kAvg, kGlobalMax, kGlobalAvg };

struct PoolCase {
  int n, c, h, w;
  Ints2 kernel, stride;
  Ints4 pad;
  bool ceil_mode = false;
  bool count_include_pad = false;
};

int out_dim(int in, int k, int s, int p0, int p1, bool ceil_mode) {
  int span = in + p0 + p1 - k;
  int o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p0) --o;
  return o;
}

std::vector<float> naive_pool(const PoolCase& p, Kind kind, const float* x) {
  bool global = kind == Kind::kGlobalMax || kind == Kind::kGlobalAvg;
  bool is_max = kind == Kind::kMax || kind == Kind::kGlobalMax;
  int oh = global ? 1 : out_dim(p.h, p.kernel[0], p.stride[0], p.pad[0], p.pad[2], p.ceil_mode);
  int ow = global ? 1 : out_dim(p.w, p.kernel[1], p.stride[1], p.pad[1], p.pad[3], p.ceil_mode);
  std::vector<float> out(size_t(p.n) * p.c * oh * ow);
  for (int n = 0; n < p.n; ++n)
    for (int c = 0; c < p.c; ++c)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx) {
          int hs = global ? 0 : y * p.stride[0] - p.pad[0],
              ws = global ? 0 : xx * p.stride[1] - p.pad[1];
          int kh = global ? p.h : p.kernel[0], kw = global ? p.w : p.kernel[1];
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int iy = hs; iy < hs + kh; ++iy)
            for (int ix = ws; ix < ws + kw; ++ix) {
              if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
              double v = x[((size_t(n) * p.c + c) * p.h + iy) * p.w + ix];
              acc = is_max ? std::max(acc, v) : acc + v;
            }
          if (!is_max) {
            int count;
            if (global) {
              count = p.h * p.w;
            } else if (p.count_include_pad) {
              count = (std::min(hs + kh, p.h + p.pad[2]) - hs) *
                      (std::min(ws + kw, p.w + p.pad[3]) - ws);
            } else {
              count = (std::min(hs + kh, p.h) - std::max(hs, 0)) *
                      (std::min(ws + kw, p.w) - std::max(ws, 0));
            }
            acc /= count;
          }
          out[((size_t(n) * p.c + c) * oh + y) * ow + xx] = float(acc);
        }
  return out;
}

te::Tensor make_pool(const te::Tensor& x, const PoolCase& p, Kind kind) {
  switch (kind) {
    case Kind::kMax:
      return topi::max_pool2d(x, p.kernel, p.stride, p.pad, p.ceil_mode);
    case Kind::kAvg:
      return topi::avg_pool2d(x, p.kernel, p.stride, p.pad, p.ceil_mode, p.count_include_pad);
    case Kind::kGlobalMax:
      return topi::global_max_pool2d(x);
    case Kind::kGlobalAvg:
      return topi::global_avg_pool2d(x);
  }
  return {};
}

void check_pool(const PoolCase& p, Kind kind) {
  te::Tensor x = te::placeholder({p.n, p.c, p.h, p.w}, ir::kFloat32, "x");
  te::Tensor y = make_pool(x, p, kind);
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 7);
  std::vector<float> ref = naive_pool(p, kind, xa.data<float>());
  std::vector<int64_t> oshape;
  for (auto& e : y->shape()) oshape.push_back(*ir::as_const_int(e));
  ConfigSpace space = topi::pool2d_x86_space(y);
  std::vector<Config> cfgs{topi::pool2d_x86_default(space)};
  uint64_t n = space.size();
  for (uint64_t i = 0; i < 5; ++i) cfgs.push_back(space.get(n == 1 ? 0 : i * (n - 1) / 4));
  for (const Config& cfg : cfgs) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    topi::schedule_pool2d_x86(s, y, cfg);
    NDArray out = zeros(oshape);
    build_host(s, {x, y})(xa, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }
}

/// The same case in NCHW[x]c with blocks of `b` channels (c % b == 0), every config of the
/// template, against the NCHW reference rearranged into blocks.
void check_pool_nchwc(const PoolCase& p, Kind kind, int b) {
  te::Tensor x = te::placeholder({p.n, p.c / b, p.h, p.w, b}, ir::kFloat32, "x");
  te::Tensor y = make_pool(x, p, kind);
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 7);
  std::vector<float> ref = naive_pool(p, kind, xa.data<float>());
  auto block = [&](const float* src, int h, int w) {
    std::vector<float> out;
    for (int n = 0; n < p.n; ++n)
      for (int cb = 0; cb < p.c / b; ++cb)
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x)
            for (int c = 0; c < b; ++c)
              out.push_back(src[((n * p.c + cb * b + c) * h + y) * w + x]);
    return out;
  };
  std::vector<int64_t> oshape;
  for (auto& e : y->shape()) oshape.push_back(*ir::as_const_int(e));
  ASSERT_EQ(oshape.size(), 5u);
  std::vector<float> xb = block(xa.data<float>(), p.h, p.w);
  NDArray xba = NDArray::from_vector(xb, {p.n, p.c / b, p.h, p.w, b});
  std::vector<float> refb =
      block(ref.data(), static_cast<int>(oshape[2]), static_cast<int>(oshape[3]));
  ConfigSpace space = topi::pool2d_x86_space(y);
  for (uint64_t i = 0; i < space.size(); ++i) {
    SCOPED_TRACE(space.get(i).str());
    te::Schedule s = te::create_schedule({y});
    topi::schedule_pool2d_x86(s, y, space.get(i));
    NDArray out = zeros(oshape);
    build_host(s, {x, y})(xba, out);
    EXPECT_TRUE(all_close(out, refb, 1e-4, 1e-5));
  }
}

TEST(TopiPooling, BlockedLayout) {
  check_pool_nchwc({1, 32, 15, 15, {3, 3}, {2, 2}, {1, 1, 1, 1}}, Kind::kMax, 16);
  check_pool_nchwc({2, 16, 12, 13, {3, 3}, {2, 2}, {1, 0, 1, 2}, true, true}, Kind::kAvg, 8);
  check_pool_nchwc({1, 24, 7, 7, {1, 1}, {1, 1}, {0, 0, 0, 0}}, Kind::kGlobalAvg, 8);
  check_pool_nchwc({1, 12, 5, 9, {1, 1}, {1, 1}, {0, 0, 0, 0}}, Kind::kGlobalMax, 4);
}

TEST(TopiPooling, MaxPool3x3Stride2Pad1) {
  check_pool({1, 8, 16, 16, {3, 3}, {2, 2}, {1, 1, 1, 1}}, Kind::kMax);
}

TEST(TopiPooling, MaxPoolCeilModeAsymmetricPadOdd) {
  check_pool({2, 3, 13, 11, {3, 2}, {2, 2}, {0, 1, 1, 0}, true}, Kind::kMax);
}

TEST(TopiPooling, MaxPool2x2Stride2) {
  check_pool({1, 4, 14, 14, {2, 2}, {2, 2}, {0, 0, 0, 0}}, Kind::kMax);
}

TEST(TopiPooling, AvgPoolExcludePad) {
  check_pool({1, 8, 15, 15, {3, 3}, {2, 2}, {1, 1, 1, 1}}, Kind::kAvg);
}

TEST(TopiPooling, AvgPoolIncludePadCeilMode) {
  check_pool({1, 4, 12, 13, {3, 3}, {2, 2}, {1, 0, 1, 2}, true, true}, Kind::kAvg);
}

TEST(TopiPooling, AvgPoolStride1) {
  check_pool({1, 5, 9, 10, {2, 3}, {1, 1}, {0, 1, 0, 1}, false, false}, Kind::kAvg);
}

TEST(TopiPooling, GlobalAvg) {
  check_pool({2, 16, 7, 7, {1, 1}, {1, 1}, {0, 0, 0, 0}}, Kind::kGlobalAvg);
}

TEST(TopiPooling, GlobalMaxOdd) {
  check_pool({1, 12, 5, 9, {1, 1}, {1, 1}, {0, 0, 0, 0}}, Kind::kGlobalMax);
}

TEST(TopiPooling, DefaultSchedulesVectorizeAndParallelize) {
  te::Tensor x = te::placeholder({1, 16, 32, 32}, ir::kFloat32, "x");
  for (te::Tensor y : {topi::max_pool2d(x, {3, 3}, {2, 2}, {1, 1, 1, 1}),
                       topi::avg_pool2d(x, {2, 2}, {2, 2}, {0, 0, 0, 0}),
                       topi::global_avg_pool2d(x), topi::global_max_pool2d(x)}) {
    te::Schedule s = te::create_schedule({y});
    topi::schedule_pool2d_x86(s, y, topi::pool2d_x86_default(topi::pool2d_x86_space(y)));
    std::string text = ir::to_string(compiler::lower(s, {x, y}, "f").body);
    EXPECT_NE(text.find("ramp("), std::string::npos) << y->name() << "\n" << text;
    EXPECT_NE(text.find("parallel"), std::string::npos) << y->name() << "\n" << text;
  }
}

}  // namespace
}  // namespace kiln
