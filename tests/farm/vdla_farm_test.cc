// The farm tuning for the VDLA, with real processes on 127.0.0.1: kilnd with a local compiler
// worker, and a real `kiln-agent --key vdla --target vdla` that measures VDLA programs on the
// simulator's cycle model through kiln-runner. A job for target vdla and device key vdla is
// accepted; its driver's tuning runs in this process (the job's driver is tests/common's script,
// which hands this test the job's secret): the Tuner with the XGBoost model, kiln-tuner's
// FarmMeasurer and FarmRecords, tuning vdla_conv2d tasks of two ResNet-18 layers (relu on and
// off) built by the worker into VDLA programs and measured by the agent against the reference
// bit for bit: the farm at the kernel level.
//
// And a whole model: a float conv net quantized by `kiln quantize --scales pow2`, submitted with
// `kiln submit
// --target vdla --device-key vdla`, whose driver (kiln-tuner) extracts a vdla_conv2d task per
// convolution offload_vdla puts on the VDLA, tunes them through the worker and the vdla agent,
// and builds the heterogeneous bundle; `kiln fetch` gets it, `kiln run` runs its VDLA nodes on
// the simulator, and its output matches the all-CPU int8 build's to the rounding.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "compiler/autotune/task.h"
#include "compiler/autotune/tuner.h"
#include "compiler/topi/vdla_conv2d.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/vdla_run.h"
#include "proto/kiln/v1/driver.pb.h"
#include "records/record_log.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/script_driver.h"
#include "tests/farm/farm_test_util.h"
#include "tuner/farm_client.h"
#include "tuner/farm_measurer.h"
#include "tuner/farm_records.h"
#include "tuner/job_driver.h"

namespace kiln {
namespace {

using testing::ChildProcess;
using testing::Kilnd;
using testing::TempDir;

constexpr int kTrials = 16;

TEST(VdlaFarm, AVdlaAgentRegistersAndTheFarmTunesVdlaTasksBitExact) {
  TempDir dir("vdla_farm");
  testing::ScriptDriver drivers(dir.path());
  Kilnd kilnd(dir, {"--local-workers", "1", "--batch", "8"}, {"KILN_TUNER=" + drivers.program()});
  auto service = kilnd.service();
  ChildProcess agent(
      {KILN_AGENT_BINARY, "--tracker", kilnd.grpc_address(), "--key", "vdla", "--target", "vdla"},
      dir.file("agent.log"));
  ASSERT_TRUE(testing::wait_for_devices(*service, 1, std::chrono::seconds(60)))
      << agent.stderr_text();

  // The device: the simulator's cycle model, not emulated (its time does not depend on the host).
  {
    v1::ListDevicesRequest req;
    v1::ListDevicesResponse resp;
    ASSERT_TRUE(service->ListDevices(testing::context().get(), req, &resp).ok());
    ASSERT_EQ(resp.devices_size(), 1);
    const v1::DeviceInfo& d = resp.devices(0);
    EXPECT_EQ(d.key(), "vdla");
    EXPECT_EQ(d.target(), "vdla");
    EXPECT_EQ(d.fingerprint(), runtime::vdla_device_description());
    EXPECT_NE(d.capabilities().board().find("VDLA cycle model"), std::string::npos)
        << d.capabilities().board();
    EXPECT_FALSE(d.capabilities().emulated());
  }

  // A job for the VDLA is accepted; its driver (the script) hands over the job's secret.
  v1::SubmitModelRequest sub;
  sub.set_name("vdla-layers");
  sub.set_target("vdla");
  sub.set_device_key("vdla");
  sub.set_trials(kTrials);
  v1::SubmitModelResponse sub_resp;
  {
    const grpc::Status s = testing::submit_model(
        *service, *testing::context(), sub, "a model the script driver never reads", &sub_resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const v1::DriverAuth auth = drivers.wait(sub_resp.job_id());
  tuner::FarmClient client(kilnd.grpc_address(), "", "", auth.job_id(), auth.secret());
  tuner::FarmRecords records(client);
  tuner::FarmMeasurer measurer(client);
  autotune::TuneOptions opts;
  opts.trials = kTrials;
  opts.batch = 8;
  opts.explorer = "xgb";
  autotune::Tuner tuner(records, opts, &measurer);

  // C11 (14x14, 256 -> 512, 1x1, stride 2) with relu, C8 (28x28, 128 -> 256, 1x1, stride 2)
  // without: the second task learns from the first's records.
  const std::vector<autotune::Task> tasks = {
      autotune::Task::make("vdla_conv2d", topi::vdla_conv2d({14, 14, 256, 512, 1, 2, 0}, true).out,
                           "vdla"),
      autotune::Task::make("vdla_conv2d", topi::vdla_conv2d({28, 28, 128, 256, 1, 2, 0}, false).out,
                           "vdla")};
  // As kiln-tuner does after extracting them: the job's tasks, which kilnd then lets it tune.
  client.progress(tuner::tuning_progress(tasks));
  std::vector<const autotune::Task*> history;
  for (const autotune::Task& task : tasks) {
    const autotune::TaskResult r = tuner.tune(task, history);
    history.push_back(&task);
    EXPECT_EQ(r.trials, kTrials) << task.key;
    EXPECT_EQ(r.errors.count("wrong_answer"), 0u) << task.key;
    const std::vector<records::MeasureRecord> recs = records.records(task.key, "vdla");
    ASSERT_EQ(recs.size(), static_cast<size_t>(kTrials)) << task.key;
    double default_cost = INFINITY, best = INFINITY;
    int measured = 0;
    for (const records::MeasureRecord& rec : recs) {
      EXPECT_EQ(rec.target, "vdla");
      EXPECT_FALSE(rec.emulated);
      // Measured by the agent, bit-exact against the reference (a mismatch is wrong_answer), or
      // a config that does not fit the VDLA's buffers (not built at all).
      EXPECT_TRUE(rec.error == ErrorKind::kNone || rec.error == ErrorKind::kCompileError)
          << error_kind_name(rec.error) << ": " << rec.error_msg;
      if (rec.error != ErrorKind::kNone) continue;
      ++measured;
      EXPECT_EQ(rec.device, runtime::vdla_device_description());
      ASSERT_EQ(rec.costs_s.size(), 1u);  // the cycle model is deterministic: one run
      const double cycles = rec.cost() * 200e6;
      EXPECT_NEAR(cycles, std::round(cycles), 1e-3 * cycles) << "not whole cycles at 200 MHz";
      best = std::min(best, rec.cost());
      if (rec.config_index == task.default_config.index()) default_cost = rec.cost();
    }
    EXPECT_GE(measured, 4) << task.key;
    ASSERT_TRUE(std::isfinite(default_cost)) << task.key << ": the default was not measured";
    EXPECT_LE(best, default_cost) << task.key;
    std::cout << task.key << ": default " << default_cost * 200e6 << " cycles, best "
              << best * 200e6 << " cycles after " << kTrials << " trials (" << measured
              << " measured)\n";
  }

  // The shared record log keeps them in the device lane (the agent is not emulated).
  v1::CancelJobRequest cancel;
  cancel.set_job_id(auth.job_id());
  v1::Job job;
  EXPECT_TRUE(service->CancelJob(testing::context().get(), cancel, &job).ok());
  kilnd.kill(SIGTERM);
  agent.signal(SIGTERM);
  agent.wait();
  records::RecordLog log = records::RecordLog::open(kilnd.state_dir() + "/records");
  EXPECT_EQ(log.tasks("vdla").size(), 2u);
  for (const autotune::Task& task : tasks) {
    EXPECT_EQ(log.records(task.key, "vdla").size(), static_cast<size_t>(kTrials));
    EXPECT_TRUE(log.records(task.key, "vdla", records::Lane::kEmulated).empty());
  }
}

/// x [1, 16, 8, 8] -> Conv 3x3 (32, pad 1, bias) -> Relu -> Conv 1x1 (32, bias) -> Relu -> Conv 1x1
/// (16, bias): once quantized, the first two are QConv nodes the VDLA runs (channels multiples of
/// 16, batch 1); the last one's output, the model's, stays float and so does it, on the CPU.
std::string float_conv_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 16, 8, 8});
  auto init = [&](const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
    runtime::NDArray a = testing::random_array(shape, seed, -0.3f, 0.3f);
    m.init_values(name, shape, a.to_vector<float>());
  };
  init("w1", {32, 16, 3, 3}, 1);
  init("b1", {32}, 2);
  init("w2", {32, 32, 1, 1}, 3);
  init("b2", {32}, 4);
  init("w3", {16, 32, 1, 1}, 5);
  init("b3", {16}, 6);
  auto* c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"});
  testing::OnnxModelBuilder::attr(c1, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"});
  m.node("Conv", {"r1", "w2", "b2"}, {"c2"});
  m.node("Relu", {"c2"}, {"r2"});
  m.node("Conv", {"r2", "w3", "b3"}, {"y"});
  m.output("y");
  return m.bytes();
}

/// Runs a shell command; its exit code, and stdout + stderr in `out`.
int shell(const std::string& cmd, const std::string& log, std::string* out) {
  const int status = std::system((cmd + " >'" + log + "' 2>&1").c_str());
  std::ifstream in(log);
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

constexpr uint32_t kModelTrials = 8;

TEST(VdlaFarm, AQuantizedModelIsTunedForTheVdlaAndItsBundleMatchesTheCpuBuild) {
  TempDir dir("vdla_model_farm");
  const std::string kiln = std::string("'") + KILN_BINARY + "'";
  std::string out;
  std::ofstream(dir.file("m.onnx"), std::ios::binary) << float_conv_model();
  runtime::save_npy(dir.file("x.npy"), testing::random_array({1, 16, 8, 8}, 7, -1.0f, 1.0f));
  runtime::save_npy(dir.file("cal.npy"), testing::random_array({1, 16, 8, 8}, 8, -1.0f, 1.0f));
  ASSERT_EQ(shell(kiln + " quantize '" + dir.file("m.onnx") + "' --calibrate '" +
                      dir.file("cal.npy") + "' --scales pow2 -o '" + dir.file("q.onnx") + "'",
                  dir.file("quantize.log"), &out),
            0)
      << out;

  Kilnd kilnd(dir, {"--local-workers", "1", "--batch", "4"});
  auto service = kilnd.service();
  ChildProcess agent(
      {KILN_AGENT_BINARY, "--tracker", kilnd.grpc_address(), "--key", "vdla", "--target", "vdla"},
      dir.file("agent.log"));
  ASSERT_TRUE(testing::wait_for_devices(*service, 1, std::chrono::seconds(60)))
      << agent.stderr_text();
  const std::string server = " --server " + kilnd.grpc_address();
  ASSERT_EQ(shell(kiln + " submit '" + dir.file("q.onnx") + "' --target vdla --device-key vdla" +
                      " --trials " + std::to_string(kModelTrials) + " --watch" + server,
                  dir.file("submit.log"), &out),
            0)
      << out << "\nkilnd:\n"
      << kilnd.process().stderr_text() << "\nagent:\n"
      << agent.stderr_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("submitted job (\\d+)"))) << out;
  const std::string job = m[1];
  ASSERT_EQ(shell(kiln + " fetch " + job + " -o '" + dir.file("q.kiln") + "'" + server,
                  dir.file("fetch.log"), &out),
            0)
      << out;

  // The bundle: both convolutions are VDLA programs; it runs (the VDLA nodes on the simulator)
  // and gives the all-CPU int8 build's output, to the rounding: the CPU computes the same
  // convolutions as ConvInteger in ONNX Runtime's arithmetic (round half to even, QConv half up;
  // the VDLA's bit-exactness with QConv on the host is vdla_offload_test's).
  EXPECT_EQ(runtime::read_bundle(dir.file("q.kiln")).vdla_programs.size(), 2u);
  ASSERT_EQ(shell(kiln + " run '" + dir.file("q.kiln") + "' --input '" + dir.file("x.npy") +
                      "' -o '" + dir.file("out") + "' --profile 1",
                  dir.file("run.log"), &out),
            0)
      << out;
  EXPECT_NE(out.find("all VDLA nodes"), std::string::npos) << out;
  ASSERT_EQ(shell(kiln + " compile '" + dir.file("q.onnx") + "' -o '" + dir.file("cpu.kiln") + "'",
                  dir.file("compile.log"), &out),
            0)
      << out;
  ASSERT_EQ(shell(kiln + " run '" + dir.file("cpu.kiln") + "' --input '" + dir.file("x.npy") +
                      "' -o '" + dir.file("cpu") + "'",
                  dir.file("run_cpu.log"), &out),
            0)
      << out;
  const std::vector<float> got = runtime::load_npy(dir.file("out/y.npy")).to_vector<float>();
  const std::vector<float> want = runtime::load_npy(dir.file("cpu/y.npy")).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  float diff = 0, range = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    range = std::max(range, std::fabs(want[i]));
  }
  EXPECT_LE(diff, 0.02f * range) << "max |VDLA - CPU| " << diff << " of max |y| " << range;
  EXPECT_GT(std::count_if(want.begin(), want.end(), [](float v) { return v != 0; }), 0);

  // The records: the two vdla_conv2d tasks, at least kModelTrials each, measured by the vdla agent
  // (never a wrong answer) in the device lane.
  kilnd.kill(SIGTERM);
  agent.signal(SIGTERM);
  agent.wait();
  records::RecordLog log = records::RecordLog::open(kilnd.state_dir() + "/records");
  const std::vector<std::string> tasks = log.tasks("vdla");
  ASSERT_EQ(tasks.size(), 2u);
  for (const std::string& task : tasks) {
    EXPECT_EQ(task.rfind("vdla_conv2d:", 0), 0u) << task;
    const auto recs = log.records(task, "vdla");
    EXPECT_GE(recs.size(), kModelTrials) << task;
    int measured = 0;
    for (const records::MeasureRecord& r : recs) {
      EXPECT_TRUE(r.error == ErrorKind::kNone || r.error == ErrorKind::kCompileError)
          << error_kind_name(r.error) << ": " << r.error_msg;
      if (r.error == ErrorKind::kNone) ++measured;
    }
    EXPECT_GT(measured, 0) << task;
  }
}

}  // namespace
}  // namespace kiln
