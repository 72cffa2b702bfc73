// GatherND as index arithmetic; ScatterElements and ScatterND as reductions over their updates,
// tensorized on x86 into one pass over the indices (scatter.h says why).
#include "compiler/topi/scatter.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <sstream>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/te/tensor_intrin.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/transform.h"

namespace kiln::topi {

using ir::DataType;
using ir::Expr;
using ir::Stmt;
using ir::Var;
using Shape = std::vector<int64_t>;

namespace {

/// The attribute on a scatter's reduction stage that lets its schedule rebuild the intrinsic:
/// "nd <reduction>" or "elements <axis> <reduction>".
constexpr const char* kScatterAttr = "scatter";

const char* reduction_name(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::kNone:
      return "none";
    case ScatterReduction::kAdd:
      return "add";
    case ScatterReduction::kMul:
      return "mul";
    case ScatterReduction::kMax:
      return "max";
    case ScatterReduction::kMin:
      return "min";
  }
  return "none";
}

ir::ReduceKind combiner(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::kMul:
      return ir::ReduceKind::kProd;
    case ScatterReduction::kMax:
      return ir::ReduceKind::kMax;
    case ScatterReduction::kMin:
      return ir::ReduceKind::kMin;
    default:
      return ir::ReduceKind::kSum;
  }
}

std::string str(const Shape& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

Expr i32(int64_t v) {
  KILN_USER_CHECK(v >= INT32_MIN && v <= INT32_MAX)
      << "index value " << v << " does not fit in 32 bits";
  return Expr(static_cast<int32_t>(v));
}

std::vector<Expr> exprs(const Shape& v) {
  std::vector<Expr> e;
  for (int64_t d : v) e.push_back(i32(d));
  return e;
}

int64_t product(const Shape& v, size_t begin = 0, size_t end = SIZE_MAX) {
  end = std::min(end, v.size());
  begin = std::min(begin, end);
  return std::accumulate(v.begin() + static_cast<ptrdiff_t>(begin),
                         v.begin() + static_cast<ptrdiff_t>(end), int64_t{1},
                         std::multiplies<int64_t>());
}

/// The indices of the flat offset `flat` in `shape` (row-major).
std::vector<Expr> unravel(const Expr& flat, const Shape& shape) {
  std::vector<Expr> idx(shape.size());
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    Expr q = stride == 1 ? flat : ir::floordiv(flat, i32(stride));
    idx[k] = k == 0 ? q : ir::floormod(q, i32(shape[k]));
    stride *= shape[k];
  }
  return idx;
}

/// An index value as int32, a negative one counted from the end of an axis of `dim` elements.
Expr normalized(const Expr& index, int64_t dim) {
  Expr v = ir::cast(ir::kInt32, index);
  return ir::select(v < 0, v + i32(dim), v);
}

void check_indices(const te::Tensor& indices, const std::string& op) {
  KILN_USER_CHECK(indices->dtype().is_int() || indices->dtype().is_uint())
      << op << ": indices '" << indices->name() << "' must be integers, not "
      << indices->dtype().str();
}

void check_updates_dtype(const te::Tensor& data, const te::Tensor& updates, const std::string& op) {
  KILN_USER_CHECK(updates->dtype() == data->dtype())
      << op << ": updates '" << updates->name() << "' hold " << updates->dtype().str()
      << " but data '" << data->name() << "' holds " << data->dtype().str();
}

// ---- the computes, built alike for the operator and for its intrinsic's declaration ----

/// The reduction's value at step j: data for j == 0, then, for update j - 1, `update` where it hits
/// the output point and the combiner's identity elsewhere; for kNone, j - 1 where update j - 1 hits
/// its slot, else -1 (the winner is their maximum: the last hit). Step 0 of kNone is never a hit:
/// both forms have n + 1 steps, and a read at j == 0 stays in its region's first element (the
/// region tensorize matches starts where every loop is 0).
Expr reduce_body(ScatterReduction red, const te::IterVar& j, const Expr& data_at, const Expr& hit,
                 const Expr& update, DataType dtype) {
  const Expr step = j.var();
  if (red == ScatterReduction::kNone) {
    return te::max(ir::select(step > 0 && hit, step - 1, Expr(-1)), {j});
  }
  Expr value = ir::select(step == 0, data_at,
                          ir::select(hit, update, ir::reduce_identity(combiner(red), dtype)));
  switch (combiner(red)) {
    case ir::ReduceKind::kProd:
      return te::prod(value, {j});
    case ir::ReduceKind::kMax:
      return te::max(value, {j});
    case ir::ReduceKind::kMin:
      return te::min(value, {j});
    default:
      return te::sum(value, {j});
  }
}

/// ScatterElements' reduction stage (see scatter.h): the winner per element of data (kNone), or
/// the output.
te::Tensor elements_stage(const te::Tensor& data, const te::Tensor& indices,
                          const te::Tensor& updates, int axis, ScatterReduction red,
                          const std::string& name) {
  const Shape dshape = const_shape(data, name), ishape = const_shape(indices, name);
  const size_t a = static_cast<size_t>(axis);
  const bool none = red == ScatterReduction::kNone;
  te::IterVar j = te::reduce_axis({0, i32(ishape[a] + 1)}, "j");
  auto body = [&](const std::vector<Var>& o) -> Expr {
    // o's coordinates clamped to indices' shape (smaller than data's along other axes), and
    // whether they lie inside it.
    Expr inside = ir::const_true();
    std::vector<Expr> p;
    for (size_t d = 0; d < dshape.size(); ++d) {
      if (d != a && ishape[d] < dshape[d]) {
        inside = inside && o[d] < i32(ishape[d]);
        p.push_back(ir::min(o[d], i32(ishape[d] - 1)));
      } else {
        p.push_back(o[d]);
      }
    }
    p[a] = ir::max(j.var() - 1, 0);
    Expr hit = inside && normalized(indices(p), dshape[a]) == o[a];
    Expr data_at = none ? Expr() : data(std::vector<Expr>(o.begin(), o.end()));
    Expr update = none ? Expr() : updates(p);
    return reduce_body(red, j, data_at, hit, update, data->dtype());
  };
  return te::compute(exprs(dshape), body, none ? name + ".winner" : name);
}

/// Whether the index tuple indices[u, 0..k) names slot `slot` (data's first k coordinates). The
/// coordinate c > 0 is read as (j == 0 ? 0 : c), which is c wherever it matters (step 0 is data's
/// or never a hit), so that every read of indices starts its region at the same element.
Expr nd_hit(const te::Tensor& indices, const te::IterVar& j, const std::vector<Expr>& u,
            const std::vector<Expr>& slot, const Shape& dshape) {
  Expr hit = ir::const_true();
  for (size_t c = 0; c < slot.size(); ++c) {
    std::vector<Expr> at = u;
    const Expr cc = i32(static_cast<int64_t>(c));
    at.push_back(c == 0 ? cc : ir::select(j.var() == 0, Expr(0), cc));
    hit = hit && normalized(indices(at), dshape[c]) == slot[c];
  }
  return hit;
}

/// ScatterND's reduction stage: the winner per slot (kNone), or the output.
te::Tensor nd_stage(const te::Tensor& data, const te::Tensor& indices, const te::Tensor& updates,
                    ScatterReduction red, const std::string& name) {
  const Shape dshape = const_shape(data, name), ishape = const_shape(indices, name);
  KILN_ICHECK(!ishape.empty()) << name << ": scatter_nd checks the indices' rank first";
  const size_t k = static_cast<size_t>(ishape.back());
  const Shape ushape(ishape.begin(), ishape.end() - 1);
  const bool none = red == ScatterReduction::kNone;
  te::IterVar j = te::reduce_axis({0, i32(product(ushape) + 1)}, "j");
  const Shape shape =
      none ? Shape(dshape.begin(), dshape.begin() + static_cast<ptrdiff_t>(k)) : dshape;
  return te::compute(
      exprs(shape),
      [&](const std::vector<Var>& o) {
        std::vector<Expr> u = unravel(ir::max(j.var() - 1, 0), ushape);
        Expr hit =
            nd_hit(indices, j, u, {o.begin(), o.begin() + static_cast<ptrdiff_t>(k)}, dshape);
        if (none) return reduce_body(red, j, Expr(), hit, Expr(), ir::kInt32);
        std::vector<Expr> at = u;
        at.insert(at.end(), o.begin() + static_cast<ptrdiff_t>(k), o.end());
        return reduce_body(red, j, data(std::vector<Expr>(o.begin(), o.end())), hit, updates(at),
                           data->dtype());
      },
      none ? name + ".winner" : name);
}

// ---- the intrinsic's lowering: fill, then one pass over the indices ----

/// for (i_0 in [0, shape[0])) ... body(i); body({}) for a scalar.
Stmt loop_nest(const Shape& shape, const std::string& prefix,
               const std::function<Stmt(const std::vector<Expr>&)>& body) {
  std::vector<Var> vars;
  for (size_t d = 0; d < shape.size(); ++d) vars.emplace_back(prefix + std::to_string(d));
  Stmt s = body(std::vector<Expr>(vars.begin(), vars.end()));
  for (size_t d = shape.size(); d-- > 0;) {
    s = ir::for_loop(vars[d], Expr(0), i32(shape[d]), ir::ForKind::kSerial, s);
  }
  return s;
}

/// The shapes and roles an intrinsic's lowering needs.
struct ScatterProblem {
  bool nd = false;
  int axis = 0;
  ScatterReduction red = ScatterReduction::kNone;
  Shape dshape, ishape;
  /// Position of data, indices and updates among the intrinsic's inputs (-1: not read).
  int data = -1, indices = -1, updates = -1;
};

/// The index read at `at`, normalized, bound to a fresh variable around `body(v, in_range)`.
Stmt with_index(const ir::IntrinBuffer& indices, const std::vector<Expr>& at, int64_t dim,
                const std::string& name, const std::function<Stmt(const Expr&, Expr)>& body) {
  Var v(name);
  Expr value = normalized(indices.load(at), dim);
  return ir::let_stmt(v, value, body(v, v >= 0 && v < i32(dim)));
}

ir::IntrinStmts lower_scatter(const ScatterProblem& p, const std::vector<ir::IntrinBuffer>& in,
                              const ir::IntrinBuffer& out) {
  const ir::IntrinBuffer& indices = in[static_cast<size_t>(p.indices)];
  const bool none = p.red == ScatterReduction::kNone;
  const ir::ReduceKind kind = combiner(p.red);
  std::vector<Stmt> steps;
  // The fill: winner = -1, or out = data.
  Shape filled = p.dshape;
  if (p.nd && none) filled.resize(static_cast<size_t>(p.ishape.back()));
  steps.push_back(loop_nest(filled, "f", [&](const std::vector<Expr>& i) {
    return out.store(i, none ? Expr(-1) : in[static_cast<size_t>(p.data)].load(i));
  }));
  // One pass over the indices, in order.
  auto write = [&](const std::vector<Expr>& target, const std::vector<Expr>& source, Expr winner) {
    if (none) return out.store(target, std::move(winner));
    Expr update = in[static_cast<size_t>(p.updates)].load(source);
    return out.store(target, ir::reduce_combine(kind, out.load(target), update));
  };
  if (!p.nd) {
    const size_t a = static_cast<size_t>(p.axis);
    steps.push_back(loop_nest(p.ishape, "p", [&](const std::vector<Expr>& pos) {
      return with_index(indices, pos, p.dshape[a], "v", [&](const Expr& v, Expr in_range) {
        std::vector<Expr> target = pos;
        target[a] = v;
        return ir::if_then_else(in_range, write(target, pos, pos[a]));
      });
    }));
  } else {
    const Shape ushape(p.ishape.begin(), p.ishape.end() - 1);
    const size_t k = static_cast<size_t>(p.ishape.back());
    const Shape rest(p.dshape.begin() + static_cast<ptrdiff_t>(k), p.dshape.end());
    steps.push_back(loop_nest(ushape, "u", [&](const std::vector<Expr>& u) {
      // The k coordinates bound one by one, innermost body first.
      std::vector<Expr> slot(k);
      Expr all_in_range = ir::const_true();
      std::function<Stmt(size_t)> bind = [&](size_t c) -> Stmt {
        if (c == k) {
          Stmt w;
          if (none) {
            Expr flat = ir::make_zero(ir::kInt32);
            for (size_t d = 0; d < u.size(); ++d) flat = flat * i32(ushape[d]) + u[d];
            w = write(slot, {}, flat);
          } else {
            w = loop_nest(rest, "r", [&](const std::vector<Expr>& r) {
              std::vector<Expr> target = slot, source = u;
              target.insert(target.end(), r.begin(), r.end());
              source.insert(source.end(), r.begin(), r.end());
              return write(target, source, Expr());
            });
          }
          return ir::if_then_else(all_in_range, w);
        }
        std::vector<Expr> at = u;
        at.push_back(i32(static_cast<int64_t>(c)));
        return with_index(indices, at, p.dshape[c], "v" + std::to_string(c),
                          [&](const Expr& v, Expr in_range) {
                            slot[c] = v;
                            all_in_range = all_in_range && in_range;
                            return bind(c + 1);
                          });
      };
      return bind(0);
    }));
  }
  ir::IntrinStmts stmts;
  stmts.body = ir::seq(std::move(steps));
  return stmts;
}

/// The reduction stage's attribute value, and its parse.
std::string spec_string(bool nd, int axis, ScatterReduction red) {
  std::ostringstream os;
  if (nd) {
    os << "nd " << reduction_name(red);
  } else {
    os << "elements " << axis << " " << reduction_name(red);
  }
  return os.str();
}

ScatterProblem parse_spec(const std::string& spec, const std::string& op) {
  std::istringstream is(spec);
  std::string kind, red;
  ScatterProblem p;
  is >> kind;
  p.nd = kind == "nd";
  if (!p.nd) is >> p.axis;
  is >> red;
  KILN_ICHECK(!is.fail() && (p.nd || kind == "elements"))
      << "scatter: malformed attribute '" << spec << "' on '" << op << "'";
  p.red = parse_scatter_reduction(red, op);
  return p;
}

}  // namespace

ScatterReduction parse_scatter_reduction(const std::string& value, const std::string& op) {
  for (ScatterReduction r :
       {ScatterReduction::kNone, ScatterReduction::kAdd, ScatterReduction::kMul,
        ScatterReduction::kMax, ScatterReduction::kMin}) {
    if (value == reduction_name(r)) return r;
  }
  KILN_USER_CHECK(false) << op << ": reduction '" << value
                         << "' is not one of none, add, mul, max, min";
  return ScatterReduction::kNone;
}

te::Tensor gather_nd(const te::Tensor& data, const te::Tensor& indices, int64_t batch_dims,
                     const std::string& name) {
  check_indices(indices, name);
  const Shape dshape = const_shape(data, name), ishape = const_shape(indices, name);
  const int64_t r = static_cast<int64_t>(dshape.size()), q = static_cast<int64_t>(ishape.size());
  KILN_USER_CHECK(q >= 1) << name << ": indices '" << indices->name() << "' must have rank >= 1";
  KILN_USER_CHECK(batch_dims >= 0 && batch_dims < std::min(q, r))
      << name << ": batch_dims " << batch_dims << " must be in [0, " << std::min(q, r)
      << ") for data '" << data->name() << "' of shape " << str(dshape) << " and indices '"
      << indices->name() << "' of shape " << str(ishape);
  const size_t b = static_cast<size_t>(batch_dims);
  for (size_t d = 0; d < b; ++d) {
    KILN_USER_CHECK(dshape[d] == ishape[d])
        << name << ": batch dimension " << d << " of data '" << data->name() << "' (shape "
        << str(dshape) << ") and indices '" << indices->name() << "' (shape " << str(ishape)
        << ") differ";
  }
  const int64_t k = ishape.back();
  KILN_USER_CHECK(k >= 1 && k <= r - batch_dims)
      << name << ": the last dimension of indices '" << indices->name() << "' (shape "
      << str(ishape) << ") is " << k << ", but must be in [1, " << r - batch_dims << "] for data '"
      << data->name() << "' of shape " << str(dshape) << " and batch_dims " << batch_dims;
  Shape shape(ishape.begin(), ishape.end() - 1);
  const size_t lead = shape.size();  // batch + index tuple coordinates of the output
  shape.insert(shape.end(), dshape.begin() + static_cast<ptrdiff_t>(b + static_cast<size_t>(k)),
               dshape.end());
  return te::compute(
      exprs(shape),
      [&](const std::vector<Var>& o) {
        std::vector<Expr> idx(o.begin(), o.begin() + static_cast<ptrdiff_t>(b));
        for (int64_t c = 0; c < k; ++c) {
          std::vector<Expr> at(o.begin(), o.begin() + static_cast<ptrdiff_t>(lead));
          at.push_back(i32(c));
          const int64_t dim = dshape[b + static_cast<size_t>(c)];
          idx.push_back(ir::min(ir::max(normalized(indices(at), dim), 0), i32(dim - 1)));
        }
        idx.insert(idx.end(), o.begin() + static_cast<ptrdiff_t>(lead), o.end());
        return data(idx);
      },
      name);
}

te::Tensor scatter_elements(const te::Tensor& data, const te::Tensor& indices,
                            const te::Tensor& updates, int64_t axis, ScatterReduction reduction,
                            const std::string& name) {
  check_indices(indices, name);
  check_updates_dtype(data, updates, name);
  const Shape dshape = const_shape(data, name), ishape = const_shape(indices, name),
              ushape = const_shape(updates, name);
  KILN_USER_CHECK(dshape.size() >= 1)
      << name << ": data '" << data->name() << "' must have rank >= 1";
  KILN_USER_CHECK(ishape.size() == dshape.size())
      << name << ": indices '" << indices->name() << "' of shape " << str(ishape)
      << " must have the rank of data '" << data->name() << "', of shape " << str(dshape);
  KILN_USER_CHECK(ushape == ishape)
      << name << ": updates '" << updates->name() << "' of shape " << str(ushape)
      << " must have the shape of indices '" << indices->name() << "', " << str(ishape);
  const int a = normalize_axis(axis, dshape.size(), name);
  for (size_t d = 0; d < dshape.size(); ++d) {
    KILN_USER_CHECK(static_cast<int>(d) == a || ishape[d] <= dshape[d])
        << name << ": dimension " << d << " of indices '" << indices->name() << "' (shape "
        << str(ishape) << ") exceeds that of data '" << data->name() << "' (shape " << str(dshape)
        << ")";
  }
  te::Tensor stage = te::with_attr(elements_stage(data, indices, updates, a, reduction, name),
                                   kScatterAttr, spec_string(false, a, reduction));
  if (reduction != ScatterReduction::kNone) return stage;
  return te::compute(
      exprs(dshape),
      [&](const std::vector<Var>& o) {
        std::vector<Expr> at(o.begin(), o.end());
        Expr w = stage(at);
        std::vector<Expr> p = at;
        p[static_cast<size_t>(a)] = ir::max(w, 0);
        for (size_t d = 0; d < p.size(); ++d) {
          if (static_cast<int>(d) != a && ishape[d] < dshape[d]) {
            p[d] = ir::min(p[d], i32(ishape[d] - 1));  // only read where w >= 0: inside
          }
        }
        return ir::select(w >= 0, updates(p), data(at));
      },
      name);
}

te::Tensor scatter_nd(const te::Tensor& data, const te::Tensor& indices, const te::Tensor& updates,
                      ScatterReduction reduction, const std::string& name) {
  check_indices(indices, name);
  check_updates_dtype(data, updates, name);
  const Shape dshape = const_shape(data, name), ishape = const_shape(indices, name),
              ushape = const_shape(updates, name);
  KILN_USER_CHECK(dshape.size() >= 1)
      << name << ": data '" << data->name() << "' must have rank >= 1";
  KILN_USER_CHECK(ishape.size() >= 1)
      << name << ": indices '" << indices->name() << "' must have rank >= 1";
  const int64_t k = ishape.back();
  KILN_USER_CHECK(k >= 1 && k <= static_cast<int64_t>(dshape.size()))
      << name << ": the last dimension of indices '" << indices->name() << "' (shape "
      << str(ishape) << ") is " << k << ", but must be in [1, " << dshape.size() << "] for data '"
      << data->name() << "' of shape " << str(dshape);
  Shape expected(ishape.begin(), ishape.end() - 1);
  expected.insert(expected.end(), dshape.begin() + k, dshape.end());
  KILN_USER_CHECK(ushape == expected)
      << name << ": updates '" << updates->name() << "' of shape " << str(ushape)
      << " must have the shape indices.shape[:-1] + data.shape[" << k << ":] = " << str(expected)
      << " (indices '" << indices->name() << "' " << str(ishape) << ", data '" << data->name()
      << "' " << str(dshape) << ")";
  te::Tensor stage = te::with_attr(nd_stage(data, indices, updates, reduction, name), kScatterAttr,
                                   spec_string(true, 0, reduction));
  if (reduction != ScatterReduction::kNone) return stage;
  const Shape ulead(ishape.begin(), ishape.end() - 1);
  return te::compute(
      exprs(dshape),
      [&](const std::vector<Var>& o) {
        Expr w = stage(std::vector<Expr>(o.begin(), o.begin() + k));
        std::vector<Expr> at = unravel(ir::max(w, 0), ulead);
        at.insert(at.end(), o.begin() + k, o.end());
        return ir::select(w >= 0, updates(at), data(std::vector<Expr>(o.begin(), o.end())));
      },
      name);
}

te::Tensor scatter_stage(const te::Tensor& out) {
  if (!out.defined() || !out->is_compute()) return {};
  if (out->attrs.count(kScatterAttr)) return out;
  for (const te::Tensor& in : out->inputs()) {
    if (in->attrs.count(kScatterAttr)) return in;
  }
  return {};
}

void schedule_scatter_x86(te::Schedule& s, const te::Tensor& out) {
  const te::Tensor stage = scatter_stage(out);
  KILN_USER_CHECK(stage.defined()) << "schedule_scatter_x86: '" << out->name()
                                   << "' is not the output of scatter_elements or scatter_nd";
  ScatterProblem p = parse_spec(stage->attrs.at(kScatterAttr), stage->name());
  // The stage as the schedule computes it now: its inputs must be what the compute read.
  te::Stage st = s[stage];
  const te::Tensor now = st->op;
  const std::vector<te::Tensor> ins = now->inputs();
  // kNone's winner reads the indices alone; the others data, indices and updates, in that order
  // (data and updates one tensor when the graph passes one for both).
  const bool none = p.red == ScatterReduction::kNone;
  const bool shared = !none && ins.size() == 2;
  KILN_USER_CHECK(ins.size() == (none ? 1 : 3) || shared)
      << "schedule_scatter_x86: '" << stage->name() << "' reads " << ins.size()
      << " tensors, not its inputs: a producer was inlined into it; compute it at the root instead";
  // The declaration: the same compute over placeholders like its inputs, in the same roles.
  std::vector<te::Tensor> ph;
  for (const te::Tensor& t : ins) ph.push_back(te::placeholder(t->shape(), t->dtype(), t->name()));
  te::Tensor data, indices, updates;
  if (none) {
    indices = ph[0];
    p.indices = 0;
  } else {
    data = ph[0], indices = ph[1], updates = shared ? ph[0] : ph[2];
    p.data = 0, p.indices = 1, p.updates = shared ? 0 : 2;
  }
  p.ishape = const_shape(indices, stage->name());
  if (p.red == ScatterReduction::kNone) {
    // The winner's inputs are the indices alone; data's shape is the winner's (elements) or
    // starts with it (nd), and only those dimensions are used.
    p.dshape = const_shape(now, stage->name());
  } else {
    p.dshape = const_shape(data, stage->name());
  }
  // The winner stage of nd reads no data: a stand-in of the right leading dimensions.
  te::Tensor decl_data = data.defined() ? data : te::placeholder(exprs(p.dshape), now->dtype());
  te::Tensor decl_updates = updates.defined() ? updates : decl_data;
  te::Tensor decl =
      p.nd ? nd_stage(decl_data, indices, decl_updates, p.red, stage->name())
           : elements_stage(decl_data, indices, decl_updates, p.axis, p.red, stage->name());
  te::TensorIntrin intrin = te::decl_tensor_intrin(
      decl,
      [p](const std::vector<ir::IntrinBuffer>& in, const ir::IntrinBuffer& o) {
        return lower_scatter(p, in, o);
      },
      stage->name() + ".scatter");
  st.compute_root();
  st.tensorize(st->leaf_iter_vars[0], intrin);
  if (stage != out) schedule_injective_x86(s, out);
}

}  // namespace kiln::topi
