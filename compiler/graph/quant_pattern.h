// What realize_qconv and realize_qlinear both match: the node a QuantizeLinear quantizes, seen
// through a Relu that only it reads (the activation both passes fold into the requantization).
#pragma once

#include "compiler/graph/graph.h"

namespace kiln::graph {

struct QuantizedProducer {
  const Node* node =
      nullptr;  ///< what `q` quantizes (through the Relu); null: an input or constant
  const Node* relu = nullptr;  ///< the Relu between them, if any
};

inline QuantizedProducer quantized_producer(const Graph& g, const Node& q) {
  QuantizedProducer r{g.producer_node(q.inputs[0]), nullptr};
  if (r.node != nullptr && r.node->op == "Relu" && g.single_reader(r.node->outputs[0])) {
    r.relu = r.node;
    r.node = g.producer_node(r.node->inputs[0]);
  }
  return r;
}

}  // namespace kiln::graph
