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
// gops is the two-thread stream's. Then the whole network, heterogeneously: ResNet-18
// (tests/models/make_models.py) quantized by Kiln (kiln quantize: power-of-two int8, calibrated on
// one random input), built with --target vdla (every QConv the VDLA supports offloaded, the rest on
// this CPU) and with every QConv on this CPU (BuildOptions::offload_vdla off: the VDLA's
// contract computed by the host), both run on the same input:
//
//   case=vdla_resnet18 offloaded=<n> of=<m> vdla_ms=<cycles / 200 MHz of the offloaded convs>
//   cpu_ms=<median time of the all-CPU int8 build> identical=<1: both builds' outputs equal>
//
// (--no-model skips it.) The chosen configs go to stderr. It also writes
// DIR/roofline.csv (per layer: ops, DRAM bytes, GOPS serial and with two threads) and
// DIR/roofline.png, the paper's Fig. 10 (bench/plot_roofline.py), DIR being
// build/<preset>/bench-results/vdla. ARGS: --layers C2,C9,...
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/resnet_layers.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/onnx_quantize.h"
#include "compiler/vdla/conv2d.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/random_fill.h"
#include "deploy/vdla/device/config.h"

namespace {

/// ResNet-18 quantized, built for the VDLA beside the CPU and for the CPU alone (see above).
void resnet18_case() {
  // The model, its quantized form and the input in a folder of their own, removed afterwards.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_bench_vdla_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct Remove {
    std::filesystem::path p;
    ~Remove() { std::filesystem::remove_all(p); }
  } remove{dir};
  namespace g = kiln::graph;
  namespace rt = kiln::runtime;
  const std::string cmd = std::string("python3 '") + KILN_MAKE_MODELS_SCRIPT + "' '" +
                          dir.string() + "' --only resnet18 --no-expected >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench_vdla: %s failed (python3 with onnx and numpy)\n", cmd.c_str());
    std::exit(1);
  }
  const std::string model = (dir / "resnet18.onnx").string();
  const g::Graph fp = g::import_onnx(model);
  const g::Value& in = fp.value(fp.inputs().at(0));
  rt::NDArray x = rt::NDArray::empty(in.shape, rt::kFloat32);
  rt::fill_uniform(x, rt::seed_of("vdla_resnet18"));
  const std::string x_path = (dir / "x.npy").string();
  rt::save_npy(x_path, x);
  g::QuantizeOptions q;
  q.model = model;
  q.calibration = {x_path};
  q.scales = g::QuantizeScales::kPowerOfTwo;  // the VDLA's QConv
  const g::Graph qdq = g::import_onnx_bytes(g::quantize_onnx(q), model + " (quantized)");
  g::BuildReport het_rep, cpu_rep;
  rt::Bundle het = g::build_graph(qdq, "vdla", {}, &het_rep);
  g::BuildOptions on_host;
  on_host.offload_vdla = false;
  rt::Bundle cpu = g::build_graph(qdq, "vdla", on_host, &cpu_rep);
  for (const std::string& line : het_rep.vdla_kept_on_cpu)
    std::fprintf(stderr, "resnet18: %s\n", line.c_str());
  auto het_g = rt::GraphExecutor::from_bundle(std::move(het), "resnet18 (vdla)");
  auto cpu_g = rt::GraphExecutor::from_bundle(std::move(cpu), "resnet18 (cpu)");
  het_g.set_input(0, x);
  het_g.run();
  cpu_g.set_input(0, x);
  std::vector<double> run_ms;
  cpu_g.profile(10, &run_ms);
  std::sort(run_ms.begin(), run_ms.end());
  const rt::NDArray& a = het_g.output(0);
  const rt::NDArray& b = cpu_g.output(0);
  const bool identical = a.nbytes() == b.nbytes() &&
                         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0;
  const kiln::vdla::Config cfg;
  std::printf("case=vdla_resnet18 offloaded=%zu of=%zu vdla_ms=%.3f cpu_ms=%.3f identical=%d\n",
              het_rep.vdla_offloaded, het_rep.vdla_convolutions,
              static_cast<double>(het_g.vdla_total().cycles) / (cfg.clock_mhz * 1e3),
              run_ms[run_ms.size() / 2], identical ? 1 : 0);
  std::fflush(stdout);
}

const kiln::cli::Program kBench{
    .name = "bench_vdla",
    .summary =
        "The VDLA's cycle model on the offloaded ResNet-18 convolutions, serial against two "
        "virtual threads, then the quantized ResNet-18 with --target vdla against the "
        "all-CPU int8 build.",
    .flags = {{"--layers", "C2,C3,...", "the layers to run (default: C2 to C12)"},
              {"--no-model", "", "skip the whole model"}},
};

int run_bench(const kiln::cli::Args& args) {
  namespace vc = kiln::vdla_compiler;
  const std::string layers = args.get("--layers", "C2,C3,C4,C5,C6,C7,C8,C9,C10,C11,C12");
  const bool model = !args.has("--no-model");
  const kiln::vdla::Config cfg;
  std::fprintf(stderr, "vdla: %s\n", cfg.describe().c_str());
  const std::filesystem::path dir = std::string(KILN_BENCH_RESULTS_DIR) + "/vdla";
  std::filesystem::create_directories(dir);
  std::ofstream csv(dir / "roofline.csv");
  csv << "layer,ops,dram_bytes,gops_serial,gops_vthread\n";
  double peak_serial = 0, peak_vthread = 0;
  for (const kiln::bench::ConvLayer& l : kiln::bench::select_layers(layers)) {
    // C1's 3 channels are zero-padded to one block.
    const kiln::topi::VdlaConv2dShape s{l.hw,     l.hw,   (l.ic + 15) / 16 * 16, l.oc, l.k,
                                        l.stride, l.pad()};
    const kiln::topi::VdlaConv2d op = kiln::topi::vdla_conv2d(s, true);
    const kiln::vdla_compiler::VdlaConv2dConfig c1 = vc::choose_conv2d_config(op, 1, cfg, 0);
    const kiln::vdla_compiler::VdlaConv2dConfig c2 = vc::choose_conv2d_config(op, 2, cfg, 0);
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
    const double ops =
        2.0 * static_cast<double>(cfg.macs_per_gemm()) * static_cast<double>(vthread.gemm_counter);
    const double bytes = static_cast<double>(vthread.inp_load_nbytes + vthread.wgt_load_nbytes +
                                             vthread.acc_load_nbytes + vthread.uop_load_nbytes +
                                             vthread.out_store_nbytes);
    csv << l.name << "," << ops << "," << bytes << "," << serial.gops(cfg) << ","
        << vthread.gops(cfg) << "\n";
    peak_serial = std::max(peak_serial, serial.utilization());
    peak_vthread = std::max(peak_vthread, vthread.utilization());
  }
  std::printf("case=vdla_peak util_serial=%.3f util_vthread=%.3f\n", peak_serial, peak_vthread);
  std::fflush(stdout);
  if (model) resnet18_case();
  csv.close();
  const double dram_gbs = cfg.bus_bytes * cfg.clock_mhz / 1e3;
  const std::string cmd =
      std::string("python3 '") + KILN_ROOFLINE_SCRIPT + "' '" + (dir / "roofline.csv").string() +
      "' '" + (dir / "roofline.png").string() + "' --peak-gops " + std::to_string(cfg.peak_gops()) +
      " --dram-gbs " + std::to_string(dram_gbs);
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench_vdla: the roofline plot failed: %s\n", cmd.c_str());
    return 1;
  }
  std::fprintf(stderr, "bench_vdla: wrote %s\n", (dir / "roofline.png").c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
