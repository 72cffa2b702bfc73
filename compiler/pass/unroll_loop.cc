// Loop unrolling: copies of the body with the loop variable replaced by constants.
#include "compiler/pass/unroll_loop.h"

#include <vector>

#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/substitute.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

bool contains_loop(const Stmt& s) {
  bool found = false;
  post_order_visit(s,
                   [&](const Object* n) { found |= dynamic_cast<const ForNode*>(n) != nullptr; });
  return found;
}

class LoopUnroller : public IRMutator {
 public:
  explicit LoopUnroller(int auto_max_step) : auto_max_step_(auto_max_step) {}
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const ForNode* op, const Stmt& self) override {
    bool unroll = op->for_kind == ForKind::kUnrolled || is_auto_unrolled(op);
    Stmt s = IRMutator::mutate_(op, self);  // inner loops first
    if (!unroll) return s;
    auto f = s.as<ForNode>();
    auto extent = f->extent.as<IntImmNode>();
    if (extent == nullptr)
      return for_loop(f->loop_var, f->min, f->extent, ForKind::kSerial, f->body);
    DataType t = f->loop_var.dtype();
    std::vector<Stmt> copies;
    for (int64_t i = 0; i < extent->value; ++i) {
      Expr value = cast(t, f->min) + make_const(t, i);
      copies.push_back(substitute(f->body, {{f->loop_var.get(), value}}));
    }
    return seq(std::move(copies));
  }

 private:
  /// An innermost serial loop (in the input) short enough for auto_max_step_.
  bool is_auto_unrolled(const ForNode* op) const {
    auto extent = op->extent.as<IntImmNode>();
    return auto_max_step_ > 0 && op->for_kind == ForKind::kSerial && extent != nullptr &&
           extent->value <= auto_max_step_ && !contains_loop(op->body);
  }

  const int auto_max_step_;
};

}  // namespace

ir::Stmt unroll_loops(const ir::Stmt& s, int auto_max_step) {
  return LoopUnroller(auto_max_step).mutate(s);
}

}  // namespace kiln::pass
