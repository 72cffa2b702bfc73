// The VDLA's cycle model on the ResNet-18 convolutions the paper offloads (C2..C12; C1 stays on the
// CPU): per layer, the int8 conv2d compiled by Kiln (compiler/topi/vdla_conv2d.h scheduled with
// tensorize, DMA and ALU pragmas and cthread, lowered and built into driver calls by compiler/vdla)
// with one virtual thread (no latency hiding) and with two, each with the config that the cycle
// model finds fastest among the template's candidates within the prototype's SRAM sizes, then the
// peak utilization of both (the paper's section 4.4: 0.70 without latency hiding, 0.88 with it).
//
//   case=vdla_<layer> cycles_serial=<a> cycles_vthread=<b> util_serial=<u1> util_vthread=<u2>
//   gops=<g> case=vdla_peak util_serial=<max u1> util_vthread=<max u2>
//
// gops is the two-thread stream's. The chosen configs go to stderr. It also writes
// DIR/roofline.csv (per layer: ops, DRAM bytes, GOPS serial and with two threads) and
// DIR/roofline.png, the paper's Fig. 10 (bench/plot_roofline.py), DIR being
// build/<preset>/bench-results/vdla. ARGS: --layers C2,C9,...
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/resnet_layers.h"
#include "compiler/vdla/conv2d.h"
#include "deploy/vdla/device/config.h"

int main(int argc, char** argv) {
  namespace vc = kiln::vdla_compiler;
  std::string layers = "C2,C3,C4,C5,C6,C7,C8,C9,C10,C11,C12";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
      layers = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--layers C2,C3,...]\n", argv[0]);
      return 2;
    }
  }
  const kiln::vdla::Config cfg;
  std::fprintf(stderr, "vdla: %s\n", cfg.describe().c_str());
  const std::filesystem::path dir = std::string(KILN_BENCH_RESULTS_DIR) + "/vdla";
  std::filesystem::create_directories(dir);
  std::ofstream csv(dir / "roofline.csv");
  csv << "layer,ops,dram_bytes,gops_serial,gops_vthread\n";
  double peak_serial = 0, peak_vthread = 0;
  for (const kiln::bench::ConvLayer& l : kiln::bench::select_layers(layers, argv[0])) {
    // C1's 3 channels are zero-padded to one block.
    const kiln::topi::VdlaConv2dShape s{l.hw, l.hw, (l.ic + 15) / 16 * 16, l.oc, l.k, l.stride, l.pad()};
    const kiln::topi::VdlaConv2d op = kiln::topi::vdla_conv2d(s, true);
    const kiln::topi::VdlaConv2dConfig c1 = vc::choose_conv2d_config(op, 1, cfg, 0);
    const kiln::topi::VdlaConv2dConfig c2 = vc::choose_conv2d_config(op, 2, cfg, 0);
    const kiln::vdla::Stats serial = vc::time_conv2d(op, c1, cfg).stats;
    const kiln::vdla::Stats vthread = vc::time_conv2d(op, c2, cfg).stats;
    std::fprintf(stderr, "%s serial: %s | vthread: %s\n", l.name, c1.to_string().c_str(),
                 c2.to_string().c_str());
    std::printf(
        "case=vdla_%s cycles_serial=%llu cycles_vthread=%llu util_serial=%.3f util_vthread=%.3f "
        "gops=%.1f\n",
        l.name, static_cast<unsigned long long>(serial.cycles),
        static_cast<unsigned long long>(vthread.cycles), serial.utilization(),
        vthread.utilization(), vthread.gops(cfg));
    std::fflush(stdout);
    // The same work either way: ops and DRAM traffic of the two-thread stream.
    const double ops = 2.0 * static_cast<double>(cfg.macs_per_gemm()) * static_cast<double>(vthread.gemm_counter);
    const double bytes = static_cast<double>(vthread.inp_load_nbytes + vthread.wgt_load_nbytes + vthread.acc_load_nbytes +
                                             vthread.uop_load_nbytes + vthread.out_store_nbytes);
    csv << l.name << "," << ops << "," << bytes << "," << serial.gops(cfg) << "," << vthread.gops(cfg) << "\n";
    peak_serial = std::max(peak_serial, serial.utilization());
    peak_vthread = std::max(peak_vthread, vthread.utilization());
  }
  std::printf("case=vdla_peak util_serial=%.3f util_vthread=%.3f\n", peak_serial, peak_vthread);
  csv.close();
  const double dram_gbs = cfg.bus_bytes * cfg.clock_mhz / 1e3;
  const std::string cmd = std::string("python3 '") + KILN_ROOFLINE_SCRIPT + "' '" + (dir / "roofline.csv").string() +
                          "' '" + (dir / "roofline.png").string() + "' --peak-gops " + std::to_string(cfg.peak_gops()) +
                          " --dram-gbs " + std::to_string(dram_gbs);
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench_vdla: the roofline plot failed: %s\n", cmd.c_str());
    return 1;
  }
  std::fprintf(stderr, "bench_vdla: wrote %s\n", (dir / "roofline.png").c_str());
  return 0;
}
