// Elementwise operators, broadcasting, and the generic injective x86 schedule.
#include "compiler/topi/elementwise.h"

#include <optional>
#include <sstream>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"
#include "compiler/te/schedule_ops.h"

namespace kiln::topi {

using ir::Expr;
using ir::Var;

std::string shape_str(const std::vector<Expr>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

int normalize_axis(int64_t axis, size_t ndim, const std::string& op) {
  const auto n = static_cast<int64_t>(ndim);
  KILN_USER_CHECK(axis >= -n && axis < n)
      << op << ": axis " << axis << " is out of range for a tensor of rank " << n << " (valid: ["
      << -n << ", " << n - 1 << "])";
  return static_cast<int>(axis < 0 ? axis + n : axis);
}

namespace {

std::vector<Expr> indices_of(const std::vector<Var>& vars) { return {vars.begin(), vars.end()}; }

void check_float(const te::Tensor& x, const std::string& op) {
  KILN_USER_CHECK(x->dtype().is_float())
      << op << ": '" << x->name() << "' must be a floating-point tensor, got " << x->dtype().str();
}

/// The indices into `t` (rank <= out rank) for the output point `out_idx` of `out_shape`: the
/// trailing dimensions line up, and a size-1 dimension of `t` is read at 0.
std::vector<Expr> broadcast_indices(const te::Tensor& t, const std::vector<Expr>& out_shape,
                                    const std::vector<Var>& out_idx) {
  const size_t offset = out_shape.size() - t.ndim();
  std::vector<Expr> idx;
  for (size_t i = 0; i < t.ndim(); ++i) {
    const Expr& d = t->shape()[i];
    bool stretched = ir::is_one(d) && !ir::is_one(out_shape[offset + i]);
    idx.push_back(stretched ? ir::make_zero(ir::kInt32) : Expr(out_idx[offset + i]));
  }
  return idx;
}

}  // namespace

te::Tensor elementwise(const te::Tensor& x, const std::function<Expr(Expr)>& f,
                       const std::string& name) {
  return te::compute(
      x->shape(), [&](const std::vector<Var>& i) { return f(x(indices_of(i))); }, name);
}

te::Tensor relu(const te::Tensor& x, const std::string& name) {
  return elementwise(
      x, [&](Expr v) { return ir::max(v, ir::make_zero(x->dtype())); }, name);
}

te::Tensor leaky_relu(const te::Tensor& x, double alpha, const std::string& name) {
  check_float(x, "leaky_relu");
  return elementwise(
      x,
      [&](Expr v) {
        return ir::select(v < ir::make_zero(x->dtype()), v * ir::make_const(x->dtype(), alpha), v);
      },
      name);
}

te::Tensor clip(const te::Tensor& x, double lo, double hi, const std::string& name) {
  KILN_USER_CHECK(lo <= hi) << "clip: min " << lo << " is greater than max " << hi;
  const ir::DataType t = x->dtype();
  auto c = [&](double v) {
    return t.is_float() ? ir::make_const(t, v) : ir::make_const(t, static_cast<int64_t>(v));
  };
  return elementwise(
      x, [&](Expr v) { return ir::min(ir::max(v, c(lo)), c(hi)); }, name);
}

te::Tensor sigmoid(const te::Tensor& x, const std::string& name) {
  check_float(x, "sigmoid");
  return elementwise(
      x, [](Expr v) { return ir::sigmoid(v); }, name);
}
te::Tensor tanh(const te::Tensor& x, const std::string& name) {
  check_float(x, "tanh");
  return elementwise(
      x, [](Expr v) { return ir::tanh(v); }, name);
}
te::Tensor exp(const te::Tensor& x, const std::string& name) {
  check_float(x, "exp");
  return elementwise(
      x, [](Expr v) { return ir::exp(v); }, name);
}
te::Tensor log(const te::Tensor& x, const std::string& name) {
  check_float(x, "log");
  return elementwise(
      x, [](Expr v) { return ir::log(v); }, name);
}
te::Tensor sqrt(const te::Tensor& x, const std::string& name) {
  check_float(x, "sqrt");
  return elementwise(
      x, [](Expr v) { return ir::sqrt(v); }, name);
}
te::Tensor abs(const te::Tensor& x, const std::string& name) {
  return elementwise(
      x, [](Expr v) { return ir::abs(v); }, name);
}
te::Tensor neg(const te::Tensor& x, const std::string& name) {
  return elementwise(
      x, [](Expr v) { return -v; }, name);
}
te::Tensor cast(const te::Tensor& x, ir::DataType dtype, const std::string& name) {
  KILN_USER_CHECK(dtype.is_scalar() && (dtype.is_float() || dtype.is_integral()))
      << "cast: cannot cast '" << x->name() << "' to " << dtype.str();
  return elementwise(
      x, [&](Expr v) { return ir::cast(dtype, v); }, name);
}

std::vector<Expr> broadcast_shape(const std::vector<Expr>& a, const std::vector<Expr>& b,
                                  const std::string& op) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<Expr> out(n);
  for (size_t i = 0; i < n; ++i) {
    // Dimension i of the result, counted from the right in each operand.
    const size_t from_right = n - 1 - i;
    Expr da = from_right < a.size() ? a[a.size() - 1 - from_right] : Expr();
    Expr db = from_right < b.size() ? b[b.size() - 1 - from_right] : Expr();
    if (!da.defined() || ir::is_one(da)) {
      out[i] = db.defined() ? db : da;
      continue;
    }
    if (!db.defined() || ir::is_one(db)) {
      out[i] = da;
      continue;
    }
    auto ca = ir::as_const_int(da), cb = ir::as_const_int(db);
    bool same = da.same_as(db) || (ca && cb && *ca == *cb);
    KILN_USER_CHECK(same) << op << ": shapes " << shape_str(a) << " and " << shape_str(b)
                          << " cannot be broadcast: dimension " << da
                          << " of the first does not match " << db
                          << " of the second (aligned from the right, sizes must be equal or 1)";
    out[i] = da;
  }
  return out;
}

te::Tensor broadcast_binary(const te::Tensor& a, const te::Tensor& b,
                            const std::function<Expr(Expr, Expr)>& f, const std::string& name) {
  KILN_USER_CHECK(a->dtype() == b->dtype())
      << name << ": operands '" << a->name() << "' (" << a->dtype().str() << ") and '" << b->name()
      << "' (" << b->dtype().str() << ") have different dtypes";
  std::vector<Expr> shape = broadcast_shape(a->shape(), b->shape(), name);
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        return f(a(broadcast_indices(a, shape, i)), b(broadcast_indices(b, shape, i)));
      },
      name);
}

te::Tensor where(const te::Tensor& cond, const te::Tensor& a, const te::Tensor& b,
                 const std::string& name) {
  KILN_USER_CHECK(cond->dtype().is_bool())
      << name << ": condition '" << cond->name() << "' must be bool, got " << cond->dtype().str();
  KILN_USER_CHECK(a->dtype() == b->dtype())
      << name << ": operands '" << a->name() << "' (" << a->dtype().str() << ") and '" << b->name()
      << "' (" << b->dtype().str() << ") have different dtypes";
  std::vector<Expr> shape =
      broadcast_shape(broadcast_shape(cond->shape(), a->shape(), name), b->shape(), name);
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        return ir::select(cond(broadcast_indices(cond, shape, i)),
                          a(broadcast_indices(a, shape, i)), b(broadcast_indices(b, shape, i)));
      },
      name);
}

te::Tensor broadcast_to(const te::Tensor& x, const std::vector<int64_t>& shape,
                        const std::string& name) {
  std::vector<Expr> out;
  for (int64_t d : shape) out.push_back(Expr(static_cast<int>(d)));
  KILN_USER_CHECK(out.size() >= x.ndim())
      << name << ": '" << x->name() << "' of shape " << shape_str(x->shape())
      << " has more dimensions than the shape " << shape_str(out) << " it is broadcast to";
  const std::vector<Expr> joint = broadcast_shape(x->shape(), out, name);
  for (size_t i = 0; i < joint.size(); ++i) {
    KILN_USER_CHECK(ir::as_const_int(joint[i]) == ir::as_const_int(out[i]))
        << name << ": '" << x->name() << "' of shape " << shape_str(x->shape())
        << " does not broadcast to " << shape_str(out);
  }
  return te::compute(
      out, [&](const std::vector<Var>& i) { return x(broadcast_indices(x, out, i)); }, name);
}

te::Tensor add(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return broadcast_binary(
      a, b, [](Expr x, Expr y) { return x + y; }, name);
}
te::Tensor sub(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return broadcast_binary(
      a, b, [](Expr x, Expr y) { return x - y; }, name);
}
te::Tensor mul(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return broadcast_binary(
      a, b, [](Expr x, Expr y) { return x * y; }, name);
}
te::Tensor div(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  if (a->dtype().is_float()) {
    return broadcast_binary(
        a, b, [](Expr x, Expr y) { return x / y; }, name);
  }
  // Integers: x / 0 is defined as x (ONNX leaves it undefined; a trap would kill the process).
  return broadcast_binary(
      a, b,
      [](Expr x, Expr y) {
        Expr one = ir::make_one(y.dtype());
        return x / ir::select(y == ir::make_zero(y.dtype()), one, y);
      },
      name);
}
te::Tensor maximum(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return broadcast_binary(
      a, b, [](Expr x, Expr y) { return ir::max(x, y); }, name);
}
te::Tensor minimum(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  return broadcast_binary(
      a, b, [](Expr x, Expr y) { return ir::min(x, y); }, name);
}
te::Tensor pow(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  check_float(a, "pow");
  return broadcast_binary(
      a, b, [](Expr x, Expr y) { return ir::pow(x, y); }, name);
}

namespace {

/// The axis whose tiles of 16 a transposing injective kernel reads in lines, or -1: where some
/// tensor it reads (its body with the inlined stages substituted) is not contiguous along the
/// output's last axis, but is along 16 aligned points of another axis of at least 16 (the
/// channels of a blocked input written out channel-major: NCHW16c to NCHW, a video's frames back
/// to NCDHW). Vectors along the last axis then gather from 16 lines each, which the next 15
/// points of that axis read again; in the plain order they come back a whole plane later.
int transposed_axis(const te::Schedule& s, const te::Tensor& out) {
  constexpr int64_t kTile = 16;
  const size_t ndim = out.ndim();
  std::vector<int64_t> extents;
  for (const Expr& d : out->shape()) {
    const std::optional<int64_t> c = ir::as_const_int(d);
    if (!c) return -1;
    extents.push_back(*c);
  }
  if (ndim < 2 || extents.back() < kTile) return -1;
  // The body with the inlined stages substituted: the stage at the same place in normalize's copy.
  size_t at = 0;
  while (at < s->stages.size() && s->stages[at]->op.get() != out.get()) ++at;
  if (at == s->stages.size()) return -1;
  const te::Schedule normal = te::normalize(s);
  const te::Tensor body_op = normal->stages[at]->op;
  if (!body_op->is_compute() || !body_op->reduce_axis.empty()) return -1;
  // Each tensor read: its row-major element index.
  std::vector<Expr> flat;
  ir::post_order_visit(body_op->body, [&](const ir::Object* o) {
    const auto* load = dynamic_cast<const ir::ProducerLoadNode*>(o);
    if (load == nullptr) return;
    const auto* t = static_cast<const te::TensorNode*>(load->producer.get());
    Expr f = Expr(0);
    for (size_t k = 0; k < load->indices.size(); ++k) {
      const std::optional<int64_t> d = ir::as_const_int(t->shape()[k]);
      if (!d) return;
      f = f * Expr(*d) + load->indices[k];
    }
    flat.push_back(f);
  });
  // How far each read moves along axis k within an aligned tile of 16 of it (nullopt: unknown).
  auto step_in_tile = [&](const Expr& f, size_t k) -> std::optional<int64_t> {
    ir::VarIntervals dom;
    for (size_t i = 0; i < ndim; ++i)
      dom[body_op->axis[i]->var.get()] = {Expr(0), Expr(extents[i] - 1)};
    const Var outer(body_op->axis[k]->var.name() + ".o"),
        inner(body_op->axis[k]->var.name() + ".i");
    dom.erase(body_op->axis[k]->var.get());
    dom[outer.get()] = {Expr(0), Expr((extents[k] + kTile - 1) / kTile - 1)};
    dom[inner.get()] = {Expr(0), Expr(kTile - 2)};
    const Expr g = ir::substitute(f, {{body_op->axis[k]->var.get(), outer * kTile + inner}});
    return ir::as_const_int(ir::simplify(ir::substitute(g, {{inner.get(), inner + 1}}) - g, dom));
  };
  for (const Expr& f : flat) {
    const std::optional<int64_t> last = step_in_tile(f, ndim - 1);
    if (last && (*last == 0 || *last == 1)) continue;
    for (size_t k = ndim - 1; k-- > 0;) {
      if (extents[k] >= kTile && step_in_tile(f, k) == 1) return static_cast<int>(k);
    }
  }
  return -1;
}

}  // namespace

void schedule_injective_x86(te::Schedule& s, const te::Tensor& out) {
  constexpr int kLanes = 16;               // fp32 lanes of an AVX-512 register
  constexpr int64_t kParallelMin = 16384;  // below this, launching threads costs more than it saves
  te::Stage st = s[out];
  const size_t ndim = st->op.ndim();
  if (ndim == 0) return;
  std::optional<int64_t> total = 1;
  for (const Expr& d : st->op->shape()) {
    auto c = ir::as_const_int(d);
    total = c && total ? std::optional<int64_t>(*total * *c) : std::nullopt;
  }
  std::vector<ir::IterVar> axes;
  for (size_t i = 0; i < ndim; ++i) axes.push_back(st.axis(i));
  if (total && *total <= kLanes) {
    ir::IterVar fused = ndim == 1 ? axes[0] : st.fuse(axes);
    if (*total > 1) st.vectorize(fused);
    return;
  }
  ir::IterVar outer, inner;
  auto last = ir::as_const_int(st->op->shape()[ndim - 1]);
  // The axis before the last (0: none, or not constant).
  const int64_t prev = ndim > 2 ? ir::as_const_int(st->op->shape()[ndim - 2]).value_or(0) : 0;
  if (last && *last == kLanes && prev > 0 && total && *total / (prev * kLanes) >= 8) {
    // NCHW16c: the rows (N, C/16, H) in parallel, each a loop over W of one vector: its indices
    // advance by a constant and whatever depends on the channel block alone (which input of a
    // concatenation a DenseNet layer reads) is decided once per row, not per vector.
    std::vector<ir::IterVar> rows(axes.begin(), axes.end() - 2);
    ir::IterVar row = rows.size() == 1 ? rows[0] : st.fuse(rows);
    if (*total > kParallelMin) st.parallel(row);
    st.vectorize(axes.back());
    return;
  }
  if (const int a = transposed_axis(s, out); a >= 0) {
    // A transposing kernel: tiles of 16 points of axis a by up to 4 vectors of the last axis,
    // the 16 points of a in turn reading the same lines (in L1), each writing a run of 4 vectors.
    constexpr int64_t kRun = 4 * kLanes;
    auto [ao, ai] = st.split(axes[a], kLanes);
    auto [lc, lr] = st.split(axes.back(), kRun);
    auto [lo, li] = st.split(lr, kLanes);
    std::vector<ir::IterVar> order;
    for (size_t i = 0; i + 1 < ndim; ++i) order.push_back(static_cast<int>(i) == a ? ao : axes[i]);
    order.push_back(lc);
    std::vector<ir::IterVar> all = order;
    all.insert(all.end(), {ai, lo, li});
    st.reorder(all);
    outer = st.fuse(order);
    inner = li;
  } else if (last && (*last % kLanes == 0 || (ndim > 1 && *last >= 2 * kLanes))) {
    // The same iteration order as fusing everything and splitting by 16, but split first: a
    // vector then never crosses a row, so its indices stay affine (contiguous loads and stores).
    // A long row that 16 does not divide (an attention's 197 keys) ends in a predicated partial
    // vector: fused, every vector crossing a row would gather whatever reads a row's value (a
    // softmax's maximum and sum, a bias per row).
    auto [lo, li] = st.split(axes.back(), kLanes);
    axes.back() = lo;
    outer = axes.size() == 1 ? lo : st.fuse(axes);
    inner = li;
  } else if (last && *last < kLanes && kLanes % *last != 0 && prev > 0 && prev % kLanes == 0) {
    // A short last axis that 16 does not divide (the 3 colours of a network's input in NCHW3c):
    // 16 elements of the axis before it by the whole last axis, one vector of 16 x last lanes,
    // so that each lane's source index is the vector's start plus a constant. Fused and split by
    // 16, each lane needed its own division by 3 and by the row length, and a gather.
    auto [po, pi] = st.split(axes[ndim - 2], kLanes);
    std::vector<ir::IterVar> outer_axes(axes.begin(), axes.end() - 2);
    outer_axes.push_back(po);
    outer = outer_axes.size() == 1 ? outer_axes[0] : st.fuse(outer_axes);
    inner = st.fuse({pi, axes.back()});
  } else {
    ir::IterVar fused = ndim == 1 ? axes[0] : st.fuse(axes);
    auto split = st.split(fused, kLanes);
    outer = split.outer;
    inner = split.inner;
  }
  if (!total || *total > kParallelMin) st.parallel(outer);
  st.vectorize(inner);
}

te::Schedule schedule_injective_x86(const std::vector<te::Tensor>& outs) {
  te::Schedule s = te::create_schedule(outs);
  for (const te::Stage& st : s->stages) {
    if (st->is_placeholder() || st->is_output || !st->op->reduce_axis.empty()) continue;
    te::Stage(st).compute_inline();
  }
  for (const te::Tensor& t : outs) schedule_injective_x86(s, t);
  return s;
}

}  // namespace kiln::topi
