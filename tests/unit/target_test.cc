// Target strings: parsing each kind and its options, printing them back, the vector width each
// implies, host detection, and the errors for unknown kinds and options.
#include "compiler/target/target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "base/error.h"

namespace kiln::target {
namespace {

std::string error_of(const std::string& s) {
  try {
    Target::parse(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Target, PlainLlvmIsHostWithGenericCpu) {
  Target t = Target::parse("llvm");
  EXPECT_EQ(t.kind, TargetKind::kCpu);
  EXPECT_EQ(t.triple, "");
  EXPECT_EQ(t.cpu, "");
  EXPECT_TRUE(t.is_host());
  EXPECT_EQ(t.str(), "llvm");
  EXPECT_EQ(t.llvm_triple(), host_triple());
}

TEST(Target, NativeAndNamedCpus) {
  Target native = Target::parse("llvm -mcpu=native");
  EXPECT_EQ(native.cpu, "native");
  EXPECT_TRUE(native.is_host());
  EXPECT_GE(native.vector_bits, 128);
  EXPECT_EQ(native.str(), "llvm -mcpu=native");
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(native.vector_bits, 512);
  }
#endif
  Target zen4 = Target::parse("llvm -mcpu=znver4");
  EXPECT_EQ(zen4.cpu, "znver4");
  EXPECT_EQ(zen4.vector_bits, 512);
  EXPECT_EQ(Target::parse("llvm -mcpu=haswell").vector_bits, 256);
  EXPECT_EQ(Target::parse("llvm").vector_bits, 128);
}

// CPU schedules block for one core's caches: this machine's where the code runs here, typical
// sizes by vector width for a named CPU or another machine.
TEST(Target, CacheSizes) {
  const Target native = Target::parse("llvm -mcpu=native");
  const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l1 > 0 && l2 > 0) {
    EXPECT_EQ(native.l1d_bytes, l1);
    EXPECT_EQ(native.l2_bytes, l2);
  }
  EXPECT_GT(native.l1d_bytes, 0);
  EXPECT_GT(native.l2_bytes, native.l1d_bytes);
  const Target zen4 = Target::parse("llvm -mcpu=znver4");
  EXPECT_EQ(zen4.l1d_bytes, 32 << 10);
  EXPECT_EQ(zen4.l2_bytes, 1 << 20);
  const Target haswell = Target::parse("llvm -mcpu=haswell");
  EXPECT_EQ(haswell.l1d_bytes, 32 << 10);
  EXPECT_EQ(haswell.l2_bytes, 256 << 10);
  EXPECT_EQ(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53").l2_bytes, 256 << 10);
  EXPECT_EQ(Target::parse("opencl").l1d_bytes, 0);
  EXPECT_EQ(Target::parse("cuda").l2_bytes, 0);
}

TEST(Target, AArch64CrossTarget) {
  Target t = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  EXPECT_EQ(t.triple, "aarch64-linux-gnu");
  EXPECT_EQ(t.cpu, "cortex-a53");
  EXPECT_EQ(t.arch_name(), "aarch64");
  EXPECT_EQ(t.vector_bits, 128);
#if defined(__x86_64__)
  EXPECT_FALSE(t.is_host());
#endif
  EXPECT_EQ(t.str(), "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  EXPECT_EQ(Target::parse(t.str()), t);
}

TEST(Target, MattrChangesVectorWidth) {
  Target t = Target::parse("llvm -mcpu=haswell -mattr=+avx512f,+avx512bw");
  EXPECT_EQ(t.mattr, "+avx512f,+avx512bw");
  EXPECT_EQ(t.vector_bits, 512);
  EXPECT_EQ(Target::parse("llvm -mcpu=znver4 -mattr=-avx512f").vector_bits, 256);
  EXPECT_EQ(Target::parse(t.str()), t);
}

TEST(Target, OptionsInAnyOrderAndExtraSpaces) {
  Target a = Target::parse("  llvm   -mcpu=cortex-a53 -mtriple=aarch64-linux-gnu ");
  Target b = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.str(), b.str());
}

TEST(Target, GpuAndAcceleratorKinds) {
  Target cuda = Target::parse("cuda -arch=sm_80");
  EXPECT_EQ(cuda.kind, TargetKind::kCuda);
  EXPECT_EQ(cuda.arch, "sm_80");
  EXPECT_EQ(cuda.max_num_threads, 1024);
  EXPECT_EQ(cuda.thread_warp_size, 32);
  EXPECT_FALSE(cuda.is_host());
  EXPECT_EQ(cuda.str(), "cuda -arch=sm_80");
  EXPECT_EQ(Target::parse("cuda").arch, "");

  Target cl = Target::parse("opencl -device=mali -model=rk3399");
  EXPECT_EQ(cl.kind, TargetKind::kOpenCL);
  EXPECT_EQ(cl.device, "mali");
  EXPECT_EQ(cl.model, "rk3399");
  EXPECT_EQ(cl.max_num_threads, 256);
  EXPECT_EQ(Target::parse(cl.str()), cl);
  EXPECT_EQ(Target::parse("opencl -max_num_threads=128").max_num_threads, 128);

  Target vdla = Target::parse("vdla");
  EXPECT_EQ(vdla.kind, TargetKind::kVdla);
  EXPECT_EQ(vdla.str(), "vdla");
  EXPECT_EQ(vdla.clock_mhz, 200.0);  // the paper's prototype, vdla::Config{}
  EXPECT_EQ(Target::parse("llvm").clock_mhz, 0.0);
  EXPECT_EQ(Target::parse("vdla -model=pynq").str(), "vdla -model=pynq");
}

TEST(Target, UnknownKindNamesItAndListsKnown) {
  EXPECT_EQ(error_of("llvmx -mcpu=native"),
            "error: unknown target kind 'llvmx' in target string 'llvmx -mcpu=native' (known: "
            "llvm, cuda, opencl, vdla)");
  EXPECT_NE(error_of("").find("empty target string"), std::string::npos);
}

TEST(Target, UnknownOptionNamesItAndListsKnown) {
  const std::string e = error_of("llvm -mcpus=znver4");
  EXPECT_NE(e.find("unknown option '-mcpus'"), std::string::npos) << e;
  EXPECT_NE(e.find("known: -mtriple, -mcpu, -mattr, -model"), std::string::npos) << e;
  EXPECT_NE(error_of("cuda -mcpu=znver4").find("unknown option '-mcpu' for target kind 'cuda'"),
            std::string::npos);
  EXPECT_NE(error_of("llvm mcpu=native").find("unknown option 'mcpu'"), std::string::npos);
}

TEST(Target, MalformedOptionValues) {
  EXPECT_NE(error_of("llvm -mcpu").find("needs a value"), std::string::npos);
  EXPECT_NE(error_of("llvm -mcpu=").find("needs a value"), std::string::npos);
  EXPECT_NE(error_of("llvm -mcpu=a -mcpu=b").find("given twice"), std::string::npos);
  EXPECT_NE(error_of("llvm -mattr=avx2").find("must start with '+' or '-'"), std::string::npos);
  EXPECT_NE(error_of("llvm -mtriple=riscv64-linux-gnu").find("unsupported architecture 'riscv64'"),
            std::string::npos);
  EXPECT_NE(error_of("cuda -arch=80").find("must look like sm_80"), std::string::npos);
  EXPECT_NE(error_of("opencl -max_num_threads=-4").find("positive integer"), std::string::npos);
#if defined(__x86_64__)
  EXPECT_NE(error_of("llvm -mtriple=aarch64-linux-gnu -mcpu=native").find("needs the host triple"),
            std::string::npos);
#endif
}

}  // namespace
}  // namespace kiln::target
