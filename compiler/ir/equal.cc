// Structural equality of expressions.
#include "compiler/ir/equal.h"

#include "base/error.h"
#include "compiler/ir/op.h"

namespace kiln::ir {

bool expr_deep_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.kind() != b.kind() || a.dtype() != b.dtype()) return false;
  switch (a.kind()) {
    case ExprKind::kIntImm:
      return a.as<IntImmNode>()->value == b.as<IntImmNode>()->value;
    case ExprKind::kFloatImm:
      return a.as<FloatImmNode>()->value == b.as<FloatImmNode>()->value;
    case ExprKind::kStringImm:
      return a.as<StringImmNode>()->value == b.as<StringImmNode>()->value;
    case ExprKind::kVar:
      return false;  // identity, checked above
    case ExprKind::kCast:
      return expr_deep_equal(a.as<CastNode>()->value, b.as<CastNode>()->value);
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kMod:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
    case ExprKind::kMin:
    case ExprKind::kMax:
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      auto [xa, xb] = binary_operands(a);
      auto [ya, yb] = binary_operands(b);
      return expr_deep_equal(xa, ya) && expr_deep_equal(xb, yb);
    }
    case ExprKind::kNot:
      return expr_deep_equal(a.as<NotNode>()->a, b.as<NotNode>()->a);
    case ExprKind::kSelect: {
      auto x = a.as<SelectNode>(), y = b.as<SelectNode>();
      return expr_deep_equal(x->condition, y->condition) &&
             expr_deep_equal(x->true_value, y->true_value) &&
             expr_deep_equal(x->false_value, y->false_value);
    }
    case ExprKind::kLoad: {
      auto x = a.as<LoadNode>(), y = b.as<LoadNode>();
      return x->buffer_var.same_as(y->buffer_var) && expr_deep_equal(x->index, y->index) &&
             expr_deep_equal(x->predicate, y->predicate);
    }
    case ExprKind::kRamp: {
      auto x = a.as<RampNode>(), y = b.as<RampNode>();
      return x->lanes == y->lanes && expr_deep_equal(x->base, y->base) &&
             expr_deep_equal(x->stride, y->stride);
    }
    case ExprKind::kBroadcast: {
      auto x = a.as<BroadcastNode>(), y = b.as<BroadcastNode>();
      return x->lanes == y->lanes && expr_deep_equal(x->value, y->value);
    }
    case ExprKind::kLet: {
      auto x = a.as<LetNode>(), y = b.as<LetNode>();
      return x->var.same_as(y->var) && expr_deep_equal(x->value, y->value) &&
             expr_deep_equal(x->body, y->body);
    }
    case ExprKind::kCall: {
      auto x = a.as<CallNode>(), y = b.as<CallNode>();
      if (x->name != y->name || x->call_kind != y->call_kind || x->args.size() != y->args.size()) {
        return false;
      }
      for (size_t i = 0; i < x->args.size(); ++i) {
        if (!expr_deep_equal(x->args[i], y->args[i])) return false;
      }
      return true;
    }
    case ExprKind::kProducerLoad: {
      auto x = a.as<ProducerLoadNode>(), y = b.as<ProducerLoadNode>();
      if (x->producer != y->producer || x->indices.size() != y->indices.size()) return false;
      for (size_t i = 0; i < x->indices.size(); ++i) {
        if (!expr_deep_equal(x->indices[i], y->indices[i])) return false;
      }
      return true;
    }
    case ExprKind::kReduce: {
      auto x = a.as<ReduceNode>(), y = b.as<ReduceNode>();
      return x->combiner == y->combiner && x->axis == y->axis &&
             expr_deep_equal(x->source, y->source) && expr_deep_equal(x->condition, y->condition);
    }
  }
  return false;
}

}  // namespace kiln::ir
