// Shape and layout operators as index arithmetic over their inputs.
#include "compiler/topi/transform.h"

#include <algorithm>
#include <functional>

#include "base/error.h"
#include "base/shape_string.h"
#include "compiler/ir/printer.h"
#include "compiler/topi/elementwise.h"

namespace kiln::topi {

using ir::Expr;
using ir::Var;

namespace {

Expr int_expr(int64_t v) {
  KILN_USER_CHECK(v >= INT32_MIN && v <= INT32_MAX)
      << "index value " << v << " does not fit in 32 bits";
  return Expr(static_cast<int32_t>(v));
}

std::vector<Expr> exprs(const std::vector<int64_t>& v) {
  std::vector<Expr> e;
  for (int64_t d : v) e.push_back(int_expr(d));
  return e;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t d : v) p *= d;
  return p;
}

/// The row-major flat offset of `idx` in `shape`.
Expr flat_index(const std::vector<Var>& idx, const std::vector<int64_t>& shape) {
  Expr flat = ir::make_zero(ir::kInt32);
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * int_expr(shape[i]) + idx[i];
  return flat;
}

/// The indices of the flat offset `flat` in `shape` (row-major).
std::vector<Expr> unravel(const Expr& flat, const std::vector<int64_t>& shape) {
  std::vector<Expr> idx(shape.size());
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    Expr q = stride == 1 ? flat : ir::floordiv(flat, int_expr(stride));
    idx[k] = k == 0 ? q : ir::floormod(q, int_expr(shape[k]));
    stride *= shape[k];
  }
  return idx;
}

/// A run of input dims and a run of output dims of a reshape with the same element count.
struct ReshapeGroup {
  size_t in_begin, in_end, out_begin, out_end;
};

/// The shortest runs into which a reshape from `in` to `out` splits: a dim kept as it is, or
/// only with 1s added or dropped around it, is a group of its own, so its index passes straight
/// through instead of through the whole tensor's flat offset (a division by a constant that the
/// vectorizer cannot drop past a guarded tail). A shape with a 0 is one group.
std::vector<ReshapeGroup> reshape_groups(const std::vector<int64_t>& in,
                                         const std::vector<int64_t>& out) {
  const bool empty = std::find(in.begin(), in.end(), 0) != in.end() ||
                     std::find(out.begin(), out.end(), 0) != out.end();
  if (empty) return {{0, in.size(), 0, out.size()}};
  std::vector<ReshapeGroup> groups;
  size_t a = 0, b = 0;
  while (a < in.size() || b < out.size()) {
    if (a < in.size() && in[a] == 1) {  // a dim of 1 dropped: index 0
      groups.push_back({a, a + 1, b, b});
      ++a;
      continue;
    }
    if (b < out.size() && out[b] == 1) {  // a dim of 1 added: its index is unused
      groups.push_back({a, a, b, b + 1});
      ++b;
      continue;
    }
    if (a == in.size() || b == out.size()) return {{0, in.size(), 0, out.size()}};
    ReshapeGroup g{a, a, b, b};
    int64_t pa = in[a++], pb = out[b++];
    while (pa != pb) {
      if (pa < pb && a < in.size()) {
        pa *= in[a++];
      } else if (pb < pa && b < out.size()) {
        pb *= out[b++];
      } else {
        return {{0, in.size(), 0, out.size()}};  // counts that differ: infer_reshape_shape refuses
      }
    }
    g.in_end = a, g.out_end = b;
    groups.push_back(g);
  }
  return groups;
}

/// Sorted, distinct axes normalized against `ndim`.
std::vector<int> normalize_axes(const std::vector<int64_t>& axes, size_t ndim,
                                const std::string& op) {
  std::vector<int> out;
  for (int64_t a : axes) out.push_back(normalize_axis(a, ndim, op));
  std::sort(out.begin(), out.end());
  KILN_USER_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end())
      << op << ": axes " << shape_string(axes) << " name the same axis twice";
  return out;
}

}  // namespace

std::vector<int64_t> const_shape(const te::Tensor& t, const std::string& op) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < t.ndim(); ++i) {
    auto c = ir::as_const_int(t->shape()[i]);
    KILN_USER_CHECK(c.has_value())
        << op << ": '" << t->name() << "' has shape " << shape_str(t->shape()) << "; dimension "
        << i << " must be a constant";
    s.push_back(*c);
  }
  return s;
}

std::vector<int64_t> infer_reshape_shape(const std::vector<int64_t>& input,
                                         const std::vector<int64_t>& target, bool allow_zero) {
  std::vector<int64_t> out(target);
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allow_zero) {
      KILN_USER_CHECK(i < input.size())
          << "reshape: cannot reshape " << shape_string(input) << " into " << shape_string(target)
          << ": 0 at position " << i << " has no input dimension to copy";
      out[i] = input[i];
    }
    if (out[i] == -1) {
      KILN_USER_CHECK(inferred < 0) << "reshape: cannot reshape " << shape_string(input) << " into "
                                    << shape_string(target) << ": more than one -1";
      inferred = static_cast<int>(i);
      continue;
    }
    KILN_USER_CHECK(out[i] > 0) << "reshape: cannot reshape " << shape_string(input) << " into "
                                << shape_string(target) << ": dimension " << i << " is " << out[i];
    known *= out[i];
  }
  const int64_t total = product(input);
  if (inferred >= 0) {
    KILN_USER_CHECK(total % known == 0)
        << "reshape: cannot reshape " << shape_string(input) << " (" << total << " elements) into "
        << shape_string(target) << ": " << total << " is not a multiple of " << known;
    out[inferred] = total / known;
  }
  KILN_USER_CHECK(product(out) == total)
      << "reshape: cannot reshape " << shape_string(input) << " (" << total << " elements) into "
      << shape_string(target) << " (" << product(out) << " elements)";
  return out;
}

te::Tensor reshape(const te::Tensor& x, const std::vector<int64_t>& shape,
                   const std::string& name) {
  std::vector<int64_t> in = const_shape(x, "reshape");
  std::vector<int64_t> out = infer_reshape_shape(in, shape);
  const std::vector<ReshapeGroup> groups = reshape_groups(in, out);
  return te::compute(
      exprs(out),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        for (const ReshapeGroup& g : groups) {
          std::vector<Var> gi(i.begin() + g.out_begin, i.begin() + g.out_end);
          std::vector<int64_t> gout(out.begin() + g.out_begin, out.begin() + g.out_end),
              gin(in.begin() + g.in_begin, in.begin() + g.in_end);
          for (Expr e : unravel(flat_index(gi, gout), gin)) idx.push_back(e);
        }
        return x(idx);
      },
      name);
}

te::Tensor transpose(const te::Tensor& x, std::vector<int64_t> perm, const std::string& name) {
  const size_t n = x.ndim();
  if (perm.empty()) {
    for (size_t i = n; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  KILN_USER_CHECK(perm.size() == n)
      << "transpose: perm " << shape_string(perm) << " has " << perm.size() << " entries for '"
      << x->name() << "' of rank " << n;
  std::vector<int> p;
  for (int64_t a : perm) p.push_back(normalize_axis(a, n, "transpose"));
  std::vector<int> sorted(p);
  std::sort(sorted.begin(), sorted.end());
  KILN_USER_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end())
      << "transpose: perm " << shape_string(perm) << " is not a permutation";
  std::vector<Expr> shape;
  for (int a : p) shape.push_back(x->shape()[a]);
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx(n);
        for (size_t k = 0; k < n; ++k) idx[p[k]] = i[k];
        return x(idx);
      },
      name);
}

te::Tensor squeeze(const te::Tensor& x, const std::vector<int64_t>& axes, const std::string& name) {
  const size_t n = x.ndim();
  std::vector<bool> drop(n, false);
  if (axes.empty()) {
    for (size_t i = 0; i < n; ++i) drop[i] = ir::is_one(x->shape()[i]);
  } else {
    for (int a : normalize_axes(axes, n, "squeeze")) {
      KILN_USER_CHECK(ir::is_one(x->shape()[a]))
          << "squeeze: axis " << a << " of '" << x->name() << "' (shape " << shape_str(x->shape())
          << ") has size " << x->shape()[a] << ", not 1";
      drop[a] = true;
    }
  }
  std::vector<Expr> shape;
  for (size_t i = 0; i < n; ++i) {
    if (!drop[i]) shape.push_back(x->shape()[i]);
  }
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        size_t k = 0;
        for (size_t d = 0; d < n; ++d)
          idx.push_back(drop[d] ? ir::make_zero(ir::kInt32) : Expr(i[k++]));
        return x(idx);
      },
      name);
}

te::Tensor unsqueeze(const te::Tensor& x, const std::vector<int64_t>& axes,
                     const std::string& name) {
  KILN_USER_CHECK(!axes.empty()) << "unsqueeze: no axes given for '" << x->name() << "'";
  const size_t n = x.ndim() + axes.size();
  std::vector<bool> added(n, false);
  for (int a : normalize_axes(axes, n, "unsqueeze")) added[a] = true;
  std::vector<Expr> shape;
  size_t k = 0;
  for (size_t d = 0; d < n; ++d) shape.push_back(added[d] ? Expr(1) : x->shape()[k++]);
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < n; ++d) {
          if (!added[d]) idx.push_back(i[d]);
        }
        return x(idx);
      },
      name);
}

te::Tensor concat(const std::vector<te::Tensor>& inputs, int64_t axis, const std::string& name) {
  KILN_USER_CHECK(!inputs.empty()) << "concat: no inputs";
  const te::Tensor& first = inputs[0];
  const int ax = normalize_axis(axis, first.ndim(), "concat");
  std::vector<int64_t> offsets;  // start of each input along the axis
  int64_t total = 0;
  for (const te::Tensor& t : inputs) {
    KILN_USER_CHECK(t.ndim() == first.ndim() && t->dtype() == first->dtype())
        << "concat: '" << t->name() << "' (" << t->dtype().str() << ", shape "
        << shape_str(t->shape()) << ") does not match '" << first->name() << "' ("
        << first->dtype().str() << ", shape " << shape_str(first->shape()) << ")";
    for (size_t d = 0; d < t.ndim(); ++d) {
      if (static_cast<int>(d) == ax) continue;
      auto a = ir::as_const_int(t->shape()[d]), b = ir::as_const_int(first->shape()[d]);
      KILN_USER_CHECK(t->shape()[d].same_as(first->shape()[d]) || (a && b && *a == *b))
          << "concat: shapes " << shape_str(first->shape()) << " and " << shape_str(t->shape())
          << " differ in dimension " << d << " (concatenating along axis " << ax << ")";
    }
    auto len = ir::as_const_int(t->shape()[ax]);
    KILN_USER_CHECK(len.has_value())
        << "concat: '" << t->name() << "' must have a constant size along axis " << ax << ", got "
        << t->shape()[ax];
    offsets.push_back(total);
    total += *len;
  }
  std::vector<Expr> shape = first->shape();
  shape[ax] = int_expr(total);
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        // Selects as a balanced tree over the inputs (a concat of thousands of inputs is an
        // expression log2(n) deep, as deep as the loop IR's passes recurse); every read is
        // clamped into its input, since a select evaluates both sides.
        std::function<Expr(size_t, size_t)> pick = [&](size_t lo, size_t hi) -> Expr {
          if (hi - lo == 1) {
            const int64_t len = (lo + 1 < inputs.size() ? offsets[lo + 1] : total) - offsets[lo];
            std::vector<Expr> idx(i.begin(), i.end());
            idx[ax] = ir::min(ir::max(i[ax] - int_expr(offsets[lo]), 0), int_expr(len - 1));
            return inputs[lo](idx);
          }
          const size_t mid = lo + (hi - lo) / 2;
          return ir::select(i[ax] < int_expr(offsets[mid]), pick(lo, mid), pick(mid, hi));
        };
        return pick(0, inputs.size());
      },
      name);
}

te::Tensor channel_gather(const std::vector<te::Tensor>& inputs, const te::Tensor& table,
                          int data_block, int out_block, const std::string& name) {
  KILN_USER_CHECK(!inputs.empty()) << name << ": no inputs";
  const std::vector<int64_t> t = const_shape(table, name);
  KILN_USER_CHECK(t.size() == 2 && t[0] == 2 && table->dtype() == ir::kInt32)
      << name << ": the table '" << table->name() << "' must be int32 [2, C], not "
      << table->dtype() << " " << shape_string(t);
  const size_t rank = data_block > 0 ? 5 : 4;
  const std::vector<int64_t> first = const_shape(inputs[0], name);
  std::vector<int64_t> channels;  // each input's channels as stored (blocks included)
  for (const te::Tensor& x : inputs) {
    const std::vector<int64_t> s = const_shape(x, name);
    KILN_USER_CHECK(s.size() == rank && s[0] == first[0] && s[2] == first[2] && s[3] == first[3] &&
                    (data_block == 0 || s[4] == data_block) && x->dtype() == inputs[0]->dtype())
        << name << ": input '" << x->name() << "' " << shape_string(s) << " does not match '"
        << inputs[0]->name() << "' " << shape_string(first) << " with data blocks of "
        << data_block;
    channels.push_back(data_block > 0 ? s[1] * data_block : s[1]);
  }
  KILN_USER_CHECK(out_block == 0 || t[1] % out_block == 0)
      << name << ": " << t[1] << " table columns do not fill blocks of " << out_block;
  std::vector<int64_t> shape = {first[0], out_block > 0 ? t[1] / out_block : t[1], first[2],
                                first[3]};
  if (out_block > 0) shape.push_back(out_block);
  const ir::DataType dtype = inputs[0]->dtype();
  return te::compute(
      exprs(shape),
      [&](const std::vector<Var>& i) {
        const Expr c = out_block > 0 ? Expr(i[1]) * int_expr(out_block) + Expr(i[4]) : Expr(i[1]);
        const Expr which = table({int_expr(0), c});
        const Expr channel = table({int_expr(1), c});
        Expr value = ir::make_const(dtype, int64_t{0});
        for (size_t k = inputs.size(); k-- > 0;) {
          const Expr ch = ir::min(ir::max(channel, 0), int_expr(channels[k] - 1));
          std::vector<Expr> idx = {i[0], ch, i[2], i[3]};
          if (data_block > 0) {
            idx[1] = ir::floordiv(ch, int_expr(data_block));
            idx.push_back(ir::floormod(ch, int_expr(data_block)));
          }
          value = ir::select(which == int_expr(static_cast<int64_t>(k)), inputs[k](idx), value);
        }
        return value;
      },
      name);
}

te::Tensor pad(const te::Tensor& x, const std::vector<int64_t>& pad_before,
               const std::vector<int64_t>& pad_after, double value, PadMode mode,
               const std::string& name) {
  const size_t n = x.ndim();
  KILN_USER_CHECK(pad_before.size() == n && pad_after.size() == n)
      << "pad: '" << x->name() << "' has rank " << n << " but pads " << shape_string(pad_before)
      << " / " << shape_string(pad_after) << " are given";
  std::vector<int64_t> in = const_shape(x, "pad");
  std::vector<Expr> shape;
  for (size_t d = 0; d < n; ++d) {
    const int64_t out = in[d] + pad_before[d] + pad_after[d];
    KILN_USER_CHECK(out > 0) << "pad: axis " << d << " of '" << x->name() << "' (size " << in[d]
                             << ") padded by " << pad_before[d] << " / " << pad_after[d]
                             << " would have size " << out;
    if (mode == PadMode::kReflect) {
      KILN_USER_CHECK(pad_before[d] < in[d] && pad_after[d] < in[d])
          << "pad: reflect mode needs pads smaller than the dimension; axis " << d << " of '"
          << x->name() << "' has size " << in[d] << " and pads " << pad_before[d] << " / "
          << pad_after[d];
    }
    shape.push_back(int_expr(out));
  }
  const ir::DataType t = x->dtype();
  Expr fill =
      t.is_float() ? ir::make_const(t, value) : ir::make_const(t, static_cast<int64_t>(value));
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        Expr inside;
        for (size_t d = 0; d < n; ++d) {
          if (pad_before[d] == 0 && pad_after[d] == 0) {
            // An axis without padding reads itself: a clamp there would hide that a vector
            // along it is contiguous (a predicated tail then gathered every element).
            idx.push_back(i[d]);
            continue;
          }
          Expr j = i[d] - int_expr(pad_before[d]);
          Expr last = int_expr(in[d] - 1);
          if (mode == PadMode::kReflect && in[d] > 1) {
            Expr r = ir::select(j < 0, -j, j);  // mirror at 0
            r = ir::select(r > last, last * 2 - r, r);
            idx.push_back(r);
          } else {
            idx.push_back(ir::min(ir::max(j, 0), last));  // edge, and the clamped read of constant
          }
          if (mode == PadMode::kConstant && (pad_before[d] > 0 || pad_after[d] > 0)) {
            Expr c = j >= 0 && j <= last;
            inside = inside.defined() ? (inside && c) : c;
          }
        }
        Expr v = x(idx);
        return inside.defined() ? ir::select(inside, v, fill) : v;
      },
      name);
}

te::Tensor slice(const te::Tensor& x, const std::vector<int64_t>& starts,
                 const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                 const std::vector<int64_t>& steps, const std::string& name) {
  const size_t n = x.ndim();
  std::vector<int64_t> in = const_shape(x, "slice");
  std::vector<int64_t> ax(axes);
  if (ax.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) ax.push_back(static_cast<int64_t>(i));
  }
  KILN_USER_CHECK(starts.size() == ends.size() && starts.size() == ax.size() &&
                  (steps.empty() || steps.size() == ax.size()))
      << "slice: starts " << shape_string(starts) << ", ends " << shape_string(ends) << ", axes "
      << shape_string(axes) << " and steps " << shape_string(steps) << " must have the same length";
  std::vector<int64_t> begin(n, 0), step(n, 1), count(in);
  std::vector<bool> seen(n, false);
  for (size_t k = 0; k < ax.size(); ++k) {
    const int a = normalize_axis(ax[k], n, "slice");
    KILN_USER_CHECK(!seen[a]) << "slice: axis " << ax[k] << " appears twice in "
                              << shape_string(ax);
    seen[a] = true;
    const int64_t d = in[a], st = steps.empty() ? 1 : steps[k];
    KILN_USER_CHECK(st != 0) << "slice: step for axis " << ax[k] << " is 0";
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    const int64_t c = st > 0 ? (e - s + st - 1) / st : (s - e + (-st) - 1) / (-st);
    KILN_USER_CHECK(c > 0) << "slice: axis " << a << " of '" << x->name() << "' (shape "
                           << shape_string(in) << ") is empty for start " << starts[k] << ", end "
                           << ends[k] << ", step " << st;
    begin[a] = s;
    step[a] = st;
    count[a] = c;
  }
  return te::compute(
      exprs(count),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < n; ++d) {
          Expr j = step[d] == 1 ? Expr(i[d]) : i[d] * int_expr(step[d]);
          idx.push_back(begin[d] == 0 ? j : j + int_expr(begin[d]));
        }
        return x(idx);
      },
      name);
}

te::Tensor take(const te::Tensor& data, const te::Tensor& indices, int64_t axis,
                const std::string& name) {
  KILN_USER_CHECK(indices->dtype().is_int() || indices->dtype().is_uint())
      << "take: indices '" << indices->name() << "' must be integers, not " << indices->dtype();
  const size_t n = data.ndim();
  const int a = normalize_axis(axis, n, "take");
  const int64_t dim = const_shape(data, "take")[a];
  const std::vector<int64_t> ishape = const_shape(indices, "take");
  std::vector<int64_t> shape = const_shape(data, "take");
  shape.erase(shape.begin() + a);
  shape.insert(shape.begin() + a, ishape.begin(), ishape.end());
  const size_t ni = ishape.size();
  return te::compute(
      exprs(shape),
      [&](const std::vector<Var>& i) {
        std::vector<Expr> jdx(i.begin() + a, i.begin() + a + static_cast<ptrdiff_t>(ni));
        Expr j = ir::cast(ir::kInt32, indices(jdx));
        j = ir::select(j < 0, j + int_expr(dim), j);
        j = ir::min(ir::max(j, 0), int_expr(dim - 1));
        std::vector<Expr> idx(i.begin(), i.begin() + a);
        idx.push_back(j);
        idx.insert(idx.end(), i.begin() + a + static_cast<ptrdiff_t>(ni), i.end());
        return data(idx);
      },
      name);
}

te::Tensor gather_elements(const te::Tensor& data, const te::Tensor& indices, int64_t axis,
                           const std::string& name) {
  KILN_USER_CHECK(indices->dtype().is_int() || indices->dtype().is_uint())
      << name << ": indices '" << indices->name() << "' must be integers, not " << indices->dtype();
  KILN_USER_CHECK(indices.ndim() == data.ndim())
      << name << ": indices '" << indices->name() << "' of rank " << indices.ndim() << " for data '"
      << data->name() << "' of rank " << data.ndim();
  const int a = normalize_axis(axis, data.ndim(), name);
  const int64_t dim = const_shape(data, name)[a];
  return te::compute(
      indices->shape(),
      [&](const std::vector<Var>& i) {
        Expr j = ir::cast(ir::kInt32, indices(std::vector<Expr>(i.begin(), i.end())));
        j = ir::select(j < 0, j + int_expr(dim), j);
        j = ir::min(ir::max(j, 0), int_expr(dim - 1));  // never a read out of bounds
        std::vector<Expr> idx(i.begin(), i.end());
        idx[static_cast<size_t>(a)] = j;
        return data(idx);
      },
      name);
}

te::Tensor tile(const te::Tensor& x, const std::vector<int64_t>& repeats, const std::string& name) {
  KILN_USER_CHECK(repeats.size() == x.ndim()) << name << ": " << repeats.size() << " repeats for '"
                                              << x->name() << "' of rank " << x.ndim();
  const std::vector<int64_t> in = const_shape(x, name);
  std::vector<Expr> shape;
  for (size_t d = 0; d < in.size(); ++d) {
    KILN_USER_CHECK(repeats[d] >= 0)
        << name << ": repeat " << repeats[d] << " of axis " << d << " is negative";
    shape.push_back(Expr(static_cast<int>(in[d] * repeats[d])));
  }
  return te::compute(
      shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> idx;
        for (size_t d = 0; d < in.size(); ++d) {
          idx.push_back(repeats[d] == 1 || in[d] == 1 ? (in[d] == 1 ? Expr(0) : Expr(i[d]))
                                                      : Expr(i[d]) % Expr(static_cast<int>(in[d])));
        }
        return x(idx);
      },
      name);
}

}  // namespace kiln::topi

namespace kiln::topi {

te::Tensor resize(const te::Tensor& x, const std::vector<int64_t>& out_shape,
                  const std::vector<float>& scales, const ResizeMethod& method,
                  const std::string& name) {
  const std::string& mode = method.mode;
  const std::string& coord = method.coord;
  const std::string& nearest_mode = method.nearest_mode;
  const std::vector<int64_t> in = const_shape(x, name);
  KILN_USER_CHECK(out_shape.size() == in.size() && scales.size() == in.size())
      << name << ": output shape " << shape_string(out_shape) << " and " << scales.size()
      << " scales for '" << x->name() << "' of rank " << in.size();
  KILN_USER_CHECK(mode == "nearest" || mode == "linear" || mode == "cubic")
      << name << ": mode '" << mode << "' is not supported (nearest, linear, cubic)";
  KILN_USER_CHECK(mode == "nearest" || x->dtype().is_float())
      << name << ": " << mode << " mode needs a floating-point tensor, got " << x->dtype().str();
  const ir::DataType f32 = ir::kFloat32;
  const ir::DataType i32 = ir::DataType::Int(32);
  std::vector<Expr> shape = exprs(out_shape);
  // The source coordinate (float) of output index i along axis d.
  auto source = [&](size_t d, const Expr& i) -> Expr {
    const Expr fi = ir::cast(f32, i);
    const Expr half = ir::make_const(f32, 0.5);
    const Expr s = ir::make_const(f32, static_cast<double>(scales[d]));
    if (coord == "asymmetric") return fi / s;
    // ONNX measures the resized length as in * scale (not rounded to the output size).
    const double length = static_cast<double>(in[d]) * static_cast<double>(scales[d]);
    if (coord == "align_corners") {
      if (out_shape[d] <= 1 || length == 1.0) return ir::make_const(f32, 0.0);
      return fi * ir::make_const(f32, static_cast<double>(in[d] - 1)) /
             ir::make_const(f32, length - 1.0);
    }
    if (coord == "tf_half_pixel_for_nearest") return (fi + half) / s;
    if (coord == "pytorch_half_pixel" && length <= 1.0) return ir::make_const(f32, 0.0);
    KILN_USER_CHECK(coord == "half_pixel" || coord == "pytorch_half_pixel")
        << name << ": coordinate_transformation_mode '" << coord << "' is not supported";
    return (fi + half) / s - half;
  };
  auto clamp = [&](Expr v, size_t d) {
    return ir::max(ir::min(v, int_expr(in[d] - 1)), ir::make_zero(i32));
  };
  // Axes where the output index is the input index.
  std::vector<bool> identity(in.size());
  for (size_t d = 0; d < in.size(); ++d) identity[d] = in[d] == out_shape[d] && scales[d] == 1.0f;
  if (mode == "nearest") {
    return te::compute(
        shape,
        [&](const std::vector<Var>& i) {
          std::vector<Expr> idx;
          for (size_t d = 0; d < in.size(); ++d) {
            if (identity[d]) {
              idx.push_back(i[d]);
              continue;
            }
            Expr c = source(d, i[d]);
            const Expr half = ir::make_const(f32, 0.5);
            Expr r;
            if (nearest_mode == "floor") {
              r = ir::floor(c);
            } else if (nearest_mode == "ceil") {
              r = ir::ceil(c);
            } else if (nearest_mode == "round_prefer_ceil") {
              r = ir::floor(c + half);
            } else {
              KILN_USER_CHECK(nearest_mode == "round_prefer_floor")
                  << name << ": nearest_mode '" << nearest_mode << "' is not supported";
              r = ir::ceil(c - half);
            }
            idx.push_back(clamp(ir::cast(i32, r), d));
          }
          return x(idx);
        },
        name);
  }
  // Linear and cubic: separable, one pass per resized axis, innermost first. The 2^k-neighbour sum
  // of one pass would gather 2^k elements per output; axis by axis, only the innermost pass gathers
  // (on an input-sized tensor when upsampling), and every outer pass reads whole rows at one
  // source index per vector (contiguous loads). The weights are those of the 2^k sum, applied
  // one factor at a time. The passes but the last are named NAME.axisD (schedule_resize_x86).
  std::vector<size_t> axes;
  for (size_t d = in.size(); d-- > 0;) {
    if (!identity[d]) axes.push_back(d);
  }
  if (axes.empty()) {
    return te::compute(
        shape, [&](const std::vector<Var>& i) { return x(std::vector<Expr>(i.begin(), i.end())); },
        name);
  }
  te::Tensor cur = x;
  std::vector<int64_t> cur_shape = in;
  for (size_t a = 0; a < axes.size(); ++a) {
    const size_t d = axes[a];
    const bool last = a + 1 == axes.size();
    cur_shape[d] = out_shape[d];
    const te::Tensor src = cur;
    cur = te::compute(
        exprs(cur_shape),
        [&](const std::vector<Var>& i) {
          Expr c = source(d, i[d]);
          Expr fl = ir::floor(c);
          Expr i0 = ir::cast(i32, fl);
          Expr w = c - fl;
          auto at = [&](int k) {
            std::vector<Expr> idx(i.begin(), i.end());
            idx[d] = clamp(i0 + Expr(k), d);
            return ir::cast(f32, src(idx));
          };
          if (mode == "linear") {
            Expr v = at(0) * (ir::make_const(f32, 1.0) - w) + at(1) * w;
            return last ? ir::cast(x->dtype(), v) : v;
          }
          // Keys' cubic kernel at the distance of each of the 4 neighbours i0-1 .. i0+2.
          const Expr A = ir::make_const(f32, method.cubic_a), one = ir::make_const(f32, 1.0);
          auto near = [&](Expr s) {
            return ((A + 2.0f) * s - (A + 3.0f)) * s * s + one;
          };  // |s| <= 1
          auto far = [&](Expr s) {
            return ((A * s - A * 5.0f) * s + A * 8.0f) * s - A * 4.0f;
          };  // 1 < |s| < 2
          Expr wk[4] = {far(w + one), near(w), near(one - w), far(ir::make_const(f32, 2.0) - w)};
          if (method.exclude_outside) {
            Expr total;
            for (int k = 0; k < 4; ++k) {
              Expr inside = (i0 + Expr(k - 1) >= 0) && (i0 + Expr(k - 1) <= int_expr(in[d] - 1));
              wk[k] = ir::select(inside, wk[k], ir::make_zero(f32));
              total = total.defined() ? total + wk[k] : wk[k];
            }
            for (int k = 0; k < 4; ++k) wk[k] = wk[k] / total;
          }
          Expr v;
          for (int k = 0; k < 4; ++k) v = v.defined() ? v + at(k - 1) * wk[k] : at(k - 1) * wk[k];
          return last ? ir::cast(x->dtype(), v) : v;
        },
        last ? name : name + ".axis" + std::to_string(d));
  }
  return cur;
}

void schedule_resize_x86(te::Schedule& s, const te::Tensor& out) {
  // The linear passes before the last: each computed whole, vectorized and in parallel.
  std::vector<te::Tensor> todo{out};
  while (!todo.empty()) {
    te::Tensor t = todo.back();
    todo.pop_back();
    for (const te::Tensor& in : t->inputs()) {
      if (in->name().rfind(out->name() + ".axis", 0) != 0) continue;
      schedule_injective_x86(s, in);
      todo.push_back(in);
    }
  }
}

}  // namespace kiln::topi
