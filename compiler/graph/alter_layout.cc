// alter_layout: NCHW -> NCHW[x]c for the convolutions (float ones and the int8 ConvInteger that
// pack_weights packed) and the elementwise chains, pools, channel concatenations and batch norms
// between them.
// One walk over the nodes in topological order builds the new node list, emitting conversions
// right before the first node that needs them.
#include "compiler/graph/alter_layout.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/int_math.h"
#include "compiler/graph/split_to_slices.h"
#include "compiler/ir/bf16.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/conv2d_winograd.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;
using runtime::kInt32;

/// [N, C, H, W] -> [N, ceil(C / b), H, W, b] (the last block padded where b does not divide C).
std::vector<int64_t> blocked_shape(const std::vector<int64_t>& s, int b) {
  return {s[0], (s[1] + b - 1) / b, s[2], s[3], b};
}

/// H * W of an NCHW value, 0 where it is not one or a dimension is symbolic.
int64_t pixels(const Value& v) {
  return v.shape.size() == 4 && v.shape[2] > 0 && v.shape[3] > 0 ? v.shape[2] * v.shape[3] : 0;
}

/// Operators that compute each output element from the same element of their inputs, so that
/// they work unchanged on any layout as long as all their operands share it. The activations
/// between a MobileNetV3's convolutions (HardSigmoid, HardSwish) are among them: left out, every
/// one of them converted its convolution's output back to NCHW and the next input to blocks.
/// So are a quantized network's requantization chains (Cast, and QuantizeLinear /
/// DequantizeLinear with one scale: try_keep_blocked refuses a per-axis one, whose axis would
/// name a dimension of the blocked shape).
bool layout_agnostic(const std::string& op) {
  // finite_on_finite's, and those that may make a padding channel infinite or NaN.
  static const std::set<std::string> kMore = {
      "Div", "Exp", "Log", "Pow", "Reciprocal", "Softplus", "Sqrt",
  };
  return finite_on_finite(op) || kMore.count(op) != 0;
}

/// The output tile m of F(m x m, 3 x 3) for a plain blocked convolution (winograd_tile), 0 for the
/// direct one: a 3x3 of stride 1 and dilation 1 over at least 16 input and output channels, of at
/// least 2^21 multiply-adds direct (below, its four parallel stages cost more than they save),
/// whose batched products multiply at most 0.45 of the direct convolution's taps, with 16 tiles or
/// more to feed the products' register tiles. Of F(4x4) and F(2x2) the one with fewer products,
/// tiles past the output's edge included (a 14x14 map: 16 tiles of 4x4 = 576 products of 36,
/// against 49 tiles of 2x2 = 784 of 16).
int winograd_tile(const Graph& g, const Node& n, int64_t c_pad, int64_t o_pad) {
  constexpr double kShare = 0.45;
  constexpr int64_t kMinTiles = 16, kMinMacs = int64_t{1} << 21;
  const std::vector<int64_t>& y = g.value(n.outputs[0]).shape;
  if (n.ints("kernel_shape") != std::vector<int64_t>{3, 3} ||
      n.ints("strides") != std::vector<int64_t>{1, 1} ||
      n.ints("dilations") != std::vector<int64_t>{1, 1} || c_pad < 16 || o_pad < 16 ||
      y[0] * y[2] * y[3] * 9 * c_pad * o_pad < kMinMacs) {
    return 0;
  }
  const int64_t direct = y[0] * y[2] * y[3] * 9;
  int best = 0;
  int64_t best_cost = direct;
  for (int m : {4, 2}) {
    const int64_t tiles = y[0] * ((y[2] + m - 1) / m) * ((y[3] + m - 1) / m);
    const int64_t cost = tiles * (m + 2) * (m + 2);
    if (tiles >= kMinTiles && cost < best_cost) {
      best = m;
      best_cost = cost;
    }
  }
  return best != 0 && best_cost <= kShare * direct ? best : 0;
}

/// How the pass blocks a convolution: its blocks ib and ob (0: it stays NCHW), and for a grouped
/// one the groups of the blocked convolution, `merge` of the original's each (see
/// merge_groups).
struct ConvBlocks {
  int ib = 0, ob = 0;
  int64_t groups = 1;
  int64_t merge = 1;
  bool depthwise = false;
  int64_t c_pad = 0, o_pad = 0;  ///< the channels in whole blocks: C, O rounded up to ib, ob
  int64_t extra_groups = 0;      ///< grouped and padded: zero groups appended to reach c_pad
};

/// The most groups merged into one: each merged group multiplies the convolution's work by as
/// many (zeros of the block-diagonal kernel), and 4 costs what blocks of a quarter of the
/// vector width would, without their layout conversions.
constexpr int64_t kMaxMerge = 4;

ConvBlocks conv_blocks(const Graph& g, const Node& n, const AlterLayoutOptions& opt) {
  if (n.op != "Conv" || n.inputs.size() < 2 || n.outputs.size() != 1) return {};
  if (n.ints("kernel_shape").size() != 2) return {};
  const Value& x = g.value(n.inputs[0]);
  const Value& w = g.value(n.inputs[1]);
  if (!x.is_float32() || !w.is_constant() || !w.is_float32() || x.shape.size() != 4 ||
      w.shape.size() != 4)
    return {};
  const int64_t c = x.shape[1], o = w.shape[0], groups = n.i("group");
  // The front end's validation guarantees it; pack_kernel would write past its buffer otherwise.
  KILN_ICHECK(groups >= 1 && w.shape[1] * groups == c && o % groups == 0)
      << "alter_layout: node '" << n.name << "' (Conv) reads " << x.type_string()
      << " with the kernel " << w.type_string() << " and group " << groups
      << ": the channels disagree";
  // Padded blocks need the bias padded too: a constant one, or none.
  const bool bias_ok = n.inputs.size() < 3 || n.inputs[2] == kNoValue ||
                       (g.value(n.inputs[2]).is_constant() && g.value(n.inputs[2]).is_float32());
  const AlterLayoutOptions plain_blocks{};
  const AlterLayoutOptions& o_opt = bias_ok ? opt : plain_blocks;
  int ib = channel_block(c, opt, pixels(x));
  const int ob = channel_block(o, o_opt, bias_ok ? pixels(g.value(n.outputs[0])) : 0);
  if (ib == 0 || ob == 0) return {};
  // bf16 pairs need an even block: an odd one (a single block, an image's 3 colours) gets a zero
  // channel.
  if (opt.bf16 && groups == 1 && ib % 2 == 1) ++ib;
  ConvBlocks b{ib, ob, 1, 1, false, round_up(c, ib), round_up(o, ob), 0};
  if (groups == 1) return b;
  if (groups == c && o == c && w.shape[1] == 1) {
    if (ib != ob) return {};
    b.groups = b.c_pad;
    b.depthwise = true;
    return b;
  }
  // Grouped: the blocks the neighbours have, each inside one group, or inside `merge` groups
  // taken as one (ResNeXt's 4 channels a group in blocks of 16). Padded, the groups are as many
  // more zero groups as fill the padding (RegNet's 55 groups of 8 channels as 56, in blocks of
  // 16 that merge two).
  const int64_t cg = c / groups, og = o / groups;
  if (b.c_pad != c || b.o_pad != o) {
    if ((b.c_pad - c) % cg != 0 || (b.o_pad - o) % og != 0 ||
        (b.c_pad - c) / cg != (b.o_pad - o) / og) {
      return {};
    }
    b.extra_groups = (b.c_pad - c) / cg;
  }
  const int64_t all = groups + b.extra_groups;
  for (int64_t merge = 1; merge <= kMaxMerge; ++merge) {
    if (all % merge == 0 && merge * cg % ib == 0 && merge * og % ob == 0) {
      b.groups = all / merge;
      b.merge = merge;
      return b;
    }
  }
  return {};
}

/// A grouped OIHW kernel [O, C/groups, KH, KW] as the kernel of groups/merge groups, `merge` of
/// the original's each: [O, merge*C/groups, KH, KW], block-diagonal (an output channel's weights
/// for the input channels of the other groups merged with its own are zero).
runtime::NDArray merge_groups(const runtime::NDArray& w, int64_t groups, int64_t merge) {
  const auto& s = w.shape();
  const int64_t o = s[0], cg = s[1], khw = s[2] * s[3], og = o / groups;
  runtime::NDArray m = runtime::NDArray::empty({o, merge * cg, s[2], s[3]}, kFloat32);
  const float* src = w.data<float>();
  float* dst = m.data<float>();
  std::fill(dst, dst + o * merge * cg * khw, 0.0f);
  for (int64_t oo = 0; oo < o; ++oo) {
    const int64_t part = oo / og % merge;  // which of the merged groups is this channel's
    std::copy(src + oo * cg * khw, src + (oo + 1) * cg * khw, dst + (oo * merge + part) * cg * khw);
  }
  return m;
}

/// OIHW [O, C, KH, KW] -> [O_pad/ob, C_pad/ib, KH, KW, ib, ob] (depthwise [C, 1, KH, KW] with
/// ib = 1); the channels past O and C (padded blocks) get zero weights.
runtime::NDArray pack_kernel(const runtime::NDArray& w, int ib, int ob, int64_t o_pad,
                             int64_t c_pad) {
  const auto& s = w.shape();
  const int64_t o = s[0], c = s[1], kh = s[2], kw = s[3];
  KILN_ICHECK(ib > 0 && ob > 0 && c_pad % ib == 0 && o_pad % ob == 0 && o <= o_pad && c <= c_pad)
      << "pack_kernel: the kernel " << w.shape_string() << " does not split into blocks of " << ib
      << " input and " << ob << " output channels";
  runtime::NDArray p = runtime::NDArray::empty({o_pad / ob, c_pad / ib, kh, kw, ib, ob}, kFloat32);
  const float* src = w.data<float>();
  float* dst = p.data<float>();
  std::fill(dst, dst + o_pad * c_pad * kh * kw, 0.0f);
  for (int64_t oo = 0; oo < o; ++oo) {
    for (int64_t cc = 0; cc < c; ++cc) {
      for (int64_t y = 0; y < kh; ++y) {
        for (int64_t x = 0; x < kw; ++x) {
          const int64_t to =
              ((((oo / ob * (c_pad / ib) + cc / ib) * kh + y) * kw + x) * ib + cc % ib) * ob +
              oo % ob;
          dst[to] = src[((oo * c + cc) * kh + y) * kw + x];
        }
      }
    }
  }
  return p;
}

/// pack_kernel's layout with the input channels of a block in bf16 pairs: int32
/// [O_pad/ob, C_pad/ib, KH, KW, ib/2, ob], element [.., k, j] = bf16(w[.., 2k]) | bf16(w[.., 2k+1])
/// << 16 of the block's channels (zeros past O and C), as topi::conv2d_nchwc_bf16 reads it.
runtime::NDArray pack_kernel_bf16(const runtime::NDArray& w, int ib, int ob, int64_t o_pad,
                                  int64_t c_pad) {
  const runtime::NDArray f = pack_kernel(w, ib, ob, o_pad, c_pad);
  const auto& s = f.shape();  // [O/ob, C/ib, KH, KW, ib, ob]
  runtime::NDArray p = runtime::NDArray::empty({s[0], s[1], s[2], s[3], ib / 2, ob}, kInt32);
  const float* src = f.data<float>();
  int32_t* dst = p.data<int32_t>();
  const int64_t taps = s[0] * s[1] * s[2] * s[3];
  for (int64_t t = 0; t < taps; ++t) {
    for (int64_t k = 0; k < ib / 2; ++k) {
      for (int64_t j = 0; j < ob; ++j) {
        const float* tap = src + t * ib * ob;
        dst[(t * (ib / 2) + k) * ob + j] =
            ir::pack_bf16x2(tap[2 * k * ob + j], tap[(2 * k + 1) * ob + j]);
      }
    }
  }
  return p;
}

/// float32 `a` with its first axis grown to `rows`, zeros after its own: a bias for padded
/// output channels, or a grouped kernel with zero groups appended.
runtime::NDArray zero_extend_rows(const runtime::NDArray& a, int64_t rows) {
  std::vector<int64_t> shape = a.shape();
  const int64_t n = a.num_elements();
  shape[0] = rows;
  runtime::NDArray p = runtime::NDArray::empty(shape, kFloat32);
  float* dst = p.data<float>();
  std::fill(dst, dst + p.num_elements(), 0.0f);
  std::copy(a.data<float>(), a.data<float>() + n, dst);
  return p;
}

/// A constant [N, C, H, W] of any element type in blocks of b, [N, ceil(C/b), H, W, b], zeros in
/// a padded last block.
runtime::NDArray block_constant(const runtime::NDArray& a, int b) {
  const auto& s = a.shape();
  KILN_ICHECK(s.size() == 4) << "block_constant: " << a.shape_string() << " is not NCHW";
  runtime::NDArray p = runtime::NDArray::empty(blocked_shape(s, b), a.dtype());  // zero bytes
  const int64_t bytes = runtime::dtype_bytes(a.dtype()), hw = s[2] * s[3];
  const auto* src = static_cast<const uint8_t*>(a.data());
  auto* dst = static_cast<uint8_t*>(p.data());
  const int64_t blocks = (s[1] + b - 1) / b;
  for (int64_t n = 0; n < s[0]; ++n) {
    for (int64_t c = 0; c < s[1]; ++c) {
      for (int64_t i = 0; i < hw; ++i) {
        const int64_t from = (n * s[1] + c) * hw + i;
        const int64_t to = ((n * blocks + c / b) * hw + i) * b + c % b;
        std::copy(src + from * bytes, src + (from + 1) * bytes, dst + to * bytes);
      }
    }
  }
  return p;
}

class LayoutRewriter {
 public:
  LayoutRewriter(Graph& g, const AlterLayoutOptions& opt) : g_(g), opt_(opt) {}

  AlterLayoutReport run() {
    std::vector<Node> old = std::move(g_.nodes());
    g_.nodes().clear();
    for (Node& n : old) {
      if (ConvBlocks b = conv_blocks(g_, n, opt_); b.ib > 0) {
        block_conv(std::move(n), b);
      } else if (int8_conv_blocked(n)) {
        g_.nodes().push_back(std::move(n));
      } else if (!try_keep_blocked(n) && !try_pool_blocked(n) && !try_concat_blocked(n) &&
                 !try_slice_blocked(n) && !try_batch_norm_blocked(n) &&
                 !try_channel_gather_blocked(n)) {
        for (ValueId& v : n.inputs) {
          if (v != kNoValue) v = plain(v);
        }
        g_.nodes().push_back(std::move(n));
      }
    }
    for (ValueId v : g_.outputs()) plain(v);
    g_.verify();
    return report_;
  }

 private:
  struct Blocked {
    ValueId value;  ///< the blocked form
    int block;
  };

  /// `v` in NCHW: itself, produced by a conversion from its blocked form when a node made it
  /// blocked.
  ValueId plain(ValueId v) {
    auto it = blocked_.find(v);
    if (it == blocked_.end() || produced_.count(v)) return v;
    emit_conversion(it->second.value, it->second.block, 0, v, g_.value(v).shape[1]);
    produced_.insert(v);
    return v;
  }

  /// `v` in blocks of `b`, converted (once) when it is in another layout.
  ValueId in_block(ValueId v, int b) {
    auto it = blocked_.find(v);
    if (it != blocked_.end() && it->second.block == b) return it->second.value;
    auto key = std::make_pair(v, b);
    if (auto c = converted_.find(key); c != converted_.end()) return c->second;
    const Value& orig = g_.value(v);  // (add_value invalidates the reference)
    const int64_t channels = orig.shape[1];
    if (orig.is_constant() && it == blocked_.end()) {
      // A constant (a requantization's per-channel bias or multiplier) blocked now, not by a
      // conversion on every run.
      const std::string name = orig.name + "_nchw" + std::to_string(b) + "c";
      ValueId to = g_.add_constant(name, block_constant(*orig.data, b));
      converted_[key] = to;
      return to;
    }
    ValueId to = g_.add_value(orig.name + "_nchw" + std::to_string(b) + "c", orig.dtype,
                              blocked_shape(orig.shape, b));
    if (it != blocked_.end()) {
      emit_conversion(it->second.value, it->second.block, b, to, channels);
    } else {
      emit_conversion(v, 0, b, to, channels);
    }
    converted_[key] = to;
    return to;
  }

  void emit_conversion(ValueId from, int src_block, int dst_block, ValueId to, int64_t channels) {
    Node n = layout_transform_node(g_, from, to, src_block, dst_block);
    if ((src_block != 0 && channels % src_block != 0) ||
        (dst_block != 0 && channels % dst_block != 0)) {
      n.attrs["channels"] = channels;  // padded blocks on one side
    }
    g_.nodes().push_back(std::move(n));
    ++report_.conversions;
  }

  /// The output `v` of a node now computed in blocks of `b`: a new value takes its place.
  void make_blocked_output(Node& n, int b) {
    const ValueId v = n.outputs[0];
    const Value& orig = g_.value(v);
    ValueId bv = g_.add_value(orig.name + "_nchw" + std::to_string(b) + "c", orig.dtype,
                              blocked_shape(orig.shape, b));
    blocked_[v] = {bv, b};
    n.outputs[0] = bv;
  }

  void block_conv(Node n, const ConvBlocks& b) {
    const Value& w = g_.value(n.inputs[1]);  // (a reference that add_constant may invalidate)
    const std::string w_name = w.name;
    const int64_t groups = n.i("group"), o = w.shape[0];
    const bool padded = b.c_pad != g_.value(n.inputs[0]).shape[1] || b.o_pad != o;
    const std::shared_ptr<const runtime::NDArray> original = w.data;
    runtime::NDArray grouped, merged;  // the kernel with zero groups appended, merged
    const runtime::NDArray* kernel = original.get();
    if (b.extra_groups != 0) {
      grouped = zero_extend_rows(*kernel, b.o_pad);  // the zero groups' output channels
      kernel = &grouped;
    }
    if (b.merge != 1) {
      merged = merge_groups(*kernel, groups + b.extra_groups, b.merge);
      kernel = &merged;
    }
    // A depthwise kernel [C, 1, ...] pads its channels as output channels; a grouped one's input
    // channels are a (merged) group's.
    const int64_t c_pad = b.depthwise || groups != 1 ? kernel->shape()[1] : b.c_pad;
    const bool bf16 = opt_.bf16 && groups == 1 && b.ib % 2 == 0;
    const int wino =
        opt_.winograd && groups == 1 && !bf16 ? winograd_tile(g_, n, c_pad, b.o_pad) : 0;
    ValueId packed;
    if (wino != 0) {
      const int64_t alpha = wino + 2;
      runtime::NDArray u = runtime::NDArray::from_vector(
          topi::winograd_kernel_transform(kernel->data<float>(), o, kernel->shape()[1], wino, b.ob,
                                          b.o_pad, c_pad),
          {alpha, alpha, b.o_pad / b.ob, c_pad, b.ob});
      packed = g_.add_constant(w_name + "_winograd" + std::to_string(wino), std::move(u));
      n.attrs["winograd"] = int64_t{wino};
      ++report_.winograd;
    } else {
      packed = g_.add_constant(
          w_name + (bf16 ? "_packed_bf16" : "_packed"),
          bf16 ? pack_kernel_bf16(*kernel, b.ib, b.ob, b.o_pad, c_pad)
               : pack_kernel(*kernel, b.depthwise ? 1 : b.ib, b.ob, b.o_pad, c_pad));
    }
    if (b.o_pad != o && n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
      const Value& bias = g_.value(n.inputs[2]);
      runtime::NDArray padded_bias = zero_extend_rows(*bias.data, b.o_pad);
      n.inputs[2] = g_.add_constant(bias.name + "_padded", std::move(padded_bias));
    }
    n.inputs[0] = in_block(n.inputs[0], b.ib);
    n.inputs[1] = packed;
    n.attrs["data_block"] = int64_t{b.ib};
    n.attrs["out_block"] = int64_t{b.ob};
    n.attrs["group"] = b.groups;
    if (bf16) n.attrs["bf16"] = int64_t{1};
    make_blocked_output(n, b.ob);
    g_.nodes().push_back(std::move(n));
    ++report_.convolutions_blocked;
    if (padded) ++report_.padded;
    if (bf16) ++report_.bf16;
    if (groups != 1 && !b.depthwise) ++report_.grouped_blocked;
  }

  /// An elementwise node reading blocked values: computed in blocks (those of its first operand
  /// blocked with the output's shape) when every other operand is blocked with the output's shape,
  /// is a rank-4 per-channel operand (its channels the output's, every other dimension the
  /// output's or 1: [N,C,1,1], [1,C,1,1], an SE block's scale), which is converted to the same
  /// blocks and broadcasts against [N, C/b, H, W, b] as it did in NCHW, or is a single element
  /// (read in NCHW: it broadcasts against any rank).
  bool try_keep_blocked(Node& n) {
    if (!layout_agnostic(n.op) || n.outputs.size() != 1) return false;
    if ((n.op == "QuantizeLinear" || n.op == "DequantizeLinear") &&
        (n.inputs.size() < 2 || g_.value(n.inputs[1]).shape.size() != 0)) {
      return false;
    }
    const std::vector<int64_t> out_shape = g_.value(n.outputs[0]).shape;  // (values may grow)
    if (out_shape.size() != 4) return false;
    int b = 0;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      auto it = blocked_.find(v);
      if (it != blocked_.end() && g_.value(v).shape == out_shape) {
        b = it->second.block;
        break;
      }
    }
    if (b == 0) return false;
    // On a padded block only what keeps the padding finite (see finite_on_finite).
    if (out_shape[1] % b != 0 && !finite_on_finite(n.op)) return false;
    std::vector<bool> to_block;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) {
        to_block.push_back(false);
        continue;
      }
      const Value& val = g_.value(v);
      if (val.shape == out_shape ? blocked_.count(v) != 0 : per_channel(val.shape, out_shape)) {
        to_block.push_back(true);
      } else if (val.num_elements() == 1) {
        to_block.push_back(false);
      } else {
        return false;  // an NCHW operand: the node reads NCHW, converting fewer values
      }
    }
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId& v = n.inputs[i];
      if (v != kNoValue) v = to_block[i] ? in_block(v, b) : plain(v);
    }
    make_blocked_output(n, b);
    g_.nodes().push_back(std::move(n));
    return true;
  }

  /// Whether `s` is a rank-4 operand with `out`'s channels whose other dimensions are out's or 1
  /// (blocked like out, padded where out is).
  static bool per_channel(const std::vector<int64_t>& s, const std::vector<int64_t>& out) {
    if (s.size() != 4 || s[1] != out[1]) return false;
    for (size_t d : {size_t{0}, size_t{2}, size_t{3}}) {
      if (s[d] != out[d] && s[d] != 1) return false;
    }
    return true;
  }

  /// A ConvInteger whose int8 weight pack_weights packed for topi::conv2d_nchwc_int8
  /// (packed_int8 = its input block cb): its uint8 data read in blocks of cb (the previous int8
  /// convolution's output blocks of 16 as they are), its int32 output in blocks of 16, marked
  /// with data_block = cb; its zero point's share stays as packed. Output channels that 16 does
  /// not divide (MobileNetV2's 24) get a padded last block, which its zero weights fill with
  /// zero sums (the requantization chain keeps it finite, and the next convolution's weights are
  /// zero there).
  bool int8_conv_blocked(Node& n) {
    if (n.op != "ConvInteger" || !n.has_attr("packed_int8") || n.outputs.size() != 1 ||
        n.has_attr("data_block")) {
      return false;
    }
    const int cb = static_cast<int>(n.i("packed_int8"));
    if (g_.value(n.inputs[0]).shape.size() != 4) return false;
    if (g_.value(n.outputs[0]).shape[1] % topi::kInt8OutBlock != 0) ++report_.padded;
    n.inputs[0] = in_block(n.inputs[0], cb);
    n.attrs["data_block"] = int64_t{cb};
    make_blocked_output(n, topi::kInt8OutBlock);
    ++report_.convolutions_blocked;
    ++report_.int8_blocked;
    return true;
  }

  /// A 2-D pooling of a blocked value pools it in blocks (topi pools NCHW[x]c directly).
  bool try_pool_blocked(Node& n) {
    static const std::set<std::string> kPools = {"AveragePool", "GlobalAveragePool",
                                                 "GlobalMaxPool", "MaxPool"};
    if (!kPools.count(n.op) || n.inputs.empty() || n.outputs.size() != 1) return false;
    if (g_.value(n.outputs[0]).shape.size() != 4) return false;
    int b = 0;
    if (auto it = blocked_.find(n.inputs[0]); it != blocked_.end()) {
      b = it->second.block;
    } else {
      // A 3-D pooling over frames as rows (rewrite_pool3d) of a plain value pools in blocks too,
      // its input converted: its value comes from a video convolution's frames put back in
      // order (a Transpose), and a plain pooling's vector of columns gathered its lanes from the
      // blocked convolution output through the fused conversion, one channel each (C3D's
      // (1, 2, 2) MaxPool over 32 channels of 16 frames of 112x112 ran at 2.6 GB/s). Blocked,
      // its vectors are 16 channels of one pixel, which the fused conversions read as they lie.
      // Not a few channels, an image's colours, that a block of their own count would not fill
      // a vector with.
      const Value& x = g_.value(n.inputs[0]);
      if (n.has_attr("frame_shape") && x.is_float32()) b = channel_block(x.shape[1]);
      if (b < 8 || x.shape[1] % b != 0) return false;
    }
    n.inputs[0] = in_block(n.inputs[0], b);
    n.attrs["data_block"] = int64_t{b};
    make_blocked_output(n, b);
    g_.nodes().push_back(std::move(n));
    return true;
  }

  /// A Slice of whole channel blocks (axis 1 in steps of 1 from a block's start to a block's end,
  /// every other axis whole) of a blocked value slices its blocks: a gated unit's halves (WaveNet's
  /// tanh x sigmoid over a Split of its dilated convolution's channels) stay blocked, where in
  /// NCHW each half was converted back to blocks for the next convolution.
  bool try_slice_blocked(Node& n) {
    if (!is_channel_slice(g_, n)) return false;
    auto it = blocked_.find(n.inputs[0]);
    if (it == blocked_.end()) return false;
    const int64_t b = it->second.block, start = n.ints("starts")[1];
    const int64_t channels = g_.value(n.outputs[0]).shape[1];
    const Value& blocked = g_.value(it->second.value);
    if (blocked.shape.size() != 5 || g_.value(n.inputs[0]).shape[1] % b != 0 || start % b != 0 ||
        channels % b != 0) {
      return false;
    }
    n.attrs = slice_along(blocked.shape, 1, start / b, channels / b);
    n.inputs[0] = it->second.value;
    make_blocked_output(n, static_cast<int>(b));
    g_.nodes().push_back(std::move(n));
    return true;
  }

  /// A concatenation of channels (axis 1) with a blocked operand, every operand's channels a
  /// multiple of its block b: a concatenation of channel blocks in NCHW[b]c (the other operands
  /// converted). DenseNet concatenates every layer's output with all before it; in NCHW each
  /// concatenation was converted to blocks again for the next convolution.
  bool try_concat_blocked(Node& n) {
    if (n.op != "Concat" || n.outputs.size() != 1) return false;
    const Value& out = g_.value(n.outputs[0]);
    if (out.shape.size() != 4 || !out.is_float32()) return false;
    int64_t axis = n.i("axis");
    if (axis < 0) axis += 4;
    if (axis != 1) return false;
    int b = 0;
    for (ValueId v : n.inputs) {
      auto it = blocked_.find(v);
      if (it != blocked_.end()) {
        b = it->second.block;
        break;
      }
    }
    if (b == 0) return false;
    for (ValueId v : n.inputs) {
      const Value& val = g_.value(v);
      if (val.shape.size() != 4 || val.shape[1] % b != 0 || !val.is_float32()) return false;
    }
    for (ValueId& v : n.inputs) v = in_block(v, b);
    n.attrs["axis"] = int64_t{1};  // the channel blocks (a negative axis would count from W)
    make_blocked_output(n, b);
    g_.nodes().push_back(std::move(n));
    return true;
  }

  /// A ChannelGather (channel_gather.h) whose inputs are all blocked alike: it reads those blocks
  /// and writes the blocks its channel count gets (channel_block, what a convolution reading it
  /// takes; NCHW where there is none), its table extended over a padded last block with zeros
  /// (input -1). A channel shuffle between blocked convolutions then converts nothing.
  bool try_channel_gather_blocked(Node& n) {
    if (n.op != "ChannelGather" || n.outputs.size() != 1 || n.inputs.size() < 2) return false;
    int b = 0;
    for (size_t i = 0; i + 1 < n.inputs.size(); ++i) {
      auto it = blocked_.find(n.inputs[i]);
      if (it == blocked_.end() || (b != 0 && it->second.block != b)) return false;
      b = it->second.block;
    }
    const std::vector<int64_t> out_shape = g_.value(n.outputs[0]).shape;
    if (out_shape.size() != 4) return false;
    const int ob = channel_block(out_shape[1], opt_, pixels(g_.value(n.outputs[0])));
    for (size_t i = 0; i + 1 < n.inputs.size(); ++i) n.inputs[i] = blocked_.at(n.inputs[i]).value;
    n.attrs["data_block"] = int64_t{b};
    if (ob > 0) {
      const int64_t padded = round_up(out_shape[1], ob);
      const Value& table = g_.value(n.inputs.back());
      if (padded != out_shape[1]) {
        const int32_t* t = table.data->data<int32_t>();
        const int64_t c = out_shape[1];
        std::vector<int32_t> wide(static_cast<size_t>(2 * padded), 0);
        for (int64_t i = 0; i < padded; ++i) {
          wide[static_cast<size_t>(i)] = i < c ? t[i] : -1;
          wide[static_cast<size_t>(padded + i)] = i < c ? t[c + i] : 0;
        }
        const std::string name = table.name + "_padded";
        n.inputs.back() = g_.add_constant(name, runtime::NDArray::from_vector(wide, {2, padded}));
      }
      n.attrs["out_block"] = int64_t{ob};
      make_blocked_output(n, ob);
    }
    g_.nodes().push_back(std::move(n));
    return true;
  }

  /// An inference BatchNormalization with constant parameters of a blocked value (one that
  /// fold_batch_norm could not fold: DenseNet's, after a concatenation): a Mul by its scale and
  /// an Add of its shift, per channel, both [1, C/b, 1, 1, b] constants (the [C] order reshaped).
  bool try_batch_norm_blocked(Node& n) {
    if (n.op != "BatchNormalization" || n.inputs.size() != 5 || n.outputs.size() != 1) return false;
    auto it = blocked_.find(n.inputs[0]);
    const Value& out = g_.value(n.outputs[0]);
    if (it == blocked_.end() || out.shape.size() != 4 || !out.is_float32()) return false;
    const int64_t c = out.shape[1];
    for (size_t i = 1; i < 5; ++i) {
      const Value& p = g_.value(n.inputs[i]);
      if (!p.is_constant() || !p.is_float32() || p.shape != std::vector<int64_t>{c}) return false;
    }
    const int b = it->second.block;
    const double eps = n.f("epsilon");
    const float* gamma = g_.value(n.inputs[1]).data->data<float>();
    const float* beta = g_.value(n.inputs[2]).data->data<float>();
    const float* mean = g_.value(n.inputs[3]).data->data<float>();
    const float* var = g_.value(n.inputs[4]).data->data<float>();
    std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
    for (int64_t i = 0; i < c; ++i) {
      const double sc = double(gamma[i]) / std::sqrt(double(var[i]) + eps);
      scale[static_cast<size_t>(i)] = static_cast<float>(sc);
      shift[static_cast<size_t>(i)] = static_cast<float>(double(beta[i]) - double(mean[i]) * sc);
    }
    const std::vector<int64_t> per_channel = {1, (c + b - 1) / b, 1, 1, b};
    scale.resize(static_cast<size_t>(per_channel[1] * b), 0.0f);  // a padded block's are zeros
    shift.resize(scale.size(), 0.0f);
    ValueId sv =
        g_.add_constant(n.name + "_scale", runtime::NDArray::from_vector(scale, per_channel));
    ValueId hv =
        g_.add_constant(n.name + "_shift", runtime::NDArray::from_vector(shift, per_channel));
    const ValueId orig = n.outputs[0];
    const std::vector<int64_t> shape = blocked_shape(g_.value(orig).shape, b);
    const std::string name = g_.value(orig).name;
    ValueId scaled = g_.add_value(name + "_scaled_nchw" + std::to_string(b) + "c", kFloat32, shape);
    ValueId shifted = g_.add_value(name + "_nchw" + std::to_string(b) + "c", kFloat32, shape);
    g_.nodes().push_back(Node{"Mul", n.name + "_scale", {it->second.value, sv}, {scaled}, {}});
    g_.nodes().push_back(Node{"Add", n.name + "_shift", {scaled, hv}, {shifted}, {}});
    blocked_[orig] = {shifted, b};
    return true;
  }

  Graph& g_;
  const AlterLayoutOptions opt_;
  std::map<ValueId, Blocked> blocked_;                    ///< original value -> its blocked form
  std::set<ValueId> produced_;                            ///< originals made again by a conversion
  std::map<std::pair<ValueId, int>, ValueId> converted_;  ///< (value, block) -> converted value
  AlterLayoutReport report_;
};

}  // namespace

int channel_block(int64_t channels) {
  if (channels % 16 == 0) return 16;
  if (channels % 8 == 0) return 8;
  return channels <= 16 ? static_cast<int>(channels) : 0;
}

int channel_block(int64_t channels, const AlterLayoutOptions& opt, int64_t pixels) {
  const int b = channel_block(channels);
  const int64_t p = opt.pad_to;
  if (p > 0 && b < p && channels > p && (round_up(channels, p) - channels) * 8 <= channels) {
    return static_cast<int>(p);
  }
  const int64_t lanes = p > 0 ? p : 8;
  if (pixels == 1 && b < lanes && channels > lanes) return static_cast<int>(lanes);
  return b;
}

bool finite_on_finite(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Abs",
      "Add",
      "Cast",
      "Celu",
      "Ceil",
      "Clip",
      "DequantizeLinear",
      "Elu",
      "Erf",
      "Floor",
      "HardSigmoid",
      "HardSwish",
      "Identity",
      "LeakyRelu",
      "Max",
      "Min",
      "Mul",
      "Neg",
      "QuantizeLinear",
      "Relu",
      "Round",
      "Selu",
      "Shrink",
      "Sigmoid",
      "Sign",
      "Softsign",
      "Sub",
      "Tanh",
      "ThresholdedRelu",
  };
  return kOps.count(op) != 0;
}

GroupedConvBlocks grouped_conv_blocks(const Graph& g, const Node& n,
                                      const AlterLayoutOptions& options) {
  const ConvBlocks b = conv_blocks(g, n, options);
  if (b.ib == 0) return {};
  return {b.ib, b.ob, b.merge};
}

Node layout_transform_node(const Graph& g, ValueId from, ValueId to, int src_block, int dst_block) {
  Node n;
  n.op = "LayoutTransform";
  n.name = g.value(to).name + "_layout";
  n.inputs = {from};
  n.outputs = {to};
  n.attrs["src_block"] = int64_t{src_block};
  n.attrs["dst_block"] = int64_t{dst_block};
  return n;
}

AlterLayoutReport alter_layout(Graph& g, const AlterLayoutOptions& options) {
  g.verify();
  return LayoutRewriter(g, options).run();
}

}  // namespace kiln::graph
