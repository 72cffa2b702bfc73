// A quantize_static-style QDQ network (uint8 activations, per-channel int8 weights, int32 biases)
// in alter_layout's NCHW16c from its first quantized convolution to its last: a 3x3 convolution,
// a depthwise 3x3 and a 1x1 one, a residual Add between QDQ pairs, a MaxPool on the bytes and a
// GlobalAveragePool. Structure: all three convolutions are integer and blocked, and the only
// layout conversions are the edges (into the first convolution, out to each graph output).
// Numbers: every build (fused or not, blocked or not) within 1 LSB of ONNX Runtime running the
// same QDQ graph, and the builds equal to each other exactly (the same integer sums and the same
// float requantization, in another layout).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/graph_build_check.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;
using Ints = std::vector<int64_t>;
using onnx::TensorProto;

/// An int32 initializer.
void init_int32(MB& m, const std::string& name, const std::vector<int32_t>& values) {
  auto* t = m.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT32);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int32_t v : values) t->add_int32_data(v);
}

/// Builds the network's QDQ nodes; every activation is a DequantizeLinear output (float).
class QdqNet {
 public:
  MB m;

  /// QuantizeLinear(t, s, z) to uint8, then DequantizeLinear back; returns the float name.
  std::string qdq(const std::string& t, float s, int z) {
    const std::string q = t + "_q";
    m.init_scalar(q + "_s", s);
    m.init_8bit(q + "_z", {}, TensorProto::UINT8, {z});
    m.node("QuantizeLinear", {t, q + "_s", q + "_z"}, {q});
    m.node("DequantizeLinear", {q, q + "_s", q + "_z"}, {q + "_dq"});
    return q + "_dq";
  }

  /// A convolution of `x` (dequantized at scale sx) by random per-channel int8 weights with an
  /// int32 bias, [Relu], quantized at (sy, zy) and dequantized again.
  std::string conv(const std::string& name, const std::string& x, float sx, int64_t c, int64_t o,
                   int64_t k, int64_t group, bool relu, float sy, int zy) {
    std::mt19937 gen(static_cast<uint32_t>(name.size() * 7 + o));
    std::uniform_int_distribution<int> wd(-127, 127), bd(-2000, 2000);
    const int64_t cg = c / group;
    std::vector<int> w(static_cast<size_t>(o * cg * k * k));
    for (int& v : w) v = wd(gen);
    std::vector<float> sw, sb;
    std::vector<int32_t> b, bz(static_cast<size_t>(o), 0);
    for (int64_t f = 0; f < o; ++f) {
      sw.push_back(0.004f + 0.0002f * static_cast<float>(f % 7) / static_cast<float>(cg));
      sb.push_back(sx * sw.back());
      b.push_back(bd(gen));
    }
    m.init_8bit(name + "_w", {o, cg, k, k}, TensorProto::INT8, w);
    m.init_values(name + "_ws", {o}, sw);
    m.init_8bit(name + "_wz", {o}, TensorProto::INT8, std::vector<int>(static_cast<size_t>(o), 0));
    auto* dw =
        m.node("DequantizeLinear", {name + "_w", name + "_ws", name + "_wz"}, {name + "_wf"});
    MB::attr(dw, "axis", int64_t{0});
    init_int32(m, name + "_b", b);
    m.init_values(name + "_bs", {o}, sb);
    init_int32(m, name + "_bz", bz);
    auto* db =
        m.node("DequantizeLinear", {name + "_b", name + "_bs", name + "_bz"}, {name + "_bf"});
    MB::attr(db, "axis", int64_t{0});
    auto* cv = m.node("Conv", {x, name + "_wf", name + "_bf"}, {name + "_y"});
    MB::attr(cv, "kernel_shape", Ints{k, k});
    MB::attr(cv, "pads", Ints{k / 2, k / 2, k / 2, k / 2});
    MB::attr(cv, "group", group);
    std::string y = name + "_y";
    if (relu) {
      m.node("Relu", {y}, {name + "_r"});
      y = name + "_r";
    }
    return qdq(y, sy, zy);
  }
};

class Int8Layout : public GraphBuildTest {};

TEST_F(Int8Layout, QdqNetworkRunsBlockedBetweenItsEdgesWithin1LsbOfOnnxRuntime) {
  QdqNet n;
  const float s0 = 1.0f / 100, s1 = 0.02f, s2 = 0.03f, s3 = 0.04f, s4 = 0.05f, s5 = 0.01f;
  n.m.input("x", {1, 8, 12, 12});
  const std::string x = n.qdq("x", s0, 128);
  const std::string a = n.conv("c1", x, s0, 8, 32, 3, 1, true, s1, 0);
  const std::string d = n.conv("dw", a, s1, 32, 32, 3, 32, true, s2, 0);
  const std::string p = n.conv("pw", d, s2, 32, 32, 1, 1, false, s3, 128);
  n.m.node("Add", {a, p}, {"sum"});
  const std::string r = n.qdq("sum", s4, 128);
  auto* mp = n.m.node("MaxPool", {r}, {"pooled"});
  MB::attr(mp, "kernel_shape", Ints{2, 2});
  MB::attr(mp, "strides", Ints{2, 2});
  const std::string pq = n.qdq("pooled", s4, 128);
  n.m.node("GlobalAveragePool", {pq}, {"gap"});
  const std::string g = n.qdq("gap", s5, 128);
  n.m.output(r);
  n.m.output(g);
  const std::vector<float> lsb = {s4, s5};

  const std::string path = (dir_.path() / "qdq_net.onnx").string();
  ASSERT_TRUE(n.m.write(path));
  const Graph graph = import_onnx(path);
  const runtime::NDArray input = testing::random_array({1, 8, 12, 12}, 7);
  runtime::save_npy((dir_.path() / "x.npy").string(), input);
  std::vector<runtime::NDArray> first;
  std::vector<runtime::NDArray> ort;
  if (have_onnxruntime()) {
    const std::string script = (dir_.path() / "ort.py").string();
    {
      std::ofstream out(script);
      out << kOrtScript;
    }
    const std::string cmd = "python3 '" + script + "' '" + path + "' '" + dir_.path().string() +
                            "' 'x=" + (dir_.path() / "x.npy").string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    for (size_t i = 0; i < lsb.size(); ++i) {
      ort.push_back(
          runtime::load_npy((dir_.path() / ("ort_" + std::to_string(i) + ".npy")).string()));
    }
  }
  for (bool alter : {true, false}) {
    for (bool fuse : {true, false}) {
      SCOPED_TRACE(std::string(fuse ? "fused" : "not fused") + (alter ? "" : ", NCHW"));
      BuildOptions options;
      options.fuse = fuse;
      options.alter_layout = alter;
      BuildReport rep;
      runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(
          build_graph(graph, "llvm -mcpu=native", options, &rep), "qdq_net");
      EXPECT_EQ(rep.integer_convolutions, 3u);
      EXPECT_TRUE(rep.qconvs_kept_float.empty());
      if (alter) {
        EXPECT_EQ(rep.convolutions_blocked, 3u);
        // Into the first convolution (8 channels in blocks of 8) and out to the two outputs:
        // none between the convolutions, the residual Add, the pools and their QDQ pairs.
        EXPECT_EQ(rep.layout_conversions, 3u);
      }
      exec.set_input("x", input);
      exec.run();
      ASSERT_EQ(exec.num_outputs(), lsb.size());
      for (size_t i = 0; i < lsb.size(); ++i) {
        runtime::NDArray got = exec.output(i).copy();
        const float* v = got.data<float>();
        if (first.size() > i) {
          ASSERT_EQ(got.shape(), first[i].shape());
          for (int64_t e = 0; e < got.num_elements(); ++e) {
            ASSERT_EQ(v[e], first[i].data<float>()[e]) << "output " << i << " element " << e;
          }
        } else {
          first.push_back(got.copy());
        }
        if (ort.empty()) continue;
        ASSERT_EQ(got.shape(), ort[i].shape());
        const float* want = ort[i].data<float>();
        int64_t exact = 0;
        for (int64_t e = 0; e < got.num_elements(); ++e) {
          const float steps = std::fabs(v[e] - want[e]) / lsb[i];
          ASSERT_LE(steps, 1.001f) << "output " << i << " element " << e << ": " << v[e]
                                   << " vs ONNX Runtime's " << want[e];
          exact += steps < 0.5f;
        }
        // The model is not degenerate: most elements agree exactly, and they are not all one
        // value.
        EXPECT_GE(exact * 10, got.num_elements() * 9) << "output " << i;
        EXPECT_NE(*std::min_element(v, v + got.num_elements()),
                  *std::max_element(v, v + got.num_elements()))
            << "output " << i;
      }
    }
  }
  if (ort.empty()) GTEST_SKIP() << "onnxruntime is not installed for python3";
}

}  // namespace
}  // namespace kiln::graph
