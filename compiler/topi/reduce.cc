// Reductions over axes and ArgMax / ArgMin, and their x86 schedule.
#include "compiler/topi/reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "base/error.h"
#include "compiler/topi/elementwise.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;

namespace {

constexpr int64_t kRowLanes = 16;  // RowFold::kVectorLanes: 16 floats, AVX-512's vector

/// How an output point of a reduction maps to an input point.
struct ReduceMap {
  std::vector<bool> reduced;  ///< per input axis
  std::vector<Expr> out_shape;
  bool keepdims = true;

  /// The input point for output point `o` with the reduced axes at `k` (in axis order).
  std::vector<Expr> input_point(const std::vector<Expr>& o, const std::vector<Expr>& k) const {
    std::vector<Expr> idx;
    size_t next_out = 0, next_k = 0;
    for (size_t d = 0; d < reduced.size(); ++d) {
      if (reduced[d]) {
        idx.push_back(k[next_k++]);
        if (keepdims) ++next_out;
      } else {
        idx.push_back(o[next_out++]);
      }
    }
    return idx;
  }
};

ReduceMap make_map(const te::Tensor& x, std::vector<int64_t> axes, bool keepdims,
                   const std::string& name) {
  const size_t n = x.ndim();
  ReduceMap m;
  m.keepdims = keepdims;
  m.reduced.assign(n, axes.empty());
  for (int64_t a : axes) {
    const int ax = normalize_axis(a, n, name);
    KILN_USER_CHECK(!m.reduced[static_cast<size_t>(ax)])
        << name << ": axis " << ax << " of '" << x->name() << "' is reduced twice";
    m.reduced[static_cast<size_t>(ax)] = true;
  }
  for (size_t d = 0; d < n; ++d) {
    if (!m.reduced[d]) {
      m.out_shape.push_back(x->shape()[d]);
    } else if (keepdims) {
      m.out_shape.push_back(Expr(1));
    }
  }
  return m;
}

std::vector<Expr> as_exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

Expr fold(ir::ReduceKind kind, const Expr& v, const std::vector<IterVar>& ks) {
  switch (kind) {
    case ir::ReduceKind::kSum:
      return te::sum(v, ks);
    case ir::ReduceKind::kProd:
      return te::prod(v, ks);
    case ir::ReduceKind::kMax:
      return te::max(v, ks);
    case ir::ReduceKind::kMin:
      return te::min(v, ks);
  }
  return v;
}

using ValueFn = std::function<Expr(const std::vector<Expr>&, const std::vector<Expr>&)>;

/// The RowFold::kVectorLanes form of reduce_stage for a reduction of the last axis alone (n >=
/// 2 * kRowLanes): name.lanes, [the output's rows..., kRowLanes], lane l folding the elements l,
/// l + kRowLanes, ... of the row's whole chunks; then `name` folds the lanes and the row's last
/// n % kRowLanes elements.
te::Tensor lanes_stage(const ReduceMap& m, int64_t n, ir::ReduceKind kind, const ValueFn& value,
                       const std::string& name) {
  const int64_t whole = n / kRowLanes * kRowLanes, rest = n - whole;
  // The output point of the rows `r`: a 0 for the reduced axis where it is kept (the last).
  auto out_point = [&](std::vector<Expr> r) {
    if (m.keepdims) r.push_back(Expr(0));
    return r;
  };
  IterVar ko = te::reduce_axis({0, whole / kRowLanes}, "ko");
  std::vector<Expr> lanes_shape(m.out_shape.begin(), m.out_shape.end() - (m.keepdims ? 1 : 0));
  lanes_shape.push_back(Expr(kRowLanes));
  te::Tensor lanes = te::compute(
      lanes_shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> o = out_point({i.begin(), i.end() - 1});
        return fold(kind, value(m.input_point(o, {ko->var * Expr(kRowLanes) + i.back()}), o), {ko});
      },
      name + ".lanes");
  IterVar l = te::reduce_axis({0, kRowLanes + rest}, "l");
  return te::compute(
      m.out_shape,
      [&](const std::vector<Var>& ov) {
        std::vector<Expr> o = as_exprs(ov);
        std::vector<Expr> at(o.begin(), o.end() - (m.keepdims ? 1 : 0));
        at.push_back(rest == 0 ? Expr(l->var) : ir::min(l->var, Expr(kRowLanes - 1)));
        Expr v = lanes(at);
        if (rest != 0) {
          Expr tail = value(
              m.input_point(o, {Expr(whole) + ir::max(l->var - Expr(kRowLanes), Expr(0))}), o);
          v = ir::select(l->var < Expr(kRowLanes), v, tail);
        }
        return fold(kind, v, {l});
      },
      name);
}

/// A reduction stage over the map's axes: combiner(value(input point, output point)).
te::Tensor reduce_stage(const te::Tensor& x, const ReduceMap& m, ir::ReduceKind kind,
                        const ValueFn& value, const std::string& name,
                        RowFold row_fold = RowFold::kSerial) {
  const size_t nd = m.reduced.size();
  const bool last_alone =
      nd > 0 && m.reduced[nd - 1] && std::count(m.reduced.begin(), m.reduced.end(), true) == 1;
  const auto n = last_alone ? ir::as_const_int(x->shape()[nd - 1]) : std::nullopt;
  if (row_fold == RowFold::kVectorLanes && n && *n >= 2 * kRowLanes) {
    return lanes_stage(m, *n, kind, value, name);
  }
  std::vector<IterVar> ks;
  std::vector<Expr> kvars;
  for (size_t d = 0; d < m.reduced.size(); ++d) {
    if (!m.reduced[d]) continue;
    ks.push_back(te::reduce_axis({0, x->shape()[d]}, "k" + std::to_string(d)));
    kvars.push_back(ks.back()->var);
  }
  return te::compute(
      m.out_shape,
      [&](const std::vector<Var>& ov) {
        std::vector<Expr> o = as_exprs(ov);
        Expr v = value(m.input_point(o, kvars), o);
        if (ks.empty()) return v;  // nothing reduced: a copy
        return fold(kind, v, ks);
      },
      name);
}

}  // namespace

te::Tensor reduce(const te::Tensor& x, ReduceOp op, const std::vector<int64_t>& axes, bool keepdims,
                  const std::string& name, RowFold row_fold) {
  const ir::DataType t = x->dtype();
  const bool needs_float = op == ReduceOp::kMean || op == ReduceOp::kL2 ||
                           op == ReduceOp::kLogSum || op == ReduceOp::kLogSumExp;
  KILN_USER_CHECK(!needs_float || t.is_float())
      << name << ": '" << x->name() << "' must be floating-point, got " << t.str();
  const ReduceMap m = make_map(x, axes, keepdims, name);
  int64_t count = 1;
  for (size_t d = 0; d < m.reduced.size(); ++d) {
    if (!m.reduced[d]) continue;
    auto c = ir::as_const_int(x->shape()[d]);
    KILN_USER_CHECK(c.has_value())
        << name << ": dimension " << d << " of '" << x->name() << "' must be a constant";
    count *= *c;
  }
  auto read = [&](const std::vector<Expr>& i, const std::vector<Expr>&) { return x(i); };
  const std::string red = name + ".red";
  switch (op) {
    case ReduceOp::kSum:
      return reduce_stage(x, m, ir::ReduceKind::kSum, read, name, row_fold);
    case ReduceOp::kMax:
      return reduce_stage(x, m, ir::ReduceKind::kMax, read, name, row_fold);
    case ReduceOp::kMin:
      return reduce_stage(x, m, ir::ReduceKind::kMin, read, name, row_fold);
    case ReduceOp::kProd:
      return reduce_stage(x, m, ir::ReduceKind::kProd, read, name, row_fold);
    case ReduceOp::kL1:
      return reduce_stage(
          x, m, ir::ReduceKind::kSum,
          [&](const std::vector<Expr>& i, const std::vector<Expr>&) {
            Expr v = x(i);
            return t.is_float() ? ir::abs(v) : ir::select(v < ir::make_zero(t), -v, v);
          },
          name, row_fold);
    case ReduceOp::kSumSquare:
      return reduce_stage(
          x, m, ir::ReduceKind::kSum,
          [&](const std::vector<Expr>& i, const std::vector<Expr>&) { return x(i) * x(i); }, name,
          row_fold);
    case ReduceOp::kMean: {
      te::Tensor s = reduce_stage(x, m, ir::ReduceKind::kSum, read, red, row_fold);
      const double inv = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
      return te::compute(
          m.out_shape,
          [&](const std::vector<Var>& o) -> Expr {
            return count > 0 ? s(as_exprs(o)) * ir::make_const(t, inv)
                             : ir::make_const(t, std::nan(""));
          },
          name);
    }
    case ReduceOp::kL2: {
      te::Tensor s = reduce_stage(
          x, m, ir::ReduceKind::kSum,
          [&](const std::vector<Expr>& i, const std::vector<Expr>&) { return x(i) * x(i); }, red,
          row_fold);
      return te::compute(
          m.out_shape, [&](const std::vector<Var>& o) { return ir::sqrt(s(as_exprs(o))); }, name);
    }
    case ReduceOp::kLogSum: {
      te::Tensor s = reduce_stage(x, m, ir::ReduceKind::kSum, read, red, row_fold);
      return te::compute(
          m.out_shape, [&](const std::vector<Var>& o) { return ir::log(s(as_exprs(o))); }, name);
    }
    case ReduceOp::kLogSumExp: {
      te::Tensor mx = reduce_stage(x, m, ir::ReduceKind::kMax, read, name + ".max", row_fold);
      // A row of -inf (or of +inf) has max m = +-inf, and x - m would be NaN: shift by 0 there.
      auto shift = [&](const std::vector<Expr>& o) {
        Expr v = mx(o);
        return ir::select(ir::abs(v) <= ir::max_value(t), v, ir::make_zero(t));
      };
      te::Tensor s = reduce_stage(
          x, m, ir::ReduceKind::kSum,
          [&](const std::vector<Expr>& i, const std::vector<Expr>& o) {
            return ir::exp(x(i) - shift(o));
          },
          red, row_fold);
      return te::compute(
          m.out_shape,
          [&](const std::vector<Var>& o) { return ir::log(s(as_exprs(o))) + shift(as_exprs(o)); },
          name);
    }
  }
  KILN_USER_ERROR() << name << ": unknown reduction";
}

te::Tensor reduce_along(const te::Tensor& x, int axis, ir::ReduceKind kind, const std::string& name,
                        RowFold row_fold,
                        const std::function<Expr(const std::vector<Expr>&)>& value) {
  return reduce_stage(
      x, make_map(x, {axis}, true, name), kind,
      [&](const std::vector<Expr>& i, const std::vector<Expr>&) { return value(i); }, name,
      row_fold);
}

void schedule_row_lanes_x86(te::Schedule& s, const te::Tensor& lanes) {
  te::Stage st = s[lanes];
  const size_t n = st->op.ndim();
  std::vector<IterVar> rows;
  for (size_t i = 0; i + 1 < n; ++i) rows.push_back(st.axis(i));
  if (!rows.empty()) st.parallel(rows.size() == 1 ? rows[0] : st.fuse(rows));
  IterVar lane = st.axis(n - 1);
  st.reorder({st.reduce_axis(0), lane});
  st.vectorize(lane);
}

te::Tensor arg_reduce(const te::Tensor& x, bool is_max, int64_t axis, bool keepdims,
                      bool select_last_index, const std::string& name) {
  const int ax = normalize_axis(axis, x.ndim(), name);
  const ReduceMap m = make_map(x, {ax}, keepdims, name);
  auto read = [&](const std::vector<Expr>& i, const std::vector<Expr>&) { return x(i); };
  te::Tensor ext =
      reduce_stage(x, m, is_max ? ir::ReduceKind::kMax : ir::ReduceKind::kMin, read, name + ".ext");
  const ir::DataType i64 = ir::DataType::Int(64);
  const Expr dim = ir::cast(i64, x->shape()[static_cast<size_t>(ax)]);
  // The first (last) index k where x equals the extreme: a min (max) over k of k where it does
  // and dim (-1) where it does not.
  return reduce_stage(
      x, m, select_last_index ? ir::ReduceKind::kMax : ir::ReduceKind::kMin,
      [&](const std::vector<Expr>& i, const std::vector<Expr>& o) {
        const Expr k = ir::cast(i64, i[static_cast<size_t>(ax)]);
        return ir::select(x(i) == ext(o), k,
                          select_last_index ? ir::make_const(i64, int64_t{-1}) : dim);
      },
      name);
}

te::Tensor cumsum(const te::Tensor& x, int64_t axis, bool exclusive, bool reverse,
                  const std::string& name) {
  const int ax = normalize_axis(axis, x.ndim(), name);
  IterVar k = te::reduce_axis({0, x->shape()[static_cast<size_t>(ax)]}, "k");
  return te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(i.begin(), i.end());
        idx[static_cast<size_t>(ax)] = k->var;
        const Expr at = i[static_cast<size_t>(ax)];
        const Expr kv = k->var;
        Expr cond = reverse ? (exclusive ? kv > at : kv >= at) : (exclusive ? kv < at : kv <= at);
        return te::sum(x(idx), {k}, cond);
      },
      name);
}

te::Tensor hardmax(const te::Tensor& x, int64_t axis, const std::string& name) {
  const int ax = normalize_axis(axis, x.ndim(), name);
  te::Tensor arg = arg_reduce(x, true, ax, true, false, name + ".arg");
  const ir::DataType t = x->dtype();
  return te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> r(i.begin(), i.end());
        r[static_cast<size_t>(ax)] = Expr(0);
        return ir::select(arg(r) == ir::cast(ir::kInt64, i[static_cast<size_t>(ax)]),
                          ir::make_one(t), ir::make_zero(t));
      },
      name);
}

LayerNormOutputs layer_norm(const te::Tensor& x, const te::Tensor& scale, const te::Tensor& bias,
                            int64_t axis, double epsilon, const std::string& name, bool per_channel,
                            RowFold row_fold) {
  const ir::DataType t = x->dtype();
  KILN_USER_CHECK(t.is_float()) << name << ": '" << x->name() << "' must be floating-point, got "
                                << t.str();
  const int ax = normalize_axis(axis, x.ndim(), name);
  std::vector<int64_t> axes;
  for (size_t d = static_cast<size_t>(ax); d < x.ndim(); ++d)
    axes.push_back(static_cast<int64_t>(d));
  // Scale and bias are aligned with the trailing (normalized) axes.
  auto aligned = [&](const te::Tensor& p, const std::vector<Var>& i) {
    if (per_channel) return p(Expr(i[1]));
    const size_t off = x.ndim() - p.ndim();
    std::vector<Expr> idx;
    for (size_t d = 0; d < p.ndim(); ++d) {
      idx.push_back(ir::is_one(p->shape()[d]) ? Expr(0) : Expr(i[off + d]));
    }
    return p(idx);
  };
  for (const te::Tensor* p : {&scale, &bias}) {
    if (!p->defined()) continue;
    if (per_channel) {
      KILN_USER_CHECK(x.ndim() >= 2 && p->ndim() == 1 && (*p)->dtype() == t &&
                      ir::as_const_int((*p)->shape()[0]) == ir::as_const_int(x->shape()[1]))
          << name << ": '" << (*p)->name() << "' of shape " << shape_str((*p)->shape())
          << " must be a vector of the channels of '" << x->name() << "' (shape "
          << shape_str(x->shape()) << ") and have its dtype";
      continue;
    }
    KILN_USER_CHECK(p->ndim() <= x.ndim() - static_cast<size_t>(ax) && (*p)->dtype() == t)
        << name << ": '" << (*p)->name() << "' of shape " << shape_str((*p)->shape())
        << " must broadcast against the normalized axes of '" << x->name() << "' (shape "
        << shape_str(x->shape()) << ", axis " << ax << ") and have its dtype";
  }
  te::Tensor mean = reduce(x, ReduceOp::kMean, axes, true, name + ".mean", row_fold);
  auto at_row = [&](const std::vector<Var>& i) {
    std::vector<Expr> r;
    for (size_t d = 0; d < i.size(); ++d) {
      r.push_back(d >= static_cast<size_t>(ax) ? Expr(0) : Expr(i[d]));
    }
    return r;
  };
  te::Tensor dev2 = te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        Expr d = x(as_exprs(i)) - mean(at_row(i));
        return d * d;
      },
      name + ".dev2");
  te::Tensor var = reduce(dev2, ReduceOp::kMean, axes, true, name + ".var", row_fold);
  te::Tensor inv = te::compute(
      var->shape(),
      [&](const std::vector<Var>& i) {
        return ir::make_const(t, 1.0) / ir::sqrt(var(as_exprs(i)) + ir::make_const(t, epsilon));
      },
      name + ".inv_std_dev");
  te::Tensor y = te::compute(
      x->shape(),
      [&](const std::vector<Var>& i) {
        const std::vector<Expr> r = at_row(i);
        Expr v = (x(as_exprs(i)) - mean(r)) * inv(r);
        if (scale.defined()) v = v * aligned(scale, i);
        if (bias.defined()) v = v + aligned(bias, i);
        return v;
      },
      name);
  return {y, mean, inv, var, dev2};
}

void schedule_layer_norm_x86(te::Schedule& s, const LayerNormOutputs& o) {
  s[o.deviations2].compute_inline();
  schedule_reduce_x86(s, o.mean);
  schedule_reduce_x86(s, o.var);
  schedule_injective_x86(s, o.inv_std_dev);
  schedule_injective_x86(s, o.y);
}

void schedule_reduce_x86(te::Schedule& s, const te::Tensor& out) {
  constexpr int64_t kParallelMin = 1024;  // output points; each reduces a row
  // The stages of this reduction: out and the stages named name.* that it reads.
  std::vector<te::Tensor> stages{out};
  for (size_t k = 0; k < stages.size(); ++k) {
    for (const te::Tensor& in : stages[k]->inputs()) {
      const std::string& n = in->name();
      if (n.rfind(out->name() + ".", 0) == 0 &&
          std::find(stages.begin(), stages.end(), in) == stages.end()) {
        stages.push_back(in);
      }
    }
  }
  for (const te::Tensor& t : stages) {
    if (t->reduce_axis.empty()) {
      schedule_injective_x86(s, t);
      continue;
    }
    if (t->name().ends_with(".lanes")) {
      schedule_row_lanes_x86(s, t);
      continue;
    }
    te::Stage st = s[t];
    const size_t n = st->op.ndim();
    if (n == 0) continue;
    int64_t total = 1;
    for (const Expr& d : t->shape()) {
      auto c = ir::as_const_int(d);
      total = c ? total * *c : kParallelMin;
    }
    std::vector<IterVar> axes;
    for (size_t i = 0; i < n; ++i) axes.push_back(st.axis(i));
    IterVar fused = n == 1 ? axes[0] : st.fuse(axes);
    if (total >= kParallelMin) st.parallel(fused);
  }
}

}  // namespace kiln::topi
