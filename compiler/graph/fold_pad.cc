#include "compiler/graph/fold_pad.h"

#include <vector>

namespace kiln::graph {
namespace {

/// Whether `n` pads with zeros along dimensions 2 and up only, by non-negative amounts.
bool zero_spatial_pad(const Node& n) {
  if (n.op != "Pad" || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  if (n.s("mode") != "constant" || n.f("value", 0.0f) != 0.0f) return false;
  const std::vector<int64_t>& p = n.ints("pads");
  const size_t rank = p.size() / 2;
  if (rank < 3) return false;
  for (size_t d = 0; d < rank; ++d) {
    const bool batch_or_channel = d < 2;
    if (p[d] < 0 || p[d + rank] < 0) return false;
    if (batch_or_channel && (p[d] != 0 || p[d + rank] != 0)) return false;
  }
  return true;
}

/// Whether reader `r` can take the Pad of `v` (of `rank` dimensions) as its own padding.
bool can_take(const Node& r, ValueId v, size_t rank) {
  if (r.inputs.empty() || r.inputs[0] != v) return false;
  for (size_t i = 1; i < r.inputs.size(); ++i) {
    if (r.inputs[i] == v) return false;  // also a weight or bias
  }
  if (!r.has_attr("pads") || r.ints("pads").size() != 2 * (rank - 2)) return false;
  if (r.op == "Conv") return true;
  if (r.op != "AveragePool" || r.i("ceil_mode", 0) != 0) return false;
  if (r.i("count_include_pad", 0) != 0) return true;
  for (int64_t q : r.ints("pads")) {
    if (q != 0) return false;  // its own padding uncounted, the Pad's counted: not one attribute
  }
  return true;
}

}  // namespace

size_t fold_pad(Graph& graph) {
  size_t folded = 0;
  std::vector<Node>& nodes = graph.nodes();
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!zero_spatial_pad(nodes[k])) continue;
    const ValueId out = nodes[k].outputs[0], in = nodes[k].inputs[0];
    if (graph.is_output(out)) continue;
    const std::vector<int64_t> pad = nodes[k].ints("pads");
    const size_t rank = pad.size() / 2, spatial = rank - 2;
    const std::vector<size_t> readers = graph.consumers(out);
    bool all = !readers.empty();
    for (size_t r : readers) all = all && can_take(nodes[r], out, rank);
    if (!all) continue;
    for (size_t r : readers) {
      Node& n = nodes[r];
      std::vector<int64_t> p = n.ints("pads");
      for (size_t d = 0; d < spatial; ++d) {
        p[d] += pad[d + 2];
        p[d + spatial] += pad[d + 2 + rank];
      }
      n.attrs["pads"] = p;
      if (n.op == "AveragePool") n.attrs["count_include_pad"] = int64_t{1};
      n.inputs[0] = in;
    }
    ++folded;
  }
  return folded;
}

}  // namespace kiln::graph
