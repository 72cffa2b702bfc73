// pack_weights: Gemm / MatMul weights into dense_packed panels, LSTM and GRU weights into panels,
// ConvTranspose weights into the panels of its GEMM, MatMulInteger's int8 weights into the VNNI
// kernel's [N/16, K/4, 16, 4] with their column sums.
#include "compiler/graph/pack_weights.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "compiler/ir/bf16.h"
#include "compiler/topi/lstm.h"

namespace kiln::graph {
namespace {

using runtime::kFloat32;

bool is_f32_constant(const Graph& g, ValueId v) {
  if (v == kNoValue || v < 0 || static_cast<size_t>(v) >= g.num_values()) return false;
  const Value& val = g.value(v);
  return val.is_constant() && runtime::dtype_equal(val.dtype, kFloat32);
}

bool has_input(const Node& n, size_t i) { return n.inputs.size() > i && n.inputs[i] != kNoValue; }

/// B (a float32 constant [K, N], or [N, K] when trans_b) packed
/// into [ceil(N / bn), K, bn].
runtime::NDArray pack_dense(const Value& b, bool trans_b, int64_t bn) {
  const size_t r = b.shape.size();
  const int64_t k = trans_b ? b.shape[r - 1] : b.shape[r - 2],
                n = trans_b ? b.shape[r - 2] : b.shape[r - 1];
  const int64_t panels = (n + bn - 1) / bn;
  runtime::NDArray out = runtime::NDArray::empty({panels, k, bn}, kFloat32);
  const float* src = b.data->data<float>();
  float* dst = out.data<float>();
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = dst + (p * k + kk) * bn;
      for (int64_t j = 0; j < bn; ++j) {
        const int64_t col = p * bn + j;
        row[j] = col >= n ? 0.0f : trans_b ? src[col * k + kk] : src[kk * n + col];
      }
    }
  }
  return out;
}

/// A recurrent weight [D, G, K] with each direction's row segments (first row, rows) packed in
/// panels of bn rows one after the other: [D, P, K, bn], element [d, p, k, j] of a segment's p-th
/// panel its row row0 + p * bn + j (zero past the segment's end).
runtime::NDArray pack_gate_panels(const Value& w,
                                  const std::vector<std::pair<int64_t, int64_t>>& segments,
                                  int64_t bn) {
  const int64_t dirs = w.shape[0], g = w.shape[1], k = w.shape[2];
  int64_t panels = 0;
  for (const auto& seg : segments) panels += (seg.second + bn - 1) / bn;
  runtime::NDArray out = runtime::NDArray::empty({dirs, panels, k, bn}, kFloat32);
  const float* src = w.data->data<float>();
  float* dst = out.data<float>();
  for (int64_t d = 0; d < dirs; ++d) {
    int64_t p = 0;
    for (const auto& [row0, rows] : segments) {
      for (int64_t sp = 0; sp * bn < rows; ++sp, ++p) {
        for (int64_t kk = 0; kk < k; ++kk) {
          float* row = dst + ((d * panels + p) * k + kk) * bn;
          for (int64_t j = 0; j < bn; ++j) {
            const int64_t r = sp * bn + j;
            row[j] = r < rows ? src[(d * g + row0 + r) * k + kk] : 0.0f;
          }
        }
      }
    }
  }
  return out;
}

/// pack_dense's panels with K in bf16 pairs: int32 [ceil(N / bn), ceil(K / 2), bn].
runtime::NDArray pack_dense_bf16(const Value& b, bool trans_b, int64_t bn) {
  const runtime::NDArray f = pack_dense(b, trans_b, bn);
  const int64_t panels = f.shape()[0], k = f.shape()[1], pairs = (k + 1) / 2;
  runtime::NDArray out = runtime::NDArray::empty({panels, pairs, bn}, runtime::kInt32);
  const float* src = f.data<float>();
  int32_t* dst = out.data<int32_t>();
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t kk = 0; kk < pairs; ++kk) {
      const float* lo = src + (p * k + 2 * kk) * bn;
      const float* hi = 2 * kk + 1 < k ? lo + bn : nullptr;
      for (int64_t j = 0; j < bn; ++j)
        dst[(p * pairs + kk) * bn + j] = ir::pack_bf16x2(lo[j], hi != nullptr ? hi[j] : 0.0f);
    }
  }
  return out;
}

/// A ConvTranspose weight [C, M/G, k...] packed into [M * K / bf, C/G, bf] (K the kernel's taps,
/// topi::pack_conv2d_transpose_weight's layout): element [p, c, j] is GEMM column f = p * bf + j
/// of group f / (M/G * K), whose input channel is group * C/G + c.
runtime::NDArray pack_conv_transpose(const Value& w, int64_t groups, int64_t bf) {
  const int64_t c = w.shape[0], cg = c / groups, cols = w.data->num_elements() / c;
  const int64_t panels = groups * cols / bf;
  runtime::NDArray out = runtime::NDArray::empty({panels, cg, bf}, kFloat32);
  const float* src = w.data->data<float>();
  float* dst = out.data<float>();
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t rc = 0; rc < cg; ++rc) {
      for (int64_t j = 0; j < bf; ++j) {
        const int64_t f = p * bf + j, gi = f / cols;
        dst[(p * cg + rc) * bf + j] = src[(gi * cg + rc) * cols + f % cols];
      }
    }
  }
  return out;
}

/// An int8 constant B [K, N] packed as topi::pack_dense_weight_int8 lays it out,
/// [N/16, K/4, 16, 4] (K a multiple of 4, N of 16), and its column sums [N] int32.
std::pair<runtime::NDArray, runtime::NDArray> pack_int8(const Value& b) {
  const int64_t k = b.shape[0], n = b.shape[1];
  runtime::NDArray packed = runtime::NDArray::empty({n / 16, k / 4, 16, 4}, runtime::kInt8);
  runtime::NDArray sums = runtime::NDArray::empty({n}, runtime::kInt32);
  const int8_t* src = b.data->data<int8_t>();
  int8_t* dst = packed.data<int8_t>();
  int32_t* sum = sums.data<int32_t>();
  for (int64_t j = 0; j < n; ++j) sum[j] = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t j = 0; j < n; ++j) {
      dst[((j / 16 * (k / 4) + kk / 4) * 16 + j % 16) * 4 + kk % 4] = src[kk * n + j];
      sum[j] += src[kk * n + j];
    }
  }
  return {std::move(packed), std::move(sums)};
}

/// Whether `v` is absent or a constant whose elements are all 0 (of any 8-bit type).
bool absent_or_zero(const Graph& g, const Node& n, size_t i) {
  if (!has_input(n, i)) return true;
  const Value& z = g.value(n.inputs[i]);
  if (!z.is_constant() || z.dtype.bits != 8) return false;
  const auto* p = z.data->data<uint8_t>();
  for (int64_t e = 0; e < z.data->num_elements(); ++e) {
    if (p[e] != 0) return false;
  }
  return true;
}

/// An int8 constant OIHW kernel [O, C, KH, KW] packed as topi::pack_conv2d_kernel_int8 lays it out
/// for blocks of `cb` input channels, [ceil(O/16), ceil(C/cb), KH, KW, cb/4, 16, 4] (zeros past O
/// and C), and `zx` times each output channel's sum of weights [ceil(O/16) * 16] int32 (zeros past
/// O): the data zero point's share. A padded last block (MobileNetV2's 24 channels) computes
/// zeros that nothing reads as channels.
std::pair<runtime::NDArray, runtime::NDArray> pack_conv_int8(const Value& w, int64_t cb,
                                                             int64_t zx) {
  const int64_t o = w.shape[0], c = w.shape[1], taps = w.shape[2] * w.shape[3];
  const int64_t cblocks = (c + cb - 1) / cb;
  const int64_t oblocks = (o + 15) / 16;
  // (empty() fills with zeros: the padding of the last output block)
  runtime::NDArray packed = runtime::NDArray::empty(
      {oblocks, cblocks, w.shape[2], w.shape[3], cb / 4, 16, 4}, runtime::kInt8);
  runtime::NDArray share = runtime::NDArray::empty({oblocks * 16}, runtime::kInt32);
  const int8_t* src = w.data->data<int8_t>();
  int8_t* dst = packed.data<int8_t>();
  int32_t* sh = share.data<int32_t>();
  for (int64_t f = 0; f < o; ++f) {
    int32_t sum = 0;
    for (int64_t ch = 0; ch < cblocks * cb; ++ch) {
      for (int64_t t = 0; t < taps; ++t) {
        const int8_t v = ch < c ? src[(f * c + ch) * taps + t] : int8_t{0};
        sum += v;
        dst[((((f / 16 * cblocks + ch / cb) * taps + t) * (cb / 4) + ch % cb / 4) * 16 + f % 16) *
                4 +
            ch % 4] = v;
      }
    }
    sh[f] = static_cast<int32_t>(zx) * sum;
  }
  return {std::move(packed), std::move(share)};
}

/// A depthwise int8 constant kernel [C, 1, KH, KW] (C a multiple of 16) as
/// topi::depthwise_conv2d_nchwc_int8 reads it, [C/16, 1, KH, KW, 1, 16], and `zx` times each
/// channel's sum of weights [C] int32.
std::pair<runtime::NDArray, runtime::NDArray> pack_depthwise_int8(const Value& w, int64_t zx) {
  const int64_t c = w.shape[0], kh = w.shape[2], kw = w.shape[3], taps = kh * kw;
  runtime::NDArray packed = runtime::NDArray::empty({c / 16, 1, kh, kw, 1, 16}, runtime::kInt8);
  runtime::NDArray share = runtime::NDArray::empty({c}, runtime::kInt32);
  const int8_t* src = w.data->data<int8_t>();
  int8_t* dst = packed.data<int8_t>();
  int32_t* sh = share.data<int32_t>();
  for (int64_t ch = 0; ch < c; ++ch) {
    int32_t sum = 0;
    for (int64_t t = 0; t < taps; ++t) {
      sum += src[ch * taps + t];
      dst[(ch / 16 * taps + t) * 16 + ch % 16] = src[ch * taps + t];
    }
    sh[ch] = static_cast<int32_t>(zx) * sum;
  }
  return {std::move(packed), std::move(share)};
}

/// The input channels per block of an int8 convolution's data: 64 where they divide (the
/// 3x3 layers of ResNet-18 ran 3-6% faster than with 16), else 16, else the channels rounded up
/// to 4 (a few, as an image's 3). With `blocks16`, 16 where it divides C: the blocks the
/// previous convolution writes in alter_layout's NCHW16c, read without a conversion.
int64_t int8_channel_block(int64_t c, bool blocks16) {
  if (blocks16 && c % 16 == 0) return 16;
  if (c % 64 == 0) return 64;
  if (c % 16 == 0 || c > 16) return 16;
  return (c + 3) / 4 * 4;
}

class Packer {
 public:
  Packer(Graph& g, bool bf16, bool int8_blocks16)
      : g_(g), bf16_(bf16), int8_blocks16_(int8_blocks16) {}

  bool dense(size_t ni) {
    const Node& n = g_.nodes()[ni];
    const bool gemm = n.op == "Gemm";
    if ((!gemm && n.op != "MatMul") || n.has_attr("packed_bn") || n.inputs.size() < 2 ||
        n.outputs.empty() || n.outputs[0] == kNoValue || !has_input(n, 0)) {
      return false;
    }
    if (gemm && n.i("transA", 0) != 0) return false;
    if (!is_f32_constant(g_, n.inputs[1])) return false;
    const Value& a = g_.value(n.inputs[0]);
    const Value& b = g_.value(n.inputs[1]);
    if (b.shape.size() != 2 || !a.typed || a.shape.size() < 2 ||
        !runtime::dtype_equal(a.dtype, kFloat32)) {
      return false;
    }
    if (gemm && a.shape.size() != 2) return false;
    const bool trans_b = gemm && n.i("transB", 0) != 0;
    const int64_t k = trans_b ? b.shape[1] : b.shape[0], cols = trans_b ? b.shape[0] : b.shape[1];
    if (a.shape.back() != k || k <= 0 || cols <= 0) return false;
    const int64_t bn = dense_panel_width(cols);
    const ValueId nb = packed(n.inputs[1], trans_b, bn, bf16_);
    Node& node = g_.nodes()[ni];
    node.inputs[1] = nb;
    node.attrs["packed_bn"] = bn;
    if (bf16_) node.attrs["packed_bf16"] = int64_t{1};
    return true;
  }

  bool conv_transpose(size_t ni) {
    const Node& n = g_.nodes()[ni];
    if (n.op != "ConvTranspose" || n.has_attr("packed_bf") || n.inputs.size() < 2 ||
        !has_input(n, 0) || !is_f32_constant(g_, n.inputs[1])) {
      return false;
    }
    const Value& x = g_.value(n.inputs[0]);
    const Value& w = g_.value(n.inputs[1]);
    const int64_t groups = n.i("group", 1);
    if (!x.typed || !runtime::dtype_equal(x.dtype, kFloat32) || w.shape.size() < 3 ||
        w.shape.size() > 4 || groups < 1 || w.shape[0] % groups != 0) {
      return false;
    }
    const int64_t cols = w.data->num_elements() / w.shape[0];  // M/G * K per group
    const int64_t bf = conv_transpose_panel_width(cols);
    const auto key = std::make_tuple(n.inputs[1], groups, bf);
    auto it = conv_transpose_packed_.find(key);
    if (it == conv_transpose_packed_.end()) {
      it =
          conv_transpose_packed_
              .emplace(key, g_.add_constant(w.name + ".packed", pack_conv_transpose(w, groups, bf)))
              .first;
    }
    const ValueId p = it->second;
    Node& node = g_.nodes()[ni];
    node.inputs[1] = p;
    node.attrs["packed_bf"] = bf;
    return true;
  }

  bool matmul_integer(size_t ni) {
    const Node& n = g_.nodes()[ni];
    if (n.op != "MatMulInteger" || n.has_attr("packed_int8") || n.inputs.size() < 2 ||
        !has_input(n, 0) || n.outputs.empty() || n.outputs[0] == kNoValue) {
      return false;
    }
    const Value& a = g_.value(n.inputs[0]);
    const Value& b = g_.value(n.inputs[1]);
    if (!a.typed || !runtime::dtype_equal(a.dtype, runtime::kUInt8) || a.shape.size() < 2 ||
        a.shape.size() > 3 || !b.is_constant() || !runtime::dtype_equal(b.dtype, runtime::kInt8) ||
        b.shape.size() != 2) {
      return false;
    }
    const int64_t k = b.shape[0], cols = b.shape[1];
    if (a.shape.back() != k || k % 4 != 0 || cols % 16 != 0 || !absent_or_zero(g_, n, 3)) {
      return false;
    }
    // A's zero point: one value (its share, za * the column sums, is subtracted in the epilogue).
    const bool za = has_input(n, 2);
    if (za) {
      const Value& z = g_.value(n.inputs[2]);
      if (!z.typed || !runtime::dtype_equal(z.dtype, runtime::kUInt8) || z.shape.size() > 1 ||
          (z.shape.size() == 1 && z.shape[0] != 1)) {
        return false;
      }
    }
    auto it = int8_packed_.find(n.inputs[1]);
    if (it == int8_packed_.end()) {
      auto [packed, sums] = pack_int8(b);
      it = int8_packed_
               .emplace(n.inputs[1],
                        std::make_pair(g_.add_constant(b.name + ".packed_int8", std::move(packed)),
                                       g_.add_constant(b.name + ".column_sums", std::move(sums))))
               .first;
    }
    Node& node = g_.nodes()[ni];
    node.inputs.resize(4, kNoValue);
    node.inputs[1] = it->second.first;
    node.inputs[3] = za ? it->second.second : kNoValue;
    node.attrs["packed_int8"] = int64_t{1};
    return true;
  }

  bool conv_integer(size_t ni) {
    const Node& n = g_.nodes()[ni];
    if (n.op != "ConvInteger" || n.has_attr("packed_int8") || n.inputs.size() < 2 ||
        !has_input(n, 0) || n.ints("kernel_shape").size() != 2) {
      return false;
    }
    const Value& x = g_.value(n.inputs[0]);
    const Value& w = g_.value(n.inputs[1]);
    if (!x.typed || !runtime::dtype_equal(x.dtype, runtime::kUInt8) || x.shape.size() != 4 ||
        !w.is_constant() || !runtime::dtype_equal(w.dtype, runtime::kInt8) || w.shape.size() != 4 ||
        !absent_or_zero(g_, n, 3)) {
      return false;
    }
    // One group (any output channels: a last block padded), or depthwise (a group per channel,
    // one weight channel each, channels in whole blocks of 16).
    const int64_t groups = n.i("group", 1);
    const bool depthwise = groups != 1 && groups == x.shape[1] && groups == w.shape[0] &&
                           w.shape[1] == 1 && w.shape[0] % 16 == 0;
    if (groups != 1 && !depthwise) return false;
    // The data zero point: a constant (the padding reads it), one value.
    int64_t zx = 0;
    if (has_input(n, 2)) {
      const Value& z = g_.value(n.inputs[2]);
      if (!z.is_constant() || !runtime::dtype_equal(z.dtype, runtime::kUInt8) ||
          z.data->num_elements() != 1) {
        return false;
      }
      zx = z.data->data<uint8_t>()[0];
    }
    const int64_t cb = depthwise ? 16 : int8_channel_block(w.shape[1], int8_blocks16_);
    auto [packed, share] = depthwise ? pack_depthwise_int8(w, zx) : pack_conv_int8(w, cb, zx);
    const ValueId p = g_.add_constant(w.name + ".packed_int8", std::move(packed));
    const ValueId sh =
        zx != 0 ? g_.add_constant(w.name + ".zero_point_share", std::move(share)) : kNoValue;
    Node& node = g_.nodes()[ni];
    node.inputs.resize(4, kNoValue);
    node.inputs[1] = p;
    node.inputs[2] = kNoValue;
    node.inputs[3] = sh;
    node.attrs["packed_int8"] = cb;
    node.attrs["data_zero_point"] = zx;
    return true;
  }

  /// An LSTM's or GRU's W and R, each direction's gates in panels.
  bool recurrent(size_t ni) {
    const Node& n = g_.nodes()[ni];
    const bool gru = n.op == "GRU";
    if ((!gru && n.op != "LSTM") || n.has_attr("packed_bn") || n.inputs.size() < 3) return false;
    int64_t dirs = 0;
    for (size_t i : {1, 2}) {
      if (!is_f32_constant(g_, n.inputs[i]) || g_.value(n.inputs[i]).shape.size() != 3) {
        return false;
      }
      dirs = g_.value(n.inputs[i]).shape[0];
    }
    const std::vector<int64_t>&ws = g_.value(n.inputs[1]).shape, &rs = g_.value(n.inputs[2]).shape;
    const int64_t hidden = rs[2], gates = (gru ? 3 : 4) * hidden;
    if (hidden <= 0 || ws[0] != dirs || ws[1] != gates || rs[1] != gates) return false;
    const std::vector<std::pair<int64_t, int64_t>> all = {{0, gates}};
    const bool lbr = gru && n.i("linear_before_reset", 0) != 0;
    const auto r_segments = gru ? topi::gru_panel_segments(hidden, lbr) : all;
    const int64_t bn = gru ? topi::lstm_panel_width(hidden) : topi::lstm_panel_width(gates);
    // Both packed before either is added: adding a value may move the graph's values.
    runtime::NDArray wp = pack_gate_panels(g_.value(n.inputs[1]), all, bn);
    runtime::NDArray rp = pack_gate_panels(g_.value(n.inputs[2]), r_segments, bn);
    const std::string wname = g_.value(n.inputs[1]).name, rname = g_.value(n.inputs[2]).name;
    const ValueId w = g_.add_constant(wname + ".packed", std::move(wp));
    const ValueId r = g_.add_constant(rname + ".packed", std::move(rp));
    Node& node = g_.nodes()[ni];
    node.inputs[1] = w;
    node.inputs[2] = r;
    node.attrs["packed_bn"] = bn;
    return true;
  }

 private:
  /// `v` packed (once per value and layout), in bf16 pairs with `bf16`.
  ValueId packed(ValueId v, bool trans_b, int64_t bn, bool bf16 = false) {
    const auto key = std::make_tuple(v, (trans_b ? 1 : 0) + (bf16 ? 2 : 0), bn);
    auto it = packed_.find(key);
    if (it != packed_.end()) return it->second;
    const Value& val = g_.value(v);
    const ValueId p =
        bf16 ? g_.add_constant(val.name + ".packed_bf16", pack_dense_bf16(val, trans_b, bn))
             : g_.add_constant(val.name + ".packed", pack_dense(val, trans_b, bn));
    packed_[key] = p;
    return p;
  }

  Graph& g_;
  const bool bf16_;
  const bool int8_blocks16_;
  /// Packed weights by (value, trans_b + 2 * bf16, bn).
  std::map<std::tuple<ValueId, int, int64_t>, ValueId> packed_;
  /// MatMulInteger's int8 weights: the packed constant and the column sums, by weight.
  std::map<ValueId, std::pair<ValueId, ValueId>> int8_packed_;
  /// ConvTranspose weights by (value, groups, bf).
  std::map<std::tuple<ValueId, int64_t, int64_t>, ValueId> conv_transpose_packed_;
};

}  // namespace

int64_t dense_panel_width(int64_t n) {
  for (int64_t bn = 80; bn >= 16; bn -= 16) {
    if (n % bn == 0) return bn;
  }
  if (n <= 16) return 16;
  // The widest whole-vector panel padding N by at most a 32nd, else the one padding it least.
  int64_t least = 64, least_pad = -1;
  for (int64_t bn : {64, 48, 32}) {
    const int64_t pad = (n + bn - 1) / bn * bn - n;
    if (pad * 32 <= n) return bn;
    if (least_pad < 0 || pad < least_pad) {
      least = bn;
      least_pad = pad;
    }
  }
  return least;
}

int64_t conv_transpose_panel_width(int64_t cols) {
  for (int64_t bf : {16, 8, 4, 2}) {
    if (cols % bf == 0) return bf;
  }
  return 1;
}

size_t pack_weights(Graph& graph, bool dense, bool bf16, bool int8_blocks16) {
  Packer packer(graph, bf16, int8_blocks16);
  size_t rewritten = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    if ((dense && (packer.dense(i) || packer.conv_transpose(i) || packer.matmul_integer(i) ||
                   packer.conv_integer(i))) ||
        packer.recurrent(i)) {
      ++rewritten;
    }
  }
  return rewritten;
}

}  // namespace kiln::graph
