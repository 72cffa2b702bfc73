// Models quantized by onnxruntime's quantize_dynamic (make_dynamic_quant.py, the CTest fixture
// dynamic_quant): the tiny BERT-like encoder and the small LSTM classifier, imported as written
// (DynamicQuantizeLinear before each quantized MatMul, MatMulInteger of uint8 activations and
// int8 weights, Cast, Mul by x_scale * w_scale, Add of the bias; embeddings Gathered from int8
// tables and dequantized), built for the host, run on their inputs and compared with ONNX
// Runtime's outputs.
//
// Tolerance: max|kiln - ort| / max|ort| <= kTolerance (1e-3). The integer products are exact on
// both sides and the scale and bias arithmetic is the same float operations, so a MatMulInteger
// chain alone agrees to float rounding; but the float layers between them (LayerNormalization,
// Softmax, Erf, Tanh) differ from ORT's in the last bits, and a value that lands on the other side
// of a rounding boundary of DynamicQuantizeLinear moves by one quantization step (about 1/255 of
// that tensor's range), which the next products carry on. The measured errors are printed.
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

constexpr double kTolerance = 1e-3;

/// Builds DATA/NAME.onnx, checks that it holds `integer_products` MatMulInteger nodes, each fed by
/// a DynamicQuantizeLinear, and compares its output with ONNX Runtime's.
void check_dynamic(const std::string& model, int integer_products) {
  const std::string dir = KILN_DYNAMIC_QUANT_DATA_DIR;
  const auto inputs = model_inputs::load(dir, model);
  Graph g = import_onnx(dir + "/" + model + ".onnx", model_inputs::bind_shapes(inputs));
  std::map<std::string, int> ops;
  for (const Node& n : g.nodes()) ++ops[n.op];
  EXPECT_EQ(ops["MatMulInteger"], integer_products) << model;
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
  EXPECT_LE(e.relative, kTolerance) << model << ": max|kiln - ort| / max|ort|";
}

TEST(DynamicQuant, bert_tiny) { check_dynamic("bert_tiny_dynamic", 9); }
TEST(DynamicQuant, lstm_classifier_small) { check_dynamic("lstm_classifier_small_dynamic", 1); }

}  // namespace
}  // namespace kiln::graph
