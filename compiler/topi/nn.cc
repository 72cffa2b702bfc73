// Batch normalization, softmax, log-softmax and flatten, and the softmax x86 schedule.
#include "compiler/topi/nn.h"

#include <algorithm>

#include "base/error.h"
#include "compiler/ir/printer.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/reduce.h"
#include "compiler/topi/transform.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;

namespace {

bool same_dim(const Expr& a, const Expr& b) {
  auto ca = ir::as_const_int(a), cb = ir::as_const_int(b);
  return a.same_as(b) || (ca && cb && *ca == *cb);
}

/// `idx` (a point of x) with the softmax axis read at `at` instead.
std::vector<Expr> with_axis(const std::vector<Var>& idx, int axis, Expr at) {
  std::vector<Expr> out(idx.begin(), idx.end());
  out[axis] = std::move(at);
  return out;
}

void check_softmax_input(const te::Tensor& x, const std::string& op) {
  KILN_USER_CHECK(x.ndim() >= 1) << op << ": '" << x->name()
                                 << "' must have at least one dimension";
  KILN_USER_CHECK(x->dtype().is_float())
      << op << ": '" << x->name() << "' must be a floating-point tensor, got " << x->dtype().str();
}

/// The stages softmax or log_softmax made for `out` (by their names), not those of its input.
std::vector<te::Tensor> own_stages(const te::Tensor& out) {
  std::vector<te::Tensor> found, todo{out};
  while (!todo.empty()) {
    te::Tensor t = todo.back();
    todo.pop_back();
    for (const te::Tensor& in : t->inputs()) {
      const std::string& n = in->name();
      bool ours = false;
      for (const char* stage : {".max", ".max.lanes", ".exp", ".sum", ".sum.lanes"}) {
        ours = ours || n == out->name() + stage;
      }
      if (!ours || std::find(found.begin(), found.end(), in) != found.end()) continue;
      found.push_back(in);
      todo.push_back(in);
    }
  }
  return found;
}

/// A reduction along `axis` that keeps the axis (size 1): the rows before it in parallel, the
/// reduction loop outside the contiguous inner axes, which are vectorized.
void schedule_row_reduction(te::Schedule& s, const te::Tensor& t, int axis) {
  te::Stage st = s[t];
  const int n = static_cast<int>(st->op.ndim());
  if (axis > 0) {
    std::vector<IterVar> outer;
    for (int i = 0; i < axis; ++i) outer.push_back(st.axis(i));
    st.parallel(outer.size() == 1 ? outer[0] : st.fuse(outer));
  }
  if (axis < n - 1) {
    std::vector<IterVar> inner;
    for (int i = axis + 1; i < n; ++i) inner.push_back(st.axis(i));
    IterVar f = inner.size() == 1 ? inner[0] : st.fuse(inner);
    st.reorder({st.reduce_axis(0), f});
    auto [fo, fi] = st.split(f, 16);
    st.vectorize(fi);
  }
}

}  // namespace

te::Tensor batch_norm_inference(const te::Tensor& x, const te::Tensor& gamma,
                                const te::Tensor& beta, const te::Tensor& mean,
                                const te::Tensor& var, double epsilon, const std::string& name) {
  KILN_USER_CHECK(x.ndim() >= 2) << "batch_norm_inference: '" << x->name() << "' has shape "
                                 << shape_str(x->shape())
                                 << "; it needs at least 2 dimensions (N, C, ...)";
  KILN_USER_CHECK(x->dtype().is_float()) << "batch_norm_inference: '" << x->name()
                                         << "' must be floating-point, got " << x->dtype().str();
  KILN_USER_CHECK(epsilon >= 0) << "batch_norm_inference: epsilon must not be negative, got "
                                << epsilon;
  const Expr& c = x->shape()[1];
  for (const te::Tensor* p : {&gamma, &beta, &mean, &var}) {
    KILN_USER_CHECK(p->ndim() == 1 && same_dim((*p)->shape()[0], c) && (*p)->dtype() == x->dtype())
        << "batch_norm_inference: '" << (*p)->name() << "' (" << (*p)->dtype().str() << ", shape "
        << shape_str((*p)->shape()) << ") must be a 1-D " << x->dtype().str()
        << " tensor of size C = " << c << " (the axis 1 of '" << x->name() << "', shape "
        << shape_str(x->shape()) << ")";
  }
  const ir::DataType t = x->dtype();
  return te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        const Var& ch = i[1];
        Expr scale = gamma(ch) / ir::sqrt(var(ch) + ir::make_const(t, epsilon));
        return (x(std::vector<Expr>(i.begin(), i.end())) - mean(ch)) * scale + beta(ch);
      },
      name);
}

te::Tensor softmax(const te::Tensor& x, int64_t axis, const std::string& name, RowFold fold) {
  check_softmax_input(x, "softmax");
  const int ax = normalize_axis(axis, x.ndim(), "softmax");
  te::Tensor mx = reduce_along(x, ax, ir::ReduceKind::kMax, name + ".max", fold,
                               [&](const std::vector<Expr>& i) { return x(i); });
  te::Tensor ex = te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        return ir::exp(x(std::vector<Expr>(i.begin(), i.end())) - mx(with_axis(i, ax, Expr(0))));
      },
      name + ".exp");
  te::Tensor sm = reduce_along(ex, ax, ir::ReduceKind::kSum, name + ".sum", fold,
                               [&](const std::vector<Expr>& i) { return ex(i); });
  return te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        return ex(std::vector<Expr>(i.begin(), i.end())) / sm(with_axis(i, ax, Expr(0)));
      },
      name);
}

te::Tensor log_softmax(const te::Tensor& x, int64_t axis, const std::string& name, RowFold fold) {
  check_softmax_input(x, "log_softmax");
  const int ax = normalize_axis(axis, x.ndim(), "log_softmax");
  te::Tensor mx = reduce_along(x, ax, ir::ReduceKind::kMax, name + ".max", fold,
                               [&](const std::vector<Expr>& i) { return x(i); });
  te::Tensor sm = reduce_along(x, ax, ir::ReduceKind::kSum, name + ".sum", fold,
                               [&](const std::vector<Expr>& i) {
                                 std::vector<Expr> r(i);
                                 r[ax] = Expr(0);
                                 return ir::exp(x(i) - mx(r));
                               });
  return te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> r = with_axis(i, ax, Expr(0));
        return x(std::vector<Expr>(i.begin(), i.end())) - mx(r) - ir::log(sm(r));
      },
      name);
}

void schedule_softmax_x86(te::Schedule& s, const te::Tensor& out) {
  const std::vector<te::Tensor> stages = own_stages(out);
  // Along the last axis (attention's rows): every stage computed at the output's row, so that
  // one parallel loop over the rows keeps each row's maxima, exponentials and sum in cache,
  // where a loop per stage made a pass over memory (and a parallel launch) each.
  const size_t n = out.ndim();
  bool last_axis = n >= 2 && !stages.empty() && !ir::is_one(out->shape()[n - 1]);
  for (const te::Tensor& t : stages) {
    if (!t->reduce_axis.empty() && !t->name().ends_with(".lanes")) {
      last_axis = last_axis && ir::is_one(t->shape()[n - 1]);
    }
  }
  if (last_axis) {
    te::Stage so = s[out];
    IterVar col = so.axis(n - 1);
    std::vector<IterVar> rows;
    for (size_t i = 0; i + 1 < n; ++i) rows.push_back(so.axis(i));
    IterVar row = rows.size() == 1 ? rows[0] : so.fuse(rows);
    so.parallel(row);
    auto vectorize_row = [](te::Stage& st, const IterVar& c) {
      auto [co, ci] = st.split(c, 16);
      st.vectorize(ci);
    };
    vectorize_row(so, col);
    for (const te::Tensor& t : stages) {
      te::Stage st = s[t];
      st.compute_at(so, row);
      if (t->name().ends_with(".lanes")) {
        IterVar lane = st.axis(n - 1);
        st.reorder({st.reduce_axis(0), lane});
        st.vectorize(lane);
      } else if (t->reduce_axis.empty()) {
        vectorize_row(st, st.axis(n - 1));
      }
    }
    return;
  }
  // The reductions keep the softmax axis with size 1: that is how the axis is found.
  for (const te::Tensor& t : stages) {
    if (t->reduce_axis.empty()) {
      schedule_injective_x86(s, t);  // the exponentials of softmax
      continue;
    }
    if (t->name().ends_with(".lanes")) {  // the lanes of a fold along the last axis: vectors
      schedule_row_lanes_x86(s, t);
      continue;
    }
    int ax = -1;
    for (size_t i = 0; i < t.ndim(); ++i) {
      if (ir::is_one(t->shape()[i]) && !ir::is_one(out->shape()[i])) ax = static_cast<int>(i);
    }
    if (ax < 0) {  // the axis has size 1 in the input too: find it by the reduction's extent
      ax = static_cast<int>(t.ndim()) - 1;
    }
    schedule_row_reduction(s, t, ax);
  }
  schedule_injective_x86(s, out);
}

te::Tensor flatten(const te::Tensor& x, int64_t axis, const std::string& name) {
  const auto n = static_cast<int64_t>(x.ndim());
  KILN_USER_CHECK(axis >= -n && axis <= n)
      << "flatten: axis " << axis << " is out of range for '" << x->name() << "' of rank " << n
      << " (valid: [" << -n << ", " << n << "])";
  const int64_t ax = axis < 0 ? axis + n : axis;
  std::vector<int64_t> shape = const_shape(x, "flatten");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < n; ++i) (i < ax ? outer : inner) *= shape[i];
  return reshape(x, {outer, inner}, name);
}

}  // namespace kiln::topi
