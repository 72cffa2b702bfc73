// The hand-lowered int8 conv2d stream (see conv2d_stream.h). The compiler's tensorize path will
// replace it.
#include "deploy/vdla/kernels/conv2d_stream.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "base/error.h"

namespace kiln::vdla {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// One output tile: channel blocks [o0, o0 + tile_oc), rows [y0, y0 + th), columns [x0, x0 + tw).
struct Tile {
  int o0, y0, x0, th, tw;
};

// The half (or whole) of each buffer a virtual thread owns.
struct ThreadBuffers {
  uint32_t inp, wgt, acc;
  // What the buffers hold when a tile's reduction is a single step: the input window (y0, x0,
  // rows, columns) and the first output channel block of the weights; -1 when nothing reusable.
  std::array<int, 4> inp_tile{-1, -1, -1, -1};
  int wgt_tile = -1;
};

// One DMA'd input window along one axis: `before` zero rows, `size` rows from `src`, `after` zeros.
struct Window {
  int src, size, before, after;
};

Window window(int out0, int out_n, int stride, int k, int pad, int extent) {
  const int in0 = out0 * stride - pad;
  const int in_n = (out_n - 1) * stride + k;
  Window w;
  w.before = std::max(0, -in0);
  w.after = std::max(0, in0 + in_n - extent);
  w.src = std::max(0, in0);
  w.size = in_n - w.before - w.after;
  return w;
}

// The GEMM micro-kernel folds the first two of its four dimensions (output channel block, input
// channel block, ky, kx) that have more than one step into the instruction's two hardware loops
// and unrolls the rest, with the tile's pixels, into micro-ops.
std::vector<int> gemm_loop_dims(int tile_oc, int tile_ic, int k) {
  const int ext[4] = {tile_oc, tile_ic, k, k};
  std::vector<int> dims;
  for (int d = 0; d < 4 && dims.size() < 2; ++d) {
    if (ext[d] > 1) dims.push_back(d);
  }
  return dims;
}

int64_t gemm_uops(int tile_oc, int tile_ic, int k, int th, int tw) {
  const int ext[4] = {tile_oc, tile_ic, k, k};
  int64_t n = int64_t{th} * tw;
  const std::vector<int> loops = gemm_loop_dims(tile_oc, tile_ic, k);
  for (int d = 0; d < 4; ++d) {
    if (std::find(loops.begin(), loops.end(), d) == loops.end()) n *= ext[d];
  }
  return n;
}

class Conv2dEmitter {
 public:
  Conv2dEmitter(CommandQueue& q, const Config& cfg, const Conv2dShape& s, const Conv2dTiling& t,
                const Conv2dAddrs& a, int shift)
      : q_(q), cfg_(cfg), s_(s), t_(t), a_(a), shift_(shift) {
    icb_ = s.ic / cfg.block_in();
    ocb_ = s.oc / cfg.block_out();
    tw_ = t.tile_w > 0 ? t.tile_w : s.ow();
    const int v = t.vthreads;
    for (int i = 0; i < v; ++i) {
      ThreadBuffers b;
      b.inp = static_cast<uint32_t>(i * (cfg.inp_depth() / v));
      b.wgt = static_cast<uint32_t>(i * (cfg.wgt_depth() / v));
      b.acc = static_cast<uint32_t>(i * (cfg.acc_depth() / v));
      bufs_.push_back(b);
    }
  }

  void emit() {
    const int v = t_.vthreads;
    // The first use of each thread's buffers waits for nothing: one token per thread in each WAR
    // queue (compute->load: its INP/WGT half is free; store->compute: its ACC half is free).
    for (int i = 0; i < v; ++i) q_.dep_push(kComputeStage, kLoadStage);
    for (int i = 0; i < v; ++i) q_.dep_push(kStoreStage, kComputeStage);
    for (const std::vector<Tile>& group : groups()) emit_group(group);
    // ... and those tokens are taken back at the end, so that the stream is balanced.
    for (int i = 0; i < v; ++i) q_.dep_pop(kComputeStage, kLoadStage);
    for (int i = 0; i < v; ++i) q_.dep_pop(kStoreStage, kComputeStage);
  }

 private:
  Tile tile(int ot, int ht, int wt) const {
    Tile t{ot * t_.tile_oc, ht * t_.tile_h, wt * tw_, 0, 0};
    t.th = std::min(t_.tile_h, s_.oh() - t.y0);
    t.tw = std::min(tw_, s_.ow() - t.x0);
    return t;
  }

  // Tiles in loop order (channel tiles, rows, columns), in groups of `vthreads` consecutive tiles
  // along the virtual-thread axis.
  std::vector<std::vector<Tile>> groups() const {
    const int n_oc = ocb_ / t_.tile_oc, n_h = ceil_div(s_.oh(), t_.tile_h),
              n_w = ceil_div(s_.ow(), tw_);
    const int v = t_.vthreads;
    std::vector<std::vector<Tile>> out;
    if (v == 1 || t_.vthread_axis == VthreadAxis::kOc) {
      for (int ot = 0; ot < n_oc; ot += v) {
        for (int ht = 0; ht < n_h; ++ht) {
          for (int wt = 0; wt < n_w; ++wt) {
            std::vector<Tile> g;
            for (int i = 0; i < v; ++i) g.push_back(tile(ot + i, ht, wt));
            out.push_back(g);
          }
        }
      }
    } else {
      for (int ot = 0; ot < n_oc; ++ot) {
        for (int ht = 0; ht < n_h; ht += v) {
          for (int wt = 0; wt < n_w; ++wt) {
            std::vector<Tile> g;
            for (int i = 0; i < v; ++i) g.push_back(tile(ot, ht + i, wt));
            out.push_back(g);
          }
        }
      }
    }
    return out;
  }

  int in_h(const Tile& t) const { return (t.th - 1) * s_.stride + s_.k; }
  int in_w(const Tile& t) const { return (t.tw - 1) * s_.stride + s_.k; }
  uint32_t acc_rows(const Tile& t) const { return static_cast<uint32_t>(t_.tile_oc * t.th * t.tw); }

  // A signature naming everything the micro-ops depend on, so that equal kernels are shared and
  // different ones never are.
  std::string sig(const char* what, int thread, const Tile& t) const {
    std::ostringstream os;
    os << "conv2d." << what << " t" << thread << " th" << t.th << " tw" << t.tw << " k" << s_.k
       << " s" << s_.stride << " oc" << t_.tile_oc << " ic" << t_.tile_ic << " inp"
       << bufs_[thread].inp << " wgt" << bufs_[thread].wgt << " acc" << bufs_[thread].acc;
    return os.str();
  }

  void emit_group(const std::vector<Tile>& group) {
    const int v = static_cast<int>(group.size());
    // Reset each thread's accumulators once its previous tile has been stored.
    for (int i = 0; i < v; ++i) {
      const Tile& t = group[i];
      const uint32_t base = bufs_[i].acc, rows = acc_rows(t);
      q_.dep_pop(kStoreStage, kComputeStage);
      q_.push_gemm(sig("reset", i, t), true, [&](UopKernel& k) {
        k.loop_begin(rows, 1, 0, 0);
        k.push(base, 0, 0);
        k.loop_end();
      });
    }
    // The reduction: loads of both threads, then GEMMs of both threads, per step.
    const int steps = icb_ / t_.tile_ic;
    for (int step = 0; step < steps; ++step) {
      for (int i = 0; i < v; ++i) {
        q_.dep_pop(kComputeStage, kLoadStage);
        emit_loads(i, group[i], step);
        q_.dep_push(kLoadStage, kComputeStage);
      }
      for (int i = 0; i < v; ++i) {
        q_.dep_pop(kLoadStage, kComputeStage);
        emit_gemm(i, group[i]);
        q_.dep_push(kComputeStage, kLoadStage);
      }
    }
    // Requantize to int8 in ACC, then store.
    for (int i = 0; i < v; ++i) {
      const Tile& t = group[i];
      const uint32_t base = bufs_[i].acc, rows = acc_rows(t);
      const struct {
        const char* name;
        AluOp op;
        int32_t imm;
      } ops[] = {
          {"shr", AluOp::kShr, shift_}, {"max", AluOp::kMax, -128}, {"min", AluOp::kMin, 127}};
      for (const auto& op : ops) {
        q_.push_alu(sig(op.name, i, t) + " imm" + std::to_string(op.imm), op.op, true, op.imm,
                    [&](UopKernel& k) {
                      k.loop_begin(rows, 1, 1, 0);
                      k.push(base, base, 0);
                      k.loop_end();
                    });
      }
      q_.dep_push(kComputeStage, kStoreStage);
    }
    for (int i = 0; i < v; ++i) {
      const Tile& t = group[i];
      q_.dep_pop(kComputeStage, kStoreStage);
      for (int j = 0; j < t_.tile_oc; ++j) {
        const uint64_t row =
            (uint64_t{static_cast<uint64_t>(t.o0 + j)} * s_.oh() + t.y0) * s_.ow() + t.x0;
        q_.store_buffer_2d(bufs_[i].acc + static_cast<uint32_t>(j * t.th * t.tw),
                           a_.output + row * cfg_.out_row_bytes(), static_cast<uint32_t>(t.tw),
                           static_cast<uint32_t>(t.th), static_cast<uint32_t>(s_.ow()));
      }
      q_.dep_push(kStoreStage, kComputeStage);
    }
  }

  void emit_loads(int thread, const Tile& t, int step) {
    const Window wy = window(t.y0, t.th, s_.stride, s_.k, s_.pad, s_.h);
    const Window wx = window(t.x0, t.tw, s_.stride, s_.k, s_.pad, s_.w);
    KILN_USER_CHECK(wy.size > 0 && wx.size > 0)
        << "vdla conv2d: a tile at row " << t.y0 << ", column " << t.x0 << " reads only padding";
    const int ih = in_h(t), iw = in_w(t);
    // A tile whose whole reduction is one step leaves its inputs and weights in the thread's
    // buffers; the next tile of the thread loads only what changed (GEMMs never write them).
    const int steps = icb_ / t_.tile_ic;
    ThreadBuffers& b = bufs_[thread];
    const bool same_inp = steps == 1 && b.inp_tile == std::array<int, 4>{t.y0, t.x0, t.th, t.tw};
    const bool same_wgt = steps == 1 && b.wgt_tile == t.o0;
    b.inp_tile = steps == 1 ? std::array<int, 4>{t.y0, t.x0, t.th, t.tw}
                            : std::array<int, 4>{-1, -1, -1, -1};
    b.wgt_tile = steps == 1 ? t.o0 : -1;
    for (int c = 0; c < t_.tile_ic && !same_inp; ++c) {
      const int cb = step * t_.tile_ic + c;
      const uint64_t row = (uint64_t{static_cast<uint64_t>(cb)} * s_.h + wy.src) * s_.w + wx.src;
      q_.load_buffer_2d(MemType::kInp, bufs_[thread].inp + static_cast<uint32_t>(c * ih * iw),
                        a_.data + row * cfg_.inp_row_bytes(), static_cast<uint32_t>(wx.size),
                        static_cast<uint32_t>(wy.size), static_cast<uint32_t>(s_.w),
                        static_cast<uint32_t>(wx.before), static_cast<uint32_t>(wy.before),
                        static_cast<uint32_t>(wx.after), static_cast<uint32_t>(wy.after));
    }
    if (same_wgt) return;
    const int kk = s_.k * s_.k;
    const uint64_t wrow = (uint64_t{static_cast<uint64_t>(t.o0)} * icb_ + step * t_.tile_ic) * kk;
    q_.load_buffer_2d(MemType::kWgt, bufs_[thread].wgt, a_.kernel + wrow * cfg_.wgt_row_bytes(),
                      static_cast<uint32_t>(t_.tile_ic * kk), static_cast<uint32_t>(t_.tile_oc),
                      static_cast<uint32_t>(icb_ * kk));
  }

  void emit_gemm(int thread, const Tile& t) {
    const int ih = in_h(t), iw = in_w(t), k = s_.k, st = s_.stride;
    const ThreadBuffers b = bufs_[thread];
    const int ext[4] = {t_.tile_oc, t_.tile_ic, k, k};
    // One step along each dimension (oc block, ic block, ky, kx) moves the rows by:
    const uint32_t dst_step[4] = {static_cast<uint32_t>(t.th * t.tw), 0, 0, 0};
    const uint32_t src_step[4] = {0, static_cast<uint32_t>(ih * iw), static_cast<uint32_t>(iw), 1};
    const uint32_t wgt_step[4] = {static_cast<uint32_t>(t_.tile_ic * k * k),
                                  static_cast<uint32_t>(k * k), static_cast<uint32_t>(k), 1};
    const std::vector<int> loops = gemm_loop_dims(t_.tile_oc, t_.tile_ic, k);
    q_.push_gemm(sig("gemm", thread, t), false, [&](UopKernel& kern) {
      for (int d : loops) kern.loop_begin(ext[d], dst_step[d], src_step[d], wgt_step[d]);
      // The other dimensions unrolled into micro-ops, then (y, x) innermost, so that consecutive
      // micro-ops accumulate into different ACC rows.
      int idx[4] = {0, 0, 0, 0};
      int lim[4];
      for (int d = 0; d < 4; ++d)
        lim[d] = std::find(loops.begin(), loops.end(), d) != loops.end() ? 1 : ext[d];
      for (idx[0] = 0; idx[0] < lim[0]; ++idx[0]) {
        for (idx[1] = 0; idx[1] < lim[1]; ++idx[1]) {
          for (idx[2] = 0; idx[2] < lim[2]; ++idx[2]) {
            for (idx[3] = 0; idx[3] < lim[3]; ++idx[3]) {
              uint32_t dst = b.acc, src = b.inp, wgt = b.wgt;
              for (int d = 0; d < 4; ++d) {
                dst += idx[d] * dst_step[d];
                src += idx[d] * src_step[d];
                wgt += idx[d] * wgt_step[d];
              }
              for (int y = 0; y < t.th; ++y) {
                for (int x = 0; x < t.tw; ++x) {
                  kern.push(dst + y * t.tw + x, src + y * st * iw + x * st, wgt);
                }
              }
            }
          }
        }
      }
      for (size_t i = 0; i < loops.size(); ++i) kern.loop_end();
    });
  }

  CommandQueue& q_;
  const Config& cfg_;
  const Conv2dShape& s_;
  const Conv2dTiling& t_;
  const Conv2dAddrs& a_;
  int shift_;
  int icb_ = 0, ocb_ = 0, tw_ = 0;
  std::vector<ThreadBuffers> bufs_;
};

}  // namespace

std::string Conv2dTiling::to_string() const {
  std::ostringstream os;
  os << "tile_oc=" << tile_oc << " tile_ic=" << tile_ic << " tile_h=" << tile_h
     << " tile_w=" << tile_w << " vthreads=" << vthreads
     << " axis=" << (vthread_axis == VthreadAxis::kOc ? "oc" : "h");
  return os.str();
}

std::string conv2d_tiling_problem(const Config& cfg, const Conv2dShape& s, const Conv2dTiling& t) {
  std::ostringstream os;
  if (cfg.batch() != 1) return "the conv2d stream is written for batch 1";
  if (s.ic <= 0 || s.oc <= 0 || s.ic % cfg.block_in() != 0 || s.oc % cfg.block_out() != 0) {
    os << "channels " << s.ic << " -> " << s.oc << " are not positive multiples of the blocks "
       << cfg.block_in() << " and " << cfg.block_out();
    return os.str();
  }
  if (s.k < 1 || s.stride < 1 || s.pad < 0 || s.pad > 15 || s.pad >= s.k + s.stride || s.oh() < 1 ||
      s.ow() < 1) {
    return "kernel, stride or padding out of range (padding must fit the DMA's 4 bits and be less "
           "than k + stride)";
  }
  const int icb = s.ic / cfg.block_in(), ocb = s.oc / cfg.block_out();
  const int v = t.vthreads, tw = t.tile_w > 0 ? t.tile_w : s.ow();
  if (v != 1 && v != 2) return "vthreads must be 1 or 2";
  if (t.tile_oc < 1 || ocb % t.tile_oc != 0)
    return "tile_oc must divide the " + std::to_string(ocb) + " output channel blocks";
  if (t.tile_ic < 1 || icb % t.tile_ic != 0)
    return "tile_ic must divide the " + std::to_string(icb) + " input channel blocks";
  if (t.tile_h < 1 || t.tile_h > s.oh())
    return "tile_h must be in [1, " + std::to_string(s.oh()) + "]";
  if (tw < 1 || tw > s.ow()) return "tile_w must be in [1, " + std::to_string(s.ow()) + "]";
  const int last_h = s.oh() - (ceil_div(s.oh(), t.tile_h) - 1) * t.tile_h;
  const int last_w = s.ow() - (ceil_div(s.ow(), tw) - 1) * tw;
  if (std::min(t.tile_h, last_h) * std::min(tw, last_w) < 2) {
    return "a tile of a single pixel would accumulate into one ACC row in consecutive micro-ops";
  }
  if (v == 2) {
    const int n = t.vthread_axis == VthreadAxis::kOc ? ocb / t.tile_oc : ceil_div(s.oh(), t.tile_h);
    if (n % 2 != 0) {
      os << "two virtual threads pair tiles along "
         << (t.vthread_axis == VthreadAxis::kOc ? "oc" : "h") << ", which has " << n
         << " tiles (not even)";
      return os.str();
    }
  }
  const int64_t ih = int64_t{t.tile_h - 1} * s.stride + s.k, iw = int64_t{tw - 1} * s.stride + s.k;
  const int64_t acc = int64_t{t.tile_oc} * t.tile_h * tw, inp = t.tile_ic * ih * iw,
                wgt = int64_t{t.tile_oc} * t.tile_ic * s.k * s.k,
                uops = gemm_uops(t.tile_oc, t.tile_ic, s.k, t.tile_h, tw);
  if (acc > cfg.acc_depth() / v)
    os << "ACC tile of " << acc << " rows exceeds " << cfg.acc_depth() / v << "; ";
  if (inp > cfg.inp_depth() / v)
    os << "INP tile of " << inp << " rows exceeds " << cfg.inp_depth() / v << "; ";
  if (wgt > cfg.wgt_depth() / v)
    os << "WGT tile of " << wgt << " rows exceeds " << cfg.wgt_depth() / v << "; ";
  if (uops > cfg.uop_depth())
    os << "GEMM micro-kernel of " << uops << " micro-ops exceeds " << cfg.uop_depth() << "; ";
  if (ih - 1 + s.pad >= (int64_t{1} << 16) || iw >= (int64_t{1} << 16))
    os << "DMA sizes exceed 16 bits; ";
  std::string r = os.str();
  if (!r.empty()) r.resize(r.size() - 2);
  return r;
}

void emit_conv2d(CommandQueue& q, const Conv2dShape& shape, const Conv2dTiling& tiling,
                 const Conv2dAddrs& addrs, int shift) {
  const Config& cfg = q.config();
  const std::string problem = conv2d_tiling_problem(cfg, shape, tiling);
  KILN_USER_CHECK(problem.empty())
      << "vdla conv2d: tiling " << tiling.to_string() << ": " << problem;
  KILN_USER_CHECK(shift >= 0 && shift < 32)
      << "vdla conv2d: shift " << shift << " is not in [0, 31]";
  KILN_USER_CHECK(addrs.data % cfg.inp_row_bytes() == 0 &&
                  addrs.kernel % cfg.wgt_row_bytes() == 0 &&
                  addrs.output % cfg.out_row_bytes() == 0)
      << "vdla conv2d: the data, kernel and output addresses (" << addrs.data << ", "
      << addrs.kernel << ", " << addrs.output << ") must be aligned to their rows ("
      << cfg.inp_row_bytes() << ", " << cfg.wgt_row_bytes() << ", " << cfg.out_row_bytes()
      << " bytes)";
  Conv2dEmitter(q, cfg, shape, tiling, addrs, shift).emit();
}

namespace {

// The candidates both choosers rank: every divisor pair of the channel blocks, both virtual-thread
// axes, the whole width, half and a quarter of it, and for each the tallest row tile that fits,
// half and a quarter of it.
std::vector<Conv2dTiling> candidates(const Config& cfg, const Conv2dShape& s, int vthreads) {
  std::vector<Conv2dTiling> out;
  if (s.ic % cfg.block_in() != 0 || s.oc % cfg.block_out() != 0) return out;
  const int icb = s.ic / cfg.block_in(), ocb = s.oc / cfg.block_out();
  std::vector<VthreadAxis> axes = {VthreadAxis::kOc};
  if (vthreads == 2) axes.push_back(VthreadAxis::kH);
  std::vector<int> widths = {s.ow()};
  for (int d : {2, 4}) {
    if ((s.ow() + d - 1) / d != widths.back()) widths.push_back((s.ow() + d - 1) / d);
  }
  for (int toc = 1; toc <= ocb; ++toc) {
    if (ocb % toc != 0) continue;
    for (int tic = 1; tic <= icb; ++tic) {
      if (icb % tic != 0) continue;
      for (VthreadAxis axis : axes) {
        for (int tw : widths) {
          Conv2dTiling t{toc, tic, 1, tw == s.ow() ? 0 : tw, vthreads, axis};
          int max_h = 0;
          for (int h = s.oh(); h >= 1 && max_h == 0; --h) {
            t.tile_h = h;
            if (conv2d_tiling_problem(cfg, s, t).empty()) max_h = h;
          }
          if (max_h == 0) continue;
          int last = 0;
          for (int h : {max_h, (max_h + 1) / 2, (max_h + 3) / 4}) {
            if (h == last) continue;
            last = h;
            t.tile_h = h;
            if (conv2d_tiling_problem(cfg, s, t).empty()) out.push_back(t);
          }
        }
      }
    }
  }
  return out;
}

[[noreturn]] void no_tiling(const Config& cfg, const Conv2dShape& s, int vthreads) {
  KILN_USER_ERROR() << "vdla conv2d: no tiling of " << s.ic << "x" << s.h << "x" << s.w << " -> "
                    << s.oc << " (k " << s.k << ") fits " << cfg.describe() << " with " << vthreads
                    << " virtual thread(s)";
}

}  // namespace

namespace {

// A rough estimate of a tiling's cycles: per reduction step, compute and DMA added for one thread
// and overlapped for two, micro-kernels loaded again when they do not all fit the UOP buffer, and
// per tile the reset, the three ALU passes and the store.
double estimate_cycles(const Config& cfg, const Conv2dShape& s, const Conv2dTiling& t) {
  const int icb = s.ic / cfg.block_in();
  const int tw = t.tile_w > 0 ? t.tile_w : s.ow();
  const double ih = (t.tile_h - 1.0) * s.stride + s.k, iw = (tw - 1.0) * s.stride + s.k;
  const double tiles = double(s.oc / cfg.block_out() / t.tile_oc) *
                       std::ceil(double(s.oh()) / t.tile_h) * std::ceil(double(s.ow()) / tw);
  const double steps = icb / t.tile_ic;
  const double gemm = double(t.tile_oc) * t.tile_ic * s.k * s.k * t.tile_h * tw + cfg.gemm_fill;
  const double dma = (t.tile_ic * ih * iw * cfg.inp_row_bytes() +
                      double(t.tile_oc) * t.tile_ic * s.k * s.k * cfg.wgt_row_bytes()) /
                         cfg.bus_bytes +
                     cfg.dram_latency;
  const double uops = static_cast<double>(gemm_uops(t.tile_oc, t.tile_ic, s.k, t.tile_h, tw));
  const double reload =
      t.vthreads * uops + 8 > cfg.uop_depth() ? uops * Config::kUopBytes / cfg.bus_bytes : 0;
  const double per_step = (t.vthreads == 2 ? std::max(gemm + reload, dma) : gemm + dma) + reload;
  const double rows = double(t.tile_oc) * t.tile_h * tw;
  const double epilogue = rows * (1 + 3 * cfg.alu_ii) + rows * cfg.out_row_bytes() / cfg.bus_bytes;
  return tiles * (steps * per_step + epilogue);
}

// The candidate with the fewest cycles on the cycle model (the stream checked and timed, not
// executed).
Conv2dTiling fastest(const Config& cfg, const Conv2dShape& s,
                     const std::vector<Conv2dTiling>& cands) {
  Dram dram;
  Conv2dAddrs addrs;
  addrs.data = dram.alloc(uint64_t(s.ic) * s.h * s.w);
  addrs.kernel = dram.alloc(uint64_t(s.oc) * s.ic * s.k * s.k, cfg.wgt_row_bytes());
  addrs.output = dram.alloc(uint64_t(s.oc) * s.oh() * s.ow());
  const uint64_t base_size = dram.size();
  Conv2dTiling best = cands.front();
  uint64_t best_cycles = std::numeric_limits<uint64_t>::max();
  for (const Conv2dTiling& t : cands) {
    Device dev(cfg);
    CommandQueue q(dev, dram);
    emit_conv2d(q, s, t, addrs, 8);
    const Stats st = q.synchronize(RunOptions{false});
    if (st.cycles < best_cycles) {
      best_cycles = st.cycles;
      best = t;
    }
    dram.truncate(base_size);
  }
  return best;
}

}  // namespace

Conv2dTiling default_conv2d_tiling(const Config& cfg, const Conv2dShape& s, int vthreads) {
  std::vector<Conv2dTiling> cands = candidates(cfg, s, vthreads);
  if (cands.empty()) no_tiling(cfg, s, vthreads);
  std::stable_sort(cands.begin(), cands.end(), [&](const Conv2dTiling& a, const Conv2dTiling& b) {
    return estimate_cycles(cfg, s, a) < estimate_cycles(cfg, s, b);
  });
  cands.resize(std::min<size_t>(cands.size(), 3));
  return fastest(cfg, s, cands);
}

Conv2dTiling choose_conv2d_tiling(const Config& cfg, const Conv2dShape& s, int vthreads) {
  const std::vector<Conv2dTiling> cands = candidates(cfg, s, vthreads);
  if (cands.empty()) no_tiling(cfg, s, vthreads);
  return fastest(cfg, s, cands);
}

}  // namespace kiln::vdla
