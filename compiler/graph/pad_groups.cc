// pad_groups: zero channels at the end of each group of a grouped convolution, and of the values
// around it, so that its groups are whole channel blocks.
// For each grouped convolution that alter_layout would merge (or leave in NCHW), one walk from it
// collects the values to pad (a plan); the plan is applied when nothing refused it and it costs
// fewer multiplications than merging.
#include "compiler/graph/pad_groups.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "base/int_math.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;

/// `groups` groups of `width` channels, each padded to `padded`: channel c moves to to(c).
struct GroupPadding {
  int64_t groups = 1, width = 1, padded = 1;
  int64_t channels() const { return groups * width; }
  int64_t padded_channels() const { return groups * padded; }
  int64_t to(int64_t c) const { return c / width * padded + c % width; }
  bool operator==(const GroupPadding& o) const {
    return groups == o.groups && width == o.width && padded == o.padded;
  }
  std::string str() const {
    std::ostringstream s;
    s << groups << " groups of " << width << " channels padded to " << padded;
    return s.str();
  }
};

/// What padding does to one Conv: its input channels (kernel columns) and output channels
/// (kernel rows and bias) move as these say.
struct ConvPadding {
  std::optional<GroupPadding> in, out;
};

bool is_pool(const std::string& op) {
  return op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "MaxPool" ||
         op == "AveragePool";
}

/// A convolution over 2-D maps whose kernel is a float32 constant and whose bias is one or absent.
bool constant_conv(const Graph& g, const Node& n) {
  if (n.op != "Conv" || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const Value& w = g.value(n.inputs[1]);
  if (!w.is_constant() || !w.is_float32() || w.shape.size() != 4) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Value& b = g.value(n.inputs[2]);
    if (!b.is_constant() || !b.is_float32() || b.shape.size() != 1) return false;
  }
  return g.value(n.inputs[0]).shape.size() == 4;
}

/// The axis of a constant operand of `rank` (at most 4) that broadcasts along an NCHW value's
/// channels, or -1 when it has none.
int channel_axis(size_t rank) { return rank >= 3 && rank <= 4 ? static_cast<int>(rank) - 3 : -1; }

/// Gathers and applies the padding of the regions around grouped convolutions.
class GroupPadder {
 public:
  GroupPadder(Graph& g, const AlterLayoutOptions& opt) : g_(g), opt_(opt) {
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      for (ValueId v : g_.nodes()[i].inputs) {
        if (v == kNoValue) continue;
        auto& readers = readers_[v];
        if (readers.empty() || readers.back() != i) readers.push_back(i);
      }
      for (ValueId v : g_.nodes()[i].outputs) {
        if (v != kNoValue) producer_[v] = i;
      }
    }
  }

  PadGroupsReport run() {
    PadGroupsReport report;
    std::set<size_t> seen;  // grouped convolutions already part of a plan
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      if (seen.count(i) || !candidate(i)) continue;
      plan_ = Plan{};
      make_target(i);
      drain();
      seen.insert(plan_.targets.begin(), plan_.targets.end());
      std::string why = plan_.refusal;
      if (why.empty()) why = too_costly();
      if (!why.empty()) {
        for (size_t t : plan_.targets) report.kept.push_back(g_.nodes()[t].name + ": " + why);
        continue;
      }
      apply();
      report.padded += plan_.targets.size();
    }
    g_.verify();
    return report;
  }

 private:
  /// The values and nodes a grouped convolution's padding reaches.
  struct Plan {
    std::map<ValueId, GroupPadding> values;
    std::map<size_t, ConvPadding> convs;
    std::vector<size_t> targets;  ///< the grouped convolutions among convs
    /// Constant operands (node, input slot) of elementwise nodes, padded along their channels.
    std::map<std::pair<size_t, size_t>, GroupPadding> constants;
    std::deque<ValueId> queue;
    std::string refusal;  ///< the first reason the plan cannot be applied
  };

  /// A grouped convolution (neither groups == 1 nor depthwise) with its sides' paddings, when
  /// alter_layout would merge its groups or leave it in NCHW and whole blocks are within reach.
  struct Target {
    std::optional<GroupPadding> in, out;
    int64_t merge = 0;  ///< alter_layout's merge; 0: it would stay NCHW
  };

  std::optional<Target> target_of(size_t i) const {
    const Node& n = g_.nodes()[i];
    if (!constant_conv(g_, n) || n.ints("kernel_shape").size() != 2) return std::nullopt;
    const Value& x = g_.value(n.inputs[0]);
    const Value& w = g_.value(n.inputs[1]);
    if (!x.is_float32()) return std::nullopt;
    const int64_t groups = n.i("group"), c = x.shape[1], o = w.shape[0];
    const int64_t cg = c / groups, og = o / groups;
    if (groups == 1 || cg == 1) return std::nullopt;  // plain or depthwise
    const GroupedConvBlocks b = grouped_conv_blocks(g_, n, opt_);
    if (b.in_block > 0 && b.merge == 1) return std::nullopt;  // whole blocks already
    const int64_t ib = b.in_block > 0 ? b.in_block : opt_.pad_to;
    const int64_t ob = b.in_block > 0 ? b.out_block : opt_.pad_to;
    if (ib <= 0 || ob <= 0) return std::nullopt;
    // The padded groups must be whole blocks of the blocks alter_layout will give the padded
    // channel counts.
    const int64_t cg_pad = round_up(cg, ib), og_pad = round_up(og, ob);
    const int cb = channel_block(groups * cg_pad, opt_), obb = channel_block(groups * og_pad, opt_);
    if (cb == 0 || obb == 0 || cg_pad % cb != 0 || og_pad % obb != 0) return std::nullopt;
    Target t;
    t.merge = b.in_block > 0 ? b.merge : 0;
    if (cg_pad != cg) t.in = GroupPadding{groups, cg, cg_pad};
    if (og_pad != og) t.out = GroupPadding{groups, og, og_pad};
    return t;
  }

  bool candidate(size_t i) {
    const Node& n = g_.nodes()[i];
    if (n.op != "Conv") return false;
    if (auto t = target_of(i)) {
      targets_[i] = *t;
      return true;
    }
    return false;
  }

  void refuse(const std::string& why) {
    if (plan_.refusal.empty()) plan_.refusal = why;
  }

  /// Adds grouped convolution `i` to the plan with both its sides.
  void make_target(size_t i) {
    if (plan_.convs.count(i)) return;
    const Target& t = targets_.at(i);
    plan_.targets.push_back(i);
    plan_.convs[i] = ConvPadding{t.in, t.out};
    const Node& n = g_.nodes()[i];
    if (t.in) add_value(n.inputs[0], *t.in);
    if (t.out) add_value(n.outputs[0], *t.out);
  }

  /// `v` padded by `p`: checked, then its producer and readers are visited.
  void add_value(ValueId v, const GroupPadding& p) {
    const Value& val = g_.value(v);
    if (auto it = plan_.values.find(v); it != plan_.values.end()) {
      if (!(it->second == p)) {
        refuse("'" + val.name + "' would be padded as " + it->second.str() + " and as " + p.str());
      }
      return;
    }
    if (val.is_constant() || !val.is_float32() || val.shape.size() != 4 ||
        val.shape[1] != p.channels()) {
      refuse("'" + val.name + "' (" + val.type_string() + ") cannot be padded as " + p.str());
      return;
    }
    if (g_.is_output(v)) {
      refuse("'" + val.name + "' is a graph output");
      return;
    }
    plan_.values[v] = p;
    plan_.queue.push_back(v);
  }

  void drain() {
    while (!plan_.queue.empty() && plan_.refusal.empty()) {
      const ValueId v = plan_.queue.front();
      plan_.queue.pop_front();
      visit_producer(v);
      visit_readers(v);
    }
  }

  /// A Conv reading or writing a padded value: a plain one gets the padding on that side, a
  /// grouped one must be a target padded the same way.
  void conv_side(size_t i, bool input, const GroupPadding& p) {
    const Node& n = g_.nodes()[i];
    if (!constant_conv(g_, n)) {
      refuse("'" + n.name + "' (Conv) has a kernel or bias that is not a float32 constant");
      return;
    }
    if (n.i("group") == 1) {
      std::optional<GroupPadding>& side = input ? plan_.convs[i].in : plan_.convs[i].out;
      if (side && !(*side == p)) refuse("'" + n.name + "' is padded two ways");
      side = p;
      return;
    }
    auto t = targets_.find(i);
    if (t == targets_.end()) {
      if (auto made = target_of(i)) {
        t = targets_.emplace(i, *made).first;
      }
    }
    const std::optional<GroupPadding>& want =
        t == targets_.end() ? std::nullopt : (input ? t->second.in : t->second.out);
    if (!want || !(*want == p)) {
      refuse("the grouped convolution '" + n.name + "' " + (input ? "reads" : "writes") +
             " a value padded as " + p.str());
      return;
    }
    make_target(i);
  }

  void visit_producer(ValueId v) {
    const GroupPadding p = plan_.values.at(v);
    auto it = producer_.find(v);
    if (it == producer_.end()) {
      refuse("'" + g_.value(v).name + "' is a graph input");
      return;
    }
    const size_t i = it->second;
    const Node& n = g_.nodes()[i];
    if (n.op == "Conv") {
      conv_side(i, /*input=*/false, p);
    } else if (is_pool(n.op) && n.outputs.size() == 1) {
      add_value(n.inputs[0], p);
    } else if (finite_on_finite(n.op) && n.outputs.size() == 1) {
      for (size_t s = 0; s < n.inputs.size(); ++s) operand(i, s, p);
    } else {
      refuse("'" + g_.value(v).name + "' is computed by " + n.op + " '" + n.name + "'");
    }
  }

  /// Operand `s` of elementwise node `i` whose output is padded by `p`.
  void operand(size_t i, size_t s, const GroupPadding& p) {
    const Node& n = g_.nodes()[i];
    const ValueId v = n.inputs[s];
    if (v == kNoValue) return;
    const Value& val = g_.value(v);
    const int axis = channel_axis(val.shape.size());
    const int64_t channels = axis < 0 ? 1 : val.shape[static_cast<size_t>(axis)];
    if (val.is_constant()) {
      if (channels == 1) return;  // the same for every channel
      if (channels == p.channels() && val.is_float32()) {
        plan_.constants[{i, s}] = p;
        return;
      }
    } else if (val.num_elements() == 1) {
      return;
    } else if (val.shape.size() == 4 && channels == p.channels()) {
      add_value(v, p);
      return;
    }
    refuse("operand '" + val.name + "' (" + val.type_string() + ") of " + n.op + " '" + n.name +
           "' cannot be padded");
  }

  void visit_readers(ValueId v) {
    const GroupPadding p = plan_.values.at(v);
    auto it = readers_.find(v);
    if (it == readers_.end()) return;
    for (size_t i : it->second) {
      const Node& n = g_.nodes()[i];
      for (size_t s = 0; s < n.inputs.size(); ++s) {
        if (n.inputs[s] != v) continue;
        if (n.op == "Conv" && s == 0) {
          conv_side(i, /*input=*/true, p);
        } else if ((is_pool(n.op) && s == 0 && n.outputs.size() == 1) ||
                   (finite_on_finite(n.op) && n.outputs.size() == 1)) {
          add_value(n.outputs[0], p);  // its other operands are visited as its producer's
        } else {
          refuse("'" + g_.value(v).name + "' is read by " + n.op + " '" + n.name + "'");
        }
      }
    }
  }

  /// Multiply-adds of Conv `i` with its channels padded as `c` says (none: as it is).
  int64_t conv_macs(size_t i, const ConvPadding* c) const {
    const Node& n = g_.nodes()[i];
    const Value& w = g_.value(n.inputs[1]);
    const Value& y = g_.value(n.outputs[0]);
    const int64_t groups = n.i("group");
    int64_t o = w.shape[0], cg = w.shape[1];
    if (c != nullptr && c->out) o = c->out->padded_channels();
    if (c != nullptr && c->in) cg = groups == 1 ? c->in->padded_channels() : c->in->padded;
    return y.shape[0] * o * y.shape[2] * y.shape[3] * cg * w.shape[2] * w.shape[3];
  }

  /// Why the plan costs more than merging (empty: it does not).
  std::string too_costly() const {
    int64_t padding = 0, merging = 0;
    for (const auto& [i, c] : plan_.convs) padding += conv_macs(i, &c) - conv_macs(i, nullptr);
    for (size_t t : plan_.targets) {
      const int64_t merge = targets_.at(t).merge;
      merging += (merge == 0 ? kNchwCost : merge - 1) * conv_macs(t, nullptr);
    }
    if (padding < merging) return "";
    std::ostringstream s;
    s << "padding adds " << padding << " multiply-adds, merging " << merging;
    return s.str();
  }

  /// `a` with its axis `axis` of `p.channels()` moved to `p.padded_channels()` by p, zeros
  /// elsewhere.
  static runtime::NDArray pad_axis(const runtime::NDArray& a, size_t axis, const GroupPadding& p) {
    std::vector<int64_t> shape = a.shape();
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    shape[axis] = p.padded_channels();
    runtime::NDArray r = runtime::NDArray::empty(shape, kFloat32);
    float* dst = r.data<float>();
    std::fill(dst, dst + r.num_elements(), 0.0f);
    const float* src = a.data<float>();
    const int64_t c = p.channels(), cp = p.padded_channels();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < c; ++k) {
        std::copy(src + (o * c + k) * inner, src + (o * c + k + 1) * inner,
                  dst + (o * cp + p.to(k)) * inner);
      }
    }
    return r;
  }

  /// A grouped kernel [O, C/groups, KH, KW] with zero columns appended to each group's
  /// C/groups (every output channel reads only its own group).
  static runtime::NDArray pad_group_columns(const runtime::NDArray& w, int64_t padded) {
    std::vector<int64_t> shape = w.shape();
    const int64_t o = shape[0], cg = shape[1], khw = shape[2] * shape[3];
    shape[1] = padded;
    runtime::NDArray r = runtime::NDArray::empty(shape, kFloat32);
    float* dst = r.data<float>();
    std::fill(dst, dst + r.num_elements(), 0.0f);
    const float* src = w.data<float>();
    for (int64_t oo = 0; oo < o; ++oo) {
      std::copy(src + oo * cg * khw, src + (oo + 1) * cg * khw, dst + oo * padded * khw);
    }
    return r;
  }

  void apply() {
    for (const auto& [v, p] : plan_.values) g_.value(v).shape[1] = p.padded_channels();
    for (const auto& [i, c] : plan_.convs) {
      Node& n = g_.nodes()[i];
      // Rows (output channels), then columns: each step a new array (a plan's conv pads one
      // side at least).
      const runtime::NDArray& kernel = *g_.value(n.inputs[1]).data;
      runtime::NDArray padded_w = c.out ? pad_axis(kernel, 0, *c.out) : runtime::NDArray();
      const runtime::NDArray& rows = c.out ? padded_w : kernel;
      if (c.in) {
        padded_w =
            n.i("group") == 1 ? pad_axis(rows, 1, *c.in) : pad_group_columns(rows, c.in->padded);
      }
      const std::string w_name = g_.value(n.inputs[1]).name + "_group_padded";
      n.inputs[1] = g_.add_constant(w_name, std::move(padded_w));
      if (c.out && n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
        const Value& b = g_.value(n.inputs[2]);
        const std::string b_name = b.name + "_group_padded";
        runtime::NDArray padded = pad_axis(*b.data, 0, *c.out);
        n.inputs[2] = g_.add_constant(b_name, std::move(padded));
      }
    }
    for (const auto& [use, p] : plan_.constants) {
      Node& n = g_.nodes()[use.first];
      const Value& k = g_.value(n.inputs[use.second]);
      const std::string name = k.name + "_group_padded";
      runtime::NDArray padded =
          pad_axis(*k.data, static_cast<size_t>(channel_axis(k.shape.size())), p);
      n.inputs[use.second] = g_.add_constant(name, std::move(padded));
    }
  }

  /// What an NCHW grouped convolution costs over a blocked one, in its own multiplications
  /// (measured on RegNet-Y-1.6GF: ~20% of peak in NCHW, ~80% blocked).
  static constexpr int64_t kNchwCost = 3;

  Graph& g_;
  const AlterLayoutOptions opt_;
  std::map<ValueId, std::vector<size_t>> readers_;  ///< value -> the nodes reading it, in order
  std::map<ValueId, size_t> producer_;
  std::map<size_t, Target> targets_;  ///< grouped convolutions that padding would unmerge
  Plan plan_;
};

}  // namespace

PadGroupsReport pad_groups(Graph& g, const AlterLayoutOptions& options) {
  g.verify();
  return GroupPadder(g, options).run();
}

}  // namespace kiln::graph
