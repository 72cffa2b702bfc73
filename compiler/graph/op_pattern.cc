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
      // Broadcasting binary ops; inference batch norm is a per-channel scale and shift.
      {"Add", P::kBroadcast}, {"Sub", P::kBroadcast}, {"Mul", P::kBroadcast},
      {"Div", P::kBroadcast}, {"Pow", P::kBroadcast}, {"Max", P::kBroadcast},
      {"Min", P::kBroadcast}, {"BatchNormalization", P::kBroadcast},
      // Injective: data movement, each output element a function of one input element.
      {"Concat", P::kInjective}, {"Flatten", P::kInjective}, {"Gather", P::kInjective},
      {"Pad", P::kInjective}, {"Reshape", P::kInjective}, {"Slice", P::kInjective},
      {"Squeeze", P::kInjective}, {"Transpose", P::kInjective}, {"Unsqueeze", P::kInjective},
      {"LayoutTransform", P::kInjective},  // inserted by alter_layout
      // Reductions.
      {"AveragePool", P::kCommReduce}, {"GlobalAveragePool", P::kCommReduce},
      {"GlobalMaxPool", P::kCommReduce}, {"MaxPool", P::kCommReduce},
      // Complex ops with an elementwise-fusable output.
      {"Conv", P::kOutEWiseFusable}, {"ConvTranspose", P::kOutEWiseFusable},
      {"Gemm", P::kOutEWiseFusable}, {"MatMul", P::kOutEWiseFusable},
      // Opaque (see the header for softmax). Constant and Shape never reach the graph.
      {"LSTM", P::kOpaque}, {"LogSoftmax", P::kOpaque}, {"Softmax", P::kOpaque},
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
