// Software prefetches of a loop's streamed operands (inject_prefetch.h).
#include "compiler/pass/inject_prefetch.h"

#include <cstdlib>
#include <map>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

const std::string kStreams = std::string(attr::kPragmaPrefix) + kPrefetchStreamsPragma;
const std::string kBroadcasts = std::string(attr::kPragmaPrefix) + kPrefetchBroadcastsPragma;

/// The most prefetches one load asks for at one point (the lines of a register tile's rows).
constexpr int64_t kMaxPrefetchesPerPoint = 32;

/// How far `index` moves when `v` moves by one: a constant, or nullopt.
std::optional<int64_t> stride_along(const Expr& index, const Var& v) {
  if (!uses_var(index, v)) return 0;
  return as_const_int(simplify(substitute(index, {{v.get(), v + 1}}) - index));
}

/// The prefetches of one pragma'd loop, by the statement they go in front of the body of.
class Planner {
 public:
  Planner(const ForNode* loop, int64_t distance, bool broadcasts,
          const std::unordered_set<const VarNode*>& local)
      : loop_(loop), distance_(distance), broadcasts_(broadcasts), local_(local) {}

  /// Walks the loop's body; the scopes are the loops and lets inside it, outermost first.
  void walk(const Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case StmtKind::kFor:
        return enter({s.as<ForNode>(), s.as<ForNode>()->loop_var}, s.as<ForNode>()->body);
      case StmtKind::kLetStmt:
        return enter({nullptr, s.as<LetStmtNode>()->var}, s.as<LetStmtNode>()->body);
      case StmtKind::kSeq:
        for (const Stmt& st : s.as<SeqNode>()->seq) walk(st);
        return;
      case StmtKind::kIfThenElse:
        walk(s.as<IfThenElseNode>()->then_case);
        walk(s.as<IfThenElseNode>()->else_case);
        return;
      case StmtKind::kAttrStmt:
        walk(s.as<AttrStmtNode>()->body);
        return;
      case StmtKind::kAllocate:
        walk(s.as<AllocateNode>()->body);
        return;
      case StmtKind::kAssertStmt:
        walk(s.as<AssertStmtNode>()->body);
        return;
      case StmtKind::kStore: {
        const auto* st = s.as<StoreNode>();
        post_order_visit(st->value, [&](const Object* n) {
          if (const auto* load = dynamic_cast<const LoadNode*>(n)) plan(load);
        });
        return;
      }
      default:
        return;
    }
  }

  /// Where each prefetch goes: the loop whose body it starts (loop_ itself included).
  const std::map<const ForNode*, std::vector<Expr>>& plans() const { return plans_; }

 private:
  struct Scope {
    const ForNode* loop;  ///< null for a let
    Var var;
  };

  void enter(Scope scope, const Stmt& body) {
    scopes_.push_back(std::move(scope));
    walk(body);
    scopes_.pop_back();
  }

  void plan(const LoadNode* load) {
    if (local_.count(load->buffer_var.get()) != 0 || load->dtype.lanes() != 1) return;
    const Expr& index = load->index;
    if (!uses_var(index, loop_->loop_var) || index.dtype().lanes() != 1) return;
    // The operands asked for: streams (one element along the innermost vectorized loop around
    // them) or broadcasts (the same element for each lane).
    const ForNode* vector_loop = nullptr;
    for (const Scope& sc : scopes_) {
      if (sc.loop != nullptr && sc.loop->for_kind == ForKind::kVectorized) vector_loop = sc.loop;
    }
    if (vector_loop == nullptr ||
        stride_along(index, vector_loop->loop_var) != (broadcasts_ ? 0 : 1)) {
      return;
    }
    const int64_t line = kPrefetchLineBytes / std::max(1, load->dtype.bytes());
    std::vector<std::optional<int64_t>> steps(scopes_.size());
    for (size_t i = 0; i < scopes_.size(); ++i) {
      if (scopes_[i].loop != nullptr) steps[i] = stride_along(index, scopes_[i].var);
    }
    if (broadcasts_) {
      plan_before_first_short_step(load, steps, line);
    } else {
      plan_at_last_long_step(load, steps, line);
    }
  }

  /// A broadcast's prefetches go in front of the outermost loop along which its index moves by
  /// less than a line (it stays in the lines the loops outside it name), one for each line the
  /// loops inside name: those that move it by a line or more (an unrolled register tile's rows and
  /// columns) take each of their values, the others their first. None where those values are too
  /// many or not known.
  void plan_before_first_short_step(const LoadNode* load,
                                    const std::vector<std::optional<int64_t>>& steps,
                                    int64_t line) {
    size_t first = scopes_.size();
    for (size_t i = 0; i < scopes_.size() && first == scopes_.size(); ++i) {
      if (scopes_[i].loop != nullptr && steps[i] && std::abs(*steps[i]) < line) first = i;
    }
    // The loop it goes in: the innermost one outside `first` (or the pragma'd loop).
    size_t at = first;
    while (at > 0 && scopes_[at - 1].loop == nullptr) --at;
    std::vector<VarMap> values{{{loop_->loop_var.get(), loop_->loop_var + Expr(distance_)}}};
    for (size_t i = at; i < scopes_.size(); ++i) {
      const Scope& sc = scopes_[i];
      if (sc.loop == nullptr) {
        if (uses_var(load->index, sc.var)) return;
        continue;
      }
      if (steps[i] && std::abs(*steps[i]) < line) {
        for (VarMap& m : values) m[sc.var.get()] = sc.loop->min;
        continue;
      }
      const std::optional<int64_t> extent = as_const_int(sc.loop->extent);
      if (!extent || *extent * static_cast<int64_t>(values.size()) > kMaxPrefetchesPerPoint) return;
      std::vector<VarMap> more;
      for (const VarMap& m : values) {
        for (int64_t k = 0; k < *extent; ++k) {
          more.push_back(m);
          more.back()[sc.var.get()] = sc.loop->min + Expr(k);
        }
      }
      values = std::move(more);
    }
    for (const VarMap& m : values) add(at == 0 ? loop_ : scopes_[at - 1].loop, load, m);
  }

  /// A stream's prefetch goes in front of the body of the innermost loop along which its index
  /// moves by a line or more (or by an unknown step); the loops inside take their first value.
  void plan_at_last_long_step(const LoadNode* load,
                              const std::vector<std::optional<int64_t>>& steps, int64_t line) {
    size_t at = scopes_.size();  // scopes_.size(): the pragma'd loop itself
    for (size_t i = 0; i < scopes_.size(); ++i) {
      if (scopes_[i].loop == nullptr) continue;
      if (!steps[i] || std::abs(*steps[i]) >= line) at = i;
    }
    VarMap vmap{{loop_->loop_var.get(), loop_->loop_var + Expr(distance_)}};
    const size_t inner = at == scopes_.size() ? 0 : at + 1;
    for (size_t i = inner; i < scopes_.size(); ++i) {
      if (scopes_[i].loop == nullptr) {
        if (uses_var(load->index, scopes_[i].var)) return;
        continue;
      }
      vmap[scopes_[i].var.get()] = scopes_[i].loop->min;
    }
    add(at == scopes_.size() ? loop_ : scopes_[at].loop, load, vmap);
  }

  void add(const ForNode* where, const LoadNode* load, const VarMap& vmap) {
    std::vector<Expr>& list = plans_[where];
    const Expr call =
        prefetch(load->buffer_var, simplify(substitute(load->index, vmap)), load->dtype);
    for (const Expr& e : list) {
      if (expr_deep_equal(e, call)) return;
    }
    list.push_back(call);
  }

  const ForNode* loop_;
  int64_t distance_;
  bool broadcasts_;
  const std::unordered_set<const VarNode*>& local_;
  std::vector<Scope> scopes_;
  std::map<const ForNode*, std::vector<Expr>> plans_;
};

/// Puts each plan's prefetches at the start of its loop's body.
class Placer final : public IRMutator {
 public:
  explicit Placer(const std::map<const ForNode*, std::vector<Expr>>& plans) : plans_(plans) {}

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Stmt body = mutate(op->body);
    const auto it = plans_.find(op);
    if (it == plans_.end() && body.get() == op->body.get()) return self;
    if (it != plans_.end()) {
      std::vector<Stmt> seq;
      for (const Expr& e : it->second) seq.push_back(evaluate(e));
      seq.push_back(body);
      body = ir::seq(std::move(seq));
    }
    return for_loop(op->loop_var, op->min, op->extent, op->for_kind, body);
  }

 private:
  const std::map<const ForNode*, std::vector<Expr>>& plans_;
};

class Injector final : public IRMutator {
 public:
  explicit Injector(std::unordered_set<const VarNode*> local) : local_(std::move(local)) {}

 protected:
  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    if (op->key != kStreams && op->key != kBroadcasts) return IRMutator::mutate_(op, self);
    Stmt body = mutate(op->body);
    const auto* loop = body.as<ForNode>();
    const std::optional<int64_t> distance = as_const_int(op->value);
    if (loop == nullptr || !distance || *distance <= 0) return body;
    Planner planner(loop, *distance, op->key == kBroadcasts, local_);
    planner.walk(loop->body);
    return Placer(planner.plans()).mutate(body);
  }

 private:
  std::unordered_set<const VarNode*> local_;
};

}  // namespace

Stmt inject_prefetch(const Stmt& s) {
  std::unordered_set<const VarNode*> local;
  bool any = false;
  post_order_visit(s, [&](const Object* n) {
    // Registers and the stack are in cache; a global intermediate (a padded input) may not be.
    if (const auto* a = dynamic_cast<const AllocateNode*>(n); a != nullptr && a->scope != "global")
      local.insert(a->buffer_var.get());
    if (const auto* a = dynamic_cast<const AttrStmtNode*>(n))
      any |= a->key == kStreams || a->key == kBroadcasts;
  });
  if (!any) return s;
  return Injector(std::move(local)).mutate(s);
}

}  // namespace kiln::pass
