// Loop vectorization: widening the body of a vectorized loop to N-lane vectors, or keeping the
// loop serial when the body cannot be widened faithfully.
#include "compiler/pass/vectorize_loop.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/ir/analysis.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

/// Thrown from deep inside the widening when the body cannot be vectorized; the loop handler
/// catches it and keeps the loop serial. An exception, because the failure can be found anywhere
/// in the tree and every partial result above it must be thrown away.
struct Unvectorizable {};

[[noreturn]] void give_up() { throw Unvectorizable{}; }

bool has_loads(const Expr& e) {
  bool found = false;
  post_order_visit(e,
                   [&](const Object* n) { found |= dynamic_cast<const LoadNode*>(n) != nullptr; });
  return found;
}

/// The loads that a select keeps only where its conditions hold, predicated by them, with the
/// clamps those conditions make redundant dropped from their indices:
///
///   select(j < 20, x[min(j, 19)], select(j < 52, y[min(max(j - 20, 0), 31)], 0))
///     -> select(j < 20, x[j] if j < 20, select(j < 52, y[j - 20] if !(j < 20) && j < 52, 0))
///
/// A clamp only keeps the lanes the select throws away in bounds (constant padding, a
/// concatenation's inputs), and makes the load a gather; predicated, the index needs none, and a
/// row-major index unravelled and flattened again (a Flatten inlined into the Concat of Faster
/// R-CNN's feature maps) simplifies back to a ramp. Only loads that lose a clamp are predicated.
class PredicateSelectedLoads : public IRMutator {
 public:
  /// `lane`: the vectorized loop's variable. Only selects whose condition depends on it count: a
  /// clamp of what does not vary across lanes costs no gather, and a uniform predicate would keep
  /// a load from its unpredicated forms (a pair of interleaved reads).
  explicit PredicateSelectedLoads(const Var& lane) : lane_(lane) {}
  using IRMutator::mutate;

 protected:
  Expr mutate_(const SelectNode* op, const Expr& self) override {
    if (!uses_var(op->condition, lane_)) return IRMutator::mutate_(op, self);
    Expr c = mutate(op->condition);
    const size_t mark = facts_.size();
    conditions_.push_back(op->condition);
    add_facts(op->condition, true);
    Expr t = mutate(op->true_value);
    facts_.resize(mark);
    conditions_.back() = !op->condition;
    add_facts(op->condition, false);
    Expr f = mutate(op->false_value);
    facts_.resize(mark);
    conditions_.pop_back();
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
      return self;
    }
    return select(c, t, f);
  }

  Expr mutate_(const LoadNode* op, const Expr& self) override {
    Expr index = mutate(op->index);
    if (!facts_.empty()) {
      Expr dropped = DropClamps(facts_).mutate(index);
      if (!dropped.same_as(index)) {
        Expr pred = conditions_[0];
        for (size_t i = 1; i < conditions_.size(); ++i) pred = pred && conditions_[i];
        if (op->predicate.defined()) pred = op->predicate && pred;
        return load(op->dtype, op->buffer_var, simplify(dropped), pred);
      }
    }
    return index.same_as(op->index) ? self : load(op->dtype, op->buffer_var, index, op->predicate);
  }

 private:
  /// a <= b, for integers.
  struct Fact {
    Expr a, b;
  };

  /// The facts `cond` being `truth` gives: its comparisons, through and (true), or (false), not.
  void add_facts(const Expr& cond, bool truth) {
    if (const auto* a = cond.as<AndNode>(); a && truth) {
      add_facts(a->a, true);
      add_facts(a->b, true);
    } else if (const auto* o = cond.as<OrNode>(); o && !truth) {
      add_facts(o->a, false);
      add_facts(o->b, false);
    } else if (const auto* n = cond.as<NotNode>()) {
      add_facts(n->a, !truth);
    } else if (const auto* lt = cond.as<LTNode>()) {
      add_less(lt->a, lt->b, truth, true);
    } else if (const auto* le = cond.as<LENode>()) {
      add_less(le->a, le->b, truth, false);
    } else if (const auto* gt = cond.as<GTNode>()) {
      add_less(gt->b, gt->a, truth, true);
    } else if (const auto* ge = cond.as<GENode>()) {
      add_less(ge->b, ge->a, truth, false);
    }
  }

  /// a < b (strict) or a <= b, known to be `truth`.
  void add_less(const Expr& a, const Expr& b, bool truth, bool strict) {
    if (!a.dtype().is_int() || !a.dtype().is_scalar() || a.dtype() != b.dtype()) return;
    const Expr one = make_const(a.dtype(), int64_t{1});
    if (truth) {
      facts_.push_back({a, strict ? b - one : b});
    } else {
      facts_.push_back({strict ? b : b + one, a});
    }
  }

  class DropClamps : public IRMutator {
   public:
    explicit DropClamps(const std::vector<Fact>& facts) : facts_(facts) {}
    using IRMutator::mutate;

   protected:
    Expr mutate_(const MinNode* op, const Expr& self) override {
      Expr a = mutate(op->a), b = mutate(op->b);
      if (below(a, b)) return a;
      if (below(b, a)) return b;
      return a.same_as(op->a) && b.same_as(op->b) ? self : min(a, b);
    }
    Expr mutate_(const MaxNode* op, const Expr& self) override {
      Expr a = mutate(op->a), b = mutate(op->b);
      if (below(b, a)) return a;
      if (below(a, b)) return b;
      return a.same_as(op->a) && b.same_as(op->b) ? self : max(a, b);
    }

   private:
    /// Whether x <= y follows from a fact p <= q: x - p <= y - q (then x <= y - q + p <= y).
    bool below(const Expr& x, const Expr& y) const {
      if (!x.dtype().is_int() || !x.dtype().is_scalar()) return false;
      for (const Fact& f : facts_) {
        if (f.a.dtype() == x.dtype() && can_prove((x - f.a) - (y - f.b) <= 0)) return true;
      }
      return false;
    }
    const std::vector<Fact>& facts_;
  };

  Var lane_;
  std::vector<Fact> facts_;
  std::vector<Expr> conditions_;  ///< of the selects around, as they hold there
};

/// Widens the body of one vectorized loop. Every mutate_ returns the very node it was given when
/// the node does not depend on the loop variable, so "changed" means "varies across lanes", and a
/// changed expression has `lanes_` lanes.
class Vectorizer : public IRMutator {
 public:
  Vectorizer(const Var& var, const Expr& min, int lanes)
      : var_(var.get()), lanes_(lanes), ramp_(ramp(cast(var.dtype(), min), 1, lanes)) {}

  using IRMutator::mutate;
  Expr mutate(const Expr& e) override {
    if (e.defined() && e.dtype().is_vector()) {
      // Already a vector: unchanged when it does not vary across lanes, and a vector of vectors
      // when it does.
      if (uses_var(e, [&](const VarNode* v) { return v == var_ || remap_.count(v); })) give_up();
      return e;
    }
    return IRMutator::mutate(e);
  }

 protected:
  // ---- expressions ----

  Expr mutate_(const VarNode* op, const Expr& self) override {
    if (op == var_) return ramp_;
    auto it = remap_.find(op);
    return it == remap_.end() ? self : it->second;
  }

  Expr mutate_(const AddNode* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    Expr ba, sa, bb, sb;
    if (linear_pair(a, b, &ba, &sa, &bb, &sb)) return make_ramp(ba + bb, sa + sb);
    return a + b;
  }

  Expr mutate_(const SubNode* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    Expr ba, sa, bb, sb;
    if (linear_pair(a, b, &ba, &sa, &bb, &sb)) return make_ramp(ba - bb, sa - sb);
    return a - b;
  }

  Expr mutate_(const MulNode* op, const Expr& self) override {
    Expr a = mutate(op->a), b = mutate(op->b);
    if (a.same_as(op->a) && b.same_as(op->b)) return self;
    Expr ba, sa, bb, sb;
    if (linear_pair(a, b, &ba, &sa, &bb, &sb)) {
      if (is_zero(sb)) return make_ramp(ba * bb, sa * bb);
      if (is_zero(sa)) return make_ramp(ba * bb, ba * sb);
    }
    return a * b;
  }

  Expr mutate_(const SelectNode* op, const Expr& self) override {
    Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
      return self;
    }
    return select(widen(c), widen(t), widen(f));
  }

  Expr mutate_(const LoadNode* op, const Expr& self) override {
    Expr index = mutate(op->index), pred = mutate(op->predicate);
    if (index.same_as(op->index) && pred.same_as(op->predicate)) return self;
    // Under a lane-dependent `if`, only the lanes where it holds may touch memory.
    if (mask_.defined()) pred = pred.defined() ? mask_ && widen(pred) : mask_;
    if (pred.defined()) pred = widen(pred);
    return load(op->dtype.with_lanes(lanes_), op->buffer_var, widen(index), pred);
  }

  Expr mutate_(const LetNode* op, const Expr& self) override {
    Expr value = mutate(op->value);
    if (value.same_as(op->value)) return IRMutator::mutate_(op, self);
    auto [var, bound] = bind(op->var, value);
    return let(var, bound, widen(mutate(op->body)));
  }

  Expr mutate_(const CallNode* op, const Expr& self) override {
    std::vector<Expr> args;
    if (!mutate_all(op->args, &args)) return self;
    // dot4_u8s8's operands are already vectors of four bytes a lane: it is not widened.
    if (op->call_kind != CallKind::kPureIntrinsic || op->name == kDot4U8S8) give_up();
    for (auto& a : args) {
      if (!a.dtype().is_handle()) a = widen(a);
    }
    return call(op->dtype.with_lanes(lanes_), op->name, std::move(args), op->call_kind);
  }

  Expr mutate_(const ProducerLoadNode* op, const Expr& self) override {
    Expr r = IRMutator::mutate_(op, self);
    if (!r.same_as(self)) give_up();  // not flattened yet: nothing to widen it to
    return r;
  }

  Expr mutate_(const ReduceNode* op, const Expr& self) override {
    Expr r = IRMutator::mutate_(op, self);
    if (!r.same_as(self)) give_up();
    return r;
  }

  // ---- statements ----

  Stmt mutate_(const StoreNode* op, const Stmt& self) override {
    Expr value = mutate(op->value), index = mutate(op->index), pred = mutate(op->predicate);
    // Every lane would write the same element: a reduction into it, or a race.
    if (index.same_as(op->index) || index.dtype().is_scalar()) give_up();
    if (mask_.defined()) pred = pred.defined() ? mask_ && widen(pred) : mask_;
    if (pred.defined()) pred = widen(pred);
    return store(op->buffer_var, widen(value), index, pred);
  }

  Stmt mutate_(const LetStmtNode* op, const Stmt& self) override {
    Expr value = mutate(op->value);
    if (value.same_as(op->value)) return IRMutator::mutate_(op, self);
    auto [var, bound] = bind(op->var, value);
    return let_stmt(var, bound, mutate(op->body));
  }

  Stmt mutate_(const IfThenElseNode* op, const Stmt& self) override {
    Expr cond = mutate(op->condition);
    if (cond.same_as(op->condition)) return IRMutator::mutate_(op, self);
    // Lane-dependent: run both branches, each with its stores masked. A condition that reads
    // memory is evaluated once, before the branches may change what it reads.
    cond = widen(cond);
    Var mask_var;
    Expr mask = cond;
    if (has_loads(cond)) mask = mask_var = Var("mask", cond.dtype());
    Expr outer = mask_;
    mask_ = outer.defined() ? outer && mask : mask;
    Stmt then_case = mutate(op->then_case);
    Stmt else_case;
    if (op->else_case.defined()) {
      mask_ = outer.defined() ? outer && !mask : !mask;
      else_case = mutate(op->else_case);
    }
    mask_ = outer;
    Stmt body = seq({then_case, else_case});
    return mask_var.defined() ? let_stmt(mask_var, cond, body) : body;
  }

  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Expr min = mutate(op->min), extent = mutate(op->extent);
    if (!min.same_as(op->min) || !extent.same_as(op->extent)) give_up();  // trip count per lane
    Stmt body = mutate(op->body);
    if (body.same_as(op->body)) return self;
    return for_loop(op->loop_var, min, extent, op->for_kind, body);
  }

  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    Expr value = mutate(op->value);
    if (!value.same_as(op->value)) give_up();
    return IRMutator::mutate_(op, self);
  }

  Stmt mutate_(const AssertStmtNode* op, const Stmt& self) override {
    if (mask_.defined()) give_up();
    Expr cond = mutate(op->condition);
    if (!cond.same_as(op->condition)) give_up();
    return IRMutator::mutate_(op, self);
  }

  Stmt mutate_(const EvaluateNode* op, const Stmt& self) override {
    // Effects would run once instead of once per lane.
    if (has_side_effects(op->value)) give_up();
    return IRMutator::mutate_(op, self);
  }

  Stmt mutate_(const AllocateNode*, const Stmt&) override { give_up(); }
  Stmt mutate_(const ProducerStoreNode*, const Stmt&) override { give_up(); }
  Stmt mutate_(const ProducerRealizeNode*, const Stmt&) override { give_up(); }

 private:
  /// e as a vector of lanes_ lanes (broadcast when scalar).
  Expr widen(const Expr& e) const {
    if (e.dtype().lanes() == lanes_) return e;
    if (e.dtype().is_vector()) give_up();  // a vector of another width: no lane-wise meaning
    return broadcast(e, lanes_);
  }

  /// Base and stride of e when it is a Ramp, a Broadcast or a scalar (stride 0).
  static bool as_linear(const Expr& e, Expr* base, Expr* stride) {
    if (auto r = e.as<RampNode>()) {
      *base = r->base;
      *stride = r->stride;
    } else if (auto b = e.as<BroadcastNode>()) {
      *base = b->value;
      *stride = make_zero(b->value.dtype());
    } else if (e.dtype().is_scalar()) {
      *base = e;
      *stride = make_zero(e.dtype());
    } else {
      return false;
    }
    return true;
  }

  /// Both operands as ramps of one integer element type, so that integer index arithmetic keeps
  /// ramps (which code generation turns into contiguous accesses) rather than vector arithmetic.
  static bool linear_pair(const Expr& a, const Expr& b, Expr* ba, Expr* sa, Expr* bb, Expr* sb) {
    DataType t = a.dtype().element_of();
    if (t != b.dtype().element_of() || !(t.is_int() || t.is_uint())) return false;
    return as_linear(a, ba, sa) && as_linear(b, bb, sb);
  }

  Expr make_ramp(const Expr& base, const Expr& stride) const {
    if (is_zero(stride)) return broadcast(base, lanes_);
    return ramp(base, stride, lanes_);
  }

  /// The binding that replaces `let var = value` when value varies across lanes: a ramp with a
  /// constant stride keeps its scalar base in `var` (uses become ramp(var, stride, N), still
  /// contiguous); anything else binds a new vector variable.
  std::pair<Var, Expr> bind(const Var& var, const Expr& value) {
    if (auto r = value.as<RampNode>();
        r && as_const_int(r->stride) && r->base.dtype() == var.dtype()) {
      remap_[var.get()] = ramp(var, r->stride, lanes_);
      return {var, r->base};
    }
    Var v(var.name(), value.dtype().with_lanes(lanes_));
    remap_[var.get()] = v;
    return {v, widen(value)};
  }

  const VarNode* var_;
  const int lanes_;
  const Expr ramp_;
  /// Let-bound variables whose value varies across lanes, and what their uses become.
  std::unordered_map<const VarNode*, Expr> remap_;
  /// Lanes enabled by the enclosing lane-dependent ifs; undefined outside them.
  Expr mask_;
};

class LoopVectorizer : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);  // inner loops first
    auto f = s.as<ForNode>();
    if (f->for_kind != ForKind::kVectorized) return s;
    auto extent = f->extent.as<IntImmNode>();
    if (extent != nullptr && extent->value > 1) {
      try {
        return Vectorizer(f->loop_var, f->min, static_cast<int>(extent->value))
            .mutate(PredicateSelectedLoads(f->loop_var).mutate(f->body));
      } catch (const Unvectorizable&) {
      }
    }
    return for_loop(f->loop_var, f->min, f->extent, ForKind::kSerial, f->body);
  }
};

}  // namespace

ir::Stmt vectorize_loops(const ir::Stmt& s) { return LoopVectorizer().mutate(s); }

}  // namespace kiln::pass
