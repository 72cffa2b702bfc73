// bench_cuda_measure DIR: the device half of `scripts/bench.sh cuda`. Reads the candidate kernels
// that bench_cuda_prepare compiled (DIR/*.json: per case the default config and random configs of
// Kiln's GPU template, each a DeviceProgram of PTX), runs each on the CUDA device, checks it
// against the reference library (cuBLAS SGEMM, cuDNN convolution, both plain fp32) and times it
// with CUDA events, then prints per case the best measured candidate against the reference:
//
//   case=cuda_matmul_<n> kiln_tflops=<x> ref_tflops=<y> ratio=<x/y> default_tflops=<d> ...
//   case=cuda_conv_<layer> kiln_tflops=<x> ref_tflops=<y> ratio=<x/y> ...
//   case=cuda_conv_geomean ratio=<g> layers=<n>
//
// Runtime only (no compiler, no LLVM), so it is built here and run on the GPU machine; it finds
// libcublas / libcudnn at run time (reference_libs.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/error.h"
#include "base/json.h"
#include "bench/cuda/reference_libs.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"

namespace fs = std::filesystem;
using kiln::Json;
using kiln::TargetKind;
using kiln::runtime::DeviceAPI;
using kiln::runtime::DeviceBuffer;
using kiln::runtime::DeviceProgram;
using kiln::runtime::LoadedDeviceProgram;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

DeviceBuffer upload(DeviceAPI& gpu, const std::vector<float>& v) {
  DeviceBuffer b = gpu.alloc(static_cast<int64_t>(v.size() * sizeof(float)));
  gpu.copy_to_device(b, v.data(), b.bytes());
  return b;
}

std::vector<float> download(DeviceAPI& gpu, const DeviceBuffer& b) {
  std::vector<float> v(static_cast<size_t>(b.bytes()) / sizeof(float));
  gpu.copy_to_host(v.data(), b, b.bytes());
  return v;
}

/// max|a - b| / max|b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    ref = std::max(ref, std::abs(double(b[i])));
  }
  return ref > 0 ? diff / ref : diff;
}

/// Milliseconds per call of `launch` (kernels of Kiln or a reference library on the same
/// device): repeated until a span takes at least `min_ms` of wall time between synchronizations,
/// best of `rounds` such spans. The same clock for both sides of every ratio.
double time_per_call(DeviceAPI& gpu, const std::function<void()>& launch, double min_ms,
                     int rounds) {
  using clock = std::chrono::steady_clock;
  auto span_ms = [&](int reps) {
    gpu.synchronize();
    auto t0 = clock::now();
    for (int i = 0; i < reps; ++i) launch();
    gpu.synchronize();
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  span_ms(1);  // warm up
  int reps = 1;
  double once = span_ms(1);
  if (once > 0) reps = std::clamp(static_cast<int>(min_ms / once) + 1, 1, 20000);
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) best = std::min(best, span_ms(reps) / reps);
  return best;
}

struct CaseResult {
  double best_ms = 1e30, default_ms = 0;
  std::string best_config;
  int candidates = 0, valid = 0, failed = 0;
  double worst_error = 0;
};

/// Runs every candidate of `c` on `params` (device buffers in the programs' order), checks output
/// `out_index` against `ref`, times the correct ones.
CaseResult run_candidates(DeviceAPI& gpu, const Json& c,
                          const std::vector<const DeviceBuffer*>& params, size_t out_index,
                          const std::vector<float>& ref, const std::string& origin) {
  CaseResult r;
  const Json::Array& cands = c.at("candidates", origin).as_array(origin + ": candidates");
  std::vector<std::pair<double, size_t>> screened;
  std::vector<std::unique_ptr<LoadedDeviceProgram>> loaded(cands.size());
  for (size_t i = 0; i < cands.size(); ++i) {
    ++r.candidates;
    const std::string config = cands[i].at("config", origin).as_string(origin + ": config");
    try {
      DeviceProgram p = DeviceProgram::from_json(cands[i].at("program", origin), origin);
      loaded[i] = std::make_unique<LoadedDeviceProgram>(gpu, std::move(p));
      std::vector<float> zeros(ref.size(), 0.0f);
      gpu.copy_to_device(*params[out_index], zeros.data(), params[out_index]->bytes());
      loaded[i]->launch(params);
      double err = relative_error(download(gpu, *params[out_index]), ref);
      if (!(err <= 1e-4)) {
        std::fprintf(stderr, "%s: config %s is wrong: max|diff|/max|ref| = %.3g\n", origin.c_str(),
                     config.c_str(), err);
        ++r.failed;
        loaded[i].reset();
        continue;
      }
      r.worst_error = std::max(r.worst_error, err);
      double ms = time_per_call(
          gpu, [&] { loaded[i]->launch(params); }, 2.0, 1);
      screened.emplace_back(ms, i);
      if (i == 0) r.default_ms = ms;
      ++r.valid;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: config %s failed: %s\n", origin.c_str(), config.c_str(), e.what());
      ++r.failed;
      loaded[i].reset();
    }
  }
  // The fastest few again, longer: the screening runs are short.
  std::sort(screened.begin(), screened.end());
  for (size_t j = 0; j < screened.size() && j < 4; ++j) {
    size_t i = screened[j].second;
    double ms = time_per_call(
        gpu, [&] { loaded[i]->launch(params); }, 20.0, 3);
    if (i == 0) r.default_ms = ms;
    if (ms < r.best_ms) {
      r.best_ms = ms;
      r.best_config = cands[i].at("config", origin).as_string(origin);
    }
  }
  return r;
}

void print_case(const std::string& name, double flops, double ref_ms, const CaseResult& r,
                const std::string& extra) {
  auto tflops = [&](double ms) { return ms > 0 && ms < 1e29 ? flops / (ms * 1e-3) / 1e12 : 0.0; };
  std::printf(
      "case=%s kiln_tflops=%.3f ref_tflops=%.3f ratio=%.3f default_tflops=%.3f kiln_ms=%.4f "
      "ref_ms=%.4f "
      "candidates=%d valid=%d failed=%d max_rel_err=%.2g%s best_config=%s\n",
      name.c_str(), tflops(r.best_ms), tflops(ref_ms), r.valid ? ref_ms / r.best_ms : 0.0,
      tflops(r.default_ms), r.valid ? r.best_ms : 0.0, ref_ms, r.candidates, r.valid, r.failed,
      r.worst_error, extra.c_str(), r.best_config.c_str());
  std::fflush(stdout);
}

const kiln::cli::Program kBench{
    .name = "bench_cuda_measure",
    .operands = "DIR",
    .summary =
        "The device half of `scripts/bench.sh cuda`: runs the candidates bench_cuda_prepare "
        "wrote to DIR on the CUDA device against cuBLAS and cuDNN.",
};

int run_bench(const kiln::cli::Args& args) {
  const std::string dir = args.only_operand("DIR");
  try {
    std::string why;
    if (!DeviceAPI::available(TargetKind::kCuda, &why)) {
      std::fprintf(stderr, "bench_cuda_measure: %s\n", why.c_str());
      return 1;
    }
    DeviceAPI& gpu = DeviceAPI::get(TargetKind::kCuda);
    std::printf("# device: %s\n", gpu.description().c_str());
    kiln::bench::Cublas cublas;
    kiln::bench::Cudnn cudnn;
    std::printf("# cublas: %s\n# cudnn: %s\n", cublas.path().c_str(), cudnn.path().c_str());

    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());  // prepare numbers them in order
    double log_sum = 0;
    int layers = 0;
    for (const fs::path& f : files) {
      std::ifstream in(f);
      std::stringstream text;
      text << in.rdbuf();
      const std::string origin = f.filename().string();
      Json c = Json::parse(text.str(), origin);
      const std::string op = c.at("op", origin).as_string(origin + ": op");
      const std::string name = c.at("case", origin).as_string(origin + ": case");
      if (op == "matmul") {
        int m = int(c.at("m", origin).as_int(origin)), n = int(c.at("n", origin).as_int(origin)),
            k = int(c.at("k", origin).as_int(origin));
        DeviceBuffer a = upload(gpu, random_values(size_t(m) * k, 1)),
                     b = upload(gpu, random_values(size_t(k) * n, 2));
        DeviceBuffer out = gpu.alloc(int64_t(m) * n * 4), ref = gpu.alloc(int64_t(m) * n * 4);
        cublas.sgemm(m, n, k, a.native(), b.native(), ref.native());
        std::vector<float> expect = download(gpu, ref);
        double ref_ms = time_per_call(
            gpu, [&] { cublas.sgemm(m, n, k, a.native(), b.native(), ref.native()); }, 20, 3);
        CaseResult r = run_candidates(gpu, c, {&a, &b, &out}, 2, expect, origin);
        print_case("cuda_" + name, 2.0 * m * n * k, ref_ms, r, "");
      } else if (op == "conv2d") {
        kiln::bench::ConvShape s{};
        s.n = 1;
        s.c = int(c.at("c", origin).as_int(origin));
        s.h = s.w = int(c.at("hw", origin).as_int(origin));
        s.k = int(c.at("k", origin).as_int(origin));
        s.r = s.s = int(c.at("kernel", origin).as_int(origin));
        s.pad = int(c.at("pad", origin).as_int(origin));
        s.stride = int(c.at("stride", origin).as_int(origin));
        DeviceBuffer x = upload(gpu, random_values(size_t(s.c) * s.h * s.w, 3));
        DeviceBuffer w = upload(gpu, random_values(size_t(s.k) * s.c * s.r * s.s, 4));
        const int64_t out_elems = int64_t(s.k) * s.out_h() * s.out_w();
        DeviceBuffer out = gpu.alloc(out_elems * 4), ref = gpu.alloc(out_elems * 4);
        std::vector<DeviceBuffer> scratch;
        cudnn.plan(
            s, x.native(), w.native(), ref.native(),
            [&](size_t bytes) {
              scratch.push_back(gpu.alloc(int64_t(bytes)));
              return scratch.back().native();
            },
            [](kiln::bench::DevicePtr) {});
        cudnn.run();
        std::vector<float> expect = download(gpu, ref);
        double ref_ms = time_per_call(
            gpu, [&] { cudnn.run(); }, 20, 3);
        CaseResult r = run_candidates(gpu, c, {&x, &w, &out}, 2, expect, origin);
        double flops = 2.0 * s.k * s.out_h() * s.out_w() * double(s.c) * s.r * s.s;
        print_case("cuda_" + name, flops, ref_ms, r,
                   " cudnn_algo=" + std::to_string(cudnn.algorithm()));
        if (r.valid) {
          log_sum += std::log(ref_ms / r.best_ms);
          ++layers;
        }
      } else {
        std::fprintf(stderr, "%s: unknown op '%s'\n", origin.c_str(), op.c_str());
      }
    }
    if (layers)
      std::printf("case=cuda_conv_geomean ratio=%.3f layers=%d\n", std::exp(log_sum / layers),
                  layers);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_measure: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
