// The ONNX LSTM unrolled over time steps, and its x86 schedule.
#include "compiler/topi/lstm.h"

#include <algorithm>
#include <tuple>

#include "base/error.h"
#include "compiler/ir/printer.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/transform.h"

namespace kiln::topi {

using ir::Expr;
using ir::IterVar;
using ir::Var;

namespace {

void check_shape(const te::Tensor& t, const std::vector<int64_t>& expected,
                 const std::string& what) {
  std::vector<int64_t> got = const_shape(t, "lstm");
  if (got == expected) return;
  std::vector<Expr> e;
  for (int64_t d : expected) e.push_back(Expr(static_cast<int>(d)));
  KILN_USER_ERROR() << "lstm: " << what << " '" << t->name() << "' has shape "
                    << shape_str(t->shape()) << ", expected " << shape_str(e);
}

/// The projections are dense products with a weight packed in panels of bn gates: the
/// register-tile template, one panel per tile (one contiguous stream of the weight).
void schedule_projection(te::Schedule& s, const te::Tensor& t) {
  topi::schedule_dense_x86(s, t, dense_x86_default(dense_x86_space(t)));
}

/// Rows [row0, row0 + G) of w[d] ([G', K]) packed into [ceil(G / bn), K, bn], zero beyond G.
te::Tensor pack_gates(const te::Tensor& w, int d, int64_t gates, int64_t k, int64_t bn,
                      const std::string& name, int64_t row0 = 0) {
  const Expr kbn(static_cast<int>(bn));
  return te::compute(
      {Expr(static_cast<int>((gates + bn - 1) / bn)), Expr(static_cast<int>(k)), kbn},
      [&](Var po, Var kk, Var j) {
        Expr g = po * kbn + j;
        return ir::select(
            g < Expr(static_cast<int>(gates)),
            w(d, ir::min(g, Expr(static_cast<int>(gates - 1))) + static_cast<int>(row0), kk),
            ir::make_zero(w->dtype()));
      },
      name, {"p", "k", "j"});
}

/// Direction d's panels [count, K, bn] from panel `first` of weights packed per direction,
/// [D, P, K, bn] (all P when count < 0): a view.
te::Tensor direction_panels(const te::Tensor& packed, int d, const std::string& name,
                            int64_t first = 0, int64_t count = -1) {
  const auto& sh = packed->shape();
  const Expr p0(static_cast<int>(first));
  const Expr panels = count < 0 ? sh[1] : Expr(static_cast<int>(count));
  return te::compute({panels, sh[2], sh[3]},
                     [&](Var p, Var k, Var j) { return packed(d, p + p0, k, j); }, name,
                     {"p", "k", "j"});
}

/// Y [T, 1, B, H] from each step's hidden state, in time order: a reverse direction's step k read
/// time step T-1-k.
te::Tensor sequence_output(std::vector<te::Tensor> hs, bool reverse, const std::string& name) {
  if (reverse) std::reverse(hs.begin(), hs.end());
  std::vector<Expr> shape = {Expr(static_cast<int>(hs.size())), Expr(1)};
  shape.insert(shape.end(), hs[0]->shape().begin(), hs[0]->shape().end());
  return te::compute(
      shape,
      [&](Var t, Var, Var bi, Var j) {
        Expr v = hs.back()(bi, j);
        for (size_t k = hs.size() - 1; k-- > 0;)
          v = ir::select(t == static_cast<int>(k), hs[k](bi, j), v);
        return v;
      },
      name);
}

}  // namespace

LstmOutputs lstm(const te::Tensor& x, const te::Tensor& w, const te::Tensor& r, const te::Tensor& b,
                 const te::Tensor& initial_h, const te::Tensor& initial_c, const te::Tensor& p,
                 const std::string& name, int64_t packed_bn, LstmDirection dir) {
  std::vector<int64_t> xs = const_shape(x, "lstm"), rs = const_shape(r, "lstm");
  KILN_USER_CHECK(xs.size() == 3) << "lstm: X '" << x->name() << "' has shape "
                                  << shape_str(x->shape())
                                  << ", expected [seq_length, batch_size, input_size]";
  if (packed_bn > 0) {
    KILN_USER_CHECK(rs.size() == 4 && (rs[0] == 1 || rs[0] == 2) && rs[3] == packed_bn &&
                    rs[1] * packed_bn >= 4 * rs[2] && (rs[1] - 1) * packed_bn < 4 * rs[2])
        << "lstm: R '" << r->name() << "' has shape " << shape_str(r->shape())
        << ", expected [num_directions, ceil(4 * hidden_size / " << packed_bn << "), hidden_size, "
        << packed_bn << "] (packed)";
  } else {
    KILN_USER_CHECK(rs.size() == 3 && rs[1] == 4 * rs[2] && (rs[0] == 1 || rs[0] == 2))
        << "lstm: R '" << r->name() << "' has shape " << shape_str(r->shape())
        << ", expected [num_directions, 4 * hidden_size, hidden_size]";
  }
  const int64_t dirs = rs[0];
  KILN_USER_CHECK(dir.index >= 0 && dir.index < dirs)
      << "lstm: direction " << dir.index << " of weights for " << dirs << " direction(s)";
  const int d = dir.index;
  const int64_t steps = xs[0], batch = xs[1], input = xs[2], hidden = rs[2];
  const ir::DataType dt = x->dtype();
  KILN_USER_CHECK(dt.is_float()) << "lstm: X '" << x->name() << "' must be floating-point, got "
                                 << dt.str();
  const int64_t bn = packed_bn > 0 ? packed_bn : lstm_panel_width(4 * hidden);
  const int64_t panels = (4 * hidden + bn - 1) / bn;
  if (packed_bn > 0) {
    check_shape(w, {dirs, panels, input, bn}, "W");
    check_shape(r, {dirs, panels, hidden, bn}, "R");
  } else {
    check_shape(w, {dirs, 4 * hidden, input}, "W");
    check_shape(r, {dirs, 4 * hidden, hidden}, "R");
  }
  if (b.defined()) check_shape(b, {dirs, 8 * hidden}, "B");
  if (initial_h.defined()) check_shape(initial_h, {dirs, batch, hidden}, "initial_h");
  if (initial_c.defined()) check_shape(initial_c, {dirs, batch, hidden}, "initial_c");
  if (p.defined()) check_shape(p, {dirs, 3 * hidden}, "P");
  for (const te::Tensor* t : {&w, &r, &b, &initial_h, &initial_c, &p}) {
    KILN_USER_CHECK(!t->defined() || (*t)->dtype() == dt)
        << "lstm: '" << (*t)->name() << "' is " << (*t)->dtype().str() << " but X is " << dt.str();
  }
  const int H = static_cast<int>(hidden), G = 4 * H;
  const Expr kB(static_cast<int>(batch)), kH(H), kG(G);

  // The weights packed in panels [ceil(G / bn), k, bn] (given so when packed_bn > 0, one such
  // block per direction: the graph packs constant weights once, at build time), so that each
  // block of gates reads one contiguous stream. The projections are computed for all panels'
  // gates (padded to gp).
  const int64_t gp = panels * bn;
  te::Tensor wt = packed_bn > 0 ? direction_panels(w, d, name + ".W_panels")
                                : pack_gates(w, d, 4 * hidden, input, bn, name + ".W_packed");
  te::Tensor rt = packed_bn > 0 ? direction_panels(r, d, name + ".R_panels")
                                : pack_gates(r, d, 4 * hidden, hidden, bn, name + ".R_packed");
  // The input projection of all steps as one dense: X viewed as [T * B, I].
  te::Tensor x2 = te::compute(
      {Expr(static_cast<int>(steps * batch)), Expr(static_cast<int>(input))},
      [&](Var i, Var k) { return x(ir::floordiv(i, kB), ir::floormod(i, kB), k); }, name + ".X_2d");
  te::Tensor xw = dense_packed(x2, wt, gp, name + ".xw");

  LstmOutputs out;
  out.views = {x2};
  out.stages = {};
  (packed_bn > 0 ? out.views : out.stages).push_back(wt);
  out.stages.push_back(xw);
  std::vector<te::Tensor> hs, cs;
  for (int64_t t = 0; t < steps; ++t) {
    const std::string sfx = "." + std::to_string(t);
    const Expr tt(static_cast<int>(dir.reverse ? steps - 1 - t : t));  // the time step read
    // c_{t-1} at (bi, j); undefined when zero.
    auto c_prev = [&](Expr bi, Expr j) -> Expr {
      if (t > 0) return cs.back()(bi, j);
      return initial_c.defined() ? initial_c(d, bi, j) : Expr();
    };
    te::Tensor rec;
    if (t > 0 || initial_h.defined()) {
      te::Tensor hp = hs.empty() ? te::Tensor() : hs.back();
      if (!hp.defined()) {
        hp = te::compute(
            {kB, kH}, [&](Var bi, Var j) { return initial_h(d, bi, j); }, name + ".h_init");
        out.views.push_back(hp);
      }
      rec = dense_packed(hp, rt, gp, name + ".rec" + sfx);
    }
    // Pre-activation of gate `q` (0 i, 1 o, 2 f, 3 c) at (bi, j).
    auto pre = [&](int q, Expr bi, Expr j) {
      Expr g = j + q * H;
      Expr v = xw(tt * kB + bi, g);
      if (rec.defined()) v = v + rec(bi, g);
      if (b.defined()) v = v + (b(d, g) + b(d, g + G));
      return v;
    };
    te::Tensor c = te::compute({kB, kH},
                               [&](Var bi, Var j) {
                                 Expr cp = c_prev(bi, j);
                                 Expr pi = pre(0, bi, j), pf = pre(2, bi, j);
                                 if (p.defined() && cp.defined()) {
                                   pi = pi + p(d, j) * cp;
                                   pf = pf + p(d, j + 2 * H) * cp;
                                 }
                                 Expr in = ir::sigmoid(pi) * ir::tanh(pre(3, bi, j));
                                 return cp.defined() ? ir::sigmoid(pf) * cp + in : in;
                               },
                               name + ".c" + sfx, {"b", "j"});
    te::Tensor h = te::compute({kB, kH},
                               [&](Var bi, Var j) {
                                 Expr po = pre(1, bi, j);
                                 if (p.defined()) po = po + p(d, j + H) * c(bi, j);
                                 return ir::sigmoid(po) * ir::tanh(c(bi, j));
                               },
                               name + ".h" + sfx, {"b", "j"});
    if (rec.defined()) {
      // R is read only when some step has a recurrent GEMV: packed by a stage, or a view.
      std::vector<te::Tensor>& list = packed_bn > 0 ? out.views : out.stages;
      if (std::find(list.begin(), list.end(), rt) == list.end()) list.push_back(rt);
      out.stages.push_back(rec);
    }
    out.stages.insert(out.stages.end(), {c, h});
    cs.push_back(c);
    hs.push_back(h);
  }

  out.y = sequence_output(hs, dir.reverse, name + ".Y");
  out.y_h = te::compute(
      {1, kB, kH}, [&](Var, Var bi, Var j) { return hs.back()(bi, j); }, name + ".Y_h");
  out.y_c = te::compute(
      {1, kB, kH}, [&](Var, Var bi, Var j) { return cs.back()(bi, j); }, name + ".Y_c");
  return out;
}

LstmOutputs both_directions(const LstmOutputs& f, const LstmOutputs& v, const std::string& name) {
  LstmOutputs out;
  // Each direction's outputs are views the concatenations below read (inlined into them).
  out.views = f.views;
  out.views.insert(out.views.end(), v.views.begin(), v.views.end());
  out.views.insert(out.views.end(), {f.y, f.y_h, v.y, v.y_h});
  if (f.y_c.defined()) out.views.insert(out.views.end(), {f.y_c, v.y_c});
  out.stages = f.stages;
  out.stages.insert(out.stages.end(), v.stages.begin(), v.stages.end());
  std::vector<Expr> ys = f.y->shape(), hs = f.y_h->shape();
  ys[1] = Expr(2);
  hs[0] = Expr(2);
  out.y = te::compute(
      ys,
      [&](Var t, Var dd, Var bi, Var j) {
        return ir::select(dd == 0, f.y(t, 0, bi, j), v.y(t, 0, bi, j));
      },
      name + ".Y");
  auto both = [&](const te::Tensor& a, const te::Tensor& c, const std::string& n) {
    return te::compute(
        hs, [&](Var dd, Var bi, Var j) { return ir::select(dd == 0, a(0, bi, j), c(0, bi, j)); },
        name + n);
  };
  out.y_h = both(f.y_h, v.y_h, ".Y_h");
  if (f.y_c.defined()) out.y_c = both(f.y_c, v.y_c, ".Y_c");
  return out;
}

std::vector<std::pair<int64_t, int64_t>> gru_panel_segments(int64_t hidden,
                                                            bool linear_before_reset) {
  if (linear_before_reset) return {{0, 3 * hidden}};
  return {{0, 2 * hidden}, {2 * hidden, hidden}};
}

LstmOutputs gru(const te::Tensor& x, const te::Tensor& w, const te::Tensor& r, const te::Tensor& b,
                const te::Tensor& initial_h, bool linear_before_reset, const std::string& name,
                LstmDirection dir, int64_t packed_bn) {
  std::vector<int64_t> xs = const_shape(x, "gru"), ws = const_shape(w, "gru"),
                       rs = const_shape(r, "gru");
  KILN_USER_CHECK(xs.size() == 3) << "gru: X '" << x->name() << "' has shape "
                                  << shape_str(x->shape())
                                  << ", expected [seq_length, batch_size, input_size]";
  if (packed_bn > 0) {
    KILN_USER_CHECK(ws.size() == 4 && (ws[0] == 1 || ws[0] == 2) && rs.size() == 4)
        << "gru: W '" << w->name() << "' has shape " << shape_str(w->shape()) << " and R '"
        << r->name() << "' " << shape_str(r->shape())
        << ", expected [num_directions, panels, input_size or hidden_size, " << packed_bn
        << "] (packed)";
  } else {
    KILN_USER_CHECK(ws.size() == 3 && ws[1] % 3 == 0 && (ws[0] == 1 || ws[0] == 2))
        << "gru: W '" << w->name() << "' has shape " << shape_str(w->shape())
        << ", expected [num_directions, 3 * hidden_size, input_size]";
  }
  const int64_t steps = xs[0], batch = xs[1], input = xs[2],
                hidden = packed_bn > 0 ? rs[2] : ws[1] / 3, dirs = ws[0];
  KILN_USER_CHECK(dir.index >= 0 && dir.index < dirs)
      << "gru: direction " << dir.index << " of weights for " << dirs << " direction(s)";
  const ir::DataType dt = x->dtype();
  KILN_USER_CHECK(dt.is_float()) << "gru: X '" << x->name() << "' must be floating-point, got "
                                 << dt.str();
  auto panels = [&](int64_t gates) { return (gates + packed_bn - 1) / packed_bn; };
  if (packed_bn > 0) {
    int64_t rp = 0;
    for (const auto& seg : gru_panel_segments(hidden, linear_before_reset))
      rp += panels(seg.second);
    check_shape(w, {dirs, panels(3 * hidden), input, packed_bn}, "W");
    check_shape(r, {dirs, rp, hidden, packed_bn}, "R");
  } else {
    check_shape(w, {dirs, 3 * hidden, input}, "W");
    check_shape(r, {dirs, 3 * hidden, hidden}, "R");
  }
  if (b.defined()) check_shape(b, {dirs, 6 * hidden}, "B");
  if (initial_h.defined()) check_shape(initial_h, {dirs, batch, hidden}, "initial_h");
  for (const te::Tensor* t : {&w, &r, &b, &initial_h}) {
    KILN_USER_CHECK(!t->defined() || (*t)->dtype() == dt)
        << "gru: '" << (*t)->name() << "' is " << (*t)->dtype().str() << " but X is " << dt.str();
  }
  const int d = dir.index, H = static_cast<int>(hidden);
  const Expr kB(static_cast<int>(batch)), kH(H);
  // Gates in ONNX order z, r, h. The input projection of all steps as one dense; the recurrent
  // products per step: all three gates at once when the reset gate applies after the product
  // (linear_before_reset), else z and r, then h over r * h_{t-1}.
  // Rows [row0, row0 + gates) of `m` in panels, and the gates they hold (padded): a stage that
  // packs them, or a view of the panels `packed_bn` gives (segment `seg` of
  // gru_panel_segments: its panels follow the earlier segments').
  LstmOutputs out;
  auto packed = [&](const te::Tensor& m, int64_t gates, int64_t k, int64_t row0, int seg,
                    const std::string& n) {
    if (packed_bn <= 0) {
      const int64_t bn = lstm_panel_width(gates);
      te::Tensor t = pack_gates(m, d, gates, k, bn, name + n, row0);
      return std::make_pair(t, ((gates + bn - 1) / bn) * bn);
    }
    int64_t first = 0;
    const auto segs = gru_panel_segments(hidden, linear_before_reset);
    for (int i = 0; i < seg; ++i) first += panels(segs[static_cast<size_t>(i)].second);
    return std::make_pair(direction_panels(m, d, name + n, first, panels(gates)),
                          panels(gates) * packed_bn);
  };
  const auto [wt, gw] = packed(w, 3 * hidden, input, 0, 0, ".W_packed");
  const auto [rt_all, gr_all] =
      packed(r, linear_before_reset ? 3 * hidden : 2 * hidden, hidden, 0, 0, ".R_packed");
  te::Tensor rt_h;
  int64_t gr_h = 0;
  if (!linear_before_reset)
    std::tie(rt_h, gr_h) = packed(r, hidden, hidden, 2 * hidden, 1, ".Rh_packed");
  te::Tensor x2 = te::compute(
      {Expr(static_cast<int>(steps * batch)), Expr(static_cast<int>(input))},
      [&](Var i, Var k) { return x(ir::floordiv(i, kB), ir::floormod(i, kB), k); }, name + ".X_2d");
  te::Tensor xw = dense_packed(x2, wt, gw, name + ".xw");
  out.views.push_back(x2);
  // Weights packed by a stage are stages; panels given packed are views.
  std::vector<te::Tensor>& weights = packed_bn > 0 ? out.views : out.stages;
  weights.push_back(wt);
  out.stages.push_back(xw);
  bool r_packed = false;
  std::vector<te::Tensor> hs;
  for (int64_t t = 0; t < steps; ++t) {
    const std::string sfx = "." + std::to_string(t);
    const Expr tt(static_cast<int>(dir.reverse ? steps - 1 - t : t));
    te::Tensor hp = hs.empty() ? te::Tensor() : hs.back();
    if (!hp.defined() && initial_h.defined()) {
      hp = te::compute(
          {kB, kH}, [&](Var bi, Var j) { return initial_h(d, bi, j); }, name + ".h_init");
      out.views.push_back(hp);
    }
    te::Tensor rec;
    if (hp.defined()) {
      rec = dense_packed(hp, rt_all, gr_all, name + ".rec" + sfx);
      if (!r_packed) weights.push_back(rt_all);
      out.stages.push_back(rec);
    }
    // x_t W_q + [h_{t-1} R_q] + Wb_q + Rb_q for gate q at (bi, j); `recurrent` adds the product.
    auto pre = [&](int q, Expr bi, Expr j, bool recurrent) {
      Expr g = j + q * H;
      Expr v = xw(tt * kB + bi, g);
      if (recurrent && rec.defined()) v = v + rec(bi, g);
      if (b.defined()) v = v + b(d, g);
      if (recurrent && b.defined()) v = v + b(d, g + 3 * H);
      return v;
    };
    te::Tensor rg =
        te::compute({kB, kH}, [&](Var bi, Var j) { return ir::sigmoid(pre(1, bi, j, true)); },
                    name + ".r" + sfx, {"b", "j"});
    // The reset gate multiplies h_{t-1} (none at a first step without initial_h) or, with
    // linear_before_reset, the recurrent product with its bias.
    if (linear_before_reset || hp.defined()) out.stages.push_back(rg);
    te::Tensor rec_h;
    if (!linear_before_reset && hp.defined()) {
      te::Tensor rh = te::compute({kB, kH}, [&](Var bi, Var j) { return rg(bi, j) * hp(bi, j); },
                                  name + ".rh" + sfx, {"b", "j"});
      rec_h = dense_packed(rh, rt_h, gr_h, name + ".rec_h" + sfx);
      if (!r_packed) weights.push_back(rt_h);
      out.stages.insert(out.stages.end(), {rh, rec_h});
    }
    if (hp.defined()) r_packed = true;
    te::Tensor h = te::compute({kB, kH},
                               [&](Var bi, Var j) {
                                 Expr cand = pre(2, bi, j, false);
                                 const Expr rbh = b.defined() ? b(d, j + 5 * H) : ir::make_zero(dt);
                                 if (linear_before_reset) {
                                   Expr lin = rec.defined() ? rec(bi, j + 2 * H) + rbh : rbh;
                                   cand = cand + rg(bi, j) * lin;
                                 } else {
                                   cand = cand + (rec_h.defined() ? rec_h(bi, j) + rbh : rbh);
                                 }
                                 Expr z = ir::sigmoid(pre(0, bi, j, true));
                                 Expr hv = (ir::make_one(dt) - z) * ir::tanh(cand);
                                 return hp.defined() ? hv + z * hp(bi, j) : hv;
                               },
                               name + ".h" + sfx, {"b", "j"});
    out.stages.push_back(h);
    hs.push_back(h);
  }
  out.y = sequence_output(hs, dir.reverse, name + ".Y");
  out.y_h = te::compute(
      {1, kB, kH}, [&](Var, Var bi, Var j) { return hs.back()(bi, j); }, name + ".Y_h");
  return out;
}

void schedule_lstm_stages(te::Schedule& s, const LstmOutputs& out, const StageSchedule& product,
                          const StageSchedule& elementwise) {
  for (const te::Tensor& v : out.views) s[v].compute_inline();
  std::vector<te::Tensor> stages(out.stages);
  stages.insert(stages.end(), {out.y, out.y_h});
  if (out.y_c.defined()) stages.push_back(out.y_c);
  for (const te::Tensor& t : stages) {
    if (s[t]->attach_type != te::AttachType::kRoot) continue;
    (t->reduce_axis.empty() ? elementwise : product)(s, t);
  }
}

void schedule_lstm_x86(te::Schedule& s, const LstmOutputs& out) {
  schedule_lstm_stages(s, out, schedule_projection, [](te::Schedule& sch, const te::Tensor& t) {
    schedule_injective_x86(sch, t);
  });
}

int64_t lstm_panel_width(int64_t gates) {
  for (int64_t bn : {64, 32, 16}) {
    if (gates % bn == 0) return bn;
  }
  return gates >= 256 ? 64 : 16;
}

te::Schedule schedule_lstm_x86(const LstmOutputs& out) {
  te::Schedule s =
      te::create_schedule(out.y_c.defined() ? std::vector<te::Tensor>{out.y, out.y_h, out.y_c}
                                            : std::vector<te::Tensor>{out.y, out.y_h});
  schedule_lstm_x86(s, out);
  return s;
}

}  // namespace kiln::topi
