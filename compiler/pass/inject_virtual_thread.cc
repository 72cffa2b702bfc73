// Virtual threads as unrolled loops pushed inward, with per-thread buffers replicated.
#include "compiler/pass/inject_virtual_thread.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

using VarSet = std::unordered_set<const VarNode*>;

/// The variables and buffers whose value depends on `vt` in `body`: vt itself, lets and loop
/// variables computed from them, and buffers stored to with an index or a value that uses them.
VarSet touched_by(const Stmt& body, const Var& vt) {
  VarSet touched{vt.get()};
  auto uses_touched = [&](const Expr& e) {
    return e.defined() && uses_var(e, [&](const VarNode* v) { return touched.count(v) > 0; });
  };
  for (bool grew = true; grew;) {
    grew = false;
    post_order_visit(body, [&](const Object* n) {
      const VarNode* defined = nullptr;
      if (auto st = dynamic_cast<const StoreNode*>(n)) {
        if (uses_touched(st->value) || uses_touched(st->index)) defined = st->buffer_var.get();
      } else if (auto let = dynamic_cast<const LetStmtNode*>(n)) {
        if (uses_touched(let->value)) defined = let->var.get();
      } else if (auto loop = dynamic_cast<const ForNode*>(n)) {
        if (uses_touched(loop->min) || uses_touched(loop->extent)) defined = loop->loop_var.get();
      }
      if (defined != nullptr) grew |= touched.insert(defined).second;
    });
  }
  return touched;
}

/// Accesses of replicated buffers moved to virtual thread `vt`'s part.
class ReplicaIndexer : public IRMutator {
 public:
  ReplicaIndexer(const std::unordered_map<const VarNode*, Expr>& part_size, Expr vt)
      : part_size_(part_size), vt_(std::move(vt)) {}
  using IRMutator::mutate;

 protected:
  Expr mutate_(const LoadNode* op, const Expr& self) override {
    Expr e = IRMutator::mutate_(op, self);
    auto l = e.as<LoadNode>();
    auto it = part_size_.find(l->buffer_var.get());
    if (it == part_size_.end()) return e;
    return load(l->dtype, l->buffer_var, offset(l->index, it->second), l->predicate);
  }
  Stmt mutate_(const StoreNode* op, const Stmt& self) override {
    Stmt s = IRMutator::mutate_(op, self);
    auto st = s.as<StoreNode>();
    auto it = part_size_.find(st->buffer_var.get());
    if (it == part_size_.end()) return s;
    return store(st->buffer_var, st->value, offset(st->index, it->second), st->predicate);
  }

 private:
  Expr offset(const Expr& index, const Expr& size) const {
    Expr base = vt_ * size;
    return index + (index.dtype().is_vector() ? broadcast(base, index.dtype().lanes()) : base);
  }

  const std::unordered_map<const VarNode*, Expr>& part_size_;
  Expr vt_;
};

/// Lowers one virtual thread over `body`.
class Injector {
 public:
  Injector(const Var& vt, int64_t extent, const Stmt& body, bool share)
      : vt_(vt), extent_(extent), touched_(touched_by(body, vt)), share_(share) {}

  Stmt place(const Stmt& s) {
    if (share_ ? !depends(s) : !has_pragma(s)) return share_ ? s : wrap(s);
    switch (s.kind()) {
      case StmtKind::kSeq: {
        std::vector<Stmt> out;
        const std::vector<Stmt>& kids = s.as<SeqNode>()->seq;
        for (size_t i = 0; i < kids.size();) {
          // cthread: consecutive regions of one pragma (an input's and a weight's DMA) are one
          // block, so that a thread's loads stay together in the load queue.
          size_t j = i + 1;
          if (!share_ && pragma_key(kids[i]) != nullptr) {
            while (j < kids.size() && pragma_key(kids[j]) != nullptr &&
                   *pragma_key(kids[j]) == *pragma_key(kids[i])) {
              ++j;
            }
          }
          if (j > i + 1) {
            out.push_back(wrap(seq(std::vector<Stmt>(kids.begin() + static_cast<long>(i),
                                                     kids.begin() + static_cast<long>(j)))));
          } else {
            out.push_back(place(kids[i]));
          }
          i = j;
        }
        return seq(std::move(out));
      }
      case StmtKind::kFor: {
        auto op = s.as<ForNode>();
        if (depends(op->min) || depends(op->extent)) break;
        return for_loop(op->loop_var, op->min, op->extent, op->for_kind, place(op->body));
      }
      case StmtKind::kAttrStmt: {
        auto op = s.as<AttrStmtNode>();
        if (depends(op->value) || (!share_ && op->key.rfind(attr::kPragmaPrefix, 0) == 0)) break;
        return attr_stmt(op->node, op->key, op->value, place(op->body));
      }
      case StmtKind::kIfThenElse: {
        auto op = s.as<IfThenElseNode>();
        if (depends(op->condition)) break;
        return if_then_else(op->condition, place(op->then_case),
                            op->else_case.defined() ? place(op->else_case) : Stmt());
      }
      case StmtKind::kLetStmt: {
        auto op = s.as<LetStmtNode>();
        if (depends(op->value)) break;
        return let_stmt(op->var, op->value, place(op->body));
      }
      case StmtKind::kAllocate: {
        auto op = s.as<AllocateNode>();
        if (std::any_of(op->extents.begin(), op->extents.end(),
                        [&](const Expr& e) { return depends(e); }))
          break;
        std::vector<Expr> extents = op->extents;
        if ((!share_ || touched_.count(op->buffer_var.get())) && op->scope.rfind("local", 0) == 0) {
          Expr size = make_const(kInt32, int64_t{1});
          for (const Expr& e : op->extents) size = size * e;
          part_size_[op->buffer_var.get()] = size;
          extents = {size * make_const(size.dtype(), extent_)};
        }
        return allocate(op->buffer_var, op->dtype, extents, op->scope, place(op->body));
      }
      default:
        break;
    }
    return wrap(s);
  }

 private:
  bool depends(const Expr& e) const {
    return e.defined() && uses_var(e, [&](const VarNode* v) { return touched_.count(v) > 0; });
  }
  bool depends(const Stmt& s) const {
    return uses_var(s, [&](const VarNode* v) { return touched_.count(v) > 0; });
  }

  /// The key of a pragma region, or null.
  static const std::string* pragma_key(const Stmt& s) {
    auto a = s.as<AttrStmtNode>();
    return a && a->key.rfind(attr::kPragmaPrefix, 0) == 0 ? &a->key : nullptr;
  }

  /// Whether `s` holds a pragma region (a co-processor's copy or ALU block).
  static bool has_pragma(const Stmt& s) {
    bool found = false;
    post_order_visit(s, [&](const Object* n) {
      if (auto a = dynamic_cast<const AttrStmtNode*>(n)) {
        found |= a->key.rfind(attr::kPragmaPrefix, 0) == 0;
      }
    });
    return found;
  }

  /// `s` run by every virtual thread in turn.
  Stmt wrap(const Stmt& s) {
    Var v = vt_.copy_with_name(vt_.name());
    Stmt body = substitute(s, VarMap{{vt_.get(), v}});
    body = ReplicaIndexer(part_size_, v).mutate(body);
    return for_loop(v, 0, make_const(kInt32, extent_), ForKind::kUnrolled, body);
  }

  Var vt_;
  int64_t extent_;
  VarSet touched_;
  bool share_;  ///< false for cthread: nothing is shared between the virtual threads
  std::unordered_map<const VarNode*, Expr> part_size_;  ///< replicated buffers: one part's size
};

/// Allocations inside a sequence moved to its front (their variables are unique), so that the
/// statements of one loop body are siblings: `a; allocate b { c; d }` becomes
/// `allocate b { a; c; d }`. For cthread, whose blocks are grouped among siblings.
Stmt hoist_allocations(const Stmt& s) {
  switch (s.kind()) {
    case StmtKind::kSeq: {
      std::vector<Stmt> allocs;  // the Allocate statements, outermost first
      std::vector<Stmt> kids;
      std::function<void(Stmt)> add = [&](Stmt k) {
        k = hoist_allocations(k);
        while (auto a = k.as<AllocateNode>()) {
          allocs.push_back(k);
          k = a->body;
        }
        if (auto q = k.as<SeqNode>()) {
          for (const Stmt& x : q->seq) add(x);
        } else {
          kids.push_back(k);
        }
      };
      for (const Stmt& k : s.as<SeqNode>()->seq) add(k);
      Stmt body = seq(std::move(kids));
      for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) {
        auto a = it->as<AllocateNode>();
        body = allocate(a->buffer_var, a->dtype, a->extents, a->scope, body);
      }
      return body;
    }
    case StmtKind::kAllocate: {
      auto a = s.as<AllocateNode>();
      return allocate(a->buffer_var, a->dtype, a->extents, a->scope, hoist_allocations(a->body));
    }
    case StmtKind::kFor: {
      auto f = s.as<ForNode>();
      return for_loop(f->loop_var, f->min, f->extent, f->for_kind, hoist_allocations(f->body));
    }
    case StmtKind::kAttrStmt: {
      auto a = s.as<AttrStmtNode>();
      if (a->key.rfind(attr::kPragmaPrefix, 0) == 0) return s;
      return attr_stmt(a->node, a->key, a->value, hoist_allocations(a->body));
    }
    default:
      return s;
  }
}

class VirtualThreadLowering : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    if (op->key != attr::kVirtualThread) return IRMutator::mutate_(op, self);
    auto iv = std::dynamic_pointer_cast<const IterVarNode>(op->node);
    KILN_ICHECK(iv != nullptr) << "virtual_thread attribute on something else than a thread axis";
    auto extent = as_const_int(op->value);
    KILN_USER_CHECK(extent.has_value())
        << "virtual thread '" << iv->var.name() << "' has extent " << to_string(op->value)
        << "; virtual threads need a constant extent";
    Stmt body = mutate(op->body);  // inner virtual threads first
    const bool share = iv->thread_tag != "cthread";
    if (!share) body = hoist_allocations(body);
    return Injector(iv->var, *extent, body, share).place(body);
  }
};

}  // namespace

ir::Stmt inject_virtual_thread(const ir::Stmt& s) { return VirtualThreadLowering().mutate(s); }

}  // namespace kiln::pass
