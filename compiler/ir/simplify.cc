// The simplifier. Integer index arithmetic (Add, Sub, Mul) is read as a linear form, a list of
// coefficient*atom terms plus a constant, and written back canonically; a whole sum is read in one
// go, so each node is simplified once. Atoms (divisions, min/max, loads, products of two
// non-constants...) are simplified by their own rules, which use the linear form of their operands
// and the constant bounds of the domain (interval.h), falling back to symbolic bounds when a domain
// bound is symbolic (`i < n` inside `for i in range(n)`).
#include "compiler/ir/simplify.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "base/int_math.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/substitute.h"

namespace kiln::ir {

namespace {

/// Integer types whose Add/Sub/Mul form a ring: linear forms are exact for them (modulo 2^bits).
bool is_index_type(DataType t) { return t.is_scalar() && (t.is_int() || t.is_uint()); }
/// Signed integer types, where (assuming no overflow) bounds decide comparisons and divisions.
bool is_ordered_type(DataType t) { return t.is_scalar() && t.is_int(); }

// Wrapping arithmetic on coefficients: overflow is the type's business, not undefined behaviour.
int64_t wadd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wmul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wneg(int64_t a) { return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(a)); }

struct Term {
  Expr atom;
  int64_t coeff;
};

/// sum(coeff*atom) + constant, all of one integer type. Terms keep their order of appearance.
struct LinearForm {
  DataType dtype;
  std::vector<Term> terms;
  int64_t constant = 0;

  explicit LinearForm(DataType t) : dtype(t) {}
  bool is_const() const { return terms.empty(); }

  void add_term(const Expr& atom, int64_t coeff) {
    if (coeff == 0) return;
    for (auto it = terms.begin(); it != terms.end(); ++it) {
      if (expr_deep_equal(it->atom, atom)) {
        it->coeff = wadd(it->coeff, coeff);
        if (it->coeff == 0) terms.erase(it);
        return;
      }
    }
    terms.push_back({atom, coeff});
  }
  void add(const LinearForm& o, int64_t scale = 1) {
    for (auto& t : o.terms) add_term(t.atom, wmul(t.coeff, scale));
    constant = wadd(constant, wmul(o.constant, scale));
  }
  LinearForm scaled(int64_t k) const {
    LinearForm r(dtype);
    r.add(*this, k);
    return r;
  }
};

/// Reads an already simplified expression as a linear form (no simplification).
void decompose(const Expr& e, int64_t scale, LinearForm* f) {
  switch (e.kind()) {
    case ExprKind::kIntImm:
      f->constant = wadd(f->constant, wmul(e.as<IntImmNode>()->value, scale));
      return;
    case ExprKind::kAdd: {
      auto op = e.as<AddNode>();
      decompose(op->a, scale, f);
      decompose(op->b, scale, f);
      return;
    }
    case ExprKind::kSub: {
      auto op = e.as<SubNode>();
      decompose(op->a, scale, f);
      decompose(op->b, wneg(scale), f);
      return;
    }
    case ExprKind::kMul: {
      auto op = e.as<MulNode>();
      if (auto c = op->b.as<IntImmNode>()) return decompose(op->a, wmul(scale, c->value), f);
      if (auto c = op->a.as<IntImmNode>()) return decompose(op->b, wmul(scale, c->value), f);
      break;
    }
    default:
      break;
  }
  f->add_term(e, scale);
}

LinearForm form_of(const Expr& e) {
  LinearForm f(e.dtype());
  decompose(e, 1, &f);
  return f;
}

/// Writes a linear form back: the first positive term leads, the others follow in order, the
/// constant comes last (`y*8 + x - z + 5`).
Expr build(const LinearForm& f) {
  const DataType t = f.dtype;
  auto term = [&](const Term& x, int64_t c) { return c == 1 ? x.atom : x.atom * make_const(t, c); };
  auto lead =
      std::find_if(f.terms.begin(), f.terms.end(), [](const Term& x) { return x.coeff > 0; });
  Expr acc;
  bool constant_used = false;
  if (lead != f.terms.end()) {
    acc = term(*lead, lead->coeff);
  } else if (f.constant > 0) {
    acc = make_const(t, f.constant);
    constant_used = true;
  } else if (!f.terms.empty()) {
    lead = f.terms.begin();
    acc = make_zero(t) - term(*lead, wneg(lead->coeff));
  } else {
    return make_const(t, f.constant);
  }
  for (auto it = f.terms.begin(); it != f.terms.end(); ++it) {
    if (it == lead) continue;
    acc = it->coeff > 0 ? acc + term(*it, it->coeff) : acc - term(*it, wneg(it->coeff));
  }
  if (!constant_used && f.constant != 0) {
    acc = f.constant > 0 ? acc + make_const(t, f.constant) : acc - make_const(t, wneg(f.constant));
  }
  return acc;
}

/// Builds `a <kind> b` with op.h's operators (which fold constants).
Expr apply(ExprKind kind, const Expr& a, const Expr& b) {
  switch (kind) {
    case ExprKind::kAdd:
      return a + b;
    case ExprKind::kSub:
      return a - b;
    case ExprKind::kMul:
      return a * b;
    case ExprKind::kDiv:
      return a / b;
    case ExprKind::kMod:
      return a % b;
    case ExprKind::kFloorDiv:
      return floordiv(a, b);
    case ExprKind::kFloorMod:
      return floormod(a, b);
    case ExprKind::kShr:
      return shift_right(a, b);
    case ExprKind::kMin:
      return min(a, b);
    case ExprKind::kMax:
      return max(a, b);
    case ExprKind::kEQ:
      return a == b;
    case ExprKind::kNE:
      return a != b;
    case ExprKind::kLT:
      return a < b;
    case ExprKind::kLE:
      return a <= b;
    case ExprKind::kGT:
      return a > b;
    case ExprKind::kGE:
      return a >= b;
    case ExprKind::kAnd:
      return a && b;
    case ExprKind::kOr:
      return a || b;
    default:
      KILN_UNREACHABLE();
  }
}

/// The comparison that holds exactly when `kind` does not (integers: no NaN).
ExprKind negated(ExprKind kind) {
  switch (kind) {
    case ExprKind::kEQ:
      return ExprKind::kNE;
    case ExprKind::kNE:
      return ExprKind::kEQ;
    case ExprKind::kLT:
      return ExprKind::kGE;
    case ExprKind::kLE:
      return ExprKind::kGT;
    case ExprKind::kGT:
      return ExprKind::kLE;
    case ExprKind::kGE:
      return ExprKind::kLT;
    default:
      KILN_UNREACHABLE();
  }
}

/// `b kind a` holds exactly when `a mirrored(kind) b` does.
ExprKind mirrored(ExprKind kind) {
  switch (kind) {
    case ExprKind::kLT:
      return ExprKind::kGT;
    case ExprKind::kLE:
      return ExprKind::kGE;
    case ExprKind::kGT:
      return ExprKind::kLT;
    case ExprKind::kGE:
      return ExprKind::kLE;
    default:
      return kind;
  }
}

bool is_comparison(ExprKind k) { return k >= ExprKind::kEQ && k <= ExprKind::kGE; }

/// Decides `d kind 0` from bounds of d, when they are tight enough.
std::optional<bool> decide(ExprKind kind, const ConstBounds& d) {
  const auto& lo = d.min;
  const auto& hi = d.max;
  switch (kind) {
    case ExprKind::kLT:
      if (hi && *hi < 0) return true;
      if (lo && *lo >= 0) return false;
      break;
    case ExprKind::kLE:
      if (hi && *hi <= 0) return true;
      if (lo && *lo > 0) return false;
      break;
    case ExprKind::kGT:
      if (lo && *lo > 0) return true;
      if (hi && *hi <= 0) return false;
      break;
    case ExprKind::kGE:
      if (lo && *lo >= 0) return true;
      if (hi && *hi < 0) return false;
      break;
    case ExprKind::kEQ:
    case ExprKind::kNE: {
      std::optional<bool> eq;
      if ((lo && *lo > 0) || (hi && *hi < 0)) eq = false;
      if (lo && hi && *lo == 0 && *hi == 0) eq = true;
      if (eq && kind == ExprKind::kNE) eq = !*eq;
      return eq;
    }
    default:
      break;
  }
  return std::nullopt;
}

class Simplifier : public IRMutator {
 public:
  explicit Simplifier(const VarIntervals* dom) : dom_(dom) {}
  using IRMutator::mutate;

 protected:
  // ---- expressions ----
  Expr mutate_(const VarNode* op, const Expr& self) override {
    if (const Interval* iv = lookup(op)) {
      auto lo = as_const_int(iv->min), hi = as_const_int(iv->max);
      if (lo && hi && *lo == *hi && op->dtype.is_scalar()) return make_const(op->dtype, *lo);
    }
    return self;
  }
  Expr mutate_(const AddNode*, const Expr& self) override { return arith(self); }
  Expr mutate_(const SubNode*, const Expr& self) override { return arith(self); }
  Expr mutate_(const MulNode*, const Expr& self) override { return arith(self); }
  Expr mutate_(const DivNode*, const Expr& self) override { return division(self, false, true); }
  Expr mutate_(const ModNode*, const Expr& self) override { return division(self, true, true); }
  Expr mutate_(const FloorDivNode*, const Expr& self) override {
    return division(self, false, false);
  }
  Expr mutate_(const FloorModNode*, const Expr& self) override {
    return division(self, true, false);
  }
  Expr mutate_(const MinNode*, const Expr& self) override { return min_max(self); }
  Expr mutate_(const MaxNode*, const Expr& self) override { return min_max(self); }
  Expr mutate_(const EQNode*, const Expr& self) override { return compare(self); }
  Expr mutate_(const NENode*, const Expr& self) override { return compare(self); }
  Expr mutate_(const LTNode*, const Expr& self) override { return compare(self); }
  Expr mutate_(const LENode*, const Expr& self) override { return compare(self); }
  Expr mutate_(const GTNode*, const Expr& self) override { return compare(self); }
  Expr mutate_(const GENode*, const Expr& self) override { return compare(self); }
  Expr mutate_(const AndNode*, const Expr& self) override { return logic(self); }
  Expr mutate_(const OrNode*, const Expr& self) override { return logic(self); }

  Expr mutate_(const NotNode* op, const Expr& self) override {
    Expr a = mutate(op->a);
    Expr r = negate(a);
    return a.same_as(op->a) && expr_deep_equal(r, self) ? self : r;
  }

  Expr mutate_(const SelectNode* op, const Expr& self) override {
    Expr c = mutate(op->condition);
    if (auto k = as_const_int(c)) return mutate(*k ? op->true_value : op->false_value);
    Expr t = mutate(op->true_value), f = mutate(op->false_value);
    if (expr_deep_equal(t, f)) return t;
    if (c.same_as(op->condition) && t.same_as(op->true_value) && f.same_as(op->false_value)) {
      return self;
    }
    return select(c, t, f);
  }

  Expr mutate_(const CastNode* op, const Expr& self) override {
    Expr v = mutate(op->value);
    DataType to = op->dtype;
    // Widening and narrowing back is exact: int32(int64(x)) -> x.
    if (auto inner = v.as<CastNode>()) {
      DataType mid = inner->dtype, from = inner->value.dtype();
      bool exact = from == to && mid.lanes() == to.lanes() &&
                   ((mid.code() == to.code() && mid.bits() >= to.bits()) ||
                    (to.is_uint() && mid.is_int() && mid.bits() > to.bits()));
      if (exact) return inner->value;
    }
    return v.same_as(op->value) ? self : cast(to, v);
  }

  Expr mutate_(const RampNode* op, const Expr& self) override {
    Expr b = mutate(op->base), s = mutate(op->stride);
    if (is_zero(s)) return broadcast(b, op->lanes);
    if (b.same_as(op->base) && s.same_as(op->stride)) return self;
    return ramp(b, s, op->lanes);
  }

  Expr mutate_(const LetNode* op, const Expr& self) override {
    Expr v = mutate(op->value);
    if (v.as<IntImmNode>() || v.as<FloatImmNode>() || v.as<VarNode>()) {
      return mutate(substitute(op->body, VarMap{{op->var.get(), v}}));
    }
    size_t mark = this->mark();
    bind(op->var.get(), Interval::single_point(v));
    Expr b = mutate(op->body);
    restore(mark);
    if (!uses_var(b, op->var)) return b;
    if (v.same_as(op->value) && b.same_as(op->body)) return self;
    return let(op->var, v, b);
  }

  Expr mutate_(const ReduceNode* op, const Expr& self) override {
    size_t mark = this->mark();
    for (auto& iv : op->axis) {
      if (iv->dom.min.defined() && iv->dom.extent.defined()) {
        bind(iv->var.get(), range_interval(mutate(iv->dom.min), mutate(iv->dom.extent)));
      }
    }
    Expr r = IRMutator::mutate_(op, self);
    restore(mark);
    return r;
  }

  // ---- statements ----
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    Expr m = mutate(op->min), ext = mutate(op->extent);
    if (provably_nonpositive(ext)) return no_op();
    if (is_one(ext)) return mutate(substitute(op->body, VarMap{{op->loop_var.get(), m}}));
    size_t mark = this->mark();
    bind(op->loop_var.get(), range_interval(m, ext));
    Stmt body = mutate(op->body);
    restore(mark);
    if (is_no_op(body)) return no_op();
    if (m.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
    return for_loop(op->loop_var, m, ext, op->for_kind, body);
  }

  Stmt mutate_(const LetStmtNode* op, const Stmt& self) override {
    Expr v = mutate(op->value);
    if (v.as<IntImmNode>() || v.as<FloatImmNode>() || v.as<VarNode>()) {
      return mutate(substitute(op->body, VarMap{{op->var.get(), v}}));
    }
    size_t mark = this->mark();
    bind(op->var.get(), Interval::single_point(v));
    Stmt body = mutate(op->body);
    restore(mark);
    if (is_no_op(body)) return no_op();
    const VarNode* var = op->var.get();
    if (!uses_var(body, [var](const VarNode* n) { return n == var; })) return body;
    if (v.same_as(op->value) && body.same_as(op->body)) return self;
    return let_stmt(op->var, v, body);
  }

  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    Expr v = mutate(op->value);
    size_t mark = this->mark();
    auto iv = dynamic_cast<const IterVarNode*>(op->node.get());
    if (iv && v.defined() && (op->key == attr::kThreadExtent || op->key == attr::kVirtualThread) &&
        is_index_type(v.dtype()) && v.dtype() == iv->var.dtype()) {
      bind(iv->var.get(), range_interval(make_zero(v.dtype()), v));
    }
    Stmt body = mutate(op->body);
    restore(mark);
    if (is_no_op(body)) return no_op();
    if (v.same_as(op->value) && body.same_as(op->body)) return self;
    return attr_stmt(op->node, op->key, v, body);
  }

  Stmt mutate_(const AssertStmtNode* op, const Stmt& self) override {
    Expr c = mutate(op->condition);
    Stmt body = mutate(op->body);
    if (is_one(c)) return body;
    if (c.same_as(op->condition) && body.same_as(op->body)) return self;
    return assert_stmt(c, op->message, body);
  }

  Stmt mutate_(const IfThenElseNode* op, const Stmt& self) override {
    Expr c = mutate(op->condition);
    if (auto k = as_const_int(c)) {
      if (*k) return mutate(op->then_case);
      return op->else_case.defined() ? mutate(op->else_case) : no_op();
    }
    size_t mark = this->mark();
    refine(c, true);
    Stmt t = mutate(op->then_case);
    restore(mark);
    Stmt e;
    if (op->else_case.defined()) {
      refine(c, false);
      e = mutate(op->else_case);
      restore(mark);
      if (is_no_op(e)) e = Stmt();
    }
    if (is_no_op(t)) return e.defined() ? if_then_else(negate(c), e) : no_op();
    if (c.same_as(op->condition) && t.same_as(op->then_case) && e.same_as(op->else_case)) {
      return self;
    }
    return if_then_else(c, t, e);
  }

  Stmt mutate_(const AllocateNode* op, const Stmt& self) override {
    Stmt r = IRMutator::mutate_(op, self);
    auto n = r.as<AllocateNode>();
    return n && is_no_op(n->body) ? no_op() : r;
  }

  Stmt mutate_(const ProducerRealizeNode* op, const Stmt& self) override {
    Stmt r = IRMutator::mutate_(op, self);
    auto n = r.as<ProducerRealizeNode>();
    return n && is_no_op(n->body) ? no_op() : r;
  }

 private:
  // ---- the domain ----
  const Interval* lookup(const VarNode* v) const {
    auto it = dom_->find(v);
    return it == dom_->end() ? nullptr : &it->second;
  }
  size_t mark() const { return saved_.size(); }
  void bind(const VarNode* v, Interval iv) {
    if (!owned_) {
      owned_ = std::make_unique<VarIntervals>(*dom_);
      dom_ = owned_.get();
    }
    auto it = owned_->find(v);
    saved_.push_back({v, it == owned_->end() ? std::nullopt : std::optional<Interval>(it->second)});
    (*owned_)[v] = std::move(iv);
  }
  void restore(size_t mark) {
    while (saved_.size() > mark) {
      auto& [v, old] = saved_.back();
      if (old) {
        (*owned_)[v] = *old;
      } else {
        owned_->erase(v);
      }
      saved_.pop_back();
    }
  }

  /// [min, min + extent - 1] of simplified min and extent.
  static Interval range_interval(const Expr& m, const Expr& ext) {
    if (!is_index_type(m.dtype()) || m.dtype() != ext.dtype()) return {m, m + ext - 1};
    LinearForm hi = form_of(m);
    hi.add(form_of(ext));
    hi.constant = wadd(hi.constant, -1);
    return {m, build(hi)};
  }

  /// Constant bounds of a linear form over the domain: plain arithmetic first; when a side is
  /// unbounded and the form mentions domain variables, symbolic bounds, simplified.
  ConstBounds bounds(const LinearForm& f) {
    using i128 = __int128;
    i128 lo = f.constant, hi = f.constant;
    bool has_lo = true, has_hi = true;
    for (auto& t : f.terms) {
      ConstBounds b = eval_const_bounds(t.atom, *dom_);
      const auto& low = t.coeff > 0 ? b.min : b.max;
      const auto& high = t.coeff > 0 ? b.max : b.min;
      if (low) {
        lo += i128{*low} * t.coeff;
      } else {
        has_lo = false;
      }
      if (high) {
        hi += i128{*high} * t.coeff;
      } else {
        has_hi = false;
      }
    }
    auto fits = [](i128 v) {
      return v >= std::numeric_limits<int64_t>::min() && v <= std::numeric_limits<int64_t>::max();
    };
    ConstBounds r;
    if (has_lo && fits(lo)) r.min = static_cast<int64_t>(lo);
    if (has_hi && fits(hi)) r.max = static_cast<int64_t>(hi);
    if ((!r.min || !r.max) && !dom_->empty() && mentions_domain(f)) {
      Interval iv = eval_interval_raw(build(f), *dom_);
      if (!r.min && iv.min.defined()) r.min = as_const_int(simplify(iv.min));
      if (!r.max && iv.max.defined()) r.max = as_const_int(simplify(iv.max));
    }
    return r;
  }

  bool mentions_domain(const LinearForm& f) const {
    const VarIntervals& dom = *dom_;
    auto in_dom = [&dom](const VarNode* v) { return dom.count(v) != 0; };
    for (auto& t : f.terms) {
      if (uses_var(t.atom, in_dom)) return true;
    }
    return false;
  }

  bool nonnegative(const LinearForm& f) {
    auto b = bounds(f);
    return b.min && *b.min >= 0;
  }

  bool provably_nonpositive(const Expr& e) {
    if (auto c = as_const_int(e)) return *c <= 0;
    if (!is_ordered_type(e.dtype())) return false;
    auto b = bounds(form_of(e));
    return b.max && *b.max <= 0;
  }

  // ---- Add, Sub, Mul ----

  /// Reads an unsimplified index expression into f (scaled), simplifying its atoms.
  void collect(const Expr& e, int64_t scale, LinearForm* f) {
    switch (e.kind()) {
      case ExprKind::kIntImm:
        f->constant = wadd(f->constant, wmul(e.as<IntImmNode>()->value, scale));
        return;
      case ExprKind::kAdd: {
        auto op = e.as<AddNode>();
        collect(op->a, scale, f);
        collect(op->b, scale, f);
        return;
      }
      case ExprKind::kSub: {
        auto op = e.as<SubNode>();
        collect(op->a, scale, f);
        collect(op->b, wneg(scale), f);
        return;
      }
      case ExprKind::kMul: {
        auto op = e.as<MulNode>();
        if (auto c = op->b.as<IntImmNode>()) return collect(op->a, wmul(scale, c->value), f);
        if (auto c = op->a.as<IntImmNode>()) return collect(op->b, wmul(scale, c->value), f);
        Expr a = mutate(op->a), b = mutate(op->b);
        if (auto c = a.as<IntImmNode>()) return decompose(b, wmul(scale, c->value), f);
        if (auto c = b.as<IntImmNode>()) return decompose(a, wmul(scale, c->value), f);
        f->add_term(a.same_as(op->a) && b.same_as(op->b) ? e : a * b, scale);
        return;
      }
      default:
        decompose(mutate(e), scale, f);
    }
  }

  /// floordiv(x, c)*c*k + floormod(x, c)*k -> x*k, and the same for truncdiv/truncmod and for a
  /// symbolic divisor: floordiv(x, n)*n + floormod(x, n) -> x; with x = floordiv(z, d), its
  /// quotient may be written floordiv(z, d*c), so that a row-major index unravelled and flattened
  /// again, z//(H*W)*(H*W) + z//W%H*W + z%W, is z.
  static void merge_div_mod(LinearForm* f) {
    // Whether term j is the quotient partner of term i, the remainder of x by y.
    auto partner = [f](size_t i, size_t j, ExprKind div, const Expr& x, const Expr& y) {
      const Term& d = f->terms[j];
      const Expr* q = &d.atom;
      Expr qa, qb;
      if (auto c = y.as<IntImmNode>()) {
        if (d.coeff != wmul(f->terms[i].coeff, c->value)) return false;
      } else {
        // The quotient times the divisor is one atom: floordiv(x, n)*n or n*floordiv(x, n).
        if (d.coeff != f->terms[i].coeff || d.atom.kind() != ExprKind::kMul) return false;
        std::tie(qa, qb) = binary_operands(d.atom);
        if (qa.kind() != div) std::swap(qa, qb);
        if (!expr_deep_equal(qb, y)) return false;
        q = &qa;
      }
      if (q->kind() != div) return false;
      auto [dx, dy] = binary_operands(*q);
      if (expr_deep_equal(dy, y) && expr_deep_equal(dx, x)) return true;
      // The remainder of a quotient: floormod(floordiv(z, c), n) with floordiv(z, c*n), which is
      // floordiv(floordiv(z, c), n) (a flattened index unravelled into rows and columns).
      const auto* n = y.as<IntImmNode>();
      const auto* dn = dy.as<IntImmNode>();
      if (div != ExprKind::kFloorDiv || x.kind() != ExprKind::kFloorDiv || !n || !dn) return false;
      auto [z, c] = binary_operands(x);
      const auto* cn = c.as<IntImmNode>();
      return cn && cn->value > 0 && n->value > 0 && dn->value == wmul(cn->value, n->value) &&
             expr_deep_equal(dx, z);
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < f->terms.size() && !changed; ++i) {
        const Expr& m = f->terms[i].atom;
        if (m.kind() != ExprKind::kFloorMod && m.kind() != ExprKind::kMod) continue;
        auto [x, y] = binary_operands(m);
        if (is_zero(y)) continue;
        ExprKind div = m.kind() == ExprKind::kMod ? ExprKind::kDiv : ExprKind::kFloorDiv;
        int64_t k = f->terms[i].coeff;
        for (size_t j = 0; j < f->terms.size(); ++j) {
          if (j == i || !partner(i, j, div, x, y)) continue;
          // x*k takes the place of the first of the two terms.
          LinearForm g(f->dtype);
          g.constant = f->constant;
          for (size_t p = 0; p < f->terms.size(); ++p) {
            if (p == std::min(i, j)) g.add(form_of(x), k);
            if (p != i && p != j) g.add_term(f->terms[p].atom, f->terms[p].coeff);
          }
          *f = std::move(g);
          changed = true;
          break;
        }
      }
    }
  }

  Expr arith(const Expr& self) {
    DataType t = self.dtype();
    if (is_index_type(t)) {
      LinearForm f(t);
      collect(self, 1, &f);
      merge_div_mod(&f);
      Expr r = build(f);
      return expr_deep_equal(r, self) ? self : r;
    }
    auto [a0, b0] = binary_operands(self);
    Expr a = mutate(a0), b = mutate(b0);
    if (t.is_vector()) {
      if (Expr v = vector_arith(self.kind(), a, b); v.defined()) return v;
    }
    if (a.same_as(a0) && b.same_as(b0)) return self;
    return apply(self.kind(), a, b);
  }

  /// a kind b for simplified scalar operands, simplified without revisiting them.
  static Expr scalar_arith(ExprKind kind, const Expr& a, const Expr& b) {
    if (!is_index_type(a.dtype()) || a.dtype() != b.dtype()) return apply(kind, a, b);
    LinearForm f = form_of(a), g = form_of(b);
    if (kind == ExprKind::kAdd) {
      f.add(g);
    } else if (kind == ExprKind::kSub) {
      f.add(g, -1);
    } else if (g.is_const()) {
      f = f.scaled(g.constant);
    } else if (f.is_const()) {
      f = g.scaled(f.constant);
    } else {
      return a * b;
    }
    return build(f);
  }

  static Expr make_ramp(const Expr& base, const Expr& stride, int lanes) {
    return is_zero(stride) ? broadcast(base, lanes) : ramp(base, stride, lanes);
  }

  /// Ramp and Broadcast arithmetic: x4(a) + x4(b) -> x4(a + b), ramp(b, s, n) + xn(x) ->
  /// ramp(b + x, s, n), ramp * xn(c) -> ramp(b*c, s*c, n).
  static Expr vector_arith(ExprKind kind, const Expr& a, const Expr& b) {
    auto ba = a.as<BroadcastNode>(), bb = b.as<BroadcastNode>();
    auto ra = a.as<RampNode>(), rb = b.as<RampNode>();
    int lanes = a.dtype().lanes();
    if (ba && bb) return broadcast(scalar_arith(kind, ba->value, bb->value), lanes);
    if (kind == ExprKind::kAdd || kind == ExprKind::kSub) {
      if (ra && bb) return make_ramp(scalar_arith(kind, ra->base, bb->value), ra->stride, lanes);
      if (ba && rb) {
        Expr s = kind == ExprKind::kAdd
                     ? rb->stride
                     : scalar_arith(ExprKind::kSub, make_zero(rb->stride.dtype()), rb->stride);
        return make_ramp(scalar_arith(kind, ba->value, rb->base), s, lanes);
      }
      if (ra && rb) {
        return make_ramp(scalar_arith(kind, ra->base, rb->base),
                         scalar_arith(kind, ra->stride, rb->stride), lanes);
      }
    }
    if (kind == ExprKind::kMul) {
      if (ra && bb) {
        return make_ramp(scalar_arith(kind, ra->base, bb->value),
                         scalar_arith(kind, ra->stride, bb->value), lanes);
      }
      if (ba && rb) {
        return make_ramp(scalar_arith(kind, ba->value, rb->base),
                         scalar_arith(kind, ba->value, rb->stride), lanes);
      }
    }
    return Expr();
  }

  // ---- division ----

  Expr division(const Expr& self, bool is_mod, bool trunc) {
    auto [a0, b0] = binary_operands(self);
    Expr a = mutate(a0), b = mutate(b0);
    bool same = a.same_as(a0) && b.same_as(b0);
    if (is_zero(b)) return same ? self : division_node(self.kind(), a, b);
    auto c = b.as<IntImmNode>();
    Expr r;
    DataType t = self.dtype();
    if (c && c->value > 0 && is_ordered_type(t)) {
      r = div_const(a, c->value, is_mod, trunc);
    } else if (t.is_vector() && is_ordered_type(t.element_of())) {
      r = vector_div(a, b, is_mod, trunc);
    }
    if (r.defined()) return expr_deep_equal(r, self) ? self : r;
    if (same) return self;
    return apply(self.kind(), a, b);
  }

  /// A division node with new operands, built without op.h's check for a zero divisor (a
  /// division by zero is the program's business, not a reason for the simplifier to fail).
  static Expr division_node(ExprKind kind, const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    switch (kind) {
      case ExprKind::kDiv:
        return Expr(std::make_shared<DivNode>(t, a, b));
      case ExprKind::kMod:
        return Expr(std::make_shared<ModNode>(t, a, b));
      case ExprKind::kFloorDiv:
        return Expr(std::make_shared<FloorDivNode>(t, a, b));
      default:
        return Expr(std::make_shared<FloorModNode>(t, a, b));
    }
  }

  /// a / c or a % c for a simplified a and c > 0; undefined when no rule applies.
  Expr div_const(const Expr& a, int64_t c, bool is_mod, bool trunc) {
    LinearForm f = form_of(a);
    if (trunc && !nonnegative(f)) {
      // |a| < c: the quotient is 0 whatever the sign.
      ConstBounds b = bounds(f);
      if (b.min && b.max && *b.min > -c && *b.max < c) return is_mod ? a : make_zero(a.dtype());
      return Expr();
    }
    return floor_div(f, c, is_mod, trunc);
  }

  /// floordiv(f, c) or floormod(f, c) for c > 0. With `trunc`, f is known non-negative and the
  /// division nodes left over are truncating ones when their operand is non-negative.
  Expr floor_div(const LinearForm& f, int64_t c, bool is_mod, bool trunc) {
    DataType t = f.dtype;
    if (c == 1) return is_mod ? make_zero(t) : build(f);
    // f = q*c + r, where q gathers the terms whose coefficient c divides.
    LinearForm q(t), r(t);
    for (auto& term : f.terms) {
      if (term.coeff % c == 0) {
        q.terms.push_back({term.atom, term.coeff / c});
      } else {
        r.terms.push_back(term);
      }
    }
    q.constant = kiln::floor_div(f.constant, c);
    r.constant = kiln::floor_mod(f.constant, c);
    ConstBounds rb = bounds(r);
    if (rb.min && rb.max && kiln::floor_div(*rb.min, c) == kiln::floor_div(*rb.max, c)) {
      int64_t k = kiln::floor_div(*rb.min, c);
      if (is_mod) {
        r.constant = wadd(r.constant, wneg(wmul(k, c)));
        return build(r);
      }
      q.constant = wadd(q.constant, k);
      return build(q);
    }
    // r = g*y + s with 0 <= s < g and g | c: r // c = y // (c/g), r % c = (y % (c/g))*g + s.
    std::vector<int64_t> gs;
    for (auto& term : r.terms) {
      int64_t g = std::gcd(term.coeff < 0 ? wneg(term.coeff) : term.coeff, c);
      if (g > 1 && g < c && std::find(gs.begin(), gs.end(), g) == gs.end()) gs.push_back(g);
    }
    std::sort(gs.rbegin(), gs.rend());
    for (int64_t g : gs) {
      LinearForm big(t), small(t);
      for (auto& term : r.terms) {
        if (term.coeff % g == 0) {
          big.terms.push_back({term.atom, term.coeff / g});
        } else {
          small.terms.push_back(term);
        }
      }
      big.constant = kiln::floor_div(r.constant, g);
      small.constant = kiln::floor_mod(r.constant, g);
      ConstBounds sb = bounds(small);
      if (!sb.min || !sb.max || *sb.min < 0 || *sb.max >= g) continue;
      LinearForm inner = form_of(floor_div(big, c / g, is_mod, trunc));
      if (is_mod) {
        LinearForm out = inner.scaled(g);
        out.add(small);
        return build(out);
      }
      q.add(inner);
      return build(q);
    }
    // floordiv(floordiv(x, c1), c) -> floordiv(x, c1*c); floormod(floormod(x, c1), c) ->
    // floormod(x, c) when c divides c1.
    if (r.terms.size() == 1 && r.terms[0].coeff == 1 && r.constant == 0) {
      const Expr& x = r.terms[0].atom;
      ExprKind want = is_mod ? ExprKind::kFloorMod : ExprKind::kFloorDiv;
      ExprKind want_trunc = is_mod ? ExprKind::kMod : ExprKind::kDiv;
      if (x.kind() == want || x.kind() == want_trunc) {
        auto [xa, xb] = binary_operands(x);
        auto c1 = xb.as<IntImmNode>();
        LinearForm fa = form_of(xa);
        int64_t cc;
        bool ok = c1 && c1->value > 0 && (x.kind() == want || nonnegative(fa));
        if (ok && !is_mod && !__builtin_mul_overflow(c1->value, c, &cc)) {
          q.add(form_of(floor_div(fa, cc, false, trunc)));
          return build(q);
        }
        if (ok && is_mod && c1->value % c == 0) return floor_div(fa, c, true, trunc);
      }
    }
    Expr rest = build(r);
    Expr divisor = make_const(t, c);
    bool keep_trunc = trunc && nonnegative(r);
    Expr node = is_mod ? (keep_trunc ? rest % divisor : floormod(rest, divisor))
                       : (keep_trunc ? rest / divisor : floordiv(rest, divisor));
    if (is_mod) return node;
    q.add_term(node, 1);
    return build(q);
  }

  /// a / c or a % c for a simplified scalar a; always defined.
  Expr scalar_div(const Expr& a, int64_t c, bool is_mod, bool trunc) {
    if (Expr r = div_const(a, c, is_mod, trunc); r.defined()) return r;
    Expr d = make_const(a.dtype(), c);
    return is_mod ? (trunc ? a % d : floormod(a, d)) : (trunc ? a / d : floordiv(a, d));
  }

  /// Divisions of Broadcast and Ramp by a broadcast constant c > 0:
  ///   ramp(b, s, n) // c -> ramp(b // c, s/c, n) when c divides s;
  ///   ramp(b, s, n) // c -> xn(b // c) when b % c + s*(n-1) < c (the lanes share a quotient).
  Expr vector_div(const Expr& a, const Expr& b, bool is_mod, bool trunc) {
    auto bb = b.as<BroadcastNode>();
    auto cv = bb ? bb->value.as<IntImmNode>() : nullptr;
    if (!cv || cv->value <= 0) return Expr();
    int64_t c = cv->value;
    int lanes = a.dtype().lanes();
    if (auto ba = a.as<BroadcastNode>()) {
      return broadcast(scalar_div(ba->value, c, is_mod, trunc), lanes);
    }
    auto ra = a.as<RampNode>();
    auto sv = ra ? ra->stride.as<IntImmNode>() : nullptr;
    if (!sv || sv->value < 0) return Expr();
    int64_t s = sv->value;
    if (trunc && !nonnegative(form_of(ra->base))) return Expr();
    if (s % c == 0) {
      if (is_mod) return broadcast(scalar_div(ra->base, c, true, trunc), lanes);
      return make_ramp(scalar_div(ra->base, c, false, trunc), make_const(ra->stride.dtype(), s / c),
                       lanes);
    }
    Expr m = scalar_div(ra->base, c, true, false);
    ConstBounds mb = bounds(form_of(m));
    if (mb.max && *mb.max + s * (lanes - 1) < c) {
      if (is_mod) return ramp(m, ra->stride, lanes);
      return broadcast(scalar_div(ra->base, c, false, trunc), lanes);
    }
    return Expr();
  }

  // ---- min, max ----

  Expr min_max(const Expr& self) {
    bool is_min = self.kind() == ExprKind::kMin;
    auto [a0, b0] = binary_operands(self);
    Expr a = mutate(a0), b = mutate(b0);
    Expr r = min_max_of(is_min, a, b);
    if (r.defined()) return r;
    // Constants go second: min(4, x) -> min(x, 4).
    if (is_ordered_type(a.dtype()) && a.as<IntImmNode>() && !b.as<IntImmNode>()) std::swap(a, b);
    if (a.same_as(a0) && b.same_as(b0)) return self;
    return is_min ? min(a, b) : max(a, b);
  }

  /// min/max of simplified operands when a rule applies; undefined otherwise.
  Expr min_max_of(bool is_min, const Expr& a, const Expr& b) {
    if (expr_deep_equal(a, b)) return a;
    DataType t = a.dtype();
    if (t.is_vector()) {
      auto ba = a.as<BroadcastNode>(), bb = b.as<BroadcastNode>();
      if (!ba || !bb) return Expr();
      Expr r = min_max_of(is_min, ba->value, bb->value);
      if (!r.defined()) r = is_min ? min(ba->value, bb->value) : max(ba->value, bb->value);
      return broadcast(r, t.lanes());
    }
    if (!is_ordered_type(t) || a.dtype() != b.dtype()) return Expr();
    LinearForm d = form_of(a);
    d.add(form_of(b), -1);
    ConstBounds db = d.is_const() ? ConstBounds{d.constant, d.constant} : bounds(d);
    if (db.max && *db.max <= 0) return is_min ? a : b;
    if (db.min && *db.min >= 0) return is_min ? b : a;
    // min(min(x, c1), c2) -> min(x, min(c1, c2))
    ExprKind kind = is_min ? ExprKind::kMin : ExprKind::kMax;
    const Expr& p = a.as<IntImmNode>() ? b : a;
    const Expr& q = a.as<IntImmNode>() ? a : b;
    if (auto c2 = q.as<IntImmNode>(); c2 && p.kind() == kind) {
      auto [x, c1] = binary_operands(p);
      if (auto k = c1.as<IntImmNode>()) {
        int64_t c = is_min ? std::min(k->value, c2->value) : std::max(k->value, c2->value);
        return is_min ? min(x, make_const(t, c)) : max(x, make_const(t, c));
      }
    }
    return Expr();
  }

  // ---- comparisons and logic ----

  Expr compare(const Expr& self) {
    auto [a0, b0] = binary_operands(self);
    Expr a = mutate(a0), b = mutate(b0);
    Expr r = compare_of(self.kind(), a, b);
    if (r.defined()) return expr_deep_equal(r, self) ? self : r;
    if (a.same_as(a0) && b.same_as(b0)) return self;
    return apply(self.kind(), a, b);
  }

  /// `a kind b` for simplified operands when a rule applies; undefined otherwise.
  Expr compare_of(ExprKind kind, const Expr& a, const Expr& b) {
    DataType t = a.dtype();
    if (t.is_vector()) {
      auto ba = a.as<BroadcastNode>(), bb = b.as<BroadcastNode>();
      if (!ba || !bb) return Expr();
      Expr r = compare_of(kind, ba->value, bb->value);
      return broadcast(r.defined() ? r : apply(kind, ba->value, bb->value), t.lanes());
    }
    if (!is_ordered_type(t) || a.dtype() != b.dtype()) {
      if (t.is_integral() && expr_deep_equal(a, b)) {
        bool v = kind == ExprKind::kEQ || kind == ExprKind::kLE || kind == ExprKind::kGE;
        return make_const(kBool, int64_t{v});
      }
      return Expr();
    }
    LinearForm fa = form_of(a), fb = form_of(b);
    LinearForm d = fa;
    d.add(fb, -1);
    ConstBounds db = d.is_const() ? ConstBounds{d.constant, d.constant} : bounds(d);
    if (auto v = decide(kind, db)) return make_const(kBool, int64_t{*v});
    // Cancel what both sides share: x + 3 < y + 3 -> x < y.
    bool share = fa.constant != 0 && fb.constant != 0;
    for (size_t i = 0; i < fa.terms.size() && !share; ++i) {
      for (auto& tb : fb.terms) share |= expr_deep_equal(fa.terms[i].atom, tb.atom);
    }
    if (!share) {
      // Constants go right: 4 < x -> x > 4.
      if (a.as<IntImmNode>() && !b.as<IntImmNode>()) return apply(mirrored(kind), b, a);
      return Expr();
    }
    LinearForm lhs(t), rhs(t);
    for (auto& term : d.terms) {
      if (term.coeff > 0) {
        lhs.terms.push_back(term);
      } else {
        rhs.terms.push_back({term.atom, wneg(term.coeff)});
      }
    }
    if (lhs.terms.empty()) {
      // c < rhs: keep the constant on the right, rhs > c.
      std::swap(lhs, rhs);
      rhs.constant = d.constant;
      kind = mirrored(kind);
    } else {
      rhs.constant = wneg(d.constant);
    }
    return apply(kind, build(lhs), build(rhs));
  }

  /// !a for a simplified a: constants fold, comparisons flip (integers: no NaN to mind).
  Expr negate(const Expr& a) {
    if (is_comparison(a.kind())) {
      auto [x, y] = binary_operands(a);
      if (x.dtype().is_integral() || a.kind() == ExprKind::kEQ || a.kind() == ExprKind::kNE) {
        return apply(negated(a.kind()), x, y);
      }
    }
    return !a;
  }

  Expr logic(const Expr& self) {
    auto [a0, b0] = binary_operands(self);
    Expr a = mutate(a0);
    // Short-circuit on a constant left side without simplifying the right.
    if (auto k = as_const_int(a); k && a.dtype().is_scalar()) {
      bool is_and = self.kind() == ExprKind::kAnd;
      if ((is_and && !*k) || (!is_and && *k)) return a;
      return mutate(b0);
    }
    Expr b = mutate(b0);
    if (expr_deep_equal(a, b)) return a;
    if (a.same_as(a0) && b.same_as(b0)) return self;
    return apply(self.kind(), a, b);
  }

  /// Narrows the domain with what `cond` (simplified) says when it is `truth`: comparisons of a
  /// variable with an expression that does not use it, joined by `and` (or `or` when false).
  void refine(const Expr& cond, bool truth) {
    ExprKind k = cond.kind();
    if ((truth && k == ExprKind::kAnd) || (!truth && k == ExprKind::kOr)) {
      auto [a, b] = binary_operands(cond);
      refine(a, truth);
      refine(b, truth);
      return;
    }
    if (k == ExprKind::kNot) return refine(cond.as<NotNode>()->a, !truth);
    if (!is_comparison(k)) return;
    if (!truth) k = negated(k);
    auto [a, b] = binary_operands(cond);
    if (!is_ordered_type(a.dtype())) return;
    if (auto v = a.as<VarNode>(); v && !uses_var(b, Var(a.node()))) return constrain(v, k, b);
    if (auto v = b.as<VarNode>(); v && !uses_var(a, Var(b.node()))) {
      return constrain(v, mirrored(k), a);
    }
  }

  /// Adds `v kind e` to the domain.
  void constrain(const VarNode* v, ExprKind kind, const Expr& e) {
    auto shifted = [&](int64_t d) {
      LinearForm f = form_of(e);
      f.constant = wadd(f.constant, d);
      return build(f);
    };
    Interval c;
    switch (kind) {
      case ExprKind::kLT:
        c.max = shifted(-1);
        break;
      case ExprKind::kLE:
        c.max = e;
        break;
      case ExprKind::kGT:
        c.min = shifted(1);
        break;
      case ExprKind::kGE:
        c.min = e;
        break;
      case ExprKind::kEQ:
        c = Interval::single_point(e);
        break;
      default:
        return;
    }
    const Interval* cur = lookup(v);
    Interval merged = cur ? intersect(*cur, c) : c;
    bind(v, std::move(merged));
  }

  const VarIntervals* dom_;
  std::unique_ptr<VarIntervals> owned_;  ///< the domain once this simplifier has added to it
  std::vector<std::pair<const VarNode*, std::optional<Interval>>> saved_;
};

}  // namespace

Expr simplify(const Expr& e, const VarIntervals& dom) {
  if (!e.defined()) return e;
  return Simplifier(&dom).mutate(e);
}

Stmt simplify(const Stmt& s, const VarIntervals& dom) {
  if (!s.defined()) return s;
  return Simplifier(&dom).mutate(s);
}

bool can_prove(const Expr& cond, const VarIntervals& dom) { return is_one(simplify(cond, dom)); }

}  // namespace kiln::ir
