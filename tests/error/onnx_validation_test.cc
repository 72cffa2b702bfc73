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
#include "tests/error/onnx_validation_util.h"

namespace kiln::graph {
namespace {

using namespace validation_test;

// ---- the model
// ---------------------------------------------------------------------------

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

// ---- what the schema says
// ------------------------------------------------------------------------

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

// ---- valid models near the rules' edges import
// ---------------------------------------------------

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

}  // namespace
}  // namespace kiln::graph
