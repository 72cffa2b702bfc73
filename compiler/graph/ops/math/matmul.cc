// The products: Gemm, MatMul (2-D as dense, batched as batch_matmul, against weights pack_weights
// packed as dense_packed), MatMulInteger (MatMul's computes over its 8-bit operands widened to
// int32 less their zero points, topi::integer_operand; topi::dense_int8, the VNNI kernel, where
// pack_weights packed its int8 weight) and Einsum (one that is a batched matrix product rewritten
// at import into a MatMul between Transposes and Reshapes, rewrite_einsum; the rest computed by
// topi::einsum).
#include "compiler/topi/matmul.h"

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/conv2d_bf16.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/dense_int8.h"
#include "compiler/topi/einsum.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/quantize.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using ir::Expr;
using te::Tensor;

/// [M, K] rows `a2` (the node's input 0, or a view of it) times the panels pack_weights made of
/// input 1, then `epilogue` on the [M, N] product. M is padded to rows the register tile divides
/// (a transformer's 197 tokens would leave it one row high), N to whole panels (a last panel of
/// zero columns: the register tile stays a panel wide): A zero-padded, the product computed apart,
/// cropped in the output stage.
LowerResult packed_product(const LowerCtx& c, const Tensor& a2, int64_t n, const std::string& name,
                           const std::function<Tensor(const Tensor&)>& epilogue) {
  const Tensor& a = c.input(0);
  const Tensor& packed = c.input(1);
  const int64_t m = *ir::as_const_int(a2->shape()[0]);
  const int64_t mp = topi::batch_matmul_padded_rows(m);
  const int64_t np = *ir::as_const_int(packed->shape()[0]) * *ir::as_const_int(packed->shape()[2]);
  Tensor ap =
      mp == m ? a2
              : topi::pad(a2, {0, 0}, {mp - m, 0}, 0.0, topi::PadMode::kConstant, name + "_a_pad");
  // pack_weights packed B in bf16 pairs along K (BuildOptions::precision): bf16 operands.
  Tensor y = c.node.has_attr("packed_bf16") ? topi::dense_packed_bf16(ap, packed, np, name)
                                            : topi::dense_packed(ap, packed, np, name);
  auto base = [=, tuning = c.tuning](te::Schedule& s, const Tensor& t, const Tensor& output) {
    if (a2 != a) s[a2].compute_inline();
    if (ap != a2) injective(s, ap);
    tuning.schedule("dense_x86", s, t, output);
  };
  const bool padded = mp != m || np != n;
  if (a2 == a && !padded) return with_epilogue(y, base, epilogue(y));
  Tensor yc = padded ? topi::slice(y, {0, 0}, {m, n}, {}, {}, name + "_crop") : y;
  Tensor out = epilogue(yc);
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            base(s, y, y);
            if (yc != y && yc != output) s[yc].compute_inline();
            if (out != yc && out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

LowerResult lower_gemm(const LowerCtx& c) {
  const Node& n = c.node;
  const float alpha = n.f("alpha"), beta = n.f("beta");
  const bool bias = c.has(2) && beta != 0.0f;
  auto epilogue = [&](const Tensor& y) {
    if (bias) {
      return topi::broadcast_binary(
          y, c.in[2],
          [=](Expr a, Expr b) {
            Expr scaled = alpha == 1.0f ? a : a * Expr(alpha);
            return scaled + (beta == 1.0f ? b : b * Expr(beta));
          },
          "gemm_bias");
    }
    if (alpha != 1.0f) {
      return topi::elementwise(
          y, [=](Expr a) { return a * Expr(alpha); }, "gemm_scale");
    }
    return y;
  };
  // pack_weights gave B as [ceil(N / bn), K, bn] panels (transA = 0).
  if (n.has_attr("packed_bn")) {
    return packed_product(c, c.input(0), c.out_value().shape.at(1), "gemm", epilogue);
  }
  Tensor y = topi::dense(c.input(0), c.input(1), n.i("transA") != 0, n.i("transB") != 0, "gemm");
  return with_epilogue(y, c.tuning.of("dense_x86"), epilogue(y));
}

/// The batched product of `a` and `b`, the node's inputs (or stages computed from them, which
/// `inline_inputs` inlines).
LowerResult lower_matmul(const LowerCtx& c, const Tensor& a, const Tensor& b,
                         const std::function<void(te::Schedule&)>& inline_inputs) {
  auto as = c.in_shape(0), bs = c.in_shape(1);
  const auto& out_shape = c.out_value().shape;
  // Batched: view a as [Ba, M, K] and b as [Bb, K, N] (a batch of 1 broadcasts).
  auto prod = [](const std::vector<int64_t>& s, size_t end) {
    int64_t p = 1;
    for (size_t i = 0; i < end; ++i) p *= s[i];
    return p;
  };
  std::vector<int64_t> a3, b3;
  if (as.size() == 1) {
    a3 = {1, 1, as[0]};
  } else {
    a3 = {prod(as, as.size() - 2), as[as.size() - 2], as.back()};
  }
  if (bs.size() == 1) {
    b3 = {1, bs[0], 1};
  } else {
    b3 = {prod(bs, bs.size() - 2), bs[bs.size() - 2], bs.back()};
  }
  const auto batch_a = std::vector<int64_t>(as.begin(), as.end() - std::min<size_t>(2, as.size()));
  const auto batch_b = std::vector<int64_t>(bs.begin(), bs.end() - std::min<size_t>(2, bs.size()));
  if (a3[0] != 1 && b3[0] != 1 && batch_a != batch_b) {
    c.fail("batch dimensions that broadcast partially are not supported");
  }
  Tensor ar = a3 == as ? a : topi::reshape(a, a3, "matmul_a");
  Tensor br = b3 == bs ? b : topi::reshape(b, b3, "matmul_b");
  // Rows and columns the x86 register tile divides (an attention's 197 tokens would leave it 1 x
  // 1): zero-padded operands, computed apart, and the product sliced back. GPU templates take any
  // size.
  const bool gpu = target::Target::parse(c.tuning.target).is_gpu();
  const int64_t m = a3[1], n = b3[2];
  const int64_t mp = gpu ? m : topi::batch_matmul_padded_rows(m),
                np = gpu ? n : topi::batch_matmul_padded_cols(n);
  Tensor ap = mp == m ? ar
                      : topi::pad(ar, {0, 0, 0}, {0, mp - m, 0}, 0.0, topi::PadMode::kConstant,
                                  "matmul_a_pad");
  Tensor bp = np == n ? br
                      : topi::pad(br, {0, 0, 0}, {0, 0, np - n}, 0.0, topi::PadMode::kConstant,
                                  "matmul_b_pad");
  Tensor y = topi::batch_matmul(ap, bp, false, false, "batch_matmul");
  Tensor yc = mp == m && np == n ? y
                                 : topi::slice(y, {0, 0, 0}, {std::max(a3[0], b3[0]), m, n}, {}, {},
                                               "matmul_crop");
  Tensor out = topi::reshape(yc, out_shape, "matmul_out");
  // On a GPU, batch_matmul_gpu tiles y with the group's epilogue where the output has y's shape.
  const bool same_shape = yc == y && topi::const_shape(y, "MatMul") == out_shape;
  return {{out},
          [=, tuning = c.tuning](te::Schedule& s, const Tensor& output) {
            if (inline_inputs) inline_inputs(s);
            if (ar != a) s[ar].compute_inline();
            if (br != b) s[br].compute_inline();
            if (ap != ar) injective(s, ap);
            if (bp != br) injective(s, bp);
            if (yc != y && yc != output) s[yc].compute_inline();
            if (out != output) s[out].compute_inline();
            // The crop, the reshape to the node's rank and any elementwise epilogue are stored
            // from the register tile: a separate pass would read and write the whole product.
            if (topi::batch_matmul_epilogue_fits(y, output)) {
              tuning.schedule("batch_matmul_x86", s, y, output);
              return;
            }
            tuning.schedule("batch_matmul_x86", s, y, y);
            injective(s, output);
          },
          same_shape ? y : Tensor()};
}

LowerResult lower_matmul_node(const LowerCtx& c) {
  const Node& n = c.node;
  if (n.has_attr("packed_bn")) {
    // pack_weights gave B as [ceil(N / bn), K, bn] panels: A flattened to [M, K], one dense.
    const auto as = c.in_shape(0);
    const auto& out_shape = c.out_value().shape;
    const int64_t k = as.back(), m = c.out_value().num_elements() / out_shape.back();
    const Tensor& a = c.input(0);
    Tensor a2 = as.size() == 2 ? a : topi::reshape(a, {m, k}, "matmul_a");
    return packed_product(c, a2, out_shape.back(), "matmul", [&](const Tensor& y) {
      return as.size() == 2 ? y : topi::reshape(y, out_shape, "matmul_out");
    });
  }
  if (c.in_shape(0).size() == 2 && c.in_shape(1).size() == 2) {
    Tensor y = topi::dense(c.input(0), c.input(1), false, false, "matmul");
    return with_epilogue(y, c.tuning.of("dense_x86"), y);
  }
  return lower_matmul(c, c.input(0), c.input(1), nullptr);
}

/// MatMulInteger with its weight packed for the VNNI kernel (pack_weights: packed_int8):
/// topi::dense_int8 over A's bytes, less A's zero point times B's column sums (input 3) in the
/// register tile.
LowerResult lower_matmul_integer_packed(const LowerCtx& c) {
  const Tensor y = topi::dense_int8(c.input(0), c.input(1), "matmul_integer");
  Tensor out = y;
  if (c.has(2)) {
    KILN_ICHECK(c.has(3)) << c.where() << ": a packed weight's column sums are missing";
    const Tensor za = c.in[2], sums = c.in[3];
    const bool scalar = za.ndim() == 0;
    out = te::compute(
        y->shape(),
        [&](const std::vector<ir::Var>& i) {
          const Expr z = scalar ? za() : za(Expr(int64_t{0}));
          return y(std::vector<Expr>(i.begin(), i.end())) -
                 ir::cast(ir::kInt32, z) * sums(i.back());
        },
        "matmul_integer_zero_point");
  }
  return with_epilogue(y, c.tuning.of("dense_int8_x86"), out);
}

/// MatMulInteger: A's zero point per row (axis -2), B's per column (axis -1).
LowerResult lower_matmul_integer(const LowerCtx& c) {
  if (c.node.has_attr("packed_int8")) return lower_matmul_integer_packed(c);
  const int ra = static_cast<int>(c.in_shape(0).size()),
            rb = static_cast<int>(c.in_shape(1).size());
  const Tensor a = topi::integer_operand(c.input(0), c.has(2) ? c.in[2] : Tensor(),
                                         std::max(0, ra - 2), "a_int32");
  const Tensor b =
      topi::integer_operand(c.input(1), c.has(3) ? c.in[3] : Tensor(), rb - 1, "b_int32");
  auto inline_inputs = [=](te::Schedule& s) {
    s[a].compute_inline();
    s[b].compute_inline();
  };
  if (ra == 2 && rb == 2) {
    Tensor y = topi::dense(a, b, false, false, "matmul_integer");
    const Template base = c.tuning.of("dense_x86");
    return with_epilogue(
        y,
        [=](te::Schedule& s, const Tensor& t, const Tensor& output) {
          inline_inputs(s);
          base(s, t, output);
        },
        y);
  }
  return lower_matmul(c, a, b, inline_inputs);
}

LowerResult lower_einsum(const LowerCtx& c) {
  const Node& n = c.node;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < n.inputs.size(); ++i) xs.push_back(c.input(i));
  Tensor y = topi::einsum(n.s("equation"), xs, "einsum");
  if (!y->reduce_axis.empty()) return reduce_result(y);
  return injective_result(y);
}

std::string product_gpu(const Node&, size_t anchor_rank) {
  return anchor_rank == 3 ? "batch_matmul_gpu" : "matmul_gpu";
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_gemm(const NodeCheck& nc) {
  const std::vector<int64_t>&a = nc.shape(0), &b = nc.shape(1);
  for (size_t i : {size_t{0}, size_t{1}}) {
    if (nc.rank(i) != 2)
      nc.fail(nc.input_shaped(i) + " has rank " + str(nc.rank(i)) + "; Gemm takes matrices");
  }
  const int64_t ta = nc.attr_i("transA", 0) != 0, tb = nc.attr_i("transB", 0) != 0;
  const int64_t ka = a[ta ? 0 : 1], kb = b[tb ? 1 : 0];
  if (ka != kb) {
    nc.fail("inner dimensions differ: " + nc.input_shaped(0) + " with transA " + str(ta) +
            " gives K = " + str(ka) + ", " + nc.input_shaped(1) + " with transB " + str(tb) +
            " gives K = " + str(kb));
  }
  if (!nc.has(2)) return;
  const std::vector<int64_t> out = {a[ta ? 1 : 0], b[tb ? 0 : 1]};
  const std::vector<int64_t>& c = nc.shape(2);
  bool ok = c.size() <= 2;
  for (size_t i = 1; ok && i <= c.size(); ++i) {
    const int64_t d = c[c.size() - i];
    ok = d == 1 || d == out[2 - i];
  }
  if (!ok) {
    nc.fail(nc.input_shaped(2) + " does not broadcast to the output's shape " + str(out) +
            " (M = " + str(out[0]) + " from " + nc.input(0) + ", N = " + str(out[1]) + " from " +
            nc.input(1) + ")");
  }
}

void check_matmul(const NodeCheck& nc) {
  const std::vector<int64_t>&a = nc.shape(0), &b = nc.shape(1);
  for (size_t i : {size_t{0}, size_t{1}}) {
    if (nc.rank(i) < 1)
      nc.fail(nc.input(i) + " is a scalar; MatMul takes tensors of rank 1 or more");
  }
  const int64_t ka = a.back(), kb = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (ka != kb) {
    nc.fail("inner dimensions differ: " + nc.input_shaped(0) + " gives K = " + str(ka) +
            " (its last dimension), " + nc.input_shaped(1) + " gives K = " + str(kb) +
            (b.size() == 1 ? " (its only dimension)" : " (its second-to-last dimension)"));
  }
  const std::vector<int64_t> ba(a.begin(), a.end() - std::min<ptrdiff_t>(2, ptrdiff_t(a.size())));
  const std::vector<int64_t> bb(b.begin(), b.end() - std::min<ptrdiff_t>(2, ptrdiff_t(b.size())));
  int64_t da = 0, db = 0;
  if (!broadcastable(ba, bb, &da, &db)) {
    nc.fail("the batch dimensions " + str(ba) + " of " + nc.input_shaped(0) + " and " + str(bb) +
            " of " + nc.input_shaped(1) + " do not broadcast: " + str(da) + " against " + str(db));
  }
}

/// MatMulInteger: MatMul's shapes; A's zero point one value, one per row ([M] for a 2-D A) or of
/// A's rank with a last dimension of 1; B's one value, one per column ([N] for a 2-D B) or of B's
/// rank with a second-to-last dimension of 1; each broadcasting against its operand.
void check_matmul_integer(const NodeCheck& nc) {
  check_matmul(nc);
  for (size_t i : {size_t{2}, size_t{3}}) {
    if (!nc.has(i) || nc.rank(i) == 0) continue;
    const std::vector<int64_t>& z = nc.shape(i);
    const std::vector<int64_t>& x = nc.shape(i - 2);
    if (z.size() == 1 && z[0] == 1) continue;
    const bool a = i == 2;
    const size_t along = a ? x.size() - std::min<size_t>(2, x.size()) : x.size() - 1;
    if (z.size() == 1 && x.size() == 2 && z[0] == x[along]) continue;
    bool ok =
        z.size() == x.size() && z[a ? z.size() - 1 : z.size() - std::min<size_t>(2, z.size())] == 1;
    for (size_t d = 0; ok && d < z.size(); ++d) ok = z[d] == 1 || z[d] == x[d];
    if (!ok) {
      nc.fail(nc.input_shaped(i) + " does not fit " + nc.input_shaped(i - 2) +
              ": a zero point is " + "a scalar, [" + str(x.size() == 2 ? x[along] : int64_t{1}) +
              "] (one per " + (a ? "row" : "column") +
              " of a 2-D operand) or of the operand's rank with a " +
              (a ? "last" : "second-to-last") + " dimension of 1");
    }
  }
}

/// Einsum: the equation parses for the operands' ranks and its axes' sizes agree
/// (topi/einsum.h says what it accepts).
void check_einsum(const NodeCheck& nc) {
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < nc.num_inputs(); ++i) shapes.push_back(nc.shape(i));
  try {
    topi::einsum_shape(nc.attr_s("equation", ""), shapes);
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("error: ", 0) == 0) why.erase(0, 7);
    nc.fail("attribute 'equation': " + why);
  }
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_gemm(ImportCtx& c) {
  Attrs a;
  a["alpha"] = c.attr_f("alpha", 1.0f);
  a["beta"] = c.attr_f("beta", 1.0f);
  a["transA"] = c.attr_i("transA", 0);
  a["transB"] = c.attr_i("transB", 0);
  return a;
}

Attrs import_einsum(ImportCtx& c) {
  Attrs a;
  a["equation"] = c.attr_s("equation", "");
  return a;
}

// --- rewritten at import -----------------------------------------------------------------------

/// Whether transposing axes of `shape` by `perm` moves data: not when the axes larger than 1 keep
/// their order (a reshape then suffices).
bool moves_data(const std::vector<int64_t>& perm, const std::vector<int64_t>& shape) {
  int64_t last = -1;
  for (int64_t p : perm) {
    if (shape[p] == 1) continue;
    if (p < last) return true;
    last = p;
  }
  return false;
}

/// A float32 Einsum that is one batched matrix product (topi::einsum_contraction: attention's
/// "bhid,bhjd->bhij" and "bhij,bhjd->bhid", "ik,jk->ij", ...) becomes a MatMul of [batch..., M, K]
/// by [batch..., K, N] views of its operands (a Transpose where an operand's axes are out of that
/// order, a Reshape where several axes make one), then the product's Reshape and Transpose to the
/// output's axes: MatMul's kernels (batch_matmul, dense, dense_packed where an operand is a
/// weight) instead of the generic reduction. Other equations keep the Einsum node.
bool rewrite_einsum(const ImportCtx& c, const std::vector<ValueId>& outs, ImportSink& sink) {
  if (c.inputs.size() != 2 || outs.empty() || outs[0] == kNoValue) return false;
  const Value &a = c.in_value(0), &b = c.in_value(1);
  if (!a.is_float32() || !b.is_float32()) return false;
  for (const Value* v : {&a, &b, &c.first_output()}) {
    for (int64_t d : v->shape) {
      if (d < 1) return false;
    }
  }
  const auto con = topi::einsum_contraction(c.attr_s("equation", ""), {a.shape, b.shape});
  if (!con) return false;
  const std::string base = c.node_name();
  const Value& y = c.first_output();
  // The steps after the product, so that the last one defines the node's output.
  const bool out_moves = moves_data(con->perm_out, con->product_shape);
  std::vector<int64_t> mn = con->batch;
  mn.push_back(con->m);
  mn.push_back(con->n);
  auto node = [&](const std::string& op, const std::string& suffix, ValueId in, Attrs attrs,
                  const std::vector<int64_t>& shape, bool last) {
    const std::string name = last ? base : base + "/" + suffix;
    const ValueId v = last ? outs[0] : sink.add_value(name, y.dtype, shape);
    sink.add_node(Node{op, name, {in}, {v}, std::move(attrs)});
    return v;
  };
  auto permuted = [](const std::vector<int64_t>& shape, const std::vector<int64_t>& perm) {
    std::vector<int64_t> to;
    for (int64_t p : perm) to.push_back(shape[p]);
    return to;
  };
  auto transpose = [&](ValueId x, const std::vector<int64_t>& perm,
                       const std::vector<int64_t>& shape, const std::string& suffix, bool last) {
    Attrs t;
    t["perm"] = perm;
    return node("Transpose", suffix, x, std::move(t), permuted(shape, perm), last);
  };
  auto reshape = [&](ValueId x, const std::vector<int64_t>& to, const std::string& suffix,
                     bool last) {
    Attrs r;
    r["shape"] = to;
    return node("Reshape", suffix, x, std::move(r), to, last);
  };
  // An operand as [batch..., rows, cols]: its axes permuted by `perm`, then grouped.
  auto operand = [&](ValueId x, const std::vector<int64_t>& shape, const std::vector<int64_t>& perm,
                     int64_t rows, int64_t cols, const std::string& what) {
    std::vector<int64_t> to = con->batch;
    to.push_back(rows);
    to.push_back(cols);
    std::vector<int64_t> now = shape;
    if (moves_data(perm, shape)) {
      x = transpose(x, perm, shape, what + "_transposed", false);
      now = permuted(shape, perm);
    }
    return now == to ? x : reshape(x, to, what + "_as_matrix", false);
  };
  const ValueId va = operand(c.inputs[0], a.shape, con->perm_a, con->m, con->k, "a");
  const ValueId vb = operand(c.inputs[1], b.shape, con->perm_b, con->k, con->n, "b");
  const bool product_is_output = !out_moves && mn == y.shape;
  const ValueId prod = product_is_output ? outs[0] : sink.add_value(base + "/matmul", y.dtype, mn);
  sink.add_node(Node{"MatMul", product_is_output ? base : base + "/matmul", {va, vb}, {prod}, {}});
  if (product_is_output) return true;
  if (!out_moves) {
    reshape(prod, y.shape, "", true);
    return true;
  }
  const ValueId grouped =
      mn == con->product_shape ? prod : reshape(prod, con->product_shape, "product_axes", false);
  transpose(grouped, con->perm_out, con->product_shape, "", true);
  return true;
}

/// libonnx 1.12 infers only an Einsum's rank: its sizes come from the equation (validated).
std::vector<int64_t> einsum_output_shape(const ImportCtx& c) {
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < c.inputs.size(); ++i) shapes.push_back(c.in_value(i).shape);
  return topi::einsum_shape(c.attr_s("equation", ""), shapes);
}

}  // namespace

void register_matmul(Registry& r) {
  r.add({.name = "Gemm",
         .family = "math/matmul",
         .pattern = OpPattern::kOutEWiseFusable,
         .check = check_gemm,
         .import = import_gemm,
         .lower = lower_gemm,
         .gpu = GpuStrategy::kTemplate,
         .gpu_template = product_gpu});
  r.add({.name = "MatMul",
         .family = "math/matmul",
         .pattern = OpPattern::kOutEWiseFusable,
         .check = check_matmul,
         .no_attributes = true,
         .lower = lower_matmul_node,
         .gpu = GpuStrategy::kTemplate,
         .gpu_template = product_gpu,
         .gpu_note = " of more than 3 dimensions"});
  r.add({.name = "MatMulInteger",
         .family = "math/matmul",
         .pattern = OpPattern::kOutEWiseFusable,
         .check = check_matmul_integer,
         .no_attributes = true,
         .lower = lower_matmul_integer,
         .gpu = GpuStrategy::kRefused,
         .gpu_note = "no GPU schedule yet"});
  r.add({.name = "Einsum",
         .family = "math/matmul",
         .pattern = OpPattern::kOpaque,
         .check = check_einsum,
         .import = import_einsum,
         .output_shape = einsum_output_shape,
         .rewrite = rewrite_einsum,
         .lower = lower_einsum,
         .gpu = GpuStrategy::kRefused,
         .gpu_note = "no GPU schedule yet"});
}

}  // namespace kiln::graph::ops
