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

const std::string kPragma = std::string(attr::kPragmaPrefix) + "prefetch";

/// How far `index` moves when `v` moves by one: a constant, or nullopt.
std::optional<int64_t> stride_along(const Expr& index, const Var& v) {
  if (!uses_var(index, v)) return 0;
  return as_const_int(simplify(substitute(index, {{v.get(), v + 1}}) - index));
}

/// The prefetches of one pragma'd loop, by the statement they go in front of the body of.
class Planner {
 public:
  Planner(const ForNode* loop, int64_t distance, const std::unordered_set<const VarNode*>& local)
      : loop_(loop), distance_(distance), local_(local) {}

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
    // A streamed vector operand: one element along the innermost vectorized loop around it.
    const ForNode* vector_loop = nullptr;
    for (const Scope& sc : scopes_) {
      if (sc.loop != nullptr && sc.loop->for_kind == ForKind::kVectorized) vector_loop = sc.loop;
    }
    if (vector_loop == nullptr || stride_along(index, vector_loop->loop_var) != 1) return;
    // The innermost loop along which the index moves by a line or more (or by an unknown step).
    const int64_t line = kPrefetchLineBytes / std::max(1, load->dtype.bytes());
    size_t at = scopes_.size();  // scopes_.size(): the pragma'd loop itself
    for (size_t i = 0; i < scopes_.size(); ++i) {
      if (scopes_[i].loop == nullptr) continue;
      const std::optional<int64_t> step = stride_along(index, scopes_[i].var);
      if (!step || std::abs(*step) >= line) at = i;
    }
    // The loops inside that point take their first iteration; a let inside it is not known there.
    VarMap vmap{{loop_->loop_var.get(), loop_->loop_var + Expr(distance_)}};
    const size_t inner = at == scopes_.size() ? 0 : at + 1;
    for (size_t i = inner; i < scopes_.size(); ++i) {
      if (scopes_[i].loop == nullptr) {
        if (uses_var(index, scopes_[i].var)) return;
        continue;
      }
      vmap[scopes_[i].var.get()] = scopes_[i].loop->min;
    }
    const Expr ahead = simplify(substitute(index, vmap));
    std::vector<Expr>& list = plans_[at == scopes_.size() ? loop_ : scopes_[at].loop];
    const Expr call = prefetch(load->buffer_var, ahead, load->dtype);
    for (const Expr& e : list) {
      if (expr_deep_equal(e, call)) return;
    }
    list.push_back(call);
  }

  const ForNode* loop_;
  int64_t distance_;
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
    if (op->key != kPragma) return IRMutator::mutate_(op, self);
    Stmt body = mutate(op->body);
    const auto* loop = body.as<ForNode>();
    const std::optional<int64_t> distance = as_const_int(op->value);
    if (loop == nullptr || !distance || *distance <= 0) return body;
    Planner planner(loop, *distance, local_);
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
    if (const auto* a = dynamic_cast<const AllocateNode*>(n)) local.insert(a->buffer_var.get());
    if (const auto* a = dynamic_cast<const AttrStmtNode*>(n)) any |= a->key == kPragma;
  });
  if (!any) return s;
  return Injector(std::move(local)).mutate(s);
}

}  // namespace kiln::pass
