// Tensorized nests to the intrinsics' statements (lower_tensor_intrin.h).
#include "compiler/pass/lower_tensor_intrin.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/tensor_intrin.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class IntrinLowerer : public IRMutator {
 public:
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const AllocateNode* op, const Stmt& self) override {
    scopes_[op->buffer_var.get()] = op->scope;
    return IRMutator::mutate_(op, self);
  }

  Stmt mutate_(const AttrStmtNode* op, const Stmt& self) override {
    if (op->key != attr::kTensorize) return IRMutator::mutate_(op, self);
    auto intrin = std::dynamic_pointer_cast<const TensorIntrinLoweringNode>(op->node);
    KILN_ICHECK(intrin != nullptr)
        << "lower_tensor_intrin: a tensorize attribute without an intrinsic";
    const auto* part = op->value.as<StringImmNode>();
    const auto* ev = op->body.as<EvaluateNode>();
    const auto* call = ev ? ev->value.as<CallNode>() : nullptr;
    KILN_ICHECK(part && call && call->name == kTensorizeArgs)
        << "lower_tensor_intrin: malformed tensorize statement of '" << intrin->name << "'";
    std::vector<IntrinBuffer> bufs;
    for (size_t i = 0; i < call->args.size();) {
      const auto rank = as_const_int(call->args[i]);
      if (rank && *rank == -1) {  // an input the reset does not see
        bufs.emplace_back();
        ++i;
        continue;
      }
      KILN_ICHECK(rank && i + 2 + static_cast<size_t>(*rank) <= call->args.size())
          << "lower_tensor_intrin: malformed arguments of '" << intrin->name << "'";
      const auto* base = call->args[i + 1].as<LoadNode>();
      KILN_ICHECK(base) << "lower_tensor_intrin: a region of '" << intrin->name
                        << "' is not a flat load";
      IntrinBuffer b;
      b.data = base->buffer_var;
      b.elem_offset = simplify(base->index);
      b.dtype = base->dtype;
      b.name = base->buffer_var.name();
      auto sc = scopes_.find(base->buffer_var.get());
      b.scope = sc == scopes_.end() ? "global" : sc->second;
      for (int64_t d = 0; d < *rank; ++d) {
        const auto* step = call->args[i + 2 + static_cast<size_t>(d)].as<LoadNode>();
        KILN_ICHECK(step && step->buffer_var.same_as(base->buffer_var))
            << "lower_tensor_intrin: a stride of '" << intrin->name
            << "' is not a load of its buffer";
        b.strides.push_back(simplify(step->index - base->index));
      }
      bufs.push_back(std::move(b));
      i += 2 + static_cast<size_t>(*rank);
    }
    KILN_ICHECK(!bufs.empty()) << "lower_tensor_intrin: '" << intrin->name << "' has no output";
    IntrinBuffer out = bufs.back();
    bufs.pop_back();
    IntrinStmts stmts = intrin->lower(bufs, out);
    const Stmt& chosen = part->value == "body"    ? stmts.body
                         : part->value == "reset" ? stmts.reset
                                                  : stmts.update;
    KILN_USER_CHECK(chosen.defined())
        << "tensorize: intrinsic '" << intrin->name << "' has no '" << part->value
        << "' statement, which this schedule needs"
        << (part->value == "body" ? " (every reduction loop is inside the tensorized axis)"
                                  : " (some reduction loops are outside the tensorized axis)");
    return chosen;
  }

 private:
  std::unordered_map<const VarNode*, std::string> scopes_;
};

}  // namespace

ir::Stmt lower_tensor_intrin(const ir::Stmt& s) { return IntrinLowerer().mutate(s); }

}  // namespace kiln::pass
