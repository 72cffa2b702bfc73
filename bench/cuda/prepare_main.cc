// bench_cuda_prepare DIR [--arch sm_90] [--candidates N]: the compiler half of
// `scripts/bench.sh cuda`. For the matmuls (n = 1024, 4096) and the twelve ResNet-18
// convolutions it writes DIR/NN_<case>.json: the case's shape and candidate kernels of Kiln's GPU
// template, each compiled to PTX (a DeviceProgram): the template's default config first, then
// its neighbours and random plausible configs of its space (topi::gpu::plausible: 32 to 1024
// threads a block, at most 64 outputs a thread; lowering refuses those over the shared memory of a
// block); the matmuls get three times the candidates, drawn from the SGEMM family (draw_sgemm).
// bench_cuda_measure runs them on the GPU: measuring a random sample on the device and keeping the
// fastest is the tuning here (the XGBoost tuner needs the compiler beside the device, which the GPU
// machine lacks).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/error.h"
#include "base/json.h"
#include "bench/resnet_layers.h"
#include "compiler/lower.h"
#include "compiler/target/target.h"
#include "compiler/te/tensor.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/gpu/conv2d_gpu.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/matmul_gpu.h"
#include "compiler/topi/matmul.h"

namespace fs = std::filesystem;
using kiln::Json;
namespace space = kiln::space;
namespace te = kiln::te;
namespace topi = kiln::topi;

namespace {

struct Template {
  std::function<space::ConfigSpace(const te::Tensor&)> space;
  std::function<space::Config(const space::ConfigSpace&, const kiln::target::Target&)>
      default_config;
  std::function<void(te::Schedule&, const te::Tensor&, const space::Config&, const te::Tensor&)>
      schedule;
  std::vector<std::string> four_part_knobs;  ///< block, vthread, thread, inner
  /// Draws a random point where the fast configs live (uniform over the space when empty).
  std::function<space::Config(const space::ConfigSpace&, std::mt19937_64&)> draw;
};

/// A point of the large-matmul family where the fast SGEMM tilings live: along each output axis
/// 8 to 32 threads, each with 4 to 8 outputs (virtual threads times inner), a block side of at
/// least 64, reduction steps of 8 to 64, unrolled, with register prefetch; vector either way.
space::Config draw_sgemm(const space::ConfigSpace& sp, std::mt19937_64& gen) {
  std::vector<int> pos(sp.knobs().size());
  for (size_t k = 0; k < pos.size(); ++k) {
    const space::Knob& knob = sp.knobs()[k];
    std::vector<int> fits;
    for (size_t i = 0; i < knob.candidates.size(); ++i) {
      const std::vector<int64_t>& c = knob.candidates[i];
      bool fit = true;
      if (knob.name == "tile_y" || knob.name == "tile_x") {
        fit = c[2] >= 8 && c[2] <= 32 && c[1] * c[3] >= 4 && c[1] * c[3] <= 8 &&
              c[1] * c[2] * c[3] >= 64;
      } else if (knob.name == "tile_k") {
        fit = c[1] >= 8 && c[1] <= 64;
      } else if (knob.name == "unroll" || knob.name == "prefetch") {
        fit = c[0] == 1;
      }
      if (fit) fits.push_back(static_cast<int>(i));
    }
    pos[k] =
        fits.empty() ? static_cast<int>(gen() % knob.candidates.size()) : fits[gen() % fits.size()];
  }
  return sp.from_positions(pos);
}

Json candidates(const std::function<std::pair<te::Tensor, std::vector<te::Tensor>>()>& make,
                const Template& t, const kiln::target::Target& target, int count,
                const std::string& name) {
  auto [probe, probe_args] = make();
  space::ConfigSpace sp = t.space(probe);
  std::vector<space::Config> configs = {t.default_config(sp, target)};
  std::set<uint64_t> seen = {configs[0].index()};
  // A quarter of the budget: the default's neighbours (one knob moved one or two candidates
  // either way), the rest random plausible points.
  const std::vector<int> origin = configs[0].positions();
  for (size_t k = 0; k < origin.size() && static_cast<int>(configs.size()) < count / 4; ++k) {
    for (int step : {-1, 1, -2, 2}) {
      std::vector<int> pos = origin;
      pos[k] += step;
      if (pos[k] < 0 || pos[k] >= static_cast<int>(sp.knobs()[k].candidates.size())) continue;
      space::Config c = sp.from_positions(pos);
      if (seen.insert(c.index()).second &&
          topi::gpu::plausible(c, t.four_part_knobs, target.max_num_threads)) {
        configs.push_back(c);
      }
    }
  }
  std::mt19937_64 gen(42);
  Json::Array out;
  int tries = 0;
  size_t next = 0;
  while (static_cast<int>(out.size()) < count && tries < 200 * count) {
    if (next == configs.size()) {
      space::Config c = t.draw ? t.draw(sp, gen) : sp.get(gen() % sp.size());
      ++tries;
      if (!seen.insert(c.index()).second ||
          !topi::gpu::plausible(c, t.four_part_knobs, target.max_num_threads))
        continue;
      configs.push_back(c);
    }
    const space::Config& cfg = configs[next++];
    auto [out_t, args] = make();
    te::Schedule s = te::create_schedule({out_t});
    try {
      t.schedule(s, out_t, cfg, out_t);
      kiln::runtime::DeviceProgram p = kiln::compiler::build_gpu(s, args, target, name);
      out.emplace_back(Json::Object{{"config", cfg.str()}, {"program", p.to_json()}});
    } catch (const kiln::Error& e) {
      if (next == 1) throw;  // the default must build
    }
  }
  return out;
}

void write_case(const fs::path& dir, int index, const std::string& name, Json::Object fields) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%02d_", index);
  fields["case"] = name;
  std::ofstream(dir / (prefix + name + ".json")) << Json(fields).dump();
  std::printf("%s: %zu candidates\n", name.c_str(),
              fields["candidates"].as_array("candidates").size());
  std::fflush(stdout);
}

const kiln::cli::Program kBench{
    .name = "bench_cuda_prepare",
    .operands = "DIR",
    .summary =
        "The compiler half of `scripts/bench.sh cuda`: writes DIR/NN_<case>.json, each "
        "case's candidate kernels compiled to PTX, for bench_cuda_measure.",
    .flags = {{"--arch", "sm_XX", "the GPU architecture compiled for (default: sm_90)"},
              {"--candidates", "N",
               "candidates per convolution, three times as many per matmul "
               "(default: 48)"}},
};

int run_bench(const kiln::cli::Args& args) {
  const fs::path dir = args.only_operand("DIR");
  const std::string arch = args.get("--arch", "sm_90");
  const int count = args.has("--candidates")
                        ? kiln::cli::positive_number(args.get("--candidates"), "--candidates")
                        : 48;
  try {
    fs::create_directories(dir);
    auto target = kiln::target::Target::parse("cuda -arch=" + arch);

    Template matmul{topi::gpu::matmul_gpu_space,
                    topi::gpu::matmul_gpu_default,
                    topi::gpu::schedule_matmul_gpu,
                    {"tile_y", "tile_x"},
                    draw_sgemm};
    Template conv{topi::gpu::conv2d_nchw_gpu_space,
                  topi::gpu::conv2d_nchw_gpu_default,
                  topi::gpu::schedule_conv2d_nchw_gpu,
                  {"tile_f", "tile_y", "tile_x"},
                  {}};
    int index = 0;
    for (int n : {1024, 4096}) {
      auto make = [n] {
        te::Tensor a = te::placeholder({n, n}, kiln::ir::kFloat32, "A");
        te::Tensor b = te::placeholder({n, n}, kiln::ir::kFloat32, "B");
        te::Tensor c = topi::matmul(a, b, "C");
        return std::pair{c, std::vector<te::Tensor>{a, b, c}};
      };
      std::string name = "matmul_" + std::to_string(n);
      write_case(dir, index++, name,
                 {{"op", "matmul"},
                  {"m", n},
                  {"n", n},
                  {"k", n},
                  {"candidates", candidates(make, matmul, target, 3 * count, "matmul")}});
    }
    for (const auto& l : kiln::bench::resnet18_layers()) {
      auto make = [&l] {
        te::Tensor x = te::placeholder({1, l.ic, l.hw, l.hw}, kiln::ir::kFloat32, "data");
        te::Tensor w = te::placeholder({l.oc, l.ic, l.k, l.k}, kiln::ir::kFloat32, "kernel");
        te::Tensor y =
            topi::conv2d_nchw(x, w, {l.stride, l.stride}, {l.pad(), l.pad(), l.pad(), l.pad()});
        return std::pair{y, std::vector<te::Tensor>{x, w, y}};
      };
      std::string name = std::string("conv_") + l.name;
      write_case(dir, index++, name,
                 {{"op", "conv2d"},
                  {"c", l.ic},
                  {"hw", l.hw},
                  {"k", l.oc},
                  {"kernel", l.k},
                  {"pad", l.pad()},
                  {"stride", l.stride},
                  {"candidates", candidates(make, conv, target, count, "conv2d")}});
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_prepare: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
