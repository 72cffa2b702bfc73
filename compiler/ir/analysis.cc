// Expression queries.
#include "compiler/ir/analysis.h"

#include <algorithm>
#include <numeric>

#include "compiler/ir/functor.h"

namespace kiln::ir {

bool has_side_effects(const Expr& e) {
  bool found = false;
  post_order_visit(e, [&](const Object* n) {
    auto c = dynamic_cast<const CallNode*>(n);
    found |= c != nullptr && c->call_kind != CallKind::kPureIntrinsic;
  });
  return found;
}

void split_conjuncts(const Expr& c, std::vector<Expr>* out) {
  if (const auto* a = c.as<AndNode>()) {
    split_conjuncts(a->a, out);
    split_conjuncts(a->b, out);
    return;
  }
  out->push_back(c);
}

int64_t known_multiple(const Expr& e) {
  constexpr int64_t kCap = int64_t{1} << 30;
  switch (e.kind()) {
    case ExprKind::kIntImm: {
      const int64_t v = e.as<IntImmNode>()->value;
      return v == 0 ? kCap : std::min(kCap, v < 0 ? -v : v);
    }
    case ExprKind::kAdd: {
      auto* op = e.as<AddNode>();
      return std::gcd(known_multiple(op->a), known_multiple(op->b));
    }
    case ExprKind::kSub: {
      auto* op = e.as<SubNode>();
      return std::gcd(known_multiple(op->a), known_multiple(op->b));
    }
    case ExprKind::kMul: {
      auto* op = e.as<MulNode>();
      return std::min(kCap, known_multiple(op->a) * known_multiple(op->b));
    }
    case ExprKind::kRamp:
      return known_multiple(e.as<RampNode>()->base);
    case ExprKind::kBroadcast:
      return known_multiple(e.as<BroadcastNode>()->value);
    case ExprKind::kCast: {
      const Expr& v = e.as<CastNode>()->value;
      return e.dtype().is_int() && v.dtype().is_int() ? known_multiple(v) : 1;
    }
    default:
      return 1;
  }
}

}  // namespace kiln::ir
