// The VDLA's int8 dense layer (dense.h).
#include "compiler/vdla/dense.h"

#include <sstream>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/vdla/intrin.h"

namespace kiln::vdla_compiler {

using ir::Expr;
using ir::Var;

std::string VdlaDenseConfig::to_string() const {
  std::ostringstream os;
  os << "tile_m=" << tile_m << " tile_k=" << tile_k << " vthreads=" << vthreads;
  return os.str();
}

VdlaDense vdla_dense(int m, int k, int shift) {
  KILN_USER_CHECK(m > 0 && k > 0 && m % 16 == 0 && k % 16 == 0)
      << "vdla dense: " << k << " -> " << m << " must be positive multiples of 16";
  KILN_USER_CHECK(shift >= 0 && shift < 32)
      << "vdla dense: shift " << shift << " is not in [0, 31]";
  VdlaDense op;
  op.m = m;
  op.k = k;
  const int mb = m / 16, kb = k / 16;
  op.data = te::placeholder({kb, 1, 16}, ir::kInt8, "data");
  op.weight = te::placeholder({mb, kb, 16, 16}, ir::kInt8, "weight");
  const te::Tensor data = op.data, weight = op.weight;
  te::IterVar rk = te::reduce_axis({0, kb}, "k_block");
  te::IterVar ri = te::reduce_axis({0, 16}, "k");
  op.acc = te::compute({mb, 1, 16},
                       [&](Var o, Var b, Var j) {
                         return te::sum(ir::cast(ir::kInt32, data(rk, b, ri)) *
                                            ir::cast(ir::kInt32, weight(o, rk, j, ri)),
                                        {rk, ri});
                       },
                       "acc", {"m_block", "b", "m"});
  te::Tensor cur = op.acc;
  if (shift > 0) {
    const te::Tensor in = cur;
    op.shr = te::compute(
        {mb, 1, 16},
        [&](Var o, Var b, Var j) {
          return ir::shift_right(in(o, b, j), ir::make_const(ir::kInt32, int64_t{shift}));
        },
        "shr");
    cur = op.shr;
  }
  const te::Tensor shifted = cur;
  op.clip_lo = te::compute(
      {mb, 1, 16}, [&](Var o, Var b, Var j) { return ir::max(shifted(o, b, j), Expr(-128)); },
      "clip_lo");
  const te::Tensor lo = op.clip_lo;
  op.clip_hi = te::compute(
      {mb, 1, 16}, [&](Var o, Var b, Var j) { return ir::min(lo(o, b, j), Expr(127)); }, "clip_hi");
  const te::Tensor hi = op.clip_hi;
  op.out = te::compute(
      {mb, 1, 16}, [&](Var o, Var b, Var j) { return ir::cast(ir::kInt8, hi(o, b, j)); }, "out");
  return op;
}

std::string vdla_dense_problem(const VdlaDense& op, const VdlaDenseConfig& c,
                               const vdla::Config& cfg) {
  if (cfg.batch() != 1 || cfg.block_in() != 16 || cfg.block_out() != 16) {
    return "the template is written for batch 1 and 16x16 blocks";
  }
  const int mb = op.m / 16, kb = op.k / 16;
  std::ostringstream os;
  if (c.tile_m < 2 || mb % c.tile_m) os << "tile_m must be at least 2 and divide " << mb << "; ";
  if (c.tile_k < 1 || kb % c.tile_k) os << "tile_k must divide " << kb << "; ";
  if (c.vthreads != 1 && c.vthreads != 2) os << "vthreads must be 1 or 2; ";
  if (os.str().empty() && c.vthreads == 2 && (mb / c.tile_m) % 2) {
    os << "two virtual threads split " << mb / c.tile_m << " tiles (not even); ";
  }
  const int v = c.vthreads;
  if (int64_t{c.tile_m} * c.tile_k * v > cfg.wgt_depth()) {
    os << "WGT tile of " << c.tile_m * c.tile_k << " rows x " << v << " exceeds " << cfg.wgt_depth()
       << "; ";
  }
  if (int64_t{c.tile_m} * v > cfg.acc_depth()) os << "ACC tile exceeds " << cfg.acc_depth() << "; ";
  if (int64_t{c.tile_k} * v > cfg.inp_depth()) os << "INP tile exceeds " << cfg.inp_depth() << "; ";
  std::string r = os.str();
  return r.empty() ? r : r.substr(0, r.size() - 2);
}

te::Schedule schedule_vdla_dense(const VdlaDense& op, const VdlaDenseConfig& c,
                                 const vdla::Config& cfg) {
  const std::string problem = vdla_dense_problem(op, c, cfg);
  KILN_USER_CHECK(problem.empty()) << "vdla dense: config " << c.to_string() << ": " << problem;
  te::Schedule sch = te::create_schedule({op.out});
  te::Tensor dbuf = sch.cache_read(op.data, kInpScope, {op.acc});
  te::Tensor wbuf = sch.cache_read(op.weight, kWgtScope, {op.acc});
  std::vector<te::Tensor> alu = {op.clip_lo, op.clip_hi};
  if (op.shr.defined()) alu.insert(alu.begin(), op.shr);
  sch[op.acc].set_scope(kAccScope);
  for (const te::Tensor& t : alu) sch[t].set_scope(kAccScope);

  te::Stage so = sch[op.out];
  auto [mo, mi] = so.split(so.axis(0), c.tile_m);
  if (c.vthreads == 2) {
    auto [vt, rest] = so.split_nparts(mo, 2);
    so.bind(vt, te::thread_axis("cthread", 2));
    mo = rest;
  }
  so.pragma(mi, kDmaCopy);
  sch[op.acc].compute_at(so, mo);
  for (const te::Tensor& t : alu) {
    te::Stage st = sch[t];
    st.compute_at(so, mo);
    st.pragma(st.axis(0), kAlu);
  }
  te::Stage sa = sch[op.acc];
  auto [kco, kci] = sa.split(sa.reduce_axis(0), c.tile_k);
  sa.reorder({kco, kci, sa.axis(0), sa.axis(1), sa.axis(2), sa.reduce_axis(1)});
  sa.tensorize(sa.axis(1), gemm_intrin(cfg));
  for (const te::Tensor& t : {dbuf, wbuf}) {
    te::Stage st = sch[t];
    st.compute_at(sa, kco);
    st.pragma(st.axis(0), kDmaCopy);
  }
  return sch;
}

std::vector<VdlaDenseConfig> vdla_dense_space(const VdlaDense& op, int vthreads,
                                              const vdla::Config& cfg) {
  std::vector<VdlaDenseConfig> out;
  for (int tm = 2; tm <= op.m / 16; ++tm) {
    for (int tk = 1; tk <= op.k / 16; ++tk) {
      VdlaDenseConfig c{tm, tk, vthreads};
      if (vdla_dense_problem(op, c, cfg).empty()) out.push_back(c);
    }
  }
  return out;
}

}  // namespace kiln::vdla_compiler
