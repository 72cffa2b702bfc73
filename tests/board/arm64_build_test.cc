// The AArch64 side of a board (issue 18): the arm64 preset's programs (build/arm64, made by
// scripts/build-arm64.sh) are AArch64 executables that link no compiler; `kiln compile` here makes
// bundles for a Cortex-A53 whose library is an AArch64 shared object; and such a bundle, run by
// build/arm64's kiln-run under QEMU's user-mode emulator, gives the outputs the same model's bundle
// for this machine gives here; so do the int8 kernels (ConvInteger / MatMulInteger on dot4_u8s8)
// compiled for a Cortex-A53 (NEON), a dot product core and one with i8mm, exactly. What needs
// build/arm64 or QEMU is skipped, saying why, when they are absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "deploy/runtime/bundle.h"
#include "deploy/runtime/npy.h"
#include "tests/board/board_test_util.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/small_cnn.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using runtime::NDArray;
using testing::run;

constexpr const char* kA53 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";
const std::vector<std::string> kBoardPrograms = {
    "device_agent/kiln-agent", "deploy/runtime/kiln-runner", "deploy/runtime/kiln-run"};

std::string arm64_program(const std::string& relative) {
  return std::string(KILN_ARM64_BUILD_DIR) + "/" + relative;
}

/// Why the arm64 programs cannot be used here, or "" when they can.
std::string arm64_build_missing() {
  for (const std::string& p : kBoardPrograms) {
    if (!fs::exists(arm64_program(p))) {
      return arm64_program(p) + " is not built (scripts/build-arm64.sh builds it)";
    }
  }
  return "";
}

/// The ELF e_machine of `bytes` (an ELF file), or -1 when it is not ELF.
int elf_machine(const std::string& bytes) {
  const std::string magic = {'\x7f', 'E', 'L', 'F'};
  if (bytes.size() < 20 || bytes.compare(0, 4, magic) != 0) return -1;
  return static_cast<uint8_t>(bytes[18]) | static_cast<uint8_t>(bytes[19]) << 8;
}

/// Why QEMU cannot run the arm64 programs here, or "" when it can.
std::string qemu_missing() {
  const std::string missing = arm64_build_missing();
  if (!missing.empty()) return missing;
  const std::string qemu = KILN_QEMU_AARCH64;
  if (qemu.empty() || !fs::exists(qemu)) {
    return "qemu-aarch64-static is not installed (scripts/setup.sh installs it)";
  }
  return "";
}

/// x_f [1, 32, 9, 9] and a_f [6, 64] quantized to uint8 (scale 1/128, zero point 128: inputs past
/// +-1 clip to 0 and 255), then y = ConvInteger(x, w [32, 32, 3, 3], pads 1) and z =
/// MatMulInteger(a, b [64, 48]) with int8 weights over their whole range, as floats (exact: the
/// sums stay under 2^24). Both take the int8 kernels (pack_weights), so dot4_u8s8.
std::string int8_model() {
  testing::OnnxModelBuilder m;
  m.input("x_f", {1, 32, 9, 9});
  m.input("a_f", {6, 64});
  m.init_values("s", {}, {1.0f / 128});
  m.init_8bit("zp", {}, onnx::TensorProto::UINT8, {128});
  m.node("QuantizeLinear", {"x_f", "s", "zp"}, {"x"});
  m.node("QuantizeLinear", {"a_f", "s", "zp"}, {"a"});
  std::mt19937 rng(29);
  std::uniform_int_distribution<int> byte(-128, 127);
  auto bytes = [&](size_t n) {
    std::vector<int> v(n);
    for (int& e : v) e = byte(rng);
    return v;
  };
  m.init_8bit("w", {32, 32, 3, 3}, onnx::TensorProto::INT8, bytes(32 * 32 * 9));
  m.init_8bit("b", {64, 48}, onnx::TensorProto::INT8, bytes(64 * 48));
  auto* conv = m.node("ConvInteger", {"x", "w", "zp"}, {"conv_acc"});
  testing::OnnxModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("MatMulInteger", {"a", "b", "zp"}, {"mm_acc"});
  for (const auto& [acc, out] : {std::pair{"conv_acc", "y"}, std::pair{"mm_acc", "z"}}) {
    auto* cast = m.node("Cast", {acc}, {out});
    testing::OnnxModelBuilder::attr(cast, "to", int64_t{onnx::TensorProto::FLOAT});
    m.output(out);
  }
  return m.bytes();
}

class Arm64BuildTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  std::string logs() const { return dir_.path().string(); }

  /// Compiles the small CNN (convolutions, pooling, a dense layer) for `target` into NAME.kiln.
  std::string compile_cnn(const std::string& target, const std::string& name) {
    const std::string onnx = path("cnn.onnx"), bundle = path(name + ".kiln");
    std::ofstream(onnx, std::ios::binary) << testing::small_cnn_model();
    testing::Run r = run({KILN_BINARY, "compile", onnx, "--target", target, "-o", bundle}, logs());
    EXPECT_EQ(r.code, 0) << r.err;
    return bundle;
  }

  /// Compiles ONNX bytes `model` for `target` into NAME.kiln.
  std::string compile(const std::string& model, const std::string& target,
                      const std::string& name) {
    const std::string onnx = path(name + ".onnx"), bundle = path(name + ".kiln");
    std::ofstream(onnx, std::ios::binary) << model;
    testing::Run r = run({KILN_BINARY, "compile", onnx, "--target", target, "-o", bundle}, logs());
    EXPECT_EQ(r.code, 0) << r.err;
    return bundle;
  }

  testing::TempDir dir_{"kiln_arm64_build_test"};
};

TEST_F(Arm64BuildTest, BoardProgramsAreAArch64AndLinkNoCompiler) {
  const std::string missing = arm64_build_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  for (const std::string& p : kBoardPrograms) {
    const std::string program = arm64_program(p);
    testing::Run f = run({"file", "-b", program}, logs());
    ASSERT_EQ(f.code, 0) << f.err;
    EXPECT_NE(f.out.find("ARM aarch64"), std::string::npos) << program << ": " << f.out;
    testing::Run d = run({"readelf", "-d", program}, logs());
    ASSERT_EQ(d.code, 0) << d.err;
    std::vector<std::string> needed;
    std::istringstream lines(d.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("(NEEDED)") == std::string::npos) continue;
      const size_t open = line.find('['), close = line.find(']');
      if (open != std::string::npos && close > open) {
        needed.push_back(line.substr(open + 1, close - open - 1));
      }
    }
    EXPECT_NE(std::find(needed.begin(), needed.end(), "libc.so.6"), needed.end())
        << program << ": readelf shows no libc among the NEEDED libraries:\n"
        << d.out;
    for (const std::string& lib : needed) {
      for (const char* compiler : {"libLLVM", "libonnx", "liblld", "librocksdb", "libxgboost"}) {
        EXPECT_EQ(lib.find(compiler), std::string::npos) << program << " needs " << lib;
      }
    }
  }
}

TEST_F(Arm64BuildTest, CompilesACortexA53BundleWithAnAArch64Library) {
  const std::string bundle = compile_cnn(kA53, "a53");
  const runtime::Bundle b = runtime::read_bundle(bundle);
  EXPECT_EQ(elf_machine(b.library), 183) << "EM_AARCH64";
  const std::string lib = path("a53.so");
  std::ofstream(lib, std::ios::binary) << b.library;
  testing::Run f = run({"file", "-b", lib}, logs());
  EXPECT_NE(f.out.find("ELF 64-bit LSB shared object, ARM aarch64"), std::string::npos) << f.out;
}

TEST_F(Arm64BuildTest, ACortexA53BundleUnderQemuGivesTheHostsOutputs) {
  const std::string missing = qemu_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  const std::string qemu = KILN_QEMU_AARCH64;
  const std::string a53 = compile_cnn(kA53, "a53");
  const std::string host = compile_cnn("llvm", "host");
  runtime::save_npy(path("x.npy"), testing::random_array({1, 8, 12, 12}, 21));

  testing::Run r =
      run({KILN_RUN_BINARY, host, "--input", "x=" + path("x.npy"), "-o", path("host_out")}, logs());
  ASSERT_EQ(r.code, 0) << r.err;
  // -L /: the program's loader (/lib/ld-linux-aarch64.so.1, libc6:arm64) and the arm64 libraries
  // are where Debian's multiarch put them.
  r = run({qemu, "-L", "/", arm64_program("deploy/runtime/kiln-run"), a53, "--input",
           "x=" + path("x.npy"), "-o", path("a53_out"), "--repeat", "2"},
          logs());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("output 'y': float32[1, 10] -> "), std::string::npos) << r.out;
  NDArray want = runtime::load_npy(path("host_out/y.npy"));
  NDArray got = runtime::load_npy(path("a53_out/y.npy"));
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TRUE(testing::all_close(got, want.to_vector<float>(), 1e-4, 1e-4));
  // Not a trivial output: the model's ten scores differ.
  const std::vector<float> y = want.to_vector<float>();
  EXPECT_GT(*std::max_element(y.begin(), y.end()) - *std::min_element(y.begin(), y.end()), 1e-3);

#if defined(__x86_64__)
  // The arm64 kiln-run refuses this machine's bundle, naming both architectures.
  r = run({qemu, "-L", "/", arm64_program("deploy/runtime/kiln-run"), host, "--input",
           "x=" + path("x.npy")},
          logs());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("the library is for x86_64, this machine runs aarch64"), std::string::npos)
      << r.err;
#endif
}

TEST_F(Arm64BuildTest, Int8KernelsUnderQemuEqualTheHosts) {
  const std::string missing = qemu_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  const std::string model = int8_model();
  runtime::save_npy(path("x.npy"), testing::random_array({1, 32, 9, 9}, 31, -1.1f, 1.1f));
  runtime::save_npy(path("a.npy"), testing::random_array({6, 64}, 32, -1.1f, 1.1f));
  const std::vector<std::string> inputs = {"--input", "x_f=" + path("x.npy"), "--input",
                                           "a_f=" + path("a.npy")};
  std::vector<std::string> args = {KILN_RUN_BINARY, compile(model, "llvm", "host"), "-o",
                                   path("host_out")};
  args.insert(args.end(), inputs.begin(), inputs.end());
  testing::Run r = run(args, logs());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<float> want_y = runtime::load_npy(path("host_out/y.npy")).to_vector<float>();
  const std::vector<float> want_z = runtime::load_npy(path("host_out/z.npy")).to_vector<float>();
  ASSERT_EQ(want_y.size(), 32u * 9 * 9);
  ASSERT_EQ(want_z.size(), 6u * 48);
  // Not trivial: sums of both signs, far from zero.
  EXPECT_LT(*std::min_element(want_y.begin(), want_y.end()), -20000.0f);
  EXPECT_GT(*std::max_element(want_z.begin(), want_z.end()), 20000.0f);
  // NEON widening (Cortex-A53), udot with the offset (Cortex-A55's dot product), usdot (i8mm).
  // QEMU's default CPU ("max") has both extensions.
  const std::vector<std::pair<std::string, std::string>> cpus = {
      {"a53", "cortex-a53"}, {"a55", "cortex-a55"}, {"a55_i8mm", "cortex-a55 -mattr=+i8mm"}};
  for (const auto& [name, cpu] : cpus) {
    SCOPED_TRACE(cpu);
    const std::string bundle =
        compile(model, std::string("llvm -mtriple=aarch64-linux-gnu -mcpu=") + cpu, name);
    args = {KILN_QEMU_AARCH64,  "-L", "/", arm64_program("deploy/runtime/kiln-run"), bundle, "-o",
            path(name + "_out")};
    args.insert(args.end(), inputs.begin(), inputs.end());
    r = run(args, logs());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(runtime::load_npy(path(name + "_out/y.npy")).to_vector<float>(), want_y);
    EXPECT_EQ(runtime::load_npy(path(name + "_out/z.npy")).to_vector<float>(), want_z);
  }
}

}  // namespace
}  // namespace kiln
