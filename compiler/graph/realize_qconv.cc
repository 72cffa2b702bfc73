// realize_qconv: each QuantizeLinear is matched backwards (Relu, Conv, the Conv's three
// DequantizeLinear inputs); the first condition that fails is the reason the convolution stays
// float.
#include "compiler/graph/realize_qconv.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>

#include "compiler/graph/quant_pattern.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph {
namespace {

using runtime::dtype_equal;

/// Why a pattern does not qualify.
struct Reject {
  std::string why;
};

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// log2(s) when s is a positive power of two.
std::optional<int> exact_log2(double s) {
  if (!(s > 0.0) || !std::isfinite(s)) return std::nullopt;
  int e = 0;
  if (std::frexp(s, &e) != 0.5) return std::nullopt;
  return e - 1;
}

/// The scale input of a (de)quantization: float32 constant values, each a power of two (their
/// log2s); `what` names it in the reason.
std::vector<int> pow2_scales(const Graph& g, const Node& q, const std::string& what) {
  const Value& s = g.value(q.inputs.at(1));
  if (!s.is_constant() || !dtype_equal(s.dtype, runtime::kFloat32)) {
    throw Reject{what + " scale '" + s.name + "' is not a float32 constant"};
  }
  std::vector<int> out;
  for (float v : s.data->to_vector<float>()) {
    const auto l = exact_log2(v);
    if (!l) throw Reject{what + " scale " + fmt(v) + " is not a power of two"};
    out.push_back(*l);
  }
  return out;
}

/// The zero point (input 2) is absent or a constant of zeros.
void require_zero_point(const Graph& g, const Node& q, const std::string& what) {
  if (q.inputs.size() < 3 || q.inputs[2] == kNoValue) return;
  const Value& z = g.value(q.inputs[2]);
  bool zero = z.is_constant();
  if (zero) {
    const runtime::NDArray& a = *z.data;
    const auto* bytes = static_cast<const unsigned char*>(a.data());
    for (int64_t i = 0; i < a.nbytes(); ++i) zero = zero && bytes[i] == 0;
  }
  if (!zero) throw Reject{what + " zero point '" + z.name + "' is not a constant 0"};
}

/// The DequantizeLinear producing input `i` of `conv`, of a `dtype` tensor.
const Node& dequantized(const Graph& g, const Node& conv, size_t i, KilnDType dtype,
                        const std::string& what) {
  const Node* dq = g.producer_node(conv.inputs.at(i));
  if (dq == nullptr || dq->op != "DequantizeLinear") {
    throw Reject{what + " is not the output of a DequantizeLinear"};
  }
  const Value& x = g.value(dq->inputs.at(0));
  if (!dtype_equal(x.dtype, dtype)) {
    throw Reject{what + " is dequantized from " + runtime::dtype_to_string(x.dtype) + ", not " +
                 runtime::dtype_to_string(dtype)};
  }
  require_zero_point(g, *dq, what);
  return *dq;
}

/// The QConv node replacing a pattern (its bias and shift inputs still to be made) and their data.
struct Realized {
  Node node;
  std::vector<int32_t> bias, shift;
};

/// The QConv replacing the pattern ending in QuantizeLinear `q` at convolution `conv`.
Realized realize(const Graph& g, const Node& conv, bool relu, const Node& q) {
  if (q.inputs.size() < 3 || q.inputs[2] == kNoValue ||
      !dtype_equal(g.value(q.outputs[0]).dtype, runtime::kInt8)) {
    throw Reject{"its QuantizeLinear '" + q.name + "' does not quantize to int8"};
  }
  require_zero_point(g, q, "the output's");
  const std::vector<int> ly = pow2_scales(g, q, "the output's");
  if (ly.size() != 1) throw Reject{"the output's scale is not per tensor"};
  if (conv.ints("kernel_shape").size() != 2) throw Reject{"it is not a 2-D convolution"};

  const Node& dx = dequantized(g, conv, 0, runtime::kInt8, "input X");
  const std::vector<int> lx = pow2_scales(g, dx, "the input's");
  if (lx.size() != 1) throw Reject{"the input's scale is not per tensor"};

  const Node& dw = dequantized(g, conv, 1, runtime::kInt8, "input W");
  const Value& w = g.value(dw.inputs[0]);
  if (!w.is_constant()) throw Reject{"the int8 weight '" + w.name + "' is not a constant"};
  const int64_t oc = w.shape.at(0);
  std::vector<int> lw = pow2_scales(g, dw, "the weight's");
  if (lw.size() == 1) {
    lw.assign(static_cast<size_t>(oc), lw[0]);
  } else if (dw.i("axis") != 0) {
    throw Reject{"the weight's scales are per axis " + std::to_string(dw.i("axis")) +
                 ", not per output channel (axis 0)"};
  }

  std::vector<int64_t> bias(static_cast<size_t>(oc), 0);
  if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue) {
    const Node& db = dequantized(g, conv, 2, runtime::kInt32, "input B");
    const Value& b = g.value(db.inputs[0]);
    if (!b.is_constant()) throw Reject{"the int32 bias '" + b.name + "' is not a constant"};
    std::vector<int> lb = pow2_scales(g, db, "the bias's");
    if (lb.size() == 1) lb.assign(static_cast<size_t>(oc), lb[0]);
    const std::vector<int32_t> bq = b.data->to_vector<int32_t>();
    for (size_t o = 0; o < bias.size(); ++o) {
      if (lb.at(o) != lx[0] + lw[o]) {
        throw Reject{"the bias's scale 2^" + std::to_string(lb[o]) + " of channel " +
                     std::to_string(o) + " is not the input's times the weight's, 2^" +
                     std::to_string(lx[0] + lw[o])};
      }
      bias[o] = bq.at(o);
    }
  }

  std::vector<int32_t> shift(static_cast<size_t>(oc)), realized_bias(static_cast<size_t>(oc));
  for (size_t o = 0; o < shift.size(); ++o) {
    const int s = ly[0] - lx[0] - lw[o];
    if (s < 0 || s > 31) {
      throw Reject{"the shift of channel " + std::to_string(o) + " is " + std::to_string(s) +
                   ", outside [0, 31] (output scale 2^" + std::to_string(ly[0]) + ", input 2^" +
                   std::to_string(lx[0]) + ", weight 2^" + std::to_string(lw[o]) + ")"};
    }
    const int64_t rb = bias[o] + (s > 0 ? int64_t{1} << (s - 1) : 0);
    if (rb > INT32_MAX) {
      throw Reject{"the rounded bias of channel " + std::to_string(o) + " overflows int32"};
    }
    shift[o] = s;
    realized_bias[o] = static_cast<int32_t>(rb);
  }

  Node n;
  n.op = "QConv";
  n.name = conv.name;
  n.inputs = {dx.inputs[0], dw.inputs[0], kNoValue, kNoValue};
  n.outputs = {q.outputs[0]};
  for (const char* a : {"strides", "pads", "dilations"}) n.attrs[a] = conv.ints(a);
  n.attrs["group"] = conv.i("group");
  n.attrs["relu"] = int64_t{relu ? 1 : 0};
  return {std::move(n), std::move(realized_bias), std::move(shift)};
}

}  // namespace

RealizeQConvReport realize_qconv(Graph& g) {
  RealizeQConvReport report;
  std::set<std::string> seen;  // convolutions realized or reported
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node q = g.nodes()[i];
    if (q.op != "QuantizeLinear") continue;
    const auto [p, relu] = quantized_producer(g, q);
    if (p == nullptr || p->op != "Conv") continue;
    const Node conv = *p;
    if (!seen.insert(conv.name).second) continue;
    try {
      if (!g.single_reader(conv.outputs[0])) {
        throw Reject{"its output has readers besides the " +
                     std::string(relu ? "Relu" : "QuantizeLinear")};
      }
      Realized r = realize(g, conv, relu != nullptr, q);
      const auto to_const = [&](const std::vector<int32_t>& v, const char* suffix) {
        return g.add_constant(conv.name + suffix,
                              runtime::NDArray::from_vector(v, {static_cast<int64_t>(v.size())}));
      };
      r.node.inputs[2] = to_const(r.bias, ".qbias");
      r.node.inputs[3] = to_const(r.shift, ".qshift");
      g.nodes()[i] = std::move(r.node);
      ++report.realized;
    } catch (const Reject& r) {
      report.kept_float.push_back("node '" + conv.name + "' (Conv): stays float: " + r.why);
    }
  }
  // Quantized convolutions whose output is not quantized.
  for (const Node& n : g.nodes()) {
    if (n.op != "Conv" || seen.count(n.name)) continue;
    const Node* dq = g.producer_node(n.inputs[0]);
    if (dq != nullptr && dq->op == "DequantizeLinear") {
      report.kept_float.push_back("node '" + n.name +
                                  "' (Conv): stays float: its output is not quantized (no "
                                  "QuantizeLinear after it, or after its Relu)");
    }
  }
  return report;
}

}  // namespace kiln::graph
