// sink_reshapes: view Reshapes of 4-D values moved down past the operators that read them.
#include "compiler/graph/sink_reshapes.h"

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/op_pattern.h"
#include "compiler/graph/split_to_slices.h"

namespace kiln::graph {
namespace {

/// Whether `view` is one of the views of the 4-D shape `in` that this pass moves:
/// [N, C, 1, T] as [N, C, T], or [N, C, D, H*W] as [N, C, D, H, W].
bool is_view(const std::vector<int64_t>& in, const std::vector<int64_t>& view) {
  if (in.size() != 4 || view.size() < 3 || view[0] != in[0] || view[1] != in[1]) return false;
  if (view.size() == 3) return in[2] == 1 && view[2] == in[3];
  return view.size() == 5 && view[2] == in[2] && view[3] * view[4] == in[3];
}

/// The 1-D poolings (windowed ones' attributes lift as a Conv's do).
bool is_pool_1d(const Graph& g, const Node& n) {
  return (n.op == "MaxPool" || n.op == "AveragePool" || n.op == "GlobalAveragePool" ||
          n.op == "GlobalMaxPool") &&
         n.outputs.size() == 1 && g.value(n.inputs[0]).shape.size() == 3;
}

/// A node's spatial attributes for height 1: [k] -> [1, k], pads [b, e] -> [0, b, 0, e].
void lift_window_attrs(Node& n) {
  for (const char* key : {"kernel_shape", "strides", "dilations"}) {
    if (n.has_attr(key)) n.attrs[key] = std::vector<int64_t>{1, n.ints(key).at(0)};
  }
  const auto p = n.ints("pads");
  n.attrs["pads"] = std::vector<int64_t>{0, p.at(0), 0, p.at(1)};
}

Node reshape_node(const std::string& name, ValueId x, const std::vector<int64_t>& shape,
                  ValueId out) {
  return Node{"Reshape", name, {x}, {out}, {{"shape", shape}}};
}

}  // namespace

size_t sink_reshapes(Graph& g) {
  std::map<ValueId, ValueId> viewed;  ///< a view -> its 4-D source
  size_t moved = 0;
  bool changed = false;
  auto source = [&](ValueId v) {
    auto it = v == kNoValue ? viewed.end() : viewed.find(v);
    return it == viewed.end() ? kNoValue : it->second;
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    if (n.op == "Reshape" && n.inputs.size() == 1 && n.outputs.size() == 1) {
      const ValueId src = source(n.inputs[0]);
      if (src != kNoValue && g.value(src).shape == g.value(n.outputs[0]).shape &&
          !g.is_output(n.outputs[0])) {
        g.replace_all_uses(n.outputs[0], src);  // the node is dead now
        changed = true;
      } else if (is_view(g.value(n.inputs[0]).shape, g.value(n.outputs[0]).shape)) {
        viewed[n.outputs[0]] = n.inputs[0];
      }
      continue;
    }
    if (n.outputs.size() != 1 || n.outputs[0] == kNoValue || n.inputs.empty()) continue;
    const Value y = g.value(n.outputs[0]);
    const OpPattern pattern = op_pattern(n);
    const bool pool = is_pool_1d(g, n);
    const bool elementwise = pattern == OpPattern::kElemWise || pattern == OpPattern::kBroadcast;
    const bool concat =
        n.op == "Concat" && (n.i("axis") == 1 || n.i("axis") == 1 - int64_t(y.shape.size()));
    const bool slice = is_channel_slice(g, n);
    if (!pool && !elementwise && !concat && !slice) continue;
    // The 4-D shape of the first view among the operands: the others' (but a concatenation's
    // channels) must match it.
    std::vector<int64_t> shape4;
    for (ValueId v : n.inputs) {
      if (source(v) != kNoValue) {
        shape4 = g.value(source(v)).shape;
        break;
      }
    }
    if (shape4.empty()) continue;
    bool ok = true;
    std::vector<size_t> to_reshape;  ///< operands of the output's shape that are no views
    int64_t channels = 0;
    for (size_t k = 0; k < n.inputs.size() && ok; ++k) {
      const ValueId v = n.inputs[k];
      if (v == kNoValue) continue;
      const ValueId src = source(v);
      if (concat) {
        std::vector<int64_t> s = src == kNoValue ? std::vector<int64_t>() : g.value(src).shape;
        ok = s.size() == 4 && s[0] == shape4[0] && s[2] == shape4[2] && s[3] == shape4[3] &&
             g.value(v).shape.size() == y.shape.size();
        if (ok) channels += s[1];
      } else if (pool || slice) {
        ok = k != 0 || src != kNoValue;
      } else if (src != kNoValue && g.value(v).shape == y.shape) {
        ok = g.value(src).shape == shape4;
      } else if (g.value(v).shape == y.shape) {
        to_reshape.push_back(k);
      } else {
        ok = g.value(v).num_elements() == 1;
      }
    }
    if (!ok) continue;
    std::vector<int64_t> out4 = shape4;
    if (concat) {
      out4[1] = channels;
      n.attrs["axis"] = int64_t{1};
    } else if (pool) {
      out4 = {y.shape[0], y.shape[1], 1, y.shape[2]};
    } else if (slice) {
      out4[1] = y.shape[1];
    }
    // Copies: adding values below moves the arena.
    const std::string name = n.name;
    std::vector<ValueId> inputs = n.inputs;
    std::vector<Node> before;
    for (size_t k : to_reshape) {
      const Value& v = g.value(inputs[k]);
      const ValueId v4 = g.add_value(v.name + ".4d", v.dtype, shape4);
      before.push_back(
          reshape_node(name + ".in" + std::to_string(k) + "_4d", inputs[k], shape4, v4));
      inputs[k] = v4;
    }
    for (ValueId& v : inputs) {
      if (source(v) != kNoValue) v = source(v);
    }
    const ValueId y4 = g.add_value(y.name + ".4d", y.dtype, out4);
    Node& m = g.nodes()[i];
    m.inputs = std::move(inputs);
    if (pool && m.has_attr("kernel_shape")) lift_window_attrs(m);
    if (slice) m.attrs = slice_along(shape4, 1, m.ints("starts")[1], y.shape[1]);
    const ValueId y0 = m.outputs[0];
    m.outputs[0] = y4;
    g.nodes().insert(g.nodes().begin() + static_cast<std::ptrdiff_t>(i) + 1,
                     reshape_node(name + ".view", y4, y.shape, y0));
    g.nodes().insert(g.nodes().begin() + static_cast<std::ptrdiff_t>(i), before.begin(),
                     before.end());
    i += before.size();
    ++moved;
    changed = true;  // the Reshape it read may be dead now
  }
  if (changed) g.remove_dead_nodes();
  return moved;
}

}  // namespace kiln::graph
