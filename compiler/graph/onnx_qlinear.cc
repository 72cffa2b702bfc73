// ONNX's operator-form quantized ops read as the QDQ form Kiln compiles (onnx_detail.h):
//   QLinearConv(x, xs, xz, w, ws, wz, ys, yz[, B]) ->
//     QuantizeLinear(Conv(DequantizeLinear(x, xs, xz), DequantizeLinear(w, ws, wz, axis 0)
//                         [, DequantizeLinear(B, xs * ws)]), ys, yz)
//   QLinearMatMul(a, as, az, b, bs, bz, ys, yz) ->
//     QuantizeLinear(MatMul(DequantizeLinear(a, ...), DequantizeLinear(b, ..., axis -1)), ys, yz)
// which is what the operators compute, up to rounding: an integer implementation requantizes the
// int32 sum once, the QDQ form rounds the float product (a tie can land one step apart).
// realize_qlinear makes them integer again, ConvInteger / MatMulInteger with ORT's
// requantization; on target vdla, with power-of-two scales and zero points 0, realize_qconv
// makes the convolution a QConv first (and offload_vdla can put it on the VDLA). B's scale, xs *
// ws, is computed here: both scales must be initializers.
#include <map>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"

namespace kiln::graph::onnx_detail {

namespace {

using onnx::NodeProto;
using onnx::TensorProto;

NodeProto make(const std::string& op, const std::string& name, std::vector<std::string> inputs,
               std::vector<std::string> outputs) {
  NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (auto& i : inputs) n.add_input(i);
  for (auto& o : outputs) n.add_output(o);
  return n;
}

void set_axis(NodeProto& n, int64_t axis) {
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
}

}  // namespace

void expand_qlinear(onnx::ModelProto& model, const std::string& origin) {
  onnx::GraphProto* g = model.mutable_graph();
  std::map<std::string, const TensorProto*> inits;
  for (const TensorProto& t : g->initializer()) inits[t.name()] = &t;
  std::vector<NodeProto> nodes;
  std::vector<TensorProto> added;
  for (const NodeProto& n : g->node()) {
    const std::string& op = n.op_type();
    if (op != "QLinearConv" && op != "QLinearMatMul") {
      nodes.push_back(n);
      continue;
    }
    const bool conv = op == "QLinearConv";
    const std::string where = "'" + origin + "': node '" + n.name() + "' (" + op + ")";
    const int count = n.input_size();
    KILN_USER_CHECK(conv ? count == 8 || count == 9 : count == 8)
        << where << " has " << count << " inputs; it takes " << (conv ? "8 or 9" : "8");
    KILN_USER_CHECK(n.output_size() == 1)
        << where << " has " << n.output_size() << " outputs; it has 1";
    for (int i = 0; i < 8; ++i) {
      KILN_USER_CHECK(!n.input(i).empty() || i == 2 || i == 5 || i == 7)
          << where << ": input " << i << " is missing";
    }
    const std::string p = (n.name().empty() ? n.output(0) : n.name()) + "/kiln_qdq_";
    const std::string a = p + "a", b = p + "b", y = p + "y";
    // A one-element scale or zero point of shape [1] (which these operators allow) as a scalar,
    // the per-tensor form of Quantize/DequantizeLinear at every opset.
    auto per_tensor = [&](int i) -> std::string {
      auto it = inits.find(n.input(i));
      if (it == inits.end() || it->second->dims_size() != 1 || it->second->dims(0) != 1)
        return n.input(i);
      TensorProto t = *it->second;
      t.clear_dims();
      t.set_name(p + "scalar_" + std::to_string(i));
      added.push_back(t);
      return t.name();
    };
    std::vector<std::string> in_a = {n.input(0), per_tensor(1)}, in_b = {n.input(3), per_tensor(4)};
    if (!n.input(2).empty()) in_a.push_back(per_tensor(2));
    if (!n.input(5).empty()) in_b.push_back(per_tensor(5));
    nodes.push_back(make("DequantizeLinear", p + "dequantize_0", in_a, {a}));
    NodeProto db = make("DequantizeLinear", p + "dequantize_1", in_b, {b});
    // Per output channel: the weight's first axis for a conv, the last for a matmul.
    auto scale_of = [&](int i) -> const TensorProto& {
      auto it = inits.find(n.input(i));
      KILN_USER_CHECK(it != inits.end()) << where << ": input " << i << " ('" << n.input(i)
                                         << "', a scale) must be an initializer";
      return *it->second;
    };
    const runtime::NDArray ws = tensor_to_ndarray(scale_of(4), where + " input 4");
    if (ws.num_elements() > 1) set_axis(db, conv ? 0 : -1);
    nodes.push_back(db);
    std::vector<std::string> main_in = {a, b};
    if (conv && count == 9 && !n.input(8).empty()) {
      // B (int32) in units of xs * ws.
      const runtime::NDArray xs = tensor_to_ndarray(scale_of(1), where + " input 1");
      KILN_USER_CHECK(xs.num_elements() == 1) << where << ": x_scale must be a scalar";
      std::vector<float> prod(static_cast<size_t>(ws.num_elements()));
      for (size_t k = 0; k < prod.size(); ++k) {
        prod[k] = static_cast<float>(element_as_double(xs, 0) *
                                     element_as_double(ws, static_cast<int64_t>(k)));
      }
      const runtime::NDArray bs = ws.num_elements() > 1
                                      ? runtime::NDArray::from_vector(prod, {ws.num_elements()})
                                      : runtime::NDArray::from_vector(prod, {});
      added.push_back(to_tensor_proto(p + "bias_scale", bs));
      NodeProto dbias = make("DequantizeLinear", p + "dequantize_bias",
                             {n.input(8), p + "bias_scale"}, {p + "bias"});
      if (ws.num_elements() > 1) set_axis(dbias, 0);
      nodes.push_back(dbias);
      main_in.push_back(p + "bias");
    }
    NodeProto m =
        make(conv ? "Conv" : "MatMul", n.name().empty() ? p + "op" : n.name(), main_in, {y});
    if (conv) {
      for (const auto& attr : n.attribute()) *m.add_attribute() = attr;
    }
    nodes.push_back(m);
    std::vector<std::string> in_q = {y, per_tensor(6)};
    if (!n.input(7).empty()) in_q.push_back(per_tensor(7));
    nodes.push_back(make("QuantizeLinear", p + "quantize", in_q, {n.output(0)}));
  }
  g->clear_node();
  for (auto& n : nodes) *g->add_node() = std::move(n);
  for (auto& t : added) *g->add_initializer() = std::move(t);
}

}  // namespace kiln::graph::onnx_detail
