// Matrix multiplication and its x86 schedule.
#include "compiler/topi/matmul.h"

#include "base/error.h"

namespace kiln::topi {

using ir::Expr;
using ir::Var;

te::Tensor matmul(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  KILN_USER_CHECK(a.ndim() == 2 && b.ndim() == 2)
      << "matmul: operands must be 2-D, got " << a.ndim() << "-D '" << a->name() << "' and "
      << b.ndim() << "-D '" << b->name() << "'";
  Expr k = a->shape()[1];
  auto kk = ir::as_const_int(k), bk = ir::as_const_int(b->shape()[0]);
  KILN_USER_CHECK(!kk || !bk || *kk == *bk)
      << "matmul: inner dimensions differ: '" << a->name() << "' is "
      << *ir::as_const_int(a->shape()[0]) << "x" << *kk << " and '" << b->name() << "' has " << *bk
      << " rows";
  ir::IterVar r = te::reduce_axis({0, k}, "k");
  return te::compute({a->shape()[0], b->shape()[1]},
                     [&](Var i, Var j) { return te::sum(a(i, r) * b(r, j), {r}); }, name,
                     {"i", "j"});
}

te::Tensor matmul_transposed_a(const te::Tensor& a, const te::Tensor& b, const std::string& name) {
  KILN_USER_CHECK(a.ndim() == 2 && b.ndim() == 2) << "matmul: operands must be 2-D";
  ir::IterVar r = te::reduce_axis({0, a->shape()[0]}, "k");
  return te::compute({a->shape()[1], b->shape()[1]},
                     [&](Var y, Var x) { return te::sum(a(r, y) * b(r, x), {r}); }, name,
                     {"y", "x"});
}

PackedMatmul packed_matmul_x86(Expr m, Expr n, Expr k, const MatmulSchedule& cfg) {
  KILN_USER_CHECK(cfg.tile_rows > 0 && cfg.tile_cols > 0 && cfg.k_unroll > 0)
      << "packed_matmul_x86: tile sizes must be positive";
  const int bn = cfg.tile_cols;
  PackedMatmul p;
  p.a = te::placeholder({m, k}, ir::kFloat32, "A");
  p.b = te::placeholder({k, n}, ir::kFloat32, "B");
  const te::Tensor& a = p.a;
  const te::Tensor& b = p.b;
  p.packed_b = te::compute({ir::floordiv(n + (bn - 1), bn), k, bn},
                           [&](Var jo, Var kk, Var ji) {
                             Expr col = jo * bn + ji;
                             return ir::select(col < n, b(kk, ir::min(col, n - 1)),
                                               ir::make_zero(ir::kFloat32));
                           },
                           "B.packed", {"jo", "k", "ji"});
  const te::Tensor& bp = p.packed_b;
  ir::IterVar r = te::reduce_axis({0, k}, "k");
  p.c =
      te::compute({m, n},
                  [&](Var i, Var j) {
                    return te::sum(a(i, r) * bp(ir::floordiv(j, bn), r, ir::floormod(j, bn)), {r});
                  },
                  "C", {"i", "j"});

  te::Schedule s = te::create_schedule({p.c});
  // Packing: panels in parallel, each row of a panel one vector store.
  {
    te::Stage sp = s[bp];
    sp.parallel(sp.axis(0));
    sp.vectorize(sp.axis(2));
  }
  te::Tensor cl = s.cache_write(p.c, "local");
  te::Stage sc = s[p.c];
  auto [io, jo, ii, ji] = sc.tile(sc.axis(0), sc.axis(1), cfg.tile_rows, bn);
  sc.reorder({jo, io, ii, ji});
  sc.parallel(jo);
  sc.unroll(ii);
  sc.vectorize(ji);

  te::Stage sl = s[cl];
  sl.compute_at(sc, io);
  auto [ko, ki] = sl.split(sl.reduce_axis(0), cfg.k_unroll);
  sl.reorder({ko, ki, sl.axis(0), sl.axis(1)});
  sl.unroll(ki);
  sl.unroll(sl.axis(0));
  sl.vectorize(sl.axis(1));
  p.schedule = s;
  return p;
}

}  // namespace kiln::topi
