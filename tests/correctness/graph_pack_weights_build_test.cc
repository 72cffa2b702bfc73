// pack_weights through the graph build: graphs with constant dense, LSTM and GRU weights built with
// the weights packed (dense_packed, recurrent panels given by the graph) and without (the weights
// as the model gives them), run by the graph executor, the outputs compared. Tolerance 1e-4
// relative + 1e-5 absolute (the two builds sum in different orders only where tiles differ).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/graph_build.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/kiln_test_util.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::NDArray;
using Shape = std::vector<int64_t>;

ValueId add_random(Graph& g, const std::string& name, const Shape& shape, uint32_t seed,
                   float scale = 0.5f) {
  return g.add_constant(name, testing::random_array(shape, seed, -scale, scale));
}

Attrs gemm_attrs(int64_t trans_b) {
  return {{"alpha", 1.0f}, {"beta", 1.0f}, {"transA", int64_t{0}}, {"transB", trans_b}};
}

/// Builds `g` with and without packing, runs both on the same random inputs, compares outputs.
void check_packed_matches_unpacked(const Graph& g, const std::string& tag) {
  std::vector<NDArray> inputs;
  uint32_t seed = 1;
  for (ValueId v : g.inputs()) inputs.push_back(testing::random_array(g.value(v).shape, seed++));
  std::vector<std::vector<NDArray>> outs;
  for (bool pack : {true, false}) {
    BuildOptions options;
    options.pack_weights = pack;
    runtime::Bundle bundle = build_graph(g, "llvm -mcpu=native", options);
    // The packed weights are what the bundle carries.
    EXPECT_EQ(bundle.graph_json.find(".packed") != std::string::npos, pack) << bundle.graph_json;
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(std::move(bundle), tag);
    for (size_t i = 0; i < inputs.size(); ++i)
      exec.set_input(g.value(g.inputs()[i]).name, inputs[i]);
    exec.run();
    outs.emplace_back();
    for (size_t i = 0; i < exec.num_outputs(); ++i) outs.back().push_back(exec.output(i).copy());
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t i = 0; i < outs[0].size(); ++i) {
    EXPECT_TRUE(testing::all_close(outs[0][i], outs[1][i].to_vector<float>(), 1e-4, 1e-5))
        << tag << " output " << i;
  }
}

TEST(PackWeightsBuild, GemmGemvWithFusedEpilogue) {
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    Graph g;
    ValueId x = g.add_input("x", kFloat32, {1, 200});
    ValueId w = add_random(g, "w", {120, 200}, 11);  // transB, N = 120: panels of 40
    ValueId b = add_random(g, "b", {120}, 12);
    ValueId y = g.add_op("Gemm", "fc", {x, w, b}, gemm_attrs(1), kFloat32, {1, 120});
    ValueId r = g.add_op("Relu", "relu", {y}, {}, kFloat32, {1, 120});
    ValueId w2 = add_random(g, "w2", {120, 64}, 13);  // N = 64: one panel
    ValueId z = g.add_op("Gemm", "fc2", {r, w2}, gemm_attrs(0), kFloat32, {1, 64});
    g.add_output(z);
    check_packed_matches_unpacked(g, "gemv");
  }
  runtime::set_num_threads(0);
}

TEST(PackWeightsBuild, GemmRowsAndPaddedPanels) {
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {6, 33});
  ValueId w = add_random(g, "w", {33, 18}, 14);  // N = 18: padded panels of 16
  ValueId b = add_random(g, "b", {1, 18}, 15);
  ValueId y = g.add_op("Gemm", "fc", {x, w, b}, gemm_attrs(0), kFloat32, {6, 18});
  g.add_output(y);
  check_packed_matches_unpacked(g, "padded");
}

TEST(PackWeightsBuild, GemmOfPrimeRowsWithAResidual) {
  // An attention's output projection: 197 tokens (a prime: the product pads them to 200 for
  // the register tile and crops), a bias, alpha 0.5, and the residual Add fused after it.
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    Graph g;
    ValueId x = g.add_input("x", kFloat32, {197, 48});
    ValueId skip = g.add_input("skip", kFloat32, {197, 64});
    ValueId w = add_random(g, "w", {64, 48}, 19);  // transB
    ValueId b = add_random(g, "b", {64}, 20);
    Attrs a = gemm_attrs(1);
    a["alpha"] = 0.5f;
    ValueId y = g.add_op("Gemm", "proj", {x, w, b}, a, kFloat32, {197, 64});
    g.add_output(g.add_op("Add", "residual", {y, skip}, {}, kFloat32, {197, 64}));
    check_packed_matches_unpacked(g, "prime_rows");
  }
  runtime::set_num_threads(0);
}

TEST(PackWeightsBuild, MatMulOfSequenceByConstantPlusBias) {
  // The LSTM LM's decoder in small: [T, 1, K] x [K, N] + b, N = 160 (panels of 80).
  Graph g;
  ValueId a = g.add_input("a", kFloat32, {35, 1, 24});
  ValueId w = add_random(g, "w", {24, 160}, 16);
  ValueId b = add_random(g, "b", {160}, 17);
  ValueId y = g.add_op("MatMul", "mm", {a, w}, {}, kFloat32, {35, 1, 160});
  ValueId z = g.add_op("Add", "add", {y, b}, {}, kFloat32, {35, 1, 160});
  g.add_output(z);
  check_packed_matches_unpacked(g, "decoder");

  Graph g2;  // 2-D
  ValueId a2 = g2.add_input("a", kFloat32, {7, 32});
  ValueId w2 = add_random(g2, "w", {32, 64}, 18);
  g2.add_output(g2.add_op("MatMul", "mm", {a2, w2}, {}, kFloat32, {7, 64}));
  check_packed_matches_unpacked(g2, "matmul2d");
}

/// An LSTM or GRU (`op`) of `direction` with constant weights, initial states when `initial`.
void check_recurrent(const std::string& op, const std::string& direction, int64_t T, int64_t B,
                     int64_t I, int64_t H, bool initial, int64_t linear_before_reset = 0) {
  const bool gru = op == "GRU";
  const int64_t d = direction == "bidirectional" ? 2 : 1, gates = (gru ? 3 : 4) * H;
  Graph g;
  ValueId x = g.add_input("x", kFloat32, {T, B, I});
  Node n;
  n.op = op;
  n.name = "rnn";
  n.inputs = {x, add_random(g, "W", {d, gates, I}, 20), add_random(g, "R", {d, gates, H}, 21),
              add_random(g, "B", {d, 2 * gates}, 22)};
  if (initial) {
    n.inputs.push_back(kNoValue);  // sequence_lens
    n.inputs.push_back(g.add_input("h0", kFloat32, {d, B, H}));
    if (!gru) n.inputs.push_back(g.add_input("c0", kFloat32, {d, B, H}));
  }
  n.outputs = {g.add_value("y", kFloat32, {T, d, B, H}), g.add_value("y_h", kFloat32, {d, B, H})};
  if (!gru) n.outputs.push_back(g.add_value("y_c", kFloat32, {d, B, H}));
  n.attrs = {{"direction", direction}, {"hidden_size", H}, {"layout", int64_t{0}}};
  if (gru) {
    n.attrs["linear_before_reset"] = linear_before_reset;
  } else {
    n.attrs["input_forget"] = int64_t{0};
  }
  g.add_node(n);
  for (ValueId v : n.outputs) g.add_output(v);
  check_packed_matches_unpacked(g, op + "_" + direction);
}

TEST(PackWeightsBuild, Lstm) {
  check_recurrent("LSTM", "forward", 4, 1, 10, 12, false);  // 48 gates: panels of 16
  check_recurrent("LSTM", "forward", 3, 2, 30, 70, true);   // 280 gates: padded panels of 64
  // Each direction's panels of one packed weight.
  check_recurrent("LSTM", "bidirectional", 3, 2, 30, 70, true);
  check_recurrent("LSTM", "reverse", 4, 1, 10, 12, false);
}

// A GRU's R in segments: one of 3H gates (linear_before_reset), or 2H then H (H = 20: panels of
// 16, each segment padded).
TEST(PackWeightsBuild, Gru) {
  for (int64_t lbr : {0, 1}) {
    check_recurrent("GRU", "bidirectional", 3, 2, 9, 20, true, lbr);
    check_recurrent("GRU", "forward", 4, 1, 16, 32, false, lbr);
  }
}

}  // namespace
}  // namespace kiln::graph
