// Interval arithmetic over the IR, in two flavours: symbolic (bounds are expressions, for bound
// inference) and constant (bounds are 64-bit integers, for the simplifier's fast decisions).
#include "compiler/ir/interval.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/error.h"
#include "base/int_math.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"

namespace kiln::ir {

Interval Interval::single_point(Expr e) { return {e, e}; }

Interval Interval::everything() { return {}; }

Interval Interval::from_range(const Range& r) {
  KILN_ICHECK(r.min.defined() && r.extent.defined()) << "interval of an undefined range";
  return {simplify(r.min), simplify(r.min + r.extent - 1)};
}

bool Interval::is_single_point() const {
  return min.defined() && max.defined() && (min.same_as(max) || expr_deep_equal(min, max));
}

namespace {

// ---- constant bounds ------------------------------------------------------------------------

using Opt = std::optional<int64_t>;
using i128 = __int128;

Opt narrow(i128 v) {
  if (v < std::numeric_limits<int64_t>::min() || v > std::numeric_limits<int64_t>::max()) {
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

/// The values any expression of type t can take, as far as it is useful to know.
ConstBounds type_bounds(DataType t) {
  if (t.is_bool()) return {0, 1};
  if (t.is_uint()) {
    if (t.bits() >= 64) return {0, std::nullopt};
    return {0, (int64_t{1} << t.bits()) - 1};
  }
  if (t.is_int() && t.bits() <= 16) {
    return {-(int64_t{1} << (t.bits() - 1)), (int64_t{1} << (t.bits() - 1)) - 1};
  }
  return {};
}

/// Unsigned and narrow types wrap around: bounds outside the type's range mean "anything".
ConstBounds fit(DataType t, ConstBounds b) {
  if (t.is_float() || t.is_handle() || (t.is_int() && t.bits() > 16)) return b;
  ConstBounds r = type_bounds(t);
  bool inside = b.min && b.max && (!r.min || *b.min >= *r.min) && (!r.max || *b.max <= *r.max);
  return inside ? b : r;
}

class ConstEval {
 public:
  explicit ConstEval(const VarIntervals& dom) : dom_(dom) {}

  ConstBounds eval(const Expr& e) {
    DataType t = e.dtype();
    if (!t.is_integral()) return {};
    return fit(t, eval_node(e));
  }

 private:
  ConstBounds eval_node(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        int64_t v = e.as<IntImmNode>()->value;
        return {v, v};
      }
      case ExprKind::kVar:
        return var(e.as<VarNode>());
      case ExprKind::kCast: {
        auto op = e.as<CastNode>();
        if (!op->value.dtype().is_integral()) return type_bounds(e.dtype());
        return eval(op->value);  // fit() turns a narrowing that may wrap into the type's range
      }
      case ExprKind::kAdd: {
        auto op = e.as<AddNode>();
        ConstBounds a = eval(op->a), b = eval(op->b);
        return {add(a.min, b.min), add(a.max, b.max)};
      }
      case ExprKind::kSub: {
        auto op = e.as<SubNode>();
        ConstBounds a = eval(op->a), b = eval(op->b);
        return {sub(a.min, b.max), sub(a.max, b.min)};
      }
      case ExprKind::kMul: {
        auto op = e.as<MulNode>();
        return mul(eval(op->a), eval(op->b));
      }
      case ExprKind::kDiv:
        return div(e.as<DivNode>()->a, e.as<DivNode>()->b, /*floor=*/false);
      case ExprKind::kFloorDiv:
        return div(e.as<FloorDivNode>()->a, e.as<FloorDivNode>()->b, /*floor=*/true);
      case ExprKind::kMod:
        return mod(e.as<ModNode>()->a, e.as<ModNode>()->b, /*floor=*/false);
      case ExprKind::kFloorMod:
        return mod(e.as<FloorModNode>()->a, e.as<FloorModNode>()->b, /*floor=*/true);
      case ExprKind::kMin: {
        auto op = e.as<MinNode>();
        ConstBounds a = eval(op->a), b = eval(op->b);
        return {a.min && b.min ? Opt(std::min(*a.min, *b.min)) : std::nullopt,
                a.max && b.max ? Opt(std::min(*a.max, *b.max)) : (a.max ? a.max : b.max)};
      }
      case ExprKind::kMax: {
        auto op = e.as<MaxNode>();
        ConstBounds a = eval(op->a), b = eval(op->b);
        return {a.min && b.min ? Opt(std::max(*a.min, *b.min)) : (a.min ? a.min : b.min),
                a.max && b.max ? Opt(std::max(*a.max, *b.max)) : std::nullopt};
      }
      case ExprKind::kShr: {
        auto op = e.as<ShrNode>();
        ConstBounds a = eval(op->a), b = eval(op->b);
        if (!b.min || !b.max || *b.min != *b.max || *b.min < 0 || *b.min > 62) return {};
        return {a.min ? Opt(*a.min >> *b.min) : std::nullopt,
                a.max ? Opt(*a.max >> *b.min) : std::nullopt};
      }
      case ExprKind::kSelect: {
        auto op = e.as<SelectNode>();
        ConstBounds c = eval(op->condition);
        if (c.min && *c.min > 0) return eval(op->true_value);
        if (c.max && *c.max == 0) return eval(op->false_value);
        ConstBounds a = eval(op->true_value), b = eval(op->false_value);
        return {a.min && b.min ? Opt(std::min(*a.min, *b.min)) : std::nullopt,
                a.max && b.max ? Opt(std::max(*a.max, *b.max)) : std::nullopt};
      }
      case ExprKind::kBroadcast:
        return eval(e.as<BroadcastNode>()->value);
      case ExprKind::kRamp: {
        auto op = e.as<RampNode>();
        ConstBounds b = eval(op->base), s = eval(op->stride);
        Opt lo = s.min ? add(b.min, narrow(i128{std::min<int64_t>(0, *s.min)} * (op->lanes - 1)))
                       : std::nullopt;
        Opt hi = s.max ? add(b.max, narrow(i128{std::max<int64_t>(0, *s.max)} * (op->lanes - 1)))
                       : std::nullopt;
        return {lo, hi};
      }
      case ExprKind::kLet: {
        auto op = e.as<LetNode>();
        lets_.push_back({op->var.get(), eval(op->value)});
        ConstBounds r = eval(op->body);
        lets_.pop_back();
        return r;
      }
      default:
        return type_bounds(e.dtype());
    }
  }

  ConstBounds var(const VarNode* v) {
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) {
      if (it->first == v) return it->second;
    }
    auto it = dom_.find(v);
    if (it == dom_.end() || expanding_.size() > 16 ||
        std::find(expanding_.begin(), expanding_.end(), v) != expanding_.end()) {
      return type_bounds(v->dtype);
    }
    expanding_.push_back(v);
    ConstBounds r;
    if (it->second.min.defined()) r.min = eval(it->second.min).min;
    if (it->second.max.defined()) r.max = eval(it->second.max).max;
    expanding_.pop_back();
    return r;
  }

  static Opt add(Opt a, Opt b) { return a && b ? narrow(i128{*a} + *b) : std::nullopt; }
  static Opt sub(Opt a, Opt b) { return a && b ? narrow(i128{*a} - *b) : std::nullopt; }

  static ConstBounds scale(const ConstBounds& a, int64_t c) {
    auto times = [c](Opt x) { return x ? narrow(i128{*x} * c) : std::nullopt; };
    if (c == 0) return {0, 0};
    return c > 0 ? ConstBounds{times(a.min), times(a.max)}
                 : ConstBounds{times(a.max), times(a.min)};
  }

  static ConstBounds mul(const ConstBounds& a, const ConstBounds& b) {
    if (b.min && b.max && *b.min == *b.max) return scale(a, *b.min);
    if (a.min && a.max && *a.min == *a.max) return scale(b, *a.min);
    if (a.min && a.max && b.min && b.max) {
      i128 c[4] = {i128{*a.min} * *b.min, i128{*a.min} * *b.max, i128{*a.max} * *b.min,
                   i128{*a.max} * *b.max};
      return {narrow(*std::min_element(c, c + 4)), narrow(*std::max_element(c, c + 4))};
    }
    if (a.min && b.min && *a.min >= 0 && *b.min >= 0) {
      return {narrow(i128{*a.min} * *b.min),
              a.max && b.max ? narrow(i128{*a.max} * *b.max) : std::nullopt};
    }
    return {};
  }

  static int64_t divide(int64_t a, int64_t b, bool floor) {
    return floor ? floor_div(a, b) : a / b;
  }

  ConstBounds div(const Expr& x, const Expr& y, bool floor) {
    ConstBounds a = eval(x), b = eval(y);
    auto q = [&](Opt v, int64_t d) { return v ? Opt(divide(*v, d, floor)) : std::nullopt; };
    if (b.min && b.max && *b.min == *b.max) {
      int64_t c = *b.min;
      if (c == 0) return {};
      if (c > 0) return {q(a.min, c), q(a.max, c)};
      if (c == -1) return {};  // may overflow
      return {q(a.max, c), q(a.min, c)};
    }
    if (b.min && *b.min > 0 && a.min && a.max) {
      // Monotone in both operands for a positive divisor: the extremes are at the corners.
      if (!b.max) {
        return {std::min<int64_t>(0, q(a.min, *b.min).value()),
                std::max<int64_t>(0, q(a.max, *b.min).value())};
      }
      int64_t c[4] = {divide(*a.min, *b.min, floor), divide(*a.min, *b.max, floor),
                      divide(*a.max, *b.min, floor), divide(*a.max, *b.max, floor)};
      return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
    }
    return {};
  }

  ConstBounds mod(const Expr& x, const Expr& y, bool floor) {
    ConstBounds a = eval(x), b = eval(y);
    if (!b.min || !b.max) return {};
    int64_t m;
    if (*b.min == *b.max) {
      m = *b.min;
      if (m == 0 || m == std::numeric_limits<int64_t>::min()) return {};
      if (floor && m < 0) return {m + 1, 0};
      m = m < 0 ? -m : m;  // truncmod's sign follows the dividend
      // Within one period the remainder is exact.
      if (a.min && a.max && divide(*a.min, m, floor) == divide(*a.max, m, floor)) {
        int64_t k = divide(*a.min, m, floor) * m;
        return {*a.min - k, *a.max - k};
      }
    } else if (*b.min > 0) {
      m = *b.max;
    } else {
      return {};
    }
    if (floor || (a.min && *a.min >= 0)) {
      int64_t hi = m - 1;
      if (a.min && *a.min >= 0 && a.max) hi = std::min(hi, *a.max);
      return {0, hi};
    }
    int64_t lo = -(m - 1), hi = m - 1;
    if (a.min) lo = std::max(lo, std::min<int64_t>(*a.min, 0));
    if (a.max) hi = std::min(hi, std::max<int64_t>(*a.max, 0));
    return {lo, hi};
  }

  const VarIntervals& dom_;
  std::vector<std::pair<const VarNode*, ConstBounds>> lets_;
  std::vector<const VarNode*> expanding_;
};

// ---- symbolic bounds ------------------------------------------------------------------------

Expr add_b(const Expr& a, const Expr& b) { return a.defined() && b.defined() ? a + b : Expr(); }
Expr sub_b(const Expr& a, const Expr& b) { return a.defined() && b.defined() ? a - b : Expr(); }

class SymEval {
 public:
  explicit SymEval(const VarIntervals& dom) : dom_(dom) {}

  Interval eval(const Expr& e) {
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
      case ExprKind::kStringImm:
        return point(e);
      case ExprKind::kVar:
        return var(e);
      case ExprKind::kCast:
        return cast_(e);
      case ExprKind::kAdd: {
        auto op = e.as<AddNode>();
        Interval a = eval(op->a), b = eval(op->b);
        if (is_point(a) && is_point(b)) {
          return point(same(e, op->a, a, op->b, b) ? e : a.min + b.min);
        }
        return {add_b(a.min, b.min), add_b(a.max, b.max)};
      }
      case ExprKind::kSub: {
        auto op = e.as<SubNode>();
        Interval a = eval(op->a), b = eval(op->b);
        if (is_point(a) && is_point(b)) {
          return point(same(e, op->a, a, op->b, b) ? e : a.min - b.min);
        }
        return {sub_b(a.min, b.max), sub_b(a.max, b.min)};
      }
      case ExprKind::kMul:
        return mul(e);
      case ExprKind::kDiv:
        return div(e, /*floor=*/false);
      case ExprKind::kFloorDiv:
        return div(e, /*floor=*/true);
      case ExprKind::kMod:
        return mod(e, /*floor=*/false);
      case ExprKind::kFloorMod:
        return mod(e, /*floor=*/true);
      case ExprKind::kShr: {
        auto op = e.as<ShrNode>();
        Interval a = eval(op->a), b = eval(op->b);
        if (is_point(a) && is_point(b))
          return point(same(e, op->a, a, op->b, b) ? e : shift_right(a.min, b.min));
        return unknown(e);
      }
      case ExprKind::kMin:
      case ExprKind::kMax:
        return minmax(e);
      case ExprKind::kEQ:
        return compare<EQNode>(e);
      case ExprKind::kNE:
        return compare<NENode>(e);
      case ExprKind::kLT:
        return compare<LTNode>(e);
      case ExprKind::kLE:
        return compare<LENode>(e);
      case ExprKind::kGT:
        return compare<GTNode>(e);
      case ExprKind::kGE:
        return compare<GENode>(e);
      case ExprKind::kAnd:
        return compare<AndNode>(e);
      case ExprKind::kOr:
        return compare<OrNode>(e);
      case ExprKind::kNot: {
        Interval a = eval(e.as<NotNode>()->a);
        if (is_point(a) && e.dtype().is_scalar()) {
          return point(a.min.same_as(e.as<NotNode>()->a) ? e : !a.min);
        }
        return bool_range(e);
      }
      case ExprKind::kSelect:
        return select_(e);
      case ExprKind::kLoad: {
        auto op = e.as<LoadNode>();
        if (e.dtype().is_scalar()) {
          Interval i = eval(op->index);
          Interval p = op->predicate.defined() ? eval(op->predicate) : Interval();
          if (is_point(i) && (!op->predicate.defined() || is_point(p))) {
            if (i.min.same_as(op->index) &&
                (!op->predicate.defined() || p.min.same_as(op->predicate))) {
              return point(e);
            }
            return point(load(op->dtype, op->buffer_var, i.min, p.min));
          }
        }
        return unknown(e);
      }
      case ExprKind::kRamp: {
        auto op = e.as<RampNode>();
        Interval first = eval(op->base);
        Interval last =
            eval(op->base + op->stride * make_const(op->stride.dtype(), int64_t{op->lanes - 1}));
        int s = sign(op->stride);
        if (s > 0) return {first.min, last.max};
        if (s < 0) return {last.min, first.max};
        return hull(first, last);
      }
      case ExprKind::kBroadcast:
        return eval(e.as<BroadcastNode>()->value);
      case ExprKind::kLet: {
        auto op = e.as<LetNode>();
        lets_.push_back({op->var.get(), eval(op->value)});
        Interval r = eval(op->body);
        lets_.pop_back();
        return r;
      }
      case ExprKind::kCall: {
        auto op = e.as<CallNode>();
        if (op->call_kind != CallKind::kPureIntrinsic || !e.dtype().is_scalar()) return unknown(e);
        std::vector<Expr> args;
        bool changed = false;
        for (auto& a : op->args) {
          Interval i = eval(a);
          if (!is_point(i)) return unknown(e);
          changed |= !i.min.same_as(a);
          args.push_back(i.min);
        }
        return point(changed ? call(op->dtype, op->name, std::move(args), op->call_kind) : e);
      }
      case ExprKind::kProducerLoad: {
        auto op = e.as<ProducerLoadNode>();
        std::vector<Expr> idx;
        bool changed = false;
        for (auto& a : op->indices) {
          Interval i = eval(a);
          if (!is_point(i)) return unknown(e);
          changed |= !i.min.same_as(a);
          idx.push_back(i.min);
        }
        return point(changed ? producer_load(op->producer, std::move(idx)) : e);
      }
      case ExprKind::kReduce: {
        bool free = !uses_var(e, [&](const VarNode* v) { return dom_.count(v) || find_let(v); });
        return free && e.dtype().is_scalar() ? point(e) : unknown(e);
      }
    }
    return unknown(e);  // every kind is handled above (-Wswitch says so when one is added)
  }

 private:
  static bool is_point(const Interval& i) { return i.min.defined() && i.min.same_as(i.max); }
  static Interval point(const Expr& e) { return {e, e}; }
  /// Whether a binary node's operands evaluated to themselves (then the node is its own point).
  static bool same(const Expr& e, const Expr& a, const Interval& ia, const Expr& b,
                   const Interval& ib) {
    return e.dtype().is_scalar() && ia.min.same_as(a) && ib.min.same_as(b);
  }
  static Interval bool_range(const Expr& e) {
    DataType t = e.dtype().element_of();
    return {make_const(t, int64_t{0}), make_const(t, int64_t{1})};
  }
  static Interval unknown(const Expr& e) {
    return e.dtype().is_bool() ? bool_range(e) : Interval();
  }
  static Interval hull(const Interval& a, const Interval& b) {
    return {a.min.defined() && b.min.defined() ? min(a.min, b.min) : Expr(),
            a.max.defined() && b.max.defined() ? max(a.max, b.max) : Expr()};
  }

  /// +1 when e >= 0 provably, -1 when e <= 0, 0 when unknown.
  int sign(const Expr& e) {
    if (!e.defined()) return 0;
    if (auto f = as_const_float(e)) return *f >= 0 ? 1 : -1;
    ConstBounds b = eval_const_bounds(e, dom_);
    if (b.min && *b.min >= 0) return 1;
    if (b.max && *b.max <= 0) return -1;
    return 0;
  }
  bool positive(const Expr& e) {
    if (auto f = as_const_float(e)) return *f > 0;
    ConstBounds b = eval_const_bounds(e, dom_);
    return b.min && *b.min > 0;
  }

  const Interval* find_let(const VarNode* v) const {
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) {
      if (it->first == v) return &it->second;
    }
    return nullptr;
  }

  Interval var(const Expr& e) {
    auto v = e.as<VarNode>();
    if (auto l = find_let(v)) return *l;
    auto it = dom_.find(v);
    if (it == dom_.end() || expanding_.size() > 16 ||
        std::find(expanding_.begin(), expanding_.end(), v) != expanding_.end()) {
      return point(e);
    }
    const Interval& d = it->second;
    expanding_.push_back(v);
    Interval r;
    if (d.min.defined() && d.min.same_as(d.max)) {
      r = eval(d.min);
    } else {
      if (d.min.defined()) r.min = eval(d.min).min;
      if (d.max.defined()) r.max = eval(d.max).max;
    }
    expanding_.pop_back();
    return r;
  }

  Interval cast_(const Expr& e) {
    auto op = e.as<CastNode>();
    Interval v = eval(op->value);
    DataType to = e.dtype().element_of(), from = op->value.dtype().element_of();
    if (is_point(v) && e.dtype().is_scalar()) {
      return point(v.min.same_as(op->value) ? e : cast(to, v.min));
    }
    if (to.is_bool()) return bool_range(e);
    bool monotone = to.is_float() || from.is_float() || from.is_bool() ||
                    (from.code() == to.code() && to.bits() >= from.bits()) ||
                    (from.is_uint() && to.is_int() && to.bits() > from.bits());
    if (!monotone) return {};
    return {v.min.defined() ? cast(to, v.min) : Expr(), v.max.defined() ? cast(to, v.max) : Expr()};
  }

  /// [a.min*c, a.max*c] or reversed, for a point c of known sign.
  static Interval scale(const Interval& a, const Expr& c, int s) {
    auto times = [&](const Expr& x) { return x.defined() ? x * c : Expr(); };
    if (is_zero(c)) return point(make_zero(c.dtype()));
    return s > 0 ? Interval{times(a.min), times(a.max)} : Interval{times(a.max), times(a.min)};
  }

  Interval mul(const Expr& e) {
    auto op = e.as<MulNode>();
    Interval a = eval(op->a), b = eval(op->b);
    if (is_point(a) && is_point(b)) return point(same(e, op->a, a, op->b, b) ? e : a.min * b.min);
    if (is_point(b)) {
      if (int s = sign(b.min)) return scale(a, b.min, s);
    }
    if (is_point(a)) {
      if (int s = sign(a.min)) return scale(b, a.min, s);
    }
    auto ca = as_const_int(a.min), cA = as_const_int(a.max);
    auto cb = as_const_int(b.min), cB = as_const_int(b.max);
    if (ca && cA && cb && cB) {
      int64_t c[4] = {*ca * *cb, *ca * *cB, *cA * *cb, *cA * *cB};
      DataType t = e.dtype().element_of();
      return {make_const(t, *std::min_element(c, c + 4)),
              make_const(t, *std::max_element(c, c + 4))};
    }
    if (sign(a.min) > 0 && sign(b.min) > 0) {
      return {a.min * b.min, a.max.defined() && b.max.defined() ? a.max * b.max : Expr()};
    }
    return {};
  }

  Interval div(const Expr& e, bool floor) {
    const Expr& x = floor ? e.as<FloorDivNode>()->a : e.as<DivNode>()->a;
    const Expr& y = floor ? e.as<FloorDivNode>()->b : e.as<DivNode>()->b;
    auto q = [floor](const Expr& n, const Expr& d) {
      return n.defined() ? (floor ? floordiv(n, d) : n / d) : Expr();
    };
    Interval a = eval(x), b = eval(y);
    if (is_point(a) && is_point(b)) {
      return point(same(e, x, a, y, b) ? e : q(a.min, b.min));
    }
    if (is_point(b) && !is_zero(b.min)) {
      if (positive(b.min)) return {q(a.min, b.min), q(a.max, b.min)};
      auto c = as_const_int(b.min);
      if (c && *c < -1) return {q(a.max, b.min), q(a.min, b.min)};
    }
    auto ca = as_const_int(a.min), cA = as_const_int(a.max);
    auto cb = as_const_int(b.min), cB = as_const_int(b.max);
    if (ca && cA && cb && cB && *cb > 0) {
      DataType t = e.dtype().element_of();
      auto d = [&](int64_t n, int64_t m) {
        return floor ? (n / m - ((n % m != 0) && (n < 0))) : n / m;
      };
      int64_t c[4] = {d(*ca, *cb), d(*ca, *cB), d(*cA, *cb), d(*cA, *cB)};
      return {make_const(t, *std::min_element(c, c + 4)),
              make_const(t, *std::max_element(c, c + 4))};
    }
    return {};
  }

  Interval mod(const Expr& e, bool floor) {
    const Expr& x = floor ? e.as<FloorModNode>()->a : e.as<ModNode>()->a;
    const Expr& y = floor ? e.as<FloorModNode>()->b : e.as<ModNode>()->b;
    Interval a = eval(x), b = eval(y);
    if (is_point(a) && is_point(b)) {
      return point(same(e, x, a, y, b) ? e : (floor ? floormod(a.min, b.min) : a.min % b.min));
    }
    DataType t = e.dtype().element_of();
    bool nonneg = sign(a.min) > 0;
    auto c = is_point(b) ? as_const_int(b.min) : std::nullopt;
    if (c && *c > 0 && (floor || nonneg)) {
      // Exact when the range lies within one period.
      if (a.min.defined() && a.max.defined()) {
        Expr k1 = simplify(floordiv(a.min, b.min)), k2 = simplify(floordiv(a.max, b.min));
        if (expr_deep_equal(k1, k2)) return {a.min - k1 * b.min, a.max - k1 * b.min};
      }
      Expr hi = make_const(t, *c - 1);
      if (nonneg && a.max.defined()) hi = min(hi, a.max);
      return {make_zero(t), hi};
    }
    if (c && *c > 0) {
      return {make_const(t, -(*c - 1)), make_const(t, *c - 1)};
    }
    if (is_point(b) && positive(b.min) && (floor || nonneg)) {
      return {make_zero(t), b.min - 1};
    }
    if (!is_point(b) && b.max.defined() && positive(b.min) && (floor || nonneg)) {
      return {make_zero(t), b.max - 1};
    }
    return {};
  }

  Interval minmax(const Expr& e) {
    bool is_min = e.kind() == ExprKind::kMin;
    const Expr& x = is_min ? e.as<MinNode>()->a : e.as<MaxNode>()->a;
    const Expr& y = is_min ? e.as<MinNode>()->b : e.as<MaxNode>()->b;
    Interval a = eval(x), b = eval(y);
    if (is_point(a) && is_point(b)) {
      return point(same(e, x, a, y, b) ? e : (is_min ? min(a.min, b.min) : max(a.min, b.min)));
    }
    auto both = [&](const Expr& p, const Expr& q) {
      return p.defined() && q.defined() ? (is_min ? min(p, q) : max(p, q)) : Expr();
    };
    auto either = [&](const Expr& p, const Expr& q) {
      if (!p.defined()) return q;
      if (!q.defined()) return p;
      return is_min ? min(p, q) : max(p, q);
    };
    // min: -inf wins below, +inf loses above; max the other way round.
    if (is_min) return {both(a.min, b.min), either(a.max, b.max)};
    return {either(a.min, b.min), both(a.max, b.max)};
  }

  template <typename N>
  Interval compare(const Expr& e) {
    auto op = e.as<N>();
    Interval a = eval(op->a), b = eval(op->b);
    if (is_point(a) && is_point(b) && e.dtype().is_scalar()) {
      if (same(e, op->a, a, op->b, b)) return point(e);
      Expr r;
      switch (e.kind()) {
        case ExprKind::kEQ:
          r = a.min == b.min;
          break;
        case ExprKind::kNE:
          r = a.min != b.min;
          break;
        case ExprKind::kLT:
          r = a.min < b.min;
          break;
        case ExprKind::kLE:
          r = a.min <= b.min;
          break;
        case ExprKind::kGT:
          r = a.min > b.min;
          break;
        case ExprKind::kGE:
          r = a.min >= b.min;
          break;
        case ExprKind::kAnd:
          r = a.min && b.min;
          break;
        default:
          r = a.min || b.min;
          break;
      }
      return point(r);
    }
    return bool_range(e);
  }

  Interval select_(const Expr& e) {
    auto op = e.as<SelectNode>();
    Interval c = eval(op->condition);
    if (is_point(c)) {
      if (auto k = as_const_int(c.min)) return eval(*k ? op->true_value : op->false_value);
    }
    Interval t = eval(op->true_value), f = eval(op->false_value);
    if (is_point(c) && is_point(t) && is_point(f) && e.dtype().is_scalar()) {
      bool unchanged = c.min.same_as(op->condition) && t.min.same_as(op->true_value) &&
                       f.min.same_as(op->false_value);
      return point(unchanged ? e : select(c.min, t.min, f.min));
    }
    return hull(t, f);
  }

  const VarIntervals& dom_;
  std::vector<std::pair<const VarNode*, Interval>> lets_;
  std::vector<const VarNode*> expanding_;
};

Expr simplify_bound(const Expr& e) { return e.defined() ? simplify(e) : e; }

}  // namespace

ConstBounds eval_const_bounds(const Expr& e, const VarIntervals& dom) {
  if (!e.defined()) return {};
  return ConstEval(dom).eval(e);
}

Interval eval_interval_raw(const Expr& e, const VarIntervals& dom) {
  KILN_ICHECK(e.defined()) << "interval of an undefined expression";
  return SymEval(dom).eval(e);
}

Interval eval_interval(const Expr& e, const VarIntervals& dom) {
  Interval r = eval_interval_raw(simplify(e, dom), dom);
  if (r.min.defined() && r.min.same_as(r.max)) return Interval::single_point(simplify(r.min));
  return {simplify_bound(r.min), simplify_bound(r.max)};
}

Interval union_of(const Interval& a, const Interval& b) {
  auto pick = [](const Expr& x, const Expr& y, bool is_min) -> Expr {
    if (!x.defined() || !y.defined()) return Expr();
    if (x.same_as(y) || expr_deep_equal(x, y)) return x;
    return simplify(is_min ? min(x, y) : max(x, y));
  };
  return {pick(a.min, b.min, true), pick(a.max, b.max, false)};
}

Interval intersect(const Interval& a, const Interval& b) {
  auto pick = [](const Expr& x, const Expr& y, bool is_min) -> Expr {
    if (!x.defined()) return y;
    if (!y.defined()) return x;
    if (x.same_as(y) || expr_deep_equal(x, y)) return x;
    return simplify(is_min ? min(x, y) : max(x, y));
  };
  return {pick(a.min, b.min, false), pick(a.max, b.max, true)};
}

Range to_range(const Interval& iv) {
  KILN_ICHECK(iv.min.defined() && iv.max.defined()) << "range of an unbounded interval";
  return Range(iv.min, simplify(iv.max - iv.min + 1));
}

std::optional<int64_t> const_min(const Expr& e, const VarIntervals& dom) {
  Expr s = simplify(e, dom);
  if (auto c = as_const_int(s)) return c;
  if (auto b = eval_const_bounds(s, dom).min) return b;
  if (dom.empty()) return std::nullopt;
  Interval iv = eval_interval_raw(s, dom);
  return iv.min.defined() ? as_const_int(simplify(iv.min)) : std::nullopt;
}

std::optional<int64_t> const_max(const Expr& e, const VarIntervals& dom) {
  Expr s = simplify(e, dom);
  if (auto c = as_const_int(s)) return c;
  if (auto b = eval_const_bounds(s, dom).max) return b;
  if (dom.empty()) return std::nullopt;
  Interval iv = eval_interval_raw(s, dom);
  return iv.max.defined() ? as_const_int(simplify(iv.max)) : std::nullopt;
}

}  // namespace kiln::ir
