// The indexing and data-movement operators: Gather, GatherElements, GatherND, Slice, Concat, Split,
// Pad, Trilu, and the scatters (ScatterElements, ScatterND), which write into a copy of their data.
#include <algorithm>
#include <cstring>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/scatter_gpu.h"
#include "compiler/topi/scatter.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using ir::Expr;
using te::Tensor;

LowerResult lower_gather(const LowerCtx& c) {
  return injective_result(topi::take(c.input(0), c.input(1), c.node.i("axis")));
}

LowerResult lower_channel_gather(const LowerCtx& c) {
  const Node& n = c.node;
  std::vector<Tensor> ins;
  for (size_t i = 0; i + 1 < n.inputs.size(); ++i) ins.push_back(c.input(i));
  return injective_result(topi::channel_gather(ins, c.input(n.inputs.size() - 1),
                                               static_cast<int>(n.i("data_block", 0)),
                                               static_cast<int>(n.i("out_block", 0))));
}

LowerResult lower_gather_elements(const LowerCtx& c) {
  return injective_result(
      topi::gather_elements(c.input(0), c.input(1), c.node.i("axis"), "gather_elements"));
}

LowerResult lower_gather_nd(const LowerCtx& c) {
  return injective_result(
      topi::gather_nd(c.input(0), c.input(1), c.node.i("batch_dims"), "gather_nd"));
}

/// A scatter's output, scheduled by its own loop (opaque: nothing is fused into or after it).
LowerResult scatter_result(const Tensor& y) {
  LowerResult r;
  r.outs = {y};
  r.schedule = [=](te::Schedule& s, const Tensor&) { topi::schedule_scatter_x86(s, y); };
  r.gpu = [=](te::Schedule& s, const target::Target& t) {
    topi::gpu::schedule_scatter_gpu(s, y, topi::gpu::default_threads(t));
  };
  return r;
}

LowerResult lower_scatter_elements(const LowerCtx& c) {
  const Node& n = c.node;
  return scatter_result(topi::scatter_elements(
      c.input(0), c.input(1), c.input(2), n.i("axis"),
      topi::parse_scatter_reduction(n.s("reduction"), n.op), "scatter_elements"));
}

LowerResult lower_scatter_nd(const LowerCtx& c) {
  const Node& n = c.node;
  return scatter_result(topi::scatter_nd(c.input(0), c.input(1), c.input(2),
                                         topi::parse_scatter_reduction(n.s("reduction"), n.op),
                                         "scatter_nd"));
}

LowerResult lower_concat(const LowerCtx& c) {
  const Node& n = c.node;
  std::vector<Tensor> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(c.input(i));
  return injective_result(topi::concat(ins, n.i("axis")));
}

LowerResult lower_pad(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& mode = n.s("mode");
  topi::PadMode m = topi::PadMode::kConstant;
  if (mode == "reflect") {
    m = topi::PadMode::kReflect;
  } else if (mode == "edge") {
    m = topi::PadMode::kEdge;
  } else if (mode != "constant") {
    c.fail("pad mode '" + mode + "' is not supported");
  }
  const auto& pads = n.ints("pads");
  const size_t r = pads.size() / 2;
  std::vector<int64_t> before(pads.begin(), pads.begin() + static_cast<ptrdiff_t>(r));
  std::vector<int64_t> after(pads.begin() + static_cast<ptrdiff_t>(r), pads.end());
  return injective_result(topi::pad(c.input(0), before, after, n.f("value"), m));
}

LowerResult lower_slice(const LowerCtx& c) {
  const Node& n = c.node;
  // The front end gives clamped per-axis bounds (an end of -1 with a negative step means "past
  // index 0", which topi::slice would read as the last index): index the input directly.
  const Tensor& x = c.input(0);
  const std::vector<int64_t> starts = n.ints("starts"), steps = n.ints("steps");
  std::vector<Expr> shape;
  for (int64_t d : c.out_value().shape) shape.push_back(Expr(static_cast<int>(d)));
  return injective_result(te::compute(
      shape,
      [=](const std::vector<ir::Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < i.size(); ++d) {
          idx.push_back(Expr(static_cast<int>(starts[d])) +
                        Expr(i[d]) * Expr(static_cast<int>(steps[d])));
        }
        return x(idx);
      },
      "slice"));
}

LowerResult lower_trilu(const LowerCtx& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  const int64_t k = n.i("k");
  const bool upper = n.i("upper") != 0;
  const size_t r = x.ndim();
  return injective_result(te::compute(
      x->shape(),
      [&](const std::vector<ir::Var>& i) {
        const Expr diff = Expr(i[r - 1]) - Expr(i[r - 2]);  // j - i
        const Expr keep =
            upper ? diff >= Expr(static_cast<int>(k)) : diff <= Expr(static_cast<int>(k));
        return ir::select(keep, x(std::vector<Expr>(i.begin(), i.end())),
                          ir::make_zero(x->dtype()));
      },
      "trilu"));
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_concat(const NodeCheck& nc) {
  const int64_t r = nc.rank(0);
  if (r == 0) nc.fail(nc.input(0) + " is a scalar; Concat takes tensors of rank 1 or more");
  const int64_t axis = nc.axis_in(nc.attr_i("axis", 0), r, "attribute 'axis'", nc.input(0));
  for (size_t i = 1; i < nc.num_inputs(); ++i) {
    if (nc.rank(i) != r) {
      nc.fail(nc.input_shaped(i) + " has rank " + str(nc.rank(i)) + ", but " + nc.input_shaped(0) +
              " has rank " + str(r));
    }
    for (int64_t d = 0; d < r; ++d) {
      const int64_t a = nc.shape(0)[static_cast<size_t>(d)],
                    b = nc.shape(i)[static_cast<size_t>(d)];
      if (d != axis && a != b) {
        nc.fail(nc.input_shaped(i) + " differs from " + nc.input_shaped(0) + " in dimension " +
                str(d) + " (" + str(b) + " against " + str(a) + "); only dimension " + str(axis) +
                " (attribute 'axis') may differ");
      }
    }
  }
}

void check_slice(const NodeCheck& nc) {
  const int64_t r = nc.rank(0);
  const std::optional<std::vector<int64_t>> starts = nc.const_ints(1), ends = nc.const_ints(2);
  std::optional<std::vector<int64_t>> axes = nc.const_ints(3), steps = nc.const_ints(4);
  if (!starts || !ends || (nc.has(3) && !axes) || (nc.has(4) && !steps)) return;
  for (size_t i = 1; i <= 4; ++i) {
    if (nc.has(i) && nc.rank(i) != 1) nc.fail(nc.input_shaped(i) + " must be 1-D");
  }
  const int64_t n = static_cast<int64_t>(starts->size());
  for (size_t i = 2; i <= 4; ++i) {
    if (nc.has(i) && nc.value(i).num_elements() != n) {
      nc.fail(nc.input_shaped(i) + " has " + str(nc.value(i).num_elements()) + " values, but " +
              nc.input_shaped(1) + " has " + str(n));
    }
  }
  if (!axes) {
    if (n > r) {
      nc.fail(nc.input_shaped(1) + " has " + str(n) + " values, more than the " + str(r) +
              " dimensions of " + nc.input_shaped(0));
    }
    return;
  }
  nc.axes_in(*axes, r, nc.input(3), nc.input_shaped(0));
  for (size_t i = 0; steps && i < steps->size(); ++i) {
    if ((*steps)[i] == 0) nc.fail(nc.input(4) + " " + str(*steps) + " holds a step of 0");
  }
}

void check_pad(const NodeCheck& nc) {
  const std::string mode = nc.attr_s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") {
    nc.fail("attribute 'mode' is '" + mode + "'; Pad at opset " + str(nc.opset()) +
            " takes constant, reflect or edge");
  }
  if (nc.has(2) && nc.value(2).num_elements() > 1) {
    nc.fail(nc.input_shaped(2) + " must be a scalar (the padding value)");
  }
  const std::optional<std::vector<int64_t>> pads = nc.const_ints(1);
  std::optional<std::vector<int64_t>> axes = nc.const_ints(3);
  if (!pads || (nc.has(3) && !axes)) return;
  if (nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D");
  const int64_t r = nc.rank(0);
  std::vector<int64_t> dims;
  if (axes) {
    if (nc.rank(3) != 1) nc.fail(nc.input_shaped(3) + " must be 1-D");
    dims = nc.axes_in(*axes, r, nc.input(3), nc.input_shaped(0));
  } else {
    for (int64_t i = 0; i < r; ++i) dims.push_back(i);
  }
  const size_t m = dims.size();
  if (pads->size() != 2 * m) {
    nc.fail(nc.input(1) + " " + str(*pads) + " has " + str(int64_t(pads->size())) +
            " values, but " +
            (axes ? nc.input(3) + " names " + str(int64_t(m)) + " axes"
                  : nc.input_shaped(0) + " has rank " + str(r)) +
            ": it needs " + str(int64_t(2 * m)) + " (a begin and an end per axis)");
  }
  for (size_t i = 0; i < m; ++i) {
    const int64_t d = nc.shape(0)[static_cast<size_t>(dims[i])];
    const int64_t out = d + (*pads)[i] + (*pads)[i + m];
    if (out < 0) {
      nc.fail(nc.input(1) + " " + str(*pads) + " removes more than the " + str(d) +
              " elements of " + nc.input_shaped(0) + " in dimension " + str(dims[i]));
    }
  }
}

/// Split: the sizes (attribute before opset 13, input 1 after) sum to the axis and there is one
/// per output; num_outputs (opset 18) at most the axis; without either, the axis divides evenly.
void check_split(const NodeCheck& nc) {
  const int64_t axis =
      nc.axis_in(nc.attr_i("axis", 0), nc.rank(0), "attribute 'axis'", nc.input(0));
  const int64_t dim = nc.shape(0)[static_cast<size_t>(axis)];
  const int64_t outs = nc.node().output_size();
  const std::string along = "dimension " + str(axis) + " of " + nc.input_shaped(0);
  std::optional<std::vector<int64_t>> sizes;
  std::string what;
  if (nc.opset() < 13 && nc.attr("split") != nullptr) {
    sizes = nc.attr_ints("split", {});
    what = "attribute 'split'";
  } else if (nc.opset() >= 13 && nc.has(1)) {
    if (nc.rank(1) != 1) nc.fail(nc.input_shaped(1) + " must be 1-D (one size per output)");
    sizes = nc.const_ints(1);
    what = nc.input(1);
    if (!sizes) return;
  }
  if (nc.attr("num_outputs") != nullptr) {
    if (sizes) nc.fail("attribute 'num_outputs' and " + what + " cannot be used together");
    const int64_t n = nc.attr_i("num_outputs", 0);
    if (n < 1 || n != outs) {
      nc.fail("attribute 'num_outputs' is " + str(n) + ", but the node has " + str(outs) +
              " outputs");
    }
    if (n > dim && dim > 0)
      nc.fail("attribute 'num_outputs' is " + str(n) + ", more than " + along);
    return;
  }
  if (sizes) {
    if (static_cast<int64_t>(sizes->size()) != outs) {
      nc.fail(what + " is " + str(*sizes) + ", " + str(static_cast<int64_t>(sizes->size())) +
              " sizes for " + str(outs) + " outputs");
    }
    int64_t total = 0;
    for (int64_t v : *sizes) {
      if (v < 0) nc.fail(what + " is " + str(*sizes) + "; a size must not be negative");
      total += v;
    }
    if (total != dim)
      nc.fail(what + " is " + str(*sizes) + ", which sums to " + str(total) + ", but " + along +
              " is " + str(dim));
    return;
  }
  if (nc.opset() >= 18) {
    nc.fail(
        "gives neither input 1 (split) nor attribute 'num_outputs'; Split at opset 18 needs "
        "one of them");
  }
  if (dim % outs != 0) {
    nc.fail(along + " does not split into " + str(outs) + " equal parts (" + str(dim) + " is not " +
            "a multiple of " + str(outs) + ")");
  }
}

/// GatherElements (and ScatterElements' data and indices): indices of data's rank, no larger
/// than data off the axis (the output has the indices' shape and reads data at their
/// coordinates), constant indices in range.
void check_gather_elements(const NodeCheck& nc) {
  const int64_t r = nc.rank(0);
  if (r == 0) nc.fail(nc.input(0) + " is a scalar; " + nc.op() + " takes data of rank 1 or more");
  const int64_t axis = nc.axis_in(nc.attr_i("axis", 0), r, "attribute 'axis'", nc.input(0));
  if (nc.rank(1) != r) {
    nc.fail(nc.input_shaped(1) + " has rank " + str(nc.rank(1)) + ", but " + nc.input_shaped(0) +
            " has rank " + str(r) + "; they must agree");
  }
  for (int64_t d = 0; d < r; ++d) {
    const size_t du = static_cast<size_t>(d);
    if (d != axis && nc.shape(1)[du] > nc.shape(0)[du]) {
      nc.fail(nc.input_shaped(1) + " is larger than " + nc.input_shaped(0) + " in dimension " +
              str(d) + " (" + str(nc.shape(1)[du]) + " > " + str(nc.shape(0)[du]) + ")");
    }
  }
  if (const auto idx = nc.const_ints(1)) {
    const int64_t dim = nc.shape(0)[static_cast<size_t>(axis)];
    for (int64_t j : *idx) {
      if (j < -dim || j >= dim) {
        nc.fail(nc.input(1) + " holds index " + str(j) + ", out of range [" + str(-dim) + ", " +
                str(dim - 1) + "] for dimension " + str(axis) + " of " + nc.input_shaped(0));
      }
    }
  }
}

/// Constant indices of input 1 within [-dim, dim - 1] of dimension `d` of input 0, where each
/// index at a position `p` of the flat indices is for dimension `dim_of(p)`.
template <typename DimOf>
void check_const_indices(const NodeCheck& nc, DimOf dim_of) {
  const auto idx = nc.const_ints(1);
  if (!idx) return;
  for (size_t p = 0; p < idx->size(); ++p) {
    const int64_t d = dim_of(p), dim = nc.shape(0)[static_cast<size_t>(d)], j = (*idx)[p];
    if (j < -dim || j >= dim) {
      nc.fail(nc.input(1) + " holds index " + str(j) + ", out of range [" + str(-dim) + ", " +
              str(dim - 1) + "] for dimension " + str(d) + " of " + nc.input_shaped(0));
    }
  }
}

/// GatherND: indices of rank q >= 1 whose last dimension k is in [1, r - batch_dims], the first
/// batch_dims dimensions of data and indices equal, constant indices in range.
/// GatherND's and ScatterND's data and indices (both of rank 1 or more): the length k of the
/// indices' tuples, in [1, rank of data - batch_dims].
int64_t index_tuple_length(const NodeCheck& nc, int64_t batch_dims) {
  const int64_t r = nc.rank(0);
  for (size_t i : {0, 1}) {
    if (nc.rank(i) == 0) {
      nc.fail(nc.input(i) + " is a scalar; " + nc.op() + " takes " + nc.formal_name(i) +
              " of rank 1 or more");
    }
  }
  const int64_t k = nc.shape(1).back();
  if (k < 1 || k > r - batch_dims) {
    nc.fail("the last dimension of " + nc.input_shaped(1) + " is " + str(k) +
            "; it must be in [1, " + str(r - batch_dims) + "] (the rank of " + nc.input(0) +
            (batch_dims > 0 ? " less batch_dims " + str(batch_dims) : std::string()) + ")");
  }
  return k;
}

/// GatherND: the first batch_dims dimensions of data and indices equal, the indices' tuples no
/// longer than data's rank less batch_dims, constant indices in range.
void check_gather_nd(const NodeCheck& nc) {
  const int64_t b = nc.attr_i("batch_dims", 0);
  const int64_t lim = std::min(nc.rank(0), nc.rank(1));
  if (b < 0 || (lim > 0 && b >= lim)) {
    nc.fail("attribute 'batch_dims' is " + str(b) + "; it must be in [0, " + str(lim - 1) +
            "] for " + nc.input_shaped(0) + " and " + nc.input_shaped(1));
  }
  for (int64_t d = 0; d < b; ++d) {
    const size_t du = static_cast<size_t>(d);
    if (nc.shape(0)[du] != nc.shape(1)[du]) {
      nc.fail(nc.input_shaped(1) + " and " + nc.input_shaped(0) + " differ in batch dimension " +
              str(d) + " (" + str(nc.shape(1)[du]) + " vs " + str(nc.shape(0)[du]) + ")");
    }
  }
  const int64_t k = index_tuple_length(nc, b);
  check_const_indices(nc, [&](size_t p) { return b + static_cast<int64_t>(p) % k; });
}

/// The `reduction` attribute of a scatter: none, add and mul from opset 16, max and min from 18.
void check_scatter_reduction(const NodeCheck& nc) {
  const std::string red = nc.attr_s("reduction", "none");
  const bool ok = red == "none" || red == "add" || red == "mul" ||
                  (nc.opset() >= 18 && (red == "max" || red == "min"));
  if (!ok) {
    nc.fail("attribute 'reduction' is '" + red + "'; " + nc.op() + " at opset " + str(nc.opset()) +
            " takes none, add or mul" +
            (nc.opset() >= 18 ? ", max or min" : " (max and min from opset 18)"));
  }
}

/// ScatterElements: indices of data's rank, no larger than data off the axis, updates of the
/// indices' shape, constant indices in range along the axis.
void check_scatter_elements(const NodeCheck& nc) {
  check_gather_elements(nc);
  if (nc.shape(2) != nc.shape(1)) {
    nc.fail(nc.input_shaped(2) + " must have the shape of " + nc.input_shaped(1));
  }
  check_scatter_reduction(nc);
}

/// ScatterND: indices of rank q >= 1 whose last dimension k is in [1, r], updates of shape
/// indices.shape[:-1] + data.shape[k:], constant indices in range.
void check_scatter_nd(const NodeCheck& nc) {
  const int64_t k = index_tuple_length(nc, 0);
  std::vector<int64_t> want(nc.shape(1).begin(), nc.shape(1).end() - 1);
  want.insert(want.end(), nc.shape(0).begin() + k, nc.shape(0).end());
  if (nc.shape(2) != want) {
    nc.fail(nc.input_shaped(2) + " must have shape " + str(want) + " (" + nc.input(1) +
            "'s shape without its last dimension, then " + nc.input(0) + "'s from dimension " +
            str(k) + ")");
  }
  check_scatter_reduction(nc);
  check_const_indices(nc, [&](size_t p) { return static_cast<int64_t>(p) % k; });
}

void check_gather(const NodeCheck& nc) {
  const int64_t r = nc.rank(0);
  if (r == 0) nc.fail(nc.input(0) + " is a scalar; Gather takes data of rank 1 or more");
  const int64_t axis = nc.axis_in(nc.attr_i("axis", 0), r, "attribute 'axis'", nc.input(0));
  const std::optional<std::vector<int64_t>> indices = nc.const_ints(1);
  if (!indices) return;
  const int64_t dim = nc.shape(0)[static_cast<size_t>(axis)];
  for (int64_t j : *indices) {
    if (j < -dim || j >= dim) {
      nc.fail(nc.input(1) + " holds index " + str(j) + ", out of range [" + str(-dim) + ", " +
              str(dim - 1) + "] for dimension " + str(axis) + " of " + nc.input_shaped(0));
    }
  }
}

void check_trilu(const NodeCheck& nc) {
  if (nc.rank(0) < 2)
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) + "; Trilu needs 2 or more");
  nc.flag("upper", 1);
  if (nc.has(1) && nc.value(1).num_elements() != 1)
    nc.fail(nc.input_shaped(1) + " must be a scalar");
  return;
}

// --- import (attributes with their defaults) ------------------------------------------------

/// Whether Concat's input `v` is an empty constant (a Slice of a shape's empty tail, folded).
bool empty_constant(const Value* v) { return v != nullptr && v->num_elements() == 0; }

Attrs import_concat(ImportCtx& c) {
  Attrs a;
  a["axis"] = norm_axis(c.attr_i("axis", 0), c.in_rank(0));
  // Empty inputs add nothing; the graph node reads the others (at least one).
  std::vector<ValueId> kept;
  for (ValueId v : c.inputs)
    if (!empty_constant(&c.graph().value(v))) kept.push_back(v);
  if (!kept.empty()) c.inputs = kept;
  return a;
}

Attrs import_pad(ImportCtx& c) {
  Attrs a;
  const int64_t rank = c.in_rank(0);
  a["mode"] = c.attr_s("mode", "constant");
  std::vector<int64_t> given = c.const_ints(1, "pads");
  std::vector<int64_t> axes;
  if (c.in(3) != kNoValue) {
    axes = c.const_ints(3, "axes");
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t ax = norm_axis(axes[i], rank);
    pads[static_cast<size_t>(ax)] = given[i];
    pads[static_cast<size_t>(ax + rank)] = given[i + axes.size()];
  }
  a["pads"] = pads;
  a["value"] = c.const_float(2, "constant_value", 0.0f);
  c.inputs.resize(1);
  return a;
}

Attrs import_slice(ImportCtx& c) {
  Attrs a;
  const auto& shape = c.in_value(0).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const std::vector<int64_t> starts = c.const_ints(1, "starts");
  const std::vector<int64_t> ends = c.const_ints(2, "ends");
  std::vector<int64_t> axes, steps;
  if (c.in(3) != kNoValue) {
    axes = c.const_ints(3, "axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  steps = c.in(4) != kNoValue ? c.const_ints(4, "steps") : std::vector<int64_t>(starts.size(), 1);
  // Normalized to every axis: start and end clamped as ONNX specifies, step non-zero.
  std::vector<int64_t> s(static_cast<size_t>(rank), 0), e(shape.begin(), shape.end()),
      st(static_cast<size_t>(rank), 1), all_axes;
  for (int64_t i = 0; i < rank; ++i) all_axes.push_back(i);
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t ax = static_cast<size_t>(norm_axis(axes[i], rank));
    const int64_t dim = shape[ax], step = steps[i];
    auto clamp = [&](int64_t v, bool is_end) {
      if (v < 0) v += dim;
      if (step > 0) return std::clamp<int64_t>(v, 0, dim);
      return std::clamp<int64_t>(v, is_end ? -1 : 0, dim - 1);
    };
    s[ax] = clamp(starts[i], false);
    e[ax] = clamp(ends[i], true);
    st[ax] = step;
  }
  a["starts"] = s;
  a["ends"] = e;
  a["axes"] = all_axes;
  a["steps"] = st;
  c.inputs.resize(1);
  return a;
}

// (constant data and indices were folded already)
Attrs import_gather(ImportCtx& c) {
  Attrs a;
  a["axis"] = norm_axis(c.attr_i("axis", 0), c.in_rank(0));
  return a;
}

Attrs import_split(ImportCtx& c) {
  Attrs a;
  // The sizes are those inference gave the outputs (validate_node checked the forms).
  const int64_t axis = norm_axis(c.attr_i("axis", 0), c.in_rank(0));
  std::vector<int64_t> sizes;
  for (int i = 0; i < c.proto().output_size(); ++i) {
    if (c.proto().output(i).empty()) c.fail("output " + std::to_string(i) + " is unnamed");
    sizes.push_back(c.output(static_cast<size_t>(i)).shape.at(static_cast<size_t>(axis)));
  }
  a["axis"] = axis;
  a["split"] = sizes;
  c.inputs.resize(1);
  return a;
}

Attrs import_gather_elements(ImportCtx& c) {
  Attrs a;
  a["axis"] = norm_axis(c.attr_i("axis", 0), c.in_rank(0));
  return a;
}

Attrs import_gather_nd(ImportCtx& c) {
  Attrs a;
  a["batch_dims"] = c.attr_i("batch_dims", 0);
  return a;
}

Attrs import_scatter_elements(ImportCtx& c) {
  Attrs a = import_gather_elements(c);
  a["reduction"] = c.attr_s("reduction", "none");
  return a;
}

Attrs import_scatter_nd(ImportCtx& c) {
  Attrs a;
  a["reduction"] = c.attr_s("reduction", "none");
  return a;
}

Attrs import_trilu(ImportCtx& c) {
  Attrs a;
  int64_t k = 0;
  if (c.in(1) != kNoValue) k = c.const_ints(1, "k").at(0);
  a["k"] = k;
  a["upper"] = c.attr_i("upper", 1);
  c.inputs.resize(1);
  return a;
}

void need_k(const ImportCtx& c) {
  if (c.in(1) != kNoValue) c.need_constant(1, "k");
}
void need_split(const ImportCtx& c) {
  if (c.in(1) != kNoValue) c.need_constant(1, "split");
}

// --- folded at import (all inputs constant) ---------------------------------------------------

/// Slice of a constant: the normalized starts and steps (import_slice's) as a strided view.
bool fold_slice(const ImportCtx& c, const Value& ov, runtime::NDArray* result) {
  ImportCtx copy = c;
  const Attrs a = import_slice(copy);
  std::vector<int64_t> axes(ov.shape.size());
  for (size_t d = 0; d < axes.size(); ++d) axes[d] = static_cast<int64_t>(d);
  return fold_strided_view(c, ov, axes, std::get<std::vector<int64_t>>(a.at("starts")),
                           std::get<std::vector<int64_t>>(a.at("steps")), result);
}

/// Gather and Concat: every array viewed as [outer, axis, inner], rows of `inner` elements copied.
bool fold_gather_concat(const ImportCtx& c, const Value& ov, runtime::NDArray* result) {
  const std::string& op = c.op();
  const runtime::NDArray& x = *c.const_input(0);
  check_folded(c, ov, runtime::dtype_equal(x.dtype(), ov.dtype));
  *result = runtime::NDArray::empty(ov.shape, ov.dtype);
  const int64_t elem = runtime::dtype_bytes(ov.dtype);
  char* dst = static_cast<char*>(result->data());
  const int64_t rank = static_cast<int64_t>(ov.shape.size());
  const int64_t axis = norm_axis(c.attr_i("axis", 0), op == "Gather" ? x.ndim() : rank);
  auto inner_of = [&](const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) n *= s[d];
    return n;
  };
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
  if (op == "Gather") {
    const int64_t inner = inner_of(x.shape()), dim = x.shape()[static_cast<size_t>(axis)];
    const std::vector<int64_t> idx = c.const_ints(1, "indices");
    check_folded(c, ov, outer * static_cast<int64_t>(idx.size()) * inner == ov.num_elements());
    const auto* src = static_cast<const char*>(x.data());
    char* p = dst;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j : idx) {
        if (j < -dim || j >= dim) c.fail("index " + std::to_string(j) + " is out of range");
        if (j < 0) j += dim;
        const size_t row = static_cast<size_t>(inner * elem);
        std::memcpy(p, src + ((o * dim + j) * inner) * elem, row);
        p += row;
      }
    }
    return true;
  }
  int64_t total = 0;
  for (ValueId v : c.inputs) {
    const runtime::NDArray& in_arr = *c.graph().value(v).data;
    check_folded(c, ov, in_arr.ndim() == rank && runtime::dtype_equal(in_arr.dtype(), ov.dtype));
    for (int64_t d = 0; d < rank; ++d) {
      check_folded(
          c, ov,
          d == axis || in_arr.shape()[static_cast<size_t>(d)] == ov.shape[static_cast<size_t>(d)]);
    }
    total += in_arr.num_elements();
  }
  check_folded(c, ov, total == ov.num_elements());
  char* p = dst;
  for (int64_t o = 0; o < outer; ++o) {
    for (ValueId v : c.inputs) {
      const runtime::NDArray& in_arr = *c.graph().value(v).data;
      const int64_t chunk = in_arr.shape()[static_cast<size_t>(axis)] * inner_of(in_arr.shape());
      std::memcpy(p, static_cast<const char*>(in_arr.data()) + o * chunk * elem,
                  static_cast<size_t>(chunk * elem));
      p += chunk * elem;
    }
  }
  return true;
}

// --- libonnx shape inference ------------------------------------------------------------------

/// libonnx 1.12's Concat inference fails ("axis must be in [-rank, rank-1]") when its first input
/// is an empty initializer (Swin's Concat(Slice(Shape(m))[2:], ...)); the node it reads drops
/// the empty constant inputs, which add nothing.
bool concat_inference(const InferenceForm& f, std::vector<onnx::TypeProto>*) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < f.inputs.size(); ++i)
    if (!empty_constant(f.inputs[i])) kept.push_back(f.node.input(static_cast<int>(i)));
  if (kept.empty() || kept.size() == f.inputs.size()) return false;
  f.n->clear_input();
  for (const std::string& name : kept) f.n->add_input(name);
  return false;
}

bool pad_inference(const InferenceForm& f, std::vector<onnx::TypeProto>* types) {
  if (f.node.input_size() < 4 || f.node.input(3).empty()) return false;
  // Opset 18's axes input, which libonnx 1.12 does not know: the opset-13 form, pads for
  // every axis (validate_node has checked them).
  const Value *pads = f.inputs.at(1), *axes = f.inputs.at(3);
  if (pads != nullptr && pads->is_constant() && axes != nullptr && axes->is_constant()) {
    const int64_t rank = static_cast<int64_t>(f.inputs.at(0)->shape.size());
    const std::vector<int64_t> given_pads = pads->data->to_vector<int64_t>();
    std::vector<int64_t> ax;
    for (int64_t i = 0; i < axes->num_elements(); ++i) {
      ax.push_back(static_cast<int64_t>(element_as_double(*axes->data, i)));
    }
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < ax.size(); ++i) {
      const int64_t a = ax[i] < 0 ? ax[i] + rank : ax[i];
      full[static_cast<size_t>(a)] = given_pads[i];
      full[static_cast<size_t>(a + rank)] = given_pads[i + ax.size()];
    }
    const std::string name = f.node.output(0) + "/kiln_full_pads";
    *f.g->add_initializer() = to_tensor_proto(
        name, runtime::NDArray::from_vector(full, {static_cast<int64_t>(full.size())}));
    f.n->set_input(1, name);
    while (f.n->input_size() > 3) f.n->mutable_input()->RemoveLast();
  }
  return false;
}

bool split_inference(const InferenceForm& f, std::vector<onnx::TypeProto>* types) {
  // Opset 18's num_outputs, which libonnx 1.12 does not know: explicit sizes, ceil(d / n) each
  // and the rest last (validate_node has checked it).
  auto it = std::find_if(f.node.attribute().begin(), f.node.attribute().end(),
                         [](const onnx::AttributeProto& a) { return a.name() == "num_outputs"; });
  if (it != f.node.attribute().end() && f.inputs.at(0) != nullptr && it->i() > 0) {
    int64_t axis = 0;
    for (const onnx::AttributeProto& a : f.node.attribute()) {
      if (a.name() == "axis") axis = a.i();
    }
    const auto& shape = f.inputs[0]->shape;
    if (axis < 0) axis += static_cast<int64_t>(shape.size());
    const int64_t dim = shape.at(static_cast<size_t>(axis)), parts = it->i();
    const int64_t chunk = (dim + parts - 1) / parts;
    std::vector<int64_t> sizes;
    for (int64_t k = 0, left = dim; k < parts; ++k) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
    f.n->clear_attribute();
    for (const onnx::AttributeProto& a : f.node.attribute()) {
      if (a.name() != "num_outputs") *f.n->add_attribute() = a;
    }
    const std::string name = f.node.output(0) + "/kiln_split_sizes";
    *f.g->add_initializer() = to_tensor_proto(
        name, runtime::NDArray::from_vector(sizes, {static_cast<int64_t>(sizes.size())}));
    while (f.n->input_size() > 1) f.n->mutable_input()->RemoveLast();
    f.n->add_input(name);
  }
  return false;
}

}  // namespace

void register_index(Registry& r) {
  auto add = [&](const char* op, CheckFn check, ImportFn import, LowerFn lower, FoldFn import_fold,
                 ConstantInputsFn constant_inputs = nullptr,
                 std::optional<Opset18Form> opset18 = std::nullopt,
                 InferenceFormFn inference_form = nullptr) {
    r.add({.name = op,
           .family = "tensor/index",
           .pattern = OpPattern::kInjective,
           .check = check,
           .opset18 = opset18,
           .import = import,
           .constant_inputs = constant_inputs,
           .inference_form = inference_form,
           .import_fold = import_fold,
           .lower = lower,
           .gpu = GpuStrategy::kInjective});
  };
  add("Concat", check_concat, import_concat, lower_concat, fold_gather_concat, nullptr,
      std::nullopt, concat_inference);
  add("Gather", check_gather, import_gather, lower_gather, fold_gather_concat);
  add("GatherElements", check_gather_elements, import_gather_elements, lower_gather_elements,
      nullptr);
  add("Pad", check_pad, import_pad, lower_pad, nullptr, nullptr,
      Opset18Form{.extra_inputs = {"axes"}}, pad_inference);
  add("Slice", check_slice, import_slice, lower_slice, fold_slice);
  add("Trilu", check_trilu, import_trilu, lower_trilu, nullptr, need_k);
  add("GatherND", check_gather_nd, import_gather_nd, lower_gather_nd, nullptr);
  // The scatters run their own loop over the indices (topi/scatter.h): nothing fuses into them.
  auto add_scatter = [&](const char* op, CheckFn check, ImportFn import, LowerFn lower) {
    r.add({.name = op,
           .family = "tensor/index",
           .pattern = OpPattern::kOpaque,
           .check = check,
           .import = import,
           .lower = lower,
           .gpu = GpuStrategy::kOwn});
  };
  add_scatter("ScatterElements", check_scatter_elements, import_scatter_elements,
              lower_scatter_elements);
  add_scatter("ScatterND", check_scatter_nd, import_scatter_nd, lower_scatter_nd);
  r.add({.name = "ChannelGather",
         .family = "tensor/index",
         .origin = Origin::kInternal,
         .internal_note = "gather_channel_permutations",
         .pattern = OpPattern::kInjective,
         .fold_constants = false,
         .lower = lower_channel_gather,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "Split",  // several outputs
         .family = "tensor/index",
         .pattern = OpPattern::kOpaque,
         .check = check_split,
         .opset18 = Opset18Form{.extra_attributes = {{"num_outputs", onnx::AttributeProto::INT}}},
         .import = import_split,
         .constant_inputs = need_split,
         .inference_form = split_inference,
         .lower_note = "one Slice per output before constant folding (split_to_slices.h)",
         // Its Slices are injective kernels, fused with their readers.
         .gpu = GpuStrategy::kInjective});
}

}  // namespace kiln::graph::ops
