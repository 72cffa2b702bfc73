// Models quantized by onnxruntime's quantize_dynamic (make_dynamic_quant.py, the CTest fixture
// dynamic_quant): the tiny BERT-like encoder, the small LSTM classifier, a small UNet and a 1-D
// audio CNN, imported as written (DynamicQuantizeLinear before each quantized MatMul or Conv,
// MatMulInteger / ConvInteger of uint8 activations and int8 weights, Cast, Mul by x_scale *
// w_scale (reshaped per channel for a convolution), Add of the bias; embeddings Gathered from
// int8 tables and dequantized), built for the host, run on their inputs and compared with ONNX
// Runtime's outputs.
//
// Tolerance: max|kiln - ort| / max|ort| <= 1e-4, the zoo's (model_compare::kTolerance). The
// integer products are exact on both sides and the scales and biases are the same float operations,
// so the outputs agree to float rounding: measured 9.6e-8 (bert_tiny), 6.6e-8
// (lstm_classifier_small), 6.9e-8 (unet_small) and 1.2e-7 (audio_cnn_m5_small). What is left comes
// from the float layers between the products (LayerNormalization, Softmax, Erf, Tanh), whose last
// bits differ from ORT's; should one of those differences carry a value across a rounding boundary
// of DynamicQuantizeLinear, it moves by one quantization step (1/255 of its tensor's range) and the
// error jumps to about 1e-3: a wrong rounding mode or zero point shows the same way, so the
// tolerance is kept at float rounding's scale rather than widened to hide it. (BERT-base's 12
// layers do spread such steps: its output is 0.027 from ORT's, ORT's own int8 output 0.031 from its
// float one; bench_int8_dynamic prints both.)
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "tests/models/model_compare.h"
#include "tests/models/model_inputs.h"

namespace kiln::graph {
namespace {

/// Builds DATA/NAME.onnx, checks that it holds `integer_products` MatMulInteger and ConvInteger
/// nodes and a DynamicQuantizeLinear, and compares its output with ONNX Runtime's.
void check_dynamic(const std::string& model, int integer_products) {
  const std::string dir = KILN_DYNAMIC_QUANT_DATA_DIR;
  const auto inputs = model_inputs::load(dir, model);
  Graph g = import_onnx(dir + "/" + model + ".onnx", model_inputs::bind_shapes(inputs));
  std::map<std::string, int> ops;
  for (const Node& n : g.nodes()) ++ops[n.op];
  EXPECT_EQ(ops["MatMulInteger"] + ops["ConvInteger"], integer_products) << model;
  EXPECT_GE(ops["DynamicQuantizeLinear"], 1) << model;

  runtime::GraphExecutor exec =
      runtime::GraphExecutor::from_bundle(build_graph(g, "llvm -mcpu=native"), model);
  for (const auto& [name, value] : inputs) exec.set_input(name, value);
  exec.run();
  const model_compare::Errors e = model_compare::compare(
      exec.output(0), runtime::load_npy(dir + "/" + model + ".expected.npy"));
  std::printf("%s: relative error %.3g (max |diff| %.3g) against ONNX Runtime's dynamic int8\n",
              model.c_str(), e.relative, e.max_abs_diff);
  std::fflush(stdout);
  EXPECT_LE(e.relative, model_compare::kTolerance) << model << ": max|kiln - ort| / max|ort|";
}

TEST(DynamicQuant, bert_tiny) { check_dynamic("bert_tiny_dynamic", 9); }
TEST(DynamicQuant, lstm_classifier_small) { check_dynamic("lstm_classifier_small_dynamic", 1); }
TEST(DynamicQuant, unet_small) { check_dynamic("unet_small_dynamic", 15); }
TEST(DynamicQuant, audio_cnn_m5_small) { check_dynamic("audio_cnn_m5_small_dynamic", 5); }

}  // namespace
}  // namespace kiln::graph
