// PTX from LLVM's NVPTX back-end: the hand-built test kernels (device_test_kernels.h) and the GPU
// templates' kernels (matmul, conv2d at their default and random configs, injective) compile for
// sm_61 and sm_90 with their entries, barriers and shared arrays of the right sizes; where ptxas
// is installed (it takes sm_75 and newer) it assembles them and their resources are checked,
// shared memory against NVRTC's build of the same kernels. Math is libdevice, linked and inlined.
// Where a CUDA device exists (not on the build machines), the templates' NVPTX kernels run
// against NVRTC's on the same inputs.
#include "compiler/codegen/codegen_nvptx.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/codegen/build_device.h"
#include "compiler/codegen/codegen_device_c.h"
#include "compiler/codegen/nvrtc.h"
#include "compiler/ir/functor.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/elementwise.h"
#include "compiler/topi/gpu/conv2d_gpu.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/matmul_gpu.h"
#include "compiler/topi/matmul.h"
#include "deploy/runtime/device_api.h"
#include "deploy/runtime/device_program.h"
#include "tests/unit/device_test_kernels.h"

namespace kiln {
namespace {

using codegen::nvptx_compile;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The sizes in bytes of the `.shared` arrays of `ptx`.
std::vector<int64_t> shared_arrays(const std::string& ptx) {
  static const std::regex kShared(R"(\.shared\s+\.align\s+\d+\s+\.b8\s+[^\s\[]+\[(\d+)\])");
  std::vector<int64_t> out;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), kShared);
       it != std::sregex_iterator(); ++it) {
    out.push_back(std::stoll((*it)[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// What a kernel's IR says its PTX must have: its shared arrays (sorted sizes) and barriers.
struct Expected {
  std::vector<int64_t> shared;
  int barriers = 0;
};

Expected expected(const ir::PrimFunc& f) {
  Expected e;
  ir::post_order_visit(f.body, [&](const ir::Object* o) {
    auto* s = dynamic_cast<const ir::StmtNode*>(o);
    if (s != nullptr && s->kind == ir::StmtKind::kAllocate) {
      auto* a = static_cast<const ir::AllocateNode*>(s);
      if (a->scope != "shared") return;
      int64_t n = a->dtype.bytes() * a->dtype.lanes();
      for (const ir::Expr& x : a->extents) n *= *ir::as_const_int(x);
      e.shared.push_back(n);
    }
    auto* c = dynamic_cast<const ir::CallNode*>(o);
    if (c != nullptr && c->name == "kiln.storage_sync") ++e.barriers;
  });
  std::sort(e.shared.begin(), e.shared.end());
  return e;
}

/// Compiles `kernels` for `arch` and checks the PTX against their IR: the target, one entry
/// each, bar.sync where barriers are (LLVM may duplicate one into both arms of a branch, never
/// drop it), the shared arrays; ptxas's resources where it takes the arch.
void check_ptx(const std::vector<ir::PrimFunc>& kernels, const std::string& arch,
               const std::string& what) {
  const std::string ptx = nvptx_compile(kernels, arch);
  EXPECT_NE(ptx.find(".target " + arch), std::string::npos) << what << "\n" << ptx;
  EXPECT_EQ(count(ptx, ".entry "), kernels.size()) << what;
  std::vector<int64_t> shared;
  int barriers = 0;
  for (const ir::PrimFunc& k : kernels) {
    EXPECT_EQ(count(ptx, ".entry " + k.name + "("), 1u) << what << ": " << k.name;
    const Expected e = expected(k);
    shared.insert(shared.end(), e.shared.begin(), e.shared.end());
    barriers += e.barriers;
  }
  std::sort(shared.begin(), shared.end());
  EXPECT_EQ(shared_arrays(ptx), shared) << what;
  if (barriers == 0) {
    EXPECT_EQ(count(ptx, "bar.sync"), 0u) << what;
  } else {
    EXPECT_GE(count(ptx, "bar.sync"), 1u) << what;
  }
  EXPECT_EQ(count(ptx, "__nv_"), 0u) << what << ": libdevice calls left";
  if (!codegen::nvrtc_accepts(arch) || codegen::find_ptxas().empty()) return;
  const auto resources = codegen::ptxas_resources(ptx, arch);
  ASSERT_EQ(resources.size(), kernels.size()) << what;
  codegen::check_kernel_resources(resources, target::Target::parse("cuda -arch=" + arch));
  if (!codegen::nvrtc_available()) return;
  // NVRTC's build of the same kernels has the same shared memory.
  const auto nvrtc =
      codegen::ptxas_resources(codegen::nvrtc_compile(codegen::print_cuda(kernels), arch), arch);
  std::map<std::string, codegen::KernelResources> by_name;
  for (const auto& r : nvrtc) by_name[r.kernel] = r;
  for (const auto& r : resources) {
    EXPECT_EQ(r.shared_bytes, by_name.at(r.kernel).shared_bytes) << what << ": " << r.kernel;
    // Registers differ (LLVM and NVVM optimize differently: 0.6x to 1.2x NVRTC's here), and
    // check_kernel_resources above holds them to the target's limits. Local arrays (register
    // tiles) stay in registers: the thread indices' ranges let LLVM fold the tiles' indices.
    EXPECT_EQ(r.stack_bytes, 0) << what << ": " << r.kernel << " keeps local memory";
    EXPECT_EQ(r.spill_bytes, 0) << what << ": " << r.kernel << " spills";
  }
}

TEST(Nvptx, TestKernels) {
  const std::vector<ir::PrimFunc> kernels = {testing::tiled_matmul(),
                                             testing::div_mod(),
                                             testing::vectors(),
                                             testing::misc(),
                                             testing::vector_let(),
                                             testing::math("math_f32", ir::kFloat32),
                                             testing::math("math_f64", ir::DataType::Float(64)),
                                             testing::math("math_f16", ir::kFloat16)};
  for (const char* arch : {"sm_61", "sm_75", "sm_90"}) check_ptx(kernels, arch, arch);
}

TEST(Nvptx, TiledMatmulHasItsSharedTilesAndBarriers) {
  const std::string ptx = nvptx_compile({testing::tiled_matmul()}, "sm_61");
  EXPECT_NE(ptx.find(".entry tiled_matmul("), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".maxntid 64, 1, 1"), std::string::npos) << ptx;  // 8 x 8 threads
  EXPECT_EQ(shared_arrays(ptx), (std::vector<int64_t>{1024, 1024})) << ptx;
  EXPECT_GE(count(ptx, "bar.sync"), 2u) << ptx;          // before and after the tiles' use
  EXPECT_EQ(count(ptx, "st.shared.v4.f32"), 2u) << ptx;  // a float4 of each tile per thread
  for (const char* index : {"%tid.x", "%tid.y", "%ctaid.x", "%ctaid.y"}) {
    EXPECT_NE(ptx.find(index), std::string::npos) << index << "\n" << ptx;
  }
}

TEST(Nvptx, PtxVersionKnowsTheArch) {
  const std::string old = nvptx_compile({testing::div_mod()}, "sm_61");
  EXPECT_NE(old.find(".version 6.0"), std::string::npos) << old;
  const std::string hopper = nvptx_compile({testing::div_mod()}, "sm_90a");
  EXPECT_NE(hopper.find(".version 8.0"), std::string::npos) << hopper;
  EXPECT_NE(hopper.find(".target sm_90a"), std::string::npos) << hopper;
  if (codegen::find_ptxas().empty()) return;
  EXPECT_EQ(codegen::ptxas_resources(hopper, "sm_90a").size(), 1u);
}

TEST(Nvptx, RefusesWhatItCannotCompile) {
  EXPECT_THROW(nvptx_compile({testing::tiled_matmul()}, "compute_61"), Error);
  EXPECT_THROW(nvptx_compile({testing::tiled_matmul()}, "sm_13"), Error);
  EXPECT_THROW(nvptx_compile({testing::tiled_matmul(), testing::tiled_matmul()}, "sm_61"), Error);
}

using Scheduler =
    std::function<void(te::Schedule&, const te::Tensor&, const space::Config&, const te::Tensor&)>;

/// The default config and `random` plausible ones of a template, each lowered for `arch` and
/// compiled; configs lowering refuses (over the target's limits) are skipped.
void check_template(const std::function<std::vector<te::Tensor>()>& make,
                    const std::function<space::ConfigSpace(const te::Tensor&)>& make_space,
                    const std::function<space::Config(const space::ConfigSpace&,
                                                      const target::Target&)>& default_config,
                    const Scheduler& schedule, const std::vector<std::string>& tiles,
                    const std::string& what) {
  for (const char* arch : {"sm_61", "sm_90"}) {
    const target::Target target = target::Target::parse(std::string("cuda -arch=") + arch);
    space::ConfigSpace sp = make_space(make().back());
    std::vector<space::Config> configs = {default_config(sp, target)};
    std::mt19937_64 gen(61);
    while (configs.size() < 4) {
      space::Config r = sp.get(gen() % sp.size());
      if (topi::gpu::plausible(r, tiles, target.max_num_threads)) configs.push_back(r);
    }
    for (size_t i = 0; i < configs.size(); ++i) {
      std::vector<te::Tensor> t = make();
      te::Schedule s = te::create_schedule({t.back()});
      schedule(s, t.back(), configs[i], t.back());
      pass::DeviceFunction d;
      try {
        d = compiler::lower_device(s, t, "f", target);
      } catch (const Error&) {
        ASSERT_NE(i, 0u) << what << ": the default config does not lower for " << arch;
        continue;
      }
      std::vector<ir::PrimFunc> kernels;
      for (const auto& k : d.kernels) kernels.push_back(k.func);
      check_ptx(kernels, arch, what + " " + arch + " " + configs[i].str());
    }
  }
}

TEST(Nvptx, MatmulTemplate) {
  check_template(
      [] {
        te::Tensor a = te::placeholder({64, 48}, ir::kFloat32, "A");
        te::Tensor b = te::placeholder({48, 96}, ir::kFloat32, "B");
        return std::vector<te::Tensor>{a, b, topi::matmul(a, b, "C")};
      },
      topi::gpu::matmul_gpu_space, topi::gpu::matmul_gpu_default, topi::gpu::schedule_matmul_gpu,
      {"tile_y", "tile_x"}, "matmul");
}

TEST(Nvptx, Conv2dTemplate) {
  check_template(
      [] {
        te::Tensor x = te::placeholder({1, 16, 14, 14}, ir::kFloat32, "data");
        te::Tensor w = te::placeholder({32, 16, 3, 3}, ir::kFloat32, "kernel");
        return std::vector<te::Tensor>{x, w, topi::conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1})};
      },
      topi::gpu::conv2d_nchw_gpu_space, topi::gpu::conv2d_nchw_gpu_default,
      topi::gpu::schedule_conv2d_nchw_gpu, {"tile_f", "tile_y", "tile_x"}, "conv2d");
}

TEST(Nvptx, InjectiveAndBuildGpu) {
  for (const char* arch : {"sm_61", "sm_90"}) {
    te::Tensor x = te::placeholder({3, 5, 7}, ir::kFloat32, "x");
    te::Tensor y = topi::relu(x);
    te::Schedule s = te::create_schedule({y});
    topi::gpu::schedule_injective(s, y, 64);
    const target::Target target = target::Target::parse(std::string("cuda -arch=") + arch);
    pass::DeviceFunction d = compiler::lower_device(s, {x, y}, "relu", target);
    std::vector<ir::PrimFunc> kernels;
    for (const auto& k : d.kernels) kernels.push_back(k.func);
    check_ptx(kernels, arch, std::string("relu ") + arch);
  }
  // build_gpu takes the NVPTX path where NVRTC cannot go.
  te::Tensor x = te::placeholder({3, 5, 7}, ir::kFloat32, "x");
  te::Tensor y = topi::relu(x);
  te::Schedule s = te::create_schedule({y});
  topi::gpu::schedule_injective(s, y, 64);
  runtime::DeviceProgram p =
      compiler::build_gpu(s, {x, y}, target::Target::parse("cuda -arch=sm_61"), "relu");
  EXPECT_EQ(p.format, "ptx");
  EXPECT_NE(p.code.find(".target sm_61"), std::string::npos) << p.code;
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_NE(p.code.find(".entry " + p.kernels[0].name + "("), std::string::npos) << p.code;

  // KILN_CUDA_PTX=nvptx takes the NVPTX path for archs NVRTC compiles too.
  setenv("KILN_CUDA_PTX", "nvptx", 1);
  runtime::DeviceProgram forced;
  try {
    forced = compiler::build_gpu(s, {x, y}, target::Target::parse("cuda -arch=sm_90"), "relu");
  } catch (...) {
    unsetenv("KILN_CUDA_PTX");
    throw;
  }
  unsetenv("KILN_CUDA_PTX");
  EXPECT_NE(forced.code.find("Generated by LLVM NVPTX Back-End"), std::string::npos) << forced.code;
  EXPECT_NE(forced.code.find(".target sm_90"), std::string::npos) << forced.code;
}

/// The last tensor of `program` run on `gpu`, the others filled with the same random values.
std::vector<float> run(runtime::DeviceAPI& gpu, const runtime::DeviceProgram& program) {
  runtime::LoadedDeviceProgram loaded(gpu, program);
  std::vector<runtime::DeviceBuffer> buffers;
  std::mt19937 gen(16);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values;
  for (const auto& t : program.params) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    values.resize(static_cast<size_t>(n));
    for (float& v : values) v = dist(gen);
    buffers.push_back(gpu.alloc(n * 4));
    gpu.copy_to_device(buffers.back(), values.data(), n * 4);
  }
  std::vector<const runtime::DeviceBuffer*> params;
  for (const auto& b : buffers) params.push_back(&b);
  loaded.launch(params);
  gpu.copy_to_host(values.data(), buffers.back(), buffers.back().bytes());
  return values;
}

TEST(Nvptx, TemplatesComputeWhatNvrtcKernelsDoOnACudaDevice) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kCuda, &why)) GTEST_SKIP() << why;
  runtime::DeviceAPI& gpu = runtime::DeviceAPI::get(TargetKind::kCuda);
  const std::string arch = "sm_" + std::to_string(gpu.info().compute_capability_major) +
                           std::to_string(gpu.info().compute_capability_minor);
  if (!codegen::nvrtc_accepts(arch)) GTEST_SKIP() << arch << ": NVRTC cannot build the reference";
  const target::Target target = target::Target::parse("cuda -arch=" + arch);
  auto compare = [&](te::Schedule& s, const std::vector<te::Tensor>& t, const std::string& what) {
    const pass::DeviceFunction d = compiler::lower_device(s, t, "f", target);
    const runtime::DeviceProgram nvrtc = codegen::build_device(d, target);
    runtime::DeviceProgram nvptx = nvrtc;
    std::vector<ir::PrimFunc> kernels;
    for (const auto& k : d.kernels) kernels.push_back(k.func);
    nvptx.code = nvptx_compile(kernels, arch);
    const std::vector<float> want = run(gpu, nvrtc), got = run(gpu, nvptx);
    ASSERT_EQ(got.size(), want.size());
    double scale = 1, diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, double(std::abs(want[i])));
      diff = std::max(diff, double(std::abs(got[i] - want[i])));
    }
    EXPECT_LE(diff, 1e-5 * scale) << what << " on " << arch;
  };
  {
    te::Tensor a = te::placeholder({64, 48}, ir::kFloat32, "A");
    te::Tensor b = te::placeholder({48, 96}, ir::kFloat32, "B");
    te::Tensor c = topi::matmul(a, b, "C");
    te::Schedule s = te::create_schedule({c});
    topi::gpu::schedule_matmul_gpu(
        s, c, topi::gpu::matmul_gpu_default(topi::gpu::matmul_gpu_space(c), target), c);
    compare(s, {a, b, c}, "matmul");
  }
  {
    te::Tensor x = te::placeholder({1, 16, 14, 14}, ir::kFloat32, "data");
    te::Tensor w = te::placeholder({32, 16, 3, 3}, ir::kFloat32, "kernel");
    te::Tensor y = topi::conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1});
    te::Schedule s = te::create_schedule({y});
    topi::gpu::schedule_conv2d_nchw_gpu(
        s, y, topi::gpu::conv2d_nchw_gpu_default(topi::gpu::conv2d_nchw_gpu_space(y), target), y);
    compare(s, {x, w, y}, "conv2d");
  }
  {
    te::Tensor x = te::placeholder({3, 5, 7}, ir::kFloat32, "x");
    te::Tensor y = topi::sigmoid(x);
    te::Schedule s = te::create_schedule({y});
    topi::gpu::schedule_injective(s, y, 64);
    compare(s, {x, y}, "sigmoid");
  }
}

}  // namespace
}  // namespace kiln
