// Constant folding: a node whose inputs are all constants is computed once, at build time, by
// compiling it with Kiln itself (its lowering, JIT-compiled for the host) and running it on the
// constants; its outputs become constants and the node disappears. This covers what exporters
// leave behind around weights (Transpose or Reshape of a weight, a scale multiplied into a bias,
// a Cast of a constant) without a second implementation of any operator.
//
//   size_t folded = fold_constants(g);   // then g.remove_dead_nodes()
#pragma once

#include <cstddef>
#include <cstdint>

#include "compiler/graph/graph.h"

namespace kiln::graph {

/// The largest output fold_constants computes, in elements.
inline constexpr int64_t kFoldMaxElements = int64_t{1} << 26;

/// Folds, in topological order (so chains of constant nodes fold entirely), every node with at
/// least one input, all inputs constant, a lowering, and outputs of at most `max_elements`
/// elements each that are not graph outputs. Returns how many nodes it folded; they are removed
/// from the graph. `keep_dequantize` leaves DequantizeLinear nodes of constants (a quantized weight
/// or bias) for realize_qconv and realize_qlinear to read; the build folds those it leaves in a
/// second call.
size_t fold_constants(Graph& g, int64_t max_elements = kFoldMaxElements,
                      bool keep_dequantize = false);

}  // namespace kiln::graph
