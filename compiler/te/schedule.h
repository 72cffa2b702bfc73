// Schedules: how a tensor expression is turned into loops (the paper's §4.1). A schedule has one
// stage per tensor; each stage keeps its loop structure as relations between iteration variables
// (split, fuse) and per-loop annotations (vectorize, unroll, parallel, GPU thread binding,
// pragmas), plus where its computation is attached (at the root, inlined into its consumers, or
// inside a loop of another stage) and in which memory scope its result lives.
//
//   Schedule s = create_schedule({C});
//   auto [yo, xo, ko, yi, xi, ki] = s[C].tile(y, x, k, 8, 8, 8);
//
// Mistakes (an axis of another stage, a compute_at to a loop that does not enclose the consumer,
// a non-positive factor) raise kiln::Error naming the stage and the axis.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

#include "compiler/ir/stmt.h"
#include "compiler/te/tensor.h"
#include "compiler/te/tensor_intrin.h"

namespace kiln::te {

/// parent = outer * factor + inner (the factor is the inner loop's extent).
struct SplitRelation {
  IterVar parent, outer, inner;
  Expr factor;  ///< set when split by factor
  Expr nparts;  ///< set when split by number of outer parts
};
/// fused = outer * extent(inner) + inner
struct FuseRelation {
  IterVar outer, inner, fused;
};
using IterVarRelation = std::variant<SplitRelation, FuseRelation>;

/// What a loop becomes.
struct IterVarAttr {
  ir::ForKind for_kind = ir::ForKind::kSerial;
  IterVar bind_thread;  ///< a thread axis ("threadIdx.x", "vthread", ...) when bound
  std::vector<std::pair<std::string, Expr>> pragmas;
  TensorIntrin
      tensor_intrin;  ///< set by tensorize: this loop and those inside it are the intrinsic
};

enum class AttachType : uint8_t {
  kRoot,    ///< computed in its own loop nest at the top of the function
  kInline,  ///< substituted into its consumers
  kScope,   ///< computed inside a loop of another stage (compute_at)
};

struct StageNode;

/// A handle to one stage of a schedule.
class Stage {
 public:
  Stage() = default;
  explicit Stage(std::shared_ptr<StageNode> n) : node_(std::move(n)) {}
  StageNode* operator->() const { return node_.get(); }
  StageNode* get() const { return node_.get(); }
  bool operator==(const Stage& o) const { return node_ == o.node_; }

  /// The stage's tensor as the schedule now computes it (cache_write makes a new one).
  const Tensor& op() const;
  /// Axis i of the current computation, and its reduction axes.
  IterVar axis(size_t i) const;
  IterVar reduce_axis(size_t i) const;

  struct SplitResult {
    IterVar outer, inner;
  };
  /// Splits `parent` into outer × inner loops with inner extent `factor`.
  SplitResult split(const IterVar& parent, Expr factor);
  /// Splits `parent` so that the outer loop has `nparts` iterations.
  SplitResult split_nparts(const IterVar& parent, Expr nparts);
  /// 2-D tiling: returns (x.outer, y.outer, x.inner, y.inner) in that loop order.
  std::tuple<IterVar, IterVar, IterVar, IterVar> tile(const IterVar& x, const IterVar& y,
                                                      Expr x_factor, Expr y_factor);
  /// 3-D tiling (the paper's `tile(y, x, k, 8, 8, 8)`): (yo, xo, ko, yi, xi, ki).
  std::tuple<IterVar, IterVar, IterVar, IterVar, IterVar, IterVar> tile(
      const IterVar& y, const IterVar& x, const IterVar& k, Expr y_factor, Expr x_factor,
      Expr k_factor);
  /// Fuses two adjacent loops (outer directly encloses inner) into one.
  IterVar fuse(const IterVar& outer, const IterVar& inner);
  /// Fuses a run of adjacent loops, outermost first.
  IterVar fuse(const std::vector<IterVar>& axes);
  /// Puts the given loops in this order, keeping the positions of the others.
  void reorder(const std::vector<IterVar>& order);
  void vectorize(const IterVar& axis);
  void unroll(const IterVar& axis);
  void parallel(const IterVar& axis);
  /// Binds a loop to a GPU thread or block index, or to a virtual thread.
  void bind(const IterVar& axis, const IterVar& thread_axis);
  /// Attaches an annotation the code generator sees as an attribute around the loop.
  void pragma(const IterVar& axis, const std::string& key, Expr value = Expr(0));
  /// Replaces loop `axis` and the loops inside it by the intrinsic, which must compute the same
  /// thing (checked when lowering; kiln::Error naming the stage, axis and intrinsic otherwise).
  /// Its data-parallel loops map to the intrinsic's axes in order, its reduction loops to the
  /// intrinsic's reduction axes.
  void tensorize(const IterVar& axis, const TensorIntrin& intrin);
  /// Computes this stage inside loop `axis` of `parent` (which reads this stage).
  void compute_at(const Stage& parent, const IterVar& axis);
  /// Substitutes this stage's expression into its consumers.
  void compute_inline();
  /// Computes this stage in its own loop nest at the top (the default).
  void compute_root();
  /// The memory scope of this stage's result: "global", "local", "shared", ...
  void set_scope(const std::string& scope);

 private:
  SplitResult split_impl(const IterVar& parent, Expr factor, Expr nparts);

  std::shared_ptr<StageNode> node_;
};

struct StageNode {
  Tensor op;                            ///< what is computed now
  Tensor origin_op;                     ///< what the user created (s[t] finds the stage by either)
  std::vector<IterVar> all_iter_vars;   ///< root axes and every axis made from them
  std::vector<IterVar> leaf_iter_vars;  ///< the loops, outermost first
  std::vector<IterVarRelation> relations;
  std::unordered_map<const ir::IterVarNode*, IterVarAttr> iter_var_attrs;
  AttachType attach_type = AttachType::kRoot;
  Stage attach_stage;
  IterVar attach_ivar;
  std::string scope = "global";
  bool is_output = false;
  class ScheduleNode* owner = nullptr;

  bool is_placeholder() const { return !op->is_compute(); }
  const std::string& name() const { return op->name(); }
  /// Position of `iv` among the leaf loops, or -1.
  int leaf_index(const IterVar& iv) const;
  /// The attributes of a loop (default ones when none were set).
  const IterVarAttr& attr(const IterVar& iv) const;
};

class ScheduleNode {
 public:
  std::vector<Tensor> outputs;
  std::vector<Stage> stages;  ///< producers before consumers

  /// The stage computing `t` (found by its current or original tensor); kiln::Error if none.
  Stage stage_of(const Tensor& t) const;
  bool has_stage(const Tensor& t) const;
  /// Stages that read `t`.
  std::vector<Stage> consumers_of(const Stage& s) const;
  /// Whether `reader` reads `producer`, directly or through other stages.
  bool reads_transitively(const Stage& reader, const Stage& producer) const;
  /// Replaces reads of tensors in `vmap` (by node) in every stage after `start`, making new
  /// tensors for the stages whose bodies change, and updating `vmap` with them.
  void replace_dataflow(std::unordered_map<const TensorNode*, Tensor>* vmap, size_t start = 0);
};

class Schedule {
 public:
  Schedule() = default;
  explicit Schedule(std::shared_ptr<ScheduleNode> n) : node_(std::move(n)) {}
  ScheduleNode* operator->() const { return node_.get(); }
  ScheduleNode* get() const { return node_.get(); }

  /// The stage of tensor t.
  Stage operator[](const Tensor& t) const { return node_->stage_of(t); }

  /// Adds a stage that copies `t` into `scope` and makes `readers` read the copy; returns it.
  Tensor cache_read(const Tensor& t, const std::string& scope, const std::vector<Tensor>& readers);
  /// Computes `t` into a new stage in `scope` and makes `t` a copy of it; returns the new stage's
  /// tensor. The stage of `t` gets new axes: use s[t].axis(i) afterwards.
  Tensor cache_write(const Tensor& t, const std::string& scope);

 private:
  std::shared_ptr<ScheduleNode> node_;
};

/// A schedule computing `outputs` (and everything they read) with the default loop nests.
Schedule create_schedule(const std::vector<Tensor>& outputs);

/// A thread axis for bind(): "blockIdx.x", "threadIdx.y", "vthread", "cthread".
IterVar thread_axis(const std::string& tag, Expr extent = Expr());

}  // namespace kiln::te
