// Default traversal and reconstruction for every node kind.
#include "compiler/ir/functor.h"

#include "base/error.h"
#include "compiler/ir/op.h"

namespace kiln::ir {

// ---- visitor ----

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
#define KILN_CASE(T)   \
  case ExprKind::k##T: \
    return visit_(static_cast<const T##Node*>(e.get()));
    KILN_EXPR_NODES(KILN_CASE)
#undef KILN_CASE
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define KILN_CASE(T)   \
  case StmtKind::k##T: \
    return visit_(static_cast<const T##Node*>(s.get()));
    KILN_STMT_NODES(KILN_CASE)
#undef KILN_CASE
  }
}

void IRVisitor::visit_(const IntImmNode*) {}
void IRVisitor::visit_(const FloatImmNode*) {}
void IRVisitor::visit_(const StringImmNode*) {}
void IRVisitor::visit_(const VarNode*) {}
void IRVisitor::visit_(const CastNode* op) { visit(op->value); }
#define KILN_VISIT_BIN(T)                     \
  void IRVisitor::visit_(const T##Node* op) { \
    visit(op->a);                             \
    visit(op->b);                             \
  }
// clang-format off
KILN_VISIT_BIN(Add) KILN_VISIT_BIN(Sub) KILN_VISIT_BIN(Mul) KILN_VISIT_BIN(Div) KILN_VISIT_BIN(Mod)
KILN_VISIT_BIN(FloorDiv) KILN_VISIT_BIN(FloorMod) KILN_VISIT_BIN(Shr) KILN_VISIT_BIN(Min) KILN_VISIT_BIN(Max)
KILN_VISIT_BIN(EQ) KILN_VISIT_BIN(NE) KILN_VISIT_BIN(LT) KILN_VISIT_BIN(LE) KILN_VISIT_BIN(GT)
KILN_VISIT_BIN(GE) KILN_VISIT_BIN(And) KILN_VISIT_BIN(Or)
#undef KILN_VISIT_BIN
    // clang-format on
    void IRVisitor::visit_(const NotNode* op) {
  visit(op->a);
}
void IRVisitor::visit_(const SelectNode* op) {
  visit(op->condition);
  visit(op->true_value);
  visit(op->false_value);
}
void IRVisitor::visit_(const LoadNode* op) {
  visit(op->buffer_var);
  visit(op->index);
  visit(op->predicate);
}
void IRVisitor::visit_(const RampNode* op) {
  visit(op->base);
  visit(op->stride);
}
void IRVisitor::visit_(const BroadcastNode* op) { visit(op->value); }
void IRVisitor::visit_(const LetNode* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_(const CallNode* op) {
  for (auto& a : op->args) visit(a);
}
void IRVisitor::visit_(const ProducerLoadNode* op) {
  for (auto& i : op->indices) visit(i);
}
void IRVisitor::visit_(const ReduceNode* op) {
  visit(op->source);
  visit(op->condition);
}

void IRVisitor::visit_(const LetStmtNode* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_(const AttrStmtNode* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_(const AssertStmtNode* op) {
  visit(op->condition);
  visit(op->body);
}
void IRVisitor::visit_(const ForNode* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void IRVisitor::visit_(const StoreNode* op) {
  visit(op->buffer_var);
  visit(op->value);
  visit(op->index);
  visit(op->predicate);
}
void IRVisitor::visit_(const ProducerStoreNode* op) {
  visit(op->value);
  for (auto& i : op->indices) visit(i);
}
void IRVisitor::visit_(const ProducerRealizeNode* op) {
  for (auto& r : op->bounds) {
    visit(r.min);
    visit(r.extent);
  }
  visit(op->body);
}
void IRVisitor::visit_(const AllocateNode* op) {
  for (auto& e : op->extents) visit(e);
  visit(op->body);
}
void IRVisitor::visit_(const IfThenElseNode* op) {
  visit(op->condition);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit_(const SeqNode* op) {
  for (auto& s : op->seq) visit(s);
}
void IRVisitor::visit_(const EvaluateNode* op) { visit(op->value); }

// ---- mutator ----

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
#define KILN_CASE(T)   \
  case ExprKind::k##T: \
    return mutate_(static_cast<const T##Node*>(e.get()), e);
    KILN_EXPR_NODES(KILN_CASE)
#undef KILN_CASE
  }
  KILN_UNREACHABLE();
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
#define KILN_CASE(T)   \
  case StmtKind::k##T: \
    return mutate_(static_cast<const T##Node*>(s.get()), s);
    KILN_STMT_NODES(KILN_CASE)
#undef KILN_CASE
  }
  KILN_UNREACHABLE();
}

bool IRMutator::mutate_all(const std::vector<Expr>& in, std::vector<Expr>* out) {
  bool changed = false;
  out->clear();
  out->reserve(in.size());
  for (auto& e : in) {
    out->push_back(mutate(e));
    changed |= !out->back().same_as(e);
  }
  return changed;
}

Expr IRMutator::mutate_(const IntImmNode*, const Expr& self) { return self; }
Expr IRMutator::mutate_(const FloatImmNode*, const Expr& self) { return self; }
Expr IRMutator::mutate_(const StringImmNode*, const Expr& self) { return self; }
Expr IRMutator::mutate_(const VarNode*, const Expr& self) { return self; }
Expr IRMutator::mutate_(const CastNode* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : cast(op->dtype.with_lanes(v.dtype().lanes()), v);
}

#define KILN_MUTATE_BIN(T, F)                                    \
  Expr IRMutator::mutate_(const T##Node* op, const Expr& self) { \
    Expr a = mutate(op->a), b = mutate(op->b);                   \
    if (a.same_as(op->a) && b.same_as(op->b)) return self;       \
    return F;                                                    \
  }
KILN_MUTATE_BIN(Add, a + b)
KILN_MUTATE_BIN(Sub, a - b)
KILN_MUTATE_BIN(Mul, a* b)
KILN_MUTATE_BIN(Div, a / b)
KILN_MUTATE_BIN(Mod, a % b)
KILN_MUTATE_BIN(FloorDiv, floordiv(a, b))
KILN_MUTATE_BIN(FloorMod, floormod(a, b))
KILN_MUTATE_BIN(Shr, shift_right(a, b))
KILN_MUTATE_BIN(Min, min(a, b))
KILN_MUTATE_BIN(Max, max(a, b))
KILN_MUTATE_BIN(EQ, a == b)
KILN_MUTATE_BIN(NE, a != b)
KILN_MUTATE_BIN(LT, a < b)
KILN_MUTATE_BIN(LE, a <= b)
KILN_MUTATE_BIN(GT, a > b)
KILN_MUTATE_BIN(GE, a >= b)
KILN_MUTATE_BIN(And, a&& b)
KILN_MUTATE_BIN(Or, a || b)
#undef KILN_MUTATE_BIN

Expr IRMutator::mutate_(const NotNode* op, const Expr& self) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? self : !a;
}
Expr IRMutator::mutate_(const SelectNode* op, const Expr& self) {
  Expr c = mutate(op->condition), t = mutate(op->true_value), f = mutate(op->false_value);
  if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value))
    return self;
  return select(c, t, f);
}
Expr IRMutator::mutate_(const LoadNode* op, const Expr& self) {
  Expr idx = mutate(op->index), pred = mutate(op->predicate);
  if (idx.same_as(op->index) && pred.same_as(op->predicate)) return self;
  return load(op->dtype.with_lanes(idx.dtype().lanes()), op->buffer_var, idx, pred);
}
Expr IRMutator::mutate_(const RampNode* op, const Expr& self) {
  Expr b = mutate(op->base), s = mutate(op->stride);
  if (b.same_as(op->base) && s.same_as(op->stride)) return self;
  return ramp(b, s, op->lanes);
}
Expr IRMutator::mutate_(const BroadcastNode* op, const Expr& self) {
  Expr v = mutate(op->value);
  if (v.same_as(op->value)) return self;
  if (v.dtype().is_vector()) return v;  // already widened by the pass
  return broadcast(v, op->lanes);
}
Expr IRMutator::mutate_(const LetNode* op, const Expr& self) {
  Expr v = mutate(op->value), b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return let(op->var, v, b);
}
Expr IRMutator::mutate_(const CallNode* op, const Expr& self) {
  std::vector<Expr> args;
  if (!mutate_all(op->args, &args)) return self;
  DataType t = op->dtype;
  if (op->call_kind == CallKind::kPureIntrinsic && op->name == kDot4U8S8) {
    t = args[0].dtype();  // its operands are 4 times as wide as its result
  } else if (op->call_kind == CallKind::kPureIntrinsic) {
    int lanes = 1;
    for (auto& a : args) lanes = std::max(lanes, a.dtype().lanes());
    t = t.with_lanes(lanes);
  }
  return call(t, op->name, std::move(args), op->call_kind);
}
Expr IRMutator::mutate_(const ProducerLoadNode* op, const Expr& self) {
  std::vector<Expr> idx;
  if (!mutate_all(op->indices, &idx)) return self;
  return producer_load(op->producer, std::move(idx));
}
Expr IRMutator::mutate_(const ReduceNode* op, const Expr& self) {
  Expr s = mutate(op->source), c = mutate(op->condition);
  if (s.same_as(op->source) && c.same_as(op->condition)) return self;
  return Expr(std::make_shared<ReduceNode>(s.dtype(), op->combiner, s, op->axis, c));
}

Stmt IRMutator::mutate_(const LetStmtNode* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return let_stmt(op->var, v, b);
}
Stmt IRMutator::mutate_(const AttrStmtNode* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt b = mutate(op->body);
  if (v.same_as(op->value) && b.same_as(op->body)) return self;
  return attr_stmt(op->node, op->key, v, b);
}
Stmt IRMutator::mutate_(const AssertStmtNode* op, const Stmt& self) {
  Expr c = mutate(op->condition);
  Stmt b = mutate(op->body);
  if (c.same_as(op->condition) && b.same_as(op->body)) return self;
  return assert_stmt(c, op->message, b);
}
Stmt IRMutator::mutate_(const ForNode* op, const Stmt& self) {
  Expr m = mutate(op->min), e = mutate(op->extent);
  Stmt b = mutate(op->body);
  if (m.same_as(op->min) && e.same_as(op->extent) && b.same_as(op->body)) return self;
  return for_loop(op->loop_var, m, e, op->for_kind, b);
}
Stmt IRMutator::mutate_(const StoreNode* op, const Stmt& self) {
  Expr v = mutate(op->value), i = mutate(op->index), p = mutate(op->predicate);
  if (v.same_as(op->value) && i.same_as(op->index) && p.same_as(op->predicate)) return self;
  return store(op->buffer_var, v, i, p);
}
Stmt IRMutator::mutate_(const ProducerStoreNode* op, const Stmt& self) {
  Expr v = mutate(op->value);
  std::vector<Expr> idx;
  bool changed = mutate_all(op->indices, &idx);
  if (!changed && v.same_as(op->value)) return self;
  return producer_store(op->producer, v, std::move(idx));
}
Stmt IRMutator::mutate_(const ProducerRealizeNode* op, const Stmt& self) {
  bool changed = false;
  std::vector<Range> bounds;
  for (auto& r : op->bounds) {
    Range n(mutate(r.min), mutate(r.extent));
    changed |= !n.min.same_as(r.min) || !n.extent.same_as(r.extent);
    bounds.push_back(n);
  }
  Stmt b = mutate(op->body);
  if (!changed && b.same_as(op->body)) return self;
  return producer_realize(op->producer, std::move(bounds), op->scope, b);
}
Stmt IRMutator::mutate_(const AllocateNode* op, const Stmt& self) {
  std::vector<Expr> ext;
  bool changed = mutate_all(op->extents, &ext);
  Stmt b = mutate(op->body);
  if (!changed && b.same_as(op->body)) return self;
  return allocate(op->buffer_var, op->dtype, std::move(ext), op->scope, b);
}
Stmt IRMutator::mutate_(const IfThenElseNode* op, const Stmt& self) {
  Expr c = mutate(op->condition);
  Stmt t = mutate(op->then_case), e = mutate(op->else_case);
  if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return if_then_else(c, t, e);
}
Stmt IRMutator::mutate_(const SeqNode* op, const Stmt& self) {
  bool changed = false;
  std::vector<Stmt> out;
  out.reserve(op->seq.size());
  for (auto& s : op->seq) {
    out.push_back(mutate(s));
    changed |= !out.back().same_as(s);
  }
  return changed ? seq(std::move(out)) : self;
}
Stmt IRMutator::mutate_(const EvaluateNode* op, const Stmt& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : evaluate(v);
}

// ---- post-order ----

namespace {
class PostOrder : public IRVisitor {
 public:
  explicit PostOrder(const std::function<void(const Object*)>& f) : f_(f) {}
  void visit(const Expr& e) override {
    if (!e.defined()) return;
    IRVisitor::visit(e);
    f_(e.get());
  }
  void visit(const Stmt& s) override {
    if (!s.defined()) return;
    IRVisitor::visit(s);
    f_(s.get());
  }

 private:
  const std::function<void(const Object*)>& f_;
};
}  // namespace

void post_order_visit(const Stmt& s, const std::function<void(const Object*)>& f) {
  PostOrder(f).visit(s);
}
void post_order_visit(const Expr& e, const std::function<void(const Object*)>& f) {
  PostOrder(f).visit(e);
}

}  // namespace kiln::ir
