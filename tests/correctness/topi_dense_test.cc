// The dense operators of the operator library (dense with its transpose flags, packed dense,
// batch_matmul with broadcasting), each built with its x86 template at the default config and at
// evenly spaced points of its config space, run, and compared with a naive loop nest in C++.
// Tolerance: 1e-4 relative + 1e-5 absolute.
#include <gtest/gtest.h>

#include <string>

#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/transform.h"
#include "tests/common/kiln_test_util.h"

namespace kiln {
namespace {

using runtime::NDArray;
using space::Config;
using space::ConfigSpace;
using testing::all_close;
using testing::build_host;
using testing::random_array;
using testing::zeros;

std::vector<Config> configs_to_test(const ConfigSpace& space, const Config& def) {
  std::vector<Config> cfgs{def};
  uint64_t n = space.size();
  for (uint64_t i = 0; i < 5; ++i) cfgs.push_back(space.get(n == 1 ? 0 : i * (n - 1) / 4));
  return cfgs;
}

/// ref[b, i, j] = sum_k A[b, i, k] * B[b, k, j] with the operands' layouts given by the flags.
std::vector<float> naive_bmm(const float* a, const float* b, int ba, int bb, int m, int n, int k,
                             bool ta, bool tb) {
  int batch = std::max(ba, bb);
  std::vector<float> out(size_t(batch) * m * n);
  for (int p = 0; p < batch; ++p) {
    const float* ap = a + size_t(ba == 1 ? 0 : p) * m * k;
    const float* bp = b + size_t(bb == 1 ? 0 : p) * k * n;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int r = 0; r < k; ++r)
          acc += double(ta ? ap[r * m + i] : ap[i * k + r]) * (tb ? bp[j * k + r] : bp[r * n + j]);
        out[(size_t(p) * m + i) * n + j] = float(acc);
      }
  }
  return out;
}

void check_dense(int m, int n, int k, bool ta, bool tb) {
  std::vector<int64_t> xs = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
  std::vector<int64_t> ws = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  te::Tensor x = te::placeholder({xs[0], xs[1]}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({ws[0], ws[1]}, ir::kFloat32, "w");
  te::Tensor y = topi::dense(x, w, ta, tb);
  NDArray xa = random_array(xs, 1), wa = random_array(ws, 2);
  std::vector<float> ref = naive_bmm(xa.data<float>(), wa.data<float>(), 1, 1, m, n, k, ta, tb);
  ConfigSpace space = topi::dense_x86_space(y);
  for (const Config& cfg : configs_to_test(space, topi::dense_x86_default(space))) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    topi::schedule_dense_x86(s, y, cfg);
    NDArray out = zeros({m, n});
    build_host(s, {x, w, y})(xa, wa, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }
}

TEST(TopiDense, TransB) { check_dense(8, 48, 32, false, true); }
TEST(TopiDense, BatchOneOddSizes) { check_dense(1, 37, 29, false, true); }
TEST(TopiDense, NoTranspose) { check_dense(6, 40, 17, false, false); }
TEST(TopiDense, TransATransB) { check_dense(5, 24, 16, true, true); }
TEST(TopiDense, TransA) { check_dense(12, 20, 9, true, false); }

/// dense_packed with panels as wide as the graph's pack_weights makes them (a panel per register
/// tile, wider than a vector register: split into 16- or 8-lane vectors), at the default config
/// and across the space, against the naive loops.
void check_packed(int m, int n, int k, int bn) {
  te::Tensor x = te::placeholder({m, k}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({n, k}, ir::kFloat32, "w");
  te::Tensor wp = topi::pack_dense_weight(w, bn);
  te::Tensor wpp = te::placeholder(wp->shape(), ir::kFloat32, "wp");
  te::Tensor y = topi::dense_packed(x, wpp, n);
  NDArray xa = random_array({m, k}, 7), wa = random_array({n, k}, 8);
  NDArray wpa = zeros({(n + bn - 1) / bn, k, bn});
  build_host(te::create_schedule({wp}), {w, wp})(wa, wpa);
  std::vector<float> ref =
      naive_bmm(xa.data<float>(), wa.data<float>(), 1, 1, m, n, k, false, true);
  ConfigSpace space = topi::dense_x86_space(y);
  Config def = topi::dense_x86_default(space);
  if (n % bn == 0) {
    EXPECT_EQ(def.split("tile_x").back(), bn) << def.str();
  }
  for (const Config& cfg : configs_to_test(space, def)) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    topi::schedule_dense_x86(s, y, cfg);
    NDArray out = zeros({m, n});
    build_host(s, {x, wpp, y})(xa, wpa, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }
}

TEST(TopiDense, PackedWeight) { check_packed(3, 40, 24, 16); }  // the last panel half empty

TEST(TopiDense, PackedWidePanelsGemv) {
  check_packed(1, 160, 70, 80);  // 5 vectors of 16
  check_packed(1, 120, 33, 40);  // 5 vectors of 8
  check_packed(1, 128, 50, 64);
}

TEST(TopiDense, PackedWidePanelsRows) {
  check_packed(35, 160, 24, 80);  // the LSTM LM's decoder in small: 5 rows of 5 vectors
  check_packed(6, 18, 13, 16);    // padded panel, tile of 16 does not divide 18
}

void check_bmm(int ba, int bb, int m, int n, int k, bool ta, bool tb) {
  std::vector<int64_t> as = ta ? std::vector<int64_t>{ba, k, m} : std::vector<int64_t>{ba, m, k};
  std::vector<int64_t> bs = tb ? std::vector<int64_t>{bb, n, k} : std::vector<int64_t>{bb, k, n};
  te::Tensor a = te::placeholder({as[0], as[1], as[2]}, ir::kFloat32, "a");
  te::Tensor b = te::placeholder({bs[0], bs[1], bs[2]}, ir::kFloat32, "b");
  te::Tensor y = topi::batch_matmul(a, b, ta, tb);
  NDArray aa = random_array(as, 5), bba = random_array(bs, 6);
  std::vector<float> ref = naive_bmm(aa.data<float>(), bba.data<float>(), ba, bb, m, n, k, ta, tb);
  ConfigSpace space = topi::batch_matmul_x86_space(y);
  for (const Config& cfg : configs_to_test(space, topi::batch_matmul_x86_default(y, space, 512))) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({y});
    topi::schedule_batch_matmul_x86(s, y, cfg);
    NDArray out = zeros({std::max(ba, bb), m, n});
    build_host(s, {a, b, y})(aa, bba, out);
    EXPECT_TRUE(all_close(out, ref, 1e-4, 1e-5));
  }
}

TEST(TopiBatchMatmul, SameBatch) { check_bmm(3, 3, 8, 32, 16, false, false); }
TEST(TopiBatchMatmul, BroadcastA) { check_bmm(1, 4, 5, 24, 12, false, false); }
TEST(TopiBatchMatmul, BroadcastBTransB) { check_bmm(2, 1, 7, 13, 10, false, true); }
TEST(TopiBatchMatmul, TransA) { check_bmm(2, 2, 6, 16, 8, true, false); }

// An attention's scores in small, as the MatMul lowering builds them: the product of operands
// padded to 16 x 32, stored through the crop to 13 x 30, the reshape of its 6 heads to [2, 3, ..]
// and a scale, all on the register tile (the last row and column blocks guarded), at every tested
// config.
TEST(TopiBatchMatmul, StoresThroughCropReshapeAndScale) {
  const int batch = 6, m = 13, n = 30, mp = 16, np = 32, k = 8;
  te::Tensor a = te::placeholder({batch, mp, k}, ir::kFloat32, "a");
  te::Tensor b = te::placeholder({batch, k, np}, ir::kFloat32, "b");
  te::Tensor y = topi::batch_matmul(a, b);
  te::Tensor crop = topi::slice(y, {0, 0, 0}, {batch, m, n}, {}, {}, "crop");
  te::Tensor heads = topi::reshape(crop, {2, 3, m, n}, "heads");
  te::Tensor out = topi::elementwise(
      heads, [](ir::Expr v) { return v * ir::Expr(0.5f); }, "scale");
  ASSERT_TRUE(topi::batch_matmul_epilogue_fits(y, out));
  NDArray aa = random_array({batch, mp, k}, 7), bba = random_array({batch, k, np}, 8);
  std::vector<float> full =
      naive_bmm(aa.data<float>(), bba.data<float>(), batch, batch, mp, np, k, false, false);
  std::vector<float> ref;
  for (int p = 0; p < batch; ++p)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) ref.push_back(0.5f * full[(size_t(p) * mp + i) * np + j]);
  ConfigSpace space = topi::batch_matmul_x86_space(y);
  for (const Config& cfg : configs_to_test(space, topi::batch_matmul_x86_default(y, space, 512))) {
    SCOPED_TRACE(cfg.str());
    te::Schedule s = te::create_schedule({out});
    s[crop].compute_inline();
    s[heads].compute_inline();
    topi::schedule_batch_matmul_x86(s, y, cfg, out);
    std::string text = ir::to_string(compiler::lower(s, {a, b, out}, "f").body);
    // One loop nest: no stage of the whole product is stored apart.
    EXPECT_EQ(text.find("allocate batch_matmul:"), std::string::npos) << text;
    NDArray got = zeros({2, 3, m, n});
    build_host(s, {a, b, out})(aa, bba, got);
    EXPECT_TRUE(all_close(got, ref, 1e-4, 1e-5));
  }
}

TEST(TopiBatchMatmul, EpilogueFits) {
  te::Tensor y = topi::batch_matmul(te::placeholder({6, 16, 8}, ir::kFloat32, "a"),
                                    te::placeholder({6, 8, 32}, ir::kFloat32, "b"));
  EXPECT_TRUE(topi::batch_matmul_epilogue_fits(y, te::placeholder({1, 6, 13, 30}, ir::kFloat32)));
  EXPECT_FALSE(topi::batch_matmul_epilogue_fits(y, te::placeholder({6, 16, 33}, ir::kFloat32)));
  EXPECT_FALSE(topi::batch_matmul_epilogue_fits(y, te::placeholder({4, 16, 32}, ir::kFloat32)));
}

TEST(TopiDense, PackedDefaultTilesWholePanels) {
  te::Tensor x = te::placeholder({2, 32}, ir::kFloat32, "x");
  te::Tensor wp = te::placeholder({3, 32, 16}, ir::kFloat32, "wp");
  te::Tensor y = topi::dense_packed(x, wp, 48);
  Config cfg = topi::dense_x86_default(topi::dense_x86_space(y));
  EXPECT_EQ(cfg.split("tile_x").back() % 16, 0) << cfg.str();
  te::Schedule s = te::create_schedule({y});
  topi::schedule_dense_x86(s, y, cfg);
  std::string text = ir::to_string(compiler::lower(s, {x, wp, y}, "f").body);
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
}

TEST(TopiDense, DefaultSchedulesVectorizeAndParallelize) {
  te::Tensor x = te::placeholder({16, 64}, ir::kFloat32, "x");
  te::Tensor w = te::placeholder({64, 64}, ir::kFloat32, "w");
  te::Tensor y = topi::dense(x, w);
  te::Schedule s = te::create_schedule({y});
  topi::schedule_dense_x86(s, y, topi::dense_x86_default(topi::dense_x86_space(y)));
  std::string text = ir::to_string(compiler::lower(s, {x, w, y}, "f").body);
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;

  te::Tensor a = te::placeholder({4, 16, 32}, ir::kFloat32, "a");
  te::Tensor b = te::placeholder({4, 32, 64}, ir::kFloat32, "b");
  te::Tensor z = topi::batch_matmul(a, b);
  te::Schedule sb = te::create_schedule({z});
  topi::schedule_batch_matmul_x86(
      sb, z, topi::batch_matmul_x86_default(z, topi::batch_matmul_x86_space(z), 256));
  text = ir::to_string(compiler::lower(sb, {a, b, z}, "f").body);
  EXPECT_NE(text.find("ramp("), std::string::npos) << text;
  EXPECT_NE(text.find("parallel"), std::string::npos) << text;
}

}  // namespace
}  // namespace kiln
