// The LSTM (topi::lstm, unrolled over time) on a GPU: its products (the input projection of all
// steps at once, and each step's recurrent GEMV) through the matmul_gpu template at its default
// config for the target, everything else (the weights' packing, each step's cell and hidden
// states, the outputs) one injective kernel each; the input views inlined. Each stage is its own
// kernel, so the steps run in order, their states in global scratch between kernels.
//
//   topi::LstmOutputs o = topi::lstm(x, w, r, b);
//   te::Schedule s = te::create_schedule({o.y, o.y_h, o.y_c});
//   schedule_lstm_gpu(s, o, target);
#pragma once

#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/lstm.h"

namespace kiln::topi::gpu {

void schedule_lstm_gpu(te::Schedule& s, const LstmOutputs& out, const target::Target& target);

}  // namespace kiln::topi::gpu
