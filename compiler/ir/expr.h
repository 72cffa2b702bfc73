// Expression nodes of the loop IR. Nodes are immutable and shared (std::shared_ptr); a pass that
// changes nothing returns the very node it was given. Every node kind is listed once in
// KILN_EXPR_NODES, from which the kind enum and the visitor/mutator dispatch are generated.
//
// Variables are compared by identity (the node's address), never by name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/type.h"

namespace kiln::ir {

/// Base of everything the IR can point at (expressions, statements, iteration variables,
/// tensors). Used where an attribute refers to "some node".
class Object {
 public:
  virtual ~Object() = default;
};
using ObjectRef = std::shared_ptr<const Object>;

// clang-format off
#define KILN_EXPR_NODES(X)                                                                   \
  X(IntImm) X(FloatImm) X(StringImm) X(Var) X(Cast) X(Add) X(Sub) X(Mul) X(Div) X(Mod)        \
  X(FloorDiv) X(FloorMod) X(Shr) X(Min) X(Max) X(EQ) X(NE) X(LT) X(LE) X(GT) X(GE) X(And) X(Or)      \
  X(Not) X(Select) X(Load) X(Ramp) X(Broadcast) X(Let) X(Call) X(ProducerLoad) X(Reduce)
// clang-format on

enum class ExprKind : uint8_t {
#define KILN_ENUM(T) k##T,
  KILN_EXPR_NODES(KILN_ENUM)
#undef KILN_ENUM
};

struct ExprNode : Object {
  ExprNode(ExprKind k, DataType t) : kind(k), dtype(t) {}
  const ExprKind kind;
  const DataType dtype;
};

/// A shared, immutable expression. Null when default-constructed.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  /// Integer and float literals convert to int32 / float32 constants.
  Expr(int value);      // NOLINT(google-explicit-constructor)
  Expr(int64_t value);  // NOLINT(google-explicit-constructor)
  Expr(float value);    // NOLINT(google-explicit-constructor)
  Expr(double value);   // NOLINT(google-explicit-constructor)

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const ExprNode>& node() const { return node_; }
  DataType dtype() const { return node_->dtype; }
  ExprKind kind() const { return node_->kind; }
  bool same_as(const Expr& o) const { return node_ == o.node_; }

  /// The node as T when it is one, else nullptr.
  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

// ---- leaves ---------------------------------------------------------------------------------

/// An integer (or bool) constant.
struct IntImmNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kIntImm;
  IntImmNode(DataType t, int64_t v) : ExprNode(kKind, t), value(v) {}
  const int64_t value;
};

/// A floating-point constant.
struct FloatImmNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kFloatImm;
  FloatImmNode(DataType t, double v) : ExprNode(kKind, t), value(v) {}
  const double value;
};

/// A string, only as an argument of calls and attributes (pragma names, messages).
struct StringImmNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kStringImm;
  explicit StringImmNode(std::string v)
      : ExprNode(kKind, DataType::Handle()), value(std::move(v)) {}
  const std::string value;
};

/// A variable: a loop index, a symbolic shape, or (with a handle type) a buffer's base pointer.
struct VarNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kVar;
  VarNode(std::string n, DataType t) : ExprNode(kKind, t), name(std::move(n)) {}
  const std::string name;
};

/// A variable handle; identity is the node.
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(std::string name, DataType t = kInt32)
      : Expr(std::make_shared<VarNode>(std::move(name), t)) {}
  explicit Var(std::shared_ptr<const ExprNode> n) : Expr(std::move(n)) {}
  const VarNode* get() const { return static_cast<const VarNode*>(Expr::get()); }
  const VarNode* operator->() const { return get(); }
  const std::string& name() const { return get()->name; }
  /// A new variable with the same type, named `name`.
  Var copy_with_name(const std::string& name) const { return Var(name, dtype()); }
};

// ---- arithmetic and logic -----------------------------------------------------------------

/// (T)value
struct CastNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCast;
  CastNode(DataType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
  const Expr value;
};

/// a OP b, for the arithmetic, comparison and logic operators. Both sides have one type; the
/// comparisons and logic nodes produce bool (with the operands' lanes).
///  Div, Mod: C semantics (truncation) for integers, IEEE for floats.
///  FloorDiv, FloorMod: rounding toward minus infinity (index arithmetic of splits).
///  Shr: integers only, a >> b: arithmetic for signed types (floor division by 2^b), logical for
///  unsigned; b in [0, bits) (the VDLA's ALU SHR, int8 requantization).
template <ExprKind K>
struct BinaryNode final : ExprNode {
  static constexpr ExprKind kKind = K;
  BinaryNode(DataType t, Expr x, Expr y) : ExprNode(kKind, t), a(std::move(x)), b(std::move(y)) {}
  const Expr a, b;
};
using AddNode = BinaryNode<ExprKind::kAdd>;
using SubNode = BinaryNode<ExprKind::kSub>;
using MulNode = BinaryNode<ExprKind::kMul>;
using DivNode = BinaryNode<ExprKind::kDiv>;
using ModNode = BinaryNode<ExprKind::kMod>;
using FloorDivNode = BinaryNode<ExprKind::kFloorDiv>;
using FloorModNode = BinaryNode<ExprKind::kFloorMod>;
using ShrNode = BinaryNode<ExprKind::kShr>;
using MinNode = BinaryNode<ExprKind::kMin>;
using MaxNode = BinaryNode<ExprKind::kMax>;
using EQNode = BinaryNode<ExprKind::kEQ>;
using NENode = BinaryNode<ExprKind::kNE>;
using LTNode = BinaryNode<ExprKind::kLT>;
using LENode = BinaryNode<ExprKind::kLE>;
using GTNode = BinaryNode<ExprKind::kGT>;
using GENode = BinaryNode<ExprKind::kGE>;
using AndNode = BinaryNode<ExprKind::kAnd>;
using OrNode = BinaryNode<ExprKind::kOr>;

/// !a
struct NotNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kNot;
  NotNode(DataType t, Expr x) : ExprNode(kKind, t), a(std::move(x)) {}
  const Expr a;
};

/// condition ? true_value : false_value (both sides are evaluated).
struct SelectNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kSelect;
  SelectNode(DataType t, Expr c, Expr tv, Expr fv)
      : ExprNode(kKind, t),
        condition(std::move(c)),
        true_value(std::move(tv)),
        false_value(std::move(fv)) {}
  const Expr condition, true_value, false_value;
};

// ---- memory ---------------------------------------------------------------------------------

/// buffer_var[index], after storage flattening. A vector type with a Ramp index is a vector load;
/// `predicate` (optional, bool with the same lanes) masks lanes out.
struct LoadNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLoad;
  LoadNode(DataType t, Var buf, Expr idx, Expr pred)
      : ExprNode(kKind, t),
        buffer_var(std::move(buf)),
        index(std::move(idx)),
        predicate(std::move(pred)) {}
  const Var buffer_var;
  const Expr index;
  const Expr predicate;
};

/// [base, base + stride, ..., base + (lanes-1)*stride]
struct RampNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kRamp;
  RampNode(DataType t, Expr b, Expr s, int l)
      : ExprNode(kKind, t), base(std::move(b)), stride(std::move(s)), lanes(l) {}
  const Expr base, stride;
  const int lanes;
};

/// [value] * lanes
struct BroadcastNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kBroadcast;
  BroadcastNode(DataType t, Expr v, int l) : ExprNode(kKind, t), value(std::move(v)), lanes(l) {}
  const Expr value;
  const int lanes;
};

/// let var = value in body
struct LetNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kLet;
  LetNode(DataType t, Var v, Expr val, Expr b)
      : ExprNode(kKind, t), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value, body;
};

enum class CallKind : uint8_t {
  kPureIntrinsic,  ///< math without side effects: exp, log, sqrt, tanh, sigmoid, pow, fabs, fma,
                   ///< ...
  kIntrinsic,      ///< Kiln's own operations with effects (barriers, DMA, tensor intrinsics)
  kExtern,         ///< a C function the generated code calls by name
};

/// name(args...)
struct CallNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kCall;
  CallNode(DataType t, std::string n, std::vector<Expr> a, CallKind k)
      : ExprNode(kKind, t), name(std::move(n)), args(std::move(a)), call_kind(k) {}
  const std::string name;
  const std::vector<Expr> args;
  const CallKind call_kind;
};

// ---- tensor-level nodes (before storage flattening) ---------------------------------------

/// Something that produces a multi-dimensional value: a te::Tensor. The IR only needs its name,
/// shape and element type; identity is the node.
class ProducerNode : public Object {
 public:
  virtual const std::string& name() const = 0;
  virtual const std::vector<Expr>& shape() const = 0;
  virtual DataType dtype() const = 0;
};
using Producer = std::shared_ptr<const ProducerNode>;

/// producer[indices...], before storage flattening.
struct ProducerLoadNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kProducerLoad;
  ProducerLoadNode(DataType t, Producer p, std::vector<Expr> idx)
      : ExprNode(kKind, t), producer(std::move(p)), indices(std::move(idx)) {}
  const Producer producer;
  const std::vector<Expr> indices;
};

/// [min, min + extent)
struct Range {
  Expr min, extent;
  Range() = default;
  Range(Expr m, Expr e) : min(std::move(m)), extent(std::move(e)) {}
};

/// What an iteration variable does; kept by the schedule, read by lowering and code generation.
enum class IterVarType : uint8_t {
  kDataPar,       ///< an axis of the output
  kCommReduce,    ///< a reduction axis
  kOrdered,       ///< a sequential axis (scan)
  kOpaque,        ///< not to be touched
  kThreadIndex,   ///< bound to a GPU thread or block index
  kVirtualThread  ///< a virtual thread (vthread / cthread)
};

/// An iteration variable with its domain: an axis of a compute, or one made by split/fuse.
struct IterVarNode final : Object {
  IterVarNode(Var v, Range d, IterVarType t, std::string tag)
      : var(std::move(v)), dom(std::move(d)), type(t), thread_tag(std::move(tag)) {}
  const Var var;
  const Range dom;  ///< undefined for axes made by schedule relations until bound inference
  const IterVarType type;
  const std::string thread_tag;  ///< "threadIdx.x", "blockIdx.y", "vthread", "cthread" or empty
};

class IterVar {
 public:
  IterVar() = default;
  explicit IterVar(std::shared_ptr<const IterVarNode> n) : node_(std::move(n)) {}
  IterVar(Var v, Range dom, IterVarType t, std::string tag = "")
      : node_(std::make_shared<IterVarNode>(std::move(v), std::move(dom), t, std::move(tag))) {}
  bool defined() const { return node_ != nullptr; }
  const IterVarNode* get() const { return node_.get(); }
  const IterVarNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const IterVarNode>& node() const { return node_; }
  const Var& var() const { return node_->var; }
  operator Expr() const { return node_->var; }  // NOLINT(google-explicit-constructor)
  bool operator==(const IterVar& o) const { return node_ == o.node_; }
  bool operator!=(const IterVar& o) const { return node_ != o.node_; }

 private:
  std::shared_ptr<const IterVarNode> node_;
};

enum class ReduceKind : uint8_t { kSum, kProd, kMax, kMin };

/// combiner over `axis` of source, counting only points where condition holds.
struct ReduceNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::kReduce;
  ReduceNode(DataType t, ReduceKind c, Expr s, std::vector<IterVar> ax, Expr cond)
      : ExprNode(kKind, t),
        combiner(c),
        source(std::move(s)),
        axis(std::move(ax)),
        condition(std::move(cond)) {}
  const ReduceKind combiner;
  const Expr source;
  const std::vector<IterVar> axis;
  const Expr condition;  ///< bool; always defined (true when there is none)
};

}  // namespace kiln::ir
