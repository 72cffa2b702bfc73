// The LSTM (topi::lstm, unrolled over time) on a GPU: its products (the input projection of all
// steps at once, and each step's recurrent GEMV; dense_packed computes) scheduled by `product`,
// the matmul_gpu template at a chosen config (the graph build's, through the tuning registry),
// everything else (the weights' packing, each step's cell and hidden
// states, the outputs) one injective kernel each; the input views inlined. Each stage is its own
// kernel, so the steps run in order, their states in global scratch between kernels.
//
//   topi::LstmOutputs o = topi::lstm(x, w, r, b);
//   te::Schedule s = te::create_schedule({o.y, o.y_h, o.y_c});
//   schedule_lstm_gpu(s, o, target, [&](te::Schedule& s, const te::Tensor& p) {
//     schedule_matmul_gpu(s, p, matmul_gpu_default(matmul_gpu_space(p), target), p);
//   });
#pragma once

#include <functional>

#include "compiler/target/target.h"
#include "compiler/te/schedule.h"
#include "compiler/topi/lstm.h"

namespace kiln::topi::gpu {

/// Schedules one of the LSTM's products (a dense_packed output) on its own.
using ProductSchedule = std::function<void(te::Schedule&, const te::Tensor& product)>;

void schedule_lstm_gpu(te::Schedule& s, const LstmOutputs& out, const target::Target& target,
                       const ProductSchedule& product);

}  // namespace kiln::topi::gpu
