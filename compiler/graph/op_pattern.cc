// The pattern of an operator, from its entry in the operator registry (ops/registry.h).
#include "compiler/graph/op_pattern.h"

#include "compiler/graph/ops/registry.h"

namespace kiln::graph {

OpPattern op_pattern(const Node& node) {
  const ops::OpDef* def = ops::find_op(node.op);
  return def != nullptr && def->pattern ? *def->pattern : OpPattern::kOpaque;
}

int64_t input_reads(const Graph& g, const Node& node) {
  const ops::OpDef* def = ops::find_op(node.op);
  return def != nullptr && def->input_reads ? def->input_reads(g, node) : 1;
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
