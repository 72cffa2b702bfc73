// A check the reshape-sinking tests (sink_reshapes, lift_conv1d) share.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compiler/graph/graph.h"

namespace kiln::testing {

/// The graph's operators in order; every one but a Reshape is expected to write 4-D values.
inline std::vector<std::string> four_d_ops(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const graph::Node& n : g.nodes()) {
    ops.push_back(n.op);
    if (n.op == "Reshape") continue;
    for (graph::ValueId v : n.outputs) EXPECT_EQ(g.value(v).shape.size(), 4u) << n.name;
  }
  return ops;
}

}  // namespace kiln::testing
