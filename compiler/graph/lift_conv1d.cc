// lift_conv1d: 1-D Conv nodes with constant weights as 2-D ones of height 1 between reshapes.
#include "compiler/graph/lift_conv1d.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/op_pattern.h"

namespace kiln::graph {
namespace {

/// [N, C, T] -> [N, C, 1, T] (a shape or a constant's data).
std::vector<int64_t> with_unit_height(const std::vector<int64_t>& s) {
  return {s[0], s[1], 1, s[2]};
}

/// [N, C, 1, T] -> [N, C, T].
std::vector<int64_t> without_height(const std::vector<int64_t>& s) { return {s[0], s[1], s[3]}; }

/// A Reshape of `x` to `shape` written to `out`, as the importer makes one (the shape an
/// attribute).
Node reshape_node(const std::string& name, ValueId x, const std::vector<int64_t>& shape,
                  ValueId out) {
  return Node{"Reshape", name, {x}, {out}, {{"shape", shape}}};
}

/// Whether `n` drops a unit height: Reshape [N, C, 1, T] -> [N, C, T].
bool drops_height(const Graph& g, const Node& n) {
  if (n.op != "Reshape" || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  const std::vector<int64_t>& in = g.value(n.inputs[0]).shape;
  return in.size() == 4 && in[2] == 1 && g.value(n.outputs[0]).shape == without_height(in);
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

/// Moves the height-dropping Reshapes after the lifted convolutions down through the elementwise
/// operators and 1-D poolings that read them (every other operand a single element), and drops a
/// Reshape that gives a height-dropped value its height back: a chain Conv -> Relu -> MaxPool ->
/// Conv of 1-D layers stays 4-D, and alter_layout keeps it blocked throughout.
void sink_reshapes(Graph& g) {
  std::map<ValueId, ValueId> dropped;  ///< a height-dropped value -> its 4-D source
  bool changed = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    if (n.op == "Reshape" && n.inputs.size() == 1 && n.outputs.size() == 1) {
      auto it = dropped.find(n.inputs[0]);
      if (it != dropped.end() && g.value(it->second).shape == g.value(n.outputs[0]).shape &&
          !g.is_output(n.outputs[0])) {
        g.replace_all_uses(n.outputs[0], it->second);  // the node is dead now
        changed = true;
      } else if (drops_height(g, n)) {
        dropped[n.outputs[0]] = n.inputs[0];
      }
      continue;
    }
    if (n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
    const OpPattern pattern = op_pattern(n);
    const bool pool = is_pool_1d(g, n);
    if (!pool && pattern != OpPattern::kElemWise && pattern != OpPattern::kBroadcast) continue;
    const Value y = g.value(n.outputs[0]);
    if (y.shape.size() != 3) continue;
    bool any = false, ok = true;
    for (size_t k = 0; k < n.inputs.size() && ok; ++k) {
      const ValueId v = n.inputs[k];
      if (v == kNoValue) continue;
      auto it = dropped.find(v);
      if (it != dropped.end() && (pool || g.value(v).shape == y.shape)) {
        any = true;
      } else {
        ok = !(pool && k == 0) && g.value(v).num_elements() == 1;
      }
    }
    if (!ok || !any) continue;
    for (ValueId& v : n.inputs) {
      auto it = v == kNoValue ? dropped.end() : dropped.find(v);
      if (it != dropped.end()) v = it->second;
    }
    if (pool && n.has_attr("kernel_shape")) lift_window_attrs(n);
    const ValueId y4 = g.add_value(y.name + ".2d", y.dtype, with_unit_height(y.shape));
    const ValueId y1 = n.outputs[0];
    n.outputs[0] = y4;
    Node back = reshape_node(n.name + ".to_1d", y4, y.shape, y1);
    g.nodes().insert(g.nodes().begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(back));
    changed = true;  // the Reshape it read may be dead now
  }
  if (changed) g.remove_dead_nodes();
}

}  // namespace

size_t lift_conv1d(Graph& g) {
  size_t lifted = 0;
  std::vector<Node> out;
  out.reserve(g.nodes().size());
  for (Node& n : g.nodes()) {
    const bool lift = [&] {
      if (n.op != "Conv" || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
      const Value& x = g.value(n.inputs[0]);
      const Value& w = g.value(n.inputs[1]);
      return x.typed && x.shape.size() == 3 && w.is_constant() && w.shape.size() == 3 &&
             runtime::dtype_equal(w.dtype, runtime::kFloat32) && g.value(n.outputs[0]).typed;
    }();
    if (!lift) {
      out.push_back(std::move(n));
      continue;
    }
    // Copies: adding values below moves the arena.
    const Value x = g.value(n.inputs[0]), w = g.value(n.inputs[1]);
    const ValueId y = n.outputs[0];
    const Value yv = g.value(y);
    runtime::NDArray w2 = runtime::NDArray::empty(with_unit_height(w.shape), runtime::kFloat32);
    std::copy_n(w.data->data<float>(), w.num_elements(), w2.data<float>());
    const ValueId w2d = g.add_constant(w.name + ".2d", std::move(w2));
    const ValueId x2d = g.add_value(x.name + ".2d", x.dtype, with_unit_height(x.shape));
    const ValueId y2d = g.add_value(yv.name + ".2d", yv.dtype, with_unit_height(yv.shape));
    out.push_back(reshape_node(n.name + ".to_2d", n.inputs[0], with_unit_height(x.shape), x2d));
    Node conv = n;
    conv.inputs[0] = x2d;
    conv.inputs[1] = w2d;
    conv.outputs = {y2d};
    const auto& p = n.ints("pads");
    conv.attrs["kernel_shape"] = std::vector<int64_t>{1, n.ints("kernel_shape").at(0)};
    conv.attrs["strides"] = std::vector<int64_t>{1, n.ints("strides").at(0)};
    conv.attrs["dilations"] = std::vector<int64_t>{1, n.ints("dilations").at(0)};
    conv.attrs["pads"] = std::vector<int64_t>{0, p.at(0), 0, p.at(1)};
    out.push_back(std::move(conv));
    out.push_back(reshape_node(n.name + ".to_1d", y2d, yv.shape, y));
    ++lifted;
  }
  g.nodes() = std::move(out);
  if (lifted > 0) sink_reshapes(g);
  return lifted;
}

}  // namespace kiln::graph
