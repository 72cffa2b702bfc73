// The VDLA's cycle model on the ResNet-18 convolutions the paper offloads (C2..C12; C1 stays on the
// CPU): per layer, the hand-lowered int8 conv2d stream (deploy/vdla/kernels/conv2d_stream.h) with
// one virtual thread (no latency hiding) and with two, each with the tiling that the cycle model
// finds fastest within the prototype's SRAM sizes, then the peak utilization of both (the paper's
// section 4.4: 0.70 without latency hiding, 0.88 with it).
//
//   case=vdla_<layer> cycles_serial=<a> cycles_vthread=<b> util_serial=<u1> util_vthread=<u2>
//   gops=<g> case=vdla_peak util_serial=<max u1> util_vthread=<max u2>
//
// gops is the two-thread stream's. The chosen tilings go to stderr. ARGS: --layers C2,C9,...
//
// --compiled times the same layers compiled by Kiln instead (compiler/topi/vdla_conv2d.h: the
// template scheduled with tensorize, DMA and ALU pragmas and cthread, lowered and built into driver
// calls by compiler/vdla), each config the fastest of vdla_conv2d_candidates on the cycle model;
// its lines carry `path=compiled`.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/resnet_layers.h"
#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/command_queue.h"
#include "deploy/vdla/kernels/conv2d_stream.h"
#include "compiler/vdla/conv2d.h"

namespace {

using namespace kiln::vdla;

Stats time_conv(const Config& cfg, const Conv2dShape& s, const Conv2dTiling& t) {
  Dram dram;
  Conv2dAddrs a;
  a.data = dram.alloc(uint64_t(s.ic) * s.h * s.w);
  a.kernel = dram.alloc(uint64_t(s.oc) * s.ic * s.k * s.k, cfg.wgt_row_bytes());
  a.output = dram.alloc(uint64_t(s.oc) * s.oh() * s.ow());
  Device dev(cfg);
  CommandQueue q(dev, dram);
  emit_conv2d(q, s, t, a, 8);
  return q.synchronize(RunOptions{false});
}

}  // namespace

int main(int argc, char** argv) {
  std::string layers = "C2,C3,C4,C5,C6,C7,C8,C9,C10,C11,C12";
  bool compiled = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
      layers = argv[++i];
    } else if (std::strcmp(argv[i], "--compiled") == 0) {
      compiled = true;
    } else {
      std::fprintf(stderr, "usage: %s [--layers C2,C3,...] [--compiled]\n", argv[0]);
      return 2;
    }
  }
  const Config cfg;
  std::fprintf(stderr, "vdla: %s\n", cfg.describe().c_str());
  double peak_serial = 0, peak_vthread = 0;
  for (const kiln::bench::ConvLayer& l : kiln::bench::select_layers(layers, argv[0])) {
    Conv2dShape s;
    s.h = s.w = l.hw;
    s.ic = (l.ic + 15) / 16 * 16;  // C1's 3 channels are zero-padded to one block
    s.oc = l.oc;
    s.k = l.k;
    s.stride = l.stride;
    s.pad = l.pad();
    Stats serial, vthread;
    if (compiled) {
      namespace vc = kiln::vdla_compiler;
      const kiln::topi::VdlaConv2d op =
          kiln::topi::vdla_conv2d({s.h, s.w, s.ic, s.oc, s.k, s.stride, s.pad}, 8);
      const kiln::topi::VdlaConv2dConfig c1 = vc::choose_conv2d_config(op, 1, cfg, 0);
      const kiln::topi::VdlaConv2dConfig c2 = vc::choose_conv2d_config(op, 2, cfg, 0);
      serial = vc::time_conv2d(op, c1, cfg).stats;
      vthread = vc::time_conv2d(op, c2, cfg).stats;
      std::fprintf(stderr, "%s compiled serial: %s | vthread: %s\n", l.name, c1.to_string().c_str(),
                   c2.to_string().c_str());
    } else {
      const Conv2dTiling t1 = choose_conv2d_tiling(cfg, s, 1);
      const Conv2dTiling t2 = choose_conv2d_tiling(cfg, s, 2);
      serial = time_conv(cfg, s, t1);
      vthread = time_conv(cfg, s, t2);
      std::fprintf(stderr, "%s serial: %s | vthread: %s\n", l.name, t1.to_string().c_str(),
                   t2.to_string().c_str());
    }
    std::printf(
        "case=vdla_%s cycles_serial=%llu cycles_vthread=%llu util_serial=%.3f util_vthread=%.3f "
        "gops=%.1f%s\n",
        l.name, static_cast<unsigned long long>(serial.cycles),
        static_cast<unsigned long long>(vthread.cycles), serial.utilization(),
        vthread.utilization(), vthread.gops(cfg), compiled ? " path=compiled" : "");
    std::fflush(stdout);
    peak_serial = std::max(peak_serial, serial.utilization());
    peak_vthread = std::max(peak_vthread, vthread.utilization());
  }
  std::printf("case=vdla_peak util_serial=%.3f util_vthread=%.3f%s\n", peak_serial, peak_vthread,
              compiled ? " path=compiled" : "");
  return 0;
}
