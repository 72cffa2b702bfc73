// realize_qlinear: int8 activations made unsigned first; then each QuantizeLinear is matched
// backwards (Relu, Conv / Gemm / MatMul, their DequantizeLinear inputs) and the first condition
// that fails is the reason the product stays float.
#include "compiler/graph/realize_qlinear.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <sstream>

#include "base/error.h"
#include "compiler/graph/quant_pattern.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph {
namespace {

using runtime::dtype_equal;
using runtime::NDArray;

/// Why a pattern does not qualify.
struct Reject {
  std::string why;
};

bool has_input(const Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != kNoValue; }

std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string node_label(const Node& n) { return "node '" + n.name + "' (" + n.op + ")"; }

/// The elements of an integer constant (int8, uint8 or int32) as int64.
std::vector<int64_t> int_values(const NDArray& a) {
  std::vector<int64_t> out;
  const KilnDType t = a.dtype();
  if (dtype_equal(t, runtime::kInt8)) {
    for (int8_t v : a.to_vector<int8_t>()) out.push_back(v);
  } else if (dtype_equal(t, runtime::kUInt8)) {
    for (uint8_t v : a.to_vector<uint8_t>()) out.push_back(v);
  } else if (dtype_equal(t, runtime::kInt32)) {
    for (int32_t v : a.to_vector<int32_t>()) out.push_back(v);
  } else {
    throw Reject{"a zero point or quantized constant of type " + runtime::dtype_to_string(t)};
  }
  return out;
}

/// The scales of a (de)quantization node: a float32 constant. A zero, negative or non-finite
/// scale is the model's error, not a reason to stay float: it names the node and the value.
std::vector<float> scales(const Graph& g, const Node& q, const std::string& what) {
  const Value& s = g.value(q.inputs.at(1));
  if (!s.is_constant() || !dtype_equal(s.dtype, runtime::kFloat32)) {
    throw Reject{what + " scale '" + s.name + "' is not a float32 constant"};
  }
  std::vector<float> out = s.data->to_vector<float>();
  for (size_t i = 0; i < out.size(); ++i) {
    KILN_USER_CHECK(out[i] > 0.0f && std::isfinite(out[i]))
        << "realize_qlinear: " << node_label(q) << ": scale '" << s.name << "' holds "
        << fmt(out[i]) << " at index " << i << "; scales must be positive and finite";
  }
  return out;
}

/// The zero points of a (de)quantization node, `n` of them (0s when the input is absent).
std::vector<int64_t> zero_points(const Graph& g, const Node& q, size_t n, const std::string& what) {
  if (!has_input(q, 2)) return std::vector<int64_t>(n, 0);
  const Value& z = g.value(q.inputs[2]);
  if (!z.is_constant()) throw Reject{what + " zero point '" + z.name + "' is not a constant"};
  std::vector<int64_t> v = int_values(*z.data);
  if (v.size() == 1) v.assign(n, v[0]);
  if (v.size() != n) {
    throw Reject{what + " zero point '" + z.name + "' has " + std::to_string(v.size()) +
                 " values, its scale " + std::to_string(n)};
  }
  return v;
}

/// Per-channel weight scales (or zero points, `input` 1 or 2 of the DequantizeLinear `dq`) of
/// `channels` entries along `axis`: one value is spread, any other count than `channels` is an
/// error naming both.
template <typename T>
std::vector<T> per_channel(const Graph& g, const Node& dq, size_t input, std::vector<T> v,
                           int64_t channels, int64_t axis) {
  if (v.size() == 1) return std::vector<T>(static_cast<size_t>(channels), v[0]);
  KILN_USER_CHECK(static_cast<int64_t>(v.size()) == channels)
      << "realize_qlinear: " << node_label(dq) << ": the weight's "
      << (input == 1 ? "scale" : "zero point") << " '" << g.value(dq.inputs.at(input)).name
      << "' has " << v.size() << " values, but the weight '" << g.value(dq.inputs[0]).name
      << "' has " << channels << " output channels (axis " << axis << ")";
  if (dq.i("axis") != axis) {
    throw Reject{"the weight's scales are per axis " + std::to_string(dq.i("axis")) +
                 ", not per output channel (axis " + std::to_string(axis) + ")"};
  }
  return v;
}

/// The DequantizeLinear producing input `i` of `node`.
const Node& dequantized(const Graph& g, const Node& node, size_t i, const std::string& what) {
  const Node* dq = g.producer_node(node.inputs.at(i));
  if (dq == nullptr || dq->op != "DequantizeLinear") {
    throw Reject{what + " is not the output of a DequantizeLinear"};
  }
  return *dq;
}

/// The quantized activation read by an integer product: uint8 with its zero point.
struct Activation {
  ValueId x = kNoValue;  ///< uint8
  int64_t zero = 0;      ///< in [0, 255]
  float scale = 0;
};

/// The activation dequantized by `dq`: one scale and zero point, int8 or uint8 (an int8 one is
/// made unsigned by Rewriter::make_unsigned once every check has passed).
Activation activation(const Graph& g, const Node& dq, const std::string& what) {
  const Value& x = g.value(dq.inputs[0]);
  if (!dtype_equal(x.dtype, runtime::kUInt8) && !dtype_equal(x.dtype, runtime::kInt8)) {
    throw Reject{what + " is dequantized from " + runtime::dtype_to_string(x.dtype) +
                 ", not int8 or uint8"};
  }
  const std::vector<float> s = scales(g, dq, "the input's");
  if (s.size() != 1) throw Reject{"the input's scale is not per tensor"};
  return {dq.inputs[0], zero_points(g, dq, 1, "the input's")[0], s[0]};
}

/// The weight of an integer product with its per-output-channel scales and zero points.
struct Weight {
  ValueId w = kNoValue;
  std::vector<float> scale;
  std::vector<int64_t> zero;
};

/// Builds the rewritten nodes of one pattern; they go into the graph only once all are made.
class Rewriter {
 public:
  Rewriter(Graph& g, std::string base) : g_(g), base_(std::move(base)) {}

  /// Makes `a` unsigned: an int8 activation becomes x + 128 (through int32), its zero point
  /// + 128, the same real values.
  void make_unsigned(Activation& a) {
    const Value& x = g_.value(a.x);
    if (dtype_equal(x.dtype, runtime::kUInt8)) return;
    const std::vector<int64_t> shape = x.shape;
    const ValueId wide =
        op("Cast", "/to_int32", {a.x}, {{"to", std::string("int32")}}, runtime::kInt32, shape);
    const ValueId shifted =
        op("Add", "/plus_128", {wide, constant("/128", std::vector<int32_t>{128}, {})}, {},
           runtime::kInt32, shape);
    a.x =
        op("Cast", "/to_uint8", {shifted}, {{"to", std::string("uint8")}}, runtime::kUInt8, shape);
    a.zero += 128;
  }

  template <typename T>
  ValueId constant(const std::string& suffix, const std::vector<T>& v, std::vector<int64_t> shape) {
    return g_.add_constant(base_ + suffix, NDArray::from_vector(v, std::move(shape)));
  }

  /// A node of the rewrite (not yet in the graph); its output is a fresh value.
  ValueId op(const std::string& op, const std::string& suffix, std::vector<ValueId> inputs,
             Attrs attrs, KilnDType dtype, std::vector<int64_t> shape) {
    Node n;
    n.op = op;
    n.name = base_ + suffix;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    n.outputs = {g_.add_value(base_ + suffix, dtype, std::move(shape))};
    nodes_.push_back(std::move(n));
    return nodes_.back().outputs[0];
  }

  /// The requantization after the int32 product `acc` of shape `shape`: + bias, to float, times
  /// the per-channel multiplier, [Relu], QuantizeLinear(1, z_y) into `q`'s output, which replaces
  /// node `q_index`; per-channel constants are shaped `channel_shape`.
  void requantize(ValueId acc, const std::vector<int64_t>& shape, const std::vector<int32_t>* bias,
                  const std::vector<float>& multiplier, const std::vector<int64_t>& channel_shape,
                  bool relu, const Node& q, int64_t zero_y, size_t q_index) {
    ValueId v = acc;
    if (bias != nullptr) {
      v = op("Add", "/bias", {v, constant("/qbias", *bias, channel_shape)}, {}, runtime::kInt32,
             shape);
    }
    v = op("Cast", "/to_float", {v}, {{"to", std::string("float32")}}, runtime::kFloat32, shape);
    v = op("Mul", "/multiplier", {v, constant("/qmultiplier", multiplier, channel_shape)}, {},
           runtime::kFloat32, shape);
    if (relu) v = op("Relu", "/relu", {v}, {}, runtime::kFloat32, shape);
    const KilnDType ty = g_.value(q.outputs[0]).dtype;
    const ValueId zy =
        dtype_equal(ty, runtime::kUInt8)
            ? constant("/qzero_y", std::vector<uint8_t>{static_cast<uint8_t>(zero_y)}, {})
            : constant("/qzero_y", std::vector<int8_t>{static_cast<int8_t>(zero_y)}, {});
    Node out;
    out.op = "QuantizeLinear";
    out.name = q.name;
    out.inputs = {v, constant("/qunit_scale", std::vector<float>{1.0f}, {}), zy};
    out.attrs["axis"] = int64_t{0};
    out.outputs = {q.outputs[0]};
    // The pattern's QuantizeLinear becomes the chain's last node in place; the rest are appended
    // and the graph sorted once at the end.
    g_.nodes()[q_index] = std::move(out);
    for (Node& n : nodes_) g_.add_node(std::move(n));
    nodes_.clear();
  }

 private:
  Graph& g_;
  std::string base_;
  std::vector<Node> nodes_;
};

/// The output's QuantizeLinear: one scale and zero point, int8 or uint8.
std::pair<float, int64_t> output_quantization(const Graph& g, const Node& q) {
  const KilnDType ty = g.value(q.outputs[0]).dtype;
  if (!dtype_equal(ty, runtime::kUInt8) && !dtype_equal(ty, runtime::kInt8)) {
    throw Reject{"its QuantizeLinear '" + q.name + "' quantizes to " +
                 runtime::dtype_to_string(ty) + ", not int8 or uint8"};
  }
  const std::vector<float> s = scales(g, q, "the output's");
  if (s.size() != 1) throw Reject{"the output's scale is not per tensor"};
  return {s[0], zero_points(g, q, 1, "the output's")[0]};
}

/// The int32 bias of the DequantizeLinear at input `i` of `node` (`channels` values), whose
/// scales must be s_x * s_w (ORT adds b_q to the product and ignores them).
std::vector<int32_t> quantized_bias(const Graph& g, const Node& node, size_t i, const Activation& x,
                                    const Weight& w) {
  const Node& db = dequantized(g, node, i, "the bias");
  const Value& b = g.value(db.inputs[0]);
  if (!b.is_constant() || !dtype_equal(b.dtype, runtime::kInt32)) {
    throw Reject{"the bias '" + b.name + "' is not an int32 constant"};
  }
  std::vector<int32_t> bq = b.data->to_vector<int32_t>();
  if (bq.size() != w.scale.size()) {
    throw Reject{"the bias '" + b.name + "' has " + std::to_string(bq.size()) + " values for " +
                 std::to_string(w.scale.size()) + " output channels"};
  }
  std::vector<float> sb = scales(g, db, "the bias's");
  if (sb.size() == 1) sb.assign(bq.size(), sb[0]);
  for (int64_t z : zero_points(g, db, sb.size(), "the bias's")) {
    if (z != 0) throw Reject{"the bias's zero point is not 0"};
  }
  for (size_t c = 0; c < bq.size(); ++c) {
    const float want = x.scale * w.scale[c];
    if (std::fabs(sb.at(c) - want) > 1e-4f * want) {
      throw Reject{"the bias's scale " + fmt(sb[c]) + " of channel " + std::to_string(c) +
                   " is not the input's times the weight's, " + fmt(want)};
    }
  }
  return bq;
}

/// s_x * s_w[c] / s_y in float32, as ORT's QLinearConv computes its output scales.
std::vector<float> multipliers(const Activation& x, const Weight& w, float sy) {
  std::vector<float> m;
  for (float sw : w.scale) {
    const float product = x.scale * sw;
    m.push_back(product / sy);
  }
  return m;
}

/// The constant quantized weight of the DequantizeLinear at input 1 of `node`, its scales and
/// zero points per output channel along `axis` of `channels`.
Weight weight(const Graph& g, const Node& node, int64_t axis, int64_t channels) {
  const Node& dw = dequantized(g, node, 1, "input W");
  const Value& w = g.value(dw.inputs[0]);
  if (!w.is_constant()) throw Reject{"the quantized weight '" + w.name + "' is not a constant"};
  if (!dtype_equal(w.dtype, runtime::kInt8) && !dtype_equal(w.dtype, runtime::kUInt8)) {
    throw Reject{"the weight is quantized to " + runtime::dtype_to_string(w.dtype) +
                 ", not int8 or uint8"};
  }
  Weight out;
  out.w = dw.inputs[0];
  const std::vector<float> s = scales(g, dw, "the weight's");
  out.scale = per_channel(g, dw, 1, s, channels, axis);
  out.zero = per_channel(g, dw, 2, zero_points(g, dw, s.size(), "the weight's"), channels, axis);
  return out;
}

/// The weight zero point input of an integer product: none when all are 0, else one value or
/// one per output channel, of the weight's type.
ValueId weight_zero_point(Graph& g, const std::string& base, KilnDType w_dtype,
                          const std::vector<int64_t>& zero) {
  bool all_zero = true, uniform = true;
  for (int64_t z : zero) {
    all_zero = all_zero && z == 0;
    uniform = uniform && z == zero[0];
  }
  if (all_zero) return kNoValue;
  const size_t n = uniform ? 1 : zero.size();
  const std::vector<int64_t> shape =
      uniform ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(n)};
  if (dtype_equal(w_dtype, runtime::kUInt8)) {
    return g.add_constant(
        base + "/qzero_w",
        NDArray::from_vector(std::vector<uint8_t>(zero.begin(), zero.begin() + n), shape));
  }
  return g.add_constant(
      base + "/qzero_w",
      NDArray::from_vector(std::vector<int8_t>(zero.begin(), zero.begin() + n), shape));
}

/// The integer product's inputs: x, w, x's zero point and, when not all 0, w's.
std::vector<ValueId> product_inputs(Graph& g, const std::string& base, const Activation& x,
                                    ValueId w, const Weight& wq) {
  std::vector<ValueId> in{
      x.x, w,
      g.add_constant(base + "/qzero_x",
                     NDArray::from_vector(std::vector<uint8_t>{static_cast<uint8_t>(x.zero)}, {}))};
  const ValueId zw = weight_zero_point(g, base, g.value(wq.w).dtype, wq.zero);
  if (zw != kNoValue) in.push_back(zw);
  return in;
}

/// Conv -> ConvInteger and its requantization.
void realize_conv(Graph& g, const Node& conv, bool relu, const Node& q, size_t q_index) {
  const auto [sy, zy] = output_quantization(g, q);
  if (conv.ints("kernel_shape").size() != 2) throw Reject{"it is not a 2-D convolution"};
  const std::vector<int64_t> out_shape = g.value(conv.outputs[0]).shape;
  const int64_t channels = g.value(conv.inputs.at(1)).shape.at(0);
  Activation x = activation(g, dequantized(g, conv, 0, "input X"), "input X");
  const Weight w = weight(g, conv, 0, channels);
  std::vector<int32_t> bias;
  if (has_input(conv, 2)) bias = quantized_bias(g, conv, 2, x, w);
  // Every check passed: from here on the graph changes.
  Rewriter rw(g, conv.name);
  rw.make_unsigned(x);
  std::vector<ValueId> in = product_inputs(g, conv.name, x, w.w, w);
  const ValueId acc =
      rw.op("ConvInteger", "", std::move(in), conv.attrs, runtime::kInt32, out_shape);
  rw.requantize(acc, out_shape, bias.empty() ? nullptr : &bias, multipliers(x, w, sy),
                {1, channels, 1, 1}, relu, q, zy, q_index);
}

/// Gemm (transA 0, alpha and beta 1) or MatMul with a constant quantized B -> MatMulInteger
/// over B as [K, N], and its requantization per column.
void realize_product(Graph& g, const Node& node, bool relu, const Node& q, size_t q_index) {
  const auto [sy, zy] = output_quantization(g, q);
  const bool gemm = node.op == "Gemm";
  if (gemm &&
      (node.i("transA", 0) != 0 || node.f("alpha", 1.0f) != 1.0f || node.f("beta", 1.0f) != 1.0f)) {
    throw Reject{"its transA, alpha or beta is not the default"};
  }
  const bool trans_b = gemm && node.i("transB", 0) != 0;
  const Value& b = g.value(node.inputs.at(1));
  if (b.shape.size() != 2) throw Reject{"its B is not 2-D"};
  const int64_t n = b.shape[trans_b ? 0 : 1], k = b.shape[trans_b ? 1 : 0];
  const std::vector<int64_t> out_shape = g.value(node.outputs[0]).shape;
  Activation a = activation(g, dequantized(g, node, 0, "input A"), "input A");
  const Weight w = weight(g, node, trans_b ? 0 : 1, n);
  std::vector<int32_t> bias;
  if (gemm && has_input(node, 2)) {
    if (g.value(node.inputs[2]).num_elements() != n) throw Reject{"its C is not one per column"};
    bias = quantized_bias(g, node, 2, a, w);
  }
  // Every check passed: from here on the graph changes.
  Rewriter rw(g, node.name);
  rw.make_unsigned(a);
  // B as [K, N], transposed at build time when the Gemm reads it transposed.
  ValueId wk = w.w;
  if (trans_b) {
    const NDArray& src = *g.value(w.w).data;
    const auto* s = static_cast<const uint8_t*>(src.data());
    NDArray t = NDArray::empty({k, n}, src.dtype());
    auto* d = static_cast<uint8_t*>(t.data());
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) d[c * n + r] = s[r * k + c];
    wk = g.add_constant(node.name + "/qweight_kn", std::move(t));
  }
  std::vector<ValueId> in = product_inputs(g, node.name, a, wk, w);
  const ValueId acc = rw.op("MatMulInteger", "", std::move(in), {}, runtime::kInt32, out_shape);
  rw.requantize(acc, out_shape, bias.empty() ? nullptr : &bias, multipliers(a, w, sy), {n}, relu, q,
                zy, q_index);
}

/// Retypes each int8 QuantizeLinear read only by DequantizeLinear nodes (with constant zero
/// points) to uint8, every zero point + 128: the same real values, unsigned for the products.
size_t make_activations_unsigned(Graph& g) {
  size_t retyped = 0;
  const auto plus_128 = [&](const Node& n, const std::string& name) {
    std::vector<int64_t> z =
        has_input(n, 2)
            ? int_values(*g.value(n.inputs[2]).data)
            : std::vector<int64_t>(static_cast<size_t>(g.value(n.inputs[1]).num_elements()), 0);
    std::vector<uint8_t> u;
    for (int64_t v : z) u.push_back(static_cast<uint8_t>(v + 128));
    return g.add_constant(name, NDArray::from_vector(u, g.value(n.inputs[1]).shape));
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& q = g.nodes()[i];
    if (q.op != "QuantizeLinear" || !dtype_equal(g.value(q.outputs[0]).dtype, runtime::kInt8) ||
        g.is_output(q.outputs[0]) || !has_input(q, 2) || !g.value(q.inputs[2]).is_constant()) {
      continue;
    }
    const std::vector<size_t> readers = g.consumers(q.outputs[0]);
    bool all_dq = !readers.empty();
    for (size_t r : readers) {
      const Node& dq = g.nodes()[r];
      all_dq = all_dq && dq.op == "DequantizeLinear" && dq.inputs[0] == q.outputs[0] &&
               (!has_input(dq, 2) || g.value(dq.inputs[2]).is_constant());
    }
    if (!all_dq) continue;
    for (size_t r : readers) {
      Node& dq = g.nodes()[r];
      const ValueId z = plus_128(dq, dq.name + "/zero_point_u8");
      if (dq.inputs.size() < 3) dq.inputs.resize(3, kNoValue);
      dq.inputs[2] = z;
    }
    Node& qm = g.nodes()[i];
    qm.inputs[2] = plus_128(qm, qm.name + "/zero_point_u8");
    g.value(qm.outputs[0]).dtype = runtime::kUInt8;
    ++retyped;
  }
  return retyped;
}

/// The same constant values (dtype and bytes), or both absent.
bool same_constant(const Graph& g, ValueId a, ValueId b) {
  if (a == b) return true;
  if (a == kNoValue || b == kNoValue) return false;
  const Value &va = g.value(a), &vb = g.value(b);
  if (!va.is_constant() || !vb.is_constant() || !dtype_equal(va.dtype, vb.dtype) ||
      va.data->nbytes() != vb.data->nbytes()) {
    return false;
  }
  return std::memcmp(va.data->data(), vb.data->data(), static_cast<size_t>(va.data->nbytes())) == 0;
}

/// DequantizeLinear(x_q, s, z) -> MaxPool -> QuantizeLinear(s, z) (one reader each step, the same
/// scale and zero point, as quantize_static writes it) becomes MaxPool(x_q) on the 8-bit values:
/// dequantizing is increasing, so the max commutes with it, and requantizing at the same
/// parameters returns the value exactly. Returns how many.
size_t pool_quantized(Graph& g) {
  size_t pooled = 0;
  for (Node& q : g.nodes()) {
    if (q.op != "QuantizeLinear") continue;
    const Node* pool = g.producer_node(q.inputs[0]);
    if (pool == nullptr || pool->op != "MaxPool" || pool->outputs.size() > 1 ||
        !g.single_reader(pool->outputs[0])) {
      continue;
    }
    const Node* dq = g.producer_node(pool->inputs[0]);
    if (dq == nullptr || dq->op != "DequantizeLinear" || !g.single_reader(dq->outputs[0]) ||
        !same_constant(g, dq->inputs[1], q.inputs[1]) ||
        !same_constant(g, has_input(*dq, 2) ? dq->inputs[2] : kNoValue,
                       has_input(q, 2) ? q.inputs[2] : kNoValue) ||
        !dtype_equal(g.value(dq->inputs[0]).dtype, g.value(q.outputs[0]).dtype)) {
      continue;
    }
    Node n = *pool;
    n.inputs = {dq->inputs[0]};
    n.outputs = {q.outputs[0]};
    q = std::move(n);  // the Q's place, after the DequantizeLinear's input; the rest is dead
    ++pooled;
  }
  return pooled;
}

}  // namespace

RealizeQLinearReport realize_qlinear(Graph& g) {
  RealizeQLinearReport report;
  report.unsigned_activations = make_activations_unsigned(g);
  report.pools = pool_quantized(g);
  std::set<std::string> seen;  // products realized or reported
  const size_t count = g.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    const Node q = g.nodes()[i];
    if (q.op != "QuantizeLinear") continue;
    const auto [p, relu] = quantized_producer(g, q);
    if (p == nullptr || (p->op != "Conv" && p->op != "Gemm" && p->op != "MatMul")) continue;
    const Node node = *p;
    if (!seen.insert(node.name).second) continue;
    try {
      if (!g.single_reader(node.outputs[0])) {
        throw Reject{"its output has readers besides the " +
                     std::string(relu ? "Relu" : "QuantizeLinear")};
      }
      if (node.op == "Conv") {
        realize_conv(g, node, relu != nullptr, q, i);
        ++report.convolutions;
      } else {
        realize_product(g, node, relu != nullptr, q, i);
        ++report.products;
      }
    } catch (const Reject& r) {
      report.kept_float.push_back(node_label(node) + ": stays float: " + r.why);
    }
  }
  // Quantized convolutions and products whose output is not quantized.
  for (const Node& n : g.nodes()) {
    if ((n.op != "Conv" && n.op != "Gemm" && n.op != "MatMul") || seen.count(n.name)) continue;
    const Node* dq = g.producer_node(n.inputs[0]);
    if (dq != nullptr && dq->op == "DequantizeLinear") {
      report.kept_float.push_back(node_label(n) +
                                  ": stays float: its output is not quantized (no "
                                  "QuantizeLinear after it, or after its Relu)");
    }
  }
  g.sort_topologically();
  return report;
}

}  // namespace kiln::graph
