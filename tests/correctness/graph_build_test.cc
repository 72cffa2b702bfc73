// The graph build end to end: small ONNX models built here with libonnx's protobuf classes,
// imported, compiled into a bundle (with operator fusion, and without: one function per node), run
// by the graph executor and compared against ONNX Runtime (tests/common/graph_build_check.h).
#include "compiler/graph/graph_build.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

#include "base/json.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/op_lowering.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "tests/common/expect_error.h"
#include "tests/common/graph_build_check.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/temp_dir.h"

namespace kiln::graph {
namespace {

using MB = ModelBuilder;

// A model exported with a symbolic batch ("batch" in both inputs and in the declared output), built
// for batch 1 and 3 through OnnxImportOptions::input_shapes and compared with ONNX Runtime, which
// runs the symbolic model itself at each batch.
TEST_F(GraphBuildTest, SymbolicBatchBoundByInputShapes) {
  MB m;
  m.input("x", {-1, 3, 8, 8}, onnx::TensorProto::FLOAT, "batch");
  m.input("z", {-1, 8}, onnx::TensorProto::FLOAT, "batch");
  m.init("w", {8, 3, 3, 3});
  m.init("b", {8});
  m.init("fc_w", {8, 8});
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"p"});
  m.node("Flatten", {"p"}, {"f"});
  m.node("MatMul", {"f", "fc_w"}, {"g"});
  m.node("Add", {"g", "z"}, {"y"});
  m.output("y");
  auto* out_shape = m.graph()->mutable_output(0)->mutable_type()->mutable_tensor_type();
  out_shape->set_elem_type(onnx::TensorProto::FLOAT);
  out_shape->mutable_shape()->add_dim()->set_dim_param("batch");
  out_shape->mutable_shape()->add_dim()->set_dim_value(8);
  const std::string path = (dir_.path() / "symbolic.onnx").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << m.bytes();
  }
  EXPECT_ERROR_CONTAINS(import_onnx(path),
                        "input 'x' has a symbolic dimension 0 ('batch'); "
                        "give its size with --input-shape x=1,3,8,8");
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    OnnxImportOptions import;
    import.input_shapes = {{"x", { batch, 3, 8, 8 }}, { "z", { batch, 8 } }};
    const Graph g = import_onnx(path, import);
    runtime::Bundle bundle = build_graph(g, "llvm -mcpu=native");
    // The bundle's graph records the shapes it was built for (the executor reads them from it).
    runtime::GraphExecutor exec =
        runtime::GraphExecutor::from_bundle(std::move(bundle), "symbolic");
    ASSERT_EQ(exec.num_inputs(), 2u);
    EXPECT_EQ(exec.input_shape(0), (std::vector<int64_t>{batch, 3, 8, 8}));
    EXPECT_EQ(exec.input_shape(1), (std::vector<int64_t>{batch, 8}));
    compare_with_onnxruntime({{"x", {batch, 3, 8, 8}}, {"z", {batch, 8}}},
                             "symbolic_b" + std::to_string(batch), path, exec);
    EXPECT_EQ(exec.output(0).shape(), (std::vector<int64_t>{batch, 8}));
  }
}

TEST_F(GraphBuildTest, ConvReluPoolFlattenGemmSoftmax) {
  MB m;
  m.input("x", {1, 3, 10, 10});
  m.init("w", {8, 3, 3, 3});
  m.init("b", {8});
  m.init("fc_w", {10, 200});
  m.init("fc_b", {10});
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  auto* pool = m.node("MaxPool", {"r"}, {"p"});
  MB::attr(pool, "kernel_shape", std::vector<int64_t>{2, 2});
  MB::attr(pool, "strides", std::vector<int64_t>{2, 2});
  m.node("Flatten", {"p"}, {"f"});
  auto* gemm = m.node("Gemm", {"f", "fc_w", "fc_b"}, {"g"});
  MB::attr(gemm, "transB", int64_t{1});
  MB::attr(gemm, "alpha", 0.5f);
  MB::attr(gemm, "beta", 2.0f);
  auto* sm = m.node("Softmax", {"g"}, {"y"});
  MB::attr(sm, "axis", int64_t{1});
  m.output("y");
  check(m, "cnn");
}

TEST_F(GraphBuildTest, DepthwiseConvBatchNormClipGlobalPool) {
  MB m;
  m.input("x", {1, 4, 9, 9});
  m.init("dw", {4, 1, 3, 3});
  m.init("dwb", {4});
  m.init("gamma", {4});
  m.init("beta", {4});
  m.init("mean", {4});
  m.init("var", {4}, 0.5f, 1.5f);
  m.init_scalar("lo", 0.0f);
  m.init_scalar("hi", 0.25f);
  auto* conv = m.node("Conv", {"x", "dw", "dwb"}, {"c"});
  MB::attr(conv, "group", int64_t{4});
  MB::attr(conv, "strides", std::vector<int64_t>{2, 2});
  MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn"});
  m.node("Clip", {"bn", "lo", "hi"}, {"cl"});
  auto* avg = m.node("AveragePool", {"cl"}, {"ap"});
  MB::attr(avg, "kernel_shape", std::vector<int64_t>{3, 3});
  MB::attr(avg, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("GlobalAveragePool", {"ap"}, {"y"});
  m.node("GlobalMaxPool", {"cl"}, {"z"});
  m.output("y");
  m.output("z");
  check(m, "depthwise");
}

TEST_F(GraphBuildTest, BroadcastingElementwise) {
  MB m;
  m.input("x", {2, 3, 4});
  m.input("v", {4});
  m.init("c", {3, 1});
  m.init_scalar("two", 2.0f);
  m.node("Add", {"x", "v"}, {"a"});
  m.node("Mul", {"a", "c"}, {"b"});
  m.node("Sub", {"b", "x"}, {"s"});
  m.node("Max", {"s", "x", "a"}, {"mx"});
  m.node("Min", {"mx", "c"}, {"mn"});
  m.node("Pow", {"mn", "two"}, {"pw"});
  m.node("Abs", {"s"}, {"ab"});
  m.node("Add", {"ab", "two"}, {"ab2"});
  // Pow by whole constants becomes products at import (3: the tanh GELU's cube; 5: square and
  // multiply twice); by 2.5 it stays a pow.
  m.init_scalar("three", 3.0f);
  m.init_scalar("five", 5.0f);
  m.init_scalar("two_and_half", 2.5f);
  m.node("Pow", {"s", "three"}, {"cube"});
  m.node("Pow", {"c", "five"}, {"fifth"});
  m.node("Pow", {"ab2", "two_and_half"}, {"frac"});
  m.node("Add", {"pw", "cube"}, {"pw3"});
  m.node("Mul", {"pw3", "fifth"}, {"pw5"});
  m.node("Div", {"pw5", "frac"}, {"dv"});
  m.node("Sqrt", {"ab2"}, {"sq"});
  m.node("Log", {"sq"}, {"lg"});
  auto* lr = m.node("LeakyRelu", {"s"}, {"lr"});
  MB::attr(lr, "alpha", 0.2f);
  m.node("Sigmoid", {"lr"}, {"sg"});
  m.node("Tanh", {"dv"}, {"th"});
  m.node("Neg", {"th"}, {"ng"});
  m.node("Exp", {"ng"}, {"ex"});
  m.node("Add", {"ex", "sg"}, {"e1"});
  m.node("Add", {"e1", "lg"}, {"y"});
  m.output("y");
  m.output("pw5");  // before the saturating Tanh
  check(m, "elementwise");
}

TEST_F(GraphBuildTest, ConcatTransposeReshapeSlicePad) {
  MB m;
  m.input("x", {2, 3, 4});
  m.input("z", {2, 3, 4});
  m.init_int64("shape", {4, 12});
  m.init_int64("starts", {1, 0});
  m.init_int64("ends", {3, 12});
  m.init_int64("axes", {0, 1});
  m.init_int64("steps", {1, 2});
  m.init_int64("pads", {0, 1, 1, 2});
  m.init_int64("ax0", {0});
  auto* cat = m.node("Concat", {"x", "z"}, {"c"});
  MB::attr(cat, "axis", int64_t{1});
  auto* tr = m.node("Transpose", {"c"}, {"t"});
  MB::attr(tr, "perm", std::vector<int64_t>{0, 2, 1});
  m.node("Reshape", {"t", "shape"}, {"r"});
  m.node("Slice", {"r", "starts", "ends", "axes", "steps"}, {"sl"});
  m.node("Pad", {"sl", "pads"}, {"pd"});
  m.node("Unsqueeze", {"pd", "ax0"}, {"us"});
  m.node("Squeeze", {"us", "ax0"}, {"y"});
  m.output("y");
  m.output("t");
  check(m, "transform");
}

TEST_F(GraphBuildTest, MatMulBatchedAndLogSoftmax) {
  MB m;
  m.input("a", {2, 3, 4});
  m.init("w", {4, 5});
  m.init("w2", {2, 5, 6});
  m.node("MatMul", {"a", "w"}, {"p"});
  m.node("MatMul", {"p", "w2"}, {"q"});
  auto* ls = m.node("LogSoftmax", {"q"}, {"y"});
  MB::attr(ls, "axis", int64_t{-1});
  m.output("y");
  check(m, "matmul");
}

TEST_F(GraphBuildTest, MatMulWithPrimeRowsAndColumnsIsPaddedAndCropped) {
  // An attention's shapes, smaller: 13 queries against 37 keys (the register tile divides
  // neither, so both operands are zero-padded, 13 -> 16 rows and 37 -> 64 columns, and the
  // product cropped), then the weights times 20-wide values (20 -> 32 columns). The scores get
  // a bias and a softmax that may fuse with the crop.
  MB m;
  m.input("q", {3, 13, 8});
  m.input("k", {3, 37, 8});
  m.input("v", {3, 37, 20});
  m.init("bias", {37});
  auto* tr = m.node("Transpose", {"k"}, {"kt"});
  MB::attr(tr, "perm", std::vector<int64_t>{0, 2, 1});
  m.node("MatMul", {"q", "kt"}, {"scores"});
  m.node("Add", {"scores", "bias"}, {"biased"});
  auto* sm = m.node("Softmax", {"biased"}, {"weights"});
  MB::attr(sm, "axis", int64_t{-1});
  m.node("MatMul", {"weights", "v"}, {"y"});
  m.output("y");
  m.output("biased");
  check(m, "matmul_padded");
}

TEST_F(GraphBuildTest, MatMulOfHeadsStoresThroughReshapeCropAndScale) {
  // The speech encoder's attention in small: queries and keys [1, T, H, D] split into heads by
  // Transposes, their [1, H, T, T] scores (T = 13: padded to 16 rows and columns, and cropped)
  // divided by a constant and normalized. The crop, the view of the 3 heads as [1, 3, ..] and the
  // Div are stored from the product's register tile.
  MB m;
  m.input("q", {1, 13, 3, 8});
  m.input("k", {1, 13, 3, 8});
  m.init("scale", {1});
  auto* tq = m.node("Transpose", {"q"}, {"qh"});
  MB::attr(tq, "perm", std::vector<int64_t>{0, 2, 1, 3});
  auto* tk = m.node("Transpose", {"k"}, {"kh"});
  MB::attr(tk, "perm", std::vector<int64_t>{0, 2, 3, 1});
  m.node("MatMul", {"qh", "kh"}, {"scores"});
  m.node("Div", {"scores", "scale"}, {"scaled"});
  auto* sm = m.node("Softmax", {"scaled"}, {"y"});
  MB::attr(sm, "axis", int64_t{-1});
  m.output("y");
  m.output("scaled");
  check(m, "matmul_heads");
}

TEST_F(GraphBuildTest, Lstm) {
  MB m;
  const int64_t T = 3, B = 2, I = 4, H = 5;
  m.input("x", {T, B, I});
  m.init("W", {1, 4 * H, I});
  m.init("R", {1, 4 * H, H});
  m.init("Bias", {1, 8 * H});
  m.input("h0", {1, B, H});
  auto* lstm = m.node("LSTM", {"x", "W", "R", "Bias", "", "h0"}, {"", "yh", "yc"});
  MB::attr(lstm, "hidden_size", H);
  m.node("Tanh", {"yh"}, {"y"});
  m.output("y");
  m.output("yc");
  check(m, "lstm");
}

TEST_F(GraphBuildTest, LstmSequenceOutput) {
  MB m;
  m.input("x", {4, 1, 3});
  m.init("W", {1, 16, 3});
  m.init("R", {1, 16, 4});
  auto* lstm = m.node("LSTM", {"x", "W", "R"}, {"Y"});
  MB::attr(lstm, "hidden_size", int64_t{4});
  m.output("Y");
  check(m, "lstm_y");
}

// The reverse direction (weights packed at build time, as the forward one's) and a bidirectional
// LSTM with biases, initial states and peepholes, against ONNX Runtime.
TEST_F(GraphBuildTest, LstmReverseAndBidirectional) {
  MB m;
  const int64_t T = 4, B = 2, I = 3, H = 5;
  m.input("x", {T, B, I});
  m.init("Wr", {1, 4 * H, I});
  m.init("Rr", {1, 4 * H, H});
  auto* rev = m.node("LSTM", {"x", "Wr", "Rr"}, {"Yr", "Yhr"});
  MB::attr(rev, "hidden_size", H);
  MB::attr(rev, "direction", std::string("reverse"));
  m.output("Yr");
  m.output("Yhr");
  m.init("W", {2, 4 * H, I});
  m.init("R", {2, 4 * H, H});
  m.init("Bias", {2, 8 * H});
  m.input("h0", {2, B, H});
  m.input("c0", {2, B, H});
  m.init("P", {2, 3 * H});
  auto* bi = m.node("LSTM", {"x", "W", "R", "Bias", "", "h0", "c0", "P"}, {"Y", "Yh", "Yc"});
  MB::attr(bi, "hidden_size", H);
  MB::attr(bi, "direction", std::string("bidirectional"));
  m.node("Tanh", {"Y"}, {"y"});
  m.output("y");
  m.output("Yh");
  m.output("Yc");
  check(m, "lstm_directions");
}

// GRU: forward with the reset gate after the product (linear_before_reset) and an initial state,
// reverse with it before, bidirectional with biases, against ONNX Runtime.
TEST_F(GraphBuildTest, GruDirectionsAndResetPlacement) {
  MB m;
  const int64_t T = 3, B = 2, I = 4, H = 6;
  m.input("x", {T, B, I});
  m.input("h0", {1, B, H});
  m.init("W1", {1, 3 * H, I});
  m.init("R1", {1, 3 * H, H});
  m.init("B1", {1, 6 * H});
  auto* fw = m.node("GRU", {"x", "W1", "R1", "B1", "", "h0"}, {"Y1", "Yh1"});
  MB::attr(fw, "hidden_size", H);
  MB::attr(fw, "linear_before_reset", int64_t{1});
  m.output("Y1");
  m.output("Yh1");
  m.init("W2", {1, 3 * H, I});
  m.init("R2", {1, 3 * H, H});
  auto* rev = m.node("GRU", {"x", "W2", "R2"}, {"Y2", "Yh2"});
  MB::attr(rev, "hidden_size", H);
  MB::attr(rev, "direction", std::string("reverse"));
  m.output("Y2");
  m.output("Yh2");
  m.init("W3", {2, 3 * H, I});
  m.init("R3", {2, 3 * H, H});
  m.init("B3", {2, 6 * H});
  auto* bi = m.node("GRU", {"x", "W3", "R3", "B3"}, {"Y3", "Yh3"});
  MB::attr(bi, "hidden_size", H);
  MB::attr(bi, "direction", std::string("bidirectional"));
  m.node("Sigmoid", {"Y3"}, {"y3"});
  m.output("y3");
  m.output("Yh3");
  check(m, "gru");
}

// Batch first (layout 1): X [B, T, I], states [B, D, H], Y [B, T, D, H]. ONNX Runtime refuses the
// layout (the ONNX node tests lstm_batchwise and gru_batchwise check it against the reference), so
// a bidirectional LSTM with initial states and a GRU are compared with the same model written
// time-major between Transposes (layout 0, which the other tests check against ONNX Runtime).
TEST_F(GraphBuildTest, RecurrentBatchFirstEqualsTimeMajorBetweenTransposes) {
  const int64_t T = 3, B = 2, I = 4, H = 5;
  auto model = [&](bool batch_first) {
    MB m(14);
    m.input("x", {B, T, I});
    m.input("h0", {B, 2, H});
    m.input("c0", {B, 2, H});
    m.init("W", {2, 4 * H, I});
    m.init("R", {2, 4 * H, H});
    m.init("Bias", {2, 8 * H});
    m.init("Wg", {1, 3 * H, I});
    m.init("Rg", {1, 3 * H, H});
    auto t = [&](const std::string& from, const std::string& to, std::vector<int64_t> perm) {
      MB::attr(m.node("Transpose", {from}, {to}), "perm", perm);
    };
    std::string x = "x", h0 = "h0", c0 = "c0";
    if (!batch_first) {
      t("x", "xt", {1, 0, 2});
      t("h0", "h0t", {1, 0, 2});
      t("c0", "c0t", {1, 0, 2});
      x = "xt", h0 = "h0t", c0 = "c0t";
    }
    const std::string sfx = batch_first ? "" : "_t";
    auto* l =
        m.node("LSTM", {x, "W", "R", "Bias", "", h0, c0}, {"Y" + sfx, "Yh" + sfx, "Yc" + sfx});
    MB::attr(l, "hidden_size", H);
    MB::attr(l, "direction", std::string("bidirectional"));
    auto* g = m.node("GRU", {x, "Wg", "Rg"}, {"G" + sfx, "Gh" + sfx});
    MB::attr(g, "hidden_size", H);
    if (batch_first) {
      MB::attr(l, "layout", int64_t{1});
      MB::attr(g, "layout", int64_t{1});
    } else {
      t("Y_t", "Y", {2, 0, 1, 3});
      t("Yh_t", "Yh", {1, 0, 2});
      t("Yc_t", "Yc", {1, 0, 2});
      t("G_t", "G", {2, 0, 1, 3});
      t("Gh_t", "Gh", {1, 0, 2});
    }
    for (const char* o : {"Y", "Yh", "Yc", "G", "Gh"}) m.output(o);
    return m;
  };
  std::vector<std::vector<float>> outs[2];
  for (bool batch_first : {true, false}) {
    const MB m = model(batch_first);
    runtime::GraphExecutor exec = runtime::GraphExecutor::from_bundle(
        build_graph(import_onnx_bytes(m.bytes(), "rnn.onnx"), "llvm -mcpu=native"), "rnn");
    set_inputs(m, exec);
    exec.run();
    for (size_t i = 0; i < exec.num_outputs(); ++i)
      outs[batch_first].push_back(exec.output(i).to_vector<float>());
  }
  ASSERT_EQ(outs[0].size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(testing::all_close(outs[1][i].data(), outs[0][i].data(),
                                   static_cast<int64_t>(outs[0][i].size()), 1e-6, 1e-6))
        << "output " << i;
  }
}

TEST_F(GraphBuildTest, DcganGenerator) {
  MB m;
  m.input("z", {1, 8, 4, 4});
  m.init("w1", {8, 4, 4, 4});
  m.init("b1", {4});
  m.init("gamma", {4});
  m.init("beta", {4});
  m.init("mean", {4});
  m.init("var", {4}, 0.5f, 1.5f);
  m.init("w2", {4, 3, 4, 4});
  auto* ct1 = m.node("ConvTranspose", {"z", "w1", "b1"}, {"u1"});
  MB::attr(ct1, "strides", std::vector<int64_t>{2, 2});
  MB::attr(ct1, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("BatchNormalization", {"u1", "gamma", "beta", "mean", "var"}, {"bn"});
  m.node("Relu", {"bn"}, {"r"});
  auto* ct2 = m.node("ConvTranspose", {"r", "w2"}, {"u2"});
  MB::attr(ct2, "strides", std::vector<int64_t>{2, 2});
  MB::attr(ct2, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Tanh", {"u2"}, {"y"});
  m.output("y");
  check(m, "dcgan");
}

TEST_F(GraphBuildTest, OneDimensionalConvolutions) {
  MB m;
  m.input("x", {2, 4, 17});
  m.init("w", {6, 4, 3});
  m.init("b", {6});
  m.init("wt", {6, 2, 4});
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  MB::attr(conv, "strides", std::vector<int64_t>{2});
  MB::attr(conv, "pads", std::vector<int64_t>{1, 2});
  MB::attr(conv, "dilations", std::vector<int64_t>{2});
  auto* ct = m.node("ConvTranspose", {"c", "wt"}, {"y"});
  MB::attr(ct, "strides", std::vector<int64_t>{2});
  MB::attr(ct, "pads", std::vector<int64_t>{1, 1});
  m.output("y");
  check(m, "conv1d");
}

/// A squeeze-and-excitation block of `c` channels squeezed to `r` (conv 3x3 + Relu, then
/// GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> Sigmoid -> Mul with the body, the scale a
/// [1,c,1,1] tensor broadcast over [1,c,h,w]), a residual Add and Relu. `scale_first` puts the
/// scale as the Mul's first operand.
void se_block(MB& m, int64_t c, int64_t r, int64_t hw, bool scale_first) {
  m.input("x", {1, c, hw, hw});
  m.init("w", {c, c, 3, 3}, -0.2f, 0.2f);
  m.init("b", {c});
  m.init("w1", {r, c, 1, 1});
  m.init("b1", {r});
  m.init("w2", {c, r, 1, 1});
  m.init("b2", {c});
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"body"});
  m.node("GlobalAveragePool", {"body"}, {"pooled"});
  m.node("Conv", {"pooled", "w1", "b1"}, {"sq"});
  m.node("Relu", {"sq"}, {"sqr"});
  m.node("Conv", {"sqr", "w2", "b2"}, {"ex"});
  m.node("Sigmoid", {"ex"}, {"scale"});
  if (scale_first) {
    m.node("Mul", {"scale", "body"}, {"scaled"});
  } else {
    m.node("Mul", {"body", "scale"}, {"scaled"});
  }
  m.node("Add", {"scaled", "x"}, {"res"});
  m.node("Relu", {"res"}, {"y"});
  m.output("y");
}

// The SE block that failed `epilogue 'Mul' of 'conv2d' has another shape`: 16 channels (blocked
// by alter_layout, the scale's convolutions too) and 20 channels (no block: NCHW throughout).
TEST_F(GraphBuildTest, SqueezeExcitationBlock) {
  for (auto [c, r, scale_first] : {std::tuple<int64_t, int64_t, bool>{16, 4, false},
                                   {16, 4, true},
                                   {20, 5, false},
                                   {24, 6, true}}) {
    SCOPED_TRACE("channels " + std::to_string(c) + ", squeezed to " + std::to_string(r));
    MB m;
    se_block(m, c, r, 6, scale_first);
    check(m, "se_" + std::to_string(c) + (scale_first ? "_sf" : ""), true);
  }
}

// A residual block whose Add reads two convolutions' full-shape outputs (the second one's
// epilogue), then a projection shortcut with a 1x1 stride-2 convolution.
TEST_F(GraphBuildTest, ResidualAddOfTwoConvolutions) {
  MB m;
  m.input("x", {1, 16, 8, 8});
  m.init("w1", {16, 16, 3, 3}, -0.2f, 0.2f);
  m.init("w2", {16, 16, 3, 3}, -0.2f, 0.2f);
  m.init("w3", {32, 16, 3, 3}, -0.2f, 0.2f);
  m.init("wp", {32, 16, 1, 1});
  for (const char* name : {"c1", "c2"}) {
    auto* conv = m.node("Conv", {"x", name == std::string("c1") ? "w1" : "w2"}, {name});
    MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  }
  m.node("Add", {"c1", "c2"}, {"sum"});
  m.node("Relu", {"sum"}, {"r"});
  auto* down = m.node("Conv", {"r", "w3"}, {"c3"});
  MB::attr(down, "pads", std::vector<int64_t>{1, 1, 1, 1});
  MB::attr(down, "strides", std::vector<int64_t>{2, 2});
  auto* proj = m.node("Conv", {"r", "wp"}, {"cp"});
  MB::attr(proj, "strides", std::vector<int64_t>{2, 2});
  m.node("Add", {"cp", "c3"}, {"y"});
  m.output("y");
  check(m, "residual", true);
}

// Every broadcast the graph can legally give a convolution's epilogue: a scalar, a full-shape
// constant, per-channel [C], [C,1,1], [1,C,1,1], an [N,C,1,1] graph input, the convolution's
// output as either operand; and broadcasts that grow its output ([1,C,1,1] conv output times
// [1,C,H,W], a one-channel output times [1,C,H,W], a rank-3 output under rank 4), which fusion
// must leave outside the convolution's kernel.
TEST_F(GraphBuildTest, ConvolutionEpilogueBroadcasts) {
  for (int64_t c : {16, 6}) {
    SCOPED_TRACE("channels " + std::to_string(c));
    MB m;
    m.input("x", {1, c, 6, 6});
    m.input("nc11", {1, c, 1, 1});
    m.init("w", {c, c, 3, 3}, -0.2f, 0.2f);
    m.init("w1", {1, c, 3, 3}, -0.2f, 0.2f);
    m.init("wp", {c, c, 6, 6}, -0.1f, 0.1f);
    m.init_scalar("k", 1.5f);
    m.init("full", {1, c, 6, 6});
    m.init("pc3", {c, 1, 1});
    m.init("pc4", {1, c, 1, 1});
    m.init("w1d", {c, c, 3}, -0.2f, 0.2f);
    auto conv = [&](const std::string& in, const std::string& w, const std::string& out) {
      auto* n = m.node("Conv", {in, w}, {out});
      MB::attr(n, "pads", std::vector<int64_t>{1, 1, 1, 1});
    };
    conv("x", "w", "c0");
    m.node("Mul", {"c0", "k"}, {"e0"});
    m.node("Add", {"full", "e0"}, {"e1"});
    m.node("Mul", {"e1", "pc3"}, {"e2"});
    m.node("Add", {"pc4", "e2"}, {"e3"});
    m.node("Mul", {"e3", "nc11"}, {"e4"});
    m.node("Sub", {"e4", "x"}, {"e5"});
    m.node("Div", {"e5", "k"}, {"e6"});
    m.node("Max", {"e6", "pc4"}, {"y0"});
    m.output("y0");
    // A [1,C,1,1] convolution output (a 6x6 kernel over 6x6) broadcast over [1,C,6,6].
    m.node("Conv", {"x", "wp"}, {"cp"});
    m.node("Sigmoid", {"cp"}, {"sp"});
    m.node("Mul", {"sp", "x"}, {"y1"});
    m.output("y1");
    // A one-channel output broadcast over the channels.
    conv("x", "w1", "c1");
    m.node("Add", {"c1", "x"}, {"y2"});
    m.output("y2");
    // A 1-D convolution's [1,C,6] output under a rank-4 [2,1,C,6] input: the rank grows.
    m.input("xs", {1, c, 6});
    m.input("x4", {2, 1, c, 6});
    auto* c1d = m.node("Conv", {"xs", "w1d"}, {"o1d"});
    MB::attr(c1d, "pads", std::vector<int64_t>{1, 1});
    m.node("Add", {"o1d", "x4"}, {"y3"});
    m.output("y3");
    check(m, "epilogues_" + std::to_string(c), true);
  }
}

// Dense epilogues: a per-column bias, a per-row [N,1] scale, a scalar and a full-shape input; and
// a broadcast that grows the output ([1,K] Gemm output plus [3,K]).
TEST_F(GraphBuildTest, DenseEpilogueBroadcasts) {
  MB m;
  m.input("x", {3, 12});
  m.input("row", {3, 1});
  m.input("full", {3, 10});
  m.init("w", {12, 10});
  m.init("col", {10});
  m.init_scalar("k", 0.75f);
  m.init("w1", {12, 10});
  m.input("x1", {1, 12});
  m.node("Gemm", {"x", "w"}, {"g"});
  m.node("Add", {"g", "col"}, {"a"});
  m.node("Mul", {"row", "a"}, {"b"});
  m.node("Sub", {"b", "k"}, {"c"});
  m.node("Add", {"c", "full"}, {"y0"});
  m.output("y0");
  m.node("MatMul", {"x1", "w1"}, {"g1"});
  m.node("Tanh", {"g1"}, {"t1"});
  m.node("Add", {"t1", "full"}, {"y1"});
  m.output("y1");
  check(m, "dense_epilogues");
}

// A MobileNetV3-style block as PyTorch exports it: Conv, HardSwish, an SE scale from ReduceMean
// over H and W (keepdims) through two 1x1 convolutions and HardSigmoid, the Mul with the block,
// then a decomposed LayerNorm over the last axis (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
// Div) and an erf-GELU; at opset 14 (axes attributes, ReduceSum's as an input) and 18 (every
// reduction's axes an input).
TEST_F(GraphBuildTest, ReductionsActivationsAndLayerNormPatterns) {
  for (int64_t opset : {14, 18}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    MB m(opset);
    m.input("x", {1, 16, 6, 6});
    m.init("w", {16, 16, 3, 3}, -0.2f, 0.2f);
    m.init("w1", {4, 16, 1, 1});
    m.init("w2", {16, 4, 1, 1});
    auto reduce = [&](const std::string& op, const std::string& in, const std::string& out,
                      const std::vector<int64_t>& axes, int64_t keepdims) {
      onnx::NodeProto* n;
      if (opset >= 18 || op == "ReduceSum") {
        m.init_int64(out + "_axes", axes);
        n = m.node(op, {in, out + "_axes"}, {out});
      } else {
        n = m.node(op, {in}, {out});
        MB::attr(n, "axes", axes);
      }
      MB::attr(n, "keepdims", keepdims);
    };
    auto* conv = m.node("Conv", {"x", "w"}, {"c"});
    MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
    m.node("HardSwish", {"c"}, {"body"});
    reduce("ReduceMean", "body", "pooled", {2, 3}, 1);
    m.node("Conv", {"pooled", "w1"}, {"sq"});
    m.node("Relu", {"sq"}, {"sqr"});
    m.node("Conv", {"sqr", "w2"}, {"ex"});
    m.node("HardSigmoid", {"ex"}, {"gate"});
    m.node("Mul", {"body", "gate"}, {"scaled"});
    // LayerNorm over the last axis, decomposed.
    reduce("ReduceMean", "scaled", "mu", {-1}, 1);
    m.node("Sub", {"scaled", "mu"}, {"d"});
    m.init_scalar("two", 2.0f);
    m.node("Pow", {"d", "two"}, {"d2"});
    reduce("ReduceMean", "d2", "var", {-1}, 1);
    m.init_scalar("eps", 1e-5f);
    m.node("Add", {"var", "eps"}, {"ve"});
    m.node("Sqrt", {"ve"}, {"sd"});
    m.node("Div", {"d", "sd"}, {"ln"});
    // GELU with erf: 0.5 * x * (1 + erf(x / sqrt(2))).
    m.init_scalar("rsqrt2", 1.41421356f);
    m.init_scalar("one", 1.0f);
    m.init_scalar("half", 0.5f);
    m.node("Div", {"ln", "rsqrt2"}, {"xs"});
    m.node("Erf", {"xs"}, {"erf"});
    m.node("Add", {"erf", "one"}, {"e1"});
    m.node("Mul", {"ln", "e1"}, {"g1"});
    m.node("Mul", {"g1", "half"}, {"gelu"});
    // Heads: a sum over channels without keepdims, a max over everything, a LogSumExp, and a
    // Where choosing between two branches by a comparison.
    reduce("ReduceSum", "gelu", "y0", {1}, 0);
    m.output("y0");
    reduce("ReduceMax", "gelu", "y1", {0, 1, 2, 3}, 1);
    m.output("y1");
    reduce("ReduceLogSumExp", "ln", "y2", {1, 3}, 0);
    m.output("y2");
    m.node("Greater", {"gelu", "ln"}, {"gt"});
    m.node("Neg", {"ln"}, {"nl"});
    m.node("Where", {"gt", "gelu", "nl"}, {"y3"});
    m.output("y3");
    check(m, "reductions_" + std::to_string(opset), true);
  }
}

// LayerNormalization (opset 17) over the last axis and over the last two, with its Mean and
// InvStdDev outputs, between elementwise operators; and a Split into uneven parts feeding a
// Tile, an Expand and a Concat.
TEST_F(GraphBuildTest, LayerNormalizationSplitTileExpand) {
  MB m(17);
  m.input("x", {2, 3, 8});
  m.init("scale", {8}, 0.5f, 1.5f);
  m.init("bias", {8});
  m.init("scale2", {3, 8}, 0.5f, 1.5f);
  m.node("Relu", {"x"}, {"r"});
  auto* ln = m.node("LayerNormalization", {"r", "scale", "bias"}, {"ln", "mean", "inv"});
  MB::attr(ln, "epsilon", 1e-3f);
  m.node("Add", {"ln", "x"}, {"y0"});
  m.output("y0");
  m.output("mean");
  m.output("inv");
  auto* ln2 = m.node("LayerNormalization", {"x", "scale2"}, {"y1"});
  MB::attr(ln2, "axis", int64_t{-2});
  m.output("y1");
  m.init_int64("sizes", {1, 2});
  auto* split = m.node("Split", {"x", "sizes"}, {"s0", "s1"});
  MB::attr(split, "axis", int64_t{1});
  m.init_int64("reps", {1, 2, 1});
  m.node("Tile", {"s0", "reps"}, {"t0"});
  m.init_int64("shape", {2, 2, 8});
  m.node("Expand", {"s0", "shape"}, {"e0"});
  m.node("Mul", {"t0", "s1"}, {"m0"});
  auto* cat = m.node("Concat", {"m0", "e0"}, {"y2"});
  MB::attr(cat, "axis", int64_t{1});
  m.output("y2");
  check(m, "layer_norm");
}

// An attention's Split of its fused QKV product into Q, K and V (split_to_slices: each part a Slice
// fused with its Reshape and Transpose into heads), K transposed for Q K^T, then the softmax and
// the product with V; one part is also a graph output.
TEST_F(GraphBuildTest, SplitIntoAttentionHeads) {
  MB m(13);
  m.input("x", {1, 8, 48});
  m.init("w", {48, 48}, -0.3f, 0.3f);
  m.node("MatMul", {"x", "w"}, {"qkv"});
  m.init_int64("sizes", {16, 16, 16});
  auto* split = m.node("Split", {"qkv", "sizes"}, {"q", "k", "v"});
  MB::attr(split, "axis", int64_t{2});
  m.init_int64("heads", {1, 8, 2, 8});
  const std::vector<std::pair<const char*, std::vector<int64_t>>> perms = {
      {"q", {0, 2, 1, 3}}, {"k", {0, 2, 3, 1}}, {"v", {0, 2, 1, 3}}};
  for (const auto& [part, perm] : perms) {
    const std::string p = part;
    m.node("Reshape", {p, "heads"}, {p + "_r"});
    auto* t = m.node("Transpose", {p + "_r"}, {p + "_h"});
    MB::attr(t, "perm", perm);
  }
  m.node("MatMul", {"q_h", "k_h"}, {"scores"});
  auto* sm = m.node("Softmax", {"scores"}, {"attn"});
  MB::attr(sm, "axis", int64_t{-1});
  m.node("MatMul", {"attn", "v_h"}, {"y"});
  m.output("y");
  m.output("v");
  check(m, "split_attention");
}

// Pads of zeros folded into the average pools and convolutions that read them (fold_pad): PyTorch's
// avg_pool2d(padding=1) as Pad + AveragePool (Inception-v3), an asymmetric ZeroPad2d before a
// strided convolution, a Pad read by both a pool and a convolution; and two that stay: one read by
// a MaxPool, one padding with 0.5.
TEST_F(GraphBuildTest, ZeroPadsFoldIntoPoolsAndConvolutions) {
  MB m(13);
  m.input("x", {1, 16, 9, 9});
  m.init("w1", {32, 16, 3, 3}, -0.2f, 0.2f);
  m.init("w2", {16, 32, 3, 3}, -0.2f, 0.2f);
  m.init("w3", {16, 32, 1, 1}, -0.2f, 0.2f);
  m.node("Conv", {"x", "w1"}, {"c1"});
  m.node("Relu", {"c1"}, {"r1"});
  m.init_int64("p_same", {0, 0, 1, 1, 0, 0, 1, 1});
  m.node("Pad", {"r1", "p_same"}, {"pad1"});
  auto* avg = m.node("AveragePool", {"pad1"}, {"avg"});
  MB::attr(avg, "kernel_shape", std::vector<int64_t>{3, 3});
  auto* c2 = m.node("Conv", {"pad1", "w2"}, {"c2"});
  MB::attr(c2, "strides", std::vector<int64_t>{2, 2});
  m.init_int64("p_asym", {0, 0, 0, 1, 0, 0, 2, 0});
  m.node("Pad", {"avg", "p_asym"}, {"pad2"});
  auto* c3 = m.node("Conv", {"pad2", "w3"}, {"c3"});
  MB::attr(c3, "strides", std::vector<int64_t>{2, 2});
  m.node("Pad", {"r1", "p_same"}, {"pad3"});
  auto* mx = m.node("MaxPool", {"pad3"}, {"mx"});
  MB::attr(mx, "kernel_shape", std::vector<int64_t>{3, 3});
  m.init_scalar("half", 0.5f);
  m.node("Pad", {"r1", "p_same", "half"}, {"pad4"});
  auto* avg4 = m.node("AveragePool", {"pad4"}, {"avg4"});
  MB::attr(avg4, "kernel_shape", std::vector<int64_t>{3, 3});
  m.output("c2");
  m.output("c3");
  m.output("mx");
  m.output("avg4");
  check(m, "zero_pads");
}

// InstanceNormalization after a convolution (a GAN generator's norm), then Celu, Shrink and
// ThresholdedRelu, and a CastLike to the input's type.
TEST_F(GraphBuildTest, InstanceNormalizationAndActivations) {
  MB m(17);
  m.input("x", {2, 16, 5, 5});
  m.init("w", {16, 16, 3, 3}, -0.2f, 0.2f);
  m.init("scale", {16}, 0.5f, 1.5f);
  m.init("bias", {16});
  auto* conv = m.node("Conv", {"x", "w"}, {"c"});
  MB::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  auto* in = m.node("InstanceNormalization", {"c", "scale", "bias"}, {"n"});
  MB::attr(in, "epsilon", 1e-3f);
  auto* celu = m.node("Celu", {"n"}, {"ce"});
  MB::attr(celu, "alpha", 0.7f);
  auto* shrink = m.node("Shrink", {"ce"}, {"sh"});
  MB::attr(shrink, "lambd", 0.3f);
  MB::attr(shrink, "bias", 0.1f);
  auto* thr = m.node("ThresholdedRelu", {"n"}, {"th"});
  MB::attr(thr, "alpha", 0.2f);
  m.node("Add", {"sh", "th"}, {"s"});
  m.node("CastLike", {"s", "x"}, {"y"});
  m.output("y");
  check(m, "instance_norm", true);
}

// The trigonometric and hyperbolic functions (libm per lane) in one fused chain, on inputs in
// their domains (the random inputs lie in [-0.5, 0.5); Acosh reads 1 + x^2).
TEST_F(GraphBuildTest, TrigonometricChain) {
  MB m(13);
  m.input("x", {3, 37});
  for (const char* op :
       {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh"}) {
    m.node(op, {"x"}, {std::string("t_") + op});
  }
  m.node("Mul", {"x", "x"}, {"x2"});
  m.init_scalar("one", 1.0f);
  m.node("Add", {"x2", "one"}, {"x2p1"});
  m.node("Acosh", {"x2p1"}, {"t_Acosh"});
  m.node("Sum", {"t_Sin", "t_Cos", "t_Tan", "t_Asin", "t_Acos", "t_Atan"}, {"s1"});
  m.node("Mean", {"t_Sinh", "t_Cosh", "t_Asinh", "t_Atanh", "t_Acosh"}, {"s2"});
  m.node("Sub", {"s1", "s2"}, {"y"});
  m.output("y");
  check(m, "trig");
}

// Trilu (upper with k = 1, lower with k = -1) over a batch of matrices and float Mod (fmod = 1)
// with a broadcast divisor, fused into one chain.
TEST_F(GraphBuildTest, TriluAndMod) {
  MB m(14);
  m.input("x", {2, 5, 7});
  m.init("d", {7}, 0.2f, 0.4f);
  m.init_int64("k1", {1}, true);
  m.init_int64("km1", {-1}, true);
  m.node("Trilu", {"x", "k1"}, {"up"});
  auto* lo = m.node("Trilu", {"x", "km1"}, {"lo"});
  MB::attr(lo, "upper", int64_t{0});
  m.node("Sub", {"up", "lo"}, {"s"});
  auto* mod = m.node("Mod", {"s", "d"}, {"y"});
  MB::attr(mod, "fmod", int64_t{1});
  m.output("y");
  check(m, "trilu_mod");
}

// CumSum (forward, exclusive and reverse), Hardmax, and GatherElements with constant indices
// (negative ones too) after an elementwise producer.
TEST_F(GraphBuildTest, CumSumHardmaxGatherElements) {
  MB m(13);
  m.input("x", {3, 6});
  m.input("v", {6});
  m.init_int64("axis1", {1}, true);
  m.node("CumSum", {"x", "axis1"}, {"c0"});
  auto* ex = m.node("CumSum", {"x", "axis1"}, {"c1"});
  MB::attr(ex, "exclusive", int64_t{1});
  MB::attr(ex, "reverse", int64_t{1});
  m.node("Add", {"c0", "c1"}, {"y0"});
  m.output("y0");
  m.node("Hardmax", {"x"}, {"y1"});
  m.output("y1");
  m.node("Exp", {"v"}, {"ev"});
  m.init_int64("idx", {5, -1, 0, 2, -6, 3, 3});
  m.node("GatherElements", {"ev", "idx"}, {"y2"});
  m.output("y2");
  check(m, "cumsum_hardmax");
}

// Einsum as attention writes it (scores and their weighted sum), with an ellipsis broadcasting a
// batch axis of 1, an implicit output, a diagonal and a full sum.
TEST_F(GraphBuildTest, EinsumAttentionEllipsisDiagonal) {
  MB m(13);
  m.input("q", {2, 3, 5, 4});
  m.input("k", {2, 3, 7, 4});
  m.input("v", {2, 3, 7, 4});
  m.input("a", {1, 6, 5});
  m.input("b", {4, 5, 2});
  m.input("d", {5, 5});
  MB::attr(m.node("Einsum", {"q", "k"}, {"s"}), "equation", std::string("bhid,bhjd->bhij"));
  m.node("Softmax", {"s"}, {"p"});
  MB::attr(m.node("Einsum", {"p", "v"}, {"y0"}), "equation", std::string("bhij,bhjd->bhid"));
  m.output("y0");
  MB::attr(m.node("Einsum", {"a", "b"}, {"y1"}), "equation", std::string("...ij,...jk"));
  m.output("y1");
  MB::attr(m.node("Einsum", {"d"}, {"y2"}), "equation", std::string("ii->i"));
  m.output("y2");
  MB::attr(m.node("Einsum", {"d"}, {"y3"}), "equation", std::string("ij->"));
  m.output("y3");
  check(m, "einsum");
}

// Einsums that are one batched matrix product become MatMuls between Transposes and Reshapes
// (rewrite_einsum): an operand transposed (attention's scores, "ki,kj"), the output transposed,
// two contracted axes, batch axes in another order in each operand, spaces, an ellipsis, a
// constant weight. Those that are not keep the generic Einsum: an ellipsis broadcast from 1, a
// diagonal, a dot product per batch, an axis summed over one operand, three operands, an
// elementwise product. Every one against ONNX Runtime, and the graph checked for which is which.
TEST_F(GraphBuildTest, EinsumContractionsAsMatMul) {
  MB m(13);
  struct Case {
    std::string equation;
    std::vector<std::vector<int64_t>> shapes;
    bool matmul;
  };
  const std::vector<Case> cases = {
      {"bhid,bhjd->bhij", {{2, 3, 5, 4}, {2, 3, 7, 4}}, true},
      {"ki,kj->ij", {{6, 5}, {6, 9}}, true},
      {"bij,bjk->ibk", {{3, 4, 5}, {3, 5, 6}}, true},
      {"abcd,cde->abe", {{2, 3, 4, 5}, {4, 5, 6}}, true},
      {"BGHID, HGBJD -> GHBIJ", {{2, 2, 3, 5, 4}, {3, 2, 2, 7, 4}}, true},
      {"...id,...jd->...ij", {{2, 5, 4}, {2, 7, 4}}, true},
      {"ijk,jk->i", {{5, 3, 4}, {3, 4}}, true},
      {"...ij,...jk", {{1, 6, 5}, {4, 5, 2}}, false},
      {"ii->i", {{5, 5}}, false},
      {"bi,bi->b", {{3, 7}, {3, 7}}, false},
      {"ij,jk->i", {{4, 5}, {5, 3}}, false},
      {"ij,jk,kl->il", {{4, 5}, {5, 3}, {3, 2}}, false},
      {"iij,jk->ik", {{4, 4, 3}, {3, 5}}, false},
      {"ij,ij->ij", {{4, 5}, {4, 5}}, false},
  };
  int matmuls = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    std::vector<std::string> ins;
    for (size_t i = 0; i < cases[c].shapes.size(); ++i) {
      ins.push_back("x" + std::to_string(c) + "_" + std::to_string(i));
      m.input(ins.back(), cases[c].shapes[i]);
    }
    MB::attr(m.node("Einsum", ins, {"y" + std::to_string(c)}), "equation", cases[c].equation);
    m.output("y" + std::to_string(c));
    matmuls += cases[c].matmul ? 1 : 0;
  }
  // nn.Linear written as an Einsum: a constant [N, K] weight.
  m.input("act", {3, 8});
  m.init("w", {10, 8});
  MB::attr(m.node("Einsum", {"act", "w"}, {"linear"}), "equation", std::string("bk,nk->bn"));
  m.output("linear");
  ++matmuls;
  const Graph g = import_onnx_bytes(m.bytes(), "<einsum>");
  std::map<std::string, int> ops;
  for (const Node& n : g.nodes()) ++ops[n.op];
  EXPECT_EQ(ops["MatMul"], matmuls);
  EXPECT_EQ(ops["Einsum"], static_cast<int>(cases.size()) + 1 - matmuls);
  check(m, "einsum_matmul");
}

// Resize (opset 18 with axes; nearest and bilinear, sizes and scales) between elementwise
// operators it fuses with, and an Upsample-like nearest with asymmetric coordinates.
TEST_F(GraphBuildTest, ResizeNearestAndLinear) {
  MB m(18);
  m.input("x", {1, 3, 5, 6});
  m.node("Relu", {"x"}, {"r"});
  m.init("scales", {2}, 1.5f, 2.5f);
  auto* up = m.node("Resize", {"r", "", "scales"}, {"u"});
  MB::attr(up, "mode", std::string("linear"));
  MB::attr(up, "axes", std::vector<int64_t>{2, 3});
  m.node("Sigmoid", {"u"}, {"y0"});
  m.output("y0");
  m.init_int64("sizes", {1, 3, 9, 4});
  auto* nn = m.node("Resize", {"x", "", "", "sizes"}, {"n"});
  MB::attr(nn, "coordinate_transformation_mode", std::string("asymmetric"));
  MB::attr(nn, "nearest_mode", std::string("floor"));
  m.node("Neg", {"n"}, {"y1"});
  m.output("y1");
  m.init_values("cscales", {4},
                {1.0f, 1.0f, 1.6f, 0.5f});  // whole lengths: ORT and ONNX agree on align_corners
  auto* cu = m.node("Resize", {"x", "", "cscales"}, {"c"});
  MB::attr(cu, "mode", std::string("cubic"));
  m.output("c");
  auto* cx = m.node("Resize", {"r", "", "cscales"}, {"cx"});
  MB::attr(cx, "mode", std::string("cubic"));
  MB::attr(cx, "cubic_coeff_a", -0.5f);
  MB::attr(cx, "exclude_outside", int64_t{1});
  MB::attr(cx, "coordinate_transformation_mode", std::string("align_corners"));
  m.node("Tanh", {"cx"}, {"y2"});
  m.output("y2");
  check(m, "resize");
}

}  // namespace
}  // namespace kiln::graph
