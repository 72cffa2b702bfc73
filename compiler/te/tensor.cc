// Building tensor expressions: placeholders, computes and reductions.
#include "compiler/te/tensor.h"

#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/functor.h"

namespace kiln::te {
namespace {

void check_shape(const std::vector<Expr>& shape, const std::string& name) {
  for (size_t i = 0; i < shape.size(); ++i) {
    KILN_USER_CHECK(shape[i].defined())
        << "tensor '" << name << "': dimension " << i << " is undefined";
    KILN_USER_CHECK(shape[i].dtype().is_int() && shape[i].dtype().is_scalar())
        << "tensor '" << name << "': dimension " << i << " must be an integer, got "
        << shape[i].dtype().str();
    if (auto v = ir::as_const_int(shape[i])) {
      KILN_USER_CHECK(*v > 0) << "tensor '" << name << "': dimension " << i
                              << " must be positive, got " << *v;
    }
  }
}

/// Checks that a Reduce appears only at the top of a compute's body.
class ReducePlacementCheck : public ir::IRVisitor {
 public:
  explicit ReducePlacementCheck(const std::string& name) : name_(name) {}
  using ir::IRVisitor::visit;
  void visit_(const ir::ReduceNode*) override {
    KILN_USER_ERROR() << "compute '" << name_
                      << "': a reduction (sum/max/min/prod) must be the whole body of a compute, "
                         "not part of a larger expression; compute it as its own tensor";
  }

 private:
  const std::string& name_;
};

Expr make_reduce(ir::ReduceKind kind, Expr source, std::vector<IterVar> axis, Expr where) {
  KILN_USER_CHECK(source.defined()) << ir::reduce_kind_name(kind) << ": source is undefined";
  KILN_USER_CHECK(!axis.empty()) << ir::reduce_kind_name(kind)
                                 << ": needs at least one reduce axis";
  for (auto& iv : axis) {
    KILN_USER_CHECK(iv.defined() && iv->type == ir::IterVarType::kCommReduce)
        << ir::reduce_kind_name(kind) << ": axis '" << (iv.defined() ? iv.var().name() : "?")
        << "' is not a reduce_axis";
  }
  if (!where.defined()) where = ir::const_true();
  return Expr(
      std::make_shared<ir::ReduceNode>(source.dtype(), kind, source, std::move(axis), where));
}

class ReadRewriter : public ir::IRMutator {
 public:
  using Fn = std::function<Expr(const TensorNode*, const std::vector<Expr>&)>;
  explicit ReadRewriter(const Fn& f) : f_(f) {}
  using ir::IRMutator::mutate;

 protected:
  Expr mutate_(const ir::ProducerLoadNode* op, const Expr& self) override {
    Expr e = ir::IRMutator::mutate_(op, self);
    auto load = e.as<ir::ProducerLoadNode>();
    Expr r = f_(static_cast<const TensorNode*>(load->producer.get()), load->indices);
    return r.defined() ? r : e;
  }
  Expr mutate_(const ir::ReduceNode* op, const Expr& self) override {
    Expr s = mutate(op->source), c = mutate(op->condition);
    if (s.same_as(op->source) && c.same_as(op->condition)) return self;
    return Expr(std::make_shared<ir::ReduceNode>(s.dtype(), op->combiner, s, op->axis, c));
  }

 private:
  const Fn& f_;
};

}  // namespace

Expr rewrite_reads(const Expr& e,
                   const std::function<Expr(const TensorNode*, const std::vector<Expr>&)>& f) {
  return ReadRewriter(f).mutate(e);
}

std::vector<Tensor> TensorNode::inputs() const {
  std::vector<Tensor> out;
  std::unordered_set<const ir::ProducerNode*> seen;
  if (!body.defined()) return out;
  ir::post_order_visit(body, [&](const ir::Object* n) {
    if (auto e = dynamic_cast<const ir::ProducerLoadNode*>(n)) {
      if (seen.insert(e->producer.get()).second) {
        out.emplace_back(std::static_pointer_cast<const TensorNode>(e->producer));
      }
    }
  });
  return out;
}

Expr Tensor::operator()(const std::vector<Expr>& indices) const {
  KILN_USER_CHECK(defined()) << "indexing an undefined tensor";
  KILN_USER_CHECK(indices.size() == ndim()) << "tensor '" << node_->name_ << "' has " << ndim()
                                            << " dimensions, indexed with " << indices.size();
  for (size_t i = 0; i < indices.size(); ++i) {
    KILN_USER_CHECK(indices[i].defined() && indices[i].dtype().is_integral() &&
                    indices[i].dtype().is_scalar())
        << "tensor '" << node_->name_ << "': index " << i << " must be a scalar integer";
  }
  return ir::producer_load(node_, indices);
}

Var var(const std::string& name, DataType dtype) {
  KILN_USER_CHECK(dtype.is_int() && dtype.is_scalar())
      << "var '" << name << "': a shape variable must be an integer, got " << dtype.str();
  return Var(name, dtype);
}

Tensor placeholder(std::vector<Expr> shape, DataType dtype, std::string name) {
  check_shape(shape, name);
  auto n = std::make_shared<TensorNode>();
  n->name_ = std::move(name);
  n->shape_ = std::move(shape);
  n->dtype_ = dtype;
  n->op_kind = OpKind::kPlaceholder;
  return Tensor(n);
}

IterVar reduce_axis(Range dom, std::string name) {
  KILN_USER_CHECK(dom.min.defined() && dom.extent.defined())
      << "reduce_axis '" << name << "': range is undefined";
  if (auto v = ir::as_const_int(dom.extent)) {
    KILN_USER_CHECK(*v > 0) << "reduce_axis '" << name << "': extent must be positive, got " << *v;
  }
  return IterVar(Var(std::move(name)), dom, ir::IterVarType::kCommReduce);
}

Tensor make_compute(std::string name, std::vector<IterVar> axis, std::vector<IterVar> reduce_axis,
                    Expr body) {
  auto n = std::make_shared<TensorNode>();
  n->name_ = std::move(name);
  for (auto& iv : axis) n->shape_.push_back(iv->dom.extent);
  n->dtype_ = body.dtype();
  n->op_kind = OpKind::kCompute;
  n->axis = std::move(axis);
  n->reduce_axis = std::move(reduce_axis);
  n->body = std::move(body);
  return Tensor(n);
}

Tensor with_attr(const Tensor& t, const std::string& key, std::string value) {
  KILN_ICHECK(t.defined()) << "with_attr: undefined tensor";
  auto n = std::make_shared<TensorNode>(*t.get());
  n->attrs[key] = std::move(value);
  return Tensor(n);
}

Tensor compute(std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Var>&)>& fcompute, std::string name,
               std::vector<std::string> axis_names) {
  check_shape(shape, name);
  static const char* kAxisNames[] = {"i", "j", "p", "q", "r", "s"};
  KILN_USER_CHECK(axis_names.empty() || axis_names.size() == shape.size())
      << "compute '" << name << "': " << axis_names.size() << " axis names for " << shape.size()
      << " dimensions";
  std::vector<IterVar> axis;
  std::vector<Var> vars;
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string vn = !axis_names.empty() ? axis_names[i]
                     : i < 6             ? kAxisNames[i]
                                         : "ax" + std::to_string(i);
    Var v(vn);
    vars.push_back(v);
    axis.emplace_back(v, Range(0, shape[i]), ir::IterVarType::kDataPar);
  }
  Expr body = fcompute(vars);
  KILN_USER_CHECK(body.defined()) << "compute '" << name << "': the function returned no value";
  std::vector<IterVar> raxis;
  if (auto r = body.as<ir::ReduceNode>()) {
    raxis = r->axis;
    ReducePlacementCheck(name).visit(r->source);
    ReducePlacementCheck(name).visit(r->condition);
  } else {
    ReducePlacementCheck(name).visit(body);
  }
  return make_compute(std::move(name), std::move(axis), std::move(raxis), std::move(body));
}

namespace {
/// Adapts a lambda of N Vars to the vector form.
template <typename F, size_t... I>
Tensor compute_n(std::vector<Expr> shape, const F& f, std::string name,
                 std::vector<std::string> axis_names, std::index_sequence<I...>) {
  KILN_USER_CHECK(shape.size() == sizeof...(I))
      << "compute '" << name << "': the function takes " << sizeof...(I)
      << " indices but the shape has " << shape.size() << " dimensions";
  return compute(
      std::move(shape), [&](const std::vector<Var>& v) { return f(v[I]...); }, std::move(name),
      std::move(axis_names));
}
}  // namespace

Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var)>& f, std::string name,
               std::vector<std::string> axis_names) {
  return compute_n(std::move(shape), f, std::move(name), std::move(axis_names),
                   std::make_index_sequence<1>());
}
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var)>& f, std::string name,
               std::vector<std::string> axis_names) {
  return compute_n(std::move(shape), f, std::move(name), std::move(axis_names),
                   std::make_index_sequence<2>());
}
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names) {
  return compute_n(std::move(shape), f, std::move(name), std::move(axis_names),
                   std::make_index_sequence<3>());
}
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names) {
  return compute_n(std::move(shape), f, std::move(name), std::move(axis_names),
                   std::make_index_sequence<4>());
}
Tensor compute(std::vector<Expr> shape, const std::function<Expr(Var, Var, Var, Var, Var)>& f,
               std::string name, std::vector<std::string> axis_names) {
  return compute_n(std::move(shape), f, std::move(name), std::move(axis_names),
                   std::make_index_sequence<5>());
}

Expr sum(Expr source, std::vector<IterVar> axis, Expr where) {
  return make_reduce(ir::ReduceKind::kSum, std::move(source), std::move(axis), std::move(where));
}
Expr max(Expr source, std::vector<IterVar> axis, Expr where) {
  return make_reduce(ir::ReduceKind::kMax, std::move(source), std::move(axis), std::move(where));
}
Expr min(Expr source, std::vector<IterVar> axis, Expr where) {
  return make_reduce(ir::ReduceKind::kMin, std::move(source), std::move(axis), std::move(where));
}
Expr prod(Expr source, std::vector<IterVar> axis, Expr where) {
  return make_reduce(ir::ReduceKind::kProd, std::move(source), std::move(axis), std::move(where));
}

}  // namespace kiln::te
