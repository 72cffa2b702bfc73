// The IR verifier.
#include "compiler/ir/verify.h"

#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"

namespace kiln::ir {
namespace {

class Verifier : public IRVisitor {
 public:
  Verifier(bool flattened, const std::string& pass) : flattened_(flattened), pass_(pass) {}
  using IRVisitor::visit;

  void define(const Var& v) { defined_.insert(v.get()); }
  void define(const VarNode* v) { defined_.insert(v); }

  void visit_(const VarNode* op) override {
    check(defined_.count(op) > 0, "variable '" + op->name + "' is used where it is not defined");
  }
  void visit_(const LoadNode* op) override {
    check(op->buffer_var.dtype().is_handle(),
          "load from non-handle '" + op->buffer_var.name() + "'");
    check(op->index.dtype().lanes() == op->dtype.lanes(),
          "load of " + op->dtype.str() + " from '" + op->buffer_var.name() + "' with index of " +
              op->index.dtype().str());
    IRVisitor::visit_(op);
  }
  void visit_(const StoreNode* op) override {
    check(op->buffer_var.dtype().is_handle(),
          "store to non-handle '" + op->buffer_var.name() + "'");
    check(op->index.dtype().lanes() == op->value.dtype().lanes(),
          "store of " + op->value.dtype().str() + " to '" + op->buffer_var.name() +
              "' with index of " + op->index.dtype().str());
    IRVisitor::visit_(op);
  }
  void visit_(const ProducerLoadNode* op) override {
    check(!flattened_, "tensor read of '" + op->producer->name() + "' survived flattening");
    IRVisitor::visit_(op);
  }
  void visit_(const ProducerStoreNode* op) override {
    check(!flattened_, "tensor write of '" + op->producer->name() + "' survived flattening");
    IRVisitor::visit_(op);
  }
  void visit_(const ProducerRealizeNode* op) override {
    check(!flattened_, "realize of '" + op->producer->name() + "' survived flattening");
    IRVisitor::visit_(op);
  }
  void visit_(const LetNode* op) override {
    visit(op->value);
    define(op->var);
    visit(op->body);
  }
  void visit_(const LetStmtNode* op) override {
    visit(op->value);
    define(op->var);
    visit(op->body);
  }
  void visit_(const ForNode* op) override {
    check(op->extent.dtype().is_integral() && op->extent.dtype().is_scalar(),
          "loop '" + op->loop_var.name() + "' has a non-integer extent");
    visit(op->min);
    visit(op->extent);
    define(op->loop_var);
    visit(op->body);
  }
  void visit_(const AllocateNode* op) override {
    for (auto& e : op->extents) visit(e);
    define(op->buffer_var);
    visit(op->body);
  }
  void visit_(const AttrStmtNode* op) override {
    if (auto iv = dynamic_cast<const IterVarNode*>(op->node.get())) define(iv->var);
    IRVisitor::visit_(op);
  }
  void visit_(const ReduceNode* op) override {
    check(!flattened_, "reduction survived lowering");
    for (auto& iv : op->axis) define(iv.var());
    IRVisitor::visit_(op);
  }

#define KILN_CHECK_BIN(T)                                                                  \
  void visit_(const T##Node* op) override {                                                \
    check(op->a.dtype() == op->b.dtype(),                                                  \
          std::string(#T) + " of " + op->a.dtype().str() + " and " + op->b.dtype().str()); \
    IRVisitor::visit_(op);                                                                 \
  }
  // clang-format off
  KILN_CHECK_BIN(Add) KILN_CHECK_BIN(Sub) KILN_CHECK_BIN(Mul) KILN_CHECK_BIN(Div) KILN_CHECK_BIN(Mod)
  KILN_CHECK_BIN(FloorDiv) KILN_CHECK_BIN(FloorMod) KILN_CHECK_BIN(Shr) KILN_CHECK_BIN(Min) KILN_CHECK_BIN(Max)
  KILN_CHECK_BIN(EQ) KILN_CHECK_BIN(NE) KILN_CHECK_BIN(LT) KILN_CHECK_BIN(LE) KILN_CHECK_BIN(GT)
  KILN_CHECK_BIN(GE)
#undef KILN_CHECK_BIN
      // clang-format on

      private : void check(bool ok, const std::string& what) {
    KILN_ICHECK(ok) << "IR verification failed after " << pass_ << ": " << what;
  }

  bool flattened_;
  const std::string& pass_;
  std::unordered_set<const VarNode*> defined_;
};

}  // namespace

void verify(const PrimFunc& f, const Stmt& body, bool flattened, const std::string& after_pass) {
  Verifier v(flattened, after_pass);
  for (auto& p : f.params) {
    v.define(p.var);
    if (!p.buffer) continue;
    for (auto& e : p.buffer->shape) {
      post_order_visit(e, [&](const Object* n) {
        if (auto var = dynamic_cast<const VarNode*>(n)) v.define(var);
      });
    }
  }
  v.visit(body);
}

}  // namespace kiln::ir
