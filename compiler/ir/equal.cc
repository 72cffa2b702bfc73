// Structural equality: deep equality of expressions, and encoding, hashing and equality of
// statements up to renaming.
#include "compiler/ir/equal.h"

#include <cstring>
#include <unordered_map>

#include "base/error.h"
#include "compiler/ir/functor.h"
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
    case ExprKind::kShr:
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

namespace kiln::ir {
namespace {

/// Writes the canonical token stream of a statement.
class Encoder : public IRVisitor {
 public:
  using IRVisitor::visit;
  std::vector<uint64_t> out;

  void visit(const Expr& e) override {
    if (!e.defined()) {
      out.push_back(0xE0);
      return;
    }
    out.push_back(0x100 + static_cast<uint64_t>(e.kind()));
    type(e.dtype());
    IRVisitor::visit(e);
  }
  void visit(const Stmt& s) override {
    if (!s.defined()) {
      out.push_back(0x5E0);
      return;
    }
    out.push_back(0x200 + static_cast<uint64_t>(s.kind()));
    IRVisitor::visit(s);
  }

  void visit_(const IntImmNode* op) override { out.push_back(static_cast<uint64_t>(op->value)); }
  void visit_(const FloatImmNode* op) override {
    uint64_t bits;
    std::memcpy(&bits, &op->value, sizeof(bits));
    out.push_back(bits);
  }
  void visit_(const StringImmNode* op) override { text(op->value); }
  void visit_(const VarNode* op) override { out.push_back(id(op)); }
  void visit_(const RampNode* op) override {
    out.push_back(op->lanes);
    IRVisitor::visit_(op);
  }
  void visit_(const BroadcastNode* op) override {
    out.push_back(op->lanes);
    IRVisitor::visit_(op);
  }
  void visit_(const CallNode* op) override {
    text(op->name);
    out.push_back(static_cast<uint64_t>(op->call_kind));
    out.push_back(op->args.size());
    IRVisitor::visit_(op);
  }
  void visit_(const ProducerLoadNode* op) override {
    out.push_back(id(op->producer.get()));
    IRVisitor::visit_(op);
  }
  void visit_(const ReduceNode* op) override {
    out.push_back(static_cast<uint64_t>(op->combiner));
    for (auto& iv : op->axis) out.push_back(id(iv.var().get()));
    IRVisitor::visit_(op);
  }
  void visit_(const LetNode* op) override {
    out.push_back(id(op->var.get()));
    IRVisitor::visit_(op);
  }
  void visit_(const LetStmtNode* op) override {
    out.push_back(id(op->var.get()));
    IRVisitor::visit_(op);
  }
  void visit_(const AttrStmtNode* op) override {
    text(op->key);
    const Object* node = op->node.get();
    if (auto iv = dynamic_cast<const IterVarNode*>(node)) node = iv->var.get();
    out.push_back(id(node));
    IRVisitor::visit_(op);
  }
  void visit_(const AssertStmtNode* op) override {
    text(op->message);
    IRVisitor::visit_(op);
  }
  void visit_(const ForNode* op) override {
    out.push_back(id(op->loop_var.get()));
    out.push_back(static_cast<uint64_t>(op->for_kind));
    IRVisitor::visit_(op);
  }
  void visit_(const StoreNode* op) override {
    out.push_back(id(op->buffer_var.get()));
    IRVisitor::visit_(op);
  }
  void visit_(const ProducerStoreNode* op) override {
    out.push_back(id(op->producer.get()));
    IRVisitor::visit_(op);
  }
  void visit_(const ProducerRealizeNode* op) override {
    out.push_back(id(op->producer.get()));
    text(op->scope);
    IRVisitor::visit_(op);
  }
  void visit_(const AllocateNode* op) override {
    out.push_back(id(op->buffer_var.get()));
    type(op->dtype);
    text(op->scope);
    IRVisitor::visit_(op);
  }
  void visit_(const SeqNode* op) override {
    out.push_back(op->seq.size());
    IRVisitor::visit_(op);
  }

  void param(const Param& p) {
    out.push_back(0x300);
    out.push_back(id(p.var.get()));
    type(p.var.dtype());
    if (!p.buffer) return;
    type(p.buffer->dtype);
    out.push_back(p.buffer->shape.size());
    for (auto& e : p.buffer->shape) visit(e);
  }

 private:
  uint64_t id(const Object* n) {
    auto [it, inserted] = ids_.emplace(n, ids_.size());
    return 0xA000000000000000ull + it->second;
  }
  void type(DataType t) {
    out.push_back((uint64_t(t.code()) << 32) | (uint64_t(t.bits()) << 16) | uint64_t(t.lanes()));
  }
  void text(const std::string& s) {
    out.push_back(0x7E000000 + s.size());
    for (char c : s) out.push_back(static_cast<unsigned char>(c));
  }

  std::unordered_map<const Object*, uint64_t> ids_;
};

}  // namespace

std::vector<uint64_t> structural_encoding(const Stmt& s) {
  Encoder e;
  e.visit(s);
  return std::move(e.out);
}

std::vector<uint64_t> structural_encoding(const PrimFunc& f) {
  Encoder e;
  for (auto& p : f.params) e.param(p);
  e.visit(f.body);
  return std::move(e.out);
}

bool structural_equal(const Stmt& a, const Stmt& b) {
  return structural_encoding(a) == structural_encoding(b);
}

bool structural_equal(const PrimFunc& a, const PrimFunc& b) {
  return structural_encoding(a) == structural_encoding(b);
}

namespace {
uint64_t fnv1a(const std::vector<uint64_t>& words) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t w : words) {
    for (int i = 0; i < 8; ++i) {
      h ^= (w >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}
}  // namespace

uint64_t structural_hash(const Stmt& s) { return fnv1a(structural_encoding(s)); }
uint64_t structural_hash(const PrimFunc& f) { return fnv1a(structural_encoding(f)); }

}  // namespace kiln::ir
