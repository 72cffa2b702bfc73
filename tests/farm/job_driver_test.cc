// kilnd survives any model: the compiler runs only in job drivers (kiln-tuner processes), so a
// model that crashes the compiler, hangs it, exhausts its memory, or a driver killed mid-job,
// fails at most its job (after two tries, with a reason a person can read; at once for a stack
// overflow, which another try would repeat) while kilnd, the other
// jobs, the worker and the agent go on; restarted on the same state, kilnd never runs a failed
// job again. Through the real gRPC API of a real kilnd on 127.0.0.1. The compiler's faults are
// injected with kiln-tuner's test hook KILN_DRIVER_FAULT (tuner/job_driver.h); the malformed
// model is a real one, refused at the door, named as the client named it (never by its path on
// the server). A model with a symbolic batch is refused at the door
// without --input-shape bindings and tuned and built for the bound shape with them. A job's
// driver trains the cost model on the farm's whole log and kilnd keeps it; after a restart the
// next job (of another model) starts from the kept model.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/sanitizers.h"
#include "records/record_log.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/small_cnn.h"
#include "tests/farm/farm_test_util.h"
#include "tests/farm/small_cnn_check.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using grpc::StatusCode;
using testing::context;
using testing::Kilnd;
using testing::TempDir;

/// x [1, 3, 8, 8] -> Conv with a weight of 5 input channels: invalid (3 != 5).
std::string bad_channel_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 3, 8, 8});
  m.init_values("w", {4, 5, 3, 3}, std::vector<float>(4 * 5 * 3 * 3, 0.1f));
  m.node("Conv", "conv_bad", {"x", "w"}, {"y"});
  m.output("y");
  return m.bytes();
}

uint64_t submit(v1::KilnService::Stub& s, const std::string& name, const std::string& model) {
  v1::SubmitModelRequest r;
  r.set_name(name);
  r.set_target("llvm");
  r.set_device_key("cpu");
  r.set_trials(4);
  v1::SubmitModelResponse resp;
  const grpc::Status st = testing::submit_model(s, *context(), r, model, &resp);
  EXPECT_TRUE(st.ok()) << name << ": " << st.error_message();
  return resp.job_id();
}

v1::Job get_job(v1::KilnService::Stub& s, uint64_t id) {
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  EXPECT_TRUE(s.GetJob(context().get(), get, &job).ok());
  return job;
}

/// Waits for job `id` to reach a final state; returns it.
v1::Job wait_final(v1::KilnService::Stub& s, uint64_t id, std::chrono::seconds limit) {
  v1::Job job;
  testing::eventually(
      [&] {
        job = get_job(s, id);
        const auto st = job.progress().state();
        return st == v1::JOB_STATE_DONE || st == v1::JOB_STATE_FAILED ||
               st == v1::JOB_STATE_CANCELLED;
      },
      limit);
  return job;
}

/// The pid of the kiln-tuner process of job `id` of the kilnd at `server` (0 when none runs). The
/// address tells our drivers from those of other kilnds on the machine (tests run in parallel).
pid_t driver_pid(const std::string& server, uint64_t id) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmd = ss.str();
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find("kiln-tuner") != std::string::npos &&
        cmd.find("--server " + server + " ") != std::string::npos &&
        cmd.find("--job " + std::to_string(id) + " ") != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

uintmax_t size_or_zero(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

TEST(JobDriverTest, KilndSurvivesModelsThatBreakTheCompiler) {
  TempDir dir("job_driver");
  // A memory limit cannot be set under AddressSanitizer or ThreadSanitizer (their shadow memory
  // is address space).
#if KILN_ASAN || KILN_TSAN
  const bool limited = false;
  const bool own_segv = false;  // the sanitizer handles SIGSEGV
#else
  const bool limited = true;
  const bool own_segv = true;
#endif
  Kilnd kilnd(dir,
              {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
               "--batch", "4", "--repeat", "1", "--max-running-jobs", "2",
               "--driver-idle-timeout-s", "10", "--driver-memory-mb", limited ? "4096" : "0"},
              {"KILN_DRIVER_FAULT=crasher:crash:folding constants;hanger:hang:tuning task;"
               "hog:oom:importing;deep:recurse:folding constants"});
  auto service = kilnd.service();
  ASSERT_TRUE(testing::wait_for_devices(*service, 1));

  // A malformed model is refused at the door, by a checking process, naming the node.
  {
    v1::SubmitModelRequest r;
    r.set_name("bad");
    r.set_target("llvm");
    r.set_device_key("cpu");
    r.set_trials(4);
    v1::SubmitModelResponse resp;
    const grpc::Status st =
        testing::submit_model(*service, *context(), r, bad_channel_model(), &resp);
    EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("SubmitModel: the model does not import: 'bad': node "
                                      "'conv_bad' (Conv): input 1 (W 'w') has 5 input channels"),
              std::string::npos)
        << st.error_message();
    EXPECT_EQ(st.error_message().find("upload-"), std::string::npos) << st.error_message();
    EXPECT_EQ(st.error_message().find(kilnd.state_dir()), std::string::npos) << st.error_message();
  }

  const std::string model = testing::small_cnn_model();
  const uint64_t crasher = submit(*service, "crasher", model);
  const uint64_t hanger = submit(*service, "hanger", model);
  const uint64_t hog = limited ? submit(*service, "hog", model) : 0;
  const uint64_t deep = own_segv ? submit(*service, "deep", model) : 0;
  const uint64_t victim = submit(*service, "victim", model);
  const uint64_t good = submit(*service, "good", model);

  // The victim's driver is killed with SIGKILL mid-job, once: the next try finishes the job.
  ASSERT_TRUE(testing::eventually(
      [&] { return get_job(*service, victim).progress().phase().rfind("tuning task", 0) == 0; },
      std::chrono::seconds(240)))
      << get_job(*service, victim).progress().phase();
  const pid_t pid = driver_pid(kilnd.grpc_address(), victim);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);

  const auto limit = std::chrono::seconds(400);
  const v1::Job crashed = wait_final(*service, crasher, limit);
  EXPECT_EQ(crashed.progress().state(), v1::JOB_STATE_FAILED);
  EXPECT_NE(crashed.error().find("the compiler crashed on this model (SIGSEGV) while folding "
                                 "constants"),
            std::string::npos)
      << crashed.error();
  EXPECT_NE(crashed.error().find("(2 tries)"), std::string::npos) << crashed.error();

  if (own_segv) {
    // A stack overflow is said to be one, and not retried: another try would overflow again.
    const v1::Job overflowed = wait_final(*service, deep, limit);
    EXPECT_EQ(overflowed.progress().state(), v1::JOB_STATE_FAILED);
    EXPECT_NE(overflowed.error().find("the compiler overflowed its stack on this model while "
                                      "folding constants (extracting tasks) (a recursion as deep "
                                      "as the model: a compiler bug, not retried)"),
              std::string::npos)
        << overflowed.error();
    EXPECT_EQ(overflowed.error().find("tries"), std::string::npos) << overflowed.error();
  }

  const v1::Job hung = wait_final(*service, hanger, limit);
  EXPECT_EQ(hung.progress().state(), v1::JOB_STATE_FAILED);
  EXPECT_NE(hung.error().find("made no progress for 10 s while tuning task 1/4"), std::string::npos)
      << hung.error();

  if (limited) {
    const v1::Job hogged = wait_final(*service, hog, limit);
    EXPECT_EQ(hogged.progress().state(), v1::JOB_STATE_FAILED);
    EXPECT_NE(hogged.error().find("ran out of memory (limit 4096 MiB) while importing the model"),
              std::string::npos)
        << hogged.error();
  }

  for (uint64_t id : {victim, good}) {
    const v1::Job j = wait_final(*service, id, limit);
    ASSERT_EQ(j.progress().state(), v1::JOB_STATE_DONE) << id << ": " << j.error();
    EXPECT_EQ(j.progress().tasks_done(), 4u);
  }
  // The good job's bundle computes what a local compile computes.
  ASSERT_TRUE(testing::fetch_bundle(*service, good, dir.file("good.kiln")));
  EXPECT_TRUE(testing::small_cnn_bundle_matches_local(dir, dir.file("good.kiln"), 3));
  EXPECT_FALSE(kilnd.process().wait_for_exit(std::chrono::milliseconds(0)));  // kilnd is up

  // Restarted on the same state, kilnd stays up and never runs a failed job again.
  const std::string logs = kilnd.state_dir() + "/drivers/";
  const uintmax_t crasher_log = size_or_zero(logs + std::to_string(crasher) + ".log");
  EXPECT_GT(crasher_log, 0u);
  kilnd.kill(SIGKILL);
  kilnd.start();
  service = kilnd.service();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_FALSE(kilnd.process().wait_for_exit(std::chrono::milliseconds(0)));
  for (uint64_t id : {crasher, hanger, hog, deep}) {
    if (id != 0) {
      EXPECT_EQ(get_job(*service, id).progress().state(), v1::JOB_STATE_FAILED) << id;
    }
  }
  for (uint64_t id : {victim, good})
    EXPECT_EQ(get_job(*service, id).progress().state(), v1::JOB_STATE_DONE) << id;
  EXPECT_EQ(size_or_zero(logs + std::to_string(crasher) + ".log"), crasher_log);
  EXPECT_EQ(driver_pid(kilnd.grpc_address(), crasher), 0);
}

// A model exported with a symbolic batch: refused at the door without --input-shape (the
// check's message says how), tuned and built with it; the job's driver gets the bindings, and the
// bundle is built for the bound shape and computes what a local compile with them computes.
TEST(JobDriverTest, SymbolicBatchIsBoundBySubmittedInputShapes) {
  TempDir dir("job_driver_shapes");
  Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
                    "--batch", "2", "--repeat", "1"});
  auto service = kilnd.service();
  ASSERT_TRUE(testing::wait_for_devices(*service, 1));
  // y = relu(x @ w), x [batch, 16]: one dense task.
  testing::OnnxModelBuilder m;
  m.input("x", {-1, 16}, onnx::TensorProto::FLOAT, "batch");
  std::vector<float> w(16 * 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
  m.init_values("w", {16, 8}, w);
  m.node("MatMul", "mm", {"x", "w"}, {"h"});
  m.node("Relu", "relu", {"h"}, {"y"});
  m.output("y");
  const std::string dynamic = m.bytes();
  v1::SubmitModelRequest r;
  r.set_name("dynamic");
  r.set_target("llvm");
  r.set_device_key("cpu");
  r.set_trials(2);
  v1::SubmitModelResponse resp;
  grpc::Status st = testing::submit_model(*service, *context(), r, dynamic, &resp);
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("input 'x' has a symbolic dimension 0 ('batch'); give its "
                                    "size with --input-shape x=1,16"),
            std::string::npos)
      << st.error_message();
  // A binding the model refuses: the check's message, naming the input and both sizes.
  v1::InputShape* shape = r.add_input_shapes();
  shape->set_name("x");
  for (int64_t d : {3, 15}) shape->add_dims(d);
  st = testing::submit_model(*service, *context(), r, dynamic, &resp);
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("input 'x': dimension 1 is 16 in the model, but "
                                    "--input-shape gives 15"),
            std::string::npos)
      << st.error_message();
  // A size the door refuses before any check.
  shape->set_dims(1, 0);
  st = testing::submit_model(*service, *context(), r, dynamic, &resp);
  EXPECT_EQ(st.error_code(), StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_NE(st.error_message().find("input_shapes[0] ('x').dims[1] is 0"), std::string::npos)
      << st.error_message();

  shape->set_dims(1, 16);
  st = testing::submit_model(*service, *context(), r, dynamic, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const v1::Job job = wait_final(*service, resp.job_id(), std::chrono::seconds(400));
  ASSERT_EQ(job.progress().state(), v1::JOB_STATE_DONE) << job.error();
  ASSERT_TRUE(testing::fetch_bundle(*service, resp.job_id(), dir.file("dynamic.kiln")));
  runtime::GraphExecutor fetched = runtime::GraphExecutor::load(dir.file("dynamic.kiln"));
  ASSERT_EQ(fetched.num_inputs(), 1u);
  EXPECT_EQ(fetched.input_shape(0), (std::vector<int64_t>{3, 16}));
  std::ofstream(dir.file("dynamic.onnx"), std::ios::binary) << m.bytes();
  graph::OnnxImportOptions import;
  import.input_shapes = {{ "x", { 3, 16 } }};
  graph::compile_onnx(dir.file("dynamic.onnx"), "llvm", dir.file("local.kiln"), {}, nullptr,
                      import);
  runtime::GraphExecutor local = runtime::GraphExecutor::load(dir.file("local.kiln"));
  const runtime::NDArray x = testing::random_array({3, 16}, 5);
  fetched.set_input("x", x);
  local.set_input("x", x);
  fetched.run();
  local.run();
  EXPECT_EQ(fetched.output(0).shape(), (std::vector<int64_t>{3, 8}));
  EXPECT_TRUE(
      testing::all_close(fetched.output(0), local.output(0).to_vector<float>(), 1e-4, 1e-5));
}

TEST(JobDriverTest, TheFarmsCostModelIsKeptAndOutlivesARestart) {
  TempDir dir("job_driver_model");
  const std::vector<std::string> args = {
      "--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
      "--batch",         "2", "--repeat",      "1"};
  // A job driver's output: state/drivers/<job>.log.
  auto driver_log = [&](uint64_t id) {
    std::ifstream in(dir.file("state/drivers/" + std::to_string(id) + ".log"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  uint64_t first = 0;
  {
    Kilnd kilnd(dir, args);
    auto service = kilnd.service();
    ASSERT_TRUE(testing::wait_for_devices(*service, 1));
    first = submit(*service, "cnn12", testing::small_cnn_model(12));
    const v1::Job job = wait_final(*service, first, std::chrono::seconds(400));
    ASSERT_EQ(job.progress().state(), v1::JOB_STATE_DONE) << job.error();
  }
  {  // kilnd is down: its log holds the tasks' sources and the model the driver kept.
    records::RecordLog log = records::RecordLog::open(dir.file("state/records"));
    EXPECT_EQ(log.tasks("llvm").size(), 4u);
    for (const std::string& t : log.tasks("llvm")) EXPECT_TRUE(log.task_source(t)) << t;
    EXPECT_TRUE(log.shelf(records::cost_model_shelf("llvm", "xgb")).has_value());
  }
  const std::string log1 = driver_log(first);
  EXPECT_NE(log1.find("cost model: no records to learn from"), std::string::npos) << log1;
  EXPECT_NE(log1.find("cost model: trained on "), std::string::npos) << log1;
  EXPECT_NE(log1.find("configs: 4 measured, 0 predicted by the cost model, 0 default"),
            std::string::npos)
      << log1;

  Kilnd kilnd(dir, args);
  auto service = kilnd.service();
  ASSERT_TRUE(testing::wait_for_devices(*service, 1));
  const uint64_t id = submit(*service, "cnn20", testing::small_cnn_model(20));
  const v1::Job job = wait_final(*service, id, std::chrono::seconds(400));
  ASSERT_EQ(job.progress().state(), v1::JOB_STATE_DONE) << job.error();
  const std::string log2 = driver_log(id);
  EXPECT_NE(log2.find("cost model: kept model, learned from "), std::string::npos) << log2;
}

}  // namespace
}  // namespace kiln
