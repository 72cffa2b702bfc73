// bf16 against float32 on ResNet-50 (torchvision's, exported as tests/models/make_zoo.py does):
// the same model built twice for this CPU, fp32 and --precision bf16 (BuildOptions::precision),
// timed in alternation at --threads (paired_times: the speedup is the median of the pairs'
// ratios), then both run on --inputs random inputs (uniform in [-1, 1), SplitMix64 from the input's
// index), comparing bf16's outputs with fp32's: the largest max|bf16 - fp32| / max|fp32| of an
// input, and the fraction of inputs whose top-1 class agrees. Prints
//   case=bf16_resnet50 speedup_over_fp32=S fp32_ms=A bf16_ms=B max_rel_err=E top1_agreement=F
// Needs a CPU with avx512_bf16 (the bf16 build says what is missing otherwise) and Debian's
// python3-torchvision (KILN_TORCH_PYTHON) for the export, kept in --dir between runs.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/random_fill.h"
#include "deploy/runtime/thread_pool.h"

namespace {

using kiln::bench::quote;

const kiln::cli::Program kBench{
    .name = "bench_bf16",
    .summary = "ResNet-50 built with bf16 products against its float32 build, on this CPU.",
    .flags = {{"--threads", "T", "threads the kernels run on (default: 2)"},
              {"--inputs", "N", "random inputs compared between the builds (default: 200)"},
              {"--min-time", "S", "seconds of paired timing (default: 10)"},
              {"--dir", "DIR",
               "where the ONNX export is kept between runs (default: a temporary folder)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using namespace kiln;
  const int threads =
      args.has("--threads") ? cli::positive_number(args.get("--threads"), "--threads") : 2;
  const int inputs =
      args.has("--inputs") ? cli::positive_number(args.get("--inputs"), "--inputs") : 200;
  const double min_time =
      args.has("--min-time") ? cli::real_at_least(args.get("--min-time"), "--min-time", 0) : 10;
  const std::filesystem::path dir =
      args.has("--dir") ? std::filesystem::path(args.get("--dir"))
                        : std::filesystem::temp_directory_path() / "kiln-bench-bf16";
  std::filesystem::create_directories(dir);
  const std::filesystem::path onnx = dir / "resnet50.onnx";
  if (!std::filesystem::exists(onnx)) {
    bench::run_command(std::string(KILN_TORCH_PYTHON) + " " + quote(KILN_MAKE_ZOO_SCRIPT) + " " +
                           quote(dir.string()) + " --set wide --only resnet50 >&2",
                       "bench_bf16");
  }
  const graph::Graph g = graph::import_onnx(onnx.string());
  const std::string target = "llvm -mcpu=native";
  graph::BuildOptions bf16_options;
  bf16_options.precision = graph::Precision::kBf16;
  graph::BuildReport rep;
  runtime::GraphExecutor fp32 =
      runtime::GraphExecutor::from_bundle(graph::build_graph(g, target), "fp32");
  runtime::GraphExecutor bf16 = runtime::GraphExecutor::from_bundle(
      graph::build_graph(g, target, bf16_options, &rep), "bf16");
  std::fprintf(stderr, "bf16: %zu convolutions and %zu dense products with bf16 operands\n",
               rep.bf16_convolutions, rep.bf16_products);
  runtime::set_num_threads(threads);

  const std::string input = g.value(g.inputs().at(0)).name;
  runtime::NDArray x = runtime::NDArray::empty(g.value(g.inputs().at(0)).shape, runtime::kFloat32);
  runtime::fill_uniform(x, 1);
  fp32.set_input(input, x);
  bf16.set_input(input, x);
  const bench::PairedTimes t =
      bench::paired_times([&] { fp32.run(); }, [&] { bf16.run(); }, min_time);

  double worst = 0;
  int agree = 0;
  for (int i = 0; i < inputs; ++i) {
    runtime::fill_uniform(x, static_cast<uint64_t>(i) + 1000);
    fp32.set_input(input, x);
    bf16.set_input(input, x);
    fp32.run();
    bf16.run();
    const runtime::NDArray a = fp32.output(0).copy(), b = bf16.output(0).copy();
    worst = std::max(worst, bench::relative_error(b, a));
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    const int64_t n = a.num_elements();
    agree += std::max_element(pa, pa + n) - pa == std::max_element(pb, pb + n) - pb ? 1 : 0;
  }
  std::printf(
      "case=bf16_resnet50 speedup_over_fp32=%.3f fp32_ms=%.3f bf16_ms=%.3f max_rel_err=%.5f "
      "top1_agreement=%.3f threads=%d inputs=%d\n",
      1.0 / t.g_over_f, t.f_ms, t.g_ms, worst, double(agree) / inputs, threads, inputs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return kiln::cli::run(kBench, argc, argv, run_bench);
  } catch (const std::exception& e) {
    return kiln::cli::report(e);
  }
}
