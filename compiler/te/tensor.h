// Tensor expressions: the language operators are written in (the paper's §4.1).
//
//   Var m("m");
//   Tensor A = placeholder({m, 1024}, kFloat32, "A");
//   IterVar k = reduce_axis({0, 1024}, "k");
//   Tensor C = compute({1024, 1024}, [&](Var y, Var x) { return sum(A(k, y) * B(k, x), {k}); },
//   "C");
//
// A Tensor is at once the operation that produces it and its single output: a placeholder (an
// input) or a compute (a value per output point, possibly a reduction at the top of its body).
// Tensors are immutable; schedules that rewrite the dataflow (cache_read, cache_write, inlining)
// make new ones.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/expr.h"
#include "compiler/ir/op.h"

namespace kiln::te {

using ir::DataType;
using ir::Expr;
using ir::IterVar;
using ir::Range;
using ir::Var;

enum class OpKind : uint8_t { kPlaceholder, kCompute };

class Tensor;

struct TensorNode final : ir::ProducerNode {
  std::string name_;
  std::vector<Expr> shape_;
  DataType dtype_;
  OpKind op_kind = OpKind::kPlaceholder;
  /// compute: one data-parallel axis per output dimension, domain [0, shape[i]).
  std::vector<IterVar> axis;
  /// compute: the reduction axes of a top-level reduction (empty otherwise).
  std::vector<IterVar> reduce_axis;
  /// compute: the value at the point `axis` (a ReduceNode at the top for reductions).
  Expr body;
  /// Annotations that are not part of the value, by key (TVM's op attrs): the operator library
  /// puts the output's workload under "workload" (topi/workload.h). Schedule rewrites that make
  /// new tensors do not carry them.
  std::map<std::string, std::string> attrs;

  const std::string& name() const override { return name_; }
  const std::vector<Expr>& shape() const override { return shape_; }
  DataType dtype() const override { return dtype_; }
  bool is_compute() const { return op_kind == OpKind::kCompute; }
  /// The tensors this one reads, in order of first use.
  std::vector<Tensor> inputs() const;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<const TensorNode> n) : node_(std::move(n)) {}

  bool defined() const { return node_ != nullptr; }
  const TensorNode* get() const { return node_.get(); }
  const TensorNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const TensorNode>& node() const { return node_; }
  bool operator==(const Tensor& o) const { return node_ == o.node_; }
  bool operator!=(const Tensor& o) const { return node_ != o.node_; }
  size_t ndim() const { return node_->shape_.size(); }

  /// The element at `indices` (one per dimension), as an expression.
  Expr operator()(const std::vector<Expr>& indices) const;
  template <typename... Args>
  Expr operator()(Args... indices) const {
    return (*this)(std::vector<Expr>{Expr(indices)...});
  }

 private:
  std::shared_ptr<const TensorNode> node_;
};

/// A symbolic integer, for shapes known only when the function is called.
Var var(const std::string& name, DataType dtype = ir::kInt32);

/// An input tensor.
Tensor placeholder(std::vector<Expr> shape, DataType dtype = ir::kFloat32,
                   std::string name = "placeholder");

/// A reduction axis over `dom` ({min, extent}).
IterVar reduce_axis(Range dom, std::string name = "rv");

/// A tensor of `shape` whose element at (i0, i1, ...) is fcompute({i0, i1, ...}).
Tensor compute(std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Var>&)>& fcompute,
               std::string name = "compute", std::vector<std::string> axis_names = {});
/// The same, with a lambda taking one Var per dimension (1 to 6 dimensions).
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var)>& f,
               std::string name = "compute", std::vector<std::string> axis_names = {});
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var)>& f,
               std::string name = "compute", std::vector<std::string> axis_names = {});
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var, Var)>& f,
               std::string name = "compute", std::vector<std::string> axis_names = {});
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var, Var, Var)>& f,
               std::string name = "compute", std::vector<std::string> axis_names = {});
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var, Var, Var, Var)>& f,
               std::string name = "compute", std::vector<std::string> axis_names = {});

/// Reductions over `axis` (optionally only where `where` holds). They must be the whole body of
/// a compute.
Expr sum(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr max(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr min(Expr source, std::vector<IterVar> axis, Expr where = Expr());
Expr prod(Expr source, std::vector<IterVar> axis, Expr where = Expr());

/// `e` with every read t[indices] for which `f(t, indices)` returns a defined expression replaced
/// by that expression (reductions keep their axes).
Expr rewrite_reads(const Expr& e,
                   const std::function<Expr(const TensorNode*, const std::vector<Expr>&)>& f);

/// `t` with attribute `key` set to `value`: a new tensor (tensors are immutable) with t's node
/// copied, for the operator that has just made `t`, before anything reads it.
Tensor with_attr(const Tensor& t, const std::string& key, std::string value);

/// A compute made directly from its parts (used by schedule rewrites).
Tensor make_compute(std::string name, std::vector<IterVar> axis, std::vector<IterVar> reduce_axis,
                    Expr body);

}  // namespace kiln::te
