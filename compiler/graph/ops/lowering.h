// What the family files' lowerings share (the lowering driver is op_lowering.cc): the node being
// lowered with its inputs' placeholders (LowerCtx), what a lowering returns (LowerResult), how
// tunable templates are scheduled (Tuning), and the small helpers most lowerings use.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/autotune/task.h"
#include "compiler/graph/graph.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/reduce.h"

namespace kiln::graph::ops {

/// A template that schedules `y` with an epilogue stage (topi::epilogue_stage).
using Template = std::function<void(te::Schedule&, const te::Tensor& y, const te::Tensor& output)>;

/// How tunable operators are scheduled: each with its template at the config that `configs`
/// chooses for its task, or at the template's default without a source.
struct Tuning {
  autotune::ConfigSource* configs = nullptr;
  std::string target;

  void schedule(const std::string& name, te::Schedule& s, const te::Tensor& t,
                const te::Tensor& output) const;
  /// Template `name` as a Template.
  Template of(const std::string& name) const;
};

/// The node being lowered and the placeholders of its inputs.
struct LowerCtx {
  const Graph& g;
  const Node& node;
  std::vector<te::Tensor> in;  ///< one placeholder per node input (undefined for kNoValue)
  Tuning tuning;
  /// Whether the function reads each input (all true to begin with); a lowering clears an input
  /// its computation never reads (an LSTM's R with one step and no initial state).
  std::vector<bool>* used_inputs = nullptr;

  std::string where() const { return "node '" + node.name + "' (" + node.op + ")"; }
  /// kiln::Error "graph build: node 'x' (Op): what".
  [[noreturn]] void fail(const std::string& what) const;
  const te::Tensor& input(size_t i) const {
    if (i >= in.size() || !in[i].defined()) fail("input " + std::to_string(i) + " is required");
    return in[i];
  }
  bool has(size_t i) const { return i < in.size() && in[i].defined(); }
  const Value& out_value(size_t i = 0) const { return g.value(node.outputs.at(i)); }
  std::vector<int64_t> in_shape(size_t i) const { return g.value(node.inputs.at(i)).shape; }
};

/// What a lowering returns: the node's outputs as tensors, and the schedule to apply once a
/// te::Schedule of them exists. `schedule(s, output)` schedules the node's stages with `output`
/// storing its result: outs[0] itself, or, when the node is the master of a fused group, the
/// group's last stage, an elementwise epilogue of outs[0] with the stages between inlined.
struct LowerResult {
  std::vector<te::Tensor> outs;  ///< one per node output (undefined if absent)
  std::function<void(te::Schedule&, const te::Tensor& output)> schedule;
  /// The operator's own stage that its template tiles (a convolution's, a product's), when the
  /// rest of the node is an epilogue of it: what a GPU template schedules instead.
  te::Tensor anchor = te::Tensor();
  /// For an operator that schedules all of its stages itself on a GPU (the LSTM): that schedule.
  std::function<void(te::Schedule&, const target::Target&)> gpu = nullptr;
};

/// `s` with every character that is not a letter or digit made '_' ("t" when empty).
std::string sanitize(const std::string& s);

/// schedule_injective_x86.
void injective(te::Schedule& s, const te::Tensor& t);

/// After a template scheduled `t` at the root: `output`, when it is another stage, as one
/// injective stage reading it (for templates that cannot take the epilogue into their tile).
void then_injective(te::Schedule& s, const te::Tensor& t, const te::Tensor& output);

/// An operator `y` scheduled by `base`, followed by its own elementwise stage `out` (a bias, a
/// scale; `y` itself when none): both, and the group's epilogue, in the template's tile.
LowerResult with_epilogue(const te::Tensor& y, const Template& base, const te::Tensor& out);

/// One elementwise / injective stage `t`, inlined into the group's output stage.
LowerResult injective_result(const te::Tensor& t);

/// A reduction `y` by schedule_reduce_x86, then the group's epilogue as an injective stage.
LowerResult reduce_result(const te::Tensor& y);

topi::Ints2 ints2(const std::vector<int64_t>& v);
topi::Ints4 ints4(const std::vector<int64_t>& v);

/// How reductions of a row fold on the node's target: in vector lanes on CPUs, in one stage for
/// the GPU templates.
topi::RowFold row_fold(const LowerCtx& c);

}  // namespace kiln::graph::ops
