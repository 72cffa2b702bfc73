// ONNX operators -> topi computes + default x86 schedules. lower_group builds placeholders for the
// group's external inputs, dispatches each node on its operator (one small function per family
// below), inlines what the master's kernel absorbs and returns the schedule with the arguments in
// call order.
#include "compiler/graph/op_lowering.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "base/error.h"
#include "compiler/graph/op_pattern.h"
#include "compiler/target/target.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/einsum.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/lstm_gpu.h"
#include "compiler/topi/gpu/reduce_gpu.h"
#include "compiler/topi/lstm.h"
#include "compiler/topi/nn.h"
#include "compiler/topi/pooling.h"
#include "compiler/topi/qconv2d.h"
#include "compiler/topi/quantize.h"
#include "compiler/topi/reduce.h"
#include "compiler/topi/transform.h"
#include "compiler/topi/tunable.h"
#include "deploy/runtime/dtype.h"

namespace kiln::graph {
namespace {

using ir::Expr;
using te::Tensor;

/// A template that schedules `y` with an epilogue stage (topi::epilogue_stage).
using Template = std::function<void(te::Schedule&, const Tensor& y, const Tensor& output)>;

/// How tunable operators are scheduled: each with its template at the config that `configs`
/// chooses for its task, or at the template's default without a source.
struct Tuning {
  autotune::ConfigSource* configs = nullptr;
  std::string target;

  void schedule(const std::string& name, te::Schedule& s, const Tensor& t,
                const Tensor& output) const {
    const topi::TunableTemplate& tmpl = topi::tunable_template(name);
    const space::Config cfg =
        configs != nullptr ? configs->choose(autotune::Task::make(name, t, target))
                           : tmpl.default_config(t, tmpl.space(t), target::Target::parse(target));
    tmpl.schedule(s, t, cfg, output);
  }
  /// Template `name` as a Template.
  Template of(const std::string& name) const {
    return [self = *this, name](te::Schedule& s, const Tensor& t, const Tensor& output) {
      self.schedule(name, s, t, output);
    };
  }
};

/// The node being lowered and the placeholders of its inputs.
struct Ctx {
  const Graph& g;
  const Node& node;
  std::vector<Tensor> in;  ///< one placeholder per node input (undefined for kNoValue)
  Tuning tuning;

  std::string where() const { return "node '" + node.name + "' (" + node.op + ")"; }
  [[noreturn]] void fail(const std::string& what) const {
    KILN_USER_ERROR() << "graph build: " << where() << ": " << what;
    throw Error("unreachable");  // KILN_USER_ERROR throws; this silences [[noreturn]] checks
  }
  const Tensor& input(size_t i) const {
    if (i >= in.size() || !in[i].defined()) fail("input " + std::to_string(i) + " is required");
    return in[i];
  }
  bool has(size_t i) const { return i < in.size() && in[i].defined(); }
  const Value& out_value(size_t i = 0) const { return g.value(node.outputs.at(i)); }
  std::vector<int64_t> in_shape(size_t i) const { return g.value(node.inputs.at(i)).shape; }
};

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r.empty() ? "t" : r;
}

/// A placeholder for `v` named "in_<name>" (sanitized; "in_" keeps it apart from topi's names for
/// the outputs), made distinct from the names in `taken`: arguments of one function must have
/// distinct names.
Tensor placeholder_of(const Value& v, std::set<std::string>* taken) {
  std::vector<Expr> shape;
  for (int64_t d : v.shape) shape.push_back(Expr(static_cast<int>(d)));
  const std::string base = "in_" + sanitize(v.name);
  std::string name = base;
  for (int k = 1; taken->count(name); ++k) name = base + "_" + std::to_string(k);
  taken->insert(name);
  return te::placeholder(shape, v.ir_dtype(), name);
}

/// What a lowering returns: the node's outputs as tensors, and the schedule to apply once a
/// te::Schedule of them exists. `schedule(s, output)` schedules the node's stages with `output`
/// storing its result: outs[0] itself, or, when the node is the master of a fused group, the
/// group's last stage, an elementwise epilogue of outs[0] with the stages between inlined.
struct Result {
  std::vector<Tensor> outs;  ///< one per node output (undefined if absent)
  std::function<void(te::Schedule&, const Tensor& output)> schedule;
  /// The operator's own stage that its template tiles (a convolution's, a product's), when the
  /// rest of the node is an epilogue of it: what a GPU template schedules instead.
  Tensor anchor = Tensor();
  /// For an operator that schedules all of its stages itself on a GPU (the LSTM): that schedule.
  std::function<void(te::Schedule&, const target::Target&)> gpu = nullptr;
};

void injective(te::Schedule& s, const Tensor& t) { topi::schedule_injective_x86(s, t); }

/// After a template scheduled `t` at the root: `output`, when it is another stage, as one
/// injective stage reading it (for templates that cannot take the epilogue into their tile).
void then_injective(te::Schedule& s, const Tensor& t, const Tensor& output) {
  if (output != t) injective(s, output);
}

/// An operator `y` scheduled by `base`, followed by its own elementwise stage `out` (a bias, a
/// scale; `y` itself when none): both, and the group's epilogue, in the template's tile.
Result with_epilogue(const Tensor& y, const Template& base, const Tensor& out) {
  return {{out},
          [=](te::Schedule& s, const Tensor& output) {
            if (out != y && out != output) s[out].compute_inline();
            base(s, y, output);
          },
          y};
}

Tensor add_channel_bias(const Tensor& y, const Tensor& bias) {
  return te::compute(
      y->shape(),
      [&](const std::vector<ir::Var>& i) {
        return y(std::vector<Expr>(i.begin(), i.end())) + bias(i[1]);
      },
      "bias_add");
}

topi::Ints2 ints2(const std::vector<int64_t>& v) {
  return {static_cast<int>(v.at(0)), static_cast<int>(v.at(1))};
}
topi::Ints4 ints4(const std::vector<int64_t>& v) {
  return {static_cast<int>(v.at(0)), static_cast<int>(v.at(1)), static_cast<int>(v.at(2)),
          static_cast<int>(v.at(3))};
}

/// Conv and ConvTranspose, 2-D, or 1-D as 2-D with a height of 1.
/// A Conv that alter_layout blocked: data [N, C/ib, H, W, ib], kernel packed (6-D), out
/// [N, O/ob, OH, OW, ob], bias [O].
Result lower_conv_nchwc(const Ctx& c) {
  const Node& n = c.node;
  const Tensor &x = c.input(0), &w = c.input(1);
  const auto stride = ints2(n.ints("strides")), dil = ints2(n.ints("dilations"));
  const auto pads = ints4(n.ints("pads"));
  // alter_layout's groups: 1, the input channels (depthwise), or grouped, each group whole
  // channel blocks (groups it merged counted as one).
  const int groups = static_cast<int>(n.i("group"));
  const int64_t channels = c.in_shape(0).at(1) * c.in_shape(0).at(4);
  const bool depthwise = groups != 1 && groups == channels;
  const int ob = static_cast<int>(n.i("out_block"));
  Tensor y;
  const char* tmpl = "conv2d_nchwc_x86";
  if (depthwise) {
    y = topi::depthwise_conv2d_nchwc(x, w, stride, pads, dil, "conv2d_nchwc");
    tmpl = "depthwise_conv2d_nchwc_x86";
  } else if (groups != 1) {
    y = topi::group_conv2d_nchwc(x, w, stride, pads, dil, groups, "conv2d_nchwc");
    tmpl = "group_conv2d_nchwc_x86";
  } else {
    y = topi::conv2d_nchwc(x, w, stride, pads, dil, "conv2d_nchwc");
  }
  Tensor out = y;
  if (c.has(2)) {
    const Tensor& bias = c.in[2];
    out = te::compute(
        y->shape(),
        [&](const std::vector<ir::Var>& i) {
          return y(std::vector<Expr>(i.begin(), i.end())) + bias(i[1] * ob + i[4]);
        },
        "bias_add");
  }
  return with_epilogue(y, c.tuning.of(tmpl), out);
}

Result lower_conv(const Ctx& c, bool transpose) {
  const Node& n = c.node;
  if (!transpose && n.has_attr("data_block")) return lower_conv_nchwc(c);
  const size_t k = n.ints("kernel_shape").size();
  if (k != 1 && k != 2) c.fail("only 1-D and 2-D convolutions are supported");
  const bool one_d = k == 1;
  // 1-D: [N, C, L] -> [N, C, 1, L], the same for the kernel; the attributes get a unit height.
  auto lift = [&](const std::vector<int64_t>& v, int64_t fill) {
    return one_d ? std::vector<int64_t>{fill, v.at(0)} : v;
  };
  auto lift_pads = [&](const std::vector<int64_t>& p) {
    return one_d ? std::vector<int64_t>{0, p.at(0), 0, p.at(1)} : p;
  };
  auto lift_tensor = [&](const Tensor& t, std::vector<int64_t> shape, const char* name) {
    if (!one_d) return t;
    shape.insert(shape.begin() + 2, 1);
    return topi::reshape(t, shape, name);
  };
  const Tensor x = lift_tensor(c.input(0), c.in_shape(0), "data_2d");
  const Tensor w = lift_tensor(c.input(1), c.in_shape(1), "kernel_2d");
  const int groups = static_cast<int>(n.i("group"));
  const auto stride = ints2(lift(n.ints("strides"), 1)), dil = ints2(lift(n.ints("dilations"), 1));
  const auto pads = ints4(lift_pads(n.ints("pads")));
  Tensor y;
  Template base;
  if (transpose) {
    y = topi::conv2d_transpose_nchw(x, w, stride, pads, ints2(lift(n.ints("output_padding"), 0)),
                                    dil, groups, "conv2d_transpose");
    base = c.tuning.of("conv2d_transpose_nchw_x86");
  } else {
    y = topi::conv2d_nchw(x, w, stride, pads, dil, groups, "conv2d");
    const auto xs = c.in_shape(0), ws = c.in_shape(1);
    const bool depthwise = groups > 1 && groups == xs[1] && ws[0] == xs[1] && ws[1] == 1;
    base = c.tuning.of(depthwise ? "depthwise_conv2d_nchw_x86" : "conv2d_nchw_x86");
  }
  Tensor biased = c.has(2) ? add_channel_bias(y, c.in[2]) : y;
  if (!one_d) return with_epilogue(y, base, biased);
  // 1-D: the bias in the tile, the reshape back to 3-D (and any epilogue) a stage of its own.
  Tensor out = topi::reshape(biased, c.out_value().shape, "conv1d");
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            s[x].compute_inline();
            s[w].compute_inline();
            base(s, y, biased);
            if (out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

/// QConv (realize_qconv.h): the integer convolution, its bias, shift and clip on the register
/// tile of the NCHW template at its default config; not tunable.
Result lower_qconv(const Ctx& c) {
  const Node& n = c.node;
  const topi::QConv2d q =
      topi::qconv2d_nchw(c.input(0), c.input(1), c.input(2), c.input(3), ints2(n.ints("strides")),
                         ints4(n.ints("pads")), ints2(n.ints("dilations")),
                         static_cast<int>(n.i("group")), n.i("relu") != 0, "qconv2d");
  return {
      {q.out},
      [=](te::Schedule& s, const Tensor& output) { topi::schedule_qconv2d_nchw_x86(s, q, output); },
      q.acc};
}

/// [M, K] rows `a2` (the node's input 0, or a view of it) times the panels pack_weights made of
/// input 1, then `epilogue` on the [M, N] product. M is padded to rows the register tile divides
/// (a transformer's 197 tokens would leave it one row high): A zero-padded, the product computed
/// apart, cropped in the output stage.
Result packed_product(const Ctx& c, const Tensor& a2, int64_t n, const std::string& name,
                      const std::function<Tensor(const Tensor&)>& epilogue) {
  const Tensor& a = c.input(0);
  const int64_t m = *ir::as_const_int(a2->shape()[0]);
  const int64_t mp = topi::batch_matmul_padded_rows(m);
  Tensor ap =
      mp == m ? a2
              : topi::pad(a2, {0, 0}, {mp - m, 0}, 0.0, topi::PadMode::kConstant, name + "_a_pad");
  Tensor y = topi::dense_packed(ap, c.input(1), n, name);
  auto base = [=, tuning = c.tuning](te::Schedule& s, const Tensor& t, const Tensor& output) {
    if (a2 != a) s[a2].compute_inline();
    if (ap != a2) injective(s, ap);
    tuning.schedule("dense_x86", s, t, output);
  };
  if (a2 == a && mp == m) return with_epilogue(y, base, epilogue(y));
  Tensor yc = mp == m ? y : topi::slice(y, {0, 0}, {m, n}, {}, {}, name + "_crop");
  Tensor out = epilogue(yc);
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            base(s, y, y);
            if (yc != y && yc != output) s[yc].compute_inline();
            if (out != yc && out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

Result lower_gemm(const Ctx& c) {
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

Result lower_matmul(const Ctx& c) {
  auto as = c.in_shape(0), bs = c.in_shape(1);
  const auto& out_shape = c.out_value().shape;
  const Tensor &a = c.input(0), &b = c.input(1);
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
            if (ar != a) s[ar].compute_inline();
            if (br != b) s[br].compute_inline();
            if (ap != ar) injective(s, ap);
            if (bp != br) injective(s, bp);
            tuning.schedule("batch_matmul_x86", s, y, y);
            if (yc != y && yc != output) s[yc].compute_inline();
            if (out != output) s[out].compute_inline();
            injective(s, output);
          },
          same_shape ? y : Tensor()};
}

/// Pooling, 2-D, or 1-D as 2-D with a height of 1 (as convolutions are).
Result lower_pool(const Ctx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  const size_t rank = c.in_shape(0).size();
  const bool blocked = rank == 5 && n.has_attr("data_block");  // NCHW[x]c, from alter_layout
  if (rank != 4 && rank != 3 && !blocked) {
    c.fail("only 1-D and 2-D pooling (NCW / NCHW input) is supported");
  }
  const bool one_d = rank == 3;
  auto lift = [&](const std::vector<int64_t>& v, int64_t fill) {
    return one_d ? std::vector<int64_t>{fill, v.at(0)} : v;
  };
  Tensor x = c.input(0);
  if (one_d) {
    std::vector<int64_t> shape = c.in_shape(0);
    shape.insert(shape.begin() + 2, 1);
    x = topi::reshape(x, shape, "data_2d");
  }
  Tensor y;
  if (op == "GlobalAveragePool") {
    y = topi::global_avg_pool2d(x);
  } else if (op == "GlobalMaxPool") {
    y = topi::global_max_pool2d(x);
  } else {
    for (int64_t d : n.ints("dilations")) {
      if (d != 1) c.fail("dilated pooling is not supported");
    }
    const auto k = ints2(lift(n.ints("kernel_shape"), 1)), st = ints2(lift(n.ints("strides"), 1));
    const std::vector<int64_t>& p = n.ints("pads");
    const auto pads = ints4(one_d ? std::vector<int64_t>{0, p.at(0), 0, p.at(1)} : p);
    const bool ceil = n.i("ceil_mode") != 0;
    y = op == "MaxPool" ? topi::max_pool2d(x, k, st, pads, ceil)
                        : topi::avg_pool2d(x, k, st, pads, ceil, n.i("count_include_pad") != 0);
  }
  auto base = [tuning = c.tuning](te::Schedule& s, const Tensor& t) {
    tuning.schedule("pool2d_x86", s, t, t);
  };
  if (!one_d) {
    return {{y},
            [=](te::Schedule& s, const Tensor& output) {
              base(s, y);
              then_injective(s, y, output);
            },
            blocked ? Tensor() : y};
  }
  Tensor out = topi::reshape(y, c.out_value().shape, "pool1d");
  return {{out}, [=](te::Schedule& s, const Tensor& output) {
            s[x].compute_inline();
            base(s, y);
            if (out != output) s[out].compute_inline();
            injective(s, output);
          }};
}

Result lower_lstm(const Ctx& c, std::vector<bool>* used_inputs) {
  const Node& n = c.node;
  const std::string direction = n.s("direction");
  if (n.i("input_forget", 0) != 0) c.fail("input_forget=1 is not supported");
  if (n.has_attr("clip")) c.fail("clip is not supported");
  if (c.has(4)) c.fail("sequence_lens is not supported");
  const bool gru = n.op == "GRU";
  const std::string name = gru ? "gru" : "lstm";
  // Batch first (layout 1): X [B, T, I] and the states [B, D, H] are read time- and
  // direction-major through transposes the schedule inlines, and the outputs transposed back.
  const bool batch_first = n.i("layout") == 1;
  std::vector<Tensor> views;
  auto major = [&](size_t i) -> Tensor {
    if (!c.has(i)) return Tensor();
    if (!batch_first || (i != 0 && i != 5 && i != 6)) return c.in[i];
    views.push_back(topi::transpose(c.in[i], {1, 0, 2}, name + ".major" + std::to_string(i)));
    return views.back();
  };
  const Tensor x = major(0), h0 = major(5), c0 = major(6);
  auto one = [&](topi::LstmDirection dir, const std::string& nm) {
    if (gru)
      return topi::gru(x, c.input(1), c.input(2), major(3), h0, n.i("linear_before_reset") != 0, nm,
                       dir);
    return topi::lstm(x, c.input(1), c.input(2), major(3), h0, c0, major(7), nm,
                      n.i("packed_bn", 0), dir);
  };
  topi::LstmOutputs o =
      direction == "bidirectional"
          ? topi::both_directions(one({0, false}, name + ".fw"), one({1, true}, name + ".bw"), name)
          : one({0, direction == "reverse"}, name);
  if (batch_first) {
    o.views.insert(o.views.end(), views.begin(), views.end());
    o.views.insert(o.views.end(), {o.y, o.y_h});
    o.y = topi::transpose(o.y, {2, 0, 1, 3}, name + ".Y_batch_first");
    o.y_h = topi::transpose(o.y_h, {1, 0, 2}, name + ".Y_h_batch_first");
    if (o.y_c.defined()) {
      o.views.push_back(o.y_c);
      o.y_c = topi::transpose(o.y_c, {1, 0, 2}, name + ".Y_c_batch_first");
    }
  }
  // With one step and no initial state R is never read: leave it out of the arguments.
  if (c.in_shape(0)[batch_first ? 1 : 0] == 1 && !c.has(5)) (*used_inputs)[2] = false;
  Result r;
  r.outs = {o.y, o.y_h};
  if (o.y_c.defined()) r.outs.push_back(o.y_c);
  r.schedule = [=](te::Schedule& s, const Tensor&) { topi::schedule_lstm_x86(s, o); };
  r.gpu = [=, tuning = c.tuning](te::Schedule& s, const target::Target& t) {
    topi::gpu::schedule_lstm_gpu(s, o, t, [&](te::Schedule& sch, const Tensor& product) {
      tuning.schedule("matmul_gpu", sch, product, product);
    });
  };
  return r;
}

Result injective_result(const Tensor& t) {
  return {{t}, [=](te::Schedule& s, const Tensor& output) {
            if (t != output) s[t].compute_inline();
            injective(s, output);
          }};
}

Result lower_clip(const Ctx& c) {
  const double lo = c.node.f("min"), hi = c.node.f("max");
  const Tensor& x = c.input(0);
  if (std::isfinite(lo) && std::isfinite(hi)) return injective_result(topi::clip(x, lo, hi));
  const ir::DataType t = x->dtype();
  return injective_result(topi::elementwise(
      x,
      [=](Expr e) {
        if (std::isfinite(lo)) e = ir::max(e, ir::cast(t, Expr(lo)));
        if (std::isfinite(hi)) e = ir::min(e, ir::cast(t, Expr(hi)));
        return e;
      },
      "clip"));
}

using Binary = Tensor (*)(const Tensor&, const Tensor&, const std::string&);

const std::map<std::string, Binary>& binaries() {
  static const std::map<std::string, Binary> m = {
      {"Add", &topi::add}, {"Sub", &topi::sub},     {"Mul", &topi::mul},     {"Div", &topi::div},
      {"Pow", &topi::pow}, {"Max", &topi::maximum}, {"Min", &topi::minimum},
  };
  return m;
}

using Unary = Tensor (*)(const Tensor&, const std::string&);

const std::map<std::string, Unary>& unaries() {
  static const std::map<std::string, Unary> m = {
      {"Relu", &topi::relu},
      {"Sigmoid", &topi::sigmoid},
      {"Tanh", &topi::tanh},
      {"Exp", &topi::exp},
      {"Log", &topi::log},
      {"Sqrt", &topi::sqrt},
      {"Abs", &topi::abs},
      {"Neg", &topi::neg},
      // A copy: the front end inserts it where a graph returns an input or a constant.
      {"Identity",
       +[](const Tensor& x, const std::string& name) {
         return topi::elementwise(
             x, [](ir::Expr e) { return e; }, name);
       }},
  };
  return m;
}

const std::set<std::string>& unary_math_ops() {
  static const std::set<std::string> ops = {
      "Acos",      "Acosh", "Asin",       "Asinh",    "Atan", "Atanh",           "Celu",
      "Ceil",      "Cos",   "Cosh",       "Elu",      "Erf",  "Floor",           "HardSigmoid",
      "HardSwish", "Not",   "Reciprocal", "Round",    "Selu", "Shrink",          "Sign",
      "Sin",       "Sinh",  "Softplus",   "Softsign", "Tan",  "ThresholdedRelu",
  };
  return ops;
}

const std::set<std::string>& broadcast_other_ops() {
  static const std::set<std::string> ops = {
      "And", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Mean",
      "Or",  "PRelu", "Sum",     "Where",          "Xor",
  };
  return ops;
}

const std::vector<std::string>& other_ops() {
  static const std::vector<std::string> ops = {
      "AveragePool",
      "BatchNormalization",
      "Cast",
      "Clip",
      "Concat",
      "Conv",
      "ConvTranspose",
      "Flatten",
      "Gemm",
      "GlobalAveragePool",
      "GlobalMaxPool",
      "Gather",
      "LSTM",
      "GRU",
      "LayoutTransform",
      "LeakyRelu",
      "LogSoftmax",
      "MatMul",
      "MaxPool",
      "Pad",
      "Reshape",
      "Slice",
      "Softmax",
      "Squeeze",
      "Transpose",
      "Unsqueeze",
      "ArgMax",
      "ArgMin",
      "Split",
      "Expand",
      "Tile",
      "Resize",
      "LayerNormalization",
      "InstanceNormalization",
      "Trilu",
      "Mod",
      "GatherElements",
      "CumSum",
      "Hardmax",
      "Einsum",
      "QuantizeLinear",
      "DequantizeLinear",
      "QConv",
  };
  return ops;
}

/// Unary operators with attributes or dtype rules of their own (ONNX's activations and math).
Result lower_unary_math(const Ctx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  const Tensor& x = c.input(0);
  const ir::DataType t = x->dtype();
  auto k = [t](double v) { return ir::make_const(t, v); };
  std::function<Expr(Expr)> f;
  static const std::map<std::string, std::string> kLibm = {
      {"Erf", "erf"},   {"Sin", "sin"},     {"Cos", "cos"},     {"Tan", "tan"},
      {"Asin", "asin"}, {"Acos", "acos"},   {"Atan", "atan"},   {"Sinh", "sinh"},
      {"Cosh", "cosh"}, {"Asinh", "asinh"}, {"Acosh", "acosh"}, {"Atanh", "atanh"},
  };
  if (auto it = kLibm.find(op); it != kLibm.end()) {
    const std::string fn = it->second;
    f = [t, fn](Expr v) { return ir::call(t, fn, {v}, ir::CallKind::kPureIntrinsic); };
  } else if (op == "Floor") {
    f = [](Expr v) { return ir::floor(v); };
  } else if (op == "Ceil") {
    f = [](Expr v) { return ir::ceil(v); };
  } else if (op == "Round") {  // halves to even, as ONNX specifies
    f = [t](Expr v) { return ir::call(t, "roundeven", {v}, ir::CallKind::kPureIntrinsic); };
  } else if (op == "Reciprocal") {
    f = [k](Expr v) { return k(1.0) / v; };
  } else if (op == "Softsign") {
    f = [k](Expr v) { return v / (k(1.0) + ir::abs(v)); };
  } else if (op == "Softplus") {
    // log(1 + exp(x)), which is x itself in float32 once exp(x) dwarfs 1.
    f = [k](Expr v) { return ir::select(v > k(30.0), v, ir::log(k(1.0) + ir::exp(v))); };
  } else if (op == "Sign") {
    f = [t](Expr v) {
      const Expr zero = ir::make_zero(t);
      return ir::select(v > zero, ir::make_one(t),
                        ir::select(v < zero, zero - ir::make_one(t), zero));
    };
  } else if (op == "HardSigmoid") {
    const double alpha = n.f("alpha"), beta = n.f("beta");
    f = [=](Expr v) { return ir::max(k(0.0), ir::min(k(1.0), v * k(alpha) + k(beta))); };
  } else if (op == "HardSwish") {
    f = [=](Expr v) { return v * ir::max(k(0.0), ir::min(k(1.0), v * k(1.0 / 6.0) + k(0.5))); };
  } else if (op == "Elu") {
    const double alpha = n.f("alpha");
    f = [=](Expr v) { return ir::select(v < k(0.0), k(alpha) * (ir::exp(v) - k(1.0)), v); };
  } else if (op == "Selu") {
    const double alpha = n.f("alpha"), gamma = n.f("gamma");
    f = [=](Expr v) {
      return ir::select(v <= k(0.0), k(gamma) * (k(alpha) * ir::exp(v) - k(alpha)), k(gamma) * v);
    };
  } else if (op == "Not") {
    f = [](Expr v) { return !v; };
  } else if (op == "Celu") {
    const double alpha = n.f("alpha");
    f = [=](Expr v) {
      return ir::max(k(0.0), v) + ir::min(k(0.0), k(alpha) * (ir::exp(v / k(alpha)) - k(1.0)));
    };
  } else if (op == "ThresholdedRelu") {
    const double alpha = n.f("alpha");
    f = [=](Expr v) { return ir::select(v > k(alpha), v, k(0.0)); };
  } else if (op == "Shrink") {
    const double lambd = n.f("lambd"), bias = n.f("bias");
    f = [=](Expr v) {
      return ir::select(v < k(-lambd), v + k(bias), ir::select(v > k(lambd), v - k(bias), k(0.0)));
    };
  } else {
    c.fail("operator '" + op + "' has no lowering");
  }
  return injective_result(topi::elementwise(x, f, sanitize(op)));
}

/// Comparisons (bool results), logic on bools, PRelu, Where, Sum and Mean: ONNX broadcasting.
Result lower_broadcast_other(const Ctx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  using F = std::function<Expr(Expr, Expr)>;
  static const std::map<std::string, F> kCompare = {
      {"Equal", [](Expr a, Expr b) { return a == b; }},
      {"Less", [](Expr a, Expr b) { return a < b; }},
      {"LessOrEqual", [](Expr a, Expr b) { return a <= b; }},
      {"Greater", [](Expr a, Expr b) { return a > b; }},
      {"GreaterOrEqual", [](Expr a, Expr b) { return a >= b; }},
      {"And", [](Expr a, Expr b) { return a && b; }},
      {"Or", [](Expr a, Expr b) { return a || b; }},
      {"Xor", [](Expr a, Expr b) { return a != b; }},
  };
  if (auto it = kCompare.find(op); it != kCompare.end()) {
    return injective_result(
        topi::broadcast_binary(c.input(0), c.input(1), it->second, sanitize(op)));
  }
  if (op == "PRelu") {
    const ir::DataType t = c.input(0)->dtype();
    return injective_result(topi::broadcast_binary(
        c.input(0), c.input(1),
        [t](Expr x, Expr slope) { return ir::select(x < ir::make_zero(t), slope * x, x); },
        "prelu"));
  }
  if (op == "Where") {
    return injective_result(topi::where(c.input(0), c.input(1), c.input(2), "where"));
  }
  if (op == "Sum" || op == "Mean") {
    Tensor t = c.input(0);
    if (n.inputs.size() == 1)
      t = topi::elementwise(
          t, [](Expr e) { return e; }, "copy");
    for (size_t i = 1; i < n.inputs.size(); ++i) t = topi::add(t, c.input(i), "sum");
    if (op == "Mean") {
      const ir::DataType dt = t->dtype();
      const double count = static_cast<double>(n.inputs.size());
      t = topi::elementwise(
          t, [=](Expr e) { return e / ir::make_const(dt, count); }, "mean");
    }
    return injective_result(t);
  }
  c.fail("operator '" + op + "' has no lowering");
}

const std::map<std::string, topi::ReduceOp>& reductions() {
  static const std::map<std::string, topi::ReduceOp> m = {
      {"ReduceSum", topi::ReduceOp::kSum},
      {"ReduceMean", topi::ReduceOp::kMean},
      {"ReduceMax", topi::ReduceOp::kMax},
      {"ReduceMin", topi::ReduceOp::kMin},
      {"ReduceProd", topi::ReduceOp::kProd},
      {"ReduceL1", topi::ReduceOp::kL1},
      {"ReduceL2", topi::ReduceOp::kL2},
      {"ReduceLogSum", topi::ReduceOp::kLogSum},
      {"ReduceLogSumExp", topi::ReduceOp::kLogSumExp},
      {"ReduceSumSquare", topi::ReduceOp::kSumSquare},
  };
  return m;
}

/// How reductions of a row fold on the node's target: in vector lanes on CPUs, in one stage for
/// the GPU templates.
topi::RowFold row_fold(const Ctx& c) {
  return target::Target::parse(c.tuning.target).is_gpu() ? topi::RowFold::kSerial
                                                         : topi::RowFold::kVectorLanes;
}

/// The reductions and ArgMax / ArgMin: the front end normalized axes (non-negative, sorted;
/// empty: all), keepdims, and for the reductions noop (noop_with_empty_axes with no axes).
Result lower_reduce(const Ctx& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  Tensor y;
  if (n.op == "ArgMax" || n.op == "ArgMin") {
    y = topi::arg_reduce(x, n.op == "ArgMax", n.i("axis"), n.i("keepdims") != 0,
                         n.i("select_last_index") != 0, sanitize(n.op));
  } else if (n.i("noop") != 0) {
    return injective_result(topi::elementwise(
        x, [](Expr e) { return e; }, "copy"));
  } else {
    y = topi::reduce(x, reductions().at(n.op), n.ints("axes"), n.i("keepdims") != 0, sanitize(n.op),
                     row_fold(c));
  }
  return {{y}, [=](te::Schedule& s, const Tensor& output) {
            topi::schedule_reduce_x86(s, y);
            then_injective(s, y, output);
          }};
}

/// LayerNormalization: Y, Mean and InvStdDev (all three computed; the absent ones are
/// temporaries), an opaque node of its own.
Result lower_layer_norm(const Ctx& c) {
  const Node& n = c.node;
  Tensor none;
  topi::LayerNormOutputs o = topi::layer_norm(c.input(0), c.input(1), c.has(2) ? c.in[2] : none,
                                              n.i("axis"), n.f("epsilon"), "layer_norm",
                                              /*per_channel=*/false, row_fold(c));
  Result r;
  r.outs = {o.y, o.mean, o.inv_std_dev};
  r.schedule = [=](te::Schedule& s, const Tensor&) { topi::schedule_layer_norm_x86(s, o); };
  r.gpu = [=](te::Schedule& s, const target::Target& t) {
    topi::gpu::schedule_reductions_and_outputs(s, {o.y, o.mean, o.inv_std_dev},
                                               topi::gpu::default_threads(t));
  };
  return r;
}

/// InstanceNormalization: a layer norm over the spatial axes, then the per-channel scale and
/// bias.
Result lower_instance_norm(const Ctx& c) {
  Tensor none;
  topi::LayerNormOutputs o =
      topi::layer_norm(c.input(0), c.input(1), c.input(2), 2, c.node.f("epsilon"), "instance_norm",
                       /*per_channel=*/true, row_fold(c));
  Result r{{o.y}, [=](te::Schedule& s, const Tensor&) { topi::schedule_layer_norm_x86(s, o); }};
  r.gpu = [=](te::Schedule& s, const target::Target& t) {
    topi::gpu::schedule_reductions_and_outputs(s, {o.y}, topi::gpu::default_threads(t));
  };
  return r;
}

/// Split: one slice per output along the axis, each its own injective stage.
Result lower_split(const Ctx& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  const int64_t axis = n.i("axis");
  const std::vector<int64_t> sizes = n.ints("split");
  Result r;
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<Expr> shape = x->shape();
    shape[static_cast<size_t>(axis)] = Expr(static_cast<int>(sizes[k]));
    const int64_t start = offset;
    r.outs.push_back(te::compute(
        shape,
        [&](const std::vector<ir::Var>& i) {
          std::vector<Expr> idx(i.begin(), i.end());
          idx[static_cast<size_t>(axis)] =
              idx[static_cast<size_t>(axis)] + Expr(static_cast<int>(start));
          return x(idx);
        },
        "split" + std::to_string(k)));
    offset += sizes[k];
  }
  const std::vector<Tensor> outs = r.outs;
  r.schedule = [=](te::Schedule& s, const Tensor&) {
    for (const Tensor& t : outs) injective(s, t);
  };
  return r;
}

Result dispatch(const Ctx& c, std::vector<bool>* used_inputs) {
  const Node& n = c.node;
  const std::string& op = n.op;
  if (auto it = unaries().find(op); it != unaries().end()) {
    return injective_result(it->second(c.input(0), sanitize(op)));
  }
  if (op == "Pow" && n.inputs.size() == 2 && c.input(1)->dtype() != c.input(0)->dtype()) {
    // ONNX lets the exponent have another type than the base: it is converted to the base's.
    const Tensor& base = c.input(0);
    if (!base->dtype().is_float()) c.fail("Pow of an integer base is not supported");
    Tensor e = topi::cast(c.input(1), base->dtype(), "pow_exponent");
    Tensor p = topi::pow(base, e, "pow");
    return {{p}, [=](te::Schedule& s, const Tensor& output) {
              s[e].compute_inline();
              if (p != output) s[p].compute_inline();
              injective(s, output);
            }};
  }
  if (auto it = binaries().find(op); it != binaries().end()) {
    if (n.inputs.empty()) c.fail("at least one input is required");
    Tensor t = c.input(0);
    if (n.inputs.size() == 1) {
      return injective_result(topi::elementwise(
          t, [](Expr e) { return e; }, "copy"));
    }
    for (size_t i = 1; i < n.inputs.size(); ++i) t = it->second(t, c.input(i), sanitize(op));
    return injective_result(t);
  }
  if (op == "Conv" || op == "ConvTranspose") return lower_conv(c, op == "ConvTranspose");
  if (op == "QConv") return lower_qconv(c);
  if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    Tensor zp = c.has(2) ? c.in[2] : Tensor();
    const int axis = static_cast<int>(n.i("axis"));
    if (op == "DequantizeLinear") {
      return injective_result(topi::dequantize_linear(c.input(0), c.input(1), zp, axis));
    }
    return injective_result(
        topi::quantize_linear(c.input(0), c.input(1), zp, axis, c.out_value().ir_dtype()));
  }
  if (op == "Gemm") return lower_gemm(c);
  if (op == "MatMul") {
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
    return lower_matmul(c);
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" ||
      op == "GlobalMaxPool") {
    return lower_pool(c);
  }
  if (op == "LSTM" || op == "GRU") return lower_lstm(c, used_inputs);
  if (op == "BatchNormalization") {
    return injective_result(topi::batch_norm_inference(c.input(0), c.input(1), c.input(2),
                                                       c.input(3), c.input(4), n.f("epsilon")));
  }
  if (op == "LeakyRelu") return injective_result(topi::leaky_relu(c.input(0), n.f("alpha")));
  if (op == "Clip") return lower_clip(c);
  if (op == "Softmax" || op == "LogSoftmax") {
    Tensor y = op == "Softmax"
                   ? topi::softmax(c.input(0), n.i("axis"), "softmax", row_fold(c))
                   : topi::log_softmax(c.input(0), n.i("axis"), "log_softmax", row_fold(c));
    return {{y}, [=](te::Schedule& s, const Tensor& output) {
              topi::schedule_softmax_x86(s, y);
              then_injective(s, y, output);
            }};
  }
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    return injective_result(topi::reshape(c.input(0), c.out_value().shape, sanitize(op)));
  }
  if (op == "Transpose") return injective_result(topi::transpose(c.input(0), n.ints("perm")));
  if (op == "LayoutTransform") {
    return injective_result(topi::layout_transform(c.input(0), static_cast<int>(n.i("src_block")),
                                                   static_cast<int>(n.i("dst_block")),
                                                   n.i("channels", 0)));
  }
  if (op == "Gather") return injective_result(topi::take(c.input(0), c.input(1), n.i("axis")));
  if (op == "Concat") {
    std::vector<Tensor> ins;
    for (size_t i = 0; i < n.inputs.size(); ++i) ins.push_back(c.input(i));
    return injective_result(topi::concat(ins, n.i("axis")));
  }
  if (op == "Pad") {
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
  if (op == "Slice") {
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
  if (op == "Cast") {
    const KilnDType t = runtime::parse_dtype(n.s("to"));
    return injective_result(
        topi::cast(c.input(0), ir::DataType::parse(runtime::dtype_to_string(t))));
  }
  if (unary_math_ops().count(op)) return lower_unary_math(c);
  if (broadcast_other_ops().count(op)) return lower_broadcast_other(c);
  if (reductions().count(op) || op == "ArgMax" || op == "ArgMin") return lower_reduce(c);
  if (op == "Split") return lower_split(c);
  if (op == "GatherElements") {
    return injective_result(
        topi::gather_elements(c.input(0), c.input(1), n.i("axis"), "gather_elements"));
  }
  if (op == "CumSum" || op == "Hardmax") {
    Tensor y = op == "CumSum" ? topi::cumsum(c.input(0), n.i("axis"), n.i("exclusive") != 0,
                                             n.i("reverse") != 0, "cumsum")
                              : topi::hardmax(c.input(0), n.i("axis"), "hardmax");
    return {{y}, [=](te::Schedule& s, const Tensor& output) {
              topi::schedule_reduce_x86(s, y);
              then_injective(s, y, output);
            }};
  }
  if (op == "Einsum") {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < n.inputs.size(); ++i) xs.push_back(c.input(i));
    Tensor y = topi::einsum(n.s("equation"), xs, "einsum");
    if (!y->reduce_axis.empty()) {
      return {{y}, [=](te::Schedule& s, const Tensor& output) {
                topi::schedule_reduce_x86(s, y);
                then_injective(s, y, output);
              }};
    }
    return injective_result(y);
  }
  if (op == "Trilu") {
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
  if (op == "Mod") {
    const ir::DataType t = c.input(0)->dtype();
    const bool fmod = n.i("fmod") != 0;
    return injective_result(topi::broadcast_binary(
        c.input(0), c.input(1),
        [=](Expr a, Expr b) -> Expr {
          if (t.is_float()) {  // C fmod: the sign of the dividend
            return a - ir::call(t, "trunc", {a / b}, ir::CallKind::kPureIntrinsic) * b;
          }
          if (fmod || !t.is_int()) return a % b;
          // Python's mod: the sign of the divisor.
          const Expr r = a % b, zero = ir::make_zero(t);
          return ir::select(r != zero && ((r < zero) != (b < zero)), r + b, r);
        },
        "mod"));
  }
  if (op == "LayerNormalization") return lower_layer_norm(c);
  if (op == "InstanceNormalization") return lower_instance_norm(c);
  if (op == "Expand") {
    return injective_result(topi::broadcast_to(c.input(0), c.out_value().shape, "expand"));
  }
  if (op == "Tile") return injective_result(topi::tile(c.input(0), n.ints("repeats"), "tile"));
  if (op == "Resize") {
    topi::ResizeMethod method;
    method.mode = n.s("mode");
    method.coord = n.s("coordinate_transformation_mode");
    method.nearest_mode = n.s("nearest_mode");
    method.cubic_a = static_cast<float>(n.f("cubic_coeff_a"));
    method.exclude_outside = n.i("exclude_outside") != 0;
    Tensor y = topi::resize(c.input(0), c.out_value().shape, n.floats("scales"), method, "resize");
    return {{y}, [=](te::Schedule& s, const Tensor& output) {
              topi::schedule_resize_x86(s, y);
              if (y != output) s[y].compute_inline();
              injective(s, output);
            }};
  }
  c.fail("operator '" + op + "' has no lowering");
}

/// The GPU template of a group's master, by its operator: "" for none.
std::string gpu_template(const Node& n, const Result& master) {
  if (!master.anchor.defined()) return "";  // 1-D forms, products of more than 3 dimensions
  if (n.op == "Conv") return n.i("group") == 1 ? "conv2d_nchw_gpu" : "depthwise_conv2d_nchw_gpu";
  if (n.op == "ConvTranspose") return "conv2d_transpose_nchw_gpu";
  if (n.op == "Gemm" || n.op == "MatMul") {
    return master.anchor.ndim() == 3 ? "batch_matmul_gpu" : "matmul_gpu";
  }
  if (n.op == "MaxPool" || n.op == "AveragePool" || n.op == "GlobalAveragePool" ||
      n.op == "GlobalMaxPool") {
    return "pool2d_gpu";
  }
  return "";
}

/// A group's schedule for a GPU target: the master's template (table in docs/gpu.md, section 5)
/// tiling its anchor with the group's epilogue computed in its tile, at the config `tuning`
/// chooses, the group's other pure stages inlined; softmax, log-softmax and the reductions by
/// reduce_gpu (each reduction a kernel); an elementwise / injective group as one kernel
/// (schedule_injective); an LSTM by its own schedule. kiln::Error naming the node and the operator
/// for a group with no GPU schedule yet (1-D convolutions, products of more than 3 dimensions).
void schedule_group_gpu(const Graph& g, const FusedGroup& group, const Result& master,
                        te::Schedule& s, const Tensor& output, const Tuning& tuning,
                        const target::Target& target) {
  const Node& n = g.nodes()[group.master];
  if (master.gpu) {
    master.gpu(s, target);
    return;
  }
  const std::string tmpl = gpu_template(n, master);
  const OpPattern pattern = op_pattern(n);
  const bool injective = pattern == OpPattern::kElemWise || pattern == OpPattern::kBroadcast ||
                         pattern == OpPattern::kInjective;
  const bool reduction = n.op == "Softmax" || n.op == "LogSoftmax" || n.op == "ArgMax" ||
                         n.op == "ArgMin" || n.op == "Hardmax" || n.op == "CumSum" ||
                         reductions().count(n.op);
  if (reduction) {
    const space::ConfigSpace space = topi::gpu::reduce_gpu_space(output);
    topi::gpu::schedule_reduce_gpu(s, output, topi::gpu::reduce_gpu_default(space, target));
    return;
  }
  if (tmpl.empty() && !injective) {
    std::string form;
    if (n.op == "Conv" || n.op == "ConvTranspose" || n.op.find("Pool") != std::string::npos) {
      form = " in 1-D";
    }
    if (n.op == "MatMul") form = " of more than 3 dimensions";
    KILN_USER_ERROR() << "graph build for " << target.kind << ": node '" << n.name << "' (" << n.op
                      << "): operator '" << n.op << "'" << form << " has no GPU schedule yet";
  }
  // Pure stages are inlined; the anchor and the reductions it reads (an average's sum) are the
  // template's to place.
  for (te::Stage st : s->stages) {
    if (st->is_placeholder() || st->origin_op == output) continue;
    if (!tmpl.empty() && (st->origin_op == master.anchor || !st->origin_op->reduce_axis.empty())) {
      continue;
    }
    st.compute_inline();
  }
  if (!tmpl.empty()) {
    tuning.schedule(tmpl, s, master.anchor, output);
  } else {
    // Blocks of at most 256 threads: a common size that every GPU of ours runs.
    topi::gpu::schedule_injective(s, output, std::min(256, target.max_num_threads));
  }
}

}  // namespace

bool has_lowering(const std::string& op) {
  return unaries().count(op) || binaries().count(op) || unary_math_ops().count(op) ||
         broadcast_other_ops().count(op) || reductions().count(op) ||
         std::find(other_ops().begin(), other_ops().end(), op) != other_ops().end();
}

LoweredOp lower_group(const Graph& g, const FusedGroup& group, autotune::ConfigSource* configs,
                      const std::string& target) {
  KILN_ICHECK(!group.nodes.empty()) << "lower_group: an empty group";
  // Every value the group reads or computes, as a tensor: placeholders for the external inputs
  // (one per distinct value: Add(x, x) reads one argument twice), topi's stages for the rest.
  std::map<ValueId, Tensor> tensors;
  std::set<std::string> taken;
  for (ValueId v : group.inputs) tensors[v] = placeholder_of(g.value(v), &taken);
  std::set<ValueId> used_inputs;
  Result master;
  std::vector<Tensor> master_outs;
  // For each node but the master: its outputs and the tensors it read, to find its stages.
  std::vector<std::pair<std::vector<Tensor>, std::set<const te::TensorNode*>>> others;

  for (size_t index : group.nodes) {
    const Node& node = g.nodes().at(index);
    Ctx c{g, node, {}, Tuning{configs, target}};
    if (!has_lowering(node.op)) c.fail("operator '" + node.op + "' has no lowering");
    std::set<const te::TensorNode*> read;
    for (ValueId v : node.inputs) {
      if (v == kNoValue) {
        c.in.emplace_back();
        continue;
      }
      auto it = tensors.find(v);
      KILN_ICHECK(it != tensors.end()) << "lower_group: " << c.where() << " reads '"
                                       << g.value(v).name << "', which the group lacks";
      c.in.push_back(it->second);
      read.insert(it->second.get());
    }
    std::vector<bool> used(node.inputs.size(), true);
    Result r = dispatch(c, &used);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] != kNoValue && used[i]) used_inputs.insert(node.inputs[i]);
    }
    std::vector<Tensor> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      if (i >= r.outs.size() || !r.outs[i].defined()) {
        c.fail("output " + std::to_string(i) + " is not supported");
      }
      const Value& v = g.value(node.outputs[i]);
      std::vector<int64_t> shape = topi::const_shape(r.outs[i], node.op);
      KILN_ICHECK(shape == v.shape)
          << "graph build: " << c.where() << ": the lowering computes output " << i
          << " with shape " << topi::shape_str(r.outs[i]->shape()) << ", the graph says "
          << v.type_string();
      tensors[node.outputs[i]] = r.outs[i];
    }
    if (index == group.master) {
      master = r;
      for (const Tensor& t : r.outs) {
        if (t.defined()) master_outs.push_back(t);
      }
    } else {
      others.emplace_back(r.outs, std::move(read));
    }
  }
  KILN_ICHECK(master.schedule) << "lower_group: the master node is not in the group";

  LoweredOp op;
  std::vector<Tensor> outputs;
  for (ValueId v : group.outputs) outputs.push_back(tensors.at(v));
  if (outputs.empty()) {
    KILN_USER_ERROR() << "graph build: node '" << g.nodes()[group.master].name << "' has no output";
  }
  // The schedule covers every output the master's topi made (an LSTM's absent ones become
  // temporaries); a fused group has one output, its last stage.
  op.schedule = te::create_schedule(group.nodes.size() == 1 ? master_outs : outputs);
  // The stages of the nodes fused into the master's kernel are inlined, all but the last.
  std::set<const te::TensorNode*> stored;
  for (const Tensor& t : outputs) stored.insert(t.get());
  for (const auto& [outs, read] : others) {
    std::vector<Tensor> todo;
    for (const Tensor& t : outs) {
      if (t.defined()) todo.push_back(t);
    }
    std::set<const te::TensorNode*> seen;
    while (!todo.empty()) {
      Tensor t = todo.back();
      todo.pop_back();
      if (read.count(t.get()) || !t->is_compute() || !seen.insert(t.get()).second) continue;
      if (!stored.count(t.get())) op.schedule[t].compute_inline();
      for (const Tensor& in : t->inputs()) todo.push_back(in);
    }
  }
  const target::Target tgt = target::Target::parse(target);
  if (tgt.is_gpu()) {
    schedule_group_gpu(g, group, master, op.schedule, tensors.at(group.output),
                       Tuning{configs, target}, tgt);
  } else {
    master.schedule(op.schedule, tensors.at(group.output));
  }

  for (ValueId v : group.inputs) {
    if (!used_inputs.count(v)) continue;
    op.args.push_back(tensors.at(v));
    op.values.push_back(v);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    op.args.push_back(outputs[i]);
    op.values.push_back(group.outputs[i]);
  }
  return op;
}

}  // namespace kiln::graph
