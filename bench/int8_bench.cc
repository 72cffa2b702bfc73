// Statically quantized models (tests/models/make_quantized.py: ResNet-50 and MobileNetV2 by
// onnxruntime's quantize_static, QDQ, per-channel int8 weights, uint8 activations), Kiln's int8
// build against ONNX Runtime running the same QDQ model with its int8 kernels, in the same run,
// at 2 threads. Per model:
//   case=int8_<name> kiln_ms=<x> ort_ms=<y> ratio=<y/x> kiln_fp32_ms=<z> int8_speedup=<z/x>
//   lsb1=<fraction of output elements within 1 LSB of ORT's> integer_convs=<n> float_convs=<m>
// where one LSB is the output's quantization step (its DequantizeLinear's scale) and ORT's
// output is the one make_quantized.py saved (same ORT as the timing). ORT runs in its own process
// (models_ref.py under the quantization tools' virtual environment: CPU provider,
// intra_op_num_threads 2, all graph optimizations, so the QDQ groups run as QLinearConv and
// kin); R rounds (--rounds) of ORT, Kiln int8 and Kiln fp32 in turn, each side's median over the
// rounds making the ratio, so a burst of load on a shared machine falls on all of them.
//
// The models are made into --dir (default build/<preset>/int8-models) by make_quantized.py when
// missing: the export under KILN_TORCH_PYTHON, the quantization in build/quant-venv
// (tests/models/quant_venv.py: made with pip on first use), where ONNX Runtime runs too.
//
//   bench_int8 [--dir DIR] [--min-time S] [--rounds R] [NAME ...]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/thread_pool.h"

namespace {

using kiln::bench::quote;
using kiln::runtime::GraphExecutor;
using kiln::runtime::NDArray;

constexpr int kThreads = 2;
constexpr const char* kTarget = "llvm -mcpu=native";

std::string run_command(const std::string& cmd) {
  return kiln::bench::run_command(cmd, "bench_int8");
}

/// A model built and run once on DIR/NAME.input.npy.
struct Built {
  std::unique_ptr<GraphExecutor> exec;
  kiln::graph::BuildReport report;
};

Built build(const std::string& path, const NDArray& input) {
  Built b;
  const kiln::graph::Graph g = kiln::graph::import_onnx(path);
  b.exec = std::make_unique<GraphExecutor>(
      GraphExecutor::from_bundle(kiln::graph::build_graph(g, kTarget, {}, &b.report), path));
  b.exec->set_input(b.exec->input_name(0), input);
  b.exec->run();
  return b;
}

/// The fraction of `a`'s elements within `lsb` (and a hair, for the float product) of `ref`'s.
double within_one_lsb(const NDArray& a, const NDArray& ref, float lsb) {
  if (a.shape() != ref.shape()) return NAN;
  int64_t ok = 0;
  for (int64_t i = 0; i < ref.num_elements(); ++i) {
    ok += std::fabs(a.data<float>()[i] - ref.data<float>()[i]) <= lsb * 1.001f;
  }
  return static_cast<double>(ok) / static_cast<double>(ref.num_elements());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

const kiln::cli::Program kBench{
    .name = "bench_int8",
    .operands = "[NAME...]",
    .summary =
        "quantize_static models (default: resnet50 mobilenet_v2): Kiln int8 against ONNX "
        "Runtime int8 and Kiln fp32, 2 threads",
    .flags = {{"--dir", "DIR",
               "the models, made there when missing (default: " KILN_INT8_MODELS_DIR ")"},
              {"--min-time", "S", "seconds of each timing (default: 1)"},
              {"--rounds", "R", "rounds of ORT, Kiln int8 and Kiln fp32 in turn (default: 3)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const std::string dir = args.get("--dir", KILN_INT8_MODELS_DIR);
  const double min_time = std::stod(args.get("--min-time", "1"));
  const int rounds = std::stoi(args.get("--rounds", "3"));
  std::vector<std::string> names = args.operands;
  if (names.empty()) names = {"resnet50", "mobilenet_v2"};

  std::vector<std::string> missing;
  for (const std::string& n : names) {
    if (!std::filesystem::exists(dir + "/" + n + ".ort_lsb.npy")) missing.push_back(n);
  }
  if (!missing.empty()) {
    std::string cmd = std::string("KILN_TORCH_PYTHON=") + quote(KILN_TORCH_PYTHON) + " python3 " +
                      quote(KILN_MAKE_QUANTIZED_SCRIPT) + " " + quote(dir) + " --only";
    for (const std::string& n : missing) cmd += " " + n;
    std::fprintf(stderr, "bench_int8: making %zu quantized models in %s\n", missing.size(),
                 dir.c_str());
    run_command(cmd + " >&2");
  }
  const std::string venv_python = std::string(KILN_QUANT_VENV) + "/bin/python3";

  for (const std::string& name : names) {
    const std::string base = dir + "/" + name;
    try {
      const NDArray input = kiln::runtime::load_npy(base + ".input.npy");
      Built q = build(base + ".qdq.onnx", input);
      Built f = build(base + ".onnx", input);
      const float lsb = kiln::runtime::load_npy(base + ".ort_lsb.npy").data<float>()[0];
      const double lsb1 =
          within_one_lsb(q.exec->output(0), kiln::runtime::load_npy(base + ".ort_int8.npy"), lsb);
      std::vector<double> ort, kq, kf;
      for (int r = 0; r < rounds; ++r) {
        std::istringstream out(
            run_command(quote(venv_python) + " " + quote(KILN_MODELS_REF_SCRIPT) + " " +
                        quote(dir) + " --threads " + std::to_string(kThreads) + " --min-time " +
                        std::to_string(min_time) + " --model-suffix .qdq --only " + name));
        std::string n;
        int t = 0;
        double ms = NAN;
        out >> n >> t >> ms;
        ort.push_back(ms);
        kiln::runtime::set_num_threads(kThreads);
        kq.push_back(kiln::bench::median_ms([&] { q.exec->run(); }, min_time));
        kf.push_back(kiln::bench::median_ms([&] { f.exec->run(); }, min_time));
        kiln::runtime::set_num_threads(0);
      }
      const double k = median(kq), o = median(ort), fp = median(kf);
      std::printf(
          "case=int8_%s kiln_ms=%.3f ort_ms=%.3f ratio=%.3f kiln_fp32_ms=%.3f int8_speedup=%.3f "
          "lsb1=%.5f integer_convs=%zu float_convs=%zu\n",
          name.c_str(), k, o, o / k, fp, fp / k, lsb1, q.report.integer_convolutions,
          q.report.qconvs_kept_float.size());
      for (const std::string& line : q.report.qconvs_kept_float)
        std::fprintf(stderr, "bench_int8: %s: %s\n", name.c_str(), line.c_str());
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_int8: %s: %s\n", name.c_str(), e.what());
      std::printf("case=int8_%s kiln_ms=nan ort_ms=nan ratio=nan kiln_fp32_ms=nan lsb1=nan\n",
                  name.c_str());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
