// Symbolic interval analysis: the bounds of an expression when some of its variables range over
// intervals. Bound inference uses it to find the region of a tensor that a loop nest touches (for
// `yo*8 + yi` with yi in [0, 7] the region is [yo*8, yo*8 + 7]); the simplifier uses it to decide
// comparisons, min/max and divisions.
//
// Variables that are not in the domain are symbolic constants and stay as themselves in the
// bounds. Values the analysis cannot see through (loads, calls) are unbounded unless they do not
// depend on the domain, in which case they are single points of themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "compiler/ir/expr.h"

namespace kiln::ir {

/// The inclusive interval [min, max]. An undefined bound is unbounded: min undefined is -inf,
/// max undefined is +inf. Bounds of a vector expression are scalars covering every lane.
struct Interval {
  Expr min, max;

  /// [e, e]
  static Interval single_point(Expr e);
  /// (-inf, +inf)
  static Interval everything();
  /// [r.min, r.min + r.extent - 1], simplified.
  static Interval from_range(const Range& r);

  bool has_lower_bound() const { return min.defined(); }
  bool has_upper_bound() const { return max.defined(); }
  bool is_everything() const { return !min.defined() && !max.defined(); }
  /// Whether min and max are defined and the same expression (one node, or structurally equal).
  bool is_single_point() const;
};

/// The interval each variable of a domain ranges over; variables compare by identity.
using VarIntervals = std::unordered_map<const VarNode*, Interval>;

/// Bounds of `e` when every variable in `dom` ranges over its interval (bounds of those intervals
/// may mention other variables of `dom`; they are expanded in turn). The bounds are simplified.
Interval eval_interval(const Expr& e, const VarIntervals& dom);

/// The interval arithmetic of eval_interval on `e` as it is written: `e` is not simplified first,
/// and the bounds are built with op.h's constant-folding operators but not simplified. The
/// building block of eval_interval and of the simplifier's symbolic proofs; prefer eval_interval.
Interval eval_interval_raw(const Expr& e, const VarIntervals& dom);

/// The smallest interval holding both (symbolic min/max, simplified; picked directly when the
/// bounds are provably ordered).
Interval union_of(const Interval& a, const Interval& b);
/// The interval of points in both.
Interval intersect(const Interval& a, const Interval& b);

/// [iv.min, iv.max] as the Range (min, max - min + 1), simplified. Both bounds must be defined.
Range to_range(const Interval& iv);

/// Constant bounds of an integer expression, found by plain arithmetic on 64-bit integers (no
/// simplification, no allocation; an overflow makes that side unbounded). Fast and conservative:
/// correlated terms (x - x) are not cancelled, so simplify first when that matters.
struct ConstBounds {
  std::optional<int64_t> min, max;
};
ConstBounds eval_const_bounds(const Expr& e, const VarIntervals& dom);

/// The smallest / largest value `e` can take over `dom`, when a constant bound can be proven.
std::optional<int64_t> const_min(const Expr& e, const VarIntervals& dom = {});
std::optional<int64_t> const_max(const Expr& e, const VarIntervals& dom = {});

}  // namespace kiln::ir
