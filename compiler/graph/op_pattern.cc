// The pattern of every operator the ONNX front end accepts (supported_onnx_ops()).
#include "compiler/graph/op_pattern.h"

#include <map>

namespace kiln::graph {

OpPattern op_pattern(const Node& node) {
  using P = OpPattern;
  // clang-format off
  static const std::map<std::string, OpPattern> kPatterns = {
      // Elementwise: one input element to one output element, same shape.
      {"Abs", P::kElemWise}, {"Cast", P::kElemWise}, {"Clip", P::kElemWise},
      {"Dropout", P::kElemWise}, {"Exp", P::kElemWise}, {"Identity", P::kElemWise},
      {"LeakyRelu", P::kElemWise}, {"Log", P::kElemWise}, {"Neg", P::kElemWise},
      {"Relu", P::kElemWise}, {"Sigmoid", P::kElemWise}, {"Sqrt", P::kElemWise},
      {"Tanh", P::kElemWise},
      {"Ceil", P::kElemWise}, {"Elu", P::kElemWise}, {"Erf", P::kElemWise},
      {"Floor", P::kElemWise}, {"HardSigmoid", P::kElemWise}, {"HardSwish", P::kElemWise},
      {"Not", P::kElemWise}, {"Reciprocal", P::kElemWise}, {"Round", P::kElemWise},
      {"Selu", P::kElemWise}, {"Sign", P::kElemWise}, {"Softplus", P::kElemWise},
      {"Softsign", P::kElemWise}, {"Celu", P::kElemWise},
      {"Shrink", P::kElemWise}, {"ThresholdedRelu", P::kElemWise},
      {"Sin", P::kElemWise}, {"Cos", P::kElemWise}, {"Tan", P::kElemWise},
      {"Asin", P::kElemWise}, {"Acos", P::kElemWise}, {"Atan", P::kElemWise},
      {"Sinh", P::kElemWise}, {"Cosh", P::kElemWise}, {"Asinh", P::kElemWise},
      {"Acosh", P::kElemWise}, {"Atanh", P::kElemWise},
      // Broadcasting binary ops; inference batch norm is a per-channel scale and shift.
      {"Add", P::kBroadcast}, {"Sub", P::kBroadcast}, {"Mul", P::kBroadcast},
      {"Div", P::kBroadcast}, {"Pow", P::kBroadcast}, {"Max", P::kBroadcast},
      {"Min", P::kBroadcast}, {"BatchNormalization", P::kBroadcast},
      {"And", P::kBroadcast}, {"Equal", P::kBroadcast}, {"Greater", P::kBroadcast},
      {"GreaterOrEqual", P::kBroadcast}, {"Less", P::kBroadcast},
      {"LessOrEqual", P::kBroadcast}, {"Mean", P::kBroadcast}, {"Or", P::kBroadcast},
      {"PRelu", P::kBroadcast}, {"Sum", P::kBroadcast}, {"Where", P::kBroadcast},
      {"Xor", P::kBroadcast}, {"Expand", P::kBroadcast}, {"Mod", P::kBroadcast},
      // (De)quantization: elementwise with a per-tensor or per-axis scale.
      {"QuantizeLinear", P::kBroadcast}, {"DequantizeLinear", P::kBroadcast},
      // Injective: data movement, each output element a function of one input element.
      {"Concat", P::kInjective}, {"Flatten", P::kInjective}, {"Gather", P::kInjective},
      {"Pad", P::kInjective}, {"Reshape", P::kInjective}, {"Slice", P::kInjective},
      {"Squeeze", P::kInjective}, {"Transpose", P::kInjective}, {"Unsqueeze", P::kInjective},
      {"LayoutTransform", P::kInjective},  // inserted by alter_layout
      {"Tile", P::kInjective}, {"Resize", P::kInjective}, {"Trilu", P::kInjective}, {"GatherElements", P::kInjective},
      // Reductions.
      {"AveragePool", P::kCommReduce}, {"GlobalAveragePool", P::kCommReduce},
      {"GlobalMaxPool", P::kCommReduce}, {"MaxPool", P::kCommReduce},
      {"ReduceSum", P::kCommReduce}, {"ReduceMean", P::kCommReduce},
      {"ReduceMax", P::kCommReduce}, {"ReduceMin", P::kCommReduce},
      {"ReduceProd", P::kCommReduce}, {"ReduceL1", P::kCommReduce},
      {"ReduceL2", P::kCommReduce}, {"ReduceLogSum", P::kCommReduce},
      {"ReduceLogSumExp", P::kCommReduce}, {"ReduceSumSquare", P::kCommReduce},
      {"ArgMax", P::kCommReduce}, {"ArgMin", P::kCommReduce},
      // Complex ops with an elementwise-fusable output.
      {"Conv", P::kOutEWiseFusable}, {"ConvTranspose", P::kOutEWiseFusable},
      {"Gemm", P::kOutEWiseFusable}, {"MatMul", P::kOutEWiseFusable},
      {"QConv", P::kOutEWiseFusable},  // made by realize_qconv
      {"VdlaQConv", P::kOpaque},  // made by offload_vdla: a VDLA program, fused with nothing
      // Opaque (see the header for softmax; Split has several outputs). Constant, Shape, Size,
      // ConstantOfShape and Range never reach the graph; CastLike becomes Cast.
      {"LSTM", P::kOpaque}, {"Split", P::kOpaque}, {"LayerNormalization", P::kOpaque},
      {"InstanceNormalization", P::kOpaque}, {"CumSum", P::kOpaque}, {"Hardmax", P::kOpaque},
      {"LogSoftmax", P::kOpaque}, {"Softmax", P::kOpaque},
      {"Constant", P::kOpaque}, {"Shape", P::kOpaque},
  };
  // clang-format on
  auto it = kPatterns.find(node.op);
  return it == kPatterns.end() ? P::kOpaque : it->second;
}

const char* op_pattern_name(OpPattern pattern) {
  switch (pattern) {
    case OpPattern::kElemWise:
      return "elemwise";
    case OpPattern::kBroadcast:
      return "broadcast";
    case OpPattern::kInjective:
      return "injective";
    case OpPattern::kCommReduce:
      return "comm_reduce";
    case OpPattern::kOutEWiseFusable:
      return "out_ewise_fusable";
    case OpPattern::kOpaque:
      return "opaque";
  }
  return "?";
}

}  // namespace kiln::graph
