// The ONNX LSTM operator (forward direction, layout 0, default activations sigmoid / tanh / tanh,
// no sequence_lens, no clip) as an exact decomposition into tensor expressions unrolled over the
// T time steps:
//
//   xw[t, b, g]  = sum_k X[t, b, k] * W[0, g, k]            one dense for all steps (g in [0, 4H))
//                                                            (both with W and R packed in panels)
//   rec_t[b, g]  = sum_k h_{t-1}[b, k] * R[0, g, k]          one GEMV per step (none when h_{-1} =
//   0) pre_t(gate)  = xw[t] + rec_t + Wb + Rb                   gates in ONNX order i, o, f, c c_t
//   = sigmoid(pre_f + Pf c_{t-1}) c_{t-1} + sigmoid(pre_i + Pi c_{t-1}) tanh(pre_c) h_t =
//   sigmoid(pre_o + Po c_t) tanh(c_t)
//
// Each step's c_t and h_t is its own tensor; the gate math is written inside them (inlined). Y
// gathers h_0 ... h_{T-1}.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::topi {

struct LstmOutputs {
  te::Tensor y;    ///< [T, 1, B, H]: every step's hidden state
  te::Tensor y_h;  ///< [1, B, H]: the last hidden state
  te::Tensor y_c;  ///< [1, B, H]: the last cell state
  /// The intermediate stages (packed weights, projections, each step's c and h), producers
  /// first: what schedule_lstm_x86 schedules besides the outputs.
  std::vector<te::Tensor> stages;
  /// Reshaped views of inputs (X as [T * B, I], initial_h as [B, H]) that the schedule inlines.
  std::vector<te::Tensor> views;
};

/// x [T, B, I], w [1, 4H, I], r [1, 4H, H]; optional (undefined tensors when absent): b [1, 8H]
/// (Wb then Rb), initial_h and initial_c [1, B, H] (zero when absent), p [1, 3H] (peepholes i, o,
/// f). All shapes must be constant; kiln::Error names the tensor and both shapes on a mismatch.
/// With T = 1 and no initial_h, R is not read (h_{-1} = 0): leave it out of build()'s arguments.
/// The projections read the weights packed in panels of bn gates, [ceil(4H / bn), K, bn] (zero
/// beyond 4H; K = I for W, H for R): a stage packs them, or, with `packed_bn` > 0, w and r are
/// given so (what the graph's pack_weights makes of constant weights, bn = lstm_panel_width(4H))
/// and are read as they are.
LstmOutputs lstm(const te::Tensor& x, const te::Tensor& w, const te::Tensor& r,
                 const te::Tensor& b = {}, const te::Tensor& initial_h = {},
                 const te::Tensor& initial_c = {}, const te::Tensor& p = {},
                 const std::string& name = "lstm", int64_t packed_bn = 0);

/// The panel width of the LSTM's packed weights for 4H gates: 64, 32 or 16 when one divides 4H,
/// else 64 (16 below 256 gates) with the last panel zero-padded.
int64_t lstm_panel_width(int64_t gates);

/// How one stage of an lstm() is scheduled.
using StageSchedule = std::function<void(te::Schedule&, const te::Tensor&)>;

/// Schedules every stage of an lstm() still at the root: the input views inlined, each product
/// (a stage with a reduction) by `product`, every other stage by `elementwise`. The x86 and GPU
/// schedules are this walk with their own two.
void schedule_lstm_stages(te::Schedule& s, const LstmOutputs& out, const StageSchedule& product,
                          const StageSchedule& elementwise);

/// Schedules every stage of an lstm() in `s`: the projections (xw, one dense over all steps, and
/// each step's GEMV) with dense's register-tile template at its default (one weight panel of gates
/// per tile, vectorized, accumulated in registers, run in parallel); the weight packing, the
/// per-step states and the outputs with schedule_injective_x86; the input views inlined.
void schedule_lstm_x86(te::Schedule& s, const LstmOutputs& out);

/// A schedule of the three outputs with schedule_lstm_x86 applied.
te::Schedule schedule_lstm_x86(const LstmOutputs& out);

}  // namespace kiln::topi
