// Features of lowered loop programs (compiler/autotune/features.h): one fixed length, sensitive
// to the schedule (loops, vectorization, strides), arithmetic counts that scale with the problem,
// and cheap to extract; the tuner's cheap program (lower_for_analysis, no unrolling) reads as the
// full lowering does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include "compiler/autotune/features.h"
#include "compiler/lower.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/gpu/matmul_gpu.h"
#include "compiler/topi/matmul.h"

namespace kiln {
namespace {

using autotune::kBufferFeatures;
using autotune::kLoopFeatureLength;
using autotune::kLoopLevelFeatures;
using autotune::kProgramOffset;
using autotune::loop_features;
using ir::Var;

struct Matmul {
  te::Tensor a, b, c;
  te::Schedule s;
};

Matmul matmul(int n) {
  Matmul m;
  m.a = te::placeholder({n, n}, ir::kFloat32, "A");
  m.b = te::placeholder({n, n}, ir::kFloat32, "B");
  m.c = topi::matmul(m.a, m.b);
  m.s = te::create_schedule({m.c});
  return m;
}

/// Tiled 32x32 with the reduction split by 4, the inner column loop vectorized.
Matmul tiled_matmul(int n) {
  Matmul m = matmul(n);
  auto st = m.s[m.c];
  auto [yo, xo, yi, xi] = st.tile(st.axis(0), st.axis(1), 32, 32);
  auto [ko, ki] = st.split(st.reduce_axis(0), 4);
  st.reorder({yo, xo, ko, yi, ki, xi});
  st.vectorize(xi);
  return m;
}

std::vector<float> features_of(const Matmul& m) {
  return loop_features(compiler::lower(m.s, {m.a, m.b, m.c}, "f"));
}

std::vector<float> elementwise_add(int n) {
  te::Tensor a = te::placeholder({n}, ir::kFloat32, "A");
  te::Tensor b = te::placeholder({n}, ir::kFloat32, "B");
  te::Tensor c = te::compute(
      {n}, [&](Var i) { return a(i) + b(i); }, "C");
  return loop_features(compiler::lower(te::create_schedule({c}), {a, b, c}, "f"));
}

float program(const std::vector<float>& f, int k) { return f[size_t(kProgramOffset + k)]; }
/// Feature `k` of loop level `level` (innermost = 0).
float loop(const std::vector<float>& f, int level, int k) {
  return f[size_t(autotune::kLoopOffset + level * kLoopLevelFeatures + k)];
}

TEST(AutotuneFeatures, FixedLength) {
  EXPECT_EQ(features_of(matmul(64)).size(), size_t(kLoopFeatureLength));
  EXPECT_EQ(features_of(tiled_matmul(64)).size(), size_t(kLoopFeatureLength));
  EXPECT_EQ(elementwise_add(64).size(), size_t(kLoopFeatureLength));
  EXPECT_EQ(elementwise_add(7).size(), size_t(kLoopFeatureLength));
  // An empty program has the length too.
  ir::PrimFunc empty;
  empty.name = "empty";
  EXPECT_EQ(loop_features(empty).size(), size_t(kLoopFeatureLength));
  for (float v : features_of(tiled_matmul(64))) EXPECT_TRUE(std::isfinite(v));
}

TEST(AutotuneFeatures, SchedulesOfOneMatmulDiffer) {
  auto naive = features_of(matmul(64));
  auto tiled = features_of(tiled_matmul(64));
  ASSERT_EQ(naive.size(), tiled.size());
  int differing = 0;
  for (size_t i = 0; i < naive.size(); ++i) differing += naive[i] != tiled[i] ? 1 : 0;
  std::cout << "naive vs tiled+vectorized matmul: " << differing << " of " << naive.size()
            << " features differ\n";
  EXPECT_GT(differing, 10);
  // The same flops either way (each multiply-add counted per element, vector or not).
  EXPECT_NEAR(program(naive, autotune::kFloatFma), program(tiled, autotune::kFloatFma), 1e-3);
}

TEST(AutotuneFeatures, VectorizedLoopShowsUp) {
  auto naive = features_of(matmul(64));
  auto tiled = features_of(tiled_matmul(64));
  // Innermost level: the 32 lanes of the vector store, kind vectorized.
  EXPECT_EQ(loop(tiled, 0, 3), 1.0f);
  EXPECT_NEAR(loop(tiled, 0, 0), std::log2(33.0), 1e-5);
  EXPECT_EQ(loop(naive, 0, 3), 0.0f);
  EXPECT_EQ(loop(naive, 0, 1), 1.0f);  // serial
  EXPECT_GT(program(tiled, autotune::kVectorFraction), 0.9f);
  EXPECT_EQ(program(naive, autotune::kVectorFraction), 0.0f);
  // Fewer load instructions for the same elements.
  EXPECT_LT(program(tiled, autotune::kLoadInstrs), program(naive, autotune::kLoadInstrs));
  // Some buffer is accessed as a vector.
  bool vector_access = false;
  for (int b = 0; b < autotune::kMaxBuffers; ++b)
    vector_access |= tiled[size_t(autotune::kBufferOffset + b * kBufferFeatures + 6)] == 1.0f;
  EXPECT_TRUE(vector_access);
}

TEST(AutotuneFeatures, StridesOfNaiveMatmul) {
  // C[i, j] += A[i, k] * B[k, j], k innermost: B strides by n = 64, A by 1, C not at all.
  auto f = features_of(matmul(64));
  std::vector<float> inner_strides;
  for (int b = 0; b < 3; ++b)
    inner_strides.push_back(f[size_t(autotune::kBufferOffset + b * kBufferFeatures + 2)]);
  std::sort(inner_strides.begin(), inner_strides.end());
  EXPECT_NEAR(inner_strides[0], 0.0f, 1e-6);             // C
  EXPECT_NEAR(inner_strides[1], 1.0f, 1e-6);             // A: log2(1 + 1)
  EXPECT_NEAR(inner_strides[2], std::log2(65.0), 1e-5);  // B: log2(1 + 64)
}

TEST(AutotuneFeatures, ArithmeticScalesWithProblemSize) {
  auto small = elementwise_add(64), big = elementwise_add(128);
  const double expect = std::log2(129.0) - std::log2(65.0);  // ~ log2(2)
  EXPECT_NEAR(program(big, autotune::kFloatAddSub) - program(small, autotune::kFloatAddSub), expect,
              1e-4);
  EXPECT_NEAR(program(big, autotune::kElemsLoaded) - program(small, autotune::kElemsLoaded),
              std::log2(257.0) - std::log2(129.0), 1e-4);
  EXPECT_NEAR(program(big, autotune::kElemsStored) - program(small, autotune::kElemsStored), expect,
              1e-4);
  EXPECT_EQ(program(small, autotune::kFloatMul), 0.0f);
}

TEST(AutotuneFeatures, ExtractionIsFast) {
  Matmul m = tiled_matmul(1024);
  ir::PrimFunc f = compiler::lower(m.s, {m.a, m.b, m.c}, "f");
  loop_features(f);  // warm up
  const int reps = 200;
  auto t0 = std::chrono::steady_clock::now();
  float sink = 0;
  for (int i = 0; i < reps; ++i) sink += loop_features(f)[0];
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      reps;
  std::cout << "case=feature_extraction program=tiled_matmul_1024 us=" << us << "\n";
  EXPECT_GE(sink, 0.0f);
  EXPECT_LT(us, 1000.0);
}

/// Features of the cheap program (compiler::lower_for_analysis) against the full lowering's:
/// equal but for the index arithmetic, which the copies of unrolled loops fold into constants.
void expect_same_but_index_arithmetic(const std::vector<float>& cheap,
                                      const std::vector<float>& full) {
  ASSERT_EQ(cheap.size(), full.size());
  for (size_t k = 0; k < full.size(); ++k) {
    if (k == size_t(autotune::kStmtOffset + 4) || k == size_t(kProgramOffset + autotune::kIntOps))
      continue;
    EXPECT_NEAR(cheap[k], full[k], 1e-4) << "feature " << k;
  }
}

TEST(AutotuneFeatures, ParallelAndUnrolledLoops) {
  te::Tensor a = te::placeholder({64, 64}, ir::kFloat32, "A");
  te::Tensor b = te::placeholder({64, 64}, ir::kFloat32, "B");
  te::Tensor c = te::compute(
      {64, 64}, [&](Var i, Var j) { return a(i, j) * b(i, j); }, "C");
  te::Schedule s = te::create_schedule({c});
  auto st = s[c];
  auto [jo, ji] = st.split(st.axis(1), 4);
  st.parallel(st.axis(0));
  st.unroll(ji);
  auto f = loop_features(compiler::lower(s, {a, b, c}, "f"));
  // The unrolled loop is gone (four copies of the store); j.outer is serial, i parallel.
  EXPECT_EQ(loop(f, 0, 1), 1.0f);
  EXPECT_NEAR(loop(f, 0, 0), std::log2(17.0), 1e-5);
  EXPECT_EQ(loop(f, 1, 2), 1.0f);
  EXPECT_NEAR(program(f, autotune::kParallelTasks), std::log2(65.0), 1e-5);
  EXPECT_NEAR(f[size_t(autotune::kStmtOffset + 1)], std::log2(5.0), 1e-5);  // four stores per body
  EXPECT_NEAR(program(f, autotune::kFloatMul), std::log2(4097.0), 1e-4);

  // The tuner's cheap program (no unrolling) reads as the copies the full lowering makes.
  expect_same_but_index_arithmetic(
      loop_features(compiler::lower_for_analysis(s, {a, b, c}, "f", target::Target::parse("llvm"))),
      f);
}

/// The GPU group of `f`, position `k`.
float gpu(const std::vector<float>& f, int k) { return f[size_t(autotune::kGpuOffset + k)]; }

TEST(AutotuneFeatures, GpuProgramsShowTheirLaunchAndMemory) {
  te::Tensor x = te::placeholder({64, 128}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({256, 128}, ir::kFloat32, "w");  // [N, K]
  te::Tensor y = topi::dense(x, w);
  const target::Target opencl = target::Target::parse("opencl");
  const space::ConfigSpace space = topi::gpu::matmul_gpu_space(y);
  const space::Config cfg = topi::gpu::matmul_gpu_default(space, opencl);
  te::Schedule s = te::create_schedule({y});
  topi::gpu::schedule_matmul_gpu(s, y, cfg, y);
  const auto f = loop_features(compiler::lower_device_program(s, {x, w, y}, "f", opencl));
  ASSERT_EQ(f.size(), size_t(kLoopFeatureLength));
  // tile_y / tile_x: block, virtual thread, thread, inner; y's rows are threadIdx.y, columns .x.
  const auto ty = cfg.split("tile_y"), tx = cfg.split("tile_x");
  EXPECT_NEAR(gpu(f, autotune::kThreadX), std::log2(1.0 + double(tx[2])), 1e-5);
  EXPECT_NEAR(gpu(f, autotune::kThreadY), std::log2(1.0 + double(ty[2])), 1e-5);
  EXPECT_NEAR(gpu(f, autotune::kThreadsPerBlock), std::log2(1.0 + double(tx[2] * ty[2])), 1e-5);
  EXPECT_NEAR(gpu(f, autotune::kBlocks), std::log2(1.0 + double(tx[0] * ty[0])), 1e-5);
  EXPECT_EQ(gpu(f, autotune::kKernels), 1.0f);  // log2(1 + 1)
  EXPECT_GT(gpu(f, autotune::kSharedBytes), 10.0f) << "the tiles of x and w in shared memory";
  EXPECT_GT(gpu(f, autotune::kBarriers), 0.0f);
  // The tuner's cheap program: the same launch, memory, barriers, loops and accesses.
  expect_same_but_index_arithmetic(
      loop_features(compiler::lower_for_analysis(s, {x, w, y}, "f", opencl)), f);

  // Another point of the space with other thread extents has other features.
  bool compared = false;
  for (uint64_t i = 0; i < space.size(); i += 97) {
    const space::Config other = space.get(i);
    if (other.split("tile_x")[2] == tx[2]) continue;
    te::Schedule s2 = te::create_schedule({y});
    topi::gpu::schedule_matmul_gpu(s2, y, other, y);
    ir::PrimFunc g;
    try {
      g = compiler::lower_device_program(s2, {x, w, y}, "g", opencl);
    } catch (const Error&) {
      continue;  // over the target's limits
    }
    EXPECT_NEAR(gpu(loop_features(g), autotune::kThreadX),
                std::log2(1.0 + other.split("tile_x")[2]), 1e-5);
    compared = true;
    break;
  }
  EXPECT_TRUE(compared) << "no other point of the space lowered";

  // A CPU program has none.
  te::Schedule cpu = te::create_schedule({y});
  const auto c = loop_features(compiler::lower(cpu, {x, w, y}, "c"));
  for (int k = 0; k < autotune::kGpuFeatures; ++k) EXPECT_EQ(gpu(c, k), 0.0f) << k;
}

TEST(AutotuneFeatures, KnobFeatures) {
  space::ConfigSpace space;
  space.define_split("tile_y", 64, 2);
  space.define_knob("unroll", {0, 4, 8});
  auto cfg = space.get(space.size() - 1);
  auto f = autotune::knob_features(space, cfg);
  ASSERT_EQ(f.size(), 3u);
  auto split = cfg.split("tile_y");
  EXPECT_NEAR(f[0], std::log2(double(split[0])), 1e-6);
  EXPECT_NEAR(f[1], std::log2(double(split[1])), 1e-6);
  EXPECT_NEAR(f[2], std::log2(9.0), 1e-6);
  EXPECT_EQ(autotune::knob_features(space, space.get(0)).size(), 3u);
}

}  // namespace
}  // namespace kiln
