// The int8 conv2d the VDLA tests check against: a naive loop nest over the blocked layouts of
// compiler/topi/vdla_conv2d.h, and random blocked tensors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "compiler/topi/vdla_conv2d.h"

namespace kiln::vdla::testing {

using Conv2dShape = topi::VdlaConv2dShape;

/// data [IC/16][H][W][16], kernel [OC/16][IC/16][K][K][16o][16i], bias and shift [OC/16][16]
/// int32, output [OC/16][OH][OW][16]: clip((bias + sum) >> shift, relu ? 0 : -128, 127), the sum
/// wrapping at 32 bits, >> arithmetic (QConv's contract).
inline std::vector<int8_t> conv2d_reference(const Conv2dShape& s, const std::vector<int8_t>& data,
                                            const std::vector<int8_t>& kernel,
                                            const std::vector<int32_t>& bias,
                                            const std::vector<int32_t>& shift, bool relu) {
  const int B = 16, icb = s.ic / B, ocb = s.oc / B, oh = s.oh(), ow = s.ow(), k = s.k;
  std::vector<int8_t> out(static_cast<size_t>(s.oc) * oh * ow);
  std::vector<int32_t> acc(B);
  for (int ob = 0; ob < ocb; ++ob) {
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        for (int o = 0; o < B; ++o) acc[o] = bias[static_cast<size_t>(ob * B + o)];
        for (int cb = 0; cb < icb; ++cb) {
          for (int ky = 0; ky < k; ++ky) {
            const int iy = y * s.stride + ky - s.pad;
            if (iy < 0 || iy >= s.h) continue;
            for (int kx = 0; kx < k; ++kx) {
              const int ix = x * s.stride + kx - s.pad;
              if (ix < 0 || ix >= s.w) continue;
              const int8_t* d = &data[((static_cast<size_t>(cb) * s.h + iy) * s.w + ix) * B];
              const int8_t* w =
                  &kernel[((((static_cast<size_t>(ob) * icb + cb) * k + ky) * k + kx) * B) * B];
              for (int o = 0; o < B; ++o) {
                int32_t sum = 0;
                for (int i = 0; i < B; ++i) sum += int32_t{d[i]} * int32_t{w[o * B + i]};
                acc[o] = static_cast<int32_t>(static_cast<uint32_t>(acc[o]) +
                                              static_cast<uint32_t>(sum));
              }
            }
          }
        }
        int8_t* dst = &out[((static_cast<size_t>(ob) * oh + y) * ow + x) * B];
        for (int o = 0; o < B; ++o) {
          const int32_t v = acc[o] >> shift[static_cast<size_t>(ob * B + o)];
          dst[o] = static_cast<int8_t>(std::clamp(v, relu ? 0 : -128, 127));
        }
      }
    }
  }
  return out;
}

inline std::vector<int8_t> random_int8(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(dist(rng));
  return v;
}

/// A shift that keeps most outputs inside int8 without zeroing them: about log2 of the sum's
/// spread (sqrt(terms) times the standard deviation of a product of two uniform int8 values) less
/// 5, so that the shifted sums spread over about +-32.
inline int conv2d_shift(const Conv2dShape& s) {
  const double spread = std::sqrt(static_cast<double>(s.ic) * s.k * s.k) * 74.0 * 74.0;
  return std::max(0, static_cast<int>(std::log2(spread / 32)));
}

/// Per output channel: a shift within 2 of conv2d_shift (clamped to [0, 31]) and a bias of up to
/// 64 output steps either way (so that it moves outputs without clipping them all).
struct BiasShift {
  std::vector<int32_t> bias, shift;
};
inline BiasShift random_bias_shift(const Conv2dShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ds(-2, 2);
  std::uniform_int_distribution<int> db(-64, 64);
  BiasShift r;
  const int base = conv2d_shift(s);
  for (int o = 0; o < s.oc; ++o) {
    const int sh = std::clamp(base + ds(rng), 0, 31);
    r.shift.push_back(sh);
    r.bias.push_back(static_cast<int32_t>(db(rng) * (int64_t{1} << sh) + db(rng)));
  }
  return r;
}

}  // namespace kiln::vdla::testing
