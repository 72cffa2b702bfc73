// The ONNX LSTM operator (each direction: forward, reverse, both; layout 0, default activations
// sigmoid / tanh / tanh, no sequence_lens, no clip) as an exact decomposition into tensor
// expressions unrolled over the T time steps:
//
//   xw[t, b, g]  = sum_k X[t, b, k] * W[0, g, k]            one dense for all steps (g in [0, 4H))
//                                                            (both with W and R packed in panels)
//   rec_t[b, g]  = sum_k h_{t-1}[b, k] * R[0, g, k]          one GEMV per step (none when h_{-1} =
//   0) pre_t(gate)  = xw[t] + rec_t + Wb + Rb                   gates in ONNX order i, o, f, c c_t
//   = sigmoid(pre_f + Pf c_{t-1}) c_{t-1} + sigmoid(pre_i + Pi c_{t-1}) tanh(pre_c) h_t =
//   sigmoid(pre_o + Po c_t) tanh(c_t)
//
// Each step's c_t and h_t is its own tensor; the gate math is written inside them (inlined). Y
// gathers h_0 ... h_{T-1}. The reverse direction runs the same steps over X from its last time
// step to its first (Y in time order); a bidirectional LSTM is both, each with its direction's
// slice of the weights and states, their outputs side by side along num_directions.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::topi {

struct LstmOutputs {
  te::Tensor y;    ///< [T, 1, B, H]: every step's hidden state
  te::Tensor y_h;  ///< [1, B, H]: the last hidden state
  te::Tensor y_c;  ///< [1, B, H]: the last cell state (undefined for a GRU)
  /// The intermediate stages (packed weights, projections, each step's c and h), producers
  /// first: what schedule_lstm_x86 schedules besides the outputs.
  std::vector<te::Tensor> stages;
  /// Reshaped views of inputs (X as [T * B, I], initial_h as [B, H]) that the schedule inlines.
  std::vector<te::Tensor> views;
};

/// One direction of an LSTM: which slice of the weights and states (0 or 1) and whether it runs
/// backwards in time.
struct LstmDirection {
  int index = 0;
  bool reverse = false;
};

/// x [T, B, I], w [D, 4H, I], r [D, 4H, H]; optional (undefined tensors when absent): b [D, 8H]
/// (Wb then Rb), initial_h and initial_c [D, B, H] (zero when absent), p [D, 3H] (peepholes i, o,
/// f), with D = 1, or 2 for a bidirectional LSTM's weights of which `dir` picks one. All shapes
/// must be constant; kiln::Error names the tensor and both shapes on a mismatch.
/// With T = 1 and no initial_h, R is not read (h_{-1} = 0): leave it out of build()'s arguments.
/// The projections read the weights packed in panels of bn gates, [ceil(4H / bn), K, bn] (zero
/// beyond 4H; K = I for W, H for R): a stage packs them, or, with `packed_bn` > 0, w and r are
/// given so, one block per direction, [D, ceil(4H / bn), K, bn] (what the graph's pack_weights
/// makes of constant weights, bn = lstm_panel_width(4H)), and are read as they are.
LstmOutputs lstm(const te::Tensor& x, const te::Tensor& w, const te::Tensor& r,
                 const te::Tensor& b = {}, const te::Tensor& initial_h = {},
                 const te::Tensor& initial_c = {}, const te::Tensor& p = {},
                 const std::string& name = "lstm", int64_t packed_bn = 0, LstmDirection dir = {});

/// A bidirectional LSTM or GRU from its two directions (lstm() or gru() with dir {0, false} and
/// {1, true} over unpacked weights, D = 2): Y [T, 2, B, H], Y_h (and Y_c) [2, B, H]; each
/// direction's stages are scheduled as lstm()'s.
LstmOutputs both_directions(const LstmOutputs& forward, const LstmOutputs& backward,
                            const std::string& name);

/// The ONNX GRU (layout 0, default activations sigmoid / tanh, no sequence_lens, no clip), one
/// direction, the same way: x [T, B, I], w [D, 3H, I], r [D, 3H, H] (gates z, r, h); optional b
/// [D, 6H], initial_h [D, B, H]. The result has no y_c. Per step:
///   z = sigmoid(x W_z + h R_z + Wb_z + Rb_z), r likewise,
///   h~ = tanh(x W_h + (r * h) R_h + Rb_h + Wb_h), or with linear_before_reset
///   h~ = tanh(x W_h + r * (h R_h + Rb_h) + Wb_h);  h' = (1 - z) h~ + z h.
/// Stages pack the weights' gates in panels, or, with `packed_bn` > 0, w and r are given packed
/// (pack_weights, bn = lstm_panel_width(H)): w [D, ceil(3H / bn), I, bn], r [D, P, H, bn] with the
/// row segments of gru_panel_segments one after the other, each in whole panels.
LstmOutputs gru(const te::Tensor& x, const te::Tensor& w, const te::Tensor& r, const te::Tensor& b,
                const te::Tensor& initial_h, bool linear_before_reset,
                const std::string& name = "gru", LstmDirection dir = {}, int64_t packed_bn = 0);

/// The (first row, rows) of R a GRU's recurrent products read as one packed block each: all 3H
/// gates with linear_before_reset; else z and r (2H), then h (H), which multiplies r * h.
std::vector<std::pair<int64_t, int64_t>> gru_panel_segments(int64_t hidden,
                                                            bool linear_before_reset);

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
