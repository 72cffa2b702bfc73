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
    std::vector<int64_t> axes, steps(shape.size(), 1);
    for (size_t d = 0; d < shape.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    int64_t offset = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const int64_t start = offset;
      offset += sizes[k];
      if (n.outputs[k] == kNoValue) continue;
      // The Slice front end's normalized form: bounds on every axis, steps of 1.
      std::vector<int64_t> starts(shape.size(), 0), ends = shape;
      starts[axis] = start;
      ends[axis] = start + sizes[k];
      out.push_back(Node{"Slice",
                         n.name + "_" + std::to_string(k),
                         {n.inputs[0]},
                         {n.outputs[k]},
                         {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}}});
    }
    ++rewritten;
  }
  graph.nodes() = std::move(out);
  return rewritten;
}

}  // namespace kiln::graph
