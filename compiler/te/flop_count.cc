// Counting a tensor program's operations from its compute stages (flop_count.h).
#include "compiler/te/flop_count.h"

#include <unordered_set>

#include "compiler/ir/bf16.h"
#include "compiler/ir/op.h"

namespace kiln::te {
namespace {

using ir::ExprKind;

/// The operations of one evaluation of an expression (index arithmetic and conditions excluded).
struct OpCounter {
  bool countable = true;  ///< false once a reduction's extent is not a constant

  double ops(const Expr& e) {
    if (!e.defined()) return 0;
    const double lanes = e.dtype().lanes();
    switch (e.kind()) {
#define KILN_COUNTED(T)                   \
  case ExprKind::k##T: {                  \
    const auto* n = e.as<ir::T##Node>();  \
    return lanes + ops(n->a) + ops(n->b); \
  }
      KILN_COUNTED(Add)
      KILN_COUNTED(Sub)
      KILN_COUNTED(Mul)
      KILN_COUNTED(Div)
      KILN_COUNTED(Mod)
      KILN_COUNTED(FloorDiv)
      KILN_COUNTED(FloorMod)
      KILN_COUNTED(Shr)
      KILN_COUNTED(Min)
      KILN_COUNTED(Max)
#undef KILN_COUNTED
      case ExprKind::kCast:
        return ops(e.as<ir::CastNode>()->value);
      case ExprKind::kSelect: {
        const auto* n = e.as<ir::SelectNode>();
        return ops(n->true_value) + ops(n->false_value);
      }
      case ExprKind::kBroadcast:
        return ops(e.as<ir::BroadcastNode>()->value) * lanes;
      case ExprKind::kLet: {
        const auto* n = e.as<ir::LetNode>();
        return ops(n->value) + ops(n->body);
      }
      case ExprKind::kCall: {
        const auto* n = e.as<ir::CallNode>();
        double args = 0;
        for (const Expr& a : n->args) args += ops(a);
        if (n->call_kind != ir::CallKind::kPureIntrinsic) return args;
        // A bf16 pair's dot product is two multiplies and their add (with a sum's combiner, the
        // two multiply-adds it stands for); packing pairs is a conversion, like a cast.
        if (n->name == ir::kBf16x2Dot) return args + 3.0 * lanes;
        if (n->name == ir::kBf16x2Pack) return args;
        return args + (n->name == "fma" ? 2.0 : 1.0) * lanes;
      }
      case ExprKind::kReduce: {
        const auto* n = e.as<ir::ReduceNode>();
        double steps = 1;
        for (const ir::IterVar& r : n->axis) {
          const std::optional<int64_t> extent = ir::as_const_int(r->dom.extent);
          if (!extent) countable = false;
          steps *= extent ? static_cast<double>(*extent) : 0.0;
        }
        return steps * (ops(n->source) + lanes);  // the source, then the combiner
      }
      default:  // constants, variables, reads (their indices are not work), comparisons, logic
        return 0;
    }
  }
};

}  // namespace

std::optional<double> count_flops(const std::vector<Tensor>& outputs) {
  double total = 0;
  std::unordered_set<const TensorNode*> seen;
  std::vector<Tensor> todo = outputs;
  while (!todo.empty()) {  // a worklist, not recursion: a group's chain of stages may be long
    const Tensor t = todo.back();
    todo.pop_back();
    if (!seen.insert(t.get()).second || !t->is_compute()) continue;
    double elements = 1;
    for (const Expr& d : t->shape()) {
      const std::optional<int64_t> n = ir::as_const_int(d);
      if (!n) return std::nullopt;
      elements *= static_cast<double>(*n);
    }
    OpCounter counter;
    const double per_element = counter.ops(t->body);
    if (!counter.countable) return std::nullopt;
    total += elements * per_element;
    for (const Tensor& in : t->inputs()) todo.push_back(in);
  }
  return total;
}

}  // namespace kiln::te
