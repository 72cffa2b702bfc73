// gather_channel_permutations: channel shuffles (Reshape / Transpose chains that permute channels),
// the Concats they read and the Slices that read them, as ChannelGather nodes.
#include "compiler/graph/channel_gather.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "base/error.h"

namespace kiln::graph {
namespace {

/// Operators that keep the elements in row-major order and only rename the shape.
bool is_view(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

bool is_chain_op(const Node& n) {
  return (is_view(n.op) || n.op == "Transpose") && n.inputs.size() == 1 && n.outputs.size() == 1;
}

/// The most elements chain_channel_permutation walks (two 16 MiB arrays of indices).
constexpr int64_t kMaxCheckedElements = int64_t{1} << 22;

/// A ChannelGather's table as a constant: row 0 the input of each output channel, row 1 its
/// channel there.
ValueId add_table(Graph& g, const std::string& name, const std::vector<int32_t>& which,
                  const std::vector<int32_t>& channel) {
  std::vector<int32_t> data(which);
  data.insert(data.end(), channel.begin(), channel.end());
  return g.add_constant(
      name, runtime::NDArray::from_vector(data, {2, static_cast<int64_t>(which.size())}));
}

/// A ChannelGather node's table, as (input, channel) per output channel.
std::vector<std::pair<int32_t, int32_t>> read_table(const Graph& g, const Node& n) {
  const Value& t = g.value(n.inputs.back());
  KILN_ICHECK(t.is_constant() && t.shape.size() == 2 && t.shape[0] == 2)
      << "ChannelGather '" << n.name << "': its table " << t.type_string()
      << " is not a constant [2, C]";
  const int64_t c = t.shape[1];
  const int32_t* d = t.data->data<int32_t>();
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int64_t i = 0; i < c; ++i) out.emplace_back(d[i], d[c + i]);
  return out;
}

/// The node `n` reading `inputs` through the table `entries` (which input, which channel).
void make_gather(Graph& g, Node& n, std::vector<ValueId> inputs,
                 const std::vector<std::pair<int32_t, int32_t>>& entries) {
  std::vector<int32_t> which, channel;
  for (const auto& [w, c] : entries) {
    which.push_back(w);
    channel.push_back(c);
  }
  const ValueId out = n.outputs.at(0);
  inputs.push_back(add_table(g, g.value(out).name + "_channels", which, channel));
  n = Node{"ChannelGather", n.name, std::move(inputs), {out}, {}};
}

/// Rule 1: the chain that starts at nodes[i], if it permutes channels, as a ChannelGather that
/// replaces its last node.
bool gather_chain(Graph& g, size_t i) {
  std::vector<Node>& nodes = g.nodes();
  const Node& first = nodes[i];
  const ValueId x = first.inputs[0];
  const std::vector<int64_t> in_shape = g.value(x).shape;
  if (in_shape.size() != 4) return false;
  std::vector<const Node*> chain = {&first};
  std::vector<size_t> at = {i};
  std::optional<std::vector<int64_t>> best;
  size_t best_len = 0;
  for (;;) {
    const ValueId y = chain.back()->outputs[0];
    if (g.value(y).shape == in_shape) {
      if (auto p = chain_channel_permutation(g, in_shape, chain)) {
        std::vector<int64_t> identity(p->size());
        std::iota(identity.begin(), identity.end(), 0);
        if (*p != identity) {
          best = std::move(p);
          best_len = chain.size();
        }
      }
    }
    if (!g.single_reader(y) || chain.size() >= 16) break;
    const size_t next = g.consumers(y)[0];
    if (!is_chain_op(nodes[next])) break;
    chain.push_back(&nodes[next]);
    at.push_back(next);
  }
  if (!best) return false;
  std::vector<std::pair<int32_t, int32_t>> entries;
  for (int64_t c : *best) entries.emplace_back(0, static_cast<int32_t>(c));
  make_gather(g, nodes[at[best_len - 1]], {x}, entries);
  return true;
}

/// The channel axis of a rank-4 Concat, or -1.
int64_t concat_axis(const Graph& g, const Node& n) {
  if (n.op != "Concat" || g.value(n.outputs[0]).shape.size() != 4) return -1;
  const int64_t a = n.i("axis");
  return a < 0 ? a + 4 : a;
}

/// The most inputs rule 4 gives a gather: each output vector reads every input (a select
/// evaluates all of its operands), so a gather of more costs more than writing the inner one.
constexpr size_t kMaxComposedInputs = 4;

/// For each output channel of `n`'s data input `k` (a Concat of channels or, rule 4, a gather
/// read by `n` alone), its (input, channel) among the parts that replace the input; false when
/// input k is neither.
bool parts_of(const Graph& g, const Node& n, size_t k, bool compose, std::vector<ValueId>* parts,
              std::vector<std::pair<int32_t, int32_t>>* entries) {
  const Node* p = g.producer_node(n.inputs[k]);
  if (p == nullptr) return false;
  if (concat_axis(g, *p) == 1) {
    *parts = p->inputs;
    entries->clear();
    for (size_t part = 0; part < parts->size(); ++part) {
      for (int64_t c = 0; c < g.value((*parts)[part]).shape[1]; ++c) {
        entries->emplace_back(static_cast<int32_t>(part), static_cast<int32_t>(c));
      }
    }
    return true;
  }
  if (compose && p->op == "ChannelGather" && g.single_reader(n.inputs[k]) &&
      n.inputs.size() - 2 + p->inputs.size() - 1 <= kMaxComposedInputs) {
    *parts = std::vector<ValueId>(p->inputs.begin(), p->inputs.end() - 1);
    *entries = read_table(g, *p);
    return true;
  }
  return false;
}

/// Rules 2 and (with `compose`) 4: the gather's Concat inputs, and the gathers only it reads,
/// replaced by their inputs (each value read once).
void read_through(Graph& g, Node& n, bool compose) {
  for (bool again = true; again;) {
    again = false;
    for (size_t k = 0; k + 1 < n.inputs.size(); ++k) {
      std::vector<ValueId> parts;
      std::vector<std::pair<int32_t, int32_t>> inner;
      if (!parts_of(g, n, k, compose, &parts, &inner)) continue;
      // The new inputs: the others, then the parts not among them.
      std::vector<ValueId> data;
      for (size_t i = 0; i + 1 < n.inputs.size(); ++i) {
        if (i != k) data.push_back(n.inputs[i]);
      }
      auto slot = [&](ValueId v) {
        auto it = std::find(data.begin(), data.end(), v);
        if (it == data.end()) it = data.insert(data.end(), v);
        return static_cast<int32_t>(it - data.begin());
      };
      std::vector<int32_t> old_slot;  // an old input's place among the new ones
      for (size_t i = 0; i + 1 < n.inputs.size(); ++i) {
        old_slot.push_back(i == k ? -1 : slot(n.inputs[i]));
      }
      std::vector<int32_t> part_slot;
      for (ValueId v : parts) part_slot.push_back(slot(v));
      std::vector<std::pair<int32_t, int32_t>> entries = read_table(g, n);
      for (auto& [w, c] : entries) {
        if (w < 0) continue;
        if (w == static_cast<int32_t>(k)) {
          const auto [pw, pc] = inner[static_cast<size_t>(c)];
          w = pw < 0 ? -1 : part_slot[static_cast<size_t>(pw)];
          c = pw < 0 ? 0 : pc;
        } else {
          w = old_slot[static_cast<size_t>(w)];
        }
      }
      make_gather(g, n, data, entries);
      again = true;
      break;
    }
  }
}

/// Rule 3: a Slice of channels of a gather's output as a gather; false for another Slice.
bool slice_of_gather(Graph& g, Node& n) {
  if (n.op != "Slice" || n.inputs.size() != 1) return false;
  const Node* p = g.producer_node(n.inputs[0]);
  if (p == nullptr || p->op != "ChannelGather") return false;
  const std::vector<int64_t>& in = g.value(n.inputs[0]).shape;
  const std::vector<int64_t>& out = g.value(n.outputs[0]).shape;
  const std::vector<int64_t>&starts = n.ints("starts"), &steps = n.ints("steps");
  if (in.size() != 4 || out.size() != 4 || starts.size() != 4 || steps.size() != 4) return false;
  for (size_t d : {size_t{0}, size_t{2}, size_t{3}}) {
    if (out[d] != in[d] || starts[d] != 0 || steps[d] != 1) return false;
  }
  const std::vector<std::pair<int32_t, int32_t>> all = read_table(g, *p);
  std::vector<std::pair<int32_t, int32_t>> entries;
  for (int64_t c = 0; c < out[1]; ++c) {
    const int64_t from = starts[1] + c * steps[1];
    KILN_ICHECK(from >= 0 && from < in[1])
        << "Slice '" << n.name << "' reads channel " << from << " of " << in[1];
    entries.push_back(all[static_cast<size_t>(from)]);
  }
  make_gather(g, n, std::vector<ValueId>(p->inputs.begin(), p->inputs.end() - 1), entries);
  return true;
}

}  // namespace

std::optional<std::vector<int64_t>> chain_channel_permutation(
    const Graph& g, const std::vector<int64_t>& in_shape, const std::vector<const Node*>& chain) {
  if (in_shape.size() != 4) return std::nullopt;
  int64_t total = 1;
  for (int64_t d : in_shape) total *= d;
  if (total <= 0 || total > kMaxCheckedElements) return std::nullopt;
  // idx[o]: the input element (row-major) that output element o of the chain so far holds.
  std::vector<int32_t> idx(static_cast<size_t>(total));
  std::iota(idx.begin(), idx.end(), 0);
  std::vector<int64_t> shape = in_shape;
  std::vector<int32_t> next(idx.size());
  for (const Node* n : chain) {
    const std::vector<int64_t>& out = g.value(n->outputs[0]).shape;
    if (is_view(n->op)) {
      shape = out;
      continue;
    }
    // Transpose: output axis d is input axis perm[d].
    std::vector<int64_t> perm = n->ints("perm");
    const size_t r = shape.size();
    if (perm.empty()) {
      for (size_t d = r; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    }
    if (perm.size() != r) return std::nullopt;
    std::vector<int64_t> out_shape(r), out_stride(r), in_step(r);
    for (size_t d = 0; d < r; ++d) out_shape[d] = shape[static_cast<size_t>(perm[d])];
    int64_t s = 1;
    for (size_t d = r; d-- > 0;) {
      out_stride[d] = s;
      s *= out_shape[d];
    }
    for (size_t d = 0; d < r; ++d) in_step[static_cast<size_t>(perm[d])] = out_stride[d];
    // Walk the input in row-major order with an odometer, placing each element.
    std::vector<int64_t> coord(r, 0);
    int64_t to = 0;
    for (int64_t from = 0; from < total; ++from) {
      next[static_cast<size_t>(to)] = idx[static_cast<size_t>(from)];
      for (size_t d = r; d-- > 0;) {
        to += in_step[d];
        if (++coord[d] < shape[d]) break;
        to -= in_step[d] * shape[d];
        coord[d] = 0;
      }
    }
    idx.swap(next);
    shape = out_shape;
  }
  if (shape != in_shape) return std::nullopt;
  const int64_t n = in_shape[0], c = in_shape[1], hw = in_shape[2] * in_shape[3];
  std::vector<int64_t> p(static_cast<size_t>(c));
  for (int64_t k = 0; k < c; ++k) {
    const int64_t src = idx[static_cast<size_t>(k * hw)];
    if (src % hw != 0 || src / hw >= c) return std::nullopt;
    p[static_cast<size_t>(k)] = src / hw;
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < c; ++k) {
      for (int64_t e = 0; e < hw; ++e) {
        const int64_t o = (b * c + k) * hw + e;
        if (idx[static_cast<size_t>(o)] != (b * c + p[static_cast<size_t>(k)]) * hw + e) {
          return std::nullopt;
        }
      }
    }
  }
  return p;
}

size_t gather_channel_permutations(Graph& g) {
  bool any = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (!is_chain_op(n)) continue;
    // Only where a chain starts: not after a chain node whose output only this one reads.
    const Node* p = g.producer_node(n.inputs[0]);
    if (p != nullptr && is_chain_op(*p) && g.single_reader(n.inputs[0])) continue;
    any = gather_chain(g, i) || any;
  }
  if (!any) return 0;
  for (Node& n : g.nodes()) {  // topological order: a Slice's producer is rewritten before it
    if (n.op == "ChannelGather" || slice_of_gather(g, n)) read_through(g, n, false);
  }
  // Rule 4 once the nodes replaced are gone (the Concats counted as readers).
  g.remove_dead_nodes();
  for (Node& n : g.nodes()) {
    if (n.op == "ChannelGather") read_through(g, n, true);
  }
  g.remove_dead_nodes();
  g.verify();
  size_t gathers = 0;
  for (const Node& n : g.nodes()) gathers += n.op == "ChannelGather" ? 1 : 0;
  return gathers;
}

}  // namespace kiln::graph
