// The recurrent operators: LSTM and GRU (every direction, time-major or batch-first), lowered to
// topi's LSTM / GRU with their own x86 and GPU schedules.
#include <algorithm>

#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/gpu/lstm_gpu.h"
#include "compiler/topi/lstm.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using te::Tensor;

LowerResult lower_lstm(const LowerCtx& c) {
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
                       dir, n.i("packed_bn", 0));
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
  if (c.in_shape(0)[batch_first ? 1 : 0] == 1 && !c.has(5)) (*c.used_inputs)[2] = false;
  LowerResult r;
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

// --- validation (beyond the schema checks every node gets) ---------------------------------

/// LSTM and GRU: X [T, B, I] (or batch first), W [D, gates*H, I], R [D, gates*H, H], the bias,
/// initial states and LSTM's peepholes against them, the activations' count and names.
void check_recurrent(const NodeCheck& nc) {
  const bool gru = nc.op() == "GRU";
  const int64_t gates = gru ? 3 : 4, acts = gru ? 2 : 3;
  const std::string gs = str(gates);
  const std::vector<int64_t>& x = nc.shape(0);
  if (x.size() != 3)
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) + "; " + nc.op() + " takes rank 3");
  const int64_t layout = nc.attr_i("layout", 0);
  if (layout != 0 && layout != 1)
    nc.fail("attribute 'layout' is " + str(layout) + "; it must be 0 or 1");
  const std::string dir = nc.attr_s("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    nc.fail("attribute 'direction' is '" + dir + "'; it must be forward, reverse or bidirectional");
  }
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  const int64_t batch = layout == 0 ? x[1] : x[0];
  const std::vector<int64_t>& w = nc.shape(1);
  if (w.size() != 3)
    nc.fail(nc.input_shaped(1) + " has rank " + str(nc.rank(1)) + "; W is [num_directions, " + gs +
            "*hidden_size, input_size]");
  int64_t hidden = 0;
  if (nc.attr("hidden_size") != nullptr) {
    hidden = nc.attr_i("hidden_size", 0);
    if (hidden < 1) nc.fail("attribute 'hidden_size' must be positive, got " + str(hidden));
  } else {
    if (w[1] < gates || w[1] % gates != 0) {
      nc.fail(nc.input_shaped(1) + " has " + str(w[1]) + " rows in dimension 1, which is not " +
              gs + " * hidden_size");
    }
    hidden = w[1] / gates;
  }
  const std::string sizes = "num_directions " + str(dirs) + " (direction '" + dir +
                            "'), hidden_size " + str(hidden) + ", input_size " + str(x[2]) +
                            ", batch " + str(batch) + " from " + nc.input_shaped(0);
  auto expect = [&](size_t i, const std::vector<int64_t>& want) {
    if (nc.has(i) && nc.shape(i) != want)
      nc.fail(nc.input_shaped(i) + " must be " + str(want) + " (" + sizes + ")");
  };
  const std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{dirs, batch, hidden}
                                                 : std::vector<int64_t>{batch, dirs, hidden};
  expect(1, {dirs, gates * hidden, x[2]});
  expect(2, {dirs, gates * hidden, hidden});
  expect(3, {dirs, 2 * gates * hidden});
  expect(4, {batch});
  expect(5, state);
  if (!gru) {
    expect(6, state);
    expect(7, {dirs, 3 * hidden});
  }
  if (const onnx::AttributeProto* act = nc.attr("activations")) {
    static const std::set<std::string> kKnown = {
        "Affine",  "Elu",      "HardSigmoid", "LeakyRelu", "Relu",           "ScaledTanh",
        "Sigmoid", "Softplus", "Softsign",    "Tanh",      "ThresholdedRelu"};
    if (act->strings_size() != acts * dirs) {
      nc.fail("attribute 'activations' has " + str(act->strings_size()) +
              " functions; direction '" + dir + "' needs " + str(acts * dirs) +
              (gru ? " (f, g per direction)" : " (f, g, h per direction)"));
    }
    for (const std::string& f : act->strings()) {
      if (!kKnown.count(f))
        nc.fail("attribute 'activations' names '" + f + "', not an activation function of " +
                nc.op());
    }
  }
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_recurrent(ImportCtx& c) {
  const bool gru = c.proto().op_type() == "GRU";
  const int64_t gates = gru ? 3 : 4, acts = gru ? 2 : 3;
  const Value& w = c.in_value(1);  // [num_directions, gates*hidden, input_size]
  Attrs a;
  a["direction"] = c.attr_s("direction", "forward");
  a["hidden_size"] = c.attr_i("hidden_size", w.shape[1] / gates);
  if (gru) {
    a["linear_before_reset"] = c.attr_i("linear_before_reset", 0);
  } else {
    a["input_forget"] = c.attr_i("input_forget", 0);
  }
  a["layout"] = c.attr_i("layout", 0);
  if (const onnx::AttributeProto* clip = c.attr("clip")) a["clip"] = clip->f();
  if (const onnx::AttributeProto* act = c.attr("activations")) {
    for (int i = 0; i < act->strings_size(); ++i) {
      const char* expect = i % acts == 0 ? "Sigmoid" : "Tanh";
      if (act->strings(i) != expect) {
        c.fail(gru ? "only the default activations (Sigmoid, Tanh) are supported"
                   : "only the default activations (Sigmoid, Tanh, Tanh) are supported");
      }
    }
  }
  if (c.attr("activation_alpha") || c.attr("activation_beta")) {
    c.fail("activation_alpha/activation_beta are not supported");
  }
  return a;
}

// --- libonnx shape inference ------------------------------------------------------------------

/// Inference needs hidden_size to give the outputs a static shape; the default is W's.
bool recurrent_inference(const InferenceForm& f, std::vector<onnx::TypeProto>* types) {
  if (f.inputs.size() > 1 && f.inputs[1] != nullptr && f.inputs[1]->shape.size() == 3 &&
      std::none_of(f.node.attribute().begin(), f.node.attribute().end(),
                   [](const onnx::AttributeProto& a) { return a.name() == "hidden_size"; })) {
    onnx::AttributeProto* a = f.n->add_attribute();
    a->set_name("hidden_size");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(f.inputs[1]->shape[1] / (f.node.op_type() == "GRU" ? 3 : 4));
  }
  return false;
}

}  // namespace

void register_rnn(Registry& r) {
  for (const char* op : {"GRU", "LSTM"}) {
    r.add({.name = op,
           .family = "rnn",
           .pattern = OpPattern::kOpaque,
           .check = check_recurrent,
           .import = import_recurrent,
           .inference_form = recurrent_inference,
           .lower = lower_lstm,
           .gpu = GpuStrategy::kOwn});
  }
}

}  // namespace kiln::graph::ops
