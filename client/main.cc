// The `kiln` command line: the local commands (compile, run, example, ops) and main(), which hands
// the command line to cli::dispatch with every command. `kiln --help` lists the commands and
// `kiln COMMAND --help` prints a command's flags with their defaults (base/cli.h). The tuner's
// command is tune_command.cc, the tuning farm's (submit, jobs, watch, fetch, devices, cancel)
// farm_commands.cc, the record log's (records list, export, import) records_commands.cc.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/stack_overflow.h"
#include "client/cli.h"
#include "client/commands.h"
#include "compiler/autotune/tuner.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_quantize.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/run_bundle.h"
#include "deploy/runtime/thread_pool.h"
#include "records/record_log.h"

// Defined before the commands below, which copy it while this file is initialized.
const kiln::cli::Flag kInputShapeFlag{
    "--input-shape", "NAME=DIMS", "input NAME's shape, binding its symbolic dims (once per input)"};

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kDefaultTarget = "llvm -mcpu=native";

const kiln::cli::Flag kCalibrateFlag{
    "--calibrate", "X.npy", "a calibration input (required; once per file, one per model input)"};

const kiln::cli::Flag kScalesFlag{
    "--scales", "KIND",
    "(default: float; pow2 with kiln compile --target vdla) float: per-channel symmetric int8 "
    "weights, asymmetric uint8 activations, as ONNX Runtime's quantize_static; pow2: "
    "power-of-two scales, the VDLA's QConv"};

/// The quantizer's options from a command line: the model, --calibrate, --scales (`dflt` when
/// not given), --input-shape.
kiln::graph::QuantizeOptions quantize_options(const kiln::cli::Args& args, const std::string& model,
                                              const std::string& dflt = "float") {
  kiln::graph::QuantizeOptions o;
  o.model = model;
  const std::string scales = args.get("--scales", dflt);
  if (scales != "float" && scales != "pow2") {
    throw kiln::cli::UsageError("--scales takes float or pow2, got '" + scales + "'");
  }
  o.scales = scales == "pow2" ? kiln::graph::QuantizeScales::kPowerOfTwo
                              : kiln::graph::QuantizeScales::kFloat;
  o.calibration = args.all("--calibrate");
  if (o.calibration.empty()) {
    throw kiln::cli::UsageError(args.program + " " + model +
                                ": quantizing needs calibration data: --calibrate X.npy");
  }
  o.input_shapes = input_shapes(args);
  o.target = kDefaultTarget;
  o.progress = [](const std::string& step) { std::cerr << "quantize: " << step << "\n"; };
  return o;
}

void print_quantize_report(const kiln::graph::QuantizeReport& r) {
  std::cerr << "quantize: " << r.convolutions_quantized << " convolutions and "
            << r.tensors_quantized << " activations quantized to int8 (" << r.batch_norms_folded
            << " batch norms folded, " << r.samples << " calibration samples)\n";
  for (const std::string& note : r.notes) std::cerr << "quantize: " << note << "\n";
}

// ---- kiln quantize ----------------------------------------------------------------------------

int quantize_main(const kiln::cli::Args& args) {
  const std::string& model = args.only_operand("MODEL.onnx");
  if (!args.has("-o")) throw kiln::cli::UsageError("kiln quantize needs -o OUT.onnx");
  const std::string out = args.get("-o");
  const kiln::graph::QuantizeOptions o = quantize_options(args, model);
  kiln::graph::QuantizeReport report;
  try {
    const std::string bytes = kiln::graph::quantize_onnx(o, &report);
    std::ofstream f(out, std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    KILN_SYSTEM_CHECK(f.good()) << "cannot write '" << out << "'";
  } catch (const std::exception& e) {
    return kiln::cli::report(e);
  }
  print_quantize_report(report);
  std::cerr << "wrote " << out << "\n";
  return 0;
}

const kiln::cli::Command kQuantize{
    .name = "quantize",
    .operands = "MODEL.onnx",
    .summary = "quantize a float ONNX model to int8 as a QDQ ONNX model",
    .flags = {kCalibrateFlag,
              {"-o", "OUT.onnx", "the QDQ model to write (required)"},
              kScalesFlag,
              kInputShapeFlag},
    .notes =
        "Batch norms after convolutions are folded first. Each convolution gets int8 weights with "
        "a scale per output channel, and its input and output (after its Relu) a "
        "QuantizeLinear -> DequantizeLinear pair whose scale (and, with float scales, uint8 zero "
        "point) comes from running the model (compiled by Kiln) on the calibration inputs; "
        "everything else stays float. Each --calibrate file is an .npy of its input's dtype and "
        "shape. kiln compile --quantize int8 compiles the same quantized model, its convolutions "
        "as integer ConvInteger kernels with ONNX Runtime's requantization on the CPU, or, with "
        "--scales pow2 and --target vdla, as the VDLA's QConv.",
    .main = quantize_main,
    .group = "",
};

// ---- kiln compile -----------------------------------------------------------------------------

int compile_main(const kiln::cli::Args& args) {
  const std::string& model = args.only_operand("MODEL.onnx");
  const std::string target = args.get("--target", kDefaultTarget);
  const std::string out = args.get("-o", default_bundle_path(model));
  const bool quantize = args.has("--quantize");
  if (quantize && args.get("--quantize") != "int8") {
    throw kiln::cli::UsageError("--quantize takes int8, got '" + args.get("--quantize") + "'");
  }
  if (!quantize && (args.has("--calibrate") || args.has("--scales"))) {
    throw kiln::cli::UsageError(std::string(args.has("--scales") ? "--scales" : "--calibrate") +
                                " is for --quantize int8");
  }
  kiln::graph::QuantizeOptions qopts;
  if (quantize) {
    const bool vdla = kiln::target::Target::parse(target).kind == kiln::TargetKind::kVdla;
    qopts = quantize_options(args, model, vdla ? "pow2" : "float");
  }
  kiln::graph::BuildOptions options;
  options.fuse = !args.has("--no-fuse");
  options.alter_layout = !args.has("--no-layout");
  options.winograd = !args.has("--no-winograd");
  const std::string precision = args.get("--precision", "fp32");
  if (precision != "fp32" && precision != "bf16") {
    throw kiln::cli::UsageError("--precision takes fp32 or bf16, got '" + precision + "'");
  }
  options.precision = kiln::graph::parse_precision(precision);
  kiln::graph::OnnxImportOptions import;
  import.input_shapes = input_shapes(args);
  // --records: each task's best measured config, or the log's cost model's zero-shot pick.
  std::optional<kiln::records::RecordLog> log;
  std::optional<kiln::autotune::LogConfigSource> configs;
  bool drawn = false;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  options.progress = [&](size_t index, size_t total, const std::string& what) {
    constexpr size_t kWidth = 10;
    const size_t filled = total == 0 ? kWidth : index * kWidth / total;
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, ' ');
    // On a terminal the bar redraws in place; elsewhere (a log) each step is a line.
    std::fprintf(stderr, "%s[%s] %zu/%zu %s%s%s", tty ? "\r\033[K" : "", bar.c_str(), index, total,
                 index < total ? "compiling " : "", what.c_str(), tty ? "" : "\n");
    std::fflush(stderr);
    drawn = tty;
  };
  auto t0 = Clock::now();
  kiln::graph::BuildReport build;
  try {
    if (args.has("--records")) {
      log.emplace(kiln::records::RecordLog::open_existing(args.get("--records")));
      configs.emplace(kiln::autotune::LogConfigSource::with_kept_model(*log, target));
      options.configs = &*configs;
    }
    if (quantize) {
      kiln::graph::QuantizeReport qrep;
      const std::string qdq = kiln::graph::quantize_onnx(qopts, &qrep);
      print_quantize_report(qrep);
      const kiln::graph::Graph g =
          kiln::graph::import_onnx_bytes(qdq, model + " (quantized)", import);
      kiln::runtime::write_bundle(out, kiln::graph::build_graph(g, target, options, &build));
    } else {
      kiln::graph::compile_onnx(model, target, out, options, &build, import);
    }
  } catch (const std::exception& e) {
    if (drawn) std::fprintf(stderr, "\n");
    return kiln::cli::report(e);
  }
  if (drawn) std::fprintf(stderr, "\n");
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::cerr << "wrote " << out << " (" << secs << " s): " << build.num_functions << " kernels ("
            << build.num_distinct_functions << " distinct) from " << build.num_operators
            << " operators, " << build.constants_folded << " constant nodes and "
            << build.batch_norms_folded << " batch norms folded, " << build.convolutions_blocked
            << " convolutions in NCHW[x]c (" << build.layout_conversions << " layout conversions, "
            << build.groups_padded
            << " grouped ones with groups padded to whole blocks), intermediates in "
            << build.intermediate_bytes << " bytes (" << build.intermediate_bytes_without_reuse
            << " without memory reuse)\n";
  if (options.precision == kiln::graph::Precision::kBf16) {
    std::cerr << "bf16: " << build.bf16_convolutions << " convolutions and " << build.bf16_products
              << " dense products with bf16 operands, the rest float32\n";
  }
  if (configs) {
    std::cerr << "configs from " << args.get("--records") << ": " << configs->tuned()
              << " measured, " << configs->predicted() << " predicted by its cost model, "
              << configs->defaults() << " default\n";
  }
  if (build.qconvs_realized > 0) {
    std::cerr << build.qconvs_realized << " quantized convolutions as integer QConv kernels\n";
  }
  if (build.integer_convolutions + build.integer_products > 0 || !build.qconvs_kept_float.empty()) {
    std::cerr << build.integer_convolutions << " quantized convolutions as ConvInteger and "
              << build.integer_products
              << " products as MatMulInteger, requantized as ONNX Runtime does\n";
    for (const std::string& line : build.qconvs_kept_float) std::cerr << line << "\n";
  }
  if (kiln::target::Target::parse(target).kind == kiln::TargetKind::kVdla) {
    std::cerr << "offloaded " << build.vdla_offloaded << " of " << build.vdla_convolutions
              << " convolutions to the VDLA\n";
    for (const std::string& line : build.vdla_placed) std::cerr << "  " << line << "\n";
    for (const std::string& line : build.vdla_kept_on_cpu) std::cerr << "  " << line << "\n";
  }
  return 0;
}

const kiln::cli::Command kCompile{
    .name = "compile",
    .operands = "MODEL.onnx",
    .summary = "compile an ONNX model into a bundle (graph + library + parameters)",
    .flags = {{"--target", "TARGET",
               "what to compile for (default: llvm -mcpu=native; see the notes)"},
              {"-o", "FILE", "the bundle to write (default: MODEL.kiln beside the model)"},
              {"--no-fuse", "", "one kernel per operator, no fusion (for comparisons)"},
              {"--no-layout", "", "keep convolutions in NCHW, not NCHW[x]c (for comparisons)"},
              {"--no-winograd", "",
               "every 3x3 convolution direct, none by Winograd's F(m x m, 3 x 3) (for "
               "comparisons, or for the direct sum's rounding)"},
              {"--records", "DIR",
               "use a record log's configs (default: none): each task's best measured one, else "
               "its cost model's pick where that pays"},
              {"--precision", "fp32|bf16",
               "the convolutions' and dense products' arithmetic (default: fp32); bf16: bf16 "
               "operands, float32 sums (needs avx512_bf16)"},
              {"--quantize", "int8", "quantize first, as kiln quantize does (default: float)"},
              {"--calibrate", "X.npy",
               "a calibration input (required with --quantize; as quantize)"},
              kScalesFlag,
              kInputShapeFlag},
    .notes =
        "A model with symbolic input dimensions (an export's 'batch') needs --input-shape "
        "NAME=D0,D1,... (such as x=1,3,224,224) for each such input; the bundle is built for, "
        "and its graph records, those shapes. "
        "TARGET is 'llvm -mcpu=CPU' for this machine's kind of CPU, 'llvm "
        "-mtriple=aarch64-linux-gnu -mcpu=cortex-a53' for an ARM board, or 'opencl' or 'cuda "
        "-arch=sm_90' for a GPU (run that bundle with kiln run --device opencl or cuda; archs "
        "older than sm_75, such as a Titan X's sm_61, get PTX from LLVM's NVPTX back-end), or "
        "'vdla' "
        "for the VDLA (the paper's accelerator, simulated with its cycle model) beside this CPU: "
        "each integer QConv it supports runs there, the rest on 'llvm -mcpu=native', and the "
        "build says how many it offloaded and why each other one stays on the CPU. A "
        "progress bar goes "
        "to stderr, then what the build did (kernels, folded nodes, memory). A QDQ model's "
        "quantized convolutions and products become integer ConvInteger / MatMulInteger kernels "
        "with ONNX Runtime's requantization (on target vdla, power-of-two ones QConv kernels "
        "first); each one that stays float is listed with the reason. --precision bf16 (x86 with "
        "avx512_bf16, such as Zen 4 and 5 or Sapphire Rapids, or the build is refused saying what "
        "the CPU has) converts the weights of the blocked convolutions and the packed Gemm / "
        "MatMul products to bf16 at build time and their activations on the way in; their sums, "
        "and everything else, stay float32, and the outputs are float32.",
    .main = compile_main,
    .group = "",
};

// ---- kiln run ---------------------------------------------------------------------------------

int run_main(const kiln::cli::Args& args) {
  using namespace kiln;
  runtime::RunOptions o;
  o.bundle = args.only_operand("MODEL.kiln");
  o.output_dir = args.get("-o");
  if (args.has("--profile")) {
    o.profile = true;
    o.runs = cli::positive_number(args.get("--profile"), "--profile");
  }
  if (args.has("--threads")) o.threads = cli::positive_number(args.get("--threads"), "--threads");
  if (args.has("--device")) o.device = parse_device_kind(args.get("--device"));
  for (const std::string& v : args.all("--input")) o.inputs.push_back(runtime::parse_input_file(v));
  runtime::PreparedRun run = runtime::prepare_run(o);
  runtime::execute_run(run, o, std::cout);
  return 0;
}

const kiln::cli::Command kRun{
    .name = "run",
    .operands = "MODEL.kiln",
    .summary = "run a bundle on this machine and print or write its outputs",
    .flags = {{"--input", "[NAME=]X.npy",
               "an input: in the order of the model's inputs, or by name (once per input)"},
              {"-o", "DIR",
               "write each output to DIR/<output name>.npy, creating DIR (default: print)"},
              {"--profile", "RUNS",
               "time RUNS runs, print each kernel's time and efficiency (default: run once)"},
              {"--threads", "T", "threads the kernels run on (default: all CPUs)"},
              {"--device", "KIND",
               "cpu, the GPU of a cuda / opencl bundle, or vdla (default: cpu)"}},
    .notes =
        "An input with a default value in the model may be left out. "
        "A bundle compiled for a GPU target (cuda, opencl) runs with --device of that kind: its "
        "parameters stay on the device, and only the inputs and outputs cross. "
        "With -o DIR, each output goes to its own .npy file in DIR, named after the output: "
        "characters other than letters, digits, '.', '-' and '_' become '_' (and so does a "
        "leading '.'), and a name two outputs would share gets _2, _3, ... Every output is "
        "listed on stdout with its type, its shape and where it went (without -o: its first "
        "values). The same runner without the compiler, for boards: kiln-run (deploy/runtime).",
    .main = run_main,
    .group = "",
};

// ---- kiln example matmul ----------------------------------------------------------------------

int example_matmul(int n, int threads, const std::string& target) {
  using namespace kiln;
  std::cout << "== The paper's example: C[y][x] = sum_k A[k][y] * B[k][x], " << n << "x" << n
            << "\n\n";
  te::Tensor A = te::placeholder({n, n}, ir::kFloat32, "A");
  te::Tensor B = te::placeholder({n, n}, ir::kFloat32, "B");
  te::Tensor C = topi::matmul_transposed_a(A, B);
  te::Schedule s = te::create_schedule({C});
  std::cout << "-- lowered, default schedule:\n" << compiler::lower_loops(s) << "\n";
  auto st = s[C];
  st.tile(st.axis(0), st.axis(1), st.reduce_axis(0), 8, 8, 8);
  std::cout << "-- after tile(y, x, k, 8, 8, 8):\n" << compiler::lower_loops(s) << "\n";

  std::cout
      << "== Hand-scheduled x86 matmul (packing, register tile, vectorize, unroll, parallel)\n";
  auto t0 = Clock::now();
  auto p = topi::packed_matmul_x86(n, n, n);
  auto mod = compiler::build(p.schedule, {p.a, p.b, p.c}, target, "matmul");
  auto f = mod.function("matmul");
  double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::cout << "compiled for '" << target << "' in " << compile_ms << " ms\n";

  runtime::set_num_threads(threads);
  auto a = runtime::NDArray::empty({n, n}, runtime::kFloat32);
  auto b = runtime::NDArray::empty({n, n}, runtime::kFloat32);
  auto c = runtime::NDArray::empty({n, n}, runtime::kFloat32);
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t i = 0; i < int64_t(n) * n; ++i) {
    a.data<float>()[i] = dist(rng);
    b.data<float>()[i] = dist(rng);
  }
  f(a, b, c);
  // Check 256 sampled entries against a naive dot product (1e-3 relative: summation order differs).
  std::uniform_int_distribution<int> pick(0, n - 1);
  for (int t = 0; t < 256; ++t) {
    int i = pick(rng), j = pick(rng);
    double acc = 0;
    for (int k = 0; k < n; ++k)
      acc += double(a.data<float>()[i * n + k]) * b.data<float>()[k * n + j];
    float got = c.data<float>()[i * n + j];
    if (std::abs(got - acc) > 1e-3 * (1 + std::abs(acc))) {
      std::cerr << "error: wrong result at C[" << i << "][" << j << "]: " << got << " vs " << acc
                << "\n";
      return 1;
    }
  }
  std::cout << "result checked against a naive dot product on 256 sampled entries\n";
  const int runs = 10;
  std::vector<double> times;
  for (int r = 0; r < runs; ++r) {
    auto s0 = Clock::now();
    f(a, b, c);
    times.push_back(std::chrono::duration<double>(Clock::now() - s0).count());
    std::fprintf(stderr, "\r  measuring [%-10s] %d/%d", std::string(r + 1, '#').c_str(), r + 1,
                 runs);
  }
  std::fprintf(stderr, "\n");
  std::sort(times.begin(), times.end());
  double med = times[runs / 2];
  std::printf("matmul %dx%dx%d on %d thread(s): %.3f ms, %.1f GFLOP/s\n", n, n, n, threads,
              med * 1e3, 2.0 * n * n * n / med * 1e-9);
  return 0;
}

int example_main(const kiln::cli::Args& args) {
  using kiln::cli::UsageError;
  if (args.operands.size() != 1 || args.operands[0] != "matmul") {
    throw UsageError("kiln example knows one example, matmul" +
                     (args.operands.empty() ? std::string() : "; got '" + args.operands[0] + "'"));
  }
  const int n = args.has("--n") ? kiln::cli::positive_number(args.get("--n"), "--n") : 1024;
  const int threads = args.has("--threads")
                          ? kiln::cli::positive_number(args.get("--threads"), "--threads")
                          : kiln::runtime::default_num_threads();
  return example_matmul(n, threads, args.get("--target", kDefaultTarget));
}

const kiln::cli::Command kExample{
    .name = "example",
    .operands = "matmul",
    .summary = "the paper's matmul: its loops before and after tiling, compiled, checked and timed",
    .flags = {{"--n", "N", "the matrices are N x N (default: 1024)"},
              {"--threads", "T", "threads the kernel runs on (default: all CPUs)"},
              {"--target", "TARGET", "what to compile for (default: llvm -mcpu=native)"}},
    .notes = "",
    .main = example_main,
    .group = "",
};

// ---- kiln ops ----------------------------------------------------------------------------------

int ops_main(const kiln::cli::Args& args) {
  args.no_operands();
  std::cout << kiln::graph::ops::operator_table_markdown();
  return 0;
}

const kiln::cli::Command kOps{
    .name = "ops",
    .operands = "",
    .summary = "the operators Kiln compiles, as a markdown table (README.md holds it)",
    .flags = {},
    .notes =
        "One row per operator of the operator registry (compiler/graph/ops): its family file, "
        "how it is imported, its fusion pattern and its GPU strategy.",
    .main = ops_main,
    .group = "",
};

}  // namespace

std::map<std::string, std::vector<int64_t>> input_shapes(const kiln::cli::Args& args) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& text : args.all("--input-shape")) {
    std::pair<std::string, std::vector<int64_t>> shape;
    try {
      shape = kiln::graph::parse_input_shape(text);
    } catch (const kiln::Error& e) {
      throw kiln::cli::UsageError(e.what());
    }
    if (!shapes.emplace(shape.first, shape.second).second) {
      throw kiln::cli::UsageError("--input-shape gives input '" + shape.first + "' twice");
    }
  }
  return shapes;
}

std::string default_bundle_path(const std::string& onnx_path) {
  fs::path p(onnx_path);
  return p.replace_extension(".kiln").string();
}

int main(int argc, char** argv) {
  // A compiler bug that recurses too deep says so rather than "Segmentation fault".
  kiln::report_stack_overflow(
      {"error: stack overflow: the compiler recursed too deep (a bug in Kiln: please report it "
       "with the model)\n",
       1, "error: out of memory (the stack could not grow)\n", 1});
  const std::vector<const kiln::cli::Command*> commands = {
      // compiling and running, on this machine
      &kCompile,
      &kQuantize,
      &kRun,
      &tune_command(),
      &kExample,
      &kOps,
      // on a tuning farm
      &submit_command(),
      &jobs_command(),
      &watch_command(),
      &fetch_command(),
      &devices_command(),
      &cancel_command(),
      // record logs and packs
      &records_list_command(),
      &records_export_command(),
      &records_import_command(),
  };
  return kiln::cli::dispatch(commands, std::vector<std::string>(argv + 1, argv + argc));
}
