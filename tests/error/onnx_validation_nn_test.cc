// The importer's validation of the neural-network operators (the registry's nn/, rnn and quant
// families: convolutions, pooling, normalizations, the LSTM, quantization): each bad model breaks
// one rule and is refused naming the node, the operator and both values that disagree.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "tests/common/expect_error.h"
#include "tests/error/onnx_validation_util.h"

namespace kiln::graph {
namespace {

using namespace validation_test;

// ---- convolutions
// --------------------------------------------------------------------------------

TEST(OnnxValidation, ConvChannelsGroupsAndBias) {
  {
    Model m = conv_model({1, 4, 8, 8}, {5, 2, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "group", int64_t{2});
    expect_refused(m, "conv1", "Conv",
                   {"input 1 (W 'w') of shape [5,2,3,3] has 5 output channels", "group 2"});
  }
  {
    Model m = conv_model({1, 4, 8, 8}, {4, 1, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "group", int64_t{-4});
    expect_refused(m, "conv1", "Conv", {"attribute 'group' must be positive, got -4"});
  }
  {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3, 3});
    expect_refused(m, "conv1", "Conv",
                   {"input 1 (W 'w') of shape [4,3,3,3,3] has rank 5",
                    "input 0 (X 'x') of shape [1,3,8,8] has rank 4"});
  }
  {
    Model m = conv_model({1, 3}, {4, 3});
    expect_refused(m, "conv1", "Conv", {"input 0 (X 'x') of shape [1,3] has rank 2"});
  }
  {
    Model m;
    m.input("x", {1, 3, 8, 8});
    m.weight("w", {4, 3, 3, 3});
    m.weight("b", {5});
    m.op("Conv", "conv1", {"x", "w", "b"});
    expect_refused(
        m, "conv1", "Conv",
        {"input 2 (B 'b') of shape [5] must be [4]", "input 1 (W 'w') of shape [4,3,3,3]"});
  }
  {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "kernel_shape", Ints{5, 5});
    expect_refused(m, "conv1", "Conv",
                   {"attribute 'kernel_shape' is [5,5]", "input 1 (W 'w') of shape [4,3,3,3]",
                    "kernel [3,3]"});
  }
}

TEST(OnnxValidation, ConvWindowAttributes) {
  auto model = [](const char* name, auto value) {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, name, value);
    return m;
  };
  expect_refused(model("strides", Ints{1, 1, 1}), "conv1", "Conv",
                 {"attribute 'strides' has 3 values [1,1,1]",
                  "input 0 (X 'x') of shape [1,3,8,8] with 2 spatial dimensions needs 2"});
  expect_refused(model("strides", Ints{0, 1}), "conv1", "Conv",
                 {"attribute 'strides' is [0,1]", "must be positive, got 0"});
  expect_refused(model("dilations", Ints{1, -1}), "conv1", "Conv",
                 {"attribute 'dilations' is [1,-1]", "must be positive, got -1"});
  expect_refused(model("pads", Ints{1, 1, 1}), "conv1", "Conv",
                 {"attribute 'pads' has 3 values [1,1,1]", "needs 4"});
  expect_refused(model("pads", Ints{1, -1, 1, 1}), "conv1", "Conv",
                 {"attribute 'pads' is [1,-1,1,1]", "non-negative, got -1"});
  expect_refused(model("auto_pad", std::string("SAME")), "conv1", "Conv",
                 {"attribute 'auto_pad' is 'SAME'", "NOTSET, SAME_UPPER, SAME_LOWER or VALID"});
  {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "auto_pad", std::string("SAME_UPPER"));
    Model::attr(conv, "pads", Ints{0, 0, 0, 0});
    expect_refused(m, "conv1", "Conv",
                   {"attribute 'pads' is [0,0,0,0]", "'SAME_UPPER' gives [1,1,1,1]"});
  }
  // The window must fit the (padded) input once.
  {
    Model m = conv_model({1, 3, 2, 8}, {4, 3, 3, 3});
    expect_refused(m, "conv1", "Conv",
                   {"input 0 (X 'x') of shape [1,3,2,8] has 2 elements in spatial dimension 0",
                    "fewer than the kernel's extent 3"});
  }
  expect_refused(model("dilations", Ints{4, 1}), "conv1", "Conv",
                 {"has 8 elements in spatial dimension 0", "the kernel's extent 9"});
}

TEST(OnnxValidation, ConvTranspose) {
  {
    Model m = conv_model({1, 3, 5, 5}, {4, 2, 3, 3}, "ConvTranspose");
    expect_refused(m, "conv1", "ConvTranspose",
                   {"input 1 (W 'w') has 4 input channels (its dimension 0)",
                    "input 0 (X 'x') has 3 channels"});
  }
  {
    Model m = conv_model({1, 3, 5, 5}, {3, 2, 3, 3}, "ConvTranspose");
    auto* ct = last(m);
    Model::attr(ct, "group", int64_t{2});
    expect_refused(m, "conv1", "ConvTranspose",
                   {"input 0 (X 'x') of shape [1,3,5,5] has 3 channels, which group 2"});
  }
  {
    Model m = conv_model({1, 3, 5, 5}, {3, 2, 3, 3}, "ConvTranspose");
    auto* ct = last(m);
    Model::attr(ct, "strides", Ints{2, 2});
    Model::attr(ct, "output_padding", Ints{2, 0});
    expect_refused(m, "conv1", "ConvTranspose",
                   {"attribute 'output_padding' is [2,0]", "less than the stride 2"});
  }
  {
    Model m = conv_model({1, 3, 1, 1}, {3, 2, 1, 1}, "ConvTranspose");
    auto* ct = last(m);
    Model::attr(ct, "pads", Ints{1, 0, 0, 0});
    expect_refused(m, "conv1", "ConvTranspose",
                   {"attribute 'pads' [1,0,0,0] leave no output in spatial dimension 0"});
  }
  {
    Model m = conv_model({1, 3, 5, 5}, {3, 2, 3, 3}, "ConvTranspose");
    Model::attr(last(m), "output_shape", Ints{10});
    expect_refused(m, "conv1", "ConvTranspose",
                   {"attribute 'output_shape' has 1 values [10]", "needs 2"});
  }
  {
    Model m = conv_model({1, 3, 5, 5}, {3, 2, 3, 3}, "ConvTranspose");
    Model::attr(last(m), "kernel_shape", Ints{2, 2});
    expect_refused(m, "conv1", "ConvTranspose",
                   {"attribute 'kernel_shape' is [2,2]", "input 1 (W 'w') of shape [3,2,3,3]"});
  }
  {
    Model m = conv_model({1, 4, 5, 5}, {4, 2, 3, 3}, "ConvTranspose");
    Model::attr(last(m), "group", int64_t{2});
    m.weight("b", {2});
    last(m)->add_input("b");
    expect_refused(m, "conv1", "ConvTranspose",
                   {"input 2 (B 'b') of shape [2] must be [4]", "group 2 makes 4 output channels"});
  }
  {
    Model m;
    m.input("x", {1, 3, 5, 5});
    m.weight("w", {3});
    m.node("Relu", "relu", {"x"}, {"r"});
    m.op("ConvTranspose", "up", {"r", "w"});
    expect_refused(m, "up", "ConvTranspose",
                   {"input 1 (W 'w') of shape [3] has rank 1", "input 0 (X 'r')"});
  }
}

// ---- pooling and normalization
// -------------------------------------------------------------------

TEST(OnnxValidation, Pooling) {
  auto pool = [](const Ints& x, const Ints& kernel) {
    Model m;
    m.input("x", x);
    Model::attr(m.op("MaxPool", "pool", {"x"}), "kernel_shape", kernel);
    return m;
  };
  {
    Model m = pool({1, 3, 8, 8}, {2, 2, 2});
    expect_refused(m, "pool", "MaxPool",
                   {"attribute 'kernel_shape' has 3 values [2,2,2]", "needs 2"});
  }
  {
    Model m = pool({1, 3, 8, 8}, {2, 0});
    expect_refused(m, "pool", "MaxPool", {"attribute 'kernel_shape' is [2,0]", "positive, got 0"});
  }
  {
    Model m = pool({1, 3, 3, 8}, {4, 2});
    expect_refused(m, "pool", "MaxPool",
                   {"input 0 (X 'x') of shape [1,3,3,8] has 3 elements in spatial dimension 0",
                    "kernel's extent 4"});
  }
  {
    Model m = pool({1, 3, 8, 8}, {2, 2});
    Model::attr(last(m), "storage_order", int64_t{2});
    expect_refused(m, "pool", "MaxPool", {"attribute 'storage_order' is 2"});
  }
  {
    Model m = pool({3, 8}, {2});
    expect_refused(m, "pool", "MaxPool", {"input 0 (X 'x') of shape [3,8] has rank 2"});
  }
  {
    Model m;
    m.input("x", {1, 3, 8, 8});
    auto* p = m.op("AveragePool", "avg", {"x"});
    Model::attr(p, "kernel_shape", Ints{2, 2});
    Model::attr(p, "dilations", Ints{2, 2});  // AveragePool has none before opset 19
    expect_refused(m, "avg", "AveragePool", {"attribute 'dilations' is not an attribute"});
  }
  {
    Model m;
    m.input("x", {3});
    m.op("GlobalAveragePool", "gap", {"x"});
    expect_refused(m, "gap", "GlobalAveragePool", {"input 0 (X 'x') of shape [3] has rank 1"});
  }
  {
    Model m;
    m.input("x", {3});
    m.op("GlobalMaxPool", "gmp", {"x"});
    expect_refused(m, "gmp", "GlobalMaxPool", {"input 0 (X 'x') of shape [3] has rank 1"});
  }
  {
    Model m = pool({1, 3, 8, 8}, {2, 2});
    Model::attr(last(m), "dilations", Ints{1});
    expect_refused(m, "pool", "MaxPool", {"attribute 'dilations' has 1 values [1]", "needs 2"});
  }
  {
    Model m;
    m.input("x", {1, 3, 8, 8});
    auto* p = m.op("AveragePool", "avg", {"x"});
    Model::attr(p, "kernel_shape", Ints{3, 3});
    Model::attr(p, "pads", Ints{1, 1, 1, 1, 1});
    expect_refused(m, "avg", "AveragePool", {"attribute 'pads' has 5 values", "needs 4"});
  }
}

TEST(OnnxValidation, BatchNormalizationParameters) {
  Model m(15);
  m.input("x", {1, 3, 4, 4});
  for (const char* p : {"scale", "bias", "mean"}) m.weight(p, {3});
  m.weight("var", {4});
  m.op("BatchNormalization", "bn", {"x", "scale", "bias", "mean", "var"});
  expect_refused(m, "bn", "BatchNormalization",
                 {"input 4 (input_var 'var') of shape [4] must be [3]",
                  "input 0 (X 'x') of shape [1,3,4,4] has 3 channels"});
  Model t(15);
  t.input("x", {1, 3, 4, 4});
  for (const char* p : {"scale", "bias", "mean", "var"}) t.weight(p, {3});
  Model::attr(t.op("BatchNormalization", "bn", {"x", "scale", "bias", "mean", "var"}),
              "training_mode", int64_t{2});
  expect_refused(t, "bn", "BatchNormalization", {"attribute 'training_mode' is 2"});
}

TEST(OnnxValidation, LayerNormalization) {
  {
    Model m(17);
    m.input("x", {2, 3, 4});
    m.weight("scale", {3});
    Model::attr(m.op("LayerNormalization", "ln", {"x", "scale"}), "axis", int64_t{-1});
    expect_refused(m, "ln", "LayerNormalization",
                   {"input 1 (Scale 'scale') of shape [3] does not broadcast to [4], the "
                    "dimensions of input 0 (X 'x') of shape [2,3,4] from axis 2 on"});
  }
  {
    Model m(17);
    m.input("x", {2, 3, 4});
    m.weight("scale", {4});
    Model::attr(m.op("LayerNormalization", "ln", {"x", "scale"}), "axis", int64_t{3});
    expect_refused(m, "ln", "LayerNormalization",
                   {"attribute 'axis' is 3, out of range [-3, 2] for input 0 (X 'x') of rank 3"});
  }
  {
    Model m(17);
    m.input("x", {2, 4});
    m.weight("scale", {4});
    Model::attr(m.op("LayerNormalization", "ln", {"x", "scale"}), "stash_type", int64_t{11});
    expect_refused(m, "ln", "LayerNormalization", {"stash_type=11 is not supported"});
  }
}

TEST(OnnxValidation, InstanceNormalization) {
  {
    Model m;
    m.input("x", {2, 3, 4});
    m.weight("scale", {4});
    m.weight("b", {3});
    m.op("InstanceNormalization", "in", {"x", "scale", "b"});
    expect_refused(m, "in", "InstanceNormalization",
                   {"input 1 (scale 'scale') of shape [4] must be 1-D of size C = 3 (the channels "
                    "of input 0 (input 'x') of shape [2,3,4])"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    m.weight("scale", {3});
    m.weight("b", {3});
    m.op("InstanceNormalization", "in", {"x", "scale", "b"});
    expect_refused(m, "in", "InstanceNormalization",
                   {"input 0 (input 'x') of shape [2,3] has rank 2", "(rank 3 or more)"});
  }
}

// ---- recurrent
// -----------------------------------------------------------------------------------

TEST(OnnxValidation, LstmWeights) {
  auto lstm = [](const Ints& w, const Ints& r, int64_t hidden) {
    Model m;
    m.input("seq", {5, 2, 8});
    m.weight("W", w);
    m.weight("R", r);
    auto* l = m.op("LSTM", "lstm", {"seq", "W", "R"});
    if (hidden > 0) Model::attr(l, "hidden_size", hidden);
    return m;
  };
  expect_refused(lstm({1, 16, 7}, {1, 16, 4}, 4), "lstm", "LSTM",
                 {"input 1 (W 'W') of shape [1,16,7] must be [1,16,8]", "hidden_size 4",
                  "input_size 8", "input 0 (X 'seq') of shape [5,2,8]"});
  expect_refused(lstm({1, 16, 8}, {1, 16, 5}, 4), "lstm", "LSTM",
                 {"input 2 (R 'R') of shape [1,16,5] must be [1,16,4]"});
  expect_refused(lstm({1, 12, 8}, {1, 12, 3}, 4), "lstm", "LSTM",
                 {"input 1 (W 'W') of shape [1,12,8] must be [1,16,8]"});
  expect_refused(lstm({2, 16, 8}, {2, 16, 4}, 4), "lstm", "LSTM",
                 {"input 1 (W 'W') of shape [2,16,8] must be [1,16,8]", "num_directions 1"});
  expect_refused(lstm({1, 14, 8}, {1, 14, 3}, 0), "lstm", "LSTM",
                 {"input 1 (W 'W') of shape [1,14,8] has 14 rows", "4 * hidden_size"});
  {
    Model m = lstm({1, 16, 8}, {1, 16, 4}, 4);
    Model::attr(last(m), "direction", std::string("sideways"));
    expect_refused(m, "lstm", "LSTM", {"attribute 'direction' is 'sideways'"});
  }
  {
    Model m;
    m.input("seq", {5, 2, 8});
    m.weight("W", {1, 16, 8});
    m.weight("R", {1, 16, 4});
    m.weight("B", {1, 16});
    Model::attr(m.op("LSTM", "lstm", {"seq", "W", "R", "B"}), "hidden_size", int64_t{4});
    expect_refused(m, "lstm", "LSTM", {"input 3 (B 'B') of shape [1,16] must be [1,32]"});
  }
  {
    Model m;
    m.input("seq", {5, 2, 8});
    m.weight("W", {1, 16, 8});
    m.weight("R", {1, 16, 4});
    m.input("lens", {3}, TensorProto::INT32);
    m.weight("h0", {1, 2, 5});
    m.op("LSTM", "lstm", {"seq", "W", "R", "", "lens"});
    expect_refused(m, "lstm", "LSTM",
                   {"input 4 (sequence_lens 'lens') of shape [3] must be [2]", "batch 2"});
    last(m)->add_input("h0");
    last(m)->set_input(4, "");
    expect_refused(m, "lstm", "LSTM",
                   {"input 5 (initial_h 'h0') of shape [1,2,5] must be [1,2,4]"});
  }
  {
    Model m;
    m.input("seq", {5, 2, 8});
    m.weight("W", {1, 16, 8});
    m.weight("R", {1, 16, 4});
    auto* l = m.op("LSTM", "lstm", {"seq", "W", "R"});
    auto* act = l->add_attribute();
    act->set_name("activations");
    act->set_type(onnx::AttributeProto::STRINGS);
    act->add_strings("Sigmoid");
    act->add_strings("Tanh");
    expect_refused(m, "lstm", "LSTM",
                   {"attribute 'activations' has 2 functions", "direction 'forward' needs 3"});
  }
}

// ---- quantization
// --------------------------------------------------------------------------------

TEST(OnnxValidation, QuantizeLinearScalesAndZeroPoints) {
  auto imports = [](const Model& m) { EXPECT_NO_THROW(import_onnx_bytes(m.bytes(), "<valid>")); };
  {  // a per-axis scale of the wrong length
    Model m;
    m.input("x", {1, 4, 2, 2});
    m.weight("s", {3});
    m.op("QuantizeLinear", "q", {"x", "s"});
    expect_refused(m, "q", "QuantizeLinear",
                   {"input 1 (y_scale 's') of shape [3]", "3 scales", "4 elements along axis 1"});
  }
  {  // per-axis scales before opset 13
    Model m(11);
    m.input("x", {1, 4, 2, 2});
    m.weight("s", {4});
    m.op("QuantizeLinear", "q", {"x", "s"});
    expect_refused(m, "q", "QuantizeLinear", {"must be a scalar at opset 11", "need opset 13"});
  }
  {  // a zero point of another shape than the scale
    Model m;
    m.input("x", {1, 4, 2, 2});
    m.weight("s", {4});
    init_ints(m, "z", {}, TensorProto::INT8, {0});
    Model::attr(m.op("QuantizeLinear", "q", {"x", "s", "z"}), "axis", int64_t{1});
    expect_refused(m, "q", "QuantizeLinear",
                   {"input 2 (y_zero_point 'z') of shape []", "must have the shape of input 1"});
  }
  {  // a scale that is not positive
    Model m;
    m.input("x", {2, 3}, TensorProto::INT8);
    m.init_scalar("s", -0.5f);
    m.op("DequantizeLinear", "dq", {"x", "s"});
    expect_refused(m, "dq", "DequantizeLinear",
                   {"input 1 (x_scale 's')", "-0.5", "positive and finite"});
  }
  {  // an int32 (bias) dequantized with a zero point other than 0
    Model m;
    m.input("x", {3}, TensorProto::INT32);
    m.init_scalar("s", 0.25f);
    init_ints(m, "z", {}, TensorProto::INT32, {3});
    m.op("DequantizeLinear", "dq", {"x", "s", "z"});
    expect_refused(m, "dq", "DequantizeLinear",
                   {"input 2 (x_zero_point 'z')", "must be 0", "int32"});
  }
  {  // valid: per-axis along a negative axis, uint8 without a zero point, int32 with a zero of 0
    Model m;
    m.input("x", {2, 3, 4});
    m.weight("s", {4});
    init_ints(m, "z", {4}, TensorProto::UINT8, {0, 1, 2, 255});
    Model::attr(m.node("QuantizeLinear", "q", {"x", "s", "z"}, {"q"}), "axis", int64_t{-1});
    m.init_scalar("t", 0.5f);
    m.node("QuantizeLinear", "q2", {"x", "t"}, {"q2"});
    m.input("b", {3}, TensorProto::INT32);
    init_ints(m, "zb", {}, TensorProto::INT32, {0});
    m.node("DequantizeLinear", "dq", {"b", "t", "zb"}, {"y"});
    m.output("q");
    m.output("q2");
    m.output("y");
    imports(m);
  }
}

TEST(OnnxValidation, DynamicQuantization) {
  {  // DynamicQuantizeLinear quantizes float only
    Model m;
    m.input("x", {2, 3}, TensorProto::INT8);
    m.node("DynamicQuantizeLinear", "dql", {"x"}, {"y", "s", "z"});
    for (const char* o : {"y", "s", "z"}) m.output(o);
    expect_refused(m, "dql", "DynamicQuantizeLinear", {"input 0", "int8"});
  }
  {  // an LSTM that quantize_dynamic made ONNX Runtime's DynamicQuantizeLSTM
    Model m;
    m.graph()->add_node()->CopyFrom([] {
      onnx::NodeProto n;
      n.set_op_type("DynamicQuantizeLSTM");
      n.set_domain("com.microsoft");
      n.set_name("lstm_quant");
      n.add_input("x");
      n.add_output("y");
      return n;
    }());
    m.input("x", {4, 1, 8});
    m.output("y");
    EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<contrib>"),
                          "unsupported operator 'DynamicQuantizeLSTM' of domain 'com.microsoft'");
    EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<contrib>"), "at node 'lstm_quant'");
    EXPECT_ERROR_CONTAINS(import_onnx_bytes(m.bytes(), "<contrib>"),
                          "leave LSTM out of op_types_to_quantize");
  }
}

}  // namespace
}  // namespace kiln::graph
