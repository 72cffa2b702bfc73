// The ONNX LSTM of topi (unrolled over time, scheduled with schedule_lstm_x86) against the
// recurrence of the ONNX specification written out in C++: gates i, o, f, c in that order, W [1,
// 4H, I], R [1, 4H, H], B = Wb then Rb, optional initial states and peepholes. Tolerance 1e-4
// relative + 1e-4 absolute (sums of up to ~70 products, then sigmoid and tanh).
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/topi/lstm.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/expect_error.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using testing::all_close;
using testing::build_host;
using testing::random_array;
using testing::zeros;

struct Reference {
  std::vector<float> y, y_h, y_c;
};

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// ONNX LSTM, forward, default activations. Pointers may be null for absent inputs.
Reference reference_lstm(int T, int B, int I, int H, const float* x, const float* w, const float* r,
                         const float* bias, const float* h0, const float* c0, const float* p) {
  std::vector<double> h(size_t(B) * H, 0.0), c(size_t(B) * H, 0.0);
  if (h0) std::copy(h0, h0 + B * H, h.begin());
  if (c0) std::copy(c0, c0 + B * H, c.begin());
  Reference out;
  out.y.resize(size_t(T) * B * H);
  for (int t = 0; t < T; ++t) {
    std::vector<double> hn(h.size()), cn(c.size());
    for (int b = 0; b < B; ++b) {
      // gates[q][j] = X_t W_q^T + H_{t-1} R_q^T + Wb_q + Rb_q, q in i, o, f, c order.
      std::vector<double> g(4 * H);
      for (int row = 0; row < 4 * H; ++row) {
        double acc = 0;
        for (int k = 0; k < I; ++k) acc += double(x[(t * B + b) * I + k]) * w[row * I + k];
        for (int k = 0; k < H; ++k) acc += h[b * H + k] * r[row * H + k];
        if (bias) acc += double(bias[row]) + bias[4 * H + row];
        g[row] = acc;
      }
      for (int j = 0; j < H; ++j) {
        double cp = c[b * H + j];
        double pi = p ? p[j] : 0, po = p ? p[H + j] : 0, pf = p ? p[2 * H + j] : 0;
        double it = sigmoid(g[j] + pi * cp);
        double ft = sigmoid(g[2 * H + j] + pf * cp);
        double ct = std::tanh(g[3 * H + j]);
        double cnew = ft * cp + it * ct;
        double ot = sigmoid(g[H + j] + po * cnew);
        cn[b * H + j] = cnew;
        hn[b * H + j] = ot * std::tanh(cnew);
      }
    }
    h = hn;
    c = cn;
    for (int i = 0; i < B * H; ++i) out.y[size_t(t) * B * H + i] = float(h[i]);
  }
  out.y_h.assign(h.begin(), h.end());
  out.y_c.assign(c.begin(), c.end());
  return out;
}

struct Case {
  int T, B, I, H;
  bool bias, initial, peephole;
  bool prepacked = false;  ///< W and R given packed in panels (as the graph's pack_weights does)
};

/// w [1, G, K] packed into [1, ceil(G / bn), K, bn], zero beyond G (the graph does this in C++).
NDArray pack_gates(const NDArray& w, int64_t bn) {
  const int64_t g = w.shape()[1], k = w.shape()[2], panels = (g + bn - 1) / bn;
  NDArray out = zeros({1, panels, k, bn});
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < bn; ++j)
        if (p * bn + j < g) dst[(p * k + kk) * bn + j] = src[(p * bn + j) * k + kk];
  return out;
}

void check_lstm(const Case& k) {
  const int T = k.T, B = k.B, I = k.I, H = k.H;
  const int64_t bn = topi::lstm_panel_width(4 * H), panels = (4 * H + bn - 1) / bn;
  te::Tensor x = te::placeholder({T, B, I}, ir::kFloat32, "X");
  te::Tensor w = k.prepacked ? te::placeholder({1, panels, I, bn}, ir::kFloat32, "W")
                             : te::placeholder({1, 4 * H, I}, ir::kFloat32, "W");
  te::Tensor r = k.prepacked ? te::placeholder({1, panels, H, bn}, ir::kFloat32, "R")
                             : te::placeholder({1, 4 * H, H}, ir::kFloat32, "R");
  te::Tensor b = k.bias ? te::placeholder({1, 8 * H}, ir::kFloat32, "B") : te::Tensor();
  te::Tensor h0 = k.initial ? te::placeholder({1, B, H}, ir::kFloat32, "initial_h") : te::Tensor();
  te::Tensor c0 = k.initial ? te::placeholder({1, B, H}, ir::kFloat32, "initial_c") : te::Tensor();
  te::Tensor p = k.peephole ? te::placeholder({1, 3 * H}, ir::kFloat32, "P") : te::Tensor();
  topi::LstmOutputs out = topi::lstm(x, w, r, b, h0, c0, p, "lstm", k.prepacked ? bn : 0);
  te::Schedule s = topi::schedule_lstm_x86(out);

  // With one step from a zero state, R is never read and is not an argument.
  const bool reads_r = T > 1 || k.initial;
  std::vector<te::Tensor> args{x, w};
  if (reads_r) args.push_back(r);
  for (const te::Tensor& t : {b, h0, c0, p}) {
    if (t.defined()) args.push_back(t);
  }
  args.insert(args.end(), {out.y, out.y_h, out.y_c});
  auto f = build_host(s, args);

  NDArray ax = random_array({T, B, I}, 1), aw = random_array({1, 4 * H, I}, 2, -0.5f, 0.5f),
          ar = random_array({1, 4 * H, H}, 3, -0.5f, 0.5f), ab = random_array({1, 8 * H}, 4),
          ah = random_array({1, B, H}, 5), ac = random_array({1, B, H}, 6),
          ap = random_array({1, 3 * H}, 7);
  NDArray y = zeros({T, 1, B, H}), yh = zeros({1, B, H}), yc = zeros({1, B, H});
  NDArray awp = pack_gates(aw, bn), arp = pack_gates(ar, bn);
  std::vector<runtime::Arg> call_args{ax, k.prepacked ? awp : aw};
  if (reads_r) call_args.emplace_back(k.prepacked ? arp : ar);
  if (k.bias) call_args.emplace_back(ab);
  if (k.initial) call_args.insert(call_args.end(), {ah, ac});
  if (k.peephole) call_args.emplace_back(ap);
  call_args.insert(call_args.end(), {y, yh, yc});
  f.call(call_args);
  Reference ref = reference_lstm(
      T, B, I, H, ax.data<float>(), aw.data<float>(), ar.data<float>(),
      k.bias ? ab.data<float>() : nullptr, k.initial ? ah.data<float>() : nullptr,
      k.initial ? ac.data<float>() : nullptr, k.peephole ? ap.data<float>() : nullptr);
  std::string what = "T=" + std::to_string(T) + " B=" + std::to_string(B) +
                     " I=" + std::to_string(I) + " H=" + std::to_string(H);
  EXPECT_TRUE(all_close(y, ref.y, 1e-4, 1e-4)) << "Y " << what;
  EXPECT_TRUE(all_close(yh, ref.y_h, 1e-4, 1e-4)) << "Y_h " << what;
  EXPECT_TRUE(all_close(yc, ref.y_c, 1e-4, 1e-4)) << "Y_c " << what;
}

TEST(TopiLstm, DefaultsNoBiasNoInitialState) { check_lstm({4, 3, 7, 13, false, false, false}); }

TEST(TopiLstm, BiasAndInitialState) { check_lstm({5, 2, 10, 16, true, true, false}); }

TEST(TopiLstm, Peepholes) { check_lstm({3, 1, 5, 9, true, true, true}); }

TEST(TopiLstm, OneStepAndParallelProjections) {
  for (int threads : {1, 2}) {
    runtime::set_num_threads(threads);
    check_lstm({1, 2, 3, 5, true, false, false});
    check_lstm({3, 4, 64, 64, true, true, false});  // 64K multiply-adds per GEMV: in parallel
  }
  runtime::set_num_threads(0);
}

TEST(TopiLstm, PrepackedWeights) {
  check_lstm({4, 1, 10, 12, true, false, false, true});  // 48 gates: panels of 16
  check_lstm({3, 2, 30, 70, true, true, true, true});    // 280 gates: padded panels of 64
  check_lstm({3, 1, 20, 70, true, false, false});        // the same padding, packed by a stage
}

TEST(TopiLstmErrors, NameTheTensorAndShapes) {
  te::Tensor x = te::placeholder({4, 2, 7}, ir::kFloat32, "X");
  te::Tensor w = te::placeholder({1, 20, 7}, ir::kFloat32, "W");
  te::Tensor r = te::placeholder({1, 20, 5}, ir::kFloat32, "R");
  te::Tensor bad_w = te::placeholder({1, 20, 6}, ir::kFloat32, "W6");
  te::Tensor bad_r = te::placeholder({1, 16, 5}, ir::kFloat32, "R16");
  te::Tensor bad_b = te::placeholder({1, 20}, ir::kFloat32, "B20");
  te::Tensor bad_h = te::placeholder({1, 3, 5}, ir::kFloat32, "h3");
  EXPECT_ERROR_CONTAINS(topi::lstm(x, bad_w, r),
                        "lstm: W 'W6' has shape [1, 20, 6], expected [1, 20, 7]");
  EXPECT_ERROR_CONTAINS(topi::lstm(x, w, bad_r), "lstm: R 'R16' has shape [1, 16, 5]");
  EXPECT_ERROR_CONTAINS(topi::lstm(x, w, r, bad_b),
                        "lstm: B 'B20' has shape [1, 20], expected [1, 40]");
  EXPECT_ERROR_CONTAINS(topi::lstm(x, w, r, {}, bad_h),
                        "initial_h 'h3' has shape [1, 3, 5], expected [1, 2, 5]");
  te::Tensor x2 = te::placeholder({4, 7}, ir::kFloat32, "X2");
  EXPECT_ERROR_CONTAINS(topi::lstm(x2, w, r),
                        "lstm: X 'X2' has shape [4, 7], expected [seq_length");
}

}  // namespace
}  // namespace kiln
