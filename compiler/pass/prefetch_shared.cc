#include "compiler/pass/prefetch_shared.h"

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

/// A fetch nest: thread attributes and loops, each with one body, down to one store into a shared
/// buffer of a value that reads only buffers the kernel did not allocate (global memory).
struct Fetch {
  std::vector<Stmt> path;  ///< the attributes and loops, outermost first
  const StoreNode* store = nullptr;
  std::vector<const ForNode*> loops;  ///< the loops among them: the thread's own iterations
  int64_t elements = 1;               ///< their trip count
};

bool reads_only_global(const Expr& e, const std::unordered_set<const VarNode*>& allocated) {
  bool ok = true;
  post_order_visit(e, [&](const Object* n) {
    if (auto l = dynamic_cast<const LoadNode*>(n); l && allocated.count(l->buffer_var.get()))
      ok = false;
  });
  return ok;
}

class Prefetcher {
 public:
  Prefetcher(const ForNode* loop, std::unordered_set<const VarNode*> shared,
             std::unordered_set<const VarNode*> allocated)
      : loop_(loop), shared_(std::move(shared)), allocated_(std::move(allocated)) {}

  /// The loop rewritten, inside the allocations of its registers and after its prologue; the
  /// loop itself when it holds no fetch.
  Stmt run() {
    Stmt body = rewrite(loop_->body);
    if (prologue_.empty()) return Stmt();
    std::vector<Stmt> seq = prologue_;
    seq.push_back(for_loop(loop_->loop_var, loop_->min, loop_->extent, loop_->for_kind, body));
    Stmt out = ir::seq(seq);
    for (auto it = registers_.rbegin(); it != registers_.rend(); ++it) {
      out = allocate(it->first, it->second.first, {make_const(kInt32, it->second.second)}, "local",
                     out);
    }
    return out;
  }

 private:
  std::optional<Fetch> as_fetch(const Stmt& s) {
    Fetch f;
    Stmt cur = s;
    while (true) {
      if (auto a = cur.as<AttrStmtNode>()) {
        if (a->key != attr::kThreadExtent) return std::nullopt;
        f.path.push_back(cur);
        cur = a->body;
      } else if (auto l = cur.as<ForNode>()) {
        auto n = as_const_int(l->extent);
        if (!n || l->for_kind == ForKind::kParallel) return std::nullopt;
        f.path.push_back(cur);
        f.loops.push_back(l);
        f.elements *= *n;
        cur = l->body;
      } else if (auto st = cur.as<StoreNode>()) {
        if (!shared_.count(st->buffer_var.get()) || !reads_only_global(st->value, allocated_) ||
            !reads_only_global(st->index, allocated_) || st->value.dtype().lanes() != 1)
          return std::nullopt;
        f.store = st;
        return f;
      } else {
        return std::nullopt;
      }
    }
  }

  /// The nest of `f` around `leaf`, its loop variables renamed when `fresh`.
  Stmt rebuild(const Fetch& f, Stmt leaf, bool fresh) {
    VarMap rename;
    if (fresh) {
      for (const ForNode* l : f.loops)
        rename[l->loop_var.get()] = l->loop_var.copy_with_name(l->loop_var.name());
      leaf = substitute(leaf, rename);
    }
    for (auto it = f.path.rbegin(); it != f.path.rend(); ++it) {
      if (auto a = it->as<AttrStmtNode>()) {
        leaf = attr_stmt(a->node, a->key, a->value, leaf);
      } else {
        auto l = it->as<ForNode>();
        auto r = rename.find(l->loop_var.get());
        const Var v = r == rename.end() ? l->loop_var : Var(r->second.node());
        leaf = for_loop(v, l->min, l->extent, l->for_kind, leaf);
      }
    }
    return leaf;
  }

  Stmt replace(const Fetch& f) {
    // r: the position of this iteration among the thread's, innermost loop fastest.
    Expr r = make_zero(kInt32);
    for (const ForNode* l : f.loops) r = r * l->extent + (Expr(l->loop_var) - l->min);
    const DataType t = f.store->value.dtype();
    Var reg(f.store->buffer_var.name() + ".prefetch", DataType::Handle());
    registers_.push_back({reg, {t, f.elements}});
    const Var& ko = loop_->loop_var;
    const Expr last = loop_->min + loop_->extent - make_const(kInt32, int64_t{1});
    Stmt load = store(reg, f.store->value, r);
    prologue_.push_back(substitute(rebuild(f, load, true), VarMap{{ko.get(), loop_->min}}));
    Stmt next = substitute(rebuild(f, load, true),
                           VarMap{{ko.get(), Expr(ko) + make_const(kInt32, int64_t{1})}});
    Stmt to_shared = rebuild(
        f, store(f.store->buffer_var, ir::load(t, reg, r), f.store->index, f.store->predicate),
        false);
    return seq({to_shared, if_then_else(Expr(ko) < last, next)});
  }

  Stmt rewrite(const Stmt& s) {
    if (auto q = s.as<SeqNode>()) {
      std::vector<Stmt> out;
      for (const Stmt& c : q->seq) out.push_back(rewrite(c));
      return seq(out);
    }
    if (auto a = s.as<AllocateNode>()) {
      return allocate(a->buffer_var, a->dtype, a->extents, a->scope, rewrite(a->body));
    }
    if (auto f = as_fetch(s)) return replace(*f);
    return s;
  }

  const ForNode* loop_;
  std::unordered_set<const VarNode*> shared_, allocated_;
  std::vector<Stmt> prologue_;
  std::vector<std::pair<Var, std::pair<DataType, int64_t>>> registers_;
};

class Pass : public IRMutator {
 public:
  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    if (op->key != std::string(attr::kPragmaPrefix) + kPrefetchPragma)
      return IRMutator::mutate_(op, self);
    Stmt body = mutate(op->body);
    auto loop = body.as<ForNode>();
    auto n = loop ? as_const_int(loop->extent) : std::nullopt;
    if (!loop || loop->for_kind != ForKind::kSerial || !n || *n < 2) return body;
    std::unordered_set<const VarNode*> shared, allocated;
    post_order_visit(loop->body, [&](const Object* o) {
      if (auto a = dynamic_cast<const AllocateNode*>(o)) {
        allocated.insert(a->buffer_var.get());
        if (a->scope == "shared") shared.insert(a->buffer_var.get());
      }
    });
    for (const VarNode* v : outer_allocated_) allocated.insert(v);
    Stmt out = Prefetcher(loop, shared, allocated).run();
    return out.defined() ? out : body;
  }

  Stmt mutate_(const AllocateNode* op, const Stmt& self) override {
    outer_allocated_.push_back(op->buffer_var.get());
    Stmt out = IRMutator::mutate_(op, self);
    outer_allocated_.pop_back();
    return out;
  }

 private:
  std::vector<const VarNode*> outer_allocated_;
};

}  // namespace

Stmt prefetch_shared(const Stmt& s) { return Pass().mutate(s); }

}  // namespace kiln::pass
