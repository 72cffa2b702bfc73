// The VDLA's int8 conv2d schedule (conv2d_schedule.h).
#include "compiler/vdla/conv2d_schedule.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/vdla/intrin.h"

namespace kiln::vdla_compiler {

using topi::VdlaConv2d;
using topi::VdlaConv2dShape;

std::string VdlaConv2dConfig::to_string() const {
  std::ostringstream os;
  os << "tile_oc=" << tile_oc << " tile_ic=" << tile_ic << " tile_h=" << tile_h
     << " tile_w=" << tile_w << " vthreads=" << vthreads
     << (vthreads > 1 ? (vthread_h ? " axis=h" : " axis=oc") : "")
     << (wgt_resident ? " wgt_resident" : "");
  return os.str();
}

std::string vdla_conv2d_problem(const VdlaConv2d& op, const VdlaConv2dConfig& c,
                                const vdla::Config& cfg) {
  const VdlaConv2dShape& s = op.shape;
  if (cfg.batch() != 1 || cfg.block_in() != 16 || cfg.block_out() != 16) {
    return "the template is written for batch 1 and 16x16 blocks";
  }
  const int icb = s.ic / 16, ocb = s.oc / 16, tw = c.tile_w > 0 ? c.tile_w : s.ow();
  std::ostringstream os;
  if (c.tile_oc < 1 || ocb % c.tile_oc) os << "tile_oc must divide " << ocb << "; ";
  if (c.tile_ic < 1 || icb % c.tile_ic) os << "tile_ic must divide " << icb << "; ";
  if (c.tile_h < 1 || s.oh() % c.tile_h) os << "tile_h must divide " << s.oh() << "; ";
  if (tw < 1 || s.ow() % tw) os << "tile_w must divide " << s.ow() << "; ";
  if (c.vthreads != 1 && c.vthreads != 2) os << "vthreads must be 1 or 2; ";
  if (c.wgt_resident && c.tile_ic != icb)
    os << "wgt_resident needs the whole reduction in one step (tile_ic " << icb << "); ";
  if (!os.str().empty()) {
    std::string r = os.str();
    return r.substr(0, r.size() - 2);
  }
  if (c.tile_h * tw < 2)
    return "a tile of one pixel accumulates into one ACC row in consecutive micro-ops";
  if (c.vthreads == 2) {
    const int n = c.vthread_h ? s.oh() / c.tile_h : ocb / c.tile_oc;
    if (n % 2)
      return "two virtual threads split " + std::to_string(n) + " tiles along " +
             (c.vthread_h ? "h" : "oc");
  }
  const int v = c.vthreads;
  const int64_t ih = int64_t{c.tile_h - 1} * s.stride + s.k, iw = int64_t{tw - 1} * s.stride + s.k;
  // The accumulator tile and the tile's bias and shift rows.
  const int64_t acc = int64_t{c.tile_oc} * (c.tile_h * tw + 2), inp = c.tile_ic * ih * iw,
                wgt = int64_t{c.tile_oc} * c.tile_ic * s.k * s.k;
  if (acc * v > cfg.acc_depth())
    os << "ACC tile of " << acc << " rows x " << v << " exceeds " << cfg.acc_depth() << "; ";
  if (inp * v > cfg.inp_depth())
    os << "INP tile of " << inp << " rows x " << v << " exceeds " << cfg.inp_depth() << "; ";
  if (wgt * v > cfg.wgt_depth())
    os << "WGT tile of " << wgt << " rows x " << v << " exceeds " << cfg.wgt_depth() << "; ";
  // The GEMM micro-kernel: two of (oc block, ic block, ky, kx) with more than one step are its
  // loops, the rest and the tile's pixels micro-ops; kernels of both threads share the buffer.
  const int ext[4] = {c.tile_oc, c.tile_ic, s.k, s.k};
  int64_t uops = int64_t{c.tile_h} * tw;
  for (int d = 0, loops = 0; d < 4; ++d) {
    if (ext[d] > 1 && loops < 2) {
      ++loops;
    } else {
      uops *= ext[d];
    }
  }
  if (uops * v > cfg.uop_depth())
    os << "GEMM micro-kernel of " << uops << " micro-ops x " << v << " exceeds " << cfg.uop_depth()
       << "; ";
  if (s.pad > 15) os << "padding beyond 15 does not fit the DMA; ";
  std::string r = os.str();
  return r.empty() ? r : r.substr(0, r.size() - 2);
}

te::Schedule schedule_vdla_conv2d(const VdlaConv2d& op, const VdlaConv2dConfig& c,
                                  const vdla::Config& cfg) {
  const std::string problem = vdla_conv2d_problem(op, c, cfg);
  KILN_USER_CHECK(problem.empty()) << "vdla conv2d: config " << c.to_string() << ": " << problem;
  const VdlaConv2dShape& s = op.shape;
  const int tw = c.tile_w > 0 ? c.tile_w : s.ow();
  te::Schedule sch = te::create_schedule({op.out});
  te::Tensor dbuf = sch.cache_read(op.data_pad, kInpScope, {op.conv});
  te::Tensor kbuf = sch.cache_read(op.kernel, kWgtScope, {op.conv});
  te::Tensor bbuf = sch.cache_read(op.bias, kAccScope, {op.biased});
  te::Tensor sbuf = sch.cache_read(op.shift, kAccScope, {op.shr});
  sch[op.data_pad].compute_inline();
  const std::vector<te::Tensor> alu = {op.biased, op.shr, op.clip_lo, op.clip_hi};
  sch[op.conv].set_scope(kAccScope);
  for (const te::Tensor& t : alu) sch[t].set_scope(kAccScope);

  // The output: tiles, the virtual threads outermost, the store of a tile by DMA.
  te::Stage so = sch[op.out];
  auto [oco, oci] = so.split(so.axis(0), c.tile_oc);
  auto [ho, hi] = so.split(so.axis(1), c.tile_h);
  auto [wo, wi] = so.split(so.axis(2), tw);
  if (c.vthreads == 2) {
    te::IterVar& split_axis = c.vthread_h ? ho : oco;
    auto [vt, rest] = so.split_nparts(split_axis, 2);
    split_axis = rest;
    so.reorder({vt, oco, ho, wo, oci, hi, wi});
    so.bind(vt, te::thread_axis("cthread", 2));
  } else {
    so.reorder({oco, ho, wo, oci, hi, wi});
  }
  so.pragma(oci, kDmaCopy);
  sch[op.conv].compute_at(so, wo);
  // The tile's bias and shift rows, loaded per tile into the accumulator buffer (an ACC LOAD).
  for (const te::Tensor& t : {bbuf, sbuf}) {
    te::Stage st = sch[t];
    st.compute_at(so, wo);
    st.pragma(st.axis(0), kDmaCopy);
  }
  for (const te::Tensor& t : alu) {
    te::Stage st = sch[t];
    st.compute_at(so, wo);
    st.pragma(st.axis(0), kAlu);
  }

  // The accumulation: reduction steps outermost, the GEMM nest inside, the block tensorized.
  te::Stage sc = sch[op.conv];
  auto [rco, rci] = sc.split(sc.reduce_axis(0), c.tile_ic);
  sc.reorder({rco, sc.axis(0), rci, sc.reduce_axis(1), sc.reduce_axis(2), sc.axis(1), sc.axis(2),
              sc.axis(3), sc.axis(4), sc.reduce_axis(3)});
  sc.tensorize(sc.axis(3), gemm_intrin(cfg));
  for (const te::Tensor& t : {dbuf, kbuf}) {
    te::Stage st = sch[t];
    if (t == kbuf && c.wgt_resident) {
      st.compute_at(so, oco);
    } else {
      st.compute_at(sc, rco);
    }
    st.pragma(st.axis(0), kDmaCopy);
  }
  return sch;
}

std::vector<VdlaConv2dConfig> vdla_conv2d_space(const VdlaConv2d& op, int vthreads,
                                                const vdla::Config& cfg) {
  const VdlaConv2dShape& s = op.shape;
  auto divisors = [](int n) {
    std::vector<int> d;
    for (int i = 1; i <= n; ++i) {
      if (n % i == 0) d.push_back(i);
    }
    return d;
  };
  std::vector<VdlaConv2dConfig> out;
  for (int toc : divisors(s.oc / 16)) {
    for (int tic : divisors(s.ic / 16)) {
      for (int th : divisors(s.oh())) {
        for (int tw : divisors(s.ow())) {
          for (bool axis_h :
               vthreads == 2 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
            for (bool resident : {false, true}) {
              VdlaConv2dConfig c{toc, tic, th, tw == s.ow() ? 0 : tw, vthreads, axis_h, resident};
              if (vdla_conv2d_problem(op, c, cfg).empty()) out.push_back(c);
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<VdlaConv2dConfig> vdla_conv2d_candidates(const VdlaConv2d& op, int vthreads,
                                                     const vdla::Config& cfg) {
  const VdlaConv2dShape& s = op.shape;
  auto divisors_desc = [](int n) {
    std::vector<int> d;
    for (int i = n; i >= 1; --i) {
      if (n % i == 0) d.push_back(i);
    }
    return d;
  };
  auto largest_divisor_upto = [&](int n, int cap) {
    for (int d : divisors_desc(n)) {
      if (d <= cap) return d;
    }
    return 1;
  };
  std::vector<int> widths;
  for (int part : {1, 2, 4}) {
    const int w = largest_divisor_upto(s.ow(), (s.ow() + part - 1) / part);
    if (std::find(widths.begin(), widths.end(), w) == widths.end()) widths.push_back(w);
  }
  std::vector<VdlaConv2dConfig> out;
  for (int toc : divisors_desc(s.oc / 16)) {
    for (int tic : divisors_desc(s.ic / 16)) {
      for (int tw : widths) {
        for (bool axis_h :
             vthreads == 2 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
          for (bool resident : {false, true}) {
            int taken = 0;
            for (int th : divisors_desc(s.oh())) {
              VdlaConv2dConfig c{toc, tic, th, tw == s.ow() ? 0 : tw, vthreads, axis_h, resident};
              if (!vdla_conv2d_problem(op, c, cfg).empty()) continue;
              out.push_back(c);
              if (++taken == 3) break;
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace kiln::vdla_compiler
