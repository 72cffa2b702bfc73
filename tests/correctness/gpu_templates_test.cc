// The GPU templates run for real on OpenCL (PoCL on this machine's CPU): each at its default config
// and at 20 random configs of its space that the target accepts, built with build_gpu and checked
// against a naive loop on the host (max|diff| <= 1e-5 · max(1, max|ref|); the reductions here are
// at most 576 long). Random configs that exceed the target's limits (threads or shared memory a
// block) are refused by lowering with a user error and are not counted; the random configs are
// drawn among the plausible ones (topi::gpu::plausible), as a tuner samples.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/gpu/conv2d_gpu.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/matmul_gpu.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"

namespace kiln {
namespace {

using runtime::DeviceAPI;
using runtime::DeviceBuffer;
using runtime::DeviceKind;

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

size_t elements(const te::Tensor& t) {
  size_t n = 1;
  for (auto& d : t->shape()) n *= static_cast<size_t>(*ir::as_const_int(d));
  return n;
}

/// Runs `program` on `inputs` (host values of all but the last parameter) and returns the last.
std::vector<float> run(DeviceAPI& gpu, const runtime::DeviceProgram& program, const std::vector<std::vector<float>>& inputs,
                       size_t out_elements) {
  runtime::LoadedDeviceProgram loaded(gpu, program);
  std::vector<DeviceBuffer> buffers;
  for (const auto& in : inputs) {
    buffers.push_back(gpu.alloc(static_cast<int64_t>(in.size() * 4)));
    gpu.copy_to_device(buffers.back(), in.data(), buffers.back().bytes());
  }
  buffers.push_back(gpu.alloc(static_cast<int64_t>(out_elements * 4)));
  std::vector<const DeviceBuffer*> params;
  for (auto& b : buffers) params.push_back(&b);
  loaded.launch(params);
  std::vector<float> out(out_elements);
  gpu.copy_to_host(out.data(), buffers.back(), buffers.back().bytes());
  return out;
}

struct Case {
  std::function<std::vector<te::Tensor>()> make;  ///< inputs..., output
  std::function<space::ConfigSpace(const te::Tensor&)> space;
  std::function<space::Config(const space::ConfigSpace&, const target::Target&)> default_config;
  std::function<void(te::Schedule&, const te::Tensor&, const space::Config&, const te::Tensor&)> schedule;
  std::function<std::vector<float>(const std::vector<std::vector<float>>&)> reference;
  std::vector<std::string> tiles;  ///< the 4-part split knobs
};

/// The default config and 20 random accepted ones, each built and checked.
void check_template(const Case& c, const std::string& what) {
  std::string why;
  if (!DeviceAPI::available(DeviceKind::kOpenCL, &why)) GTEST_SKIP() << why;
  DeviceAPI& gpu = DeviceAPI::get(DeviceKind::kOpenCL);
  const target::Target target = target::Target::parse("opencl");
  std::vector<te::Tensor> probe = c.make();
  space::ConfigSpace sp = c.space(probe.back());
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i + 1 < probe.size(); ++i) inputs.push_back(random_values(elements(probe[i]), 7 + i));
  const std::vector<float> ref = c.reference(inputs);
  double ref_max = 1;
  for (float r : ref) ref_max = std::max(ref_max, double(std::abs(r)));

  std::mt19937_64 gen(2026);
  std::vector<space::Config> configs = {c.default_config(sp, target)};
  int checked = 0, refused = 0;
  for (size_t i = 0; checked < 21 && i < 400; ++i) {
    while (i >= configs.size()) {
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
      ASSERT_NE(i, 0u) << what << ": the default config " << cfg.str() << " does not build: " << e.what();
      ++refused;
      continue;
    }
    std::vector<float> out = run(gpu, program, inputs, ref.size());
    double diff = 0;
    for (size_t k = 0; k < ref.size(); ++k) diff = std::max(diff, double(std::abs(out[k] - ref[k])));
    ASSERT_LE(diff, 1e-5 * ref_max) << what << " config " << cfg.str();
    ++checked;
  }
  EXPECT_EQ(checked, 21) << what << ": " << refused << " random configs refused";
}

TEST(GpuTemplatesTest, MatmulOnOpenCL) {
  const int m = 64, n = 96, k = 48;
  Case c{[] {
           te::Tensor a = te::placeholder({m, k}, ir::kFloat32, "A");
           te::Tensor b = te::placeholder({k, n}, ir::kFloat32, "B");
           return std::vector<te::Tensor>{a, b, topi::matmul(a, b, "C")};
         },
         topi::gpu::matmul_gpu_space, topi::gpu::matmul_gpu_default, topi::gpu::schedule_matmul_gpu,
         [](const std::vector<std::vector<float>>& in) {
           std::vector<float> out(m * n, 0.0f);
           for (int i = 0; i < m; ++i)
             for (int j = 0; j < n; ++j) {
               double acc = 0;
               for (int r = 0; r < k; ++r) acc += double(in[0][i * k + r]) * in[1][r * n + j];
               out[i * n + j] = float(acc);
             }
           return out;
         },
         {"tile_y", "tile_x"}};
  check_template(c, "matmul 64x96x48");
}

TEST(GpuTemplatesTest, DenseOnOpenCL) {
  const int m = 8, n = 40, k = 72;  // x [M, K], w [N, K]: a small batch, the weight transposed
  Case c{[] {
           te::Tensor x = te::placeholder({m, k}, ir::kFloat32, "x");
           te::Tensor w = te::placeholder({n, k}, ir::kFloat32, "w");
           return std::vector<te::Tensor>{x, w, topi::dense(x, w)};
         },
         topi::gpu::matmul_gpu_space, topi::gpu::matmul_gpu_default, topi::gpu::schedule_matmul_gpu,
         [](const std::vector<std::vector<float>>& in) {
           std::vector<float> out(m * n, 0.0f);
           for (int i = 0; i < m; ++i)
             for (int j = 0; j < n; ++j) {
               double acc = 0;
               for (int r = 0; r < k; ++r) acc += double(in[0][i * k + r]) * in[1][j * k + r];
               out[i * n + j] = float(acc);
             }
           return out;
         },
         {"tile_y", "tile_x"}};
  check_template(c, "dense 8x40x72");
}

struct ConvShape {
  int c, hw, k, kernel, stride, pad;
  int out() const { return (hw + 2 * pad - kernel) / stride + 1; }
};

Case conv_case(ConvShape s) {
  return Case{[s] {
                te::Tensor x = te::placeholder({1, s.c, s.hw, s.hw}, ir::kFloat32, "data");
                te::Tensor w = te::placeholder({s.k, s.c, s.kernel, s.kernel}, ir::kFloat32, "kernel");
                return std::vector<te::Tensor>{
                    x, w, topi::conv2d_nchw(x, w, {s.stride, s.stride}, {s.pad, s.pad, s.pad, s.pad})};
              },
              topi::gpu::conv2d_nchw_gpu_space, topi::gpu::conv2d_nchw_gpu_default, topi::gpu::schedule_conv2d_nchw_gpu,
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

TEST(GpuTemplatesTest, Conv2d3x3OnOpenCL) { check_template(conv_case({16, 14, 32, 3, 1, 1}), "conv 3x3 s1"); }
TEST(GpuTemplatesTest, Conv2d3x3Stride2OnOpenCL) { check_template(conv_case({8, 15, 16, 3, 2, 1}), "conv 3x3 s2"); }
TEST(GpuTemplatesTest, Conv2d1x1Stride2OnOpenCL) { check_template(conv_case({16, 14, 24, 1, 2, 0}), "conv 1x1 s2"); }
TEST(GpuTemplatesTest, Conv2d7x7OnOpenCL) { check_template(conv_case({3, 32, 8, 7, 2, 3}), "conv 7x7 s2"); }

TEST(GpuTemplatesTest, InjectiveOnOpenCL) {
  std::string why;
  if (!DeviceAPI::available(DeviceKind::kOpenCL, &why)) GTEST_SKIP() << why;
  DeviceAPI& gpu = DeviceAPI::get(DeviceKind::kOpenCL);
  for (int threads : {32, 64, 100}) {
    te::Tensor x = te::placeholder({3, 5, 7}, ir::kFloat32, "x");
    te::Tensor y = topi::relu(x);
    te::Schedule s = te::create_schedule({y});
    topi::gpu::schedule_injective(s, y, threads);
    std::vector<float> in = random_values(105, 3);
    std::vector<float> out = run(gpu, compiler::build_gpu(s, {x, y}, target::Target::parse("opencl"), "relu"), {in}, 105);
    for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], std::max(in[i], 0.0f)) << i << " threads " << threads;
  }
}

}  // namespace
}  // namespace kiln
