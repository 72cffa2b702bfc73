// fuse_ops: the fusion rules of fuse.h over a union-find of nodes.
#include "compiler/graph/fuse.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "base/error.h"

namespace kiln::graph {
namespace {

bool at_most(OpPattern p, OpPattern bound) {
  return static_cast<int>(p) <= static_cast<int>(bound);
}

/// The state of one fusion: each node's group, by its representative node.
class Fuser {
 public:
  explicit Fuser(const Graph& g) : g_(g), parent_(g.nodes().size()), ops_(g.nodes().size(), 1) {
    std::iota(parent_.begin(), parent_.end(), size_t{0});
    for (const Node& n : g.nodes()) {
      pattern_.push_back(op_pattern(n));
      master_.push_back(static_cast<size_t>(&n - g.nodes().data()));
    }
  }

  void run() {
    const auto& nodes = g_.nodes();
    // Phase 1: out-ewise-fusable nodes absorb their elementwise epilogues.
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (pattern_[i] != OpPattern::kOutEWiseFusable || find(i) != i) continue;
      size_t prev = i;  // the chain's last node, which the next one reads
      for (int64_t c = linked_reader(i); c >= 0; c = linked_reader(static_cast<size_t>(c))) {
        const size_t cu = static_cast<size_t>(c);
        if (find(cu) != cu || !at_most(op_pattern(nodes[cu]), OpPattern::kBroadcast)) break;
        // The template stores the epilogue from its register tile, one element per element of
        // the master's output: a broadcast that grows the shape (an SE block's [N,C,1,1] scale
        // times [N,C,H,W]) has more elements than the tile and stays outside the group.
        if (!same_shape_output(cu, i)) break;
        const int64_t ops = 1 + reads(cu, prev) * ops_[prev];
        if (ops > kMaxGroupOps) break;
        ops_[cu] = ops;
        parent_[cu] = i;
        absorb_dequantized_operands(cu, prev, i);
        prev = cu;
      }
    }
    // Phase 2: elementwise, broadcast and injective groups merge into injective groups and
    // reductions.
    for (size_t i = 0; i < nodes.size(); ++i) {
      const int64_t c = linked_reader(i);
      if (c < 0) continue;
      const size_t p = find(i), q = find(static_cast<size_t>(c));
      if (p == q || !at_most(pattern_[p], OpPattern::kInjective)) continue;
      const bool rule1 = at_most(pattern_[q], OpPattern::kInjective);
      if (!rule1 && pattern_[q] != OpPattern::kCommReduce) continue;  // rule 2 is the only other
      if (unblocks_into_flat(i, static_cast<size_t>(c))) continue;
      // Every producer of node i merged into its group before i (they come first in nodes()), and
      // c is the last node of its group, so both counts are final up to here.
      const size_t cu = static_cast<size_t>(c);
      const int64_t ops = ops_[cu] + reads(cu, i) * ops_[i];
      if (ops > kMaxGroupOps) continue;
      ops_[cu] = ops;
      if (rule1) {
        pattern_[q] = std::max(pattern_[p], pattern_[q]);
        master_[q] = cu;
      }
      parent_[p] = q;
    }
  }

  /// The other operands of chain node c (master m, reached from prev) that a DequantizeLinear
  /// computes for c alone, with the master's output shape (a quantized residual Add's skip
  /// branch): into the epilogue, which reads the 8-bit value in the tile rather than a float copy
  /// that a kernel of its own stored.
  void absorb_dequantized_operands(size_t c, size_t prev, size_t m) {
    const Node& cn = g_.nodes()[c];
    for (ValueId v : cn.inputs) {
      if (v == kNoValue) continue;
      const int64_t p = g_.producer(v);
      if (p < 0) continue;
      const size_t pu = static_cast<size_t>(p);
      if (pu == prev || find(pu) != pu || g_.nodes()[pu].op != "DequantizeLinear") continue;
      if (linked_reader(pu) != static_cast<int64_t>(c) || !same_shape_output(pu, m)) continue;
      const int64_t ops = ops_[c] + reads(c, pu) * ops_[pu];
      if (ops > kMaxGroupOps) continue;
      ops_[c] = ops;
      parent_[pu] = m;
    }
  }

  size_t find(size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  OpPattern pattern(size_t root) const { return pattern_[root]; }
  size_t master(size_t root) const { return master_[root]; }

 private:
  /// Whether node i converts a blocked value back to rows of 16 or more (NCHW[x]c -> NCHW) and
  /// its reader c flattens it to fewer dimensions: the conversion's own kernel tiles 16 channels
  /// by runs of a row (schedule_injective_x86) and what reads the flat value reads it in order,
  /// where a flat output would gather every vector from 16 lines (Faster R-CNN's feature maps
  /// flattened into one Concat, 8.7 MB, at 2 GB/s).
  bool unblocks_into_flat(size_t i, size_t c) const {
    const Node& n = g_.nodes()[i];
    const Node& cn = g_.nodes()[c];
    if (n.op != "LayoutTransform" || n.outputs.empty() || cn.outputs.empty()) return false;
    if (n.i("src_block", 0) == 0 || n.i("dst_block", 0) != 0) return false;
    const std::vector<int64_t>& shape = g_.value(n.outputs[0]).shape;
    return shape.size() >= 2 && shape.back() >= 16 && cn.outputs[0] != kNoValue &&
           g_.value(cn.outputs[0]).shape.size() < shape.size();
  }

  /// Whether node c has one output, of the shape of master node m's first output.
  bool same_shape_output(size_t c, size_t m) const {
    const Node& cn = g_.nodes()[c];
    const Node& mn = g_.nodes()[m];
    if (cn.outputs.empty() || mn.outputs.empty()) return false;
    if (cn.outputs[0] == kNoValue || mn.outputs[0] == kNoValue) return false;
    return g_.value(cn.outputs[0]).shape == g_.value(mn.outputs[0]).shape;
  }

  /// How many places of node p's output one element of its reader c's output reads.
  int64_t reads(size_t c, size_t p) const {
    const Node& cn = g_.nodes()[c];
    const Node& pn = g_.nodes()[p];
    const bool first = !cn.inputs.empty() && std::find(pn.outputs.begin(), pn.outputs.end(),
                                                       cn.inputs[0]) != pn.outputs.end();
    return first ? input_reads(g_, cn) : 1;
  }

  /// The one reader of node i's one output, or -1 when the output is not a link (see fuse.h).
  int64_t linked_reader(size_t i) const {
    const Node& n = g_.nodes()[i];
    ValueId out = kNoValue;
    for (ValueId v : n.outputs) {
      if (v == kNoValue) continue;
      if (out != kNoValue) return -1;
      out = v;
    }
    if (out == kNoValue || g_.is_output(out)) return -1;
    const std::vector<size_t> readers = g_.consumers(out);
    if (readers.size() != 1) return -1;
    KILN_ICHECK(readers[0] > i) << "fuse_ops: nodes are not in topological order at node '"
                                << n.name << "'";
    return static_cast<int64_t>(readers[0]);
  }

  const Graph& g_;
  std::vector<size_t> parent_;
  std::vector<OpPattern> pattern_;  // valid at representatives
  std::vector<size_t> master_;      // valid at representatives
  /// Per node: the operators of the expression its group computes up to it (fuse.h's count).
  std::vector<int64_t> ops_;
};

/// Fills in output(s) and inputs of a group whose nodes are set.
void finish_group(const Graph& g, FusedGroup& group) {
  const auto& nodes = g.nodes();
  std::set<ValueId> produced;
  for (size_t i : group.nodes) {
    for (ValueId v : nodes[i].outputs) produced.insert(v);
  }
  std::set<ValueId> seen;
  for (size_t i : group.nodes) {
    for (ValueId v : nodes[i].inputs) {
      if (v == kNoValue || produced.count(v) || !seen.insert(v).second) continue;
      group.inputs.push_back(v);
    }
  }
  for (ValueId v : nodes[group.nodes.back()].outputs) {
    if (v != kNoValue) group.outputs.push_back(v);
  }
  KILN_ICHECK(!group.outputs.empty())
      << "fuse_ops: node '" << nodes[group.nodes.back()].name << "' has no output";
  group.output = group.outputs.front();
}

}  // namespace

std::vector<FusedGroup> fuse_ops(const Graph& graph, bool enable) {
  const auto& nodes = graph.nodes();
  Fuser fuser(graph);
  if (enable) fuser.run();
  // Groups ordered by their last node: a group's readers end after it, so this is topological.
  std::vector<FusedGroup> groups;
  std::vector<std::vector<size_t>> members(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) members[fuser.find(i)].push_back(i);
  std::vector<size_t> roots;
  for (size_t r = 0; r < nodes.size(); ++r) {
    if (!members[r].empty()) roots.push_back(r);
  }
  std::sort(roots.begin(), roots.end(),
            [&](size_t a, size_t b) { return members[a].back() < members[b].back(); });
  for (size_t r : roots) {
    FusedGroup group;
    group.nodes = members[r];
    group.pattern = fuser.pattern(r);
    group.master = fuser.master(r);
    finish_group(graph, group);
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string fused_groups_to_string(const Graph& graph, const std::vector<FusedGroup>& groups) {
  std::ostringstream os;
  for (size_t k = 0; k < groups.size(); ++k) {
    const FusedGroup& grp = groups[k];
    os << "group " << k << " [" << op_pattern_name(grp.pattern) << ", master "
       << graph.nodes()[grp.master].op << "]:";
    for (size_t j = 0; j < grp.nodes.size(); ++j) {
      os << (j ? ", " : " ") << graph.nodes()[grp.nodes[j]].op;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace kiln::graph
