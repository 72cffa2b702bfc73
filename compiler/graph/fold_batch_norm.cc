// fold_batch_norm: batch norms after Conv, ConvTranspose, Gemm and MatMul folded into their
// weights.
#include "compiler/graph/fold_batch_norm.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;

/// The data of `v` as doubles when it is a float32 constant.
std::optional<std::vector<double>> constant_f32(const Graph& g, ValueId v) {
  if (v == kNoValue || v < 0 || static_cast<size_t>(v) >= g.num_values()) return std::nullopt;
  const Value& val = g.value(v);
  if (!val.is_constant() || !runtime::dtype_equal(val.dtype, kFloat32)) return std::nullopt;
  const std::vector<float> f = val.data->to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

ValueId add_f32_constant(Graph& g, std::string name, const std::vector<double>& data,
                         std::vector<int64_t> shape) {
  std::vector<float> f(data.begin(), data.end());
  return g.add_constant(std::move(name), runtime::NDArray::from_vector<float>(f, std::move(shape)));
}

/// The batch norm's per-channel scale s = gamma / sqrt(var + eps), and its mean and beta.
struct BnParams {
  std::vector<double> scale, mean, beta;
};

std::optional<BnParams> bn_params(const Graph& g, const Node& bn) {
  if (bn.inputs.size() != 5) return std::nullopt;
  auto gamma = constant_f32(g, bn.inputs[1]), beta = constant_f32(g, bn.inputs[2]),
       mean = constant_f32(g, bn.inputs[3]), var = constant_f32(g, bn.inputs[4]);
  if (!gamma || !beta || !mean || !var) return std::nullopt;
  const size_t c = gamma->size();
  if (beta->size() != c || mean->size() != c || var->size() != c) return std::nullopt;
  const double eps = static_cast<double>(bn.f("epsilon", 1e-5f));
  BnParams p{std::vector<double>(c), std::move(*mean), std::move(*beta)};
  for (size_t i = 0; i < c; ++i) p.scale[i] = (*gamma)[i] / std::sqrt((*var)[i] + eps);
  return p;
}

/// Whether input `i` of `n` is present.
bool has_input(const Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != kNoValue; }

/// Folds into a Conv: rewrites its inputs and returns true, or returns false leaving it alone.
bool fold_into_conv(Graph& g, size_t pi, const BnParams& bn) {
  const Node& conv = g.nodes()[pi];
  const size_t channels = bn.scale.size();
  auto w = constant_f32(g, conv.inputs.size() > 1 ? conv.inputs[1] : kNoValue);
  if (!w) return false;
  const Value& wv = g.value(conv.inputs[1]);
  if (wv.shape.empty() || wv.shape[0] != static_cast<int64_t>(channels)) return false;
  std::vector<double> b(channels, 0.0);
  if (has_input(conv, 2)) {
    auto given = constant_f32(g, conv.inputs[2]);
    if (!given || given->size() != channels) return false;
    b = std::move(*given);
  }
  const size_t per_channel = w->size() / channels;
  for (size_t c = 0; c < channels; ++c) {
    for (size_t k = 0; k < per_channel; ++k) (*w)[c * per_channel + k] *= bn.scale[c];
    b[c] = (b[c] - bn.mean[c]) * bn.scale[c] + bn.beta[c];
  }
  const std::string w_name = wv.name + ".bn_folded";
  const std::vector<int64_t> w_shape = wv.shape;
  const std::string b_name = has_input(conv, 2) ? g.value(conv.inputs[2]).name + ".bn_folded"
                                                : conv.name + ".bias.bn_folded";
  const ValueId nw = add_f32_constant(g, w_name, *w, w_shape);
  const ValueId nb = add_f32_constant(g, b_name, b, {static_cast<int64_t>(channels)});
  Node& n = g.nodes()[pi];
  n.inputs.resize(3);
  n.inputs[1] = nw;
  n.inputs[2] = nb;
  return true;
}

/// Folds into a ConvTranspose: its weight is [C, M / group, k...], so output channel
/// g * M/group + m is dim 1's m of the input channels of group g.
bool fold_into_conv_transpose(Graph& g, size_t pi, const BnParams& bn) {
  const Node& conv = g.nodes()[pi];
  const int64_t channels = static_cast<int64_t>(bn.scale.size());
  auto w = constant_f32(g, conv.inputs.size() > 1 ? conv.inputs[1] : kNoValue);
  if (!w) return false;
  const Value& wv = g.value(conv.inputs[1]);
  const int64_t groups = conv.i("group", 1);
  if (wv.shape.size() < 3 || groups < 1 || wv.shape[0] % groups != 0 ||
      wv.shape[1] * groups != channels) {
    return false;
  }
  std::vector<double> b(static_cast<size_t>(channels), 0.0);
  if (has_input(conv, 2)) {
    auto given = constant_f32(g, conv.inputs[2]);
    if (!given || given->size() != static_cast<size_t>(channels)) return false;
    b = std::move(*given);
  }
  const int64_t in_per_group = wv.shape[0] / groups, mg = wv.shape[1];
  const size_t taps = w->size() / static_cast<size_t>(wv.shape[0] * mg);
  for (int64_t c = 0; c < wv.shape[0]; ++c) {
    for (int64_t m = 0; m < mg; ++m) {
      const double s = bn.scale[static_cast<size_t>(c / in_per_group * mg + m)];
      double* filter = w->data() + static_cast<size_t>(c * mg + m) * taps;
      for (size_t k = 0; k < taps; ++k) filter[k] *= s;
    }
  }
  for (size_t o = 0; o < b.size(); ++o) b[o] = (b[o] - bn.mean[o]) * bn.scale[o] + bn.beta[o];
  const std::string w_name = wv.name + ".bn_folded";
  const std::vector<int64_t> w_shape = wv.shape;
  const std::string b_name = has_input(conv, 2) ? g.value(conv.inputs[2]).name + ".bn_folded"
                                                : conv.name + ".bias.bn_folded";
  const ValueId nw = add_f32_constant(g, w_name, *w, w_shape);
  const ValueId nb = add_f32_constant(g, b_name, b, {channels});
  Node& n = g.nodes()[pi];
  n.inputs.resize(3);
  n.inputs[1] = nw;
  n.inputs[2] = nb;
  return true;
}

/// Folds into a Gemm, or a MatMul of a matrix by a constant matrix (which becomes a Gemm).
bool fold_into_dense(Graph& g, size_t pi, const BnParams& bn) {
  const Node& d = g.nodes()[pi];
  const bool gemm = d.op == "Gemm";
  if (d.inputs.size() < 2 || d.outputs.empty()) return false;
  const Value& y = g.value(d.outputs[0]);
  const size_t channels = bn.scale.size();
  if (y.shape.size() != 2 || y.shape[1] != static_cast<int64_t>(channels)) return false;
  if (g.value(d.inputs[0]).shape.size() != 2) return false;
  auto b = constant_f32(g, d.inputs[1]);
  if (!b) return false;
  const Value& bv = g.value(d.inputs[1]);
  if (bv.shape.size() != 2) return false;
  const bool trans_b = gemm && d.i("transB", 0) != 0;
  const double alpha = gemm ? static_cast<double>(d.f("alpha", 1.0f)) : 1.0;
  const double beta = gemm ? static_cast<double>(d.f("beta", 1.0f)) : 1.0;
  const int64_t m = y.shape[0], n = y.shape[1];
  // C broadcast to [m, n] (right-aligned), or zeros.
  std::vector<double> c_full(static_cast<size_t>(m * n), 0.0);
  bool varies_along_m = false;
  if (gemm && has_input(d, 2)) {
    auto c = constant_f32(g, d.inputs[2]);
    if (!c) return false;
    std::vector<int64_t> cs = g.value(d.inputs[2]).shape;
    if (cs.size() > 2) return false;
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    if ((cs[0] != 1 && cs[0] != m) || (cs[1] != 1 && cs[1] != n)) return false;
    varies_along_m = cs[0] != 1 && m != 1;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t ci = (cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j);
        c_full[static_cast<size_t>(i * n + j)] = (*c)[static_cast<size_t>(ci)];
      }
    }
  }
  // Scale B's output columns (rows when transposed).
  const int64_t b_cols = bv.shape[1];
  for (int64_t r = 0; r < bv.shape[0]; ++r) {
    for (int64_t col = 0; col < b_cols; ++col) {
      (*b)[static_cast<size_t>(r * b_cols + col)] *=
          bn.scale[static_cast<size_t>(trans_b ? r : col)];
    }
  }
  const int64_t c_rows = varies_along_m ? m : 1;
  std::vector<double> c_new(static_cast<size_t>(c_rows * n));
  for (int64_t i = 0; i < c_rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const size_t ch = static_cast<size_t>(j);
      c_new[static_cast<size_t>(i * n + j)] =
          (beta * c_full[static_cast<size_t>(i * n + j)] - bn.mean[ch]) * bn.scale[ch] +
          bn.beta[ch];
    }
  }
  const std::string b_name = bv.name + ".bn_folded";
  const std::vector<int64_t> b_shape = bv.shape;
  const std::string c_name = has_input(d, 2) && gemm ? g.value(d.inputs[2]).name + ".bn_folded"
                                                     : d.name + ".bias.bn_folded";
  const ValueId nb = add_f32_constant(g, b_name, *b, b_shape);
  const ValueId nc = add_f32_constant(
      g, c_name, c_new, varies_along_m ? std::vector<int64_t>{m, n} : std::vector<int64_t>{n});
  Node& node = g.nodes()[pi];
  node.inputs.resize(3);
  node.inputs[1] = nb;
  node.inputs[2] = nc;
  if (!gemm) {
    node.op = "Gemm";
    node.attrs = {{"alpha", static_cast<float>(alpha)},
                  {"beta", 1.0f},
                  {"transA", int64_t{0}},
                  {"transB", int64_t{0}}};
  } else {
    node.attrs["beta"] = 1.0f;
  }
  return true;
}

}  // namespace

size_t fold_batch_norm(Graph& graph) {
  size_t folded = 0;
  auto& nodes = graph.nodes();
  for (size_t j = 0; j < nodes.size();) {
    const Node& bn = nodes[j];
    if (bn.op != "BatchNormalization" || bn.inputs.empty() || bn.outputs.empty() ||
        bn.outputs[0] == kNoValue) {
      ++j;
      continue;
    }
    bool extra_outputs = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs |= bn.outputs[k] != kNoValue;
    const ValueId x = bn.inputs[0];
    const int64_t p = graph.producer(x);
    std::optional<BnParams> params = bn_params(graph, bn);
    if (extra_outputs || p < 0 || !params || graph.is_output(x) ||
        graph.consumers(x) != std::vector<size_t>{j} ||
        !runtime::dtype_equal(graph.value(x).dtype, kFloat32)) {
      ++j;
      continue;
    }
    const size_t pi = static_cast<size_t>(p);
    const Node& prod = nodes[pi];
    const auto& xs = graph.value(x).shape;
    bool ok = false;
    if (prod.outputs.size() == 1 && prod.outputs[0] == x) {
      if (prod.op == "Conv" && xs.size() >= 3 &&
          xs[1] == static_cast<int64_t>(params->scale.size())) {
        ok = fold_into_conv(graph, pi, *params);
      } else if (prod.op == "ConvTranspose" && xs.size() >= 3 &&
                 xs[1] == static_cast<int64_t>(params->scale.size())) {
        ok = fold_into_conv_transpose(graph, pi, *params);
      } else if (prod.op == "Gemm" || prod.op == "MatMul") {
        ok = fold_into_dense(graph, pi, *params);
      }
    }
    if (!ok) {
      ++j;
      continue;
    }
    // The conv/dense node now computes the batch norm's output.
    nodes[pi].outputs[0] = nodes[j].outputs[0];
    nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(j));
    ++folded;
  }
  return folded;
}

}  // namespace kiln::graph
