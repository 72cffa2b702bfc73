// The heterogeneous build (`--target vdla`, compiler/graph/offload_vdla.h): a small QDQ network
// built by hand through the graph IR (five power-of-two quantized convolutions that realize_qconv
// makes QConv nodes, a residual add, relu and maxpool in the dequantized domain) compiled for the
// VDLA beside the CPU and for the host CPU alone (every QConv there, BuildOptions::offload_vdla
// off) gives IDENTICAL int8 outputs, and the CPU target's ConvInteger form stays within a few LSB;
// the report says which convolutions went to the VDLA and why the others stayed on the CPU;
// consecutive VDLA convolutions stay in the blocked layout; a VDLA bundle runs its offloaded nodes
// on the simulator (their cycles kept).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/json.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/offload_vdla.h"
#include "deploy/runtime/graph_executor.h"
#include "tests/common/expect_error.h"

namespace kiln::graph {
namespace {

using runtime::NDArray;

template <typename T>
NDArray random_vector(size_t n, std::vector<int64_t> shape, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return NDArray::from_vector(v, std::move(shape));
}

/// The QDQ form of a quantized convolution (realize_qconv makes it one QConv): x_q (scale 2^-4)
/// -> DequantizeLinear -> Conv(DQ(random w_q [oc, ic/group, k, k], 2^-shift), DQ(random b_q,
/// 2^-4 * 2^-shift)) [-> Relu] -> QuantizeLinear(2^-4): QConv's shift is `shift`.
ValueId qconv(Graph& g, const std::string& name, ValueId x, int oc, int k, int stride, int pad,
              bool relu, uint32_t seed, int group = 1, int shift = 9) {
  const std::vector<int64_t> xs = g.value(x).shape;
  const int ic = static_cast<int>(xs[1]);
  const int64_t oh = (xs[2] + 2 * pad - k) / stride + 1, ow = (xs[3] + 2 * pad - k) / stride + 1;
  const std::vector<int64_t> ys{xs[0], oc, oh, ow};
  auto scalar = [&](const std::string& n, float v) {
    return g.add_constant(name + n, NDArray::from_vector(std::vector<float>{v}, {}));
  };
  const ValueId z8 = g.add_constant(name + "_z8", NDArray::from_vector(std::vector<int8_t>{0}, {}));
  const ValueId z32 =
      g.add_constant(name + "_z32", NDArray::from_vector(std::vector<int32_t>{0}, {}));
  const float sx = 1.0f / 16, sw = std::ldexp(1.0f, -shift);
  const Attrs axis0{{"axis", int64_t{0}}}, axis1{{"axis", int64_t{1}}};
  const ValueId xd = g.add_op("DequantizeLinear", name + "_dqx", {x, scalar("_sx", sx), z8}, axis1,
                              runtime::kFloat32, xs);
  const ValueId wq = g.add_constant(
      name + "_w", random_vector<int8_t>(static_cast<size_t>(oc) * ic / group * k * k,
                                         {oc, ic / group, k, k}, -40, 40, seed));
  const ValueId wd = g.add_op("DequantizeLinear", name + "_dqw", {wq, scalar("_sw", sw), z8}, axis0,
                              runtime::kFloat32, {oc, ic / group, k, k});
  const ValueId bq = g.add_constant(
      name + "_b", random_vector<int32_t>(static_cast<size_t>(oc), {oc}, -3000, 3000, seed + 1));
  const ValueId bd = g.add_op("DequantizeLinear", name + "_dqb", {bq, scalar("_sb", sx * sw), z32},
                              axis0, runtime::kFloat32, {oc});
  Attrs a{{"strides", std::vector<int64_t>{stride, stride}},
          {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
          {"dilations", std::vector<int64_t>{1, 1}},
          {"group", int64_t{group}},
          {"kernel_shape", std::vector<int64_t>{k, k}},
          {"auto_pad", std::string("NOTSET")}};
  ValueId y = g.add_op("Conv", name, {xd, wd, bd}, a, runtime::kFloat32, ys);
  if (relu) y = g.add_op("Relu", name + "_relu", {y}, {}, runtime::kFloat32, ys);
  return g.add_op("QuantizeLinear", name + "_q", {y, scalar("_sy", sx), z8}, axis1, runtime::kInt8,
                  ys);
}

/// x_q [1, 8, 16, 16] -> c1 (8 channels: CPU) -> c2 -> c3 (VDLA, blocked between them)
///   -> DQ(c3) + DQ(c1) -> Relu -> MaxPool 2x2 -> Q -> c4 1x1 (VDLA) -> c5 group 2 (CPU).
Graph network() {
  Graph g;
  const ValueId x = g.add_input("x_q", runtime::kInt8, {1, 8, 16, 16});
  const ValueId c1 = qconv(g, "c1", x, 32, 3, 1, 1, true, 10, 1, 8);
  const ValueId c2 = qconv(g, "c2", c1, 32, 3, 1, 1, true, 20);
  const ValueId c3 = qconv(g, "c3", c2, 32, 3, 1, 1, false, 30);
  const ValueId sc = g.add_constant("s", NDArray::from_vector(std::vector<float>{1.0f / 16}, {}));
  const ValueId z = g.add_constant("z", NDArray::from_vector(std::vector<int8_t>{0}, {}));
  const std::vector<int64_t> shape{1, 32, 16, 16};
  const ValueId d3 = g.add_op("DequantizeLinear", "dq3", {c3, sc, z}, {{"axis", int64_t{1}}},
                              runtime::kFloat32, shape);
  const ValueId d1 = g.add_op("DequantizeLinear", "dq1", {c1, sc, z}, {{"axis", int64_t{1}}},
                              runtime::kFloat32, shape);
  const ValueId sum = g.add_op("Add", "add", {d3, d1}, {}, runtime::kFloat32, shape);
  const ValueId r = g.add_op("Relu", "relu", {sum}, {}, runtime::kFloat32, shape);
  const ValueId p = g.add_op("MaxPool", "pool", {r},
                             {{"kernel_shape", std::vector<int64_t>{2, 2}},
                              {"strides", std::vector<int64_t>{2, 2}},
                              {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                              {"dilations", std::vector<int64_t>{1, 1}},
                              {"ceil_mode", int64_t{0}},
                              {"auto_pad", std::string("NOTSET")},
                              {"storage_order", int64_t{0}}},
                             runtime::kFloat32, {1, 32, 8, 8});
  const ValueId q = g.add_op("QuantizeLinear", "q", {p, sc, z}, {{"axis", int64_t{1}}},
                             runtime::kInt8, {1, 32, 8, 8});
  const ValueId c4 = qconv(g, "c4", q, 64, 1, 1, 0, true, 40, 1, 7);
  g.add_output(qconv(g, "c5", c4, 32, 3, 2, 1, false, 50, 2));
  g.verify();
  return g;
}

/// `b`'s output for input `x`, run with --device `device`.
NDArray run(const runtime::Bundle& b, const NDArray& x, TargetKind device = TargetKind::kCpu) {
  auto g = runtime::GraphExecutor::from_bundle(runtime::Bundle{b.graph_json,
                                                               b.library,
                                                               [&] {
                                                                 std::map<std::string, NDArray> p;
                                                                 for (const auto& [k, v] : b.params)
                                                                   p.emplace(k, v.copy());
                                                                 return p;
                                                               }(),
                                                               {},
                                                               b.vdla_programs},
                                               "net", device);
  g.set_input("x_q", x);
  g.run();
  EXPECT_EQ(g.has_vdla(), !b.vdla_programs.empty());
  if (g.has_vdla()) {
    EXPECT_EQ(g.vdla_stats().size(), b.vdla_programs.size());
    EXPECT_GT(g.vdla_total().cycles, 0u);
    EXPECT_GT(g.vdla_total().gemm_counter, 0u);
  }
  return g.output(0).copy();
}

TEST(VdlaOffload, HeterogeneousBuildIsBitExactWithTheHostBuild) {
  const Graph g = network();
  BuildReport host_rep, vdla_rep, cpu_rep;
  BuildOptions on_host;
  on_host.offload_vdla = false;
  const runtime::Bundle cpu = build_graph(g, "vdla", on_host, &host_rep);
  const runtime::Bundle het = build_graph(g, "vdla", {}, &vdla_rep);
  EXPECT_TRUE(cpu.vdla_programs.empty());
  EXPECT_EQ(host_rep.qconvs_realized, 5u);
  EXPECT_EQ(vdla_rep.qconvs_realized, 5u);
  // The CPU target takes the same patterns as ConvInteger in ONNX Runtime's arithmetic (round
  // half to even, not QConv's half up): within a few LSB of QConv's after five layers.
  const runtime::Bundle ort_like = build_graph(g, "llvm -mcpu=native", {}, &cpu_rep);
  EXPECT_EQ(cpu_rep.qconvs_realized, 0u);
  EXPECT_EQ(cpu_rep.integer_convolutions, 5u);
  ASSERT_EQ(het.vdla_programs.size(), 3u);
  EXPECT_EQ(vdla_rep.vdla_convolutions, 5u);
  EXPECT_EQ(vdla_rep.vdla_offloaded, 3u);
  ASSERT_EQ(vdla_rep.vdla_kept_on_cpu.size(), 2u);
  EXPECT_NE(vdla_rep.vdla_kept_on_cpu[0].find("c1 stays on the CPU: 8 input channels"),
            std::string::npos)
      << vdla_rep.vdla_kept_on_cpu[0];
  EXPECT_NE(vdla_rep.vdla_kept_on_cpu[1].find("c5 stays on the CPU: group 2"), std::string::npos)
      << vdla_rep.vdla_kept_on_cpu[1];
  ASSERT_EQ(vdla_rep.vdla_placed.size(), 3u);
  EXPECT_EQ(vdla_rep.vdla_placed[0].rfind("c2: on the VDLA (32x16x16 -> 32 k3 s1 p1", 0), 0u)
      << vdla_rep.vdla_placed[0];
  // c2 -> c3 stay blocked: the graph converts to the VDLA's layout before c2 and c4 only, and
  // back after c3 and c4 (c2's NCHW output has no reader).
  const kiln::Json graph = kiln::Json::parse(het.graph_json, "graph");
  size_t on_vdla = 0;
  for (const kiln::Json& n : graph.at("nodes", "g").as_array("nodes")) on_vdla += n.has("target");
  EXPECT_EQ(on_vdla, 3u);
  EXPECT_EQ(het.graph_json.find("c2_vdla_layout"),
            std::string::npos);  // its conversion back was dropped
  for (uint32_t seed : {1u, 2u, 3u}) {
    const NDArray x = random_vector<int8_t>(8 * 16 * 16, {1, 8, 16, 16}, -128, 127, seed);
    const NDArray a = run(cpu, x), b = run(het, x);
    const auto va = a.to_vector<int8_t>(), vb = b.to_vector<int8_t>();
    ASSERT_EQ(va, vb) << "seed " << seed;
    const auto vo = run(ort_like, x).to_vector<int8_t>();
    ASSERT_EQ(vo.size(), va.size());
    int worst = 0;
    for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::abs(vo[i] - va[i]));
    EXPECT_LE(worst, 4) << "seed " << seed;
    // The comparison means something: outputs spread, few saturated.
    size_t sat = 0, zero = 0;
    for (int8_t v : va) {
      sat += v == 127 || v == -128;
      zero += v == 0;
    }
    EXPECT_LT(sat, va.size() / 4);
    EXPECT_LT(zero, va.size() / 2);
  }
}

TEST(VdlaOffload, UnsupportedFormsStayOnTheCpuWithTheirReasons) {
  Graph g;
  const ValueId x = g.add_input("x_q", runtime::kInt8, {2, 16, 8, 8});
  g.add_output(qconv(g, "batch2", x, 16, 3, 1, 1, true, 1));
  BuildReport rep;
  const runtime::Bundle b = build_graph(g, "vdla", {}, &rep);
  EXPECT_TRUE(b.vdla_programs.empty());
  EXPECT_EQ(rep.vdla_offloaded, 0u);
  ASSERT_EQ(rep.vdla_kept_on_cpu.size(), 1u);
  EXPECT_NE(rep.vdla_kept_on_cpu[0].find("batch 2"), std::string::npos) << rep.vdla_kept_on_cpu[0];
}

// A heterogeneous bundle's device is the VDLA: it runs with --device vdla, or with the default
// cpu (its host library runs there anyway); a CPU bundle refuses vdla, a VDLA bundle a GPU.
TEST(VdlaOffload, AHeterogeneousBundleRunsWithDeviceVdla) {
  const Graph g = network();
  const runtime::Bundle cpu = build_graph(g, "llvm -mcpu=native");
  const runtime::Bundle het = build_graph(g, "vdla");
  EXPECT_EQ(runtime::bundle_device(cpu), TargetKind::kCpu);
  EXPECT_EQ(runtime::bundle_device(het), TargetKind::kVdla);
  const NDArray x = random_vector<int8_t>(8 * 16 * 16, {1, 8, 16, 16}, -128, 127, 4);
  EXPECT_EQ(run(het, x, TargetKind::kVdla).to_vector<int8_t>(), run(het, x).to_vector<int8_t>());
  EXPECT_ERROR_CONTAINS(
      run(het, x, TargetKind::kCuda),
      "bundle 'net' was built for the CPU and the VDLA; run it without --device cuda");
  EXPECT_ERROR_CONTAINS(
      run(cpu, x, TargetKind::kVdla),
      "bundle 'net' was built for the CPU (it holds no device code); run it without --device vdla");
}

}  // namespace
}  // namespace kiln::graph
