// Barrier insertion: a summary of each statement's accesses to the scope's buffers, then a scan
// of every sequence (and of each loop body once more, for the next iteration).
#include "compiler/pass/thread_sync.h"

#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

constexpr const char* kStorageSync = "kiln.storage_sync";

/// The accesses of a set of statements to the scope's buffers, as much of them as a conflict
/// needs: per buffer and kind (read or write), none, one single index that every such access
/// uses, or "many" (two different indices, or the whole buffer). Two accesses conflict unless
/// both are at one and the same index, so a kind with two different indices conflicts with every
/// access of the other kind whatever its index: the summary answers exactly as the list of
/// accesses would, in a size bounded by the buffers (unrolled kernels make thousands).
class Accesses {
 public:
  /// An undefined index is the whole buffer.
  void add(const VarNode* buffer, const Expr& index, bool write) {
    for (Entry& e : entries_) {
      if (e.buffer != buffer || e.write != write) continue;
      if (e.index.defined() && !(index.defined() && expr_deep_equal(e.index, index)))
        e.index = Expr();
      return;
    }
    entries_.push_back({buffer, write, index});
  }
  void add(const Accesses& other) {
    for (const Entry& e : other.entries_) add(e.buffer, e.index, e.write);
  }
  /// A read after a write or a write after a read of the same buffer, unless both are at the same
  /// single index (a thread reading back its own element).
  bool conflicts_with(const Accesses& after) const {
    for (const Entry& a : entries_) {
      for (const Entry& b : after.entries_) {
        if (a.buffer != b.buffer || a.write == b.write) continue;
        if (!a.index.defined() || !b.index.defined() || !expr_deep_equal(a.index, b.index))
          return true;
      }
    }
    return false;
  }
  /// The accesses with every index that uses `var` widened to the whole buffer.
  Accesses relaxed(const Var& var) const {
    Accesses r = *this;
    for (Entry& e : r.entries_) {
      if (e.index.defined() && uses_var(e.index, var)) e.index = Expr();
    }
    return r;
  }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    const VarNode* buffer;
    bool write;
    Expr index;  ///< the one index of every such access; undefined: many, or the whole buffer
  };
  std::vector<Entry> entries_;
};

/// The accesses of a statement that a barrier before it orders (`head`: those before its first
/// barrier) and those still pending after it (`tail`: after its last barrier). Without a barrier
/// inside, both are all of its accesses.
struct Summary {
  Accesses head, tail;
  bool has_sync = false;
};

void relax(Summary* s, const Var& var) {
  s->head = s->head.relaxed(var);
  s->tail = s->tail.relaxed(var);
}

/// The summary of a statement without barriers.
Summary flat(Accesses accesses) {
  Summary s;
  s.head = accesses;
  s.tail = std::move(accesses);
  return s;
}

class SyncPlanner {
 public:
  SyncPlanner(std::string scope, std::unordered_set<const VarNode*> buffers)
      : scope_(std::move(scope)), buffers_(std::move(buffers)) {}

  Stmt plan(const Stmt& s, Summary* out) {
    switch (s.kind()) {
      case StmtKind::kSeq:
        return plan_seq(s, nullptr, out);
      case StmtKind::kFor: {
        auto op = s.as<ForNode>();
        Stmt body = plan_seq(op->body, &op->loop_var, out);
        relax(out, op->loop_var);
        return body.same_as(op->body)
                   ? s
                   : for_loop(op->loop_var, op->min, op->extent, op->for_kind, body);
      }
      case StmtKind::kAttrStmt: {
        auto op = s.as<AttrStmtNode>();
        bool thread = op->key == attr::kThreadExtent;
        thread_env_depth_ += thread ? 1 : 0;
        Stmt body = plan(op->body, out);
        thread_env_depth_ -= thread ? 1 : 0;
        return body.same_as(op->body) ? s : attr_stmt(op->node, op->key, op->value, body);
      }
      case StmtKind::kAllocate: {
        auto op = s.as<AllocateNode>();
        Stmt body = plan(op->body, out);
        return body.same_as(op->body)
                   ? s
                   : allocate(op->buffer_var, op->dtype, op->extents, op->scope, body);
      }
      case StmtKind::kLetStmt: {
        auto op = s.as<LetStmtNode>();
        Summary body_sum;
        Stmt body = plan(op->body, &body_sum);
        *out = prefixed(reads(op->value), std::move(body_sum));
        relax(out, op->var);
        return body.same_as(op->body) ? s : let_stmt(op->var, op->value, body);
      }
      case StmtKind::kAssertStmt: {
        auto op = s.as<AssertStmtNode>();
        Summary body_sum;
        Stmt body = plan(op->body, &body_sum);
        *out = prefixed(reads(op->condition), std::move(body_sum));
        return body.same_as(op->body) ? s : assert_stmt(op->condition, op->message, body);
      }
      case StmtKind::kIfThenElse: {
        auto op = s.as<IfThenElseNode>();
        Summary then_sum, else_sum;
        Stmt then_case = plan_seq(op->then_case, nullptr, &then_sum);
        Stmt else_case =
            op->else_case.defined() ? plan_seq(op->else_case, nullptr, &else_sum) : Stmt();
        out->has_sync = then_sum.has_sync || else_sum.has_sync;
        out->head = reads(op->condition);
        out->head.add(then_sum.head);
        out->head.add(else_sum.head);
        out->tail = then_sum.tail;
        out->tail.add(else_sum.tail);
        if (!out->has_sync) out->tail = out->head;
        if (then_case.same_as(op->then_case) && else_case.same_as(op->else_case)) return s;
        return if_then_else(op->condition, then_case, else_case);
      }
      case StmtKind::kStore: {
        auto op = s.as<StoreNode>();
        Accesses acc = reads(op->value);
        acc.add(reads(op->index));
        if (op->predicate.defined()) acc.add(reads(op->predicate));
        if (buffers_.count(op->buffer_var.get())) acc.add(op->buffer_var.get(), op->index, true);
        *out = flat(std::move(acc));
        return s;
      }
      case StmtKind::kEvaluate: {
        auto call = s.as<EvaluateNode>()->value.as<CallNode>();
        if (call && call->name == kStorageSync) {
          out->has_sync = true;
          return s;
        }
        *out = flat(reads(s.as<EvaluateNode>()->value));
        return s;
      }
      default:
        *out = Summary();
        return s;
    }
  }

 private:
  /// The statements of a body, as a sequence.
  static std::vector<Stmt> elements(const Stmt& body) {
    if (auto sq = body.as<SeqNode>()) return sq->seq;
    return {body};
  }

  /// `body` preceded by reads that no barrier can separate from it (a let's value, a condition).
  static Summary prefixed(Accesses first, Summary body) {
    Summary s;
    s.has_sync = body.has_sync;
    s.head = std::move(first);
    s.head.add(body.head);
    s.tail = body.has_sync ? std::move(body.tail) : s.head;
    return s;
  }

  Accesses reads(const Expr& e) const {
    Accesses acc;
    post_order_visit(e, [&](const Object* n) {
      auto x = static_cast<const ExprNode*>(n);
      if (x->kind != ExprKind::kLoad) return;
      auto l = static_cast<const LoadNode*>(x);
      if (buffers_.count(l->buffer_var.get())) acc.add(l->buffer_var.get(), l->index, false);
    });
    return acc;
  }

  /// Plans a body as a sequence (a loop body when `loop_var` is set): its statements planned,
  /// barriers inserted between them where accesses conflict, and its summary.
  Stmt plan_seq(const Stmt& body, const Var* loop_var, Summary* out) {
    const std::vector<Stmt> stmts = elements(body);
    const size_t n = stmts.size();
    std::vector<Stmt> planned(n);
    std::vector<Summary> sums(n);
    bool changed = false;
    for (size_t i = 0; i < n; ++i) {
      planned[i] = plan(stmts[i], &sums[i]);
      changed |= !planned[i].same_as(stmts[i]);
    }

    std::vector<bool> sync_before(n, false);
    if (thread_env_depth_ > 0) {
      Accesses pending;
      for (size_t i = 0; i < n; ++i) {
        if (pending.conflicts_with(sums[i].head)) {
          sync_before[i] = true;
          pending.clear();
        }
        if (sums[i].has_sync) pending.clear();
        pending.add(sums[i].tail);
      }
      if (loop_var != nullptr) {
        // What this iteration leaves pending against the start of the next iteration.
        const Accesses carried = pending.relaxed(*loop_var);
        for (size_t i = 0; i < n && !sync_before[i]; ++i) {
          if (carried.conflicts_with(sums[i].head.relaxed(*loop_var))) {
            sync_before[i] = true;
            break;
          }
          if (sums[i].has_sync) break;
        }
      }
    }

    // The sequence's own summary, and the statements with their barriers.
    std::vector<Stmt> result;
    Accesses since_sync;
    *out = Summary();
    auto sync_here = [&](const Accesses& before_sync) {
      if (!out->has_sync) out->head = before_sync;
      out->has_sync = true;
    };
    for (size_t i = 0; i < n; ++i) {
      if (sync_before[i]) {
        result.push_back(storage_sync(scope_));
        sync_here(since_sync);
        since_sync.clear();
        changed = true;
      }
      if (sums[i].has_sync) {
        Accesses before = since_sync;
        before.add(sums[i].head);
        sync_here(before);
        since_sync = sums[i].tail;
      } else {
        since_sync.add(sums[i].head);
      }
      result.push_back(planned[i]);
    }
    if (!out->has_sync) out->head = since_sync;
    out->tail = std::move(since_sync);
    if (!changed) return body;
    return seq(std::move(result));
  }

  std::string scope_;
  std::unordered_set<const VarNode*> buffers_;
  int thread_env_depth_ = 0;
};

}  // namespace

ir::Stmt storage_sync(const std::string& scope) {
  return evaluate(call(kInt32, kStorageSync, {make_string(scope)}, CallKind::kIntrinsic));
}

bool is_storage_sync(const ir::Stmt& s) {
  auto e = s.as<ir::EvaluateNode>();
  auto c = e ? e->value.as<ir::CallNode>() : nullptr;
  return c != nullptr && c->name == kStorageSync;
}

ir::Stmt thread_sync(const ir::Stmt& s, const std::string& scope) {
  std::unordered_set<const ir::VarNode*> buffers;
  ir::post_order_visit(s, [&](const ir::Object* n) {
    if (auto a = dynamic_cast<const ir::AllocateNode*>(n); a && a->scope == scope)
      buffers.insert(a->buffer_var.get());
  });
  if (buffers.empty()) return s;
  Summary summary;
  return SyncPlanner(scope, std::move(buffers)).plan(s, &summary);
}

}  // namespace kiln::pass
