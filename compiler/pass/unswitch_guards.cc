// Unswitching of guarded accumulations: each innermost loop of guarded updates becomes one copy
// per combination of its loop-invariant guards.
#include "compiler/pass/unswitch_guards.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "compiler/ir/analysis.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

/// `acc && c`, or `c` when `acc` is undefined (an empty conjunction).
Expr conjoin(const Expr& acc, const Expr& c) { return acc.defined() ? acc && c : c; }

bool is_float_zero(const Expr& e) {
  auto f = as_const_float(e);
  return e.dtype().is_float() && f && *f == 0.0;
}

/// `e`, or the value it broadcasts: a factor's guard or zero is seen through a broadcast.
const Expr& through_broadcast(const Expr& e) {
  auto b = e.as<BroadcastNode>();
  return b ? b->value : e;
}

/// The select(c, v, 0) that guards `factor`; null when it has none.
const SelectNode* zero_select(const Expr& factor) {
  auto s = through_broadcast(factor).as<SelectNode>();
  return s && is_float_zero(s->false_value) ? s : nullptr;
}

/// An update b[i] = b[i] + select(c, v, 0) * g (in any order) of a loop's body.
struct GuardedUpdate {
  const StoreNode* store = nullptr;
  const SelectNode* select = nullptr;
  std::vector<Expr> variant;  ///< conjuncts of c that use the loop variable: they stay
  std::vector<int> guards;    ///< the loop-invariant conjuncts, as indices of the loop's guards
  bool never = false;         ///< a conjunct is false or the factor zero: it adds nothing
};

/// The factor f of the update `st` (b[i] = b[i] + f * g, in any order) that is guarded (a zero
/// select) or zero, with `zero` set for the latter; null when `st` is no such update.
const SelectNode* guarded_term(const StoreNode* st, bool* zero) {
  auto add = st->value.as<AddNode>();
  if (add == nullptr || st->predicate.defined()) return nullptr;
  auto is_self = [&](const Expr& e) {
    auto l = e.as<LoadNode>();
    return l && l->buffer_var.same_as(st->buffer_var) && !l->predicate.defined() &&
           expr_deep_equal(l->index, st->index);
  };
  const Expr* term = is_self(add->a) ? &add->b : is_self(add->b) ? &add->a : nullptr;
  if (term == nullptr) return nullptr;
  auto mul = term->as<MulNode>();
  if (mul == nullptr) return nullptr;
  // A zero factor: a tap whose guard simplify folded to false.
  *zero = is_float_zero(through_broadcast(mul->a)) || is_float_zero(through_broadcast(mul->b));
  if (auto s = zero_select(mul->a)) return s;
  return zero_select(mul->b);
}

/// Replaces one select node (by identity) with its true value, or with a select on `condition`.
class SelectRewriter : public IRMutator {
 public:
  SelectRewriter(const SelectNode* target, Expr condition)
      : target_(target), condition_(std::move(condition)) {}
  using IRMutator::mutate;

 protected:
  Expr mutate_(const SelectNode* op, const Expr& self) override {
    if (op != target_) return IRMutator::mutate_(op, self);
    return condition_.defined() ? select(condition_, op->true_value, op->false_value)
                                : op->true_value;
  }

 private:
  const SelectNode* target_;
  Expr condition_;
};

class GuardUnswitcher : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto f = s.as<ForNode>();
    if (f->for_kind != ForKind::kSerial) return s;
    std::vector<Stmt> body;
    if (auto sq = f->body.as<SeqNode>()) {
      body = sq->seq;
    } else {
      body = {f->body};
    }
    for (const Stmt& b : body) {
      if (b.as<StoreNode>() == nullptr) return s;  // only straight-line updates
    }

    // Each guarded update's conjuncts: the loop-invariant ones become the loop's guards.
    std::vector<Expr> guards;
    std::vector<std::optional<GuardedUpdate>> updates(body.size());
    bool any = false;
    for (size_t j = 0; j < body.size(); ++j) {
      const StoreNode* st = body[j].as<StoreNode>();
      bool zero = false;
      const SelectNode* sel = guarded_term(st, &zero);
      if (zero) {  // b[i] + 0 * g: a tap whose guard simplify already decided
        updates[j] = GuardedUpdate{st, nullptr, {}, {}, true};
        any = true;
        continue;
      }
      if (sel == nullptr) continue;
      GuardedUpdate u{st, sel, {}, {}, false};
      std::vector<Expr> conj;
      split_conjuncts(sel->condition, &conj);
      for (const Expr& c : conj) {
        if (auto v = as_const_int(c)) {
          if (*v == 0) u.never = true;
          continue;  // a constant true conjunct says nothing
        }
        if (c.dtype().lanes() != 1 || uses_var(c, f->loop_var)) {
          u.variant.push_back(c);
          continue;
        }
        auto it = std::find_if(guards.begin(), guards.end(),
                               [&](const Expr& g) { return expr_deep_equal(g, c); });
        u.guards.push_back(static_cast<int>(it - guards.begin()));
        if (it == guards.end()) guards.push_back(c);
      }
      any = any || u.never || !u.guards.empty();
      updates[j] = std::move(u);
    }
    if (!any) return s;

    // Guards shared by every update (all of them guarded) become one if around the loop; of the
    // others, the ones guarding the most updates are unswitched.
    std::vector<int> uses(guards.size(), 0);
    const bool all_guarded =
        std::all_of(updates.begin(), updates.end(), [](const auto& u) { return u.has_value(); });
    int live = 0;  // updates that can add something
    for (const auto& u : updates) {
      if (!u || u->never) continue;
      ++live;
      for (int g : u->guards) ++uses[g];
    }
    std::vector<int> common, others;
    for (int g = 0; g < static_cast<int>(guards.size()); ++g) {
      (all_guarded && uses[g] == live ? common : others).push_back(g);
    }
    std::stable_sort(others.begin(), others.end(), [&](int a, int b) { return uses[a] > uses[b]; });
    if (others.size() > static_cast<size_t>(kMaxUnswitched)) others.resize(kMaxUnswitched);

    // state[g]: 1 known true, 0 known false, -1 unknown (stays in the select).
    std::vector<int> state(guards.size(), -1);
    for (int g : common) state[g] = 1;
    auto version = [&]() -> Stmt {
      std::vector<Stmt> kept;
      for (size_t j = 0; j < body.size(); ++j) {
        const auto& u = updates[j];
        if (!u) {
          kept.push_back(body[j]);
          continue;
        }
        if (u->never) continue;
        bool dead = false;
        Expr cond;
        for (const Expr& c : u->variant) cond = conjoin(cond, c);
        for (int g : u->guards) {
          if (state[g] == 0) dead = true;
          if (state[g] == -1) cond = conjoin(cond, guards[g]);
        }
        if (dead) continue;
        kept.push_back(SelectRewriter(u->select, cond).mutate(body[j]));
      }
      if (kept.empty()) return no_op();
      return for_loop(f->loop_var, f->min, f->extent, f->for_kind,
                      kept.size() == 1 ? kept[0] : seq(std::move(kept)));
    };
    std::function<Stmt(size_t)> tree = [&](size_t i) -> Stmt {
      if (i == others.size()) return version();
      const int g = others[i];
      state[g] = 1;
      Stmt then_case = tree(i + 1);
      state[g] = 0;
      Stmt else_case = tree(i + 1);
      state[g] = -1;
      if (is_no_op(then_case) && is_no_op(else_case)) return no_op();
      return if_then_else(guards[g], then_case, is_no_op(else_case) ? Stmt() : else_case);
    };
    Stmt out = tree(0);
    if (common.empty() || is_no_op(out)) return out;
    Expr cond;
    for (int g : common) cond = conjoin(cond, guards[g]);
    return if_then_else(cond, out);
  }
};

}  // namespace

ir::Stmt unswitch_guards(const ir::Stmt& s) { return GuardUnswitcher().mutate(s); }

}  // namespace kiln::pass
