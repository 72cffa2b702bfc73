// The importer's validation of the tensor and math operators (the registry's math/, tensor/, reduce
// and image families: matrix products, broadcasting, shapes, axes, indexing, reductions, Resize):
// each bad model breaks one rule and is refused naming the node, the operator and both values that
// disagree.
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

// ---- matrix products
// -----------------------------------------------------------------------------

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

// ---- shapes, axes and parameters
// -----------------------------------------------------------------

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

// ---- reductions and broadcasting operators
// -------------------------------------------------------

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

// ---- generators, indexing and scatters
// -----------------------------------------------------------

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

// ---- resize
// --------------------------------------------------------------------------------------

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

}  // namespace
}  // namespace kiln::graph
