// Workloads: the table of tunable computes (their arguments, attributes, checks and how each is
// called), the canonical JSON text both ways, and the checks that stand between text from the
// network and the operator library.
#include "compiler/topi/workload.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <set>

#include "base/error.h"
#include "base/json.h"
#include "base/shape_string.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_bf16.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/conv2d_winograd.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/dense_int8.h"
#include "compiler/topi/pooling.h"
#include "compiler/topi/vdla_conv2d.h"

namespace kiln::topi {
namespace {

using kiln::Json;

constexpr const char* kWorkloadAttr = "workload";
/// The most elements of any tensor or stage, and the largest dim and attribute: shapes and
/// indices of the loop IR are int32.
constexpr int64_t kMaxElements = std::numeric_limits<int32_t>::max();
constexpr int64_t kMaxValue = std::numeric_limits<int32_t>::max();

enum class AttrKind : uint8_t { kInt, kBool, kInts };

struct AttrDef {
  const char* name;
  AttrKind kind;
  size_t length = 0;  ///< kInts: the list's length
  int64_t min = 0;    ///< kInt, kInts: the smallest value (each value at most kMaxValue)
};

struct InputDef {
  const char* name;  ///< the placeholder's name, and the argument's in messages
  std::vector<size_t> ranks;
  /// The dtype the argument must have; unset: inputs[0]'s (and inputs[0] any numeric dtype).
  std::optional<ir::DataType> dtype = std::nullopt;
  /// The values a seeded input of an integer dtype takes (input_ranges); unset: its dtype's.
  std::optional<runtime::ValueRange> range = std::nullopt;
};

/// Reads a checked workload's fields by name, for the consistency checks and the calls.
class Fields {
 public:
  explicit Fields(const Workload& w) : w_(w) {}
  int64_t dim(size_t input, size_t d) const { return w_.inputs[input].shape[d]; }
  int64_t i(const char* a) const { return std::get<int64_t>(w_.attrs.at(a)); }
  bool flag(const char* a) const { return std::get<bool>(w_.attrs.at(a)); }
  const std::vector<int64_t>& ints(const char* a) const {
    return std::get<std::vector<int64_t>>(w_.attrs.at(a));
  }
  int64_t at(const char* a, size_t k) const { return ints(a)[k]; }
  Ints2 ints2(const char* a) const { return {int(at(a, 0)), int(at(a, 1))}; }
  Ints4 ints4(const char* a) const {
    return {int(at(a, 0)), int(at(a, 1)), int(at(a, 2)), int(at(a, 3))};
  }
  const Workload& workload() const { return w_; }

 private:
  const Workload& w_;
};

std::string where(const Workload& w) { return "workload '" + w.compute + "': "; }

std::string shape_field(size_t input, size_t d) {
  return "inputs[" + std::to_string(input) + "].shape[" + std::to_string(d) + "]";
}

std::string attr_field(const char* a, size_t k) {
  return std::string("attrs.") + a + "[" + std::to_string(k) + "]";
}

/// a + b and a * b; kiln::Error naming `what` when they leave int64.
int64_t add(const Workload& w, int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  KILN_USER_CHECK(!__builtin_add_overflow(a, b, &r)) << where(w) << what << " overflows";
  return r;
}
int64_t mul(const Workload& w, int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  KILN_USER_CHECK(!__builtin_mul_overflow(a, b, &r)) << where(w) << what << " overflows";
  return r;
}

/// Checks that a tensor or stage of `shape` has at most kMaxElements elements.
void check_elements(const Workload& w, const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    KILN_USER_CHECK(d > 0 && !__builtin_mul_overflow(n, d, &n) && n <= kMaxElements)
        << where(w) << what << " " << shape_string(shape) << " has more than " << kMaxElements
        << " elements";
  }
}

/// The output extent of a convolution along input dimension `dim` (2 or 3), checked: the input
/// padded by pads must hold the kernel's extent (k - 1) * dilation + 1, whose size `k` is
/// kernel field `k_field`.
int64_t conv_out(const Fields& f, size_t dim, int64_t k, const std::string& k_field) {
  const Workload& w = f.workload();
  const size_t a = dim - 2;  // the index into strides, dilations and pads
  const int64_t dil = f.at("dilations", a), in = f.dim(0, dim);
  const int64_t p0 = f.at("pads", a), p1 = f.at("pads", a + 2);
  const int64_t extent =
      add(w, mul(w, k - 1, dil, "the kernel's extent"), 1, "the kernel's extent");
  const int64_t padded = in + p0 + p1;  // each at most kMaxValue
  KILN_USER_CHECK(padded >= extent)
      << where(w) << "the kernel " << k_field << " = " << k << " at " << attr_field("dilations", a)
      << " = " << dil << " spans " << extent << ", more than " << shape_field(0, dim) << " = " << in
      << " padded by " << attr_field("pads", a) << " + " << attr_field("pads", a + 2) << " = " << p0
      << " + " << p1;
  return (padded - extent) / f.at("strides", a) + 1;
}

/// Checks that input `i`'s dimension `d` equals `want` (described by `want_what`).
void expect_dim(const Fields& f, size_t i, size_t d, int64_t want, const std::string& want_what) {
  KILN_USER_CHECK(f.dim(i, d) == want)
      << where(f.workload()) << shape_field(i, d) << " = " << f.dim(i, d) << " must equal "
      << want_what << " = " << want;
}

/// The padded data of a convolution or pooling (its "<name>.pad" stage), checked for size.
void check_padded(const Fields& f) {
  const Workload& w = f.workload();
  std::vector<int64_t> shape = w.inputs[0].shape;
  for (size_t a = 0; a < 2; ++a) {
    shape[2 + a] = add(w, add(w, shape[2 + a], f.at("pads", a), "the padded input"),
                       f.at("pads", a + 2), "the padded input");
  }
  check_elements(w, shape, "the padded input");
}

void check_conv2d_nchw(const Fields& f) {
  const Workload& w = f.workload();
  const int64_t c = f.dim(0, 1), o = f.dim(1, 0), g = f.i("groups");
  KILN_USER_CHECK(c % g == 0) << where(w) << shape_field(0, 1) << " = " << c
                              << " (input channels) is not a multiple of attrs.groups = " << g;
  KILN_USER_CHECK(o % g == 0) << where(w) << shape_field(1, 0) << " = " << o
                              << " (output channels) is not a multiple of attrs.groups = " << g;
  expect_dim(f, 1, 1, c / g, shape_field(0, 1) + " / attrs.groups (input channels per group)");
  const int64_t oh = conv_out(f, 2, f.dim(1, 2), shape_field(1, 2));
  const int64_t ow = conv_out(f, 3, f.dim(1, 3), shape_field(1, 3));
  check_padded(f);
  check_elements(w, {f.dim(0, 0), o, oh, ow}, "the output");
}

void check_conv2d_nchwc(const Fields& f) {
  expect_dim(f, 1, 1, f.dim(0, 1), shape_field(0, 1) + " (input channel blocks)");
  expect_dim(f, 1, 4, f.dim(0, 4), shape_field(0, 4) + " (input channels per block)");
  const int64_t oh = conv_out(f, 2, f.dim(1, 2), shape_field(1, 2));
  const int64_t ow = conv_out(f, 3, f.dim(1, 3), shape_field(1, 3));
  check_padded(f);
  check_elements(f.workload(), {f.dim(0, 0), f.dim(1, 0), oh, ow, f.dim(1, 5)}, "the output");
}

/// conv2d_nchwc_winograd: kernel [alpha, alpha, OB, C, ob] (alpha = tile + 2) over data
/// [N, C/cb, H, W, cb], a 3x3 of stride 1.
void check_conv2d_nchwc_winograd(const Fields& f) {
  const Workload& w = f.workload();
  const int64_t m = f.i("tile");
  KILN_USER_CHECK(winograd_tile_supported(static_cast<int>(m)))
      << where(w) << "attrs.tile = " << m << " is not a supported output tile (2 or 4)";
  expect_dim(f, 1, 0, m + 2, "attrs.tile + 2 (the transformed tile)");
  expect_dim(f, 1, 1, m + 2, "attrs.tile + 2 (the transformed tile)");
  expect_dim(f, 1, 3, mul(w, f.dim(0, 1), f.dim(0, 4), "the input channels"),
             shape_field(0, 1) + " * " + shape_field(0, 4) + " (input channels)");
  int64_t out[2];
  for (size_t a = 0; a < 2; ++a) {
    const int64_t padded = f.dim(0, 2 + a) + f.at("pads", a) + f.at("pads", a + 2);
    KILN_USER_CHECK(padded >= 3) << where(w) << shape_field(0, 2 + a) << " = " << f.dim(0, 2 + a)
                                 << " padded by " << attr_field("pads", a) << " + "
                                 << attr_field("pads", a + 2) << " is under the kernel's 3";
    out[a] = padded - 2;
  }
  const int64_t tiles = mul(w, mul(w, f.dim(0, 0), (out[0] + m - 1) / m, "the tiles"),
                            (out[1] + m - 1) / m, "the tiles");
  check_padded(f);
  check_elements(w,
                 {(out[0] + m - 1) / m * m + 2, (out[1] + m - 1) / m * m + 2, f.dim(0, 1),
                  f.dim(0, 0), f.dim(0, 4)},
                 "the input padded to whole tiles");
  check_elements(w, {m + 2, m + 2, f.dim(0, 1), tiles, f.dim(0, 4)}, "the transformed input");
  check_elements(w, {m + 2, m + 2, f.dim(1, 2), tiles, f.dim(1, 4)}, "the transformed output");
  check_elements(w, {f.dim(0, 0), f.dim(1, 2), out[0], out[1], f.dim(1, 4)}, "the output");
}

/// conv2d_nchwc's geometry with the kernel's block of input channels in pairs.
void check_conv2d_nchwc_bf16(const Fields& f) {
  const Workload& w = f.workload();
  expect_dim(f, 1, 1, f.dim(0, 1), shape_field(0, 1) + " (input channel blocks)");
  KILN_USER_CHECK(f.dim(0, 4) % 2 == 0)
      << where(w) << shape_field(0, 4) << " = " << f.dim(0, 4)
      << " (input channels per block) must be even: the kernel packs them in pairs";
  expect_dim(f, 1, 4, f.dim(0, 4) / 2, shape_field(0, 4) + " / 2 (input channel pairs per block)");
  const int64_t oh = conv_out(f, 2, f.dim(1, 2), shape_field(1, 2));
  const int64_t ow = conv_out(f, 3, f.dim(1, 3), shape_field(1, 3));
  check_padded(f);
  check_elements(w, {f.dim(0, 0), f.dim(1, 0), oh, ow, f.dim(1, 5)}, "the output");
}

/// conv2d_nchwc_int8: kernel [OC/16, C/cb, KH, KW, cb/4, 16, 4] over data [N, C/cb, H, W, cb].
void check_conv2d_nchwc_int8(const Fields& f) {
  const Workload& w = f.workload();
  expect_dim(f, 1, 1, f.dim(0, 1), shape_field(0, 1) + " (input channel blocks)");
  KILN_USER_CHECK(f.dim(0, 4) % 4 == 0) << where(w) << shape_field(0, 4) << " = " << f.dim(0, 4)
                                        << " (input channels per block) is not a multiple of 4";
  expect_dim(f, 1, 4, f.dim(0, 4) / 4, shape_field(0, 4) + " / 4 (groups of 4 input channels)");
  expect_dim(f, 1, 5, 16, "16 (output channels per block)");
  expect_dim(f, 1, 6, 4, "4 (input channels per group)");
  KILN_USER_CHECK(f.i("pad_value") <= 255)
      << where(w) << "attrs.pad_value = " << f.i("pad_value") << " is not a uint8";
  const int64_t oh = conv_out(f, 2, f.dim(1, 2), shape_field(1, 2));
  const int64_t ow = conv_out(f, 3, f.dim(1, 3), shape_field(1, 3));
  check_padded(f);
  check_elements(w, {f.dim(0, 0), f.dim(1, 0), oh, ow, 16}, "the output");
}

void check_group_conv2d_nchwc(const Fields& f) {
  const Workload& w = f.workload();
  const int64_t cb = f.dim(0, 1), ob = f.dim(1, 0), g = f.i("groups");
  KILN_USER_CHECK(cb % g == 0) << where(w) << shape_field(0, 1) << " = " << cb
                               << " (input channel blocks) is not a multiple of attrs.groups = "
                               << g;
  KILN_USER_CHECK(ob % g == 0) << where(w) << shape_field(1, 0) << " = " << ob
                               << " (output channel blocks) is not a multiple of attrs.groups = "
                               << g;
  expect_dim(f, 1, 1, cb / g,
             shape_field(0, 1) + " / attrs.groups (input channel blocks per group)");
  expect_dim(f, 1, 4, f.dim(0, 4), shape_field(0, 4) + " (input channels per block)");
  const int64_t oh = conv_out(f, 2, f.dim(1, 2), shape_field(1, 2));
  const int64_t ow = conv_out(f, 3, f.dim(1, 3), shape_field(1, 3));
  check_padded(f);
  check_elements(w, {f.dim(0, 0), ob, oh, ow, f.dim(1, 5)}, "the output");
}

void check_depthwise_conv2d_nchwc(const Fields& f) {
  expect_dim(f, 1, 0, f.dim(0, 1), shape_field(0, 1) + " (channel blocks)");
  expect_dim(f, 1, 1, 1, "1 (a depthwise kernel's input channel blocks)");
  expect_dim(f, 1, 4, 1, "1 (a depthwise kernel's input channels per block)");
  expect_dim(f, 1, 5, f.dim(0, 4), shape_field(0, 4) + " (channels per block)");
  const int64_t oh = conv_out(f, 2, f.dim(1, 2), shape_field(1, 2));
  const int64_t ow = conv_out(f, 3, f.dim(1, 3), shape_field(1, 3));
  check_padded(f);
  check_elements(f.workload(), {f.dim(0, 0), f.dim(0, 1), oh, ow, f.dim(0, 4)}, "the output");
}

void check_depthwise_conv2d_nchwc_int8(const Fields& f) {
  KILN_USER_CHECK(f.i("pad_value") <= 255)
      << where(f.workload()) << "attrs.pad_value = " << f.i("pad_value") << " is not a uint8";
  check_depthwise_conv2d_nchwc(f);
}

/// Transposed convolutions: `kernel` is the unpacked kernel's [C, M/groups, KH, KW] and
/// `kernel_field(k)` names its entries.
void check_transpose_geometry(const Fields& f, const std::vector<int64_t>& kernel,
                              const std::function<std::string(size_t)>& kernel_field) {
  const Workload& w = f.workload();
  const int64_t c = f.dim(0, 1), g = f.i("groups");
  KILN_USER_CHECK(kernel[0] == c) << where(w) << kernel_field(0) << " = " << kernel[0]
                                  << " must equal " << shape_field(0, 1)
                                  << " (input channels) = " << c;
  KILN_USER_CHECK(c % g == 0) << where(w) << shape_field(0, 1) << " = " << c
                              << " (input channels) is not a multiple of attrs.groups = " << g;
  std::vector<int64_t> out{f.dim(0, 0), mul(w, kernel[1], g, "the output channels"), 0, 0};
  for (size_t a = 0; a < 2; ++a) {
    const int64_t s = f.at("strides", a), d = f.at("dilations", a), op = f.at("output_padding", a);
    KILN_USER_CHECK(op < std::max(s, d))
        << where(w) << attr_field("output_padding", a) << " = " << op
        << " must be smaller than attrs.strides[" << a << "] = " << s << " or attrs.dilations[" << a
        << "] = " << d;
    // stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pad0 - pad1
    int64_t o = mul(w, s, f.dim(0, 2 + a) - 1, "the output extent");
    o = add(w, o, op + 1, "the output extent");
    o = add(w, o, mul(w, kernel[2 + a] - 1, d, "the output extent"), "the output extent");
    o -= f.at("pads", a) + f.at("pads", a + 2);
    KILN_USER_CHECK(o > 0) << where(w) << "attrs.pads " << attr_field("pads", a) << " + "
                           << attr_field("pads", a + 2) << " = " << f.at("pads", a) << " + "
                           << f.at("pads", a + 2) << " remove the whole output";
    out[2 + a] = o;
  }
  const int64_t columns = mul(w, out[1], mul(w, kernel[2], kernel[3], "the kernel"), "the columns");
  check_elements(w, {f.dim(0, 0), f.dim(0, 2), f.dim(0, 3), columns}, "the column stage");
  check_elements(w, out, "the output");
}

void check_conv2d_transpose_nchw(const Fields& f) {
  check_transpose_geometry(f, f.workload().inputs[1].shape,
                           [](size_t k) { return shape_field(1, k); });
}

void check_conv2d_transpose_nchw_packed(const Fields& f) {
  const Workload& w = f.workload();
  const std::vector<int64_t>& k = f.ints("kernel_shape");
  check_transpose_geometry(f, k, [](size_t i) { return attr_field("kernel_shape", i); });
  const int64_t g = f.i("groups");
  const int64_t per_group = mul(w, k[1], mul(w, k[2], k[3], "the kernel"), "the kernel");
  const int64_t bf = f.dim(1, 2);
  KILN_USER_CHECK(per_group % bf == 0)
      << where(w) << shape_field(1, 2) << " = " << bf << " (the panel) must divide "
      << "attrs.kernel_shape[1] * [2] * [3] = " << per_group;
  expect_dim(f, 1, 0, mul(w, per_group, g, "the kernel") / bf,
             "the columns attrs.kernel_shape[1] * [2] * [3] * attrs.groups / the panel");
  expect_dim(f, 1, 1, f.dim(0, 1) / g, shape_field(0, 1) + " / attrs.groups");
}

void check_dense(const Fields& f) {
  const bool ta = f.flag("trans_a"), tb = f.flag("trans_b");
  const size_t xk = ta ? 0 : 1, wk = tb ? 1 : 0;
  expect_dim(f, 1, wk, f.dim(0, xk), shape_field(0, xk) + " (the reduction)");
  check_elements(f.workload(), {f.dim(0, ta ? 1 : 0), f.dim(1, tb ? 0 : 1)}, "the output");
}

void check_dense_packed(const Fields& f) {
  const Workload& w = f.workload();
  expect_dim(f, 1, 1, f.dim(0, 1), shape_field(0, 1) + " (the reduction)");
  const int64_t n = f.i("n"), cover = f.dim(1, 0) * f.dim(1, 2);  // <= kMaxElements
  KILN_USER_CHECK(cover >= n) << where(w) << "attrs.n = " << n << " columns are more than "
                              << shape_field(1, 0) << " * " << shape_field(1, 2) << " = " << cover
                              << " packed";
  check_elements(w, {f.dim(0, 0), n}, "the output");
}

/// dense_packed's with the reduction in pairs (an odd K's last pair half zero).
void check_dense_packed_bf16(const Fields& f) {
  const Workload& w = f.workload();
  expect_dim(f, 1, 1, (f.dim(0, 1) + 1) / 2, "(" + shape_field(0, 1) + " + 1) / 2 (the pairs)");
  const int64_t n = f.i("n"), cover = f.dim(1, 0) * f.dim(1, 2);  // <= kMaxElements
  KILN_USER_CHECK(cover >= n) << where(w) << "attrs.n = " << n << " columns are more than "
                              << shape_field(1, 0) << " * " << shape_field(1, 2) << " = " << cover
                              << " packed";
  check_elements(w, {f.dim(0, 0), n}, "the output");
}

/// dense_int8: x [(B,) M, K] by a weight packed [N/16, K/4, 16, 4].
void check_dense_int8(const Fields& f) {
  const Workload& w = f.workload();
  const size_t k_dim = w.inputs[0].shape.size() - 1;
  expect_dim(f, 1, 2, 16, "16 (columns per block)");
  expect_dim(f, 1, 3, 4, "4 (reduction steps per group)");
  KILN_USER_CHECK(f.dim(0, k_dim) == 4 * f.dim(1, 1))
      << where(w) << shape_field(0, k_dim) << " = " << f.dim(0, k_dim)
      << " (the reduction) differs from 4 * " << shape_field(1, 1) << " = " << 4 * f.dim(1, 1);
  std::vector<int64_t> out(w.inputs[0].shape.begin(), w.inputs[0].shape.end() - 1);
  out.insert(out.end(), {f.dim(1, 0), 16});
  check_elements(w, out, "the output");
}

void check_batch_matmul(const Fields& f) {
  const Workload& w = f.workload();
  const bool ta = f.flag("trans_a"), tb = f.flag("trans_b");
  const int64_t ba = f.dim(0, 0), bb = f.dim(1, 0);
  KILN_USER_CHECK(ba == bb || ba == 1 || bb == 1)
      << where(w) << "the batches " << shape_field(0, 0) << " = " << ba << " and "
      << shape_field(1, 0) << " = " << bb << " do not broadcast";
  const size_t ak = ta ? 1 : 2, bk = tb ? 2 : 1;
  expect_dim(f, 1, bk, f.dim(0, ak), shape_field(0, ak) + " (the reduction)");
  check_elements(w, {std::max(ba, bb), f.dim(0, ta ? 2 : 1), f.dim(1, tb ? 1 : 2)}, "the output");
}

void check_pool2d(const Fields& f) {
  const Workload& w = f.workload();
  std::vector<int64_t> grown = w.inputs[0].shape;
  for (size_t a = 0; a < 2; ++a) {
    const int64_t k = f.at("kernel_shape", a), s = f.at("strides", a), in = f.dim(0, 2 + a);
    const int64_t p0 = f.at("pads", a), p1 = f.at("pads", a + 2);
    for (size_t p : {a, a + 2}) {
      KILN_USER_CHECK(f.at("pads", p) < k)
          << where(w) << attr_field("pads", p) << " = " << f.at("pads", p)
          << " must be smaller than " << attr_field("kernel_shape", a) << " = " << k;
    }
    // As the compute counts windows (ONNX's rule): with ceil_mode the last window must start
    // inside the input or its leading padding.
    const int64_t span = in + p0 + p1 - k;
    int64_t o = (f.flag("ceil_mode") ? (span + s - 1) / s : span / s) + 1;
    if (f.flag("ceil_mode") && (o - 1) * s >= in + p0) --o;
    KILN_USER_CHECK(o > 0) << where(w) << "the window " << attr_field("kernel_shape", a) << " = "
                           << k << " is larger than " << shape_field(0, 2 + a) << " = " << in
                           << " padded by " << p0 << " + " << p1;
    grown[2 + a] = in + p0 + p1 + s;  // the padding ceil_mode grows, bounded by a stride
  }
  check_elements(w, grown, "the padded input");
}

/// vdla_conv2d: blocks of 16 channels (data [IC/16][H][W][1][16], kernel
/// [OC/16][IC/16][K][K][16][16], bias and shift [OC/16][1][16]), a square kernel that fits the
/// padded input.
void check_vdla_conv2d(const Fields& f) {
  expect_dim(f, 0, 3, 1, "the batch of one");
  expect_dim(f, 0, 4, 16, "the channel block");
  expect_dim(f, 1, 1, f.dim(0, 0), shape_field(0, 0) + " (input channel blocks)");
  expect_dim(f, 1, 3, f.dim(1, 2), shape_field(1, 2) + " (a square kernel)");
  expect_dim(f, 1, 4, 16, "the channel block");
  expect_dim(f, 1, 5, 16, "the channel block");
  for (size_t i : {2, 3}) {
    expect_dim(f, i, 0, f.dim(1, 0), shape_field(1, 0) + " (output channel blocks)");
    expect_dim(f, i, 1, 1, "the batch of one");
    expect_dim(f, i, 2, 16, "the channel block");
  }
  const Workload& w = f.workload();
  const int64_t k = f.dim(1, 2), pad = f.i("pad"), stride = f.i("stride");
  for (size_t d : {1, 2}) {
    const int64_t padded =
        add(w, f.dim(0, d), mul(w, 2, pad, "the padded input"), "the padded input");
    KILN_USER_CHECK(padded >= k) << where(w) << "the kernel " << shape_field(1, 2) << " = " << k
                                 << " is larger than " << shape_field(0, d) << " = " << f.dim(0, d)
                                 << " padded by 2 * attrs.pad = " << 2 * pad;
  }
  check_elements(w, {f.dim(0, 0), f.dim(0, 1) + 2 * pad, f.dim(0, 2) + 2 * pad, 1, 16},
                 "the padded input");
  check_elements(w,
                 {f.dim(1, 0), (f.dim(0, 1) + 2 * pad - k) / stride + 1,
                  (f.dim(0, 2) + 2 * pad - k) / stride + 1, 1, 16},
                 "the output");
}

void check_nothing(const Fields&) {}

struct ComputeDef {
  const char* name;
  std::vector<InputDef> inputs;
  std::vector<AttrDef> attrs;
  std::function<void(const Fields&)> check;
  std::function<te::Tensor(const std::vector<te::Tensor>&, const Fields&)> call;
};

const AttrDef kStrides{"strides", AttrKind::kInts, 2, 1};
const AttrDef kPads{"pads", AttrKind::kInts, 4, 0};
const AttrDef kDilations{"dilations", AttrKind::kInts, 2, 1};
const AttrDef kGroups{"groups", AttrKind::kInt, 0, 1};
const AttrDef kOutputPadding{"output_padding", AttrKind::kInts, 2, 0};
const AttrDef kTransA{"trans_a", AttrKind::kBool};
const AttrDef kTransB{"trans_b", AttrKind::kBool};
const AttrDef kPoolKernel{"kernel_shape", AttrKind::kInts, 2, 1};
const AttrDef kCeilMode{"ceil_mode", AttrKind::kBool};

/// Seeded bf16 pairs: both halves finite, the upper 0.5 and the lower in [0.5, 1) (random int32
/// bits would hold NaNs, which no reference matches).
const runtime::ValueRange kBf16Pairs{0x3f003f00, 0x3f003f7f};

const std::vector<ComputeDef>& compute_defs() {
  static const std::vector<ComputeDef> defs = {
      {"conv2d_nchw",
       {{"data", {4}}, {"kernel", {4}}},
       {kDilations, kGroups, kPads, kStrides},
       check_conv2d_nchw,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_nchw(in[0], in[1], f.ints2("strides"), f.ints4("pads"), f.ints2("dilations"),
                            int(f.i("groups")));
       }},
      {"conv2d_nchwc",
       {{"data", {5}}, {"kernel", {6}}},
       {kDilations, kPads, kStrides},
       check_conv2d_nchwc,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_nchwc(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                             f.ints2("dilations"));
       }},
      {"conv2d_nchwc_bf16",
       {{"data", {5}, ir::kFloat32}, {"kernel", {6}, ir::kInt32, kBf16Pairs}},
       {kDilations, kPads, kStrides},
       check_conv2d_nchwc_bf16,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_nchwc_bf16(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                                  f.ints2("dilations"));
       }},
      {"conv2d_nchwc_winograd",
       {{"data", {5}}, {"kernel", {5}}},
       {kPads, {"tile", AttrKind::kInt, 0, 2}},
       check_conv2d_nchwc_winograd,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_nchwc_winograd(in[0], in[1], f.ints4("pads"), int(f.i("tile")));
       }},
      {"conv2d_nchwc_int8",
       {{"data", {5}, ir::DataType::UInt(8)}, {"kernel", {7}, ir::kInt8}},
       {kDilations, {"pad_value", AttrKind::kInt, 0, 0}, kPads, kStrides},
       check_conv2d_nchwc_int8,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_nchwc_int8(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                                  f.ints2("dilations"), int(f.i("pad_value")));
       }},
      {"group_conv2d_nchwc",
       {{"data", {5}}, {"kernel", {6}}},
       {kDilations, kGroups, kPads, kStrides},
       check_group_conv2d_nchwc,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return group_conv2d_nchwc(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                                   f.ints2("dilations"), int(f.i("groups")));
       }},
      {"depthwise_conv2d_nchwc",
       {{"data", {5}}, {"kernel", {6}}},
       {kDilations, kPads, kStrides},
       check_depthwise_conv2d_nchwc,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return depthwise_conv2d_nchwc(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                                       f.ints2("dilations"));
       }},
      {"depthwise_conv2d_nchwc_int8",
       {{"data", {5}, ir::DataType::UInt(8)}, {"kernel", {6}, ir::kInt8}},
       {kDilations, {"pad_value", AttrKind::kInt, 0, 0}, kPads, kStrides},
       check_depthwise_conv2d_nchwc_int8,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return depthwise_conv2d_nchwc_int8(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                                            f.ints2("dilations"), int(f.i("pad_value")));
       }},
      {"conv2d_transpose_nchw",
       {{"data", {4}}, {"kernel", {4}}},
       {kDilations, kGroups, kOutputPadding, kPads, kStrides},
       check_conv2d_transpose_nchw,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_transpose_nchw(in[0], in[1], f.ints2("strides"), f.ints4("pads"),
                                      f.ints2("output_padding"), f.ints2("dilations"),
                                      int(f.i("groups")));
       }},
      {"conv2d_transpose_nchw_packed",
       {{"data", {4}}, {"packed", {3}}},
       {kDilations,
        kGroups,
        {"kernel_shape", AttrKind::kInts, 4, 1},
        kOutputPadding,
        kPads,
        kStrides},
       check_conv2d_transpose_nchw_packed,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return conv2d_transpose_nchw_packed(
             in[0], in[1], f.ints4("kernel_shape"), f.ints2("strides"), f.ints4("pads"),
             f.ints2("output_padding"), f.ints2("dilations"), int(f.i("groups")));
       }},
      {"dense",
       {{"x", {2}}, {"w", {2}}},
       {kTransA, kTransB},
       check_dense,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return dense(in[0], in[1], f.flag("trans_a"), f.flag("trans_b"));
       }},
      {"dense_packed",
       {{"x", {2}}, {"packed", {3}}},
       {{"n", AttrKind::kInt, 0, 1}},
       check_dense_packed,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return dense_packed(in[0], in[1], f.i("n"));
       }},
      {"dense_packed_bf16",
       {{"x", {2}, ir::kFloat32}, {"packed", {3}, ir::kInt32, kBf16Pairs}},
       {{"n", AttrKind::kInt, 0, 1}},
       check_dense_packed_bf16,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return dense_packed_bf16(in[0], in[1], f.i("n"));
       }},
      {"dense_int8",
       {{"x", {2, 3}, ir::DataType::UInt(8)}, {"packed", {4}, ir::kInt8}},
       {},
       check_dense_int8,
       [](const std::vector<te::Tensor>& in, const Fields&) { return dense_int8(in[0], in[1]); }},
      {"batch_matmul",
       {{"a", {3}}, {"b", {3}}},
       {kTransA, kTransB},
       check_batch_matmul,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return batch_matmul(in[0], in[1], f.flag("trans_a"), f.flag("trans_b"));
       }},
      {"max_pool2d",
       {{"data", {4, 5}}},
       {kCeilMode, kPoolKernel, kPads, kStrides},
       check_pool2d,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return max_pool2d(in[0], f.ints2("kernel_shape"), f.ints2("strides"), f.ints4("pads"),
                           f.flag("ceil_mode"));
       }},
      {"avg_pool2d",
       {{"data", {4, 5}}},
       {kCeilMode, {"count_include_pad", AttrKind::kBool}, kPoolKernel, kPads, kStrides},
       check_pool2d,
       [](const std::vector<te::Tensor>& in, const Fields& f) {
         return avg_pool2d(in[0], f.ints2("kernel_shape"), f.ints2("strides"), f.ints4("pads"),
                           f.flag("ceil_mode"), f.flag("count_include_pad"));
       }},
      {"global_max_pool2d",
       {{"data", {4, 5}}},
       {},
       check_nothing,
       [](const std::vector<te::Tensor>& in, const Fields&) { return global_max_pool2d(in[0]); }},
      {"global_avg_pool2d",
       {{"data", {4, 5}}},
       {},
       check_nothing,
       [](const std::vector<te::Tensor>& in, const Fields&) { return global_avg_pool2d(in[0]); }},
      // The VDLA's int8 convolution (vdla_conv2d.h): the values its seeded inputs take are what
      // QConv gives it (int8 activations and weights, biases rounded to int32, shifts in
      // [0, 31]); a bias of up to 2^18 is of the size of a conv's sum, so that the outputs
      // neither all saturate nor all vanish.
      {"vdla_conv2d",
       {{"data", {5}, ir::kInt8, runtime::ValueRange{-128, 127}},
        {"kernel", {6}, ir::kInt8, runtime::ValueRange{-128, 127}},
        {"bias", {3}, ir::kInt32, runtime::ValueRange{-(1 << 18), 1 << 18}},
        {"shift", {3}, ir::kInt32, runtime::ValueRange{0, 31}}},
       {{"pad", AttrKind::kInt, 0, 0}, {"relu", AttrKind::kBool}, {"stride", AttrKind::kInt, 0, 1}},
       check_vdla_conv2d,
       // The compute makes its own placeholders, named as the inputs here.
       [](const std::vector<te::Tensor>&, const Fields& f) {
         VdlaConv2dShape s;
         s.ic = int(f.dim(0, 0)) * 16;
         s.h = int(f.dim(0, 1));
         s.w = int(f.dim(0, 2));
         s.oc = int(f.dim(1, 0)) * 16;
         s.k = int(f.dim(1, 2));
         s.stride = int(f.i("stride"));
         s.pad = int(f.i("pad"));
         return vdla_conv2d(s, f.flag("relu")).out;
       }},
  };
  return defs;
}

const ComputeDef& compute_def(const std::string& name) {
  for (const ComputeDef& d : compute_defs()) {
    if (d.name == name) return d;
  }
  std::string known;
  for (const ComputeDef& d : compute_defs())
    known += (known.empty() ? "" : ", ") + std::string(d.name);
  KILN_USER_ERROR() << "workload: compute '" << name.substr(0, 40)
                    << "' is not a tunable compute (known: " << known << ")";
}

/// The dtypes a workload's tensors may have: the numeric scalar types.
const std::vector<ir::DataType>& workload_dtypes() {
  static const std::vector<ir::DataType> dtypes = {
      ir::DataType::Float(16), ir::DataType::Float(32), ir::DataType::Float(64),
      ir::DataType::Int(8),    ir::DataType::Int(16),   ir::DataType::Int(32),
      ir::DataType::Int(64),   ir::DataType::UInt(8),   ir::DataType::UInt(16),
      ir::DataType::UInt(32),  ir::DataType::UInt(64)};
  return dtypes;
}

std::string dtype_names() {
  std::string s;
  for (ir::DataType t : workload_dtypes()) s += (s.empty() ? "" : ", ") + t.str();
  return s;
}

void check_attr(const Workload& w, const AttrDef& def, const AttrValue& v) {
  const std::string field = std::string("attrs.") + def.name;
  auto check_range = [&](int64_t x, const std::string& f) {
    KILN_USER_CHECK(x >= def.min && x <= kMaxValue)
        << where(w) << f << " = " << x << " must be in [" << def.min << ", " << kMaxValue << "]";
  };
  switch (def.kind) {
    case AttrKind::kBool:
      KILN_USER_CHECK(std::holds_alternative<bool>(v))
          << where(w) << field << " must be true or false";
      return;
    case AttrKind::kInt:
      KILN_USER_CHECK(std::holds_alternative<int64_t>(v))
          << where(w) << field << " must be an integer";
      check_range(std::get<int64_t>(v), field);
      return;
    case AttrKind::kInts: {
      const auto* list = std::get_if<std::vector<int64_t>>(&v);
      KILN_USER_CHECK(list != nullptr && list->size() == def.length)
          << where(w) << field << " must be a list of " << def.length << " integers"
          << (list != nullptr ? ", got " + std::to_string(list->size()) : std::string());
      for (size_t k = 0; k < list->size(); ++k) check_range((*list)[k], attr_field(def.name, k));
      return;
    }
  }
}

Json to_json(const AttrValue& v) {
  if (const auto* b = std::get_if<bool>(&v)) return Json(*b);
  if (const auto* i = std::get_if<int64_t>(&v)) return Json(*i);
  Json::Array a;
  for (int64_t x : std::get<std::vector<int64_t>>(v)) a.emplace_back(x);
  return Json(std::move(a));
}

/// A short rendering of a JSON value for messages.
std::string show(const Json& j) {
  std::string s = j.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

/// Checks that object `o` (named `what`) has only the keys `allowed`.
void only_keys(const Json::Object& o, const std::set<std::string>& allowed,
               const std::string& what) {
  for (const auto& [key, value] : o) {
    std::string list;
    for (const std::string& k : allowed) list += (list.empty() ? "" : ", ") + k;
    KILN_USER_CHECK(allowed.count(key) != 0) << "workload: " << what << " has an unknown member '"
                                             << key.substr(0, 40) << "' (known: " << list << ")";
  }
}

int64_t int_of(const Json& j, const std::string& field) {
  try {
    return j.as_int(field);
  } catch (const Error&) {
    KILN_USER_ERROR() << "workload: " << field << " must be an integer, got " << show(j);
  }
}

AttrValue attr_of(const Json& j, const std::string& field) {
  if (j.is_array()) {
    std::vector<int64_t> v;
    const Json::Array& a = j.as_array(field);
    for (size_t k = 0; k < a.size(); ++k) {
      v.push_back(int_of(a[k], field + "[" + std::to_string(k) + "]"));
    }
    return v;
  }
  try {
    return j.as_int(field);
  } catch (const Error&) {
  }
  try {
    return j.as_bool(field);
  } catch (const Error&) {
    KILN_USER_ERROR() << "workload: " << field
                      << " must be an integer, true or false, or a list of integers, got "
                      << show(j);
  }
}

ir::DataType dtype_of(const Json& j, const std::string& field) {
  std::string name;
  try {
    name = j.as_string(field);
  } catch (const Error&) {
    KILN_USER_ERROR() << "workload: " << field << " must be a dtype name, got " << show(j);
  }
  for (ir::DataType t : workload_dtypes()) {
    if (t.str() == name) return t;
  }
  KILN_USER_ERROR() << "workload: " << field << " = '" << name.substr(0, 40)
                    << "' is not a dtype a workload takes (" << dtype_names() << ")";
}

}  // namespace

const std::vector<std::string>& workload_computes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const ComputeDef& d : compute_defs()) n.emplace_back(d.name);
    return n;
  }();
  return names;
}

void check_workload(const Workload& w) {
  const ComputeDef& def = compute_def(w.compute);
  KILN_USER_CHECK(w.inputs.size() == def.inputs.size())
      << where(w) << "takes " << def.inputs.size() << " inputs, got " << w.inputs.size();
  const ir::DataType dtype = w.inputs[0].dtype;
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    const TensorSpec& in = w.inputs[i];
    const std::string field = "inputs[" + std::to_string(i) + "]";
    const std::vector<size_t>& ranks = def.inputs[i].ranks;
    std::string rank_list;
    for (size_t r : ranks) rank_list += (rank_list.empty() ? "" : " or ") + std::to_string(r);
    KILN_USER_CHECK(std::find(ranks.begin(), ranks.end(), in.shape.size()) != ranks.end())
        << where(w) << field << " (" << def.inputs[i].name << ") must have " << rank_list
        << " dimensions, got " << in.shape.size();
    for (size_t d = 0; d < in.shape.size(); ++d) {
      KILN_USER_CHECK(in.shape[d] > 0 && in.shape[d] <= kMaxValue)
          << where(w) << shape_field(i, d) << " = " << in.shape[d] << " must be in [1, "
          << kMaxValue << "]";
    }
    check_elements(w, in.shape, field);
    const auto& dtypes = workload_dtypes();
    KILN_USER_CHECK(std::find(dtypes.begin(), dtypes.end(), in.dtype) != dtypes.end())
        << where(w) << field << ".dtype = " << in.dtype.str() << " is not one of " << dtype_names();
    if (const std::optional<ir::DataType>& want = def.inputs[i].dtype) {
      KILN_USER_CHECK(in.dtype == *want)
          << where(w) << field << " (" << def.inputs[i].name << ").dtype = " << in.dtype.str()
          << " must be " << want->str();
    } else {
      KILN_USER_CHECK(in.dtype == dtype) << where(w) << field << ".dtype = " << in.dtype.str()
                                         << " differs from inputs[0].dtype = " << dtype.str();
    }
  }
  std::set<std::string> names;
  for (const AttrDef& a : def.attrs) {
    names.insert(a.name);
    auto it = w.attrs.find(a.name);
    KILN_USER_CHECK(it != w.attrs.end()) << where(w) << "attrs." << a.name << " is missing";
    check_attr(w, a, it->second);
  }
  for (const auto& [name, value] : w.attrs) {
    KILN_USER_CHECK(names.count(name) != 0)
        << where(w) << "attrs." << name.substr(0, 40) << " is not an attribute of " << w.compute;
  }
  def.check(Fields(w));
}

std::string Workload::json() const {
  Json::Object attr_obj;
  for (const auto& [name, value] : attrs) attr_obj[name] = to_json(value);
  Json::Array ins;
  for (const TensorSpec& t : inputs) {
    Json::Array shape(t.shape.begin(), t.shape.end());
    ins.emplace_back(Json::Object{{"dtype", t.dtype.str()}, {"shape", std::move(shape)}});
  }
  return Json(Json::Object{
                  {"attrs", std::move(attr_obj)}, {"compute", compute}, {"inputs", std::move(ins)}})
      .dump();
}

Workload Workload::parse(const std::string& text) {
  const Json doc = Json::parse(text, "workload");
  KILN_USER_CHECK(doc.is_object()) << "workload: must be a JSON object, got " << show(doc);
  only_keys(doc.as_object("workload"), {"attrs", "compute", "inputs"}, "the workload");
  Workload w;
  const Json& compute = doc.at("compute", "workload");
  try {
    w.compute = compute.as_string("compute");
  } catch (const Error&) {
    KILN_USER_ERROR() << "workload: compute must be a string, got " << show(compute);
  }
  const Json& inputs = doc.at("inputs", "workload");
  KILN_USER_CHECK(inputs.is_array()) << "workload: inputs must be a list, got " << show(inputs);
  const Json::Array& ins = inputs.as_array("inputs");
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string field = "inputs[" + std::to_string(i) + "]";
    KILN_USER_CHECK(ins[i].is_object())
        << "workload: " << field << " must be an object, got " << show(ins[i]);
    only_keys(ins[i].as_object(field), {"dtype", "shape"}, field);
    const Json& shape = ins[i].at("shape", "workload: " + field);
    KILN_USER_CHECK(shape.is_array())
        << "workload: " << field << ".shape must be a list, got " << show(shape);
    TensorSpec t;
    const Json::Array& dims = shape.as_array(field);
    for (size_t d = 0; d < dims.size(); ++d) t.shape.push_back(int_of(dims[d], shape_field(i, d)));
    t.dtype = dtype_of(ins[i].at("dtype", "workload: " + field), field + ".dtype");
    w.inputs.push_back(std::move(t));
  }
  const Json& attrs = doc.at("attrs", "workload");
  KILN_USER_CHECK(attrs.is_object()) << "workload: attrs must be an object, got " << show(attrs);
  for (const auto& [name, value] : attrs.as_object("attrs")) {
    w.attrs[name] = attr_of(value, "attrs." + name.substr(0, 40));
  }
  check_workload(w);
  return w;
}

te::Tensor compute_from_workload(const Workload& w) {
  check_workload(w);
  const ComputeDef& def = compute_def(w.compute);
  std::vector<te::Tensor> in;
  for (size_t i = 0; i < w.inputs.size(); ++i) {
    std::vector<ir::Expr> shape;
    for (int64_t d : w.inputs[i].shape) shape.emplace_back(static_cast<int>(d));
    in.push_back(te::placeholder(shape, w.inputs[i].dtype, def.inputs[i].name));
  }
  te::Tensor out = def.call(in, Fields(w));
  KILN_ICHECK(workload_of(out) == w.json())
      << "compute_from_workload: " << w.compute << " attached another workload, "
      << workload_of(out).value_or("none") << ", for " << w.json();
  return out;
}

std::optional<std::string> workload_of(const te::Tensor& out) {
  auto it = out->attrs.find(kWorkloadAttr);
  if (it == out->attrs.end()) return std::nullopt;
  return it->second;
}

te::Tensor with_workload(const te::Tensor& out, const Workload& w) {
  return te::with_attr(out, kWorkloadAttr, w.json());
}

std::vector<std::optional<runtime::ValueRange>> input_ranges(
    const Workload& w, const std::vector<te::Tensor>& inputs) {
  const ComputeDef& def = compute_def(w.compute);
  std::vector<std::optional<runtime::ValueRange>> out;
  for (const te::Tensor& t : inputs) {
    const auto it = std::find_if(def.inputs.begin(), def.inputs.end(),
                                 [&](const InputDef& d) { return t->name() == d.name; });
    KILN_ICHECK(it != def.inputs.end())
        << where(w) << "'" << t->name() << "' is not one of its inputs";
    const ir::DataType dt = t->dtype();
    if (dt.is_float()) {
      out.emplace_back(std::nullopt);
    } else if (it->range) {
      out.emplace_back(it->range);
    } else {
      // An integer input without a declared range takes its dtype's (up to 32 bits).
      KILN_USER_CHECK(dt.bits() <= 32 && dt.lanes() == 1)
          << where(w) << "input '" << t->name() << "' of " << dt.str()
          << " has no value range to be generated in";
      const bool u = dt.is_uint();
      out.emplace_back(runtime::ValueRange{
          u ? 0 : -(int64_t{1} << (dt.bits() - 1)),
          u ? (int64_t{1} << dt.bits()) - 1 : (int64_t{1} << (dt.bits() - 1)) - 1});
    }
  }
  return out;
}

TensorSpec spec_of(const te::Tensor& t, const char* op) {
  TensorSpec s;
  for (size_t d = 0; d < t.ndim(); ++d) {
    auto v = ir::as_const_int(t->shape()[d]);
    KILN_USER_CHECK(v.has_value())
        << op << ": dimension " << d << " of '" << t->name() << "' must be a constant";
    s.shape.push_back(*v);
  }
  s.dtype = t->dtype();
  return s;
}

}  // namespace kiln::topi
