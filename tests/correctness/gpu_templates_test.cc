// The GPU templates run for real on OpenCL (PoCL on this machine's CPU): each at its default config
// and at 20 random configs of its space that the target accepts (the small spaces of the
// one-thread-per-output templates, pooling, grouped and transposed convolutions, softmax and
// reductions, at every config), built with build_gpu and checked against a naive loop on the host
// (max|diff| <= 1e-5 · max(1, max|ref|); the reductions here are at most 576 long). Random configs
// that exceed the target's limits (threads or shared memory a block) are refused by lowering with a
// user error and are not counted; the random configs are drawn among the plausible ones
// (topi::gpu::plausible), as a tuner samples. The LSTM's schedule (no config space) is checked
// against a hand-written LSTM.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/gpu/conv2d_gpu.h"
#include "compiler/topi/gpu/conv2d_transpose_gpu.h"
#include "compiler/topi/gpu/depthwise_conv2d_gpu.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/lstm_gpu.h"
#include "compiler/topi/gpu/matmul_gpu.h"
#include "compiler/topi/gpu/pool_gpu.h"
#include "compiler/topi/gpu/reduce_gpu.h"
#include "compiler/topi/lstm.h"
#include "compiler/topi/matmul.h"
#include "compiler/topi/nn.h"
#include "compiler/topi/pooling.h"
#include "compiler/topi/reduce.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::DeviceAPI;
using runtime::DeviceBuffer;

std::vector<float> random_values(size_t n, uint32_t seed) {
  return testing::random_array({static_cast<int64_t>(n)}, seed).to_vector<float>();
}

/// out[i, j] = sum_r a[i, r] * b[r, j] (b [k, n]), or b[j, r] when `b_transposed` (b [n, k]).
std::vector<float> naive_product(const std::vector<float>& a, const std::vector<float>& b, int m,
                                 int n, int k, bool b_transposed) {
  std::vector<float> out(size_t(m) * n, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int r = 0; r < k; ++r)
        acc += double(a[i * k + r]) * (b_transposed ? b[j * k + r] : b[r * n + j]);
      out[size_t(i) * n + j] = float(acc);
    }
  return out;
}

size_t elements(const te::Tensor& t) {
  size_t n = 1;
  for (auto& d : t->shape()) n *= static_cast<size_t>(*ir::as_const_int(d));
  return n;
}

/// Runs `program` on `inputs` (host values of its first parameters) and returns its remaining
/// parameters, the outputs, of `out_elements` elements each.
std::vector<std::vector<float>> run_outputs(DeviceAPI& gpu, const runtime::DeviceProgram& program,
                                            const std::vector<std::vector<float>>& inputs,
                                            const std::vector<size_t>& out_elements) {
  runtime::LoadedDeviceProgram loaded(gpu, program);
  std::vector<DeviceBuffer> buffers;
  for (const auto& in : inputs) {
    buffers.push_back(gpu.alloc(static_cast<int64_t>(in.size() * 4)));
    gpu.copy_to_device(buffers.back(), in.data(), buffers.back().bytes());
  }
  for (size_t n : out_elements) buffers.push_back(gpu.alloc(static_cast<int64_t>(n * 4)));
  std::vector<const DeviceBuffer*> params;
  for (auto& b : buffers) params.push_back(&b);
  loaded.launch(params);
  std::vector<std::vector<float>> outs;
  for (size_t i = 0; i < out_elements.size(); ++i) {
    outs.emplace_back(out_elements[i]);
    const DeviceBuffer& b = buffers[inputs.size() + i];
    gpu.copy_to_host(outs.back().data(), b, b.bytes());
  }
  return outs;
}

/// Runs `program` on `inputs` (host values of all but the last parameter) and returns the last.
std::vector<float> run(DeviceAPI& gpu, const runtime::DeviceProgram& program,
                       const std::vector<std::vector<float>>& inputs, size_t out_elements) {
  return run_outputs(gpu, program, inputs, {out_elements})[0];
}

struct Case {
  std::function<std::vector<te::Tensor>()> make;  ///< inputs..., output
  std::function<space::ConfigSpace(const te::Tensor&)> space;
  std::function<space::Config(const space::ConfigSpace&, const target::Target&)> default_config;
  std::function<void(te::Schedule&, const te::Tensor&, const space::Config&, const te::Tensor&)>
      schedule;
  std::function<std::vector<float>(const std::vector<std::vector<float>>&)> reference;
  std::vector<std::string> tiles;  ///< the 4-part split knobs
};

/// The default config and 20 random accepted ones, each built and checked.
/// Whether a knob of `cfg` asks for more threads a block than the target allows.
bool over_threads(const space::ConfigSpace& sp, const space::Config& cfg,
                  const target::Target& target) {
  for (const auto& knob : sp.knobs()) {
    if (knob.name.find("threads") != std::string::npos &&
        cfg.knob(knob.name) > target.max_num_threads)
      return true;
  }
  return false;
}

void check_template(const Case& c, const std::string& what) {
  std::string why;
  if (!DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  DeviceAPI& gpu = DeviceAPI::get(TargetKind::kOpenCL);
  const target::Target target = target::Target::parse("opencl");
  std::vector<te::Tensor> probe = c.make();
  space::ConfigSpace sp = c.space(probe.back());
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i + 1 < probe.size(); ++i)
    inputs.push_back(random_values(elements(probe[i]), 7 + i));
  const std::vector<float> ref = c.reference(inputs);
  double ref_max = 1;
  for (float r : ref) ref_max = std::max(ref_max, double(std::abs(r)));

  std::mt19937_64 gen(2026);
  std::vector<space::Config> configs = {c.default_config(sp, target)};
  // The small spaces of the one-thread-per-output templates (no 4-part split knobs) are checked
  // whole; the configs with more threads a block than the target allows must be the ones refused.
  const bool whole = c.tiles.empty();
  size_t over_limit = 0;
  if (whole) {
    for (uint64_t i = 0; i < sp.size(); ++i) {
      configs.push_back(sp.get(i));
      over_limit += over_threads(sp, configs.back(), target);
    }
  }
  size_t checked = 0, refused = 0;
  for (size_t i = 0; whole ? i < configs.size() : checked < 21 && i < 400; ++i) {
    for (int draws = 0; i >= configs.size(); ++draws) {
      ASSERT_LT(draws, 100000) << what << ": no plausible random config";
      space::Config r = sp.get(gen() % sp.size());
      if (topi::gpu::plausible(r, c.tiles, target.max_num_threads)) configs.push_back(r);
    }
    const space::Config& cfg = configs[i];
    std::vector<te::Tensor> t = c.make();
    te::Schedule s = te::create_schedule({t.back()});
    c.schedule(s, t.back(), cfg, t.back());
    runtime::DeviceProgram program;
    try {
      program = compiler::build_gpu(s, t, target, "f");
    } catch (const Error& e) {
      ASSERT_NE(i, 0u) << what << ": the default config " << cfg.str()
                       << " does not build: " << e.what();
      EXPECT_TRUE(!whole || over_threads(sp, cfg, target))
          << what << ": " << cfg.str() << " refused: " << e.what();
      ++refused;
      continue;
    }
    std::vector<float> out = run(gpu, program, inputs, ref.size());
    double diff = 0;
    for (size_t k = 0; k < ref.size(); ++k)
      diff = std::max(diff, double(std::abs(out[k] - ref[k])));
    ASSERT_LE(diff, 1e-5 * ref_max) << what << " config " << cfg.str();
    ++checked;
  }
  if (whole) {
    // A block a row takes no more threads than its row can use, so fewer may be refused.
    EXPECT_LE(refused, over_limit) << what;
    EXPECT_EQ(checked + refused, configs.size()) << what;
  } else {
    EXPECT_EQ(checked, 21u) << what << ": " << refused << " random configs refused";
  }
}

TEST(GpuTemplatesTest, MatmulOnOpenCL) {
  const int m = 64, n = 96, k = 48;
  Case c{[] {
           te::Tensor a = te::placeholder({m, k}, ir::kFloat32, "A");
           te::Tensor b = te::placeholder({k, n}, ir::kFloat32, "B");
           return std::vector<te::Tensor>{a, b, topi::matmul(a, b, "C")};
         },
         topi::gpu::matmul_gpu_space,
         topi::gpu::matmul_gpu_default,
         topi::gpu::schedule_matmul_gpu,
         [](const std::vector<std::vector<float>>& in) {
           return naive_product(in[0], in[1], m, n, k, false);
         },
         {"tile_y", "tile_x"}};
  check_template(c, "matmul 64x96x48");
}

/// dense(x [M, K], w [N, K]) through matmul_gpu: the weight transposed.
Case dense_case(int m, int n, int k) {
  return Case{[=] {
                te::Tensor x = te::placeholder({m, k}, ir::kFloat32, "x");
                te::Tensor w = te::placeholder({n, k}, ir::kFloat32, "w");
                return std::vector<te::Tensor>{x, w, topi::dense(x, w)};
              },
              topi::gpu::matmul_gpu_space,
              topi::gpu::matmul_gpu_default,
              topi::gpu::schedule_matmul_gpu,
              [=](const std::vector<std::vector<float>>& in) {
                return naive_product(in[0], in[1], m, n, k, true);
              },
              {"tile_y", "tile_x"}};
}

TEST(GpuTemplatesTest, DenseOnOpenCL) { check_template(dense_case(8, 40, 72), "dense 8x40x72"); }

// A batch of 1 through a layer of 64 outputs over 300 inputs: the cross_thread knob (a block an
// output) among the random configs, and the default.
TEST(GpuTemplatesTest, DenseGemvOnOpenCL) {
  check_template(dense_case(1, 64, 300), "dense 1x64x300");
}

TEST(GpuTemplatesTest, MatmulFewOutputsOnOpenCL) {
  const int m = 4, n = 24, k = 517;  // a reduction the block's threads do not divide
  Case c{[] {
           te::Tensor a = te::placeholder({m, k}, ir::kFloat32, "A");
           te::Tensor b = te::placeholder({k, n}, ir::kFloat32, "B");
           return std::vector<te::Tensor>{a, b, topi::matmul(a, b, "C")};
         },
         topi::gpu::matmul_gpu_space,
         topi::gpu::matmul_gpu_default,
         topi::gpu::schedule_matmul_gpu,
         [](const std::vector<std::vector<float>>& in) {
           return naive_product(in[0], in[1], m, n, k, false);
         },
         {"tile_y", "tile_x"}};
  check_template(c, "matmul 4x24x517");
}

struct ConvShape {
  int c, hw, k, kernel, stride, pad;
  int out() const { return (hw + 2 * pad - kernel) / stride + 1; }
};

Case conv_case(ConvShape s) {
  return Case{
      [s] {
        te::Tensor x = te::placeholder({1, s.c, s.hw, s.hw}, ir::kFloat32, "data");
        te::Tensor w = te::placeholder({s.k, s.c, s.kernel, s.kernel}, ir::kFloat32, "kernel");
        return std::vector<te::Tensor>{
            x, w, topi::conv2d_nchw(x, w, {s.stride, s.stride}, {s.pad, s.pad, s.pad, s.pad})};
      },
      topi::gpu::conv2d_nchw_gpu_space,
      topi::gpu::conv2d_nchw_gpu_default,
      topi::gpu::schedule_conv2d_nchw_gpu,
      [s](const std::vector<std::vector<float>>& in) {
        const int o = s.out();
        std::vector<float> out(size_t(s.k) * o * o, 0.0f);
        for (int f = 0; f < s.k; ++f)
          for (int y = 0; y < o; ++y)
            for (int x = 0; x < o; ++x) {
              double acc = 0;
              for (int c = 0; c < s.c; ++c)
                for (int ry = 0; ry < s.kernel; ++ry)
                  for (int rx = 0; rx < s.kernel; ++rx) {
                    int iy = y * s.stride + ry - s.pad, ix = x * s.stride + rx - s.pad;
                    if (iy < 0 || ix < 0 || iy >= s.hw || ix >= s.hw) continue;
                    acc += double(in[0][(size_t(c) * s.hw + iy) * s.hw + ix]) *
                           in[1][((size_t(f) * s.c + c) * s.kernel + ry) * s.kernel + rx];
                  }
              out[(size_t(f) * o + y) * o + x] = float(acc);
            }
        return out;
      },
      {"tile_f", "tile_y", "tile_x"}};
}

TEST(GpuTemplatesTest, Conv2d3x3OnOpenCL) {
  check_template(conv_case({16, 14, 32, 3, 1, 1}), "conv 3x3 s1");
}
TEST(GpuTemplatesTest, Conv2d3x3Stride2OnOpenCL) {
  check_template(conv_case({8, 15, 16, 3, 2, 1}), "conv 3x3 s2");
}
TEST(GpuTemplatesTest, Conv2d1x1Stride2OnOpenCL) {
  check_template(conv_case({16, 14, 24, 1, 2, 0}), "conv 1x1 s2");
}
TEST(GpuTemplatesTest, Conv2d7x7OnOpenCL) {
  check_template(conv_case({3, 32, 8, 7, 2, 3}), "conv 7x7 s2");
}

TEST(GpuTemplatesTest, MatmulDefaultsOfFewRowsFillABlock) {
  // A batch of 1 through a dense layer (the DQN's, the LSTM's GEMVs): the default still has a
  // plausible block, its threads along the columns.
  for (const char* tgt : {"opencl", "cuda -arch=sm_90"}) {
    const target::Target target = target::Target::parse(tgt);
    for (auto [m, n, k] : {std::array<int, 3>{1, 2600, 650}, {1, 512, 3136}, {2, 1000, 512}}) {
      te::Tensor y = topi::dense(te::placeholder({m, k}, ir::kFloat32, "x"),
                                 te::placeholder({n, k}, ir::kFloat32, "w"));
      const space::ConfigSpace sp = topi::gpu::matmul_gpu_space(y);
      const space::Config cfg = topi::gpu::matmul_gpu_default(sp, target);
      EXPECT_TRUE(topi::gpu::plausible(cfg, {"tile_y", "tile_x"}, target.max_num_threads))
          << tgt << " " << m << "x" << n << "x" << k << ": " << cfg.str();
    }
  }
}

TEST(GpuTemplatesTest, BatchMatmulOnOpenCL) {
  const int batch = 3, m = 17, n = 20, k = 24;  // b's batch of 1 broadcasts
  Case c{[] {
           te::Tensor a = te::placeholder({batch, m, k}, ir::kFloat32, "A");
           te::Tensor b = te::placeholder({1, k, n}, ir::kFloat32, "B");
           return std::vector<te::Tensor>{a, b, topi::batch_matmul(a, b)};
         },
         topi::gpu::matmul_gpu_space,
         topi::gpu::matmul_gpu_default,
         topi::gpu::schedule_matmul_gpu,
         [](const std::vector<std::vector<float>>& in) {
           std::vector<float> out(batch * m * n, 0.0f);
           for (int z = 0; z < batch; ++z)
             for (int i = 0; i < m; ++i)
               for (int j = 0; j < n; ++j) {
                 double acc = 0;
                 for (int r = 0; r < k; ++r)
                   acc += double(in[0][(z * m + i) * k + r]) * in[1][r * n + j];
                 out[(z * m + i) * n + j] = float(acc);
               }
           return out;
         },
         {"tile_y", "tile_x"}};
  check_template(c, "batch_matmul 3x17x20x24");
}

/// Pooling of [1, C, HW, HW] over a k x k window at stride s with padding p on every side
/// (global: the whole plane); avg divides by the points inside the image (count_include_pad = 0).
struct PoolShape {
  int c, hw, k, stride, pad;
  bool max, global;
  int out() const { return global ? 1 : (hw + 2 * pad - k) / stride + 1; }
};

Case pool_case(PoolShape p) {
  return Case{[p] {
                te::Tensor x = te::placeholder({1, p.c, p.hw, p.hw}, ir::kFloat32, "data");
                te::Tensor y;
                if (p.global) {
                  y = p.max ? topi::global_max_pool2d(x) : topi::global_avg_pool2d(x);
                } else {
                  const topi::Ints4 pads = {p.pad, p.pad, p.pad, p.pad};
                  y = p.max ? topi::max_pool2d(x, {p.k, p.k}, {p.stride, p.stride}, pads)
                            : topi::avg_pool2d(x, {p.k, p.k}, {p.stride, p.stride}, pads);
                }
                return std::vector<te::Tensor>{x, y};
              },
              topi::gpu::pool2d_gpu_space,
              topi::gpu::pool2d_gpu_default,
              topi::gpu::schedule_pool2d_gpu,
              [p](const std::vector<std::vector<float>>& in) {
                const int o = p.out(), k = p.global ? p.hw : p.k, st = p.global ? 1 : p.stride,
                          pad = p.global ? 0 : p.pad;
                std::vector<float> out(size_t(p.c) * o * o);
                for (int c = 0; c < p.c; ++c)
                  for (int y = 0; y < o; ++y)
                    for (int x = 0; x < o; ++x) {
                      double acc = p.max ? -INFINITY : 0;
                      int count = 0;
                      for (int ry = 0; ry < k; ++ry)
                        for (int rx = 0; rx < k; ++rx) {
                          int iy = y * st + ry - pad, ix = x * st + rx - pad;
                          if (iy < 0 || ix < 0 || iy >= p.hw || ix >= p.hw) continue;
                          double v = in[0][(size_t(c) * p.hw + iy) * p.hw + ix];
                          acc = p.max ? std::max(acc, v) : acc + v;
                          ++count;
                        }
                      out[(size_t(c) * o + y) * o + x] = float(p.max ? acc : acc / count);
                    }
                return out;
              },
              {}};
}

TEST(GpuTemplatesTest, MaxPoolOnOpenCL) {
  check_template(pool_case({4, 9, 3, 2, 1, true, false}), "max pool 3x3 s2");
}
TEST(GpuTemplatesTest, AvgPoolOnOpenCL) {
  check_template(pool_case({3, 8, 3, 2, 1, false, false}), "avg pool 3x3 s2");
}
TEST(GpuTemplatesTest, GlobalAvgPoolOnOpenCL) {
  check_template(pool_case({5, 7, 0, 1, 0, false, true}), "global avg pool");
}
TEST(GpuTemplatesTest, GlobalMaxPoolOnOpenCL) {
  check_template(pool_case({5, 6, 0, 1, 0, true, true}), "global max pool");
}

/// A grouped convolution of [1, C, HW, HW] with [K, C / groups, k, k] (depthwise: groups = C = K).
struct GroupedShape {
  int c, hw, k, kernel, stride, pad, groups;
  int out() const { return (hw + 2 * pad - kernel) / stride + 1; }
};

Case grouped_case(GroupedShape s) {
  return Case{[s] {
                te::Tensor x = te::placeholder({1, s.c, s.hw, s.hw}, ir::kFloat32, "data");
                te::Tensor w = te::placeholder({s.k, s.c / s.groups, s.kernel, s.kernel},
                                               ir::kFloat32, "kernel");
                return std::vector<te::Tensor>{
                    x, w,
                    topi::conv2d_nchw(x, w, {s.stride, s.stride}, {s.pad, s.pad, s.pad, s.pad},
                                      {1, 1}, s.groups)};
              },
              topi::gpu::depthwise_conv2d_nchw_gpu_space,
              topi::gpu::depthwise_conv2d_nchw_gpu_default,
              topi::gpu::schedule_depthwise_conv2d_nchw_gpu,
              [s](const std::vector<std::vector<float>>& in) {
                const int o = s.out(), cg = s.c / s.groups, kg = s.k / s.groups;
                std::vector<float> out(size_t(s.k) * o * o, 0.0f);
                for (int f = 0; f < s.k; ++f)
                  for (int y = 0; y < o; ++y)
                    for (int x = 0; x < o; ++x) {
                      double acc = 0;
                      for (int rc = 0; rc < cg; ++rc)
                        for (int ry = 0; ry < s.kernel; ++ry)
                          for (int rx = 0; rx < s.kernel; ++rx) {
                            int iy = y * s.stride + ry - s.pad, ix = x * s.stride + rx - s.pad;
                            if (iy < 0 || ix < 0 || iy >= s.hw || ix >= s.hw) continue;
                            const int c = f / kg * cg + rc;
                            acc += double(in[0][(size_t(c) * s.hw + iy) * s.hw + ix]) *
                                   in[1][((size_t(f) * cg + rc) * s.kernel + ry) * s.kernel + rx];
                          }
                      out[(size_t(f) * o + y) * o + x] = float(acc);
                    }
                return out;
              },
              {}};
}

TEST(GpuTemplatesTest, DepthwiseConv2dOnOpenCL) {
  check_template(grouped_case({8, 10, 8, 3, 1, 1, 8}), "depthwise 3x3 s1");
}
TEST(GpuTemplatesTest, DepthwiseConv2dStride2OnOpenCL) {
  check_template(grouped_case({6, 11, 6, 3, 2, 1, 6}), "depthwise 3x3 s2");
}
TEST(GpuTemplatesTest, GroupedConv2dOnOpenCL) {
  check_template(grouped_case({8, 9, 6, 3, 2, 1, 2}), "2 groups 3x3 s2");
}

TEST(GpuTemplatesTest, Conv2dTransposeOnOpenCL) {
  // [1, 8, 4, 4] with an IOHW kernel [8, 4, 4, 4] at stride 2, padding 1: [1, 4, 8, 8] (DCGAN's).
  const int c = 8, hw = 4, m = 4, k = 4, stride = 2, pad = 1, o = (hw - 1) * stride + k - 2 * pad;
  Case cs{[] {
            te::Tensor x = te::placeholder({1, c, hw, hw}, ir::kFloat32, "data");
            te::Tensor w = te::placeholder({c, m, k, k}, ir::kFloat32, "kernel");
            return std::vector<te::Tensor>{
                x, w, topi::conv2d_transpose_nchw(x, w, {stride, stride}, {pad, pad, pad, pad})};
          },
          topi::gpu::conv2d_transpose_nchw_gpu_space,
          topi::gpu::conv2d_transpose_nchw_gpu_default,
          topi::gpu::schedule_conv2d_transpose_nchw_gpu,
          [](const std::vector<std::vector<float>>& in) {
            std::vector<double> acc(size_t(m) * o * o, 0.0);
            for (int ci = 0; ci < c; ++ci)
              for (int iy = 0; iy < hw; ++iy)
                for (int ix = 0; ix < hw; ++ix)
                  for (int f = 0; f < m; ++f)
                    for (int ky = 0; ky < k; ++ky)
                      for (int kx = 0; kx < k; ++kx) {
                        int y = iy * stride + ky - pad, x = ix * stride + kx - pad;
                        if (y < 0 || x < 0 || y >= o || x >= o) continue;
                        acc[(size_t(f) * o + y) * o + x] +=
                            double(in[0][(size_t(ci) * hw + iy) * hw + ix]) *
                            in[1][((size_t(ci) * m + f) * k + ky) * k + kx];
                      }
            return std::vector<float>(acc.begin(), acc.end());
          },
          {}};
  check_template(cs, "conv2d_transpose 4x4 s2");
}

/// reduce_gpu's schedule with the harness's signature (it takes no epilogue).
void schedule_reduce(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                     const te::Tensor&) {
  topi::gpu::schedule_reduce_gpu(s, out, cfg);
}

TEST(GpuTemplatesTest, SoftmaxOnOpenCL) {
  const int rows = 5, n = 300;  // [5, 300], along the last axis
  Case c{[] {
           te::Tensor x = te::placeholder({rows, n}, ir::kFloat32, "x");
           return std::vector<te::Tensor>{x, topi::softmax(x, -1)};
         },
         topi::gpu::reduce_gpu_space,
         topi::gpu::reduce_gpu_default,
         schedule_reduce,
         [](const std::vector<std::vector<float>>& in) {
           std::vector<float> out(rows * n);
           for (int r = 0; r < rows; ++r) {
             double mx = -INFINITY, sum = 0;
             for (int j = 0; j < n; ++j) mx = std::max(mx, double(in[0][r * n + j]));
             for (int j = 0; j < n; ++j) sum += std::exp(double(in[0][r * n + j]) - mx);
             for (int j = 0; j < n; ++j)
               out[r * n + j] = float(std::exp(double(in[0][r * n + j]) - mx) / sum);
           }
           return out;
         },
         {}};
  check_template(c, "softmax 5x300");
}

TEST(GpuTemplatesTest, ReduceMeanOnOpenCL) {
  const int a = 4, b = 9, d = 6;  // [4, 9, 6] -> mean over axes 0 and 2, keepdims: [1, 9, 1]
  Case c{[] {
           te::Tensor x = te::placeholder({a, b, d}, ir::kFloat32, "x");
           return std::vector<te::Tensor>{x, topi::reduce(x, topi::ReduceOp::kMean, {0, 2}, true)};
         },
         topi::gpu::reduce_gpu_space,
         topi::gpu::reduce_gpu_default,
         schedule_reduce,
         [](const std::vector<std::vector<float>>& in) {
           std::vector<float> out(b);
           for (int j = 0; j < b; ++j) {
             double sum = 0;
             for (int i = 0; i < a; ++i)
               for (int k = 0; k < d; ++k) sum += in[0][(i * b + j) * d + k];
             out[j] = float(sum / (a * d));
           }
           return out;
         },
         {}};
  check_template(c, "mean over axes 0, 2");
}

TEST(GpuTemplatesTest, LstmOnOpenCL) {
  // T = 3 steps, batch 2, input 5, hidden 12 (48 gates: the packed panels are 16 wide) with a bias;
  // the schedule is not a config space: the products at matmul_gpu's default.
  std::string why;
  if (!DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  const int T = 3, B = 2, I = 5, H = 12, G = 4 * H;
  te::Tensor x = te::placeholder({T, B, I}, ir::kFloat32, "X");
  te::Tensor w = te::placeholder({1, G, I}, ir::kFloat32, "W");
  te::Tensor r = te::placeholder({1, G, H}, ir::kFloat32, "R");
  te::Tensor b = te::placeholder({1, 2 * G}, ir::kFloat32, "B");
  topi::LstmOutputs o = topi::lstm(x, w, r, b);
  te::Schedule s = te::create_schedule({o.y, o.y_h, o.y_c});
  const target::Target target = target::Target::parse("opencl");
  topi::gpu::schedule_lstm_gpu(s, o, target, [&](te::Schedule& sch, const te::Tensor& p) {
    topi::gpu::schedule_matmul_gpu(
        sch, p, topi::gpu::matmul_gpu_default(topi::gpu::matmul_gpu_space(p), target), p);
  });
  const runtime::DeviceProgram program =
      compiler::build_gpu(s, {x, w, r, b, o.y, o.y_h, o.y_c}, target, "lstm");
  const std::vector<std::vector<float>> in = {random_values(T * B * I, 1), random_values(G * I, 2),
                                              random_values(G * H, 3), random_values(2 * G, 4)};
  const auto out = run_outputs(DeviceAPI::get(TargetKind::kOpenCL), program, in,
                               {size_t(T * B * H), size_t(B * H), size_t(B * H)});
  // Gates in ONNX order i, o, f, c.
  auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  std::vector<double> h(B * H, 0.0), c(B * H, 0.0);
  for (int t = 0; t < T; ++t) {
    std::vector<double> next_h(B * H), next_c(B * H);
    for (int bi = 0; bi < B; ++bi)
      for (int j = 0; j < H; ++j) {
        double pre[4];
        for (int q = 0; q < 4; ++q) {
          const int g = q * H + j;
          double v = double(in[3][g]) + in[3][G + g];
          for (int k = 0; k < I; ++k) v += double(in[0][(t * B + bi) * I + k]) * in[1][g * I + k];
          for (int k = 0; k < H; ++k) v += h[bi * H + k] * in[2][g * H + k];
          pre[q] = v;
        }
        const double cell = sigmoid(pre[2]) * c[bi * H + j] + sigmoid(pre[0]) * std::tanh(pre[3]);
        next_c[bi * H + j] = cell;
        next_h[bi * H + j] = sigmoid(pre[1]) * std::tanh(cell);
      }
    h = next_h;
    c = next_c;
    for (int k = 0; k < B * H; ++k)
      ASSERT_NEAR(out[0][t * B * H + k], h[k], 1e-5) << "Y at step " << t << ", " << k;
  }
  for (int k = 0; k < B * H; ++k) {
    ASSERT_NEAR(out[1][k], h[k], 1e-5) << "Y_h " << k;
    ASSERT_NEAR(out[2][k], c[k], 1e-5) << "Y_c " << k;
  }
}

TEST(GpuTemplatesTest, InjectiveOnOpenCL) {
  std::string why;
  if (!DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  DeviceAPI& gpu = DeviceAPI::get(TargetKind::kOpenCL);
  for (int threads : {32, 64, 100}) {
    te::Tensor x = te::placeholder({3, 5, 7}, ir::kFloat32, "x");
    te::Tensor y = topi::relu(x);
    te::Schedule s = te::create_schedule({y});
    topi::gpu::schedule_injective(s, y, threads);
    std::vector<float> in = random_values(105, 3);
    std::vector<float> out = run(
        gpu, compiler::build_gpu(s, {x, y}, target::Target::parse("opencl"), "relu"), {in}, 105);
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(out[i], std::max(in[i], 0.0f)) << i << " threads " << threads;
  }
}

}  // namespace
}  // namespace kiln
