// The IR printer. Expressions print with the fewest parentheses their precedence allows.
#include "compiler/ir/printer.h"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/ir/tensor_intrin.h"

namespace kiln::ir {
namespace {

// Larger binds tighter.
enum Prec { kPrecOr = 1, kPrecAnd, kPrecNot, kPrecCmp, kPrecAdd, kPrecMul, kPrecUnary, kPrecAtom };

class Printer {
 public:
  explicit Printer(std::ostream& os) : os_(os) {}

  void print(const Expr& e, int outer = 0) {
    if (!e.defined()) {
      os_ << "<undefined>";
      return;
    }
    switch (e.kind()) {
      case ExprKind::kIntImm: {
        auto op = e.as<IntImmNode>();
        if (op->dtype.is_bool()) {
          os_ << (op->value ? "true" : "false");
        } else if (op->dtype == kInt32) {
          if (op->value < 0 && outer > kPrecAdd)
            os_ << "(" << op->value << ")";
          else
            os_ << op->value;
        } else if (op->dtype == kInt64) {
          os_ << op->value << "i64";
        } else {
          os_ << op->dtype.str() << "(" << op->value << ")";
        }
        return;
      }
      case ExprKind::kFloatImm: {
        auto op = e.as<FloatImmNode>();
        std::ostringstream s;
        s << std::setprecision(op->dtype.bits() == 64 ? 17 : 9) << op->value;
        os_ << s.str() << (op->dtype.bits() == 32 ? "f" : op->dtype.bits() == 16 ? "h" : "");
        return;
      }
      case ExprKind::kStringImm:
        os_ << '"' << e.as<StringImmNode>()->value << '"';
        return;
      case ExprKind::kVar:
        os_ << e.as<VarNode>()->name;
        return;
      case ExprKind::kCast: {
        auto op = e.as<CastNode>();
        os_ << op->dtype.str() << "(";
        print(op->value);
        os_ << ")";
        return;
      }
      case ExprKind::kAdd:
        return binary<AddNode>(e, " + ", kPrecAdd, outer);
      case ExprKind::kSub:
        return binary<SubNode>(e, " - ", kPrecAdd, outer);
      case ExprKind::kMul:
        return binary<MulNode>(e, "*", kPrecMul, outer);
      case ExprKind::kDiv:
        if (e.dtype().is_float()) return binary<DivNode>(e, "/", kPrecMul, outer);
        return func<DivNode>(e, "truncdiv");
      case ExprKind::kMod:
        return func<ModNode>(e, "truncmod");
      case ExprKind::kFloorDiv:
        return binary<FloorDivNode>(e, " // ", kPrecMul, outer);
      case ExprKind::kFloorMod:
        return binary<FloorModNode>(e, " % ", kPrecMul, outer);
      case ExprKind::kShr:
        return func<ShrNode>(e, "shift_right");
      case ExprKind::kMin:
        return func<MinNode>(e, "min");
      case ExprKind::kMax:
        return func<MaxNode>(e, "max");
      case ExprKind::kEQ:
        return binary<EQNode>(e, " == ", kPrecCmp, outer);
      case ExprKind::kNE:
        return binary<NENode>(e, " != ", kPrecCmp, outer);
      case ExprKind::kLT:
        return binary<LTNode>(e, " < ", kPrecCmp, outer);
      case ExprKind::kLE:
        return binary<LENode>(e, " <= ", kPrecCmp, outer);
      case ExprKind::kGT:
        return binary<GTNode>(e, " > ", kPrecCmp, outer);
      case ExprKind::kGE:
        return binary<GENode>(e, " >= ", kPrecCmp, outer);
      case ExprKind::kAnd:
        return binary<AndNode>(e, " and ", kPrecAnd, outer);
      case ExprKind::kOr:
        return binary<OrNode>(e, " or ", kPrecOr, outer);
      case ExprKind::kNot: {
        if (outer > kPrecNot) os_ << "(";
        os_ << "not ";
        print(e.as<NotNode>()->a, kPrecNot);
        if (outer > kPrecNot) os_ << ")";
        return;
      }
      case ExprKind::kSelect: {
        auto op = e.as<SelectNode>();
        os_ << "select(";
        print(op->condition);
        os_ << ", ";
        print(op->true_value);
        os_ << ", ";
        print(op->false_value);
        os_ << ")";
        return;
      }
      case ExprKind::kLoad: {
        auto op = e.as<LoadNode>();
        os_ << op->buffer_var.name() << "[";
        print(op->index);
        if (op->predicate.defined()) {
          os_ << " if ";
          print(op->predicate);
        }
        os_ << "]";
        return;
      }
      case ExprKind::kRamp: {
        auto op = e.as<RampNode>();
        os_ << "ramp(";
        print(op->base);
        os_ << ", ";
        print(op->stride);
        os_ << ", " << op->lanes << ")";
        return;
      }
      case ExprKind::kBroadcast: {
        auto op = e.as<BroadcastNode>();
        os_ << "x" << op->lanes << "(";
        print(op->value);
        os_ << ")";
        return;
      }
      case ExprKind::kLet: {
        auto op = e.as<LetNode>();
        os_ << "(let " << op->var.name() << " = ";
        print(op->value);
        os_ << " in ";
        print(op->body);
        os_ << ")";
        return;
      }
      case ExprKind::kCall: {
        auto op = e.as<CallNode>();
        os_ << op->name << "(";
        list(op->args);
        os_ << ")";
        return;
      }
      case ExprKind::kProducerLoad: {
        auto op = e.as<ProducerLoadNode>();
        os_ << op->producer->name() << "[";
        list(op->indices);
        os_ << "]";
        return;
      }
      case ExprKind::kReduce: {
        auto op = e.as<ReduceNode>();
        os_ << reduce_kind_name(op->combiner) << "(";
        print(op->source);
        os_ << ", axis=[";
        for (size_t i = 0; i < op->axis.size(); ++i) {
          if (i) os_ << ", ";
          os_ << op->axis[i].var().name();
        }
        os_ << "]";
        if (!is_one(op->condition)) {
          os_ << ", where=";
          print(op->condition);
        }
        os_ << ")";
        return;
      }
    }
  }

  void print(const Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case StmtKind::kLetStmt: {
        auto op = s.as<LetStmtNode>();
        indent();
        os_ << "let " << op->var.name() << " = ";
        print(op->value);
        os_ << "\n";
        print(op->body);
        return;
      }
      case StmtKind::kAttrStmt: {
        auto op = s.as<AttrStmtNode>();
        indent();
        os_ << "attr [" << node_name(op->node.get()) << "] " << op->key << " = ";
        print(op->value);
        os_ << "\n";
        print(op->body);
        return;
      }
      case StmtKind::kAssertStmt: {
        auto op = s.as<AssertStmtNode>();
        indent();
        os_ << "assert ";
        print(op->condition);
        os_ << ", \"" << op->message << "\"\n";
        print(op->body);
        return;
      }
      case StmtKind::kFor: {
        auto op = s.as<ForNode>();
        indent();
        switch (op->for_kind) {
          case ForKind::kSerial:
            break;
          case ForKind::kParallel:
            os_ << "parallel ";
            break;
          case ForKind::kVectorized:
            os_ << "vectorized ";
            break;
          case ForKind::kUnrolled:
            os_ << "unrolled ";
            break;
        }
        os_ << "for " << op->loop_var.name() << " in range(";
        if (!is_zero(op->min)) {
          print(op->min);
          os_ << ", ";
          print(op->min + op->extent);
        } else {
          print(op->extent);
        }
        os_ << "):\n";
        block(op->body);
        return;
      }
      case StmtKind::kStore: {
        auto op = s.as<StoreNode>();
        indent();
        os_ << op->buffer_var.name() << "[";
        print(op->index);
        if (op->predicate.defined()) {
          os_ << " if ";
          print(op->predicate);
        }
        os_ << "] = ";
        print(op->value);
        os_ << "\n";
        return;
      }
      case StmtKind::kProducerStore: {
        auto op = s.as<ProducerStoreNode>();
        indent();
        os_ << op->producer->name() << "[";
        list(op->indices);
        os_ << "] = ";
        print(op->value);
        os_ << "\n";
        return;
      }
      case StmtKind::kProducerRealize: {
        auto op = s.as<ProducerRealizeNode>();
        indent();
        os_ << "realize " << op->producer->name() << "[";
        for (size_t i = 0; i < op->bounds.size(); ++i) {
          if (i) os_ << ", ";
          print(op->bounds[i].min);
          os_ << ":";
          print(op->bounds[i].min + op->bounds[i].extent);
        }
        os_ << "]";
        if (op->scope != "global") os_ << " in " << op->scope;
        os_ << ":\n";
        block(op->body);
        return;
      }
      case StmtKind::kAllocate: {
        auto op = s.as<AllocateNode>();
        indent();
        os_ << "allocate " << op->buffer_var.name() << ": " << op->dtype.str() << "[";
        list(op->extents);
        os_ << "]";
        if (op->scope != "global") os_ << " in " << op->scope;
        os_ << "\n";
        print(op->body);
        return;
      }
      case StmtKind::kIfThenElse: {
        auto op = s.as<IfThenElseNode>();
        indent();
        os_ << "if ";
        print(op->condition);
        os_ << ":\n";
        block(op->then_case);
        if (op->else_case.defined()) {
          indent();
          os_ << "else:\n";
          block(op->else_case);
        }
        return;
      }
      case StmtKind::kSeq:
        for (auto& x : s.as<SeqNode>()->seq) print(x);
        return;
      case StmtKind::kEvaluate:
        indent();
        print(s.as<EvaluateNode>()->value);
        os_ << "\n";
        return;
    }
  }

 private:
  template <typename N>
  void binary(const Expr& e, const char* sym, int prec, int outer) {
    auto op = static_cast<const N*>(e.get());
    bool paren = outer > prec;
    if (paren) os_ << "(";
    print(op->a, prec);
    os_ << sym;
    // Right operand of a non-associative operator needs parentheses at equal precedence.
    print(op->b, prec + 1);
    if (paren) os_ << ")";
  }

  template <typename N>
  void func(const Expr& e, const char* name) {
    auto op = static_cast<const N*>(e.get());
    os_ << name << "(";
    print(op->a);
    os_ << ", ";
    print(op->b);
    os_ << ")";
  }

  void list(const std::vector<Expr>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os_ << ", ";
      print(v[i]);
    }
  }

  void block(const Stmt& body) {
    depth_ += 1;
    print(body);
    depth_ -= 1;
  }

  void indent() {
    for (int i = 0; i < depth_; ++i) os_ << "  ";
  }

  static std::string node_name(const Object* n) {
    if (auto iv = dynamic_cast<const IterVarNode*>(n)) {
      return iv->thread_tag.empty() ? iv->var.name() : iv->thread_tag;
    }
    if (auto v = dynamic_cast<const VarNode*>(n)) return v->name;
    if (auto p = dynamic_cast<const ProducerNode*>(n)) return p->name();
    if (auto t = dynamic_cast<const TensorIntrinLoweringNode*>(n)) return t->name;
    return "?";
  }

  std::ostream& os_;
  int depth_ = 0;
};

}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  Printer(os).print(e);
  return os.str();
}

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  Printer(os).print(s);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  Printer(os).print(e);
  return os;
}

std::ostream& operator<<(std::ostream& os, const Stmt& s) {
  Printer(os).print(s);
  return os;
}

std::ostream& operator<<(std::ostream& os, const DataType& t) { return os << t.str(); }

}  // namespace kiln::ir
