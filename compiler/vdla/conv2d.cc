// Choosing the VDLA conv2d template's config.
#include "compiler/vdla/conv2d.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "deploy/vdla/device/device.h"

namespace kiln::vdla_compiler {
namespace {

// Per reduction step, compute and DMA added for one thread and overlapped for two, plus per tile
// the reset, the ALU passes and the store.
double estimate_cycles(const topi::VdlaConv2dShape& s, const VdlaConv2dConfig& c,
                       const vdla::Config& cfg) {
  const int tw = c.tile_w > 0 ? c.tile_w : s.ow();
  const double ih = (c.tile_h - 1.0) * s.stride + s.k, iw = (tw - 1.0) * s.stride + s.k;
  const double tiles = double(s.oc / 16 / c.tile_oc) * (s.oh() / c.tile_h) * (s.ow() / tw);
  const double steps = double(s.ic / 16 / c.tile_ic);
  const double gemm = double(c.tile_oc) * c.tile_ic * s.k * s.k * c.tile_h * tw + cfg.gemm_fill;
  const double tiles_per_oc = double(s.oh() / c.tile_h) * (s.ow() / tw);
  const double wgt = double(c.tile_oc) * c.tile_ic * s.k * s.k * cfg.wgt_row_bytes() /
                     (c.wgt_resident ? tiles_per_oc : 1.0);
  const double dma = (c.tile_ic * ih * iw * cfg.inp_row_bytes() + wgt) / cfg.bus_bytes +
                     cfg.dram_latency * (c.tile_ic + 1);
  const double per_step = c.vthreads == 2 ? std::max(gemm, dma) : gemm + dma;
  const double rows = double(c.tile_oc) * c.tile_h * tw;
  // Reset, bias, shift, max and min over the tile's rows; its bias and shift rows loaded; the
  // store.
  const double rows_io =
      2.0 * (cfg.dram_latency + double(c.tile_oc) * cfg.acc_row_bytes() / cfg.bus_bytes);
  const double epilogue =
      rows * (1 + 4 * cfg.alu_ii) + rows_io + rows * cfg.out_row_bytes() / cfg.bus_bytes;
  return tiles * (steps * per_step + epilogue);
}

}  // namespace

TimedConv2d time_conv2d(const topi::VdlaConv2d& op, const VdlaConv2dConfig& c,
                        const vdla::Config& cfg) {
  TimedConv2d t;
  t.program = build_vdla(schedule_vdla_conv2d(op, c, cfg), op.args(), "conv2d", cfg);
  vdla::Device dev(cfg);
  vdla::Dram dram;
  std::vector<uint64_t> addrs;
  for (int64_t bytes : t.program.arg_bytes)
    addrs.push_back(dram.alloc(static_cast<uint64_t>(bytes), 256));
  vdla::CommandQueue q(dev, dram);
  t.program.emit(q, addrs);
  t.stats = q.synchronize(vdla::RunOptions{false});
  return t;
}

VdlaConv2dConfig choose_conv2d_config(const topi::VdlaConv2d& op, int vthreads,
                                      const vdla::Config& cfg, int measured) {
  std::vector<VdlaConv2dConfig> space = vdla_conv2d_candidates(op, vthreads, cfg);
  const topi::VdlaConv2dShape& s = op.shape;
  KILN_USER_CHECK(!space.empty()) << "vdla conv2d: no config of " << s.ic << "x" << s.h << "x"
                                  << s.w << " -> " << s.oc << " (k " << s.k << ") fits "
                                  << cfg.describe() << " with " << vthreads << " virtual thread(s)";
  std::stable_sort(space.begin(), space.end(), [&](const auto& a, const auto& b) {
    return estimate_cycles(s, a, cfg) < estimate_cycles(s, b, cfg);
  });
  if (measured > 0) space.resize(std::min<size_t>(space.size(), static_cast<size_t>(measured)));
  VdlaConv2dConfig best = space.front();
  uint64_t best_cycles = std::numeric_limits<uint64_t>::max();
  for (const auto& c : space) {
    const uint64_t cycles = time_conv2d(op, c, cfg).stats.cycles;
    if (cycles < best_cycles) {
      best_cycles = cycles;
      best = c;
    }
  }
  return best;
}

}  // namespace kiln::vdla_compiler
