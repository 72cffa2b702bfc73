// The conv2d operators of the operator library (NCHW, grouped, depthwise, NCHW[x]c and the layout
// conversions), each built with its x86 template at the default config and at evenly spaced
// points of its config space, run, and compared with a naive loop nest in C++.
// Tolerance: 1e-4 relative + 1e-5 absolute (fp32 sums in a different order than the reference).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/template_util.h"
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
using topi::Ints2;
using topi::Ints4;

struct ConvCase {
  int n, c, h, w, o, kh, kw;
  Ints2 stride;
  Ints4 pad;
  Ints2 dilation;
  int groups;
};

int out_dim(int in, int k, int s, int p0, int p1, int d) {
  return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

std::vector<float> naive_conv(const ConvCase& p, const float* x, const float* wt) {
  int oh = out_dim(p.h, p.kh, p.stride[0], p.pad[0], p.pad[2], p.dilation[0]);
  int ow = out_dim(p.w, p.kw, p.stride[1], p.pad[1], p.pad[3], p.dilation[1]);
  int cg = p.c / p.groups, og = p.o / p.groups;
  std::vector<float> out(size_t(p.n) * p.o * oh * ow);
  for (int n = 0; n < p.n; ++n)
    for (int f = 0; f < p.o; ++f)
      for (int y = 0; y < oh; ++y)
        for (int xx = 0; xx < ow; ++xx) {
          double acc = 0;
          int g = f / og;
          for (int c = 0; c < cg; ++c)
            for (int ky = 0; ky < p.kh; ++ky)
              for (int kx = 0; kx < p.kw; ++kx) {
                int iy = y * p.stride[0] + ky * p.dilation[0] - p.pad[0];
                int ix = xx * p.stride[1] + kx * p.dilation[1] - p.pad[1];
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc += double(x[((size_t(n) * p.c + g * cg + c) * p.h + iy) * p.w + ix]) *
                       wt[((size_t(f) * cg + c) * p.kh + ky) * p.kw + kx];
              }
          out[((size_t(n) * p.o + f) * oh + y) * ow + xx] = float(acc);
        }
  return out;
}

/// The default config and 5 evenly spaced points of the space.
std::vector<Config> configs_to_test(const ConfigSpace& space, const Config& def) {
  std::vector<Config> cfgs{def};
  uint64_t n = space.size();
  for (uint64_t i = 0; i < 5; ++i) cfgs.push_back(space.get(n == 1 ? 0 : i * (n - 1) / 4));
  return cfgs;
}

/// `base` with each tile_ow candidate that does not divide the output width `width`: tiles whose
/// partial last one pass::partition_loops peels off.
std::vector<Config> partial_tile_configs(const ConfigSpace& space, const Config& base,
                                         int64_t width) {
  std::vector<Config> cfgs;
  for (size_t k = 0; k < space.knobs().size(); ++k) {
    if (space.knobs()[k].name != "tile_ow") continue;
    for (size_t c = 0; c < space.knobs()[k].candidates.size(); ++c) {
      const auto& f = space.knobs()[k].candidates[c];
      if (f[0] * f[1] == width) continue;
      std::vector<int> pos = base.positions();
      pos[k] = static_cast<int>(c);
      cfgs.push_back(space.from_positions(pos));
    }
  }
  return cfgs;
}

/// The position of knob `name` in `space`.
size_t knob_position_of(const ConfigSpace& space, const std::string& name) {
  for (size_t k = 0; k < space.knobs().size(); ++k) {
    if (space.knobs()[k].name == name) return k;
  }
  ADD_FAILURE() << "no knob " << name;
  return 0;
}

/// `base` with knob `k` at candidate `c`.
Config with_knob(const ConfigSpace& space, const Config& base, size_t k, int c) {
  std::vector<int> pos = base.positions();
  pos[k] = c;
  return space.from_positions(pos);
}

/// The candidate of split knob `k` with the most parts outside (the finest chunks).
int first_chunked(const ConfigSpace& space, size_t k) {
  const auto& cands = space.knobs()[k].candidates;
  int best = 0;
  for (size_t c = 0; c < cands.size(); ++c) {
    if (cands[c][0] > cands[best][0]) best = static_cast<int>(c);
  }
  return best;
}

enum class Template { kNchw, kDepthwise };

void check_conv2d_nchw(const ConvCase& p, Template tmpl) {
  te::Tensor x = te::placeholder({p.n, p.c, p.h, p.w}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({p.o, p.c / p.groups, p.kh, p.kw}, ir::kFloat32, "w");
  te::Tensor y = topi::conv2d_nchw(x, w, p.stride, p.pad, p.dilation, p.groups);
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 1),
          wa = random_array({p.o, p.c / p.groups, p.kh, p.kw}, 2);
  std::vector<float> ref = naive_conv(p, xa.data<float>(), wa.data<float>());
  std::vector<int64_t> oshape;
  for (auto& e : y->shape()) oshape.push_back(*ir::as_const_int(e));
  ConfigSpace space = tmpl == Template::kNchw ? topi::conv2d_nchw_x86_space(y)
                                              : topi::depthwise_conv2d_nchw_x86_space(y);
  Config def = tmpl == Template::kNchw ? topi::conv2d_nchw_x86_default(space)
                                       : topi::depthwise_conv2d_nchw_x86_default(space);
  for (const Config& cfg : configs_to_test(space, def)) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    if (tmpl == Template::kNchw) {
      topi::schedule_conv2d_nchw_x86(s, y, cfg);
    } else {
      topi::schedule_depthwise_conv2d_nchw_x86(s, y, cfg);
    }
    auto f = build_host(s, {x, w, y});
    NDArray out = zeros(oshape);
    f(xa, wa, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }
}

TEST(TopiConv2d, Stride1Pad1) {
  check_conv2d_nchw({1, 8, 14, 14, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, Template::kNchw);
}

TEST(TopiConv2d, Stride2AsymmetricPadOddSize) {
  check_conv2d_nchw({1, 4, 15, 13, 8, 3, 3, {2, 2}, {0, 1, 2, 1}, {1, 1}, 1}, Template::kNchw);
}

TEST(TopiConv2d, Dilation2Batch2) {
  check_conv2d_nchw({2, 3, 11, 12, 6, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1}, Template::kNchw);
}

TEST(TopiConv2d, OneByOneNoPad) {
  check_conv2d_nchw({1, 8, 7, 7, 12, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, Template::kNchw);
}

TEST(TopiConv2d, TwoGroups) {
  check_conv2d_nchw({1, 8, 9, 10, 6, 3, 3, {1, 2}, {1, 1, 1, 1}, {1, 1}, 2}, Template::kNchw);
}

TEST(TopiConv2d, DepthwiseWithGenericTemplate) {
  check_conv2d_nchw({1, 8, 10, 10, 8, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8}, Template::kNchw);
}

TEST(TopiConv2d, DepthwiseStride1) {
  check_conv2d_nchw({1, 16, 14, 14, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16},
                    Template::kDepthwise);
}

TEST(TopiConv2d, DepthwiseStride2AsymmetricPad) {
  check_conv2d_nchw({1, 8, 13, 15, 8, 3, 3, {2, 2}, {0, 0, 1, 1}, {1, 1}, 8}, Template::kDepthwise);
}

TEST(TopiConv2d, DepthwiseMultiplier2Dilation2) {
  check_conv2d_nchw({1, 4, 12, 12, 8, 3, 3, {1, 1}, {2, 2, 2, 2}, {2, 2}, 4}, Template::kDepthwise);
}

/// conv2d_nchwc, or group_conv2d_nchwc when p.groups > 1 (ic and oc dividing the channels of a
/// group), against the naive loop nest.
void check_conv2d_nchwc(const ConvCase& p, int ic, int oc) {
  const int cg = p.c / p.groups;  // the kernel's input channels
  const bool grouped = p.groups != 1;
  te::Tensor x = te::placeholder({p.n, p.c, p.h, p.w}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({p.o, cg, p.kh, p.kw}, ir::kFloat32, "w");
  te::Tensor xb = te::placeholder({p.n, p.c / ic, p.h, p.w, ic}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({p.o / oc, cg / ic, p.kh, p.kw, ic, oc}, ir::kFloat32, "wb");
  te::Tensor y = grouped ? topi::group_conv2d_nchwc(xb, wb, p.stride, p.pad, p.dilation, p.groups)
                         : topi::conv2d_nchwc(xb, wb, p.stride, p.pad, p.dilation);
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 3), wa = random_array({p.o, cg, p.kh, p.kw}, 4);
  std::vector<float> ref = naive_conv(p, xa.data<float>(), wa.data<float>());
  std::vector<int64_t> oshape;
  for (auto& e : y->shape()) oshape.push_back(*ir::as_const_int(e));

  // Layout conversions and kernel packing, each with its own schedule.
  auto convert = [&](const te::Tensor& in, const te::Tensor& out, NDArray& src,
                     std::vector<int64_t> shape) {
    te::Schedule s = te::create_schedule({out});
    topi::schedule_layout_transform_x86(s, out);
    NDArray dst = zeros(shape);
    build_host(s, {in, out})(src, dst);
    return dst;
  };
  NDArray xba = convert(x, topi::nchw_to_nchwc(x, ic), xa, {p.n, p.c / ic, p.h, p.w, ic});
  NDArray wba =
      convert(w, topi::pack_conv2d_kernel(w, ic, oc), wa, {p.o / oc, cg / ic, p.kh, p.kw, ic, oc});
  te::Tensor yb = te::placeholder(y->shape(), ir::kFloat32, "yb");
  te::Tensor back = topi::nchwc_to_nchw(yb);
  std::vector<int64_t> nshape;
  for (auto& e : back->shape()) nshape.push_back(*ir::as_const_int(e));

  ConfigSpace space =
      grouped ? topi::group_conv2d_nchwc_x86_space(y) : topi::conv2d_nchwc_x86_space(y);
  auto default_for = [&](const char* cpu) {
    const target::Target t = target::Target::parse(std::string("llvm -mcpu=") + cpu);
    return grouped ? topi::group_conv2d_nchwc_x86_default(y, space, t)
                   : topi::conv2d_nchwc_x86_default(y, space, t);
  };
  std::vector<Config> cfgs = configs_to_test(space, default_for("skylake-avx512"));
  cfgs.push_back(default_for("haswell"));  // the AVX2 default tile
  // The reduction over input channel blocks in chunks: every chunking with the default tile,
  // and the finest with partial column tiles, the other reduction order and padding per task.
  const size_t ic_knob = knob_position_of(space, "tile_ic");
  const int chunk_count = static_cast<int>(space.knobs()[ic_knob].candidates.size());
  for (int c = 0; c < chunk_count; ++c) cfgs.push_back(with_knob(space, cfgs[0], ic_knob, c));
  const Config finest = with_knob(space, cfgs[0], ic_knob, first_chunked(space, ic_knob));
  cfgs.push_back(with_knob(space, finest, knob_position_of(space, "reduce_order"), 1));
  cfgs.push_back(with_knob(space, finest, knob_position_of(space, "pad_at"), 1));
  cfgs.push_back(with_knob(space, finest, knob_position_of(space, "pad_at"), 2));
  for (const Config& c : partial_tile_configs(space, finest, nshape[3])) cfgs.push_back(c);
  Config largest;
  // Inlined padding with the largest register tiles, in both reduction orders, the kernel's
  // columns unrolled or not: the tile's border rows and columns have guards of their own, which
  // unswitch_guards turns into copies of the innermost loop that leave the padded taps out.
  for (int order = 0; order < 2; ++order) {
    for (int unroll = 0; unroll < 2; ++unroll) {
      std::vector<int> pos(space.knobs().size(), 0);
      for (size_t k = 0; k < space.knobs().size(); ++k) {
        const auto& knob = space.knobs()[k];
        if (knob.name == "reduce_order") pos[k] = order;
        if (knob.name == "unroll_kw") pos[k] = unroll;
        if (knob.name == "pad_at") pos[k] = 2;  // the space lists {2, 1, 0}: inlined last
        if (knob.name.rfind("tile_", 0) == 0) pos[k] = static_cast<int>(knob.candidates.size()) - 1;
      }
      cfgs.push_back(space.from_positions(pos));
      if (order == 0 && unroll == 0) largest = cfgs.back();
    }
  }
  for (const Config& c : partial_tile_configs(space, cfgs[0], nshape[3])) cfgs.push_back(c);
  // Every column chunk with the default tile (the chunks that do not divide the column tiles
  // leave a partial last one), and the finest with the reduction chunked too.
  const size_t col_knob = knob_position_of(space, "col_chunk");
  for (int c = 1; c < static_cast<int>(space.knobs()[col_knob].candidates.size()); ++c) {
    cfgs.push_back(with_knob(space, cfgs[0], col_knob, c));
  }
  cfgs.push_back(with_knob(space, finest, col_knob, 1));
  // Rows per task (task_rows): each choice with the default tile, whole reduction or chunked;
  // every row (0) with the largest tiles (several rows a tile) and with column chunks too.
  const size_t rows_knob = knob_position_of(space, "task_rows");
  for (int r = 1; r < static_cast<int>(space.knobs()[rows_knob].candidates.size()); ++r) {
    cfgs.push_back(with_knob(space, cfgs[0], rows_knob, r));
    cfgs.push_back(with_knob(space, finest, rows_knob, r));
  }
  const int all_rows = topi::knob_position(space, "task_rows", 0);
  cfgs.push_back(with_knob(space, with_knob(space, largest, ic_knob, first_chunked(space, ic_knob)),
                           rows_knob, all_rows));
  cfgs.push_back(with_knob(space, with_knob(space, finest, col_knob, 1), rows_knob, all_rows));
  // Prefetches of the next reduction step (pass::inject_prefetch): whole, chunked, by rows.
  const size_t prefetch_knob = knob_position_of(space, "prefetch");
  for (const Config& c : {cfgs[0], finest, with_knob(space, finest, rows_knob, all_rows)}) {
    cfgs.push_back(with_knob(space, c, prefetch_knob, 1));
  }
  // Prefetches of the next column tile's input: whole reduction, chunked, by rows.
  const size_t input_knob = knob_position_of(space, "prefetch_input");
  for (const Config& c : {cfgs[0], finest, with_knob(space, finest, rows_knob, all_rows)}) {
    cfgs.push_back(with_knob(space, c, input_knob, 1));
  }
  for (const Config& cfg : cfgs) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    if (grouped) {
      topi::schedule_group_conv2d_nchwc_x86(s, y, cfg);
    } else {
      topi::schedule_conv2d_nchwc_x86(s, y, cfg);
    }
    NDArray out = zeros(oshape);
    build_host(s, {xb, wb, y})(xba, wba, out);
    NDArray outn = convert(yb, back, out, nshape);
    EXPECT_TRUE(all_close(outn, ref, 1e-4, 1e-5));
  }
}

TEST(TopiConv2dNchwc, Stride1Pad1) {
  check_conv2d_nchwc({1, 8, 14, 14, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 4, 8);
}

TEST(TopiConv2dNchwc, Stride2AsymmetricPadDilation) {
  check_conv2d_nchwc({1, 8, 13, 11, 8, 3, 3, {2, 2}, {1, 0, 2, 1}, {2, 1}, 1}, 8, 8);
}

TEST(TopiConv2dNchwc, ManyInputBlocksPartialColumnTiles) {
  // 8 input channel blocks to chunk, a 10-wide output (tiles of 4 leave a partial one).
  check_conv2d_nchwc({1, 32, 9, 10, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, 4, 8);
  check_conv2d_nchwc({1, 32, 6, 10, 8, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, 4, 8);
}

TEST(TopiConv2dNchwc, TallKernelOverLongRows) {
  // A (KD, 1) convolution over a video's frames as rows of H*W pixels (rewrite_conv3d): rows
  // padded only, 36 columns in tiles of 4 (9 tiles: chunks of 4 and 8 leave a partial one).
  check_conv2d_nchwc({1, 16, 9, 36, 16, 3, 1, {2, 1}, {1, 0, 1, 0}, {2, 1}, 1}, 8, 8);
}

TEST(TopiConv2dNchwc, OneByOne) {
  check_conv2d_nchwc({2, 4, 7, 7, 16, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}, 2, 16);
}

// Grouped NCHW[x]c: groups 2, 4, 8 and 32, strides 1 and 2, 1x1 and 3x3, blocks that are a
// group's channels, a part of them, or a part of them the output's block does not match.
TEST(TopiConv2dNchwc, GroupedTwoGroupsBlocksInsideAGroup) {
  // 16 channels a group in blocks of 8 (input) and 4 (output): two blocks of a group per tile.
  check_conv2d_nchwc({1, 32, 10, 10, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2}, 8, 4);
}

TEST(TopiConv2dNchwc, GroupedFourGroupsStride2) {
  check_conv2d_nchwc({1, 32, 11, 9, 32, 3, 3, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4}, 8, 8);
}

TEST(TopiConv2dNchwc, GroupedEightGroupsOneByOne) {
  // 24 input channels a group: a block of 8 divides them, one of 16 would not.
  check_conv2d_nchwc({2, 192, 5, 7, 64, 1, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, 8}, 8, 8);
}

TEST(TopiConv2dNchwc, GroupedEightGroupsOneByOneStride2) {
  check_conv2d_nchwc({1, 64, 9, 9, 128, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, 8}, 8, 16);
}

TEST(TopiConv2dNchwc, GroupedThirtyTwoGroups) {
  // ResNeXt's 32 groups of 4 channels: blocks of the whole group.
  check_conv2d_nchwc({1, 128, 8, 8, 128, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32}, 4, 4);
}

TEST(TopiConv2dNchwc, GroupedThirtyTwoGroupsStride2Dilation) {
  check_conv2d_nchwc({1, 256, 9, 10, 256, 3, 3, {2, 2}, {2, 1, 2, 0}, {2, 1}, 32}, 8, 8);
}

void check_depthwise_nchwc(const ConvCase& p, int cb) {
  te::Tensor x = te::placeholder({p.n, p.c, p.h, p.w}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({p.c, 1, p.kh, p.kw}, ir::kFloat32, "w");
  te::Tensor xb = te::placeholder({p.n, p.c / cb, p.h, p.w, cb}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({p.c / cb, 1, p.kh, p.kw, 1, cb}, ir::kFloat32, "wb");
  te::Tensor y = topi::depthwise_conv2d_nchwc(xb, wb, p.stride, p.pad, p.dilation);
  NDArray xa = random_array({p.n, p.c, p.h, p.w}, 5), wa = random_array({p.c, 1, p.kh, p.kw}, 6);
  std::vector<float> ref = naive_conv(p, xa.data<float>(), wa.data<float>());
  auto convert = [&](const te::Tensor& in, const te::Tensor& out, NDArray& src) {
    te::Schedule s = te::create_schedule({out});
    topi::schedule_layout_transform_x86(s, out);
    std::vector<int64_t> shape;
    for (auto& e : out->shape()) shape.push_back(*ir::as_const_int(e));
    NDArray dst = zeros(shape);
    build_host(s, {in, out})(src, dst);
    return dst;
  };
  NDArray xba = convert(x, topi::nchw_to_nchwc(x, cb), xa);
  NDArray wba = convert(w, topi::pack_conv2d_kernel(w, 1, cb), wa);
  te::Tensor yb = te::placeholder(y->shape(), ir::kFloat32, "yb");
  te::Tensor back = topi::nchwc_to_nchw(yb);
  std::vector<int64_t> oshape;
  for (auto& e : y->shape()) oshape.push_back(*ir::as_const_int(e));
  ConfigSpace space = topi::depthwise_conv2d_nchwc_x86_space(y);
  std::vector<Config> cfgs =
      configs_to_test(space, topi::depthwise_conv2d_nchwc_x86_default(y, space, 256));
  for (const Config& c : partial_tile_configs(space, cfgs[0], oshape[3])) cfgs.push_back(c);
  for (const Config& cfg : cfgs) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    topi::schedule_depthwise_conv2d_nchwc_x86(s, y, cfg);
    NDArray out = zeros(oshape);
    build_host(s, {xb, wb, y})(xba, wba, out);
    EXPECT_TRUE(all_close(convert(yb, back, out), ref, 1e-4, 1e-5));
  }
}

TEST(TopiConv2dNchwc, DepthwiseStride1) {
  check_depthwise_nchwc({1, 16, 10, 12, 16, 3, 3, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16}, 8);
}

TEST(TopiConv2dNchwc, DepthwiseStride2AsymmetricPadDilation) {
  check_depthwise_nchwc({2, 8, 13, 11, 8, 3, 3, {2, 2}, {0, 1, 2, 1}, {2, 1}, 8}, 4);
}

/// The lowered IR of the default config of `y` with schedule `sched`.
std::string final_ir(const te::Schedule& s, const std::vector<te::Tensor>& args) {
  return ir::to_string(compiler::lower(s, args, "f").body);
}

// The space lists the padding placement the default takes first: in full before a stride-1
// convolution, inlined into a strided one.
TEST(TopiConv2dVector, PadPlacementFollowsStride) {
  te::Tensor x = te::placeholder({1, 8, 14, 14}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({16, 8, 3, 3}, ir::kFloat32, "w");
  te::Tensor y1 = topi::conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1});
  te::Tensor y2 = topi::conv2d_nchw(x, w, {2, 2}, {1, 1, 1, 1});
  EXPECT_EQ(topi::conv2d_nchw_x86_default(topi::conv2d_nchw_x86_space(y1)).knob("pad_at"), 2);
  EXPECT_EQ(topi::conv2d_nchw_x86_default(topi::conv2d_nchw_x86_space(y2)).knob("pad_at"), 0);
}

/// An x86 target of `vector_bits` (512: AVX-512, 256: AVX2) with Zen 5's caches, or Zen 3's.
target::Target cpu(int vector_bits) {
  target::Target t =
      target::Target::parse(vector_bits >= 512 ? "llvm -mcpu=znver5" : "llvm -mcpu=znver3");
  t.l1d_bytes = vector_bits >= 512 ? 48 << 10 : 32 << 10;
  t.l2_bytes = vector_bits >= 512 ? 1 << 20 : 512 << 10;
  return t;
}

/// conv2d_nchwc_x86's default on cpu(vector_bits) for a (k x k, ic -> oc) convolution at `size` x
/// `size`, padded by k / 2, in input blocks of `ib` and output blocks of `ob` channels.
Config blocked_default(int64_t size, int64_t ic, int64_t oc, int64_t k, int stride, int vector_bits,
                       int64_t ib = 16, int64_t ob = 16) {
  te::Tensor xb = te::placeholder({1, ic / ib, size, size, ib}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({oc / ob, ic / ib, k, k, ib, ob}, ir::kFloat32, "wb");
  const int p = static_cast<int>(k / 2);
  te::Tensor yb = topi::conv2d_nchwc(xb, wb, {stride, stride}, {p, p, p, p});
  return topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(vector_bits));
}

// The default register tile holds about 8 vectors: a 16-channel block is one AVX-512 vector and
// two AVX2 ones, so AVX2 takes half the columns; a 7-wide output takes tiles of 4 and 3 columns.
TEST(TopiConv2dVector, DefaultRegisterTileFitsTheVectorRegisters) {
  auto tile = [](int64_t width, int vector_bits, int64_t out_blocks = 8) {
    te::Tensor xb = te::placeholder({1, 4, width, width, 16}, ir::kFloat32, "xb");
    te::Tensor wb = te::placeholder({out_blocks, 4, 3, 3, 16, 16}, ir::kFloat32, "wb");
    te::Tensor yb = topi::conv2d_nchwc(xb, wb, {1, 1}, {1, 1, 1, 1});
    const Config c =
        topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(vector_bits));
    return std::to_string(c.split("tile_ow").back()) + "x" +
           std::to_string(c.split("tile_oh").back()) + "x" +
           std::to_string(c.split("tile_ob").back());
  };
  // AVX-512: about 16 of its 32 registers, two channel blocks by 7-8 columns.
  EXPECT_EQ(tile(56, 512), "8x1x2");
  EXPECT_EQ(tile(14, 512), "7x1x2");
  EXPECT_EQ(tile(7, 512), "7x1x2");
  EXPECT_EQ(tile(14, 512, 13), "14x1x1");  // 13 blocks do not pair: the columns take the budget
  // AVX2: about 8 of its 16 registers, a 16-channel block two vectors.
  EXPECT_EQ(tile(56, 256), "4x1x1");
  EXPECT_EQ(tile(14, 256), "2x1x2");
  EXPECT_EQ(tile(7, 256), "4x1x1");  // a partial tile: 4 + 3 columns
  // Depthwise: the columns alone (no channel reuse to pair for), then blocks.
  auto depthwise_tile = [](int64_t width, int vector_bits) {
    te::Tensor xb = te::placeholder({1, 8, width, width, 16}, ir::kFloat32, "xb");
    te::Tensor wb = te::placeholder({8, 1, 3, 3, 1, 16}, ir::kFloat32, "wb");
    te::Tensor yb = topi::depthwise_conv2d_nchwc(xb, wb, {1, 1}, {1, 1, 1, 1});
    const Config c = topi::depthwise_conv2d_nchwc_x86_default(
        yb, topi::depthwise_conv2d_nchwc_x86_space(yb), vector_bits);
    return std::to_string(c.split("tile_ow").back()) + "x" +
           std::to_string(c.split("tile_ob").back());
  };
  EXPECT_EQ(depthwise_tile(14, 512), "14x1");
  EXPECT_EQ(depthwise_tile(7, 512), "7x2");
  EXPECT_EQ(depthwise_tile(14, 256), "2x2");  // 4 AVX2 vectors of two a block
}

// An image's stem: 3 input channels a block. Its padding is inlined (a pass first copied 3 floats
// a pixel in scalar code: ShuffleNet's stem took twice as long), and its 8-channel output blocks
// (24 channels, half an AVX-512 vector each) all go in one tile, so that each broadcast input
// element feeds the three of them; 16-channel blocks still pair.
TEST(TopiConv2dVector, DefaultForAnImageStem) {
  auto config = [](int64_t out_block, int64_t out_blocks, int k) {
    te::Tensor xb = te::placeholder({1, 1, 224, 224, 3}, ir::kFloat32, "xb");
    te::Tensor wb = te::placeholder({out_blocks, 1, k, k, 3, out_block}, ir::kFloat32, "wb");
    te::Tensor yb = topi::conv2d_nchwc(xb, wb, {2, 2}, {k / 2, k / 2, k / 2, k / 2});
    const Config c = topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(512));
    return std::to_string(c.split("tile_ow").back()) + "x" +
           std::to_string(c.split("tile_oh").back()) + "x" +
           std::to_string(c.split("tile_ob").back()) + " pad_at " +
           std::to_string(c.knob("pad_at"));
  };
  EXPECT_EQ(config(8, 3, 3), "4x1x3 pad_at 0");   // ShuffleNet V2: 3 -> 24
  EXPECT_EQ(config(16, 2, 3), "8x1x2 pad_at 0");  // MobileNetV2, EfficientNet, RegNet: 3 -> 32
  EXPECT_EQ(config(16, 4, 7), "8x1x2 pad_at 0");  // ResNet: 3 -> 64, 7x7
  // Blocks of 16 input channels keep the padding pass first.
  te::Tensor xb = te::placeholder({1, 4, 56, 56, 16}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({4, 4, 3, 3, 16, 16}, ir::kFloat32, "wb");
  te::Tensor yb = topi::conv2d_nchwc(xb, wb, {1, 1}, {1, 1, 1, 1});
  EXPECT_EQ(
      topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(512)).knob("pad_at"),
      2);
}

// The reduction over input channel blocks goes in chunks where a task's weights would leave L2
// between its column tiles: the 1x1 convolutions over 1024 and 2048 channels of DeepLabV3's
// ResNet-50 at a 32x32 map (11-20% of peak unchunked); not ResNet-50's at 7x7 and 14x14 (one or
// two column tiles a row) or a 1x1 over 256 channels (its weights stay in L2). A 3x3 whose
// weights exceed a quarter of L2 goes in chunks of one block over all its task's rows (the next
// test).
TEST(TopiConv2dVector, DefaultChunksTheReductionWhereWeightsLeaveL2) {
  // "chunks x blocks" of tile_ic for a (k x k, ic -> oc) convolution at `size` x `size`, in
  // blocks of `block` channels.
  auto chunks = [](int64_t size, int64_t ic, int64_t oc, int64_t k, int stride, int vector_bits,
                   int64_t block = 16) {
    const Config c = blocked_default(size, ic, oc, k, stride, vector_bits, block, block);
    return std::to_string(c.split("tile_ic")[0]) + "x" + std::to_string(c.split("tile_ic")[1]);
  };
  // Zen 5 (48 KiB L1, 1 MiB L2): a chunk's weights and input columns within a quarter of L1.
  EXPECT_EQ(chunks(32, 2048, 512, 1, 1, 512), "32x4");  // DeepLabV3 layer4 conv1, 2 blocks x 8 px
  EXPECT_EQ(chunks(32, 1024, 256, 1, 1, 512), "16x4");  // its layer3 conv1
  EXPECT_EQ(chunks(32, 512, 512, 3, 1, 512), "32x1");   // 3x3: a block alone fills the quarter
  EXPECT_EQ(chunks(32, 256, 1024, 1, 1, 512), "1x16");  // 32 KiB of weights stay in L2
  EXPECT_EQ(chunks(7, 2048, 512, 1, 1, 512), "1x128");  // ResNet-50 layer4: one tile a row
  EXPECT_EQ(chunks(14, 1024, 256, 1, 1, 512), "1x64");  // its layer3: two tiles a row
  EXPECT_EQ(chunks(7, 512, 512, 3, 1, 512), "32x1");    // ResNet-18 C12
  EXPECT_EQ(chunks(14, 256, 512, 3, 2, 512), "16x1");   // ResNet-18 C10: 7 wide out
  EXPECT_EQ(chunks(28, 128, 128, 3, 1, 512), "1x8");    // C7: 147 KiB a task, in L2
  // Zen 3 (AVX2, blocks of 8, 32 KiB L1, 512 KiB L2): the same rule on its smaller caches.
  EXPECT_EQ(chunks(32, 2048, 512, 1, 1, 256, 8), "16x16");
  EXPECT_EQ(chunks(7, 2048, 512, 1, 1, 256, 8), "1x256");
  // A target without cache sizes (none of the CPU kinds) keeps the whole reduction.
  te::Tensor xb = te::placeholder({1, 128, 32, 32, 16}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({32, 128, 1, 1, 16, 16}, ir::kFloat32, "wb");
  te::Tensor yb = topi::conv2d_nchwc(xb, wb, {1, 1}, {0, 0, 0, 0});
  target::Target none = cpu(512);
  none.l1d_bytes = none.l2_bytes = 0;
  EXPECT_EQ(topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), none)
                .split("tile_ic")[0],
            1);
}

// A task whose weights (its output blocks by every input channel and tap) exceed L2 takes many
// rows, its reduction in chunks that each serve all of them: FCN's 3x3 head over 2048 channels of
// 32x32 (2.3 MiB of weights a task) ran 91.0 -> 78.2 ms so. An ungrouped kernel with a window does
// so from a quarter of L2 (ResNet-18's C12, 589 KiB: its layer 4 ran 12% faster); a 1x1 and a
// grouped one only beyond L2.
TEST(TopiConv2dVector, DefaultTakesManyRowsWhereATasksWeightsLeaveL2) {
  auto config = [](int64_t size, int64_t ic, int64_t oc, int64_t k, int vector_bits,
                   int64_t block = 16) {
    return blocked_default(size, ic, oc, k, 1, vector_bits, block, block);
  };
  auto rows_and_chunks = [](const Config& c) {
    return std::to_string(c.knob("task_rows")) + ":" + std::to_string(c.split("tile_ic")[0]) + "x" +
           std::to_string(c.split("tile_ic")[1]);
  };
  // Zen 5 (48 KiB L1, 1 MiB L2): all 32 rows a task (16 tasks, 128 KiB of sums), one block a chunk.
  EXPECT_EQ(rows_and_chunks(config(32, 2048, 512, 3, 512)), "0:128x1");
  // 8 tasks a row (256 output channels): all rows would leave 8 tasks, groups of 8 rows make 32.
  EXPECT_EQ(rows_and_chunks(config(32, 2048, 256, 3, 512)), "8:128x1");
  EXPECT_EQ(rows_and_chunks(config(7, 512, 512, 3, 512)), "0:32x1");   // ResNet-18 C12: 7 rows
  EXPECT_EQ(rows_and_chunks(config(14, 256, 256, 3, 512)), "2:16x1");  // C9: 295 KiB, 56 tasks
  EXPECT_EQ(rows_and_chunks(config(28, 128, 128, 3, 512)), "1:1x8");   // C7: 147 KiB
  te::Tensor xb = te::placeholder({1, 32, 14, 14, 16}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({32, 16, 3, 3, 16, 16}, ir::kFloat32, "wb");
  te::Tensor yb = topi::group_conv2d_nchwc(xb, wb, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  EXPECT_EQ(rows_and_chunks(topi::group_conv2d_nchwc_x86_default(
                yb, topi::group_conv2d_nchwc_x86_space(yb), cpu(512))),
            "1:1x16");                                                  // grouped, 295 KiB a task
  EXPECT_EQ(rows_and_chunks(config(32, 2048, 512, 1, 512)), "1:32x4");  // 1x1: 256 KiB a task
  // Zen 3 (AVX2, blocks of 8, 32 KiB L1, 512 KiB L2): the same rule on its smaller caches.
  EXPECT_EQ(rows_and_chunks(config(32, 2048, 512, 3, 256, 8)), "0:128x2");
}

// The next reduction step's weights are prefetched where a task's weights exceed a quarter of L2
// and there is a next step; not for a grouped convolution (RegNet-Y-16GF ran 13% slower).
TEST(TopiConv2dVector, DefaultPrefetchesWeightsBeyondAQuarterOfL2) {
  auto prefetch = [](int64_t size, int64_t ic, int64_t oc, int64_t k, int64_t block = 16) {
    return blocked_default(size, ic, oc, k, 1, 512, block).knob("prefetch");
  };
  EXPECT_EQ(prefetch(7, 512, 512, 3), 1);    // ResNet-18 C12: 576 KiB a task
  EXPECT_EQ(prefetch(14, 256, 256, 3), 1);   // C9: 288 KiB
  EXPECT_EQ(prefetch(56, 64, 64, 3), 0);     // C2: 72 KiB, in L2
  EXPECT_EQ(prefetch(7, 2048, 512, 1), 0);   // a 1x1 over 2048: 256 KiB, not over the quarter
  EXPECT_EQ(prefetch(112, 3, 64, 7, 3), 0);  // a stem: one step
  te::Tensor xb = te::placeholder({1, 32, 14, 14, 16}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({32, 16, 3, 3, 16, 16}, ir::kFloat32, "wb");
  te::Tensor yb = topi::group_conv2d_nchwc(xb, wb, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
  EXPECT_EQ(
      topi::group_conv2d_nchwc_x86_default(yb, topi::group_conv2d_nchwc_x86_space(yb), cpu(512))
          .knob("prefetch"),
      0);
}

// The next column tile's input is prefetched where the data is more than twice L2 (it comes from L3
// or memory): ResNet-50's 1x1 over 256 channels at 56x56 at batch 8 (25 MiB) ran at 52% of peak
// without and 95% with; under it (in L2) nothing changes.
TEST(TopiConv2dVector, DefaultPrefetchesInputBeyondTwiceL2) {
  auto prefetch = [](int64_t batch, int64_t size, int64_t ic, int64_t k, int vector_bits) {
    te::Tensor xb = te::placeholder({batch, ic / 16, size, size, 16}, ir::kFloat32, "xb");
    te::Tensor wb = te::placeholder({4, ic / 16, k, k, 16, 16}, ir::kFloat32, "wb");
    const int p = static_cast<int>(k / 2);
    te::Tensor yb = topi::conv2d_nchwc(xb, wb, {1, 1}, {p, p, p, p});
    return topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(vector_bits))
        .knob("prefetch_input");
  };
  EXPECT_EQ(prefetch(8, 56, 256, 1, 512), 1);  // 25 MiB
  EXPECT_EQ(prefetch(1, 56, 256, 1, 512), 1);  // 3 MiB
  EXPECT_EQ(prefetch(1, 28, 512, 1, 512), 0);  // 1.5 MiB
  EXPECT_EQ(prefetch(8, 7, 512, 3, 512), 0);   // 0.8 MiB
  EXPECT_EQ(prefetch(1, 56, 128, 3, 256), 1);  // Zen 3's 512 KiB of L2: 1.5 MiB is more
  EXPECT_EQ(prefetch(1, 28, 256, 3, 256), 0);  // 0.8 MiB
}

// Rows so long that a task's input rows leave L2 before the next task reads them again take the
// columns in chunks outside the parallel loop, and padding of the rows only is inlined: s3d's
// (7, 1) convolution over 64 channels of 16 frames of 112x112 pixels (as rows of 12544) ran 4.3x
// as fast chunked and 3.5x inlined. A ResNet 3x3 at 56x56 keeps whole rows, padded first.
TEST(TopiConv2dVector, DefaultChunksLongRowsAndInlinesRowPadding) {
  auto config = [](int64_t ic, int64_t h, int64_t w, int64_t kh, int64_t kw, int stride,
                   topi::Ints4 pad) {
    te::Tensor xb = te::placeholder({1, ic / 16, h, w, 16}, ir::kFloat32, "xb");
    te::Tensor wb = te::placeholder({4, ic / 16, kh, kw, 16, 16}, ir::kFloat32, "wb");
    te::Tensor yb = topi::conv2d_nchwc(xb, wb, {stride, 1}, pad);
    return topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(512));
  };
  // 1568 tiles of 8 columns; 1792 bytes of input a column: chunks of 16 tiles within L2 / 4.
  const Config s3d = config(64, 16, 12544, 7, 1, 2, {3, 0, 3, 0});
  EXPECT_EQ(s3d.knob("col_chunk"), 16);
  EXPECT_EQ(s3d.knob("pad_at"), 0);
  const Config resnet = config(64, 56, 56, 3, 3, 1, {1, 1, 1, 1});
  EXPECT_EQ(resnet.knob("col_chunk"), 0);
  EXPECT_EQ(resnet.knob("pad_at"), 2);
  // A lifted 1-D convolution (one kernel row) over 3200 samples and 512 channels: whole rows.
  EXPECT_EQ(config(512, 1, 3200, 1, 3, 1, {0, 1, 0, 1}).knob("col_chunk"), 0);
  // Inception-v3's 7x1 over a 17x17 map: whole rows, its row padding inlined.
  const Config inception = config(160, 17, 17, 7, 1, 1, {3, 0, 3, 0});
  EXPECT_EQ(inception.knob("col_chunk"), 0);
  EXPECT_EQ(inception.knob("pad_at"), 0);
}

TEST(TopiConv2dVector, DefaultSchedulesVectorizeAndParallelize) {
  te::Tensor x = te::placeholder({1, 8, 14, 14}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({16, 8, 3, 3}, ir::kFloat32, "w");
  te::Tensor y = topi::conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1});
  te::Schedule s = te::create_schedule({y});
  topi::schedule_conv2d_nchw_x86(s, y,
                                 topi::conv2d_nchw_x86_default(topi::conv2d_nchw_x86_space(y)));
  std::string text = final_ir(s, {x, w, y});
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;

  te::Tensor dw = te::placeholder({16, 1, 3, 3}, ir::kFloat32, "dw");
  te::Tensor yd = topi::conv2d_nchw(x, dw, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8);
  (void)yd;
  te::Tensor x16 = te::placeholder({1, 16, 14, 14}, ir::kFloat32, "x16");
  te::Tensor y16 = topi::conv2d_nchw(x16, dw, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16);
  te::Schedule sd = te::create_schedule({y16});
  topi::schedule_depthwise_conv2d_nchw_x86(
      sd, y16, topi::depthwise_conv2d_nchw_x86_default(topi::depthwise_conv2d_nchw_x86_space(y16)));
  text = final_ir(sd, {x16, dw, y16});
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;

  te::Tensor xb = te::placeholder({1, 2, 14, 14, 4}, ir::kFloat32, "xb");
  te::Tensor wb = te::placeholder({2, 2, 3, 3, 4, 8}, ir::kFloat32, "wb");
  te::Tensor yb = topi::conv2d_nchwc(xb, wb, {1, 1}, {1, 1, 1, 1});
  te::Schedule sb = te::create_schedule({yb});
  topi::schedule_conv2d_nchwc_x86(
      sb, yb, topi::conv2d_nchwc_x86_default(yb, topi::conv2d_nchwc_x86_space(yb), cpu(512)));
  text = final_ir(sb, {xb, wb, yb});
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;
}

TEST(TopiConv2d, LayoutTransformBetweenBlocks) {
  // NCHW -> blocks of 16 -> blocks of 8 -> NCHW gives back the input; blocks of 8 match the
  // direct conversion.
  te::Tensor x = te::placeholder({2, 32, 3, 5}, ir::kFloat32, "x");
  te::Tensor b16 = topi::layout_transform(x, 0, 16, 0, "b16");
  te::Tensor b8 = topi::layout_transform(b16, 16, 8, 0, "b8");
  te::Tensor back = topi::layout_transform(b8, 8, 0, 0, "back");
  te::Schedule s = te::create_schedule({back, b8});
  topi::schedule_layout_transform_x86(s, b16);
  topi::schedule_layout_transform_x86(s, b8);
  topi::schedule_layout_transform_x86(s, back);
  NDArray xa = random_array({2, 32, 3, 5}, 8), b8a = zeros({2, 4, 3, 5, 8}),
          backa = zeros({2, 32, 3, 5});
  build_host(s, {x, b8, back})(xa, b8a, backa);
  EXPECT_TRUE(all_close(backa, xa.to_vector<float>(), 0, 0));
  std::vector<float> ref;
  for (int n = 0; n < 2; ++n)
    for (int cb = 0; cb < 4; ++cb)
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 5; ++w)
          for (int c = 0; c < 8; ++c)
            ref.push_back(xa.data<float>()[((n * 32 + cb * 8 + c) * 3 + h) * 5 + w]);
  EXPECT_TRUE(all_close(b8a, ref, 0, 0));
}

TEST(TopiConv2d, LayoutTransformPadsAndDropsALastBlock) {
  // 20 channels: NCHW -> 2 blocks of 16 (the last 12 channels zeros) -> 3 blocks of 8 (the last
  // 4 zeros) -> NCHW's 20 again.
  te::Tensor x = te::placeholder({1, 20, 2, 3}, ir::kFloat32, "x");
  te::Tensor b16 = topi::layout_transform(x, 0, 16, 0, "b16");
  te::Tensor b8 = topi::layout_transform(b16, 16, 8, 20, "b8");
  te::Tensor back = topi::layout_transform(b8, 8, 0, 20, "back");
  ASSERT_EQ(b16->shape().size(), 5u);
  EXPECT_EQ(ir::as_const_int(b16->shape()[1]), 2);
  EXPECT_EQ(ir::as_const_int(b8->shape()[1]), 3);
  EXPECT_EQ(ir::as_const_int(back->shape()[1]), 20);
  te::Schedule s = te::create_schedule({back, b8, b16});
  for (const te::Tensor& t : {b16, b8, back}) topi::schedule_layout_transform_x86(s, t);
  NDArray xa = random_array({1, 20, 2, 3}, 9), b16a = zeros({1, 2, 2, 3, 16}),
          b8a = zeros({1, 3, 2, 3, 8}), backa = zeros({1, 20, 2, 3});
  build_host(s, {x, b16, b8, back})(xa, b16a, b8a, backa);
  EXPECT_TRUE(all_close(backa, xa.to_vector<float>(), 0, 0));
  const float* px = xa.data<float>();
  std::vector<float> ref16, ref8;
  for (int cb = 0; cb < 2; ++cb)
    for (int hw = 0; hw < 6; ++hw)
      for (int c = 0; c < 16; ++c)
        ref16.push_back(cb * 16 + c < 20 ? px[(cb * 16 + c) * 6 + hw] : 0.0f);
  for (int cb = 0; cb < 3; ++cb)
    for (int hw = 0; hw < 6; ++hw)
      for (int c = 0; c < 8; ++c)
        ref8.push_back(cb * 8 + c < 20 ? px[(cb * 8 + c) * 6 + hw] : 0.0f);
  EXPECT_TRUE(all_close(b16a, ref16, 0, 0));
  EXPECT_TRUE(all_close(b8a, ref8, 0, 0));
  // A count the blocks cannot hold is refused by name.
  EXPECT_ERROR_CONTAINS(topi::layout_transform(b16, 16, 8, 40, "bad"), "not 40 channels");
}

}  // namespace
}  // namespace kiln
