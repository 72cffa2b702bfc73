// The normalizations and the softmax family: BatchNormalization (inference: a per-channel scale
// and shift), LayerNormalization, InstanceNormalization, Softmax, LogSoftmax, Hardmax. Softmax and
// LogSoftmax are opaque, as in TVM: three stages over one axis (max, sum of exponentials,
// normalization) fit neither the one-reduction schedule of kCommReduce nor an epilogue.
#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/reduce_gpu.h"
#include "compiler/topi/nn.h"
#include "compiler/topi/reduce.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using te::Tensor;

LowerResult lower_batch_norm(const LowerCtx& c) {
  return injective_result(topi::batch_norm_inference(c.input(0), c.input(1), c.input(2), c.input(3),
                                                     c.input(4), c.node.f("epsilon")));
}

/// LayerNormalization: Y, Mean and InvStdDev (all three computed; the absent ones are
/// temporaries), an opaque node of its own.
LowerResult lower_layer_norm(const LowerCtx& c) {
  const Node& n = c.node;
  Tensor none;
  topi::LayerNormOutputs o = topi::layer_norm(c.input(0), c.input(1), c.has(2) ? c.in[2] : none,
                                              n.i("axis"), n.f("epsilon"), "layer_norm",
                                              /*per_channel=*/false, row_fold(c));
  LowerResult r;
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
LowerResult lower_instance_norm(const LowerCtx& c) {
  Tensor none;
  topi::LayerNormOutputs o =
      topi::layer_norm(c.input(0), c.input(1), c.input(2), 2, c.node.f("epsilon"), "instance_norm",
                       /*per_channel=*/true, row_fold(c));
  LowerResult r{{o.y},
                [=](te::Schedule& s, const Tensor&) { topi::schedule_layer_norm_x86(s, o); }};
  r.gpu = [=](te::Schedule& s, const target::Target& t) {
    topi::gpu::schedule_reductions_and_outputs(s, {o.y}, topi::gpu::default_threads(t));
  };
  return r;
}

LowerResult lower_softmax(const LowerCtx& c) {
  const Node& n = c.node;
  const std::string& op = n.op;
  Tensor y = op == "Softmax"
                 ? topi::softmax(c.input(0), n.i("axis"), "softmax", row_fold(c))
                 : topi::log_softmax(c.input(0), n.i("axis"), "log_softmax", row_fold(c));
  return {{y}, [=](te::Schedule& s, const Tensor& output) {
            topi::schedule_softmax_x86(s, y);
            then_injective(s, y, output);
          }};
}

LowerResult lower_hardmax(const LowerCtx& c) {
  return reduce_result(topi::hardmax(c.input(0), c.node.i("axis"), "hardmax"));
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

void check_batch_norm(const NodeCheck& nc) {
  const int64_t channels = nc.rank(0) >= 2 ? nc.shape(0)[1] : 1;
  for (size_t i = 1; i <= 4; ++i) {
    if (nc.shape(i) != std::vector<int64_t>{channels}) {
      nc.fail(nc.input_shaped(i) + " must be [" + str(channels) + "]: " + nc.input_shaped(0) +
              " has " + str(channels) + " channels");
    }
  }
  const int64_t training = nc.attr_i("training_mode", 0);
  if (training != 0 && training != 1) {
    nc.fail("attribute 'training_mode' is " + str(training) + "; it must be 0 or 1");
  }
}

/// LayerNormalization: axis in range; Scale and B broadcast to X's normalized dimensions
/// (those from axis on).
void check_layer_norm(const NodeCheck& nc) {
  const int64_t axis =
      nc.axis_in(nc.attr_i("axis", -1), nc.rank(0), "attribute 'axis'", nc.input(0));
  const std::vector<int64_t> norm(nc.shape(0).begin() + axis, nc.shape(0).end());
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!nc.has(i)) continue;
    const auto& p = nc.shape(i);
    bool ok = p.size() <= norm.size();
    for (size_t k = 1; ok && k <= p.size(); ++k) {
      ok = p[p.size() - k] == norm[norm.size() - k] || p[p.size() - k] == 1;
    }
    if (!ok) {
      nc.fail(nc.input_shaped(i) + " does not broadcast to " + str(norm) + ", the dimensions of " +
              nc.input_shaped(0) + " from axis " + str(axis) + " on");
    }
  }
}

/// InstanceNormalization: N x C x D1 x ... input, scale and B of C elements each.
void check_instance_norm(const NodeCheck& nc) {
  if (nc.rank(0) < 3) {
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) +
            "; InstanceNormalization takes N x C x D1 x ... (rank 3 or more)");
  }
  const int64_t ch = nc.shape(0)[1];
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (nc.shape(i) != std::vector<int64_t>{ch}) {
      nc.fail(nc.input_shaped(i) + " must be 1-D of size C = " + str(ch) + " (the channels of " +
              nc.input_shaped(0) + ")");
    }
  }
}

/// Softmax, LogSoftmax, Hardmax: the axis in range.
void check_softmax(const NodeCheck& nc) {
  nc.axis_in(nc.attr_i("axis", nc.opset() < 13 ? 1 : -1), nc.rank(0), "attribute 'axis'",
             nc.input(0));
  return;
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_batch_norm(ImportCtx& c) {
  Attrs a;
  if (c.attr_i("training_mode", 0) != 0) c.fail("training_mode=1 is not supported");
  for (int i = 1; i < c.proto().output_size(); ++i) {
    if (!c.proto().output(i).empty()) c.fail("only the first output (Y) is supported");
  }
  a["epsilon"] = c.attr_f("epsilon", 1e-5f);
  return a;
}

Attrs import_softmax(ImportCtx& c) {
  Attrs a;
  const int64_t rank = c.in_rank(0);
  const int64_t axis = norm_axis(c.attr_i("axis", c.opset() < 13 ? 1 : -1), rank);
  if (c.opset() < 13 && axis != rank - 1) {
    // Before opset 13 the input is flattened to 2-D at `axis`; the same thing unless the axis is
    // the last one or all later dimensions are 1.
    const auto& s = c.in_value(0).shape;
    for (int64_t d = axis + 1; d < rank; ++d) {
      if (s[static_cast<size_t>(d)] != 1) {
        c.fail("opset " + std::to_string(c.opset()) +
               " semantics (softmax over all dimensions from axis " + std::to_string(axis) +
               " on) are not supported; re-export with opset 13 or later");
      }
    }
  }
  a["axis"] = axis;
  return a;
}

Attrs import_instance_norm(ImportCtx& c) {
  Attrs a;
  a["epsilon"] = c.attr_f("epsilon", 1e-5f);
  return a;
}

Attrs import_layer_norm(ImportCtx& c) {
  Attrs a;
  a["axis"] = norm_axis(c.attr_i("axis", -1), c.in_rank(0));
  a["epsilon"] = c.attr_f("epsilon", 1e-5f);
  if (c.attr_i("stash_type", 1) != 1) {
    c.fail("stash_type=" + std::to_string(c.attr_i("stash_type", 1)) +
           " is not supported (only 1: statistics in float32)");
  }
  return a;
}

}  // namespace

void register_norm(Registry& r) {
  r.add({.name = "BatchNormalization",
         .family = "nn/norm",
         .pattern = OpPattern::kBroadcast,
         .check = check_batch_norm,
         .import = import_batch_norm,
         .lower = lower_batch_norm,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "InstanceNormalization",
         .family = "nn/norm",
         .pattern = OpPattern::kOpaque,
         .check = check_instance_norm,
         .import = import_instance_norm,
         .lower = lower_instance_norm,
         .gpu = GpuStrategy::kOwn});
  r.add({.name = "LayerNormalization",
         .family = "nn/norm",
         .pattern = OpPattern::kOpaque,
         .check = check_layer_norm,
         .import = import_layer_norm,
         .lower = lower_layer_norm,
         .gpu = GpuStrategy::kOwn});
  r.add({.name = "Hardmax",
         .family = "nn/norm",
         .pattern = OpPattern::kOpaque,
         .check = check_softmax,
         .import = import_softmax,
         .lower = lower_hardmax,
         .gpu = GpuStrategy::kReduce});
  for (const char* op : {"LogSoftmax", "Softmax"}) {
    r.add({.name = op,
           .family = "nn/norm",
           .pattern = OpPattern::kOpaque,
           .check = check_softmax,
           .import = import_softmax,
           .lower = lower_softmax,
           .gpu = GpuStrategy::kReduce});
  }
}

}  // namespace kiln::graph::ops
