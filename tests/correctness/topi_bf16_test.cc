// bf16 operands with float32 sums (compiler/ir/bf16.h): the pair intrinsics against their host
// definitions (exactly: the products are exact and the two additions round in the same order;
// vdpbf16ps flushes denormals, which these inputs avoid), vdpbf16ps in the assembly where the
// target has avx512bf16 and not where it does not, and the bf16 blocked convolution and packed
// dense layer against naive float32 loops.
//
// Tolerance of the kernels: each operand rounded to bf16 is off by at most 2^-9 relative, so a
// sum of K products of random sign is off by about 2^-8 * sqrt(K) of a product's size, a few
// thousandths of the output's typical size for K in the hundreds. The check: |got - ref| <=
// 1e-2 * max(|ref|, rms(ref)) (relative ~1e-2; an output near zero measured against the typical
// output, not itself), and the worst error is also required to be above 1e-5 of it, so that a
// kernel that silently computed in float32 would fail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "compiler/codegen/build.h"
#include "compiler/ir/bf16.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_bf16.h"
#include "compiler/topi/dense.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using testing::random_array;
using testing::zeros;

/// Native (vdpbf16ps where this CPU has it) and generic x86-64 (the plain float32 formula).
const char* const kTargets[] = {"llvm -mcpu=native", "llvm"};

runtime::Function build_for(const te::Schedule& s, const std::vector<te::Tensor>& args,
                            const std::string& target) {
  return compiler::build(s, args, target, "f").function("f");
}

TEST(Bf16, HostRoundingIsNearestEven) {
  EXPECT_EQ(ir::float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even (1).
  EXPECT_EQ(ir::float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even.
  EXPECT_EQ(ir::float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(ir::float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(ir::float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  const uint16_t nan = ir::float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(ir::bf16_to_float(nan)));
  EXPECT_EQ(ir::pack_bf16x2(1.0f, -2.0f), static_cast<int32_t>(0xc0003f80u));
  // (0 + 2 * 3) + 1 * 0.5
  EXPECT_EQ(ir::bf16x2_dot_acc(0.0f, ir::pack_bf16x2(1.0f, 2.0f), ir::pack_bf16x2(0.5f, 3.0f)),
            6.5f);
}

/// pack: float32 [n, 2] -> int32 [n], vectorized by `lanes` (1: scalar), against the host.
TEST(Bf16, PackMatchesHost) {
  const int64_t n = 64;
  NDArray xa = random_array({n, 2}, 7, -3.0f, 3.0f);
  float* xp = xa.data<float>();
  // Ties, an infinity, a NaN, rounding that carries into the exponent.
  xp[0] = 1.0f + 1.0f / 256;
  xp[1] = 1.0f + 3.0f / 256;
  xp[2] = std::numeric_limits<float>::infinity();
  xp[3] = std::numeric_limits<float>::quiet_NaN();
  xp[4] = 1.9999999f;
  te::Tensor x = te::placeholder({n, 2}, ir::kFloat32, "x");
  te::Tensor p = te::compute(
      {n}, [&](ir::Var i) { return ir::bf16x2_pack(x(i, 0), x(i, 1)); }, "p");
  for (const char* target : kTargets) {
    for (int lanes : {1, 4, 8, 16}) {
      SCOPED_TRACE(std::string(target) + " lanes " + std::to_string(lanes));
      te::Schedule s = te::create_schedule({p});
      if (lanes > 1) s[p].vectorize(s[p].split(s[p].axis(0), lanes).inner);
      NDArray out = zeros({n}, runtime::kInt32);
      build_for(s, {x, p}, target)(xa, out);
      for (int64_t i = 0; i < n; ++i) {
        const int32_t want = ir::pack_bf16x2(xp[2 * i], xp[2 * i + 1]);
        if (i == 1) {  // the NaN's lower half: any quiet NaN
          EXPECT_EQ(out.data<int32_t>()[i] & 0xffff0000, want & 0xffff0000);
          continue;
        }
        ASSERT_EQ(out.data<int32_t>()[i], want) << "element " << i;
      }
    }
  }
}

/// c[i, j] = sum_k bf16x2_dot(a[i, k], b[k, j]) with j vectorized by `lanes`: the reduction's
/// update is acc + bf16x2_dot, one vdpbf16ps on avx512bf16; exactly the host's sum in order.
TEST(Bf16, DotAccumulatesAsTheHost) {
  const int64_t m = 3, k = 37, n = 16;
  std::vector<int32_t> av(m * k), bv(k * n);
  NDArray af = random_array({m * k, 2}, 1, 0.25f, 2.0f), bf = random_array({k * n, 2}, 2, -2, 2);
  for (int64_t i = 0; i < m * k; ++i)
    av[i] = ir::pack_bf16x2(af.data<float>()[2 * i], af.data<float>()[2 * i + 1]);
  for (int64_t i = 0; i < k * n; ++i)
    bv[i] = ir::pack_bf16x2(bf.data<float>()[2 * i], bf.data<float>()[2 * i + 1]);
  NDArray aa = zeros({m, k}, runtime::kInt32), ba = zeros({k, n}, runtime::kInt32);
  std::memcpy(aa.data<int32_t>(), av.data(), av.size() * 4);
  std::memcpy(ba.data<int32_t>(), bv.data(), bv.size() * 4);
  std::vector<float> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t r = 0; r < k; ++r) acc = ir::bf16x2_dot_acc(acc, av[i * k + r], bv[r * n + j]);
      want[i * n + j] = acc;
    }
  te::Tensor a = te::placeholder({m, k}, ir::kInt32, "a");
  te::Tensor b = te::placeholder({k, n}, ir::kInt32, "b");
  ir::IterVar r = te::reduce_axis({0, k}, "r");
  te::Tensor c = te::compute(
      {m, n}, [&](ir::Var i, ir::Var j) { return te::sum(ir::bf16x2_dot(a(i, r), b(r, j)), {r}); },
      "c");
  for (const char* target : kTargets) {
    for (int lanes : {1, 4, 8, 16}) {
      SCOPED_TRACE(std::string(target) + " lanes " + std::to_string(lanes));
      te::Schedule s = te::create_schedule({c});
      te::Tensor cl = s.cache_write(c, "local");
      auto [jo, ji] = s[c].split(s[c].axis(1), lanes);
      s[cl].compute_at(s[c], jo);
      s[cl].reorder({s[cl].reduce_axis(0), s[cl].axis(0), s[cl].axis(1)});
      if (lanes > 1) {
        s[c].vectorize(ji);
        s[cl].vectorize(s[cl].axis(1));
      }
      NDArray out = zeros({m, n});
      build_for(s, {a, b, c}, target)(aa, ba, out);
      for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(out.data<float>()[i], want[i]) << i;
    }
  }
}

TEST(Bf16, Vdpbf16psOnlyWhereTheTargetHasIt) {
  te::Tensor a = te::placeholder({4, 8}, ir::kInt32, "a");
  te::Tensor b = te::placeholder({8, 16}, ir::kInt32, "b");
  ir::IterVar r = te::reduce_axis({0, 8}, "r");
  te::Tensor c = te::compute(
      {4, 16}, [&](ir::Var i, ir::Var j) { return te::sum(ir::bf16x2_dot(a(i, r), b(r, j)), {r}); },
      "c");
  te::Schedule s = te::create_schedule({c});
  te::Tensor cl = s.cache_write(c, "local");
  s[cl].compute_at(s[c], s[c].axis(0));
  s[cl].reorder({s[cl].reduce_axis(0), s[cl].axis(0), s[cl].axis(1)});
  s[cl].vectorize(s[cl].axis(1));
  s[c].vectorize(s[c].axis(1));
  auto assembly = [&](const char* t) {
    return codegen::emit_assembly({compiler::lower(s, {a, b, c}, "f")}, target::Target::parse(t));
  };
  EXPECT_NE(assembly("llvm -mcpu=sapphirerapids").find("vdpbf16ps"), std::string::npos);
  EXPECT_EQ(assembly("llvm -mcpu=skylake-avx512").find("vdpbf16ps"), std::string::npos);
  EXPECT_EQ(assembly("llvm -mcpu=sapphirerapids -mattr=-avx512bf16").find("vdpbf16ps"),
            std::string::npos);
}

TEST(Bf16, StrideTwoLoadsReadTheSpan) {
  // y[i] = x[2i] + x[2i+1] over 16 lanes: two stride-2 reads of x, each one read of the 31 floats
  // it spans (the last one is x's last element) and a shuffle, not a gather.
  te::Tensor x = te::placeholder({32}, ir::kFloat32, "x");
  te::Tensor y = te::compute(
      {16}, [&](ir::Var i) { return x(i * 2) + x(i * 2 + 1); }, "y");
  te::Schedule s = te::create_schedule({y});
  s[y].vectorize(s[y].axis(0));
  EXPECT_EQ(codegen::emit_assembly({compiler::lower(s, {x, y}, "f")},
                                   target::Target::parse("llvm -mcpu=skylake-avx512"))
                .find("gather"),
            std::string::npos);
  NDArray xa = random_array({32}, 9), out = zeros({16});
  for (const char* target : kTargets) {
    build_for(s, {x, y}, target)(xa, out);
    for (int i = 0; i < 16; ++i)
      ASSERT_EQ(out.data<float>()[i], xa.data<float>()[2 * i] + xa.data<float>()[2 * i + 1]) << i;
  }
}

TEST(Bf16, BlockedPairsConvertInOneVector) {
  // The convolution's padding stage reads a block's 16 floats as its 8 pairs: one vector read
  // and, on avx512bf16, one vcvtneps2bf16; never a gather of the even and odd channels.
  te::Tensor xb = te::placeholder({1, 2, 6, 6, 16}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({1, 2, 3, 3, 8, 16}, ir::kInt32, "wb");
  te::Tensor pairs = topi::conv2d_nchwc_bf16(xb, wb, {1, 1}, {1, 1, 1, 1})->inputs()[0];
  te::Schedule s = te::create_schedule({pairs});
  topi::schedule_layout_transform_x86(s, pairs);
  auto assembly = [&](const char* t) {
    return codegen::emit_assembly({compiler::lower(s, {xb, pairs}, "f")}, target::Target::parse(t));
  };
  const std::string with = assembly("llvm -mcpu=sapphirerapids");
  EXPECT_NE(with.find("vcvtneps2bf16"), std::string::npos);
  EXPECT_EQ(with.find("gather"), std::string::npos);
  const std::string without = assembly("llvm -mcpu=skylake-avx512");
  EXPECT_EQ(without.find("vcvtneps2bf16"), std::string::npos);
  EXPECT_EQ(without.find("gather"), std::string::npos);
}

/// |got - ref| <= 1e-2 * max(|ref|, rms(ref)) everywhere, and some error (bf16, not float32).
::testing::AssertionResult bf16_close(const NDArray& got, const std::vector<float>& ref) {
  double ss = 0;
  for (float v : ref) ss += double(v) * v;
  const double rms = std::sqrt(ss / double(ref.size()));
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = std::fabs(double(got.data<float>()[i]) - ref[i]);
    const double scale = std::max(std::fabs(double(ref[i])), rms);
    if (!(d <= 1e-2 * scale)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got.data<float>()[i]
                                           << ", expected " << ref[i] << " (rms " << rms << ")";
    }
    worst = std::max(worst, d / scale);
  }
  if (worst < 1e-5) {
    return ::testing::AssertionFailure()
           << "no bf16 rounding error at all (worst " << worst << "): not computed in bf16";
  }
  return ::testing::AssertionSuccess() << "worst relative error " << worst;
}

struct Case {
  int n, c, h, w, o, kh, kw;
  topi::Ints2 stride;
  topi::Ints4 pad;
  topi::Ints2 dilation;
};

std::vector<float> naive_conv(const Case& p, const float* x, const float* wt, int oh, int ow) {
  std::vector<float> out(size_t(p.n) * p.o * oh * ow);
  for (int n = 0; n < p.n; ++n)
    for (int f = 0; f < p.o; ++f)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx) {
          double acc = 0;
          for (int c = 0; c < p.c; ++c)
            for (int ky = 0; ky < p.kh; ++ky)
              for (int kx = 0; kx < p.kw; ++kx) {
                int iy = y * p.stride[0] + ky * p.dilation[0] - p.pad[0];
                int ix = xx * p.stride[1] + kx * p.dilation[1] - p.pad[1];
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc += double(x[((size_t(n) * p.c + c) * p.h + iy) * p.w + ix]) *
                       wt[((size_t(f) * p.c + c) * p.kh + ky) * p.kw + kx];
              }
          out[((size_t(n) * p.o + f) * oh + y) * ow + xx] = float(acc);
        }
  return out;
}

void check_conv(const Case& p, int ib, int ob, int64_t default_pad_at = 2) {
  te::Tensor x = te::placeholder({p.n, p.c, p.h, p.w}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({p.o, p.c, p.kh, p.kw}, ir::kFloat32, "w");
  te::Tensor xb = topi::nchw_to_nchwc(x, ib);
  te::Tensor wb = topi::pack_conv2d_kernel_bf16(w, ib, ob);
  te::Tensor y = topi::conv2d_nchwc_bf16(xb, wb, p.stride, p.pad, p.dilation);
  te::Tensor back = topi::nchwc_to_nchw(y);
  const int oh = static_cast<int>(*ir::as_const_int(y->shape()[2]));
  const int ow = static_cast<int>(*ir::as_const_int(y->shape()[3]));
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 3), wa = random_array({p.o, p.c, p.kh, p.kw}, 4);
  const std::vector<float> ref = naive_conv(p, xa.data<float>(), wa.data<float>(), oh, ow);
  space::ConfigSpace space = topi::conv2d_nchwc_x86_space(y);
  std::vector<space::Config> cfgs{
      topi::conv2d_nchwc_x86_default(y, space, target::Target::parse("llvm -mcpu=native"))};
  // Where the default converts the input to pairs: first (2), or per register tile (1).
  EXPECT_EQ(cfgs[0].knob("pad_at"), default_pad_at) << cfgs[0].str();
  const uint64_t size = space.size();
  for (uint64_t i = 0; i < 4; ++i) cfgs.push_back(space.get(i * (size - 1) / 3));
  for (const char* target : kTargets) {
    for (const space::Config& cfg : cfgs) {
      SCOPED_TRACE(std::string(target) + " " + cfg.str());
      te::Schedule s = te::create_schedule({back});
      topi::schedule_layout_transform_x86(s, xb);
      topi::schedule_layout_transform_x86(s, wb);
      topi::schedule_conv2d_nchwc_x86(s, y, cfg);
      topi::schedule_layout_transform_x86(s, back);
      NDArray out = zeros({p.n, p.o, oh, ow});
      build_for(s, {x, w, back}, target)(xa, wa, out);
      EXPECT_TRUE(bf16_close(out, ref));
    }
  }
}

TEST(Bf16Conv2dNchwc, Pad1Stride1) {
  check_conv({1, 32, 10, 9, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}}, 16, 16);
}

TEST(Bf16Conv2dNchwc, Pointwise1x1Stride2) {
  // The pairs stage holds every other pixel only; two output channel blocks read it, so the
  // default converts it per register tile.
  check_conv({2, 64, 8, 8, 32, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}}, 16, 16, 1);
  check_conv({1, 32, 9, 19, 256, 1, 1, {2, 3}, {0, 0, 0, 0}, {1, 1}}, 16, 16, 2);  // 8 tiles
}

TEST(Bf16Conv2dNchwc, Pointwise1x1PairsPerRegisterTile) {
  // Two output channel blocks read the input: converted per register tile by default.
  check_conv({1, 64, 7, 9, 32, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}}, 16, 16, 1);
}

TEST(Bf16Conv2dNchwc, AsymmetricPadDilatedSmallBlocks) {
  check_conv({1, 16, 11, 13, 16, 3, 3, {1, 2}, {2, 1, 0, 2}, {2, 1}}, 8, 8);
}

TEST(Bf16DensePacked, OddReductionPartialPanel) {
  const int64_t m = 5, k = 301, n = 40, bn = 16;
  te::Tensor x = te::placeholder({m, k}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({n, k}, ir::kFloat32, "w");
  te::Tensor wp = topi::pack_dense_weight_bf16(w, bn);
  te::Tensor y = topi::dense_packed_bf16(x, wp, n);
  NDArray xa = random_array({m, k}, 5), wa = random_array({n, k}, 6);
  std::vector<float> ref(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t r = 0; r < k; ++r)
        acc += double(xa.data<float>()[i * k + r]) * wa.data<float>()[j * k + r];
      ref[i * n + j] = float(acc);
    }
  space::ConfigSpace space = topi::dense_x86_space(y);
  std::vector<space::Config> cfgs{topi::dense_x86_default(space)};
  for (uint64_t i = 0; i < 3; ++i) cfgs.push_back(space.get(i * (space.size() - 1) / 2));
  for (const char* target : kTargets) {
    for (const space::Config& cfg : cfgs) {
      SCOPED_TRACE(std::string(target) + " " + cfg.str());
      te::Schedule s = te::create_schedule({y});
      topi::schedule_layout_transform_x86(s, wp);
      topi::schedule_dense_x86(s, y, cfg);
      NDArray out = zeros({m, n});
      build_for(s, {x, w, y}, target)(xa, wa, out);
      EXPECT_TRUE(bf16_close(out, ref));
    }
  }
}

}  // namespace
}  // namespace kiln
