// split_to_slices: each Split node replaced, where it stands, by one Slice per output.
#include "compiler/graph/split_to_slices.h"

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace kiln::graph {

size_t split_to_slices(Graph& graph) {
  std::vector<Node> out;
  out.reserve(graph.nodes().size());
  size_t rewritten = 0;
  for (Node& n : graph.nodes()) {
    if (n.op != "Split") {
      out.push_back(std::move(n));
      continue;
    }
    const std::vector<int64_t>& shape = graph.value(n.inputs.at(0)).shape;
    const size_t axis = static_cast<size_t>(n.i("axis"));
    const std::vector<int64_t>& sizes = n.ints("split");
    KILN_ICHECK(axis < shape.size() && sizes.size() == n.outputs.size())
        << "split_to_slices: Split '" << n.name << "' has " << sizes.size() << " sizes for "
        << n.outputs.size() << " outputs along axis " << axis << " of rank " << shape.size();
    int64_t offset = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t start = offset;
      offset += sizes[k];
      if (n.outputs[k] == kNoValue) continue;
      out.push_back(Node{"Slice",
                         n.name + "_" + std::to_string(k),
                         {n.inputs[0]},
                         {n.outputs[k]},
                         slice_along(shape, axis, start, sizes[k])});
    }
    ++rewritten;
  }
  graph.nodes() = std::move(out);
  return rewritten;
}

Attrs slice_along(const std::vector<int64_t>& in, size_t axis, int64_t start, int64_t count) {
  std::vector<int64_t> starts(in.size(), 0), ends = in, axes;
  for (size_t d = 0; d < in.size(); ++d) axes.push_back(static_cast<int64_t>(d));
  starts.at(axis) = start;
  ends[axis] = start + count;
  return {{"starts", starts},
          {"ends", ends},
          {"axes", axes},
          {"steps", std::vector<int64_t>(in.size(), 1)}};
}

bool is_channel_slice(const Graph& g, const Node& n) {
  if (n.op != "Slice" || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  const std::vector<int64_t>& in = g.value(n.inputs[0]).shape;
  const std::vector<int64_t>& out = g.value(n.outputs[0]).shape;
  const std::vector<int64_t>&starts = n.ints("starts"), &steps = n.ints("steps");
  if (in.size() < 2 || starts.size() != in.size() || steps.size() != in.size() ||
      out.size() != in.size()) {
    return false;
  }
  for (size_t d = 0; d < in.size(); ++d) {
    if (steps[d] != 1 || (d != 1 && (starts[d] != 0 || out[d] != in[d]))) return false;
  }
  return true;
}

}  // namespace kiln::graph
