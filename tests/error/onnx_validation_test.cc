// The ONNX importer validates every node against the ONNX specification before anything else sees
// it: each bad model here breaks one rule, and the import must fail with a kiln::Error whose
// message names the node, the operator, the input or attribute, and both values that disagree
// (an internal error, another exception or a crash fails the test). Then valid models near each
// rule's edge, which must import: the validation never refuses what the specification allows.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "tests/common/onnx_model_builder.h"

namespace kiln::graph {
namespace {

using onnx::TensorProto;
using Ints = std::vector<int64_t>;

class Model : public testing::OnnxModelBuilder {
 public:
  using OnnxModelBuilder::OnnxModelBuilder;
  /// A float initializer of zeros.
  void weight(const std::string& name, const Ints& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    init_values(name, shape, std::vector<float>(static_cast<size_t>(n), 0.5f));
  }
  /// One node named `name` reading `inputs` whose output "y" is the graph's output.
  onnx::NodeProto* op(const std::string& type, const std::string& name,
                      const std::vector<std::string>& inputs) {
    output("y");
    return node(type, name, inputs, {"y"});
  }
};

/// Imports `m`, expecting kiln::Error whose message holds "node 'NAME' (OP)" and every part.
void expect_refused(const Model& m, const std::string& node, const std::string& op,
                    const std::vector<std::string>& parts) {
  SCOPED_TRACE("node '" + node + "' (" + op + ")");
  try {
    import_onnx_bytes(m.bytes(), "<bad>");
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'<bad>'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node '" + node + "' (" + op + ")"), std::string::npos) << msg;
    for (const std::string& p : parts) {
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    }
    return;
  } catch (const std::exception& e) {
    FAIL() << "expected kiln::Error, got another exception: " << e.what();
  }
  FAIL() << "expected kiln::Error, the model imported";
}

/// The last node of `m` (to set attributes on after the model is made).
onnx::NodeProto* last(Model& m) { return m.graph()->mutable_node(m.graph()->node_size() - 1); }

/// x convolved with a weight "w" of `w_shape` by node 'conv1'.
Model conv_model(const Ints& x_shape, const Ints& w_shape, const std::string& op = "Conv") {
  Model m;
  m.input("x", x_shape);
  m.weight("w", w_shape);
  m.op(op, "conv1", {"x", "w"});
  return m;
}

// ---- the issue's model ----------------------------------------------------------------------

TEST(OnnxValidation, ConvWeightChannelsAgainstInput) {
  // Weight with 5 input channels, input with 3: this model made `kiln compile` corrupt the heap.
  Model m = conv_model({1, 3, 8, 8}, {4, 5, 3, 3});
  try {
    import_onnx_bytes(m.bytes(), "bad_channels.onnx");
    FAIL() << "the model imported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "error: 'bad_channels.onnx': node 'conv1' (Conv): input 1 (W 'w') has 5 input "
              "channels per group, but input 0 (X 'x') has 3 channels with group 1");
  }
  // The same through the whole compile path.
  EXPECT_THROW(build_graph(import_onnx_bytes(m.bytes(), "m"), "llvm"), Error);
}

TEST(OnnxValidation, EinsumEquationAgainstTheOperands) {
  auto model = [](const std::string& eq, const Ints& b_shape) {
    Model m(13);
    m.input("a", {2, 3});
    m.input("b", b_shape);
    Model::attr(m.op("Einsum", "attn", {"a", "b"}), "equation", eq);
    return m;
  };
  expect_refused(model("ij,jk->ik", {4, 5}), "attn", "Einsum",
                 {"attribute 'equation': einsum 'ij,jk->ik': axis 'j' is 3 in one operand and 4 in "
                  "operand 1"});
  expect_refused(model("ij,jkl->ik", {3, 5}), "attn", "Einsum",
                 {"term 'jkl' names 3 axes, but operand 1 has rank 2"});
  expect_refused(model("ij,jk->iz", {3, 5}), "attn", "Einsum",
                 {"output axis 'z' is in no input term"});
  expect_refused(model("ij,j1->i", {3, 5}), "attn", "Einsum", {"has the character '1'"});
  expect_refused(model("ij->i", {3, 5}), "attn", "Einsum", {"has 1 input terms for 2 operands"});
}

// ---- what the schema says -------------------------------------------------------------------

TEST(OnnxValidation, InputAndOutputCounts) {
  Model m;
  m.input("x", {2, 3});
  m.op("Relu", "relu", {"x", "x"});
  expect_refused(m, "relu", "Relu", {"has 2 inputs", "Relu at opset 13 takes 1"});

  Model o;
  o.input("x", {2, 3});
  o.node("Relu", "relu2", {"x"}, {"y", "z"});
  o.output("y");
  expect_refused(o, "relu2", "Relu", {"has 2 outputs", "has 1"});

  Model r = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
  auto* conv = last(r);
  conv->set_input(1, "");
  expect_refused(r, "conv1", "Conv", {"input 1 (W '')", "is required"});
}

TEST(OnnxValidation, AttributesAgainstTheSchema) {
  {
    Model m;
    m.input("x", {2, 3});
    Model::attr(m.op("Relu", "relu", {"x"}), "alpha", 0.5f);
    expect_refused(m, "relu", "Relu", {"attribute 'alpha'", "not an attribute of Relu"});
  }
  {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "group", 1.0f);
    expect_refused(m, "conv1", "Conv",
                   {"attribute 'group'", "must be an int (INT)", "got a float (FLOAT)"});
  }
  {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "strides", int64_t{2});
    expect_refused(m, "conv1", "Conv",
                   {"attribute 'strides'", "a list of ints (INTS)", "got an int (INT)"});
  }
  {
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "group", int64_t{1});
    Model::attr(conv, "group", int64_t{1});
    expect_refused(m, "conv1", "Conv", {"attribute 'group' is given twice"});
  }
  {
    Model m;
    m.input("a", {2});
    m.input("b", {2});
    m.op("Concat", "cat", {"a", "b"});
    expect_refused(m, "cat", "Concat", {"attribute 'axis' is required"});
  }
  {
    Model m;
    m.input("x", {2});
    Model::attr(m.op("Cast", "cast", {"x"}), "to", int64_t{99});
    expect_refused(m, "cast", "Cast", {"attribute 'to' is 99", "not an ONNX data type"});
  }
  {
    Model m;
    auto* c = m.node("Constant", "k", {}, {"y"});
    Model::attr(c, "value_float", 1.0f);
    Model::attr(c, "value_int", int64_t{1});
    m.output("y");
    expect_refused(m, "k", "Constant", {"has 2 attributes", "exactly one"});
  }
}

TEST(OnnxValidation, ElementTypes) {
  {
    Model m;
    m.input("x", {1, 3, 8, 8}, TensorProto::INT64);
    m.weight("w", {4, 3, 3, 3});
    m.op("Conv", "conv1", {"x", "w"});
    expect_refused(m, "conv1", "Conv",
                   {"input 0 (X 'x') is tensor(int64)", "tensor(float)", "(T)"});
  }
  {
    Model m;
    m.input("a", {2}, TensorProto::FLOAT);
    m.input("b", {2}, TensorProto::DOUBLE);
    m.op("Add", "add", {"a", "b"});
    expect_refused(
        m, "add", "Add",
        {"input 1 (B 'b') is tensor(double)", "input 0 (A 'a') is tensor(float)", "type T"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    auto* t = m.graph()->add_initializer();
    t->set_name("shape");
    t->set_data_type(TensorProto::INT32);
    t->add_dims(1);
    t->add_int32_data(6);
    m.op("Reshape", "reshape", {"x", "shape"});
    expect_refused(m, "reshape", "Reshape",
                   {"input 1 (shape 'shape') is tensor(int32)", "tensor(int64)"});
  }
  {  // the unary operators: element types only
    Model m;
    m.input("x", {4}, TensorProto::INT32);
    m.op("Sqrt", "sqrt", {"x"});
    expect_refused(m, "sqrt", "Sqrt", {"input 0 (X 'x') is tensor(int32)", "tensor(float)"});
  }
  {
    Model m;
    m.input("x", {4}, TensorProto::BOOL);
    m.op("Relu", "relu", {"x"});
    expect_refused(m, "relu", "Relu", {"input 0 (X 'x') is tensor(bool)"});
  }
  {
    Model m;
    m.input("x", {4});
    Model::attr(m.op("LeakyRelu", "lrelu", {"x"}), "alpha", int64_t{1});
    expect_refused(m, "lrelu", "LeakyRelu",
                   {"attribute 'alpha' must be a float (FLOAT), got an int (INT)"});
  }
  {
    Model m(15);
    m.input("x", {4});
    Model::attr(m.op("Shape", "shape", {"x"}), "start", std::string("0"));
    expect_refused(m, "shape", "Shape",
                   {"attribute 'start' must be an int (INT), got a string (STRING)"});
  }
  {
    Model m;
    m.input("x", {4});
    m.init_int64("idx", {0});
    m.op("Gather", "gather", {"x", "x"});
    expect_refused(m, "gather", "Gather", {"input 1 (indices 'x') is tensor(float)"});
  }
}

// ---- convolutions ---------------------------------------------------------------------------

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

// ---- pooling and normalization --------------------------------------------------------------

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

// ---- matrix products ------------------------------------------------------------------------

TEST(OnnxValidation, GemmAndMatMul) {
  {
    Model m;
    m.input("a", {2, 24});
    m.weight("b", {5, 30});
    Model::attr(m.op("Gemm", "fc", {"a", "b"}), "transB", int64_t{1});
    expect_refused(m, "fc", "Gemm",
                   {"inner dimensions differ", "input 0 (A 'a') of shape [2,24] with transA 0",
                    "K = 24", "input 1 (B 'b') of shape [5,30] with transB 1", "K = 30"});
  }
  {
    Model m;
    m.input("a", {2, 3, 4});
    m.weight("b", {4, 5});
    m.op("Gemm", "fc", {"a", "b"});
    expect_refused(m, "fc", "Gemm", {"input 0 (A 'a') of shape [2,3,4] has rank 3"});
  }
  {
    Model m;
    m.input("a", {2, 4});
    m.weight("b", {4, 5});
    m.weight("c", {3, 5});
    m.op("Gemm", "fc", {"a", "b", "c"});
    expect_refused(m, "fc", "Gemm", {"input 2 (C 'c') of shape [3,5] does not broadcast", "[2,5]"});
  }
  {
    Model m;
    m.input("a", {2, 3, 4});
    m.input("b", {2, 5, 6});
    m.op("MatMul", "mm", {"a", "b"});
    expect_refused(m, "mm", "MatMul",
                   {"inner dimensions differ", "input 0 (A 'a') of shape [2,3,4] gives K = 4",
                    "input 1 (B 'b') of shape [2,5,6] gives K = 5"});
  }
  {
    Model m;
    m.input("a", {2, 3, 4});
    m.input("b", {3, 4, 5});
    m.op("MatMul", "mm", {"a", "b"});
    expect_refused(
        m, "mm", "MatMul",
        {"batch dimensions [2] of input 0 (A 'a')", "[3] of input 1 (B 'b')", "2 against 3"});
  }
  {
    Model m;
    m.input("a", {});
    m.input("b", {3});
    m.op("MatMul", "mm", {"a", "b"});
    expect_refused(m, "mm", "MatMul", {"input 0 (A 'a') is a scalar"});
  }
}

// ---- shapes, axes and parameters ------------------------------------------------------------

TEST(OnnxValidation, Broadcasting) {
  {
    Model m;
    m.input("a", {2, 3});
    m.input("b", {4});
    m.op("Mul", "mul", {"a", "b"});
    expect_refused(m, "mul", "Mul",
                   {"input 1 (B 'b') of shape [4] does not broadcast with input 0 (A 'a') of "
                    "shape [2,3]: 4 against 3"});
  }
  {
    Model m;
    m.input("a", {2, 1});
    m.input("b", {1, 3});
    m.input("c", {5, 3});
    m.op("Max", "max", {"a", "b", "c"});
    expect_refused(m, "max", "Max",
                   {"input 2 (data_0 'c') of shape [5,3] does not broadcast with input 0 "
                    "(data_0 'a') of shape [2,1]: 5 against 2"});
  }
}

TEST(OnnxValidation, Concat) {
  auto cat = [](const Ints& a, const Ints& b, int64_t axis) {
    Model m;
    m.input("a", a);
    m.input("b", b);
    Model::attr(m.op("Concat", "cat", {"a", "b"}), "axis", axis);
    return m;
  };
  expect_refused(cat({2, 3}, {2, 3, 1}, 0), "cat", "Concat",
                 {"input 1 (inputs 'b') of shape [2,3,1] has rank 3",
                  "input 0 (inputs 'a') of shape [2,3] has rank 2"});
  expect_refused(cat({2, 3}, {2, 4}, 0), "cat", "Concat",
                 {"input 1 (inputs 'b') of shape [2,4] differs from input 0 (inputs 'a') of "
                  "shape [2,3] in dimension 1 (4 against 3)"});
  expect_refused(cat({2, 3}, {2, 3}, 2), "cat", "Concat",
                 {"attribute 'axis' is 2, out of range [-2, 1]", "input 0 (inputs 'a')"});
  expect_refused(cat({}, {}, 0), "cat", "Concat", {"input 0 (inputs 'a') is a scalar"});
}

TEST(OnnxValidation, Reshape) {
  auto reshape = [](const Ints& x, const Ints& shape, int64_t opset = 13) {
    Model m(opset);
    m.input("x", x);
    m.init_int64("shape", shape);
    m.op("Reshape", "reshape", {"x", "shape"});
    return m;
  };
  expect_refused(reshape({2, 3}, {-1, -1}), "reshape", "Reshape",
                 {"input 1 (shape 'shape') [-1,-1] holds -1 twice"});
  expect_refused(
      reshape({2, 3}, {4, 2}), "reshape", "Reshape",
      {"input 1 (shape 'shape') [4,2] has 8 elements", "input 0 (data 'x') of shape [2,3] has 6"});
  expect_refused(reshape({6}, {3, 0}), "reshape", "Reshape",
                 {"[3,0] holds 0 at index 1", "input 0 (data 'x') of shape [6]", "rank 1"});
  {
    Model m;
    m.input("x", {2, 3});
    auto* t = m.graph()->add_initializer();
    t->set_name("shape");
    t->set_data_type(TensorProto::INT64);
    t->add_dims(1);
    t->add_dims(2);
    t->add_int64_data(3);
    t->add_int64_data(2);
    m.op("Reshape", "reshape", {"x", "shape"});
    expect_refused(m, "reshape", "Reshape", {"input 1 (shape 'shape') of shape [1,2] must be 1-D"});
  }
  expect_refused(reshape({2, 3}, {-2, 3}), "reshape", "Reshape",
                 {"[-2,3] holds -2", "-1, 0 or positive"});
  expect_refused(
      reshape({2, 3}, {4, -1}), "reshape", "Reshape",
      {"[4,-1]", "input 0 (data 'x') of shape [2,3] has 6 elements", "(4 elements) do not divide"});
  {
    Model m = reshape({2, 3}, {0, -1}, 14);
    Model::attr(last(m), "allowzero", int64_t{1});
    expect_refused(m, "reshape", "Reshape", {"[0,-1] holds both -1 and 0"});
  }
  {
    Model m = reshape({2, 3}, {2, 3}, 14);
    Model::attr(last(m), "allowzero", int64_t{3});
    expect_refused(m, "reshape", "Reshape", {"attribute 'allowzero' is 3"});
  }
}

TEST(OnnxValidation, AxesAndPermutations) {
  {
    Model m;
    m.input("x", {2, 3});
    Model::attr(m.op("Softmax", "sm", {"x"}), "axis", int64_t{2});
    expect_refused(m, "sm", "Softmax",
                   {"attribute 'axis' is 2, out of range [-2, 1] for input 0 (input 'x') of "
                    "rank 2"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    Model::attr(m.op("Flatten", "flat", {"x"}), "axis", int64_t{-3});
    expect_refused(m, "flat", "Flatten", {"attribute 'axis' is -3, out of range [-2, 2]"});
  }
  {
    Model m;
    m.input("x", {2, 3, 4});
    Model::attr(m.op("Transpose", "tr", {"x"}), "perm", Ints{0, 2, 2});
    expect_refused(m, "tr", "Transpose",
                   {"attribute 'perm' [0,2,2] is not a permutation of 0..2",
                    "input 0 (data 'x') of shape [2,3,4] has rank 3"});
  }
  {
    Model m;
    m.input("x", {2, 3, 4});
    Model::attr(m.op("Transpose", "tr", {"x"}), "perm", Ints{1, 0});
    expect_refused(m, "tr", "Transpose", {"attribute 'perm' [1,0] is not a permutation of 0..2"});
  }
  {
    Model m(11);
    m.input("x", {2, 3});
    Model::attr(m.op("Squeeze", "sq", {"x"}), "axes", Ints{-1});
    expect_refused(m, "sq", "Squeeze",
                   {"attribute 'axes' [-1] squeezes dimension 1", "size 3, not 1"});
  }
  {
    Model m;
    m.input("x", {2, 1, 4});
    m.init_int64("axes", {0});
    m.op("Squeeze", "sq", {"x", "axes"});
    expect_refused(m, "sq", "Squeeze",
                   {"input 1 (axes 'axes') [0] squeezes dimension 0",
                    "input 0 (data 'x') of shape [2,1,4]", "size 2, not 1"});
  }
  {
    Model m;
    m.input("x", {2, 1, 4});
    m.init_int64("axes", {1, -2});
    m.op("Squeeze", "sq", {"x", "axes"});
    expect_refused(m, "sq", "Squeeze", {"[1,-2] names dimension 1", "twice"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    m.init_int64("axes", {3});
    m.op("Unsqueeze", "unsq", {"x", "axes"});
    expect_refused(m, "unsq", "Unsqueeze",
                   {"input 1 (axes 'axes') [3] holds axis 3, out of range [-3, 2]"});
  }
  {
    Model m(11);
    m.input("x", {2, 3});
    Model::attr(m.op("Unsqueeze", "unsq", {"x"}), "axes", Ints{0, 0});
    expect_refused(m, "unsq", "Unsqueeze", {"attribute 'axes' [0,0] names dimension 0", "twice"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("idx", {1, 5});
    Model::attr(m.op("Gather", "gather", {"x", "idx"}), "axis", int64_t{1});
    expect_refused(m, "gather", "Gather",
                   {"input 1 (indices 'idx') holds index 5, out of range [-5, 4]",
                    "dimension 1 of input 0 (data 'x') of shape [4,5]"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("idx", {0});
    Model::attr(m.op("Gather", "gather", {"x", "idx"}), "axis", int64_t{-3});
    expect_refused(m, "gather", "Gather", {"attribute 'axis' is -3, out of range [-2, 1]"});
  }
}

TEST(OnnxValidation, SliceAndPad) {
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("starts", {0, 1});
    m.init_int64("ends", {2});
    m.op("Slice", "slice", {"x", "starts", "ends"});
    expect_refused(m, "slice", "Slice",
                   {"input 2 (ends 'ends') of shape [1] has 1 values",
                    "input 1 (starts 'starts') of shape [2] has 2"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("starts", {0});
    m.init_int64("ends", {2});
    m.init_int64("axes", {1});
    m.init_int64("steps", {0});
    m.op("Slice", "slice", {"x", "starts", "ends", "axes", "steps"});
    expect_refused(m, "slice", "Slice", {"input 4 (steps 'steps') [0] holds a step of 0"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("starts", {0, 0});
    m.init_int64("ends", {2, 2});
    m.init_int64("axes", {1, -1});
    m.op("Slice", "slice", {"x", "starts", "ends", "axes"});
    expect_refused(
        m, "slice", "Slice",
        {"input 3 (axes 'axes') [1,-1] names dimension 1 of input 0 (data 'x')", "twice"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("starts", {0, 0, 0});
    m.init_int64("ends", {1, 1, 1});
    m.op("Slice", "slice", {"x", "starts", "ends"});
    expect_refused(m, "slice", "Slice",
                   {"input 1 (starts 'starts') of shape [3] has 3 values, more than the 2 "
                    "dimensions of input 0 (data 'x') of shape [4,5]"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("starts", {0});
    m.init_int64("ends", {1});
    m.init_int64("axes", {-3});
    m.op("Slice", "slice", {"x", "starts", "ends", "axes"});
    expect_refused(m, "slice", "Slice",
                   {"input 3 (axes 'axes') [-3] holds axis -3, out of range [-2, 1]"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("pads", {0, 1, 0, 1});
    m.weight("value", {2});
    m.op("Pad", "pad", {"x", "pads", "value"});
    expect_refused(m, "pad", "Pad",
                   {"input 2 (constant_value 'value') of shape [2] must be a scalar"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("pads", {1, 1, 1});
    m.op("Pad", "pad", {"x", "pads"});
    expect_refused(m, "pad", "Pad",
                   {"input 1 (pads 'pads') [1,1,1] has 3 values",
                    "input 0 (data 'x') of shape [4,5] has rank 2", "needs 4"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("pads", {0, -3, 0, -3});
    m.op("Pad", "pad", {"x", "pads"});
    expect_refused(
        m, "pad", "Pad",
        {"input 1 (pads 'pads') [0,-3,0,-3] removes more than the 5 elements", "dimension 1"});
  }
  {
    Model m;
    m.input("x", {4, 5});
    m.init_int64("pads", {0, 1, 0, 1});
    Model::attr(m.op("Pad", "pad", {"x", "pads"}), "mode", std::string("wrap"));
    expect_refused(m, "pad", "Pad", {"attribute 'mode' is 'wrap'", "constant, reflect or edge"});
  }
  {
    Model m(18);
    m.input("x", {4, 5});
    m.init_int64("pads", {1, 1});
    m.init_int64("axes", {2});
    m.op("Pad", "pad", {"x", "pads", "", "axes"});
    expect_refused(m, "pad", "Pad", {"input 3 (axes 'axes') [2] holds axis 2, out of range"});
  }
}

TEST(OnnxValidation, ClipAndDropoutScalars) {
  {
    Model m;
    m.input("x", {4});
    m.weight("lo", {2});
    m.op("Clip", "clip", {"x", "lo"});
    expect_refused(m, "clip", "Clip", {"input 1 (min 'lo') of shape [2] must be a scalar"});
  }
  {
    Model m;
    m.input("x", {4});
    m.weight("hi", {1, 2});
    m.op("Clip", "clip", {"x", "", "hi"});
    expect_refused(m, "clip", "Clip", {"input 2 (max 'hi') of shape [1,2] must be a scalar"});
  }
  {
    Model m;
    m.input("x", {4});
    m.init_scalar("ratio", 1.5f);
    m.op("Dropout", "drop", {"x", "ratio"});
    expect_refused(m, "drop", "Dropout", {"input 1 (ratio 'ratio') is 1.5", "[0, 1)"});
  }
}

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

// ---- valid models near the rules' edges import --------------------------------------------

// ---- the operators of issue 15 ----------------------------------------------------------------

TEST(OnnxValidation, Reductions) {
  {  // axes as an attribute (opset 13)
    Model m;
    m.input("x", {2, 3, 4});
    Model::attr(m.op("ReduceMean", "mean", {"x"}), "axes", Ints{1, 3});
    expect_refused(m, "mean", "ReduceMean",
                   {"attribute 'axes' [1,3] holds axis 3, out of range [-3, 2]",
                    "input 0 (data 'x')", "rank 3"});
  }
  {  // the same axis twice
    Model m;
    m.input("x", {2, 3, 4});
    Model::attr(m.op("ReduceMax", "max", {"x"}), "axes", Ints{1, -2});
    expect_refused(m, "max", "ReduceMax", {"attribute 'axes' [1,-2] names dimension 1", "twice"});
  }
  {  // axes as an input (ReduceSum, opset 13) out of range
    Model m;
    m.input("x", {2, 3});
    m.init_int64("axes", {2});
    m.op("ReduceSum", "sum", {"x", "axes"});
    expect_refused(m, "sum", "ReduceSum",
                   {"input 1 (axes 'axes') [2] holds axis 2, out of range [-2, 1]"});
  }
  {  // keepdims must be a flag
    Model m;
    m.input("x", {2, 3});
    Model::attr(m.op("ReduceL2", "l2", {"x"}), "keepdims", int64_t{2});
    expect_refused(m, "l2", "ReduceL2", {"attribute 'keepdims' is 2; it must be 0 or 1"});
  }
  {  // opset 18: the axes are input 1, no longer an attribute
    Model m(18);
    m.input("x", {2, 3});
    Model::attr(m.op("ReduceLogSumExp", "lse", {"x"}), "axes", Ints{1});
    expect_refused(m, "lse", "ReduceLogSumExp",
                   {"attribute 'axes' is not an attribute of ReduceLogSumExp at opset 18",
                    "from opset 18 the axes are input 1"});
  }
  {  // opset 18: an axes input out of range
    Model m(18);
    m.input("x", {2, 3});
    m.init_int64("axes", {-3});
    m.op("ReduceProd", "prod", {"x", "axes"});
    expect_refused(m, "prod", "ReduceProd",
                   {"input 1 (axes 'axes') [-3] holds axis -3, out of range [-2, 1]"});
  }
  {  // axes computed at run time: Kiln needs them at compile time
    Model m(18);
    m.input("x", {2, 3});
    m.input("axes", {1}, TensorProto::INT64);
    m.op("ReduceMin", "min", {"x", "axes"});
    expect_refused(m, "min", "ReduceMin", {"input 'axes' must be a constant"});
  }
  {  // ArgMax: the axis, the flags
    Model m;
    m.input("x", {2, 3});
    Model::attr(m.op("ArgMax", "argmax", {"x"}), "axis", int64_t{2});
    expect_refused(
        m, "argmax", "ArgMax",
        {"attribute 'axis' is 2, out of range [-2, 1] for input 0 (data 'x') of rank 2"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    Model::attr(m.op("ArgMin", "argmin", {"x"}), "select_last_index", int64_t{-1});
    expect_refused(m, "argmin", "ArgMin",
                   {"attribute 'select_last_index' is -1; it must be 0 or 1"});
  }
}

TEST(OnnxValidation, NewBroadcastingOperators) {
  {
    Model m;
    m.input("a", {2, 3});
    m.input("b", {2});
    m.op("Less", "less", {"a", "b"});
    expect_refused(m, "less", "Less",
                   {"input 1 (B 'b') of shape [2] does not broadcast with input 0 (A 'a') of "
                    "shape [2,3]: 2 against 3"});
  }
  {
    Model m;
    m.input("c", {4, 1}, TensorProto::BOOL);
    m.input("a", {3});
    m.input("b", {2, 5, 1});
    m.op("Where", "where", {"c", "a", "b"});
    expect_refused(m, "where", "Where",
                   {"input 2 (Y 'b') of shape [2,5,1] does not broadcast with input 0 "
                    "(condition 'c') of shape [4,1]: 5 against 4"});
  }
  {  // And takes bools only
    Model m;
    m.input("a", {2});
    m.input("b", {2});
    m.op("And", "and", {"a", "b"});
    expect_refused(m, "and", "And", {"input 0 (A 'a') is tensor(float)", "tensor(bool)"});
  }
  {  // PRelu: the slope broadcasts to X, not the other way round
    Model m;
    m.input("x", {3, 1});
    m.input("slope", {3, 4});
    m.op("PRelu", "prelu", {"x", "slope"});
    expect_refused(m, "prelu", "PRelu",
                   {"input 1 (slope 'slope') of shape [3,4] does not broadcast to input 0 (X 'x') "
                    "of shape [3,1]"});
  }
  {
    Model m;
    m.input("a", {2, 3});
    m.input("b", {3});
    m.input("c", {4});
    m.op("Sum", "sum", {"a", "b", "c"});
    expect_refused(m, "sum", "Sum",
                   {"input 2 (data_0 'c') of shape [4] does not broadcast with input 0 (data_0 "
                    "'a') of shape [2,3]: 4 against 3"});
  }
}

TEST(OnnxValidation, ExpandTileSplitAndGenerators) {
  {
    Model m;
    m.input("x", {3, 2});
    m.init_int64("shape", {2, 3});
    m.op("Expand", "expand", {"x", "shape"});
    expect_refused(m, "expand", "Expand",
                   {"input 0 (input 'x') of shape [3,2] does not broadcast with the shape [2,3] "
                    "of input 1 (shape 'shape'): 2 against 3"});
  }
  {
    Model m;
    m.input("x", {3, 2});
    m.input("shape", {2}, TensorProto::INT64);
    m.op("Expand", "expand", {"x", "shape"});
    expect_refused(m, "expand", "Expand", {"input 'shape' must be a constant"});
  }
  {
    Model m;
    m.input("x", {3, 2});
    m.init_int64("reps", {2, 2, 2});
    m.op("Tile", "tile", {"x", "reps"});
    expect_refused(m, "tile", "Tile",
                   {"input 1 (repeats 'reps') of shape [3] has 3 repeat counts, but input 0 "
                    "(input 'x') of shape [3,2] has rank 2"});
  }
  {
    Model m;
    m.input("x", {3, 2});
    m.init_int64("reps", {2, -1});
    m.op("Tile", "tile", {"x", "reps"});
    expect_refused(m, "tile", "Tile",
                   {"input 1 (repeats 'reps') is [2,-1]; a repeat count must not be negative"});
  }
  {  // Split sizes that do not add up (opset 13: an input)
    Model m;
    m.input("x", {6, 2});
    m.init_int64("split", {2, 3});
    m.node("Split", "split", {"x", "split"}, {"a", "b"});
    m.output("a");
    m.output("b");
    expect_refused(m, "split", "Split",
                   {"input 1 (split 'split') is [2,3], which sums to 5, but dimension 0 of input "
                    "0 (input 'x') of shape [6,2] is 6"});
  }
  {  // an even split that is not (opset 13, no sizes)
    Model m;
    m.input("x", {5});
    m.node("Split", "split", {"x"}, {"a", "b"});
    m.output("a");
    m.output("b");
    expect_refused(m, "split", "Split",
                   {"dimension 0 of input 0 (input 'x') of shape [5] does not split into 2 "
                    "equal parts"});
  }
  {  // opset 18: num_outputs against the outputs
    Model m(18);
    m.input("x", {6});
    Model::attr(m.node("Split", "split", {"x"}, {"a", "b"}), "num_outputs", int64_t{3});
    m.output("a");
    m.output("b");
    expect_refused(m, "split", "Split",
                   {"attribute 'num_outputs' is 3, but the node has 2 outputs"});
  }
  {
    Model m;
    m.init_int64("shape", {2, -3});
    m.op("ConstantOfShape", "fill", {"shape"});
    expect_refused(m, "fill", "ConstantOfShape",
                   {"input 0 (input 'shape') is [2,-3]; a dimension must not be negative"});
  }
  {
    Model m;
    m.init_int64("start", {0});
    m.init_int64("limit", {5, 6});
    m.init_int64("delta", {1});
    m.op("Range", "range", {"start", "limit", "delta"});
    expect_refused(m, "range", "Range", {"input 1 (limit 'limit') of shape [2] must be a scalar"});
  }
  {
    Model m;
    m.init_int64("start", {0}, true);
    m.init_int64("limit", {5}, true);
    m.input("delta", {}, TensorProto::INT64);
    m.op("Range", "range", {"start", "limit", "delta"});
    expect_refused(m, "range", "Range", {"input 'delta' must be a constant"});
  }
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

TEST(OnnxValidation, ModAndTrilu) {
  {
    Model m;
    m.input("a", {2, 3});
    m.input("b", {3});
    m.op("Mod", "mod", {"a", "b"});
    expect_refused(m, "mod", "Mod",
                   {"attribute 'fmod' is 0, but input 0 (A 'a') is tensor(float); "
                    "floating-point Mod needs fmod=1"});
  }
  {
    Model m(14);
    m.input("x", {4});
    m.op("Trilu", "tri", {"x"});
    expect_refused(m, "tri", "Trilu", {"input 0 (input 'x') of shape [4] has rank 1"});
  }
  {
    Model m(14);
    m.input("x", {3, 3});
    m.init_int64("k", {1, 2});
    m.op("Trilu", "tri", {"x", "k"});
    expect_refused(m, "tri", "Trilu", {"input 1 (k 'k') of shape [2] must be a scalar"});
  }
}

TEST(OnnxValidation, GatherElementsAndCumSum) {
  {  // indices larger than the data off the axis would read past it
    Model m;
    m.input("x", {3, 2});
    m.input("i", {4, 3}, TensorProto::INT64);  // 4 along the axis is allowed, 3 > 2 is not
    m.op("GatherElements", "ge", {"x", "i"});
    expect_refused(m, "ge", "GatherElements",
                   {"input 1 (indices 'i') of shape [4,3] is larger than input 0 (data 'x') of "
                    "shape [3,2] in dimension 1 (3 > 2)"});
  }
  {
    Model m;
    m.input("x", {4});
    m.init_int64("i", {1, 4});
    m.op("GatherElements", "ge", {"x", "i"});
    expect_refused(m, "ge", "GatherElements",
                   {"input 1 (indices 'i') holds index 4, out of range [-4, 3] for dimension 0 "
                    "of input 0 (data 'x') of shape [4]"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    m.input("i", {3}, TensorProto::INT64);
    m.op("GatherElements", "ge", {"x", "i"});
    expect_refused(m, "ge", "GatherElements", {"has rank 1", "has rank 2; they must agree"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    m.init_int64("axis", {2}, true);
    m.op("CumSum", "cs", {"x", "axis"});
    expect_refused(m, "cs", "CumSum",
                   {"input 1 (axis 'axis') is 2, out of range [-2, 1] for input 0 (x 'x') of "
                    "rank 2"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    m.input("axis", {}, TensorProto::INT64);
    m.op("CumSum", "cs", {"x", "axis"});
    expect_refused(m, "cs", "CumSum", {"input 'axis' must be a constant"});
  }
}

TEST(OnnxValidation, GatherNDAndScatters) {
  {  // the index tuples are longer than data's rank less batch_dims
    Model m;
    m.input("x", {2, 3});
    m.input("i", {2, 2}, TensorProto::INT64);
    Model::attr(m.op("GatherND", "g", {"x", "i"}), "batch_dims", int64_t{1});
    expect_refused(m, "g", "GatherND",
                   {"the last dimension of input 1 (indices 'i') of shape [2,2] is 2; it must be "
                    "in [1, 1] (the rank of input 0 (data 'x') less batch_dims 1)"});
  }
  {
    Model m;
    m.input("x", {2, 3});
    m.input("i", {3, 1}, TensorProto::INT64);
    Model::attr(m.op("GatherND", "g", {"x", "i"}), "batch_dims", int64_t{1});
    expect_refused(m, "g", "GatherND", {"differ in batch dimension 0 (3 vs 2)"});
  }
  {
    Model m;
    m.input("x", {4, 3});
    m.init_int64_shaped("i", {1, 2}, {0, 3});
    m.op("GatherND", "g", {"x", "i"});
    expect_refused(m, "g", "GatherND",
                   {"input 1 (indices 'i') holds index 3, out of range [-3, 2] for dimension 1 "
                    "of input 0 (data 'x') of shape [4,3]"});
  }
  {  // updates must have the indices' shape
    Model m(13);
    m.input("x", {4, 3});
    m.input("i", {2, 3}, TensorProto::INT64);
    m.input("u", {2, 2});
    m.op("ScatterElements", "s", {"x", "i", "u"});
    expect_refused(m, "s", "ScatterElements",
                   {"input 2 (updates 'u') of shape [2,2] must have the shape of input 1 "
                    "(indices 'i') of shape [2,3]"});
  }
  {  // max arrives at opset 18
    Model m(16);
    m.input("x", {4, 3});
    m.input("i", {2, 3}, TensorProto::INT64);
    m.input("u", {2, 3});
    Model::attr(m.op("ScatterElements", "s", {"x", "i", "u"}), "reduction", std::string("max"));
    expect_refused(m, "s", "ScatterElements",
                   {"attribute 'reduction' is 'max'; ScatterElements at opset 16 takes none, add "
                    "or mul (max and min from opset 18)"});
  }
  {
    Model m(13);
    m.input("x", {4, 3});
    m.init_int64_shaped("i", {1, 1}, {-5});
    m.input("u", {1, 1});
    m.op("ScatterElements", "s", {"x", "i", "u"});
    expect_refused(m, "s", "ScatterElements", {"holds index -5, out of range [-4, 3]"});
  }
  {  // updates of ScatterND: indices.shape[:-1] + data.shape[k:]
    Model m(13);
    m.input("x", {4, 5, 6});
    m.input("i", {2, 1}, TensorProto::INT64);
    m.input("u", {2, 5, 5});
    m.op("ScatterND", "s", {"x", "i", "u"});
    expect_refused(m, "s", "ScatterND",
                   {"input 2 (updates 'u') of shape [2,5,5] must have shape [2,5,6] (input 1 "
                    "(indices 'i')'s shape without its last dimension, then input 0 (data 'x')'s "
                    "from dimension 1)"});
  }
  {
    Model m(13);
    m.input("x", {4});
    m.input("i", {1, 2}, TensorProto::INT64);
    m.input("u", {1});
    m.op("ScatterND", "s", {"x", "i", "u"});
    expect_refused(m, "s", "ScatterND",
                   {"the last dimension of input 1 (indices 'i') of shape [1,2] is 2; it must be "
                    "in [1, 1]"});
  }
}

TEST(OnnxValidation, Resize) {
  {  // an unknown mode: refused, naming the modes
    Model m(13);
    m.input("x", {1, 1, 4, 4});
    m.init_values("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
    Model::attr(m.op("Resize", "up", {"x", "", "scales"}), "mode", std::string("bicubic"));
    expect_refused(m, "up", "Resize",
                   {"attribute 'mode' is 'bicubic'; it must be nearest, linear or cubic"});
  }
  {  // antialias: refused
    Model m(18);
    m.input("x", {1, 1, 4, 4});
    m.init_values("scales", {4}, {1.0f, 1.0f, 0.5f, 0.5f});
    auto* r = m.op("Resize", "down", {"x", "", "scales"});
    Model::attr(r, "mode", std::string("cubic"));
    Model::attr(r, "antialias", int64_t{1});
    expect_refused(m, "down", "Resize",
                   {"attribute 'antialias' is 1, which Kiln does not support"});
  }
  {  // tf_crop_and_resize: refused
    Model m(13);
    m.input("x", {1, 1, 4, 4});
    m.init_values("scales", {4}, {1.0f, 1.0f, 2.0f, 2.0f});
    Model::attr(m.op("Resize", "crop", {"x", "", "scales"}), "coordinate_transformation_mode",
                std::string("tf_crop_and_resize"));
    expect_refused(m, "crop", "Resize",
                   {"attribute 'coordinate_transformation_mode' is 'tf_crop_and_resize', which "
                    "Kiln does not support"});
  }
  {  // scales computed at run time
    Model m(13);
    m.input("x", {1, 1, 4, 4});
    m.input("s", {4});
    m.op("Resize", "dyn", {"x", "", "s"});
    expect_refused(m, "dyn", "Resize",
                   {"input 2 (scales 's') is not a constant, which Kiln does not support"});
  }
  {  // one scale per axis
    Model m(13);
    m.input("x", {1, 1, 4, 4});
    m.init_values("scales", {2}, {2.0f, 2.0f});
    m.op("Resize", "few", {"x", "", "scales"});
    expect_refused(m, "few", "Resize",
                   {"input 2 (scales 'scales') of shape [2] must hold one value per resized axis "
                    "(4) of input 0 (X 'x') of shape [1,1,4,4]"});
  }
  {  // opset 18: antialias refused; keep_aspect_ratio_policy checked
    Model m(18);
    m.input("x", {1, 1, 4, 4});
    m.init_values("scales", {2}, {0.5f, 0.5f});
    auto* n = m.op("Resize", "aa", {"x", "", "scales"});
    Model::attr(n, "axes", Ints{2, 3});
    Model::attr(n, "antialias", int64_t{1});
    expect_refused(m, "aa", "Resize",
                   {"attribute 'antialias' is 1, which Kiln does not support (only 0)"});
  }
  {
    Model m(18);
    m.input("x", {1, 1, 4, 4});
    m.init_int64("sizes", {2, 2});
    auto* n = m.op("Resize", "keep", {"x", "", "", "sizes"});
    Model::attr(n, "axes", Ints{2, 3});
    Model::attr(n, "keep_aspect_ratio_policy", std::string("fit"));
    expect_refused(m, "keep", "Resize",
                   {"attribute 'keep_aspect_ratio_policy' is 'fit'; it must be stretch, "
                    "not_larger or not_smaller"});
  }
  {  // neither scales nor sizes
    Model m(13);
    m.input("x", {1, 1, 4, 4});
    m.op("Resize", "none", {"x"});
    expect_refused(m, "none", "Resize", {"gives neither input 2 (scales) nor input 3 (sizes)"});
  }
}

TEST(OnnxValidation, ValidEdgeCasesImport) {
  auto imports = [](const Model& m) { EXPECT_NO_THROW(import_onnx_bytes(m.bytes(), "<valid>")); };
  {  // grouped convolution, bias, explicit kernel_shape equal to the weight's
    Model m = conv_model({1, 4, 8, 8}, {6, 2, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "group", int64_t{2});
    Model::attr(conv, "kernel_shape", Ints{3, 3});
    imports(m);
  }
  {  // auto_pad with the pads it implies spelled out too
    Model m = conv_model({1, 3, 8, 8}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "auto_pad", std::string("SAME_UPPER"));
    Model::attr(conv, "pads", Ints{1, 1, 1, 1});
    imports(m);
  }
  {  // a kernel exactly as large as the padded input
    Model m = conv_model({1, 3, 1, 1}, {4, 3, 3, 3});
    auto* conv = last(m);
    Model::attr(conv, "pads", Ints{1, 1, 1, 1});
    imports(m);
  }
  {  // ceil_mode: a last window that starts inside the input
    Model m;
    m.input("x", {1, 1, 5, 5});
    auto* p = m.op("MaxPool", "pool", {"x"});
    Model::attr(p, "kernel_shape", Ints{2, 2});
    Model::attr(p, "strides", Ints{2, 2});
    Model::attr(p, "ceil_mode", int64_t{1});
    imports(m);
  }
  {  // broadcasting with 1s and missing leading dimensions, MatMul of a vector
    Model m;
    m.input("a", {2, 1, 3});
    m.input("b", {4, 1});
    m.node("Add", "add", {"a", "b"}, {"s"});
    m.input("v", {3});
    m.node("MatMul", "mm", {"s", "v"}, {"y"});
    m.output("y");
    imports(m);
  }
  {  // Reshape with 0 (copy) and -1, Concat with a negative axis
    Model m;
    m.input("x", {2, 3, 4});
    m.init_int64("shape", {0, -1});
    m.node("Reshape", "reshape", {"x", "shape"}, {"r"});
    m.input("z", {2, 5});
    Model::attr(m.node("Concat", "cat", {"r", "z"}, {"y"}), "axis", int64_t{-1});
    m.output("y");
    imports(m);
  }
  {  // Gemm with a bias of one row, Clip with one bound, Flatten at the last axis
    Model m;
    m.input("a", {2, 4});
    m.weight("b", {5, 4});
    m.weight("c", {5});
    Model::attr(m.node("Gemm", "fc", {"a", "b", "c"}, {"g"}), "transB", int64_t{1});
    m.init_scalar("hi", 1.0f);
    m.node("Clip", "clip", {"g", "", "hi"}, {"c1"});
    Model::attr(m.node("Flatten", "flat", {"c1"}, {"y"}), "axis", int64_t{2});
    m.output("y");
    imports(m);
  }
  {  // reductions with negative axes and noop_with_empty_axes at opset 18, Split by
     // num_outputs with a shorter last part, Expand that adds dimensions, Tile by 0
    Model m(18);
    m.input("x", {2, 3, 4});
    m.init_int64("axes", {-1, 0});
    m.node("ReduceMean", "mean", {"x", "axes"}, {"r"});
    Model::attr(m.node("ReduceMax", "noop", {"x"}, {"n"}), "noop_with_empty_axes", int64_t{1});
    m.output("r");
    m.output("n");
    m.input("v", {7});
    Model::attr(m.node("Split", "split", {"v"}, {"s0", "s1", "s2"}), "num_outputs", int64_t{3});
    m.output("s2");
    m.input("e", {3, 1});
    m.init_int64("shape", {2, 1, 4});
    m.node("Expand", "expand", {"e", "shape"}, {"ex"});
    m.output("ex");
    m.init_int64("reps", {0, 2});
    m.node("Tile", "tile", {"e", "reps"}, {"t"});
    m.output("t");
    imports(m);
  }
  {  // Pad removing what is there, negative Gather indices
    Model m;
    m.input("x", {4, 5});
    m.init_int64("pads", {0, -2, 0, -2});
    m.node("Pad", "pad", {"x", "pads"}, {"p"});
    m.init_int64("idx", {-1, 0});
    m.node("Gather", "gather", {"p", "idx"}, {"y"});
    m.output("y");
    imports(m);
  }
}

/// An integer initializer of ONNX element type `elem` (INT8, UINT8, INT32) holding `values`.
void init_ints(Model& m, const std::string& name, const Ints& shape, int elem, const Ints& values) {
  auto* t = m.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : shape) t->add_dims(d);
  for (int64_t v : values) t->add_int32_data(static_cast<int32_t>(v));
}

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

}  // namespace
}  // namespace kiln::graph
