// The farm tuning for an OpenCL device, end to end with real processes: kilnd and a compiler
// worker, and a kiln-agent registered with key mali and target "opencl -device=mali" that measures
// on this machine's OpenCL device (PoCL here). A conv + relu + dense model is submitted with
// `kiln submit --target opencl --device-key mali` and tuned (8 trials per task: the worker builds
// device programs, the agent measures them in kiln-runner on OpenCL); the bundle fetched with
// `kiln fetch` runs with `kiln run --device opencl` and matches ONNX Runtime. The records carry
// the target and the GPU as their device. Skipped without an OpenCL device or onnxruntime.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "deploy/runtime/device_api.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/npy.h"
#include "records/record_log.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/farm/farm_test_util.h"

namespace kiln {
namespace {

using testing::ChildProcess;
using testing::Kilnd;
using testing::TempDir;

constexpr uint32_t kTrials = 8;

/// x [1, 4, 10, 10] -> Conv 3x3 (8, bias) -> Relu -> Flatten -> Gemm (10): two tuning tasks
/// (conv2d_nchw_gpu, matmul_gpu), every operator with a GPU schedule.
std::string conv_dense_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 4, 10, 10});
  auto init = [&](const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
    runtime::NDArray a = testing::random_array(shape, seed, -0.3f, 0.3f);
    m.init_values(name, shape, a.to_vector<float>());
  };
  init("w", {8, 4, 3, 3}, 1);
  init("b", {8}, 2);
  init("fc", {10, 800}, 3);
  auto* c = m.node("Conv", {"x", "w", "b"}, {"c"});
  testing::OnnxModelBuilder::attr(c, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("Flatten", {"r"}, {"f"});
  auto* g = m.node("Gemm", {"f", "fc"}, {"y"});
  testing::OnnxModelBuilder::attr(g, "transB", int64_t{1});
  m.output("y");
  return m.bytes();
}

constexpr const char* kOrtScript = R"(import sys
import numpy as np
import onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])
np.save(sys.argv[3], sess.run(None, {'x': np.load(sys.argv[2])})[0])
)";

/// Runs a shell command; its exit code, and stdout + stderr in `out`.
int shell(const std::string& cmd, const std::string& log, std::string* out) {
  const int status = std::system((cmd + " >'" + log + "' 2>&1").c_str());
  std::ifstream in(log);
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(OpenclFarm, AJobForMaliIsTunedOnOpenclAndItsBundleMatchesOnnxRuntime) {
  std::string why;
  if (!runtime::DeviceAPI::available(TargetKind::kOpenCL, &why)) GTEST_SKIP() << why;
  if (std::system("python3 -c 'import onnxruntime' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "onnxruntime is not installed (scripts/setup.sh installs it)";

  TempDir dir("opencl_farm");
  Kilnd kilnd(dir, {"--local-workers", "1", "--batch", "4", "--repeat", "2"});
  auto service = kilnd.service();
  ChildProcess agent({KILN_AGENT_BINARY, "--tracker", kilnd.grpc_address(), "--key", "mali",
                      "--target", "opencl -device=mali"},
                     dir.file("agent.log"));
  ASSERT_TRUE(testing::wait_for_devices(*service, 1, std::chrono::seconds(60)))
      << agent.stderr_text();

  std::ofstream(dir.file("m.onnx"), std::ios::binary) << conv_dense_model();
  const std::string kiln = std::string("'") + KILN_BINARY + "'";
  const std::string server = " --server " + kilnd.grpc_address();
  std::string out;
  ASSERT_EQ(shell(kiln + " submit '" + dir.file("m.onnx") + "' --target opencl --device-key mali" +
                      " --trials " + std::to_string(kTrials) + " --watch" + server,
                  dir.file("submit.log"), &out),
            0)
      << out << "\nkilnd:\n"
      << kilnd.process().stderr_text() << "\nagent:\n"
      << agent.stderr_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("submitted job (\\d+)"))) << out;
  const std::string job = m[1];
  ASSERT_EQ(shell(kiln + " fetch " + job + " -o '" + dir.file("m.kiln") + "'" + server,
                  dir.file("fetch.log"), &out),
            0)
      << out;

  // The bundle on OpenCL against ONNX Runtime, on the same input.
  runtime::save_npy(dir.file("x.npy"), testing::random_array({1, 4, 10, 10}, 7));
  ASSERT_EQ(shell(kiln + " run '" + dir.file("m.kiln") + "' --device opencl --input '" +
                      dir.file("x.npy") + "' -o '" + dir.file("out") + "'",
                  dir.file("run.log"), &out),
            0)
      << out;
  EXPECT_NE(out.find("running on opencl"), std::string::npos) << out;
  std::ofstream(dir.file("ort.py")) << kOrtScript;
  ASSERT_EQ(shell("python3 '" + dir.file("ort.py") + "' '" + dir.file("m.onnx") + "' '" +
                      dir.file("x.npy") + "' '" + dir.file("ort.npy") + "'",
                  dir.file("ort.log"), &out),
            0)
      << out;
  const std::vector<float> got = runtime::load_npy(dir.file("out/y.npy")).to_vector<float>();
  const std::vector<float> want = runtime::load_npy(dir.file("ort.npy")).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::abs(double(want[i])));
  }
  EXPECT_LE(max_diff, 1e-4 * std::max(1.0, max_ref)) << "max|ref| " << max_ref;

  // The records: both GPU tasks, at least kTrials each, for target opencl, measured on the
  // OpenCL device (the agent's fingerprint is the GPU's description).
  kilnd.kill(SIGTERM);
  agent.signal(SIGTERM);
  agent.wait();
  records::RecordLog log = records::RecordLog::open(kilnd.state_dir() + "/records");
  const std::vector<std::string> tasks = log.tasks("opencl");
  ASSERT_EQ(tasks.size(), 2u);
  int measured = 0;
  for (const std::string& task : tasks) {
    EXPECT_TRUE(task.rfind("conv2d_nchw_gpu:", 0) == 0 || task.rfind("matmul_gpu:", 0) == 0)
        << task;
    const auto recs = log.records(task, "opencl");
    EXPECT_GE(recs.size(), kTrials) << task;
    for (const records::MeasureRecord& r : recs) {
      EXPECT_EQ(r.target, "opencl");
      if (r.error != ErrorKind::kNone) continue;
      ++measured;
      EXPECT_EQ(r.device.rfind("opencl:0 ", 0), 0u) << r.device;
    }
  }
  EXPECT_GT(measured, 0) << "no record measured without error";
}

}  // namespace
}  // namespace kiln
