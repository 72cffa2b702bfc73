// Dynamically quantized models (tests/models/make_dynamic_quant.py: onnxruntime's quantize_dynamic,
// uint8 activations quantized at run time by DynamicQuantizeLinear, int8 weights, MatMulInteger),
// Kiln against ONNX Runtime at the same threads in the same run, and the float model each came
// from beside it:
//   case=int8_<model>_dynamic kiln_ms=<x> ort_ms=<y> ratio=<y/x> kiln_fp32_ms=<a> ort_fp32_ms=<b>
//   err=<e> ort_quant_err=<q> threads=<t>
// Models: bert (wide_families.py's BERT-base-like encoder, sequence 128) and lstm (its recurrent
// classifier, the LSTM left in float). Each build is checked against ONNX Runtime's output first:
// err = max|kiln - ort| / max|ort| within --tolerance (default 0.05), printed beside ort_quant_err,
// ONNX Runtime's own int8 output against its float one. The integer products agree exactly, but
// where the float layers between them (LayerNormalization, GELU) differ from ORT's in the last bit,
// a value within that bit of a rounding boundary of DynamicQuantizeLinear lands on the other side
// (seen: x / scale = 14.500004 in ORT, 29 against 30), and over BERT-base's 12 layers such steps
// spread: err 0.027 with ort_quant_err 0.031, Kiln's int8 output as close to the float one as
// ORT's (0.034). The tiny encoder of the tests, two layers, stays at 1e-7. A model that does not
// build or match prints nan with its error on stderr.
//
// The models are made into a temporary folder (make_dynamic_quant.py: torch under
// KILN_TORCH_PYTHON, the quantization and ONNX Runtime in its virtual environment, --venv), or into
// --dir DIR, where a model already there is reused. ONNX Runtime runs in its own process
// (models_ref.py under the venv's python: CPU provider, intra_op_num_threads = threads,
// sequential, its default graph optimizations), so the two never share the cores; R rounds of each
// (--rounds), each side's median over the rounds makes the ratio.
//
//   bench_int8_dynamic [--dir DIR] [--venv DIR] [--threads T] [--min-time S] [--rounds R]
//                      [--tolerance E] [bert|lstm ...]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/cli.h"
#include "bench/model_timing.h"
#include "deploy/runtime/thread_pool.h"
#include "tests/common/temp_dir.h"
#include "tests/models/model_inputs.h"

namespace {

using kiln::bench::quote;

constexpr const char* kTarget = "llvm -mcpu=native";

/// A case: the dynamic model and its float origin, as make_dynamic_quant.py names them.
struct Case {
  const char* label;
  const char* dynamic;
  const char* fp32;
};
const Case kCases[] = {
    {"bert", "bert_base_dynamic", "bert_base"},
    {"lstm", "lstm_classifier_dynamic", "lstm_classifier"},
};

std::string run_command(const std::string& cmd) {
  return kiln::bench::run_command(cmd, "bench_int8_dynamic");
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// One model of a case: its build, and milliseconds per round for Kiln and ONNX Runtime.
struct Side {
  kiln::bench::BuiltModel built;
  std::vector<double> kiln_ms, ort_ms;
};

kiln::bench::BuiltModel build(const std::string& dir, const std::string& name, double tolerance) {
  kiln::graph::OnnxImportOptions import;
  try {
    import = kiln::model_inputs::bind_shapes(kiln::model_inputs::load(dir, name));
  } catch (const std::exception& e) {
    kiln::bench::BuiltModel b;
    b.error = e.what();
    return b;
  }
  return kiln::bench::build_and_check(dir, name, kTarget, {}, import, tolerance);
}

const kiln::cli::Program kBench{
    .name = "bench_int8_dynamic",
    .operands = "[bert|lstm...]",
    .summary =
        "Dynamically quantized models (quantize_dynamic) against ONNX Runtime, with their "
        "float originals (default: both models).",
    .flags = {{"--dir", "DIR",
               "make the models here, reusing those already there (default: a temporary folder)"},
              {"--venv", "DIR",
               "the virtual environment of onnxruntime's quantization tools (default: "
               "build/quant-venv)"},
              {"--threads", "T", "threads of each side (default: 2)"},
              {"--min-time", "S", "seconds of timing per model, side and round (default: 1)"},
              {"--rounds", "R", "rounds of each side, timed in turn (default: 3)"},
              {"--tolerance", "E",
               "max|diff| / max|ref| allowed against ONNX Runtime's int8 output (default: 0.05)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const int threads =
      args.has("--threads") ? kiln::cli::positive_number(args.get("--threads"), "--threads") : 2;
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                              : 1.0;
  const int rounds =
      args.has("--rounds") ? kiln::cli::positive_number(args.get("--rounds"), "--rounds") : 3;
  const double tolerance = args.has("--tolerance")
                               ? kiln::cli::real_at_least(args.get("--tolerance"), "--tolerance", 0)
                               : 0.05;
  std::vector<Case> cases;
  for (const std::string& a : args.operands) {
    auto it = std::find_if(std::begin(kCases), std::end(kCases),
                           [&](const Case& c) { return a == c.label; });
    if (it == std::end(kCases)) {
      throw kiln::cli::UsageError("bench_int8_dynamic has no model '" + a + "' (names: bert lstm)");
    }
    cases.push_back(*it);
  }
  if (cases.empty()) cases.assign(std::begin(kCases), std::end(kCases));

  std::optional<kiln::testing::TempDir> temp;
  std::string dir = args.get("--dir");
  if (dir.empty()) {
    temp.emplace("kiln_bench_int8_dynamic");
    dir = temp->path().string();
  }
  std::filesystem::create_directories(dir);
  const std::string venv = args.has("--venv") ? args.get("--venv") : KILN_QUANT_VENV;
  std::string make = "python3 " + quote(KILN_MAKE_DYNAMIC_QUANT_SCRIPT) + " " + quote(dir) +
                     " --venv " + quote(venv);
  bool missing = false;
  for (const Case& c : cases) {
    if (!std::filesystem::exists(dir + "/" + c.dynamic + ".expected.npy")) {
      make += std::string(" --only ") + c.dynamic;
      missing = true;
    }
  }
  if (missing) run_command(make + " >&2");
  const std::string float_dir = dir + "/float";

  for (const Case& c : cases) {
    Side q{build(dir, c.dynamic, tolerance), {}, {}};
    Side f{build(float_dir, c.fp32, 1e-4), {}, {}};
    for (const auto* s : {&q, &f}) {
      if (!s->built.exec) std::fprintf(stderr, "%s: %s\n", c.label, s->built.error.c_str());
    }
    for (int r = 0; r < rounds; ++r) {
      for (auto [side, d, name] :
           {std::tuple{&q, dir, c.dynamic}, std::tuple{&f, float_dir, c.fp32}}) {
        std::ostringstream ref;
        ref << quote(venv + "/bin/python3") << " " << quote(KILN_MODELS_REF_SCRIPT) << " "
            << quote(d) << " --min-time " << min_time << " --threads " << threads << " --only "
            << name;
        std::istringstream in(run_command(ref.str()));
        std::string n;
        int t = 0;
        double ms = NAN;
        if (in >> n >> t >> ms) side->ort_ms.push_back(ms);
        if (side->built.exec) {
          kiln::runtime::set_num_threads(threads);
          side->kiln_ms.push_back(
              kiln::bench::median_ms([&] { side->built.exec->run(); }, min_time));
          kiln::runtime::set_num_threads(0);
        }
      }
    }
    const double k = median(q.kiln_ms), o = median(q.ort_ms);
    const auto ref = kiln::runtime::load_npy(dir + "/" + c.dynamic + ".expected.npy");
    const double err =
        q.built.exec ? kiln::bench::relative_error(q.built.exec->output(0), ref) : NAN;
    const double quant_err = kiln::bench::relative_error(
        ref, kiln::runtime::load_npy(float_dir + "/" + c.fp32 + ".expected.npy"));
    std::printf(
        "case=int8_%s_dynamic kiln_ms=%.3f ort_ms=%.3f ratio=%.3f kiln_fp32_ms=%.3f "
        "ort_fp32_ms=%.3f err=%.3g ort_quant_err=%.3g threads=%d\n",
        c.label, k, o, o / k, median(f.kiln_ms), median(f.ort_ms), err, quant_err, threads);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
