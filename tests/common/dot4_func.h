// A lowered function of one dot4_u8s8 a row (compiler/ir/op.h), for the tests of its lowerings:
// out[r, i] = acc[r, i] + sum_j a[r, 4i + j] * b[r, 4i + j] (a[r, j] when `broadcast`: the same
// four bytes for every lane), for `rows` rows of `lanes` int32 accumulators; random operands and
// the exact result.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/ir/op.h"

namespace kiln::testing {

/// The function "dot4_<lanes>[_bcast]" with parameters (acc int32 [rows * lanes], a uint8
/// [rows * (broadcast ? 4 : 4 * lanes)], b int8 [rows * 4 * lanes], out int32 [rows * lanes]).
inline ir::PrimFunc dot4_func(int lanes, bool broadcast, int rows) {
  const int a_width = broadcast ? 4 : 4 * lanes;
  ir::Buffer acc = ir::make_buffer("acc", ir::kInt32, {rows * lanes});
  ir::Buffer a = ir::make_buffer("a", ir::DataType::UInt(8), {rows * a_width});
  ir::Buffer b = ir::make_buffer("b", ir::kInt8, {rows * 4 * lanes});
  ir::Buffer out = ir::make_buffer("out", ir::kInt32, {rows * lanes});
  ir::Var r("r");
  auto vec = [&](const ir::Buffer& buf, int width) {
    return ir::load(buf.dtype.with_lanes(width), buf.data, ir::ramp(r * width, 1, width));
  };
  ir::Expr acc_v = lanes == 1 ? ir::load(ir::kInt32, acc.data, r) : vec(acc, lanes);
  ir::Expr dot = ir::dot4_u8s8(acc_v, vec(a, a_width), vec(b, 4 * lanes));
  ir::Expr out_index = lanes == 1 ? ir::Expr(r) : ir::ramp(r * lanes, 1, lanes);
  ir::Stmt body =
      ir::for_loop(r, 0, rows, ir::ForKind::kSerial, ir::store(out.data, dot, out_index));
  auto param = [](const ir::Buffer& buf) { return ir::Param{buf.data, buf}; };
  return ir::PrimFunc{"dot4_" + std::to_string(lanes) + (broadcast ? "_bcast" : ""),
                      {param(acc), param(a), param(b), param(out)},
                      body};
}

/// dot4_func's operands, random over their whole ranges, and its exact result.
struct Dot4Data {
  std::vector<int32_t> acc;
  std::vector<uint8_t> a;
  std::vector<int8_t> b;
  std::vector<int32_t> want;  ///< what dot4_func writes to out, in plain C++
};

inline Dot4Data dot4_data(int lanes, bool broadcast, int rows, uint32_t seed) {
  const int a_width = broadcast ? 4 : 4 * lanes;
  std::mt19937 rng(seed);
  auto draw = [&](auto* v, size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> d(lo, hi);
    v->resize(n);
    for (auto& e : *v) e = static_cast<std::decay_t<decltype(e)>>(d(rng));
  };
  Dot4Data d;
  draw(&d.acc, size_t(rows) * lanes, -1000000, 1000000);
  draw(&d.a, size_t(rows) * a_width, 0, 255);
  draw(&d.b, size_t(rows) * 4 * lanes, -128, 127);
  // The extremes, where a saturating 16-bit pair sum (255 * -128 * 2) would clip.
  for (int k = 0; k < 8; ++k) {
    d.a[k] = 255;
    d.b[k] = -128;
  }
  d.want = d.acc;
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < lanes; ++i)
      for (int j = 0; j < 4; ++j) {
        const int ai = broadcast ? r * 4 + j : r * a_width + 4 * i + j;
        d.want[r * lanes + i] += int32_t{d.a[ai]} * int32_t{d.b[r * 4 * lanes + 4 * i + j]};
      }
  return d;
}

}  // namespace kiln::testing
