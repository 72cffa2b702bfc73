// Printed CUDA C through NVRTC and ptxas: the tiled matmul becomes PTX with its entry and its
// barriers for compute_90 and compute_75, every test kernel compiles, compile errors name the
// kernel and carry NVRTC's log, old architectures are refused clearly, and ptxas reports the
// kernel's registers and shared memory. Skipped where the CUDA toolkit is not installed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/codegen/codegen_device_c.h"
#include "compiler/codegen/nvrtc.h"
#include "compiler/target/target.h"
#include "tests/unit/device_test_kernels.h"

namespace kiln {
namespace {

using codegen::nvrtc_compile;

#define REQUIRE_NVRTC() \
  if (!codegen::nvrtc_available()) GTEST_SKIP() << "NVRTC not found (libnvrtc.so.13)"

TEST(Nvrtc, VirtualArchitectureFromTheTarget) {
  EXPECT_EQ(codegen::nvrtc_virtual_arch("sm_90"), "compute_90");
  EXPECT_EQ(codegen::nvrtc_virtual_arch("sm_75"), "compute_75");
  EXPECT_EQ(codegen::nvrtc_virtual_arch("sm_90a"), "compute_90a");
  try {
    codegen::nvrtc_virtual_arch("sm_61");
    FAIL() << "sm_61 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute_75 and newer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(codegen::nvrtc_virtual_arch("compute_90"), Error);
}

TEST(Nvrtc, TiledMatmulBecomesPtxWithItsBarriers) {
  REQUIRE_NVRTC();
  const std::string source = codegen::print_cuda({testing::tiled_matmul()});
  for (const char* arch : {"sm_90", "sm_75"}) {
    const std::string ptx = nvrtc_compile(source, arch, "tiled_matmul");
    EXPECT_NE(ptx.find(".entry tiled_matmul"), std::string::npos) << arch;
    EXPECT_NE(ptx.find("bar.sync"), std::string::npos) << arch;
    EXPECT_NE(ptx.find(std::string(".target ") + arch), std::string::npos) << arch;
    // The float4 copies to shared memory: read-only (non-coherent) 16-byte loads.
    EXPECT_NE(ptx.find("ld.global.nc.v4"), std::string::npos) << arch << "\n" << ptx;
    EXPECT_NE(ptx.find("st.shared.v4"), std::string::npos) << arch << "\n" << ptx;
  }
}

TEST(Nvrtc, EveryTestKernelCompiles) {
  REQUIRE_NVRTC();
  const std::string ptx = nvrtc_compile(
      codegen::print_cuda({testing::div_mod(), testing::vectors(), testing::misc(),
                           testing::vector_let(), testing::math("math_f32", ir::kFloat32),
                           testing::math("math_f64", ir::DataType::Float(64)),
                           testing::math("math_f16", ir::kFloat16)}),
      "sm_90");
  for (const char* k :
       {"div_mod", "vectors", "misc", "vector_let", "math_f32", "math_f64", "math_f16"}) {
    EXPECT_NE(ptx.find(std::string(".entry ") + k), std::string::npos) << k;
  }
}

TEST(Nvrtc, CompileErrorNamesTheKernelAndCarriesTheLog) {
  REQUIRE_NVRTC();
  const std::string source =
      "extern \"C\" __global__ void good(float* a) { a[0] = 1.0f; }\n"
      "extern \"C\" __global__ void __launch_bounds__(32) bad(float* a) {\n"
      "  a[0] = undefined_name;\n"
      "}\n";
  try {
    nvrtc_compile(source, "sm_90", "my_function");
    FAIL() << "compiled";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("my_function"), std::string::npos) << m;
    EXPECT_NE(m.find("kernel 'bad'"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_name"), std::string::npos) << m;
  }
}

TEST(Ptxas, ResourcesOfTheTiledMatmul) {
  REQUIRE_NVRTC();
  if (codegen::find_ptxas().empty()) GTEST_SKIP() << "ptxas not found";
  const std::string ptx = nvrtc_compile(codegen::print_cuda({testing::tiled_matmul()}), "sm_90");
  const auto resources = codegen::ptxas_resources(ptx, "sm_90");
  ASSERT_EQ(resources.size(), 1u);
  EXPECT_EQ(resources[0].kernel, "tiled_matmul");
  EXPECT_GT(resources[0].registers, 16);  // 16 accumulators at least
  EXPECT_LE(resources[0].registers, 255);
  EXPECT_EQ(resources[0].shared_bytes, 2 * 256 * 4);  // AA and BB
  EXPECT_EQ(resources[0].spill_bytes, 0);
  codegen::check_kernel_resources(resources, target::Target::parse("cuda -arch=sm_90"));

  auto too_much = resources;
  too_much[0].shared_bytes = 64 * 1024;
  try {
    codegen::check_kernel_resources(too_much, target::Target::parse("cuda -arch=sm_90"));
    FAIL() << "64 KiB of shared memory accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiled_matmul"), std::string::npos) << e.what();
  }
  too_much = resources;
  too_much[0].registers = 300;
  EXPECT_THROW(codegen::check_kernel_resources(too_much, target::Target::parse("cuda -arch=sm_90")),
               Error);
}

}  // namespace
}  // namespace kiln
