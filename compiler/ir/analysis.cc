// Expression queries.
#include "compiler/ir/analysis.h"

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

}  // namespace kiln::ir
