// BuildOptions::precision = kBf16 through the graph build: a small network (a 3x3 of 3 input
// channels, blocked as 4 with a zero one, then 3x3 and 1x1 convolutions with bias, Relu and a
// residual Add fused into them, a depthwise convolution that stays float32, global pooling and a
// Gemm) built in bf16 and in float32, run by the graph executor on the same inputs and compared
// with bf16's tolerance (|bf16 - fp32| <= 1e-2 of the output's largest magnitude; the reductions
// are 36-288 long), the bundle's weights int32 pairs and its graph saying "precision": "bf16";
// and the refusal on targets without avx512_bf16, which needs no such CPU (the targets are
// named, not run).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "compiler/codegen/build.h"
#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

Graph small_net() {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {1, 3, 12, 12});  // blocked as 4 in bf16
  auto conv = [&](ValueId in, int64_t cin, int64_t cout, int64_t k, int64_t group, const char* name,
                  uint32_t seed) {
    ValueId w = g.add_constant(std::string(name) + "_w",
                               testing::random_array({cout, cin / group, k, k}, seed, -0.3f, 0.3f));
    ValueId b = g.add_constant(std::string(name) + "_b", testing::random_array({cout}, seed + 1));
    const int64_t p = k / 2;
    return g.add_op("Conv", name, {in, w, b},
                    {{"kernel_shape", Shape{k, k}},
                     {"strides", Shape{1, 1}},
                     {"dilations", Shape{1, 1}},
                     {"pads", Shape{p, p, p, p}},
                     {"group", group}},
                    kFloat32, {1, cout, 12, 12});
  };
  ValueId c1 = conv(x, 3, 32, 3, 1, "c1", 1);
  ValueId r1 = g.add_op("Relu", "r1", {c1}, {}, kFloat32, {1, 32, 12, 12});
  ValueId c2 = conv(r1, 32, 32, 3, 1, "c2", 3);
  ValueId a = g.add_op("Add", "residual", {c2, r1}, {}, kFloat32, {1, 32, 12, 12});
  ValueId dw = conv(a, 32, 32, 3, 32, "dw", 5);  // depthwise: stays float32
  ValueId c3 = conv(dw, 32, 48, 1, 1, "c3", 7);
  ValueId pooled = g.add_op("GlobalAveragePool", "gap", {c3}, {}, kFloat32, {1, 48, 1, 1});
  ValueId flat =
      g.add_op("Flatten", "flatten", {pooled}, {{"axis", int64_t{1}}}, kFloat32, {1, 48});
  ValueId fw = g.add_constant("fc_w", testing::random_array({40, 48}, 9, -0.3f, 0.3f));
  ValueId fb = g.add_constant("fc_b", testing::random_array({40}, 10));
  ValueId y =
      g.add_op("Gemm", "fc", {flat, fw, fb},
               {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", int64_t{0}}, {"transB", int64_t{1}}},
               kFloat32, {1, 40});
  g.add_output(y);
  g.add_output(c3);  // a convolution's output directly, before pooling averages errors away
  return g;
}

bool host_has_bf16() {
  const auto f = codegen::enabled_cpu_features(target::Target::parse("llvm -mcpu=native"));
  return std::find(f.begin(), f.end(), "avx512bf16") != f.end();
}

std::vector<NDArray> run(runtime::Bundle bundle, const NDArray& x) {
  runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), "net");
  exec.set_input("x", x);
  exec.run();
  std::vector<NDArray> out;
  for (size_t i = 0; i < exec.num_outputs(); ++i) out.push_back(exec.output(i).copy());
  return out;
}

TEST(Bf16Build, SmallNetMatchesFloat32) {
  if (!host_has_bf16()) GTEST_SKIP() << "this CPU has no avx512_bf16 (the refusal is tested)";
  const Graph g = small_net();
  const NDArray x = testing::random_array({1, 3, 12, 12}, 42);
  BuildOptions bf16;
  bf16.precision = Precision::kBf16;
  BuildReport rep;
  runtime::Bundle bundle = build_graph(g, "llvm -mcpu=native", bf16, &rep);
  // c1 (its 3 channels blocked as 4), c2, c3; not the depthwise one.
  EXPECT_EQ(rep.bf16_convolutions, 3u);
  EXPECT_EQ(rep.bf16_products, 1u);  // the Gemm
  EXPECT_EQ(Json::parse(bundle.graph_json).at("precision", "graph").as_string("precision"), "bf16");
  size_t int32_weights = 0;
  for (const auto& [name, a] : bundle.params) int32_weights += a.dtype().code == kKilnInt ? 1 : 0;
  EXPECT_EQ(int32_weights, 4u);
  runtime::Bundle fp32 = build_graph(g, "llvm -mcpu=native");
  EXPECT_FALSE(Json::parse(fp32.graph_json).has("precision"));
  const std::vector<NDArray> got = run(std::move(bundle), x), want = run(std::move(fp32), x);
  ASSERT_EQ(got.size(), 2u);
  for (size_t o = 0; o < got.size(); ++o) {
    const std::vector<float> w = want[o].to_vector<float>(), b = got[o].to_vector<float>();
    float peak = 0, worst = 0;
    for (float v : w) peak = std::max(peak, std::fabs(v));
    for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::fabs(w[i] - b[i]));
    EXPECT_LE(worst, 1e-2f * peak) << "output " << o;
    EXPECT_GT(worst, 1e-6f * peak) << "output " << o << ": identical to float32, not bf16";
  }
}

TEST(Bf16Build, RefusedWithoutAvx512Bf16) {
  const Graph g = small_net();
  BuildOptions bf16;
  bf16.precision = Precision::kBf16;
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm -mcpu=skylake-avx512", bf16),
                        "--precision bf16 needs avx512_bf16 (vdpbf16ps); target 'llvm "
                        "-mcpu=skylake-avx512' (CPU 'skylake-avx512') has");
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm -mcpu=skylake-avx512", bf16),
                        "avx512f, avx512bw, avx512vl but not avx512_bf16");
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm -mcpu=znver3", bf16), "avx2, fma but not avx512_bf16");
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm -mcpu=sapphirerapids -mattr=-avx512bf16", bf16),
                        "but not avx512_bf16");
  EXPECT_ERROR_CONTAINS(build_graph(g, "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53", bf16),
                        "needs avx512_bf16");
  EXPECT_ERROR_CONTAINS(build_graph(g, "opencl", bf16), "target 'opencl' is not a CPU");
  EXPECT_ERROR_CONTAINS(parse_precision("fp16"), "unknown precision 'fp16' (known: fp32, bf16)");
}

TEST(Bf16Build, TunedAsTheirFloat32Templates) {
  // The bf16 kernels are tasks of the float32 templates with their own workloads (kiln tune
  // --precision bf16 tunes them); extracted for a CPU with avx512_bf16, nothing run.
  BuildOptions bf16;
  bf16.precision = Precision::kBf16;
  std::map<std::string, int> computes;
  for (const autotune::Task& t : extract_tasks(small_net(), "llvm -mcpu=sapphirerapids", bf16)) {
    const std::string compute = Json::parse(t.workload).at("compute", "workload").as_string("c");
    ++computes[t.template_name + " " + compute];
  }
  EXPECT_EQ(computes["conv2d_nchwc_x86 conv2d_nchwc_bf16"], 3);  // c1, c2 and c3 differ
  EXPECT_EQ(computes["dense_x86 dense_packed_bf16"], 1);
  EXPECT_EQ(computes["depthwise_conv2d_nchwc_x86 depthwise_conv2d_nchwc"], 1);
  EXPECT_EQ(computes["conv2d_nchwc_x86 conv2d_nchwc"], 0);
}

}  // namespace
}  // namespace kiln::graph
