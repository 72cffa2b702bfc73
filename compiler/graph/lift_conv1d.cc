// lift_conv1d: 1-D Conv nodes with constant weights as 2-D ones of height 1 between reshapes.
#include "compiler/graph/lift_conv1d.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace kiln::graph {
namespace {

/// [N, C, T] -> [N, C, 1, T] (a shape or a constant's data).
std::vector<int64_t> with_unit_height(const std::vector<int64_t>& s) {
  return {s[0], s[1], 1, s[2]};
}

/// A Reshape of `x` to `shape` written to `out`, as the importer makes one (the shape an
/// attribute).
Node reshape_node(const std::string& name, ValueId x, const std::vector<int64_t>& shape,
                  ValueId out) {
  return Node{"Reshape", name, {x}, {out}, {{"shape", shape}}};
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
  return lifted;
}

}  // namespace kiln::graph
