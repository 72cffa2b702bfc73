// dot4_u8s8's AArch64 lowerings (compiler/codegen/llvm_intrinsics.cc) run: the function of one
// dot4_u8s8 a row (tests/common/dot4_func.h) for 1, 4, 8, 16, 32 and 48 lanes, a broadcast word
// and a byte per lane, compiled for a Cortex-A53 (NEON widening multiplies and pairwise sums), a
// Cortex-A55 (udot with the operand offset) and a Cortex-A55 with i8mm (usdot) into AArch64
// shared objects, each function run by the arm64 preset's kiln-runner under QEMU against its
// exact result (random bytes over their whole ranges and the extremes; the runner compares with
// no tolerance). Skipped, saying why, without build/arm64 or QEMU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/codegen/build.h"
#include "compiler/target/target.h"
#include "deploy/runtime/kernel_runner.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "tests/board/board_test_util.h"
#include "tests/common/dot4_func.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using runtime::NDArray;

const std::string kRunner = std::string(KILN_ARM64_BUILD_DIR) + "/deploy/runtime/kiln-runner";

TEST(Dot4Arm64, ExactUnderQemuForEachLowering) {
  const std::string qemu = KILN_QEMU_AARCH64;
  if (!fs::exists(kRunner)) GTEST_SKIP() << kRunner << " is not built (scripts/build-arm64.sh)";
  if (qemu.empty() || !fs::exists(qemu)) {
    GTEST_SKIP() << "qemu-aarch64-static is not installed (scripts/setup.sh installs it)";
  }
  testing::TempDir dir("kiln_dot4_arm64_test");
  auto path = [&](const std::string& name) { return (dir.path() / name).string(); };
  const int rows = 9;
  std::vector<ir::PrimFunc> funcs;
  std::vector<std::pair<int, bool>> shapes;
  for (int lanes : {1, 4, 8, 16, 32, 48}) {
    for (bool broadcast : {true, false}) {
      funcs.push_back(testing::dot4_func(lanes, broadcast, rows));
      shapes.emplace_back(lanes, broadcast);
    }
  }
  // The operands and the exact result of each function, as .npy files.
  for (size_t i = 0; i < funcs.size(); ++i) {
    const auto [lanes, broadcast] = shapes[i];
    const testing::Dot4Data d = testing::dot4_data(lanes, broadcast, rows, uint32_t(40 + i));
    const std::string& f = funcs[i].name;
    runtime::save_npy(path(f + ".acc.npy"), NDArray::from_vector(d.acc, {int64_t(d.acc.size())}));
    runtime::save_npy(path(f + ".a.npy"), NDArray::from_vector(d.a, {int64_t(d.a.size())}));
    runtime::save_npy(path(f + ".b.npy"), NDArray::from_vector(d.b, {int64_t(d.b.size())}));
    runtime::save_npy(path(f + ".want.npy"),
                      NDArray::from_vector(d.want, {int64_t(d.want.size())}));
  }
  for (const char* cpu : {"cortex-a53", "cortex-a55", "cortex-a55 -mattr=+i8mm"}) {
    SCOPED_TRACE(cpu);
    const target::Target t =
        target::Target::parse(std::string("llvm -mtriple=aarch64-linux-gnu -mcpu=") + cpu);
    const std::string lib = path("dot4.so");
    codegen::export_library(funcs, t, lib);
    for (size_t i = 0; i < funcs.size(); ++i) {
      const std::string& f = funcs[i].name;
      SCOPED_TRACE(f);
      runtime::RunRequest req;
      req.library = lib;
      req.function = f;
      req.args = {runtime::RunArg::make_input(path(f + ".acc.npy")),
                  runtime::RunArg::make_input(path(f + ".a.npy")),
                  runtime::RunArg::make_input(path(f + ".b.npy")),
                  runtime::RunArg::make_output("int32", {int64_t(rows) * shapes[i].first},
                                               path(f + ".want.npy"), 0.0, 0.0)};
      req.disturbed_retry_ms = 0;
      std::ofstream(path("request.json")) << req.to_json().dump();
      const testing::Run r =
          testing::run({"sh", "-c",
                        testing::quote(qemu) + " -L / " + testing::quote(kRunner) + " < " +
                            testing::quote(path("request.json"))},
                       dir.path().string());
      ASSERT_EQ(r.code, 0) << r.err;
      const runtime::RunResult res = runtime::RunResult::from_json(Json::parse(r.out, "result"));
      EXPECT_TRUE(res.ok()) << res.message;
      EXPECT_EQ(res.max_error, 0.0);
    }
  }
}

}  // namespace
}  // namespace kiln
