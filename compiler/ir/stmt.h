// Statement nodes of the loop IR, listed once in KILN_STMT_NODES like the expressions.
// Before storage flattening, tensors are read and written with ProducerLoad / ProducerStore inside
// ProducerRealize scopes; afterwards they are flat buffers (Allocate, Load, Store).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/expr.h"

namespace kiln::ir {

// clang-format off
#define KILN_STMT_NODES(X)                                                                    \
  X(LetStmt) X(AttrStmt) X(AssertStmt) X(For) X(Store) X(ProducerStore) X(ProducerRealize)    \
  X(Allocate) X(IfThenElse) X(Seq) X(Evaluate)
// clang-format on

enum class StmtKind : uint8_t {
#define KILN_ENUM(T) k##T,
  KILN_STMT_NODES(KILN_ENUM)
#undef KILN_ENUM
};

struct StmtNode : Object {
  explicit StmtNode(StmtKind k) : kind(k) {}
  const StmtKind kind;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const StmtNode>& node() const { return node_; }
  StmtKind kind() const { return node_->kind; }
  bool same_as(const Stmt& o) const { return node_ == o.node_; }
  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const StmtNode> node_;
};

/// let var = value; body
struct LetStmtNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kLetStmt;
  LetStmtNode(Var v, Expr val, Stmt b)
      : StmtNode(kKind), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
  const Var var;
  const Expr value;
  const Stmt body;
};

/// Keys of AttrStmt understood by the passes.
namespace attr {
inline constexpr const char* kThreadExtent = "thread_extent";    ///< node: IterVar; value: extent
inline constexpr const char* kVirtualThread = "virtual_thread";  ///< node: IterVar; value: extent
inline constexpr const char* kStorageScope =
    "storage_scope";                                     ///< node: buffer Var; value: StringImm
inline constexpr const char* kPragmaPrefix = "pragma_";  ///< node: loop Var; value: argument
inline constexpr const char* kRealizeScope = "realize_scope";  ///< node: Producer; value: StringImm
}  // namespace attr

/// // attr [node] key = value
/// body
struct AttrStmtNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAttrStmt;
  AttrStmtNode(ObjectRef n, std::string k, Expr v, Stmt b)
      : StmtNode(kKind),
        node(std::move(n)),
        key(std::move(k)),
        value(std::move(v)),
        body(std::move(b)) {}
  const ObjectRef node;
  const std::string key;
  const Expr value;
  const Stmt body;
};

/// assert(condition, message); body — a run-time check of the generated function's arguments.
struct AssertStmtNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAssertStmt;
  AssertStmtNode(Expr c, std::string m, Stmt b)
      : StmtNode(kKind), condition(std::move(c)), message(std::move(m)), body(std::move(b)) {}
  const Expr condition;
  const std::string message;
  const Stmt body;
};

enum class ForKind : uint8_t {
  kSerial,
  kParallel,    ///< iterations run on the runtime's thread pool
  kVectorized,  ///< turned into vector operations by the vectorize pass
  kUnrolled,    ///< copied `extent` times by the unroll pass
};

/// for (loop_var = min; loop_var < min + extent; ++loop_var) body
struct ForNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode(Var v, Expr m, Expr e, ForKind k, Stmt b)
      : StmtNode(kKind),
        loop_var(std::move(v)),
        min(std::move(m)),
        extent(std::move(e)),
        for_kind(k),
        body(std::move(b)) {}
  const Var loop_var;
  const Expr min, extent;
  const ForKind for_kind;
  const Stmt body;
};

/// buffer_var[index] = value (vector stores have a Ramp index; predicate masks lanes).
struct StoreNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kStore;
  StoreNode(Var buf, Expr v, Expr idx, Expr pred)
      : StmtNode(kKind),
        buffer_var(std::move(buf)),
        value(std::move(v)),
        index(std::move(idx)),
        predicate(std::move(pred)) {}
  const Var buffer_var;
  const Expr value, index, predicate;
};

/// producer[indices...] = value
struct ProducerStoreNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kProducerStore;
  ProducerStoreNode(Producer p, Expr v, std::vector<Expr> idx)
      : StmtNode(kKind), producer(std::move(p)), value(std::move(v)), indices(std::move(idx)) {}
  const Producer producer;
  const Expr value;
  const std::vector<Expr> indices;
};

/// realize producer over bounds (one Range per dimension) in `scope`; body. Storage flattening
/// turns it into an Allocate of the region.
struct ProducerRealizeNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kProducerRealize;
  ProducerRealizeNode(Producer p, std::vector<Range> bnd, std::string s, Stmt b)
      : StmtNode(kKind),
        producer(std::move(p)),
        bounds(std::move(bnd)),
        scope(std::move(s)),
        body(std::move(b)) {}
  const Producer producer;
  const std::vector<Range> bounds;
  const std::string scope;  ///< "global", "shared", "local", "local.acc_buffer", ...
  const Stmt body;
};

/// allocate buffer_var[dtype * product(extents)] in scope; body
struct AllocateNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode(Var buf, DataType t, std::vector<Expr> ext, std::string s, Stmt b)
      : StmtNode(kKind),
        buffer_var(std::move(buf)),
        dtype(t),
        extents(std::move(ext)),
        scope(std::move(s)),
        body(std::move(b)) {}
  const Var buffer_var;
  const DataType dtype;
  const std::vector<Expr> extents;
  const std::string scope;
  const Stmt body;
};

/// if (condition) then_case else else_case (else_case may be undefined)
struct IfThenElseNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kIfThenElse;
  IfThenElseNode(Expr c, Stmt t, Stmt e)
      : StmtNode(kKind),
        condition(std::move(c)),
        then_case(std::move(t)),
        else_case(std::move(e)) {}
  const Expr condition;
  const Stmt then_case, else_case;
};

/// seq[0]; seq[1]; ...
struct SeqNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kSeq;
  explicit SeqNode(std::vector<Stmt> s) : StmtNode(kKind), seq(std::move(s)) {}
  const std::vector<Stmt> seq;
};

/// value; (for calls with effects)
struct EvaluateNode final : StmtNode {
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  explicit EvaluateNode(Expr v) : StmtNode(kKind), value(std::move(v)) {}
  const Expr value;
};

}  // namespace kiln::ir
