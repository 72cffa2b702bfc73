// The int8 x86 kernels (topi/conv2d_int8.h, topi/dense_int8.h) against naive int32 loops, bit for
// bit: random uint8 data and int8 weights over their whole ranges; odd shapes (channels that do
// not fill a block, a prime width, one row), strides, dilation, asymmetric padding that reads a
// nonzero pad value (a data zero point); elementwise epilogues on the register tile; batched
// rows; random configs of the templates' spaces; and the same programs on a target without VNNI
// (the widening fallback). Where the host has VNNI, the kernels' assembly holds vpdpbusd. For
// AArch64 the templates' defaults (16 accumulator registers) compile to the NEON, udot and usdot
// lowerings (their results are checked under QEMU by tests/board/arm64_build_test). Operands of
// the wrong dtype or layout are refused, naming them.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/codegen/build.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/dense_int8.h"
#include "compiler/topi/elementwise.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using topi::Ints2;
using topi::Ints4;

constexpr const char* kHost = "llvm -mcpu=native";
constexpr const char* kNoVnni = "llvm -mcpu=native -mattr=-avx512vnni,-avxvnni";

bool host_has_vnni() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

template <typename T>
std::vector<T> random_ints(size_t n, int lo, int hi, std::mt19937* rng) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (T& e : v) e = static_cast<T>(d(*rng));
  return v;
}

std::vector<int64_t> shape_of(const te::Tensor& t) {
  std::vector<int64_t> s;
  for (const auto& e : t->shape()) s.push_back(*ir::as_const_int(e));
  return s;
}

struct ConvCase {
  int n, c, h, w, o, kh, kw;
  Ints2 stride;
  Ints4 pad;
  Ints2 dilation;
  int pad_value;
  int ic_block;
};

int out_dim(int in, int k, int s, int p0, int p1, int d) {
  return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

/// NCHW int32 sums; padding reads pad_value.
std::vector<int32_t> naive_conv(const ConvCase& p, const std::vector<uint8_t>& x,
                                const std::vector<int8_t>& wt) {
  const int oh = out_dim(p.h, p.kh, p.stride[0], p.pad[0], p.pad[2], p.dilation[0]);
  const int ow = out_dim(p.w, p.kw, p.stride[1], p.pad[1], p.pad[3], p.dilation[1]);
  std::vector<int32_t> out(size_t(p.n) * p.o * oh * ow);
  for (int n = 0; n < p.n; ++n)
    for (int f = 0; f < p.o; ++f)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx) {
          int32_t acc = 0;
          for (int c = 0; c < p.c; ++c)
            for (int ky = 0; ky < p.kh; ++ky)
              for (int kx = 0; kx < p.kw; ++kx) {
                const int iy = y * p.stride[0] + ky * p.dilation[0] - p.pad[0];
                const int ix = xx * p.stride[1] + kx * p.dilation[1] - p.pad[1];
                const bool inside = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
                const int32_t a =
                    inside ? x[((size_t(n) * p.c + c) * p.h + iy) * p.w + ix] : p.pad_value;
                acc += a * wt[((size_t(f) * p.c + c) * p.kh + ky) * p.kw + kx];
              }
          out[((size_t(n) * p.o + f) * oh + y) * ow + xx] = acc;
        }
  return out;
}

/// Builds the int8 convolution of `p` (data blocked and kernel packed as stages of the program)
/// for `target` at `cfg_index` of its space (-1: the default), with the epilogue
/// 3 * acc - 7 when `epilogue`, and compares it with the naive loops. Returns the assembly.
std::string check_conv(const ConvCase& p, uint32_t seed, const char* target, int64_t cfg_index = -1,
                       bool epilogue = false) {
  SCOPED_TRACE(std::string(target) + " seed " + std::to_string(seed) + " config " +
               std::to_string(cfg_index));
  std::mt19937 rng(seed);
  const std::vector<int64_t> xs{p.n, p.c, p.h, p.w}, ws{p.o, p.c, p.kh, p.kw};
  const auto x = random_ints<uint8_t>(size_t(testing::numel(xs)), 0, 255, &rng);
  const auto w = random_ints<int8_t>(size_t(testing::numel(ws)), -128, 127, &rng);
  const std::vector<int32_t> ref = naive_conv(p, x, w);

  te::Tensor xt = te::placeholder(testing::to_exprs(xs), ir::DataType::UInt(8), "x");
  te::Tensor wt = te::placeholder(testing::to_exprs(ws), ir::kInt8, "w");
  te::Tensor xb = topi::nchw_to_nchwc(xt, p.ic_block, "x_blocked");
  te::Tensor wp = topi::pack_conv2d_kernel_int8(wt, p.ic_block);
  te::Tensor acc = topi::conv2d_nchwc_int8(xb, wp, p.stride, p.pad, p.dilation, p.pad_value);
  te::Tensor out = epilogue ? topi::elementwise(
                                  acc, [](ir::Expr v) { return v * 3 - 7; }, "epilogue")
                            : acc;
  const target::Target t = target::Target::parse(target);
  space::ConfigSpace space = topi::conv2d_nchwc_int8_x86_space(acc);
  space::Config cfg = cfg_index < 0 ? topi::conv2d_nchwc_int8_x86_default(acc, space, t)
                                    : space.get(uint64_t(cfg_index) % space.size());
  te::Schedule s = te::create_schedule({out});
  topi::schedule_layout_transform_x86(s, xb);
  topi::schedule_conv2d_nchwc_int8_x86(s, acc, cfg, out);
  runtime::Function f = compiler::build(s, {xt, wt, out}, target, "f").function("f");
  const std::vector<int64_t> os = shape_of(out);
  NDArray xa = NDArray::from_vector(x, xs), wa = NDArray::from_vector(w, ws);
  NDArray ya = testing::zeros(os, runtime::kInt32);
  f(xa, wa, ya);
  // out is [N, O/16, OH, OW, 16]; channels past O must be (epilogue of) zero.
  const int64_t oh = os[2], ow = os[3];
  int64_t mismatches = 0;
  for (int64_t n = 0; n < os[0]; ++n)
    for (int64_t f = 0; f < os[1] * 16; ++f)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          const int32_t sum = f < p.o ? ref[((size_t(n) * p.o + f) * oh + y) * ow + xx] : 0;
          const int32_t want = epilogue ? sum * 3 - 7 : sum;
          const int32_t got =
              ya.data<int32_t>()[(((n * os[1] + f / 16) * oh + y) * ow + xx) * 16 + f % 16];
          if (got != want && mismatches++ < 5) {
            ADD_FAILURE() << "n " << n << " channel " << f << " y " << y << " x " << xx << ": got "
                          << got << ", want " << want;
          }
        }
  EXPECT_EQ(mismatches, 0);
  return codegen::emit_assembly({compiler::lower(s, {xt, wt, out}, "f")},
                                target::Target::parse(target));
}

TEST(TopiInt8Conv, ThreeByThreePadValueEpilogue) {
  const ConvCase p{1, 32, 9, 11, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 37, 16};
  const std::string as = check_conv(p, 1, kHost, -1, true);
  if (host_has_vnni()) {
    EXPECT_NE(as.find("vpdpbusd"), std::string::npos);
  }
  check_conv(p, 1, kNoVnni, -1, true);
}

TEST(TopiInt8Conv, OddChannelsStrideTwoAsymmetricPad) {
  // 5 channels in blocks of 8 (zeros past them), 20 outputs in two blocks of 16, a prime width.
  const ConvCase p{2, 5, 13, 11, 20, 3, 3, {2, 2}, {0, 1, 2, 1}, {1, 1}, 128, 8};
  check_conv(p, 2, kHost);
  check_conv(p, 2, kNoVnni);
}

TEST(TopiInt8Conv, DilationOneByOneAndSevenWide) {
  check_conv({1, 16, 12, 9, 16, 3, 3, {1, 2}, {2, 2, 2, 2}, {2, 2}, 255, 4}, 3, kHost);
  check_conv({1, 64, 7, 7, 48, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0, 16}, 4, kHost, -1, true);
  check_conv({1, 12, 1, 17, 16, 1, 3, {1, 1}, {0, 1, 0, 1}, {1, 1}, 9, 4}, 5, kHost);
}

TEST(TopiInt8Conv, RandomConfigsOfTheSpace) {
  const ConvCase p{1, 32, 10, 12, 32, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5, 8};
  for (int64_t i : {1, 17, 123, 457, 1001, 2999}) check_conv(p, 6, kHost, i, i % 2 == 1);
}

/// The default register tile (output channel blocks, rows, columns) of an int8 convolution over
/// `c` channels (blocks of 16) at h x h into `o`, a k x k window at `stride`, padding k / 2.
std::vector<int64_t> default_tile(int c, int h, int o, int k, int stride, const char* target) {
  te::Tensor x = te::placeholder({1, c / 16, h, h, 16}, ir::DataType::UInt(8), "x");
  te::Tensor w = te::placeholder({o / 16, c / 16, k, k, 4, 16, 4}, ir::kInt8, "w");
  const int p = k / 2;
  te::Tensor y = topi::conv2d_nchwc_int8(x, w, {stride, stride}, {p, p, p, p});
  const space::ConfigSpace space = topi::conv2d_nchwc_int8_x86_space(y);
  const space::Config cfg =
      topi::conv2d_nchwc_int8_x86_default(y, space, target::Target::parse(target));
  return {cfg.split("tile_ob").back(), cfg.split("tile_oh").back(), cfg.split("tile_ow").back()};
}

TEST(TopiInt8Conv, DefaultRegisterTiles) {
  using T = std::vector<int64_t>;
  const char* avx512 = "llvm -mcpu=znver4";
  // A 3x3 window over a map whose width 4 divides: 4 channel blocks by 4 columns (ResNet-18's C2
  // and C6), 8 vector loads per 16 vpdpbusd where 2 blocks by 8 columns take 10.
  EXPECT_EQ(default_tile(64, 56, 64, 3, 1, avx512), (T{4, 1, 4}));
  EXPECT_EQ(default_tile(128, 28, 128, 3, 1, avx512), (T{4, 1, 4}));
  // Strided, or a width 4 does not divide: 4 blocks by 2 x 2 outputs (C4, C7, C9).
  EXPECT_EQ(default_tile(64, 56, 128, 3, 2, avx512), (T{4, 2, 2}));
  EXPECT_EQ(default_tile(256, 14, 256, 3, 1, avx512), (T{4, 2, 2}));
  // An odd map (C12's 7 x 7): 2 blocks by a row of 7; a 1x1: 2 blocks by the widest row.
  EXPECT_EQ(default_tile(512, 7, 512, 3, 1, avx512), (T{2, 1, 7}));
  EXPECT_EQ(default_tile(64, 56, 64, 1, 1, avx512), (T{2, 1, 8}));
  // AVX2: a 16-channel block is two of its 16 registers; 4 blocks by 4 columns would take all.
  EXPECT_EQ(default_tile(64, 56, 64, 3, 1, "llvm -mcpu=haswell"), (T{2, 1, 2}));
}

TEST(TopiInt8Conv, DefaultFourBlocksByFourColumns) {
  // The 4 x 4 register tile's program, bit for bit: 64 outputs, a width of 12.
  check_conv({1, 32, 10, 12, 64, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 11, 16}, 7, kHost, -1, true);
}

struct DenseCase {
  int batch, m, k, n;  ///< batch 0: a 2-D x
};

/// x uint8 [(B,) M, K] times w int8 [K, N] (MatMulInteger's layout), packed in the program.
std::string check_dense(const DenseCase& p, uint32_t seed, const char* target,
                        int64_t cfg_index = -1, bool epilogue = false) {
  SCOPED_TRACE(std::string(target) + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const int rows = std::max(p.batch, 1) * p.m;
  std::vector<int64_t> xs{p.m, p.k};
  if (p.batch > 0) xs.insert(xs.begin(), p.batch);
  const auto x = random_ints<uint8_t>(size_t(rows) * p.k, 0, 255, &rng);
  const auto w = random_ints<int8_t>(size_t(p.k) * p.n, -128, 127, &rng);
  te::Tensor xt = te::placeholder(testing::to_exprs(xs), ir::DataType::UInt(8), "x");
  te::Tensor wt = te::placeholder({p.k, p.n}, ir::kInt8, "w");
  te::Tensor wp = topi::pack_dense_weight_int8(wt, false);
  te::Tensor acc = topi::dense_int8(xt, wp);
  te::Tensor out = epilogue
                       ? topi::elementwise(
                             acc, [](ir::Expr v) { return ir::cast(ir::kFloat32, v) * 0.5f; }, "dq")
                       : acc;
  const target::Target t = target::Target::parse(target);
  space::ConfigSpace space = topi::dense_int8_x86_space(acc);
  space::Config cfg = cfg_index < 0 ? topi::dense_int8_x86_default(acc, space, t)
                                    : space.get(uint64_t(cfg_index) % space.size());
  te::Schedule s = te::create_schedule({out});
  topi::schedule_dense_int8_x86(s, acc, cfg, out);
  runtime::Function f = compiler::build(s, {xt, wt, out}, target, "f").function("f");
  const std::vector<int64_t> os = shape_of(out);
  NDArray xa = NDArray::from_vector(x, xs), wa = NDArray::from_vector(w, {p.k, p.n});
  NDArray ya = testing::zeros(os, epilogue ? runtime::kFloat32 : runtime::kInt32);
  f(xa, wa, ya);
  const int64_t cols = os.back();
  int64_t mismatches = 0;
  for (int r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      int32_t sum = 0;
      for (int kk = 0; j < p.n && kk < p.k; ++kk) {
        sum += int32_t{x[size_t(r) * p.k + kk]} * int32_t{w[size_t(kk) * p.n + j]};
      }
      const double got = epilogue ? double(ya.data<float>()[r * cols + j])
                                  : double(ya.data<int32_t>()[r * cols + j]);
      const double want = epilogue ? sum * 0.5 : sum;
      if (got != want && mismatches++ < 5) {
        ADD_FAILURE() << "row " << r << " column " << j << ": got " << got << ", want " << want;
      }
    }
  EXPECT_EQ(mismatches, 0);
  return codegen::emit_assembly({compiler::lower(s, {xt, wt, out}, "f")},
                                target::Target::parse(target));
}

TEST(TopiInt8Dense, RowsTimesPackedWeight) {
  const std::string as = check_dense({0, 24, 64, 96}, 1, kHost, -1, true);
  if (host_has_vnni()) {
    EXPECT_NE(as.find("vpdpbusd"), std::string::npos);
  }
  check_dense({0, 24, 64, 96}, 1, kNoVnni);
}

TEST(TopiInt8Dense, OddShapesAndBatches) {
  check_dense({0, 7, 20, 40}, 2, kHost);  // N padded to 48
  check_dense({3, 10, 36, 32}, 3, kHost, -1, true);
  check_dense({2, 5, 12, 16}, 4, kNoVnni);
}

TEST(TopiInt8Dense, RandomConfigsOfTheSpace) {
  for (int64_t i : {1, 7, 33, 101}) check_dense({0, 12, 32, 48}, 5, kHost, i, i % 2 == 1);
}

/// How often `word` appears in `text`.
int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(TopiInt8AArch64, DefaultsCompileToTheNeonLowerings) {
  te::Tensor xt = te::placeholder({1, 64, 14, 14}, ir::DataType::UInt(8), "x");
  te::Tensor wt = te::placeholder({64, 64, 3, 3}, ir::kInt8, "w");
  te::Tensor xb = topi::nchw_to_nchwc(xt, 64, "x_blocked");
  te::Tensor conv = topi::conv2d_nchwc_int8(xb, topi::pack_conv2d_kernel_int8(wt, 64), {1, 1},
                                            {1, 1, 1, 1}, {1, 1}, 128);
  te::Tensor dt = te::placeholder({32, 256}, ir::DataType::UInt(8), "a");
  te::Tensor bt = te::placeholder({256, 64}, ir::kInt8, "b");
  te::Tensor dense = topi::dense_int8(dt, topi::pack_dense_weight_int8(bt, false));
  for (const char* cpu : {"cortex-a53", "cortex-a55", "cortex-a55 -mattr=+i8mm"}) {
    SCOPED_TRACE(cpu);
    const target::Target t =
        target::Target::parse(std::string("llvm -mtriple=aarch64-linux-gnu -mcpu=") + cpu);
    // Convolution: 16 NEON accumulators, 4 blocks of 16 channels' 4 registers each.
    space::ConfigSpace cs = topi::conv2d_nchwc_int8_x86_space(conv);
    space::Config cc = topi::conv2d_nchwc_int8_x86_default(conv, cs, t);
    EXPECT_EQ(
        cc.split("tile_ob").back() * cc.split("tile_oh").back() * cc.split("tile_ow").back() * 4,
        16);
    te::Schedule s = te::create_schedule({conv});
    topi::schedule_layout_transform_x86(s, xb);
    topi::schedule_conv2d_nchwc_int8_x86(s, conv, cc);
    const std::string conv_as =
        codegen::emit_assembly({compiler::lower(s, {xt, wt, conv}, "conv")}, t);
    // Dense: 4 rows of one 16-column block.
    space::ConfigSpace ds = topi::dense_int8_x86_space(dense);
    space::Config dc = topi::dense_int8_x86_default(dense, ds, t);
    EXPECT_EQ(dc.split("tile_y").back() * dc.split("tile_x").back() * 4, 16);
    te::Schedule sd = te::create_schedule({dense});
    topi::schedule_dense_int8_x86(sd, dense, dc);
    const std::string dense_as =
        codegen::emit_assembly({compiler::lower(sd, {dt, bt, dense}, "dense")}, t);
    for (const std::string* as : {&conv_as, &dense_as}) {
      if (t.mattr.find("i8mm") != std::string::npos) {
        EXPECT_GE(count(*as, "usdot\tv"), 16) << *as;
      } else if (t.cpu == "cortex-a55") {
        EXPECT_GE(count(*as, "udot\tv"), 16) << *as;
        EXPECT_EQ(count(*as, "usdot"), 0);
      } else {
        EXPECT_GE(count(*as, "saddlp\tv"), 32) << *as;
        EXPECT_EQ(count(*as, "dot\tv"), 0);
      }
    }
  }
}

TEST(TopiInt8Errors, OperandsOfTheWrongKindAreNamed) {
  const ir::DataType u8 = ir::DataType::UInt(8);
  te::Tensor x = te::placeholder({1, 2, 8, 8, 16}, u8, "x");
  te::Tensor w = te::placeholder({1, 2, 3, 3, 4, 16, 4}, ir::kInt8, "w");
  EXPECT_ERROR_CONTAINS(topi::conv2d_nchwc_int8(te::placeholder({1, 2, 8, 8, 16}, ir::kInt8, "xs"),
                                                w, {1, 1}, {1, 1, 1, 1}),
                        "data 'xs' must be 5-D uint8 [N, C/cb, H, W, cb], got 5-D int8");
  EXPECT_ERROR_CONTAINS(
      topi::conv2d_nchwc_int8(x, te::placeholder({1, 2, 3, 3, 2, 16, 4}, ir::kInt8, "w8"), {1, 1},
                              {1, 1, 1, 1}),
      "kernel 'w8' does not pack 2 blocks of 16 input channels of 'x' as [O/16, 2, KH, KW, 4, 16, "
      "4]");
  EXPECT_ERROR_CONTAINS(topi::conv2d_nchwc_int8(x, w, {1, 1}, {1, 1, 1, 1}, {1, 1}, 300),
                        "the pad value must be a uint8, got 300");
  EXPECT_ERROR_CONTAINS(
      topi::pack_conv2d_kernel_int8(te::placeholder({16, 3, 3, 3}, ir::kInt8, "k"), 6),
      "the input channel block must be a positive multiple of 4, got 6");
  EXPECT_ERROR_CONTAINS(
      topi::dense_int8(te::placeholder({4, 30}, u8, "rows"),
                       te::placeholder({2, 8, 16, 4}, ir::kInt8, "wp")),
      "dense_int8: 'rows' reduces over 30 but 'wp' packs 32 (K padded to a multiple of 4)");
  EXPECT_ERROR_CONTAINS(
      topi::pack_dense_weight_int8(te::placeholder({8, 8}, ir::kFloat32, "wf"), false),
      "'wf' must be a 2-D int8 weight, got 2-D float32");
}

}  // namespace
}  // namespace kiln
