// The Farm's answers to requests kilnd's services pass on to it (from job drivers and device
// agents), in process: a farm in a temporary folder whose job drivers are
// tests/common/script_driver.h's script, so that a test makes a driver's calls itself with the
// driver's real secret. Each test is a bug found with the gRPC fuzz target (fuzz/grpc_fuzz.cc);
// the reproducers of those it found itself are in fuzz/corpus/grpc/ (crash-*).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/fnv1a.h"
#include "deploy/runtime/bundle.h"
#include "records/record_log.h"
#include "rpc/wire.h"
#include "server/farm.h"
#include "tests/common/model_stream.h"
#include "tests/common/script_driver.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_record.h"

namespace kiln {
namespace {

using server::FarmError;

/// Expects `stmt` to throw FarmError `want` whose message contains `needle`.
#define EXPECT_FARM_ERROR(stmt, want, needle)                                       \
  do {                                                                              \
    try {                                                                           \
      stmt;                                                                         \
      ADD_FAILURE() << "expected a FarmError containing: " << (needle);             \
    } catch (const FarmError& e) {                                                  \
      EXPECT_EQ(e.code(), (want)) << e.what();                                      \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); \
    }                                                                               \
  } while (0)

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A started farm with one device and one running job, whose driver's auth is `driver`.
class FarmRequestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::FarmOptions o;
    o.state_dir = dir_.file("state");
    o.driver.program = drivers_.program();
    o.max_running_jobs = 2;  // two runners, and still one driver per job
    farm_ = std::make_unique<server::Farm>(o);
    v1::RegisterDeviceRequest reg;
    reg.set_key("cpu");
    reg.set_target("llvm");
    farm_->register_device(reg);
    server::Submission s;
    s.name = "job";
    s.target = "llvm";
    s.device_key = "cpu";
    s.trials = 4;
    const tracker::JobId job =
        farm_->submit(s, testing::model_stream("a model (the script driver never reads it)"));
    farm_->start("127.0.0.1:1");
    driver_ = drivers_.wait(job);
  }

  /// A measure request of the job's task "dense:1x10:ab", config `config`, for devices of `key`.
  tracker::RequestId enqueue(uint64_t config, const std::string& key = "measuring",
                             const std::string& target = "llvm", double flops = 0) {
    tracker::MeasureSpec spec;
    spec.job_id = driver_.job_id();
    spec.task_key = "dense:1x10:ab";
    spec.config_index = config;
    spec.target = target;
    spec.device_key = key;
    spec.flops = flops;
    return farm_->enqueue_measure(spec);
  }

  /// Uploads `bundle` as the driver does, in chunks of 16 bytes, each with `auth`.
  uint64_t upload(const std::string& bundle, const v1::DriverAuth& auth) {
    std::vector<v1::BundleUpload> chunks;
    for (size_t offset = 0; offset < bundle.size(); offset += 16) {
      v1::BundleUpload c;
      *c.mutable_auth() = auth;
      c.set_data(bundle.substr(offset, 16));
      if (offset + 16 >= bundle.size()) {
        c.set_last(true);
        c.set_checksum(fnv1a64(bundle.data(), bundle.size()));
      }
      chunks.push_back(std::move(c));
    }
    size_t next = 0;
    return farm_->store_bundle([&](v1::BundleUpload& c) {
      if (next == chunks.size()) return false;
      c = chunks[next++];
      return true;
    });
  }

  static std::string bundle(const std::string& library) {
    runtime::Bundle b;
    b.graph_json = R"({"format": "kiln.graph", "version": 1})";
    b.library = library;
    return runtime::serialize_bundle(b);
  }

  testing::TempDir dir_{"kiln_farm_requests"};
  testing::ScriptDriver drivers_{dir_.path()};
  std::unique_ptr<server::Farm> farm_;
  v1::DriverAuth driver_;
};

// The driver of a done job (still alive after its upload) uploaded again: the done job's bundle
// was replaced by the second one, which then failed with "cannot go from done to done".
TEST_F(FarmRequestsTest, ADoneJobsBundleIsNeverReplaced) {
  const std::string first = bundle("the first library");
  EXPECT_EQ(upload(first, driver_), first.size());
  EXPECT_EQ(farm_->job(driver_.job_id()).state, tracker::JobState::kDone);
  EXPECT_FARM_ERROR(upload(bundle("another library"), driver_),
                    FarmError::Code::kFailedPrecondition, "is already done");
  EXPECT_EQ(read_file(farm_->bundle_path(driver_.job_id())), first);
  EXPECT_EQ(farm_->job(driver_.job_id()).state, tracker::JobState::kDone);
}

// A job submitted before start() was runnable twice (submitted, then "resumed" from the store):
// both runners started a driver for it, each replacing the other's session, so the secret the
// first driver had was refused (PERMISSION_DENIED) at random.
TEST_F(FarmRequestsTest, AJobSubmittedBeforeStartHasOneDriver) {
  for (const server::FarmEvent& e : farm_->events())
    EXPECT_NE(e.kind, "resume") << e.text;  // nothing was resumed: the job is new
  EXPECT_EQ(farm_->job(driver_.job_id()).state, tracker::JobState::kRunning);
  farm_->driver_job(driver_);  // its driver is the one
  farm_->stop();               // every runner is done
  EXPECT_EQ(drivers_.starts(driver_.job_id()), 1);
}

// A submission's --input-shape bindings: checked at the door (each mistake INVALID_ARGUMENT naming
// the field), passed to the model's --check, kept in the job's record (across a restart of kilnd)
// and given to its driver with the job.
TEST_F(FarmRequestsTest, InputShapesReachTheCheckAndTheDriverAndSurviveARestart) {
  server::Submission s;
  s.name = "shaped";
  s.target = "llvm";
  s.device_key = "cpu";
  s.trials = 4;
  auto refused = [&](std::vector<std::pair<std::string, std::vector<int64_t>>> shapes,
                     const std::string& needle) {
    server::Submission bad = s;
    bad.input_shapes = std::move(shapes);
    EXPECT_FARM_ERROR(farm_->submit(bad, testing::model_stream("a model")),
                      FarmError::Code::kInvalidArgument, needle);
  };
  refused({{"", {1, 3}}}, "SubmitModel: input_shapes[0].name is empty");
  refused({{"x", {1, 3}}, {"z", {1, 0}}},
          "SubmitModel: input_shapes[1] ('z').dims[1] is 0; a size is from 1 to 2147483648");
  refused({{"x", {-4}}}, "SubmitModel: input_shapes[0] ('x').dims[0] is -4");
  refused({{"x", std::vector<int64_t>(65, 1)}},
          "SubmitModel: input_shapes[0] ('x').dims has 65 dimensions, over the limit of 64");
  refused({{"x", {1, 3}}, {"x", {2, 3}}},
          "SubmitModel: input_shapes[1] ('x'): input 'x' is given twice in input_shapes");
  refused({{std::string("x\0y", 3), {1}}}, "SubmitModel: input_shapes[0].name is not an input");
  refused(std::vector<std::pair<std::string, std::vector<int64_t>>>(257, {"x", {1}}),
          "SubmitModel: input_shapes has 257 entries, over the limit of 256");
  EXPECT_EQ(farm_->jobs().size(), 1u);  // none of those became a job

  s.input_shapes = {{"z", {3, 8}}, {"x", {3, 3, 8, 8}}};
  const tracker::JobId id = farm_->submit(s, testing::model_stream("a model"));
  const std::map<std::string, std::vector<int64_t>> want = {{"x", {3, 3, 8, 8}}, {"z", {3, 8}}};
  EXPECT_EQ(farm_->job(id).input_shapes, want);
  const std::vector<std::string> checks = drivers_.checks();
  ASSERT_FALSE(checks.empty());
  EXPECT_NE(checks.back().find("--input-shape x=3,3,8,8 --input-shape z=3,8"), std::string::npos)
      << checks.back();
  // The first job had none: its check had no --input-shape, its driver gets none.
  EXPECT_TRUE(farm_->job(driver_.job_id()).input_shapes.empty());
  EXPECT_EQ(farm_->driver_job_spec(driver_).input_shapes_size(), 0);

  const v1::DriverAuth auth = drivers_.wait(id);
  const v1::DriverJob spec = farm_->driver_job_spec(auth);
  ASSERT_EQ(spec.input_shapes_size(), 2);
  EXPECT_EQ(spec.input_shapes(0).name(), "x");
  EXPECT_EQ(
      std::vector<int64_t>(spec.input_shapes(0).dims().begin(), spec.input_shapes(0).dims().end()),
      (std::vector<int64_t>{3, 3, 8, 8}));
  EXPECT_EQ(spec.input_shapes(1).name(), "z");
  EXPECT_EQ(
      std::vector<int64_t>(spec.input_shapes(1).dims().begin(), spec.input_shapes(1).dims().end()),
      (std::vector<int64_t>{3, 8}));

  // kilnd restarted on the same state: the job still has them.
  farm_->stop();
  farm_.reset();
  server::FarmOptions o;
  o.state_dir = dir_.file("state");
  o.driver.program = drivers_.program();
  farm_ = std::make_unique<server::Farm>(o);
  EXPECT_EQ(farm_->job(id).input_shapes, want);
  EXPECT_TRUE(farm_->job(driver_.job_id()).input_shapes.empty());
}

// A driver reported best_latency_s = +inf: the job store wrote it as null and could not read the
// job back, so ListJobs failed for every client (and a restarted kilnd could not resume).
TEST_F(FarmRequestsTest, ANonFiniteBestLatencyIsRefused) {
  for (double latency :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), -1.0}) {
    v1::DriverProgress p;
    *p.mutable_auth() = driver_;
    p.set_best_latency_s(latency);
    EXPECT_FARM_ERROR(farm_->driver_progress(p), FarmError::Code::kInvalidArgument,
                      "best_latency_s is");
  }
  // Found by fuzz_grpc: a subnormal latency was stored but not read back (base/json.cc).
  for (double latency : {2.5e-3, 3.6515003342272834e-313}) {
    v1::DriverProgress p;
    *p.mutable_auth() = driver_;
    p.set_best_latency_s(latency);
    farm_->driver_progress(p);
    ASSERT_EQ(farm_->jobs().size(), 1u);
    EXPECT_EQ(farm_->job(driver_.job_id()).best_latency_s, latency);
  }
}

// A driver named a task whose key holds a NUL: ReportDriverProgress took it, but the record log
// cannot hold such a key, so an AppendRecords of that task and another appended the other task's
// record and then failed (a refused request that changed the log).
TEST_F(FarmRequestsTest, ATaskKeyWithANulIsRefused) {
  v1::DriverProgress p;
  *p.mutable_auth() = driver_;
  p.set_has_tasks(true);
  for (const std::string& key : {std::string("dense:1x10:ab"), std::string("x\0y", 3)}) {
    v1::TaskRef* t = p.add_tasks();
    t->set_task_key(key);
    t->set_target("llvm");
  }
  EXPECT_FARM_ERROR(farm_->driver_progress(p), FarmError::Code::kInvalidArgument,
                    "the key of task 1 holds a NUL character");
  EXPECT_TRUE(farm_->job(driver_.job_id()).task_keys.empty());
}

// The log's shelf and the tasks' sources, as drivers use them for the cost model trained on the
// farm's whole log: sources come with the tasks a driver reports (a bad one refused, naming it),
// the history holds the tasks with a source, and the shelf keeps only the job target's cost-model
// entries, within their size limit.
TEST_F(FarmRequestsTest, TaskSourcesHistoryAndTheShelf) {
  v1::DriverProgress p;
  *p.mutable_auth() = driver_;
  p.set_has_tasks(true);
  v1::TaskRef* t = p.add_tasks();
  t->set_task_key("dense:1x10:ab");
  t->set_target("llvm");
  t->set_template_name("dense_x86");
  t->set_workload(std::string(70000, 'w'));
  EXPECT_FARM_ERROR(farm_->driver_progress(p), FarmError::Code::kInvalidArgument,
                    "the workload of task 'dense:1x10:ab' must be non-empty, hold no NUL character "
                    "and be at most 65536 bytes (it has 70000)");
  t->set_workload(R"({"op":"dense"})");
  farm_->driver_progress(p);
  EXPECT_EQ(farm_->records().task_source("dense:1x10:ab"),
            (records::TaskSource{"dense_x86", R"({"op":"dense"})"}));
  records::MeasureRecord r = testing::test_record("dense:1x10:ab", 3, {1e-3}, "llvm", "cpu");
  v1::AppendRecordsRequest append;
  *append.mutable_auth() = driver_;
  *append.add_records() = rpc::to_wire(r);
  farm_->driver_append(append);
  std::vector<v1::TaskHistory> history;
  farm_->driver_history(driver_, [&](const v1::TaskHistory& h) { history.push_back(h); });
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].template_name(), "dense_x86");
  ASSERT_EQ(history[0].records_size(), 1);
  EXPECT_EQ(history[0].records(0).config_index(), 3u);

  v1::ShelfRequest get;
  *get.mutable_auth() = driver_;
  EXPECT_EQ(farm_->driver_shelf(get).target_records(), 1u);  // no name: the count alone
  get.set_name("cost-model/xgb/llvm");
  EXPECT_FALSE(farm_->driver_shelf(get).found());
  v1::PutShelfRequest put;
  *put.mutable_auth() = driver_;
  put.set_name("cost-model/xgb/llvm");
  put.set_data("model bytes");
  farm_->driver_put_shelf(put);
  const v1::ShelfEntry e = farm_->driver_shelf(get);
  EXPECT_TRUE(e.found());
  EXPECT_EQ(e.data(), "model bytes");
  for (const std::string& name :
       {std::string("cost-model/xgb/cuda"), std::string("records/xgb/llvm"),
        std::string("cost-model/XGB/llvm"), std::string("cost-model//llvm"), std::string("x")}) {
    put.set_name(name);
    EXPECT_FARM_ERROR(farm_->driver_put_shelf(put), FarmError::Code::kInvalidArgument,
                      "is not 'cost-model/<kind>/llvm'");
  }
  put.set_name("cost-model/xgb/llvm");
  put.set_data(std::string((32u << 20) + 1, 'x'));
  EXPECT_FARM_ERROR(farm_->driver_put_shelf(put), FarmError::Code::kInvalidArgument,
                    "over the 32 MiB a shelf entry holds");
  EXPECT_EQ(farm_->driver_shelf(get).data(), "model bytes");  // a refused put changed nothing
}

/// Collects what the farm sends a device.
struct Sink final : server::WorkSink {
  std::vector<uint64_t> ids;
  void deliver(v1::MeasureRequest w) override { ids.push_back(w.request_id()); }
  void close(bool, const std::string&) override {}
};

/// What the farm sends `device` when its work stream attaches now.
std::vector<uint64_t> take(server::Farm& farm, tracker::DeviceId device) {
  Sink sink;
  EXPECT_EQ(farm.attach(device, &sink), server::Farm::Attach::kAttached);
  farm.detach(device, &sink);
  return sink.ids;
}

/// Reports `result` and returns whether the farm accepted it.
bool report(server::Farm& farm, const v1::MeasureResult& result) {
  std::optional<bool> accepted;
  farm.report_result(result, [&](bool ok, std::exception_ptr error) {
    EXPECT_FALSE(error);
    accepted = ok;
  });
  EXPECT_TRUE(accepted.has_value());
  return accepted.value_or(false);
}

/// A device of key "measuring", registered with `fingerprint`.
tracker::DeviceId measuring_device(server::Farm& farm, const std::string& fingerprint) {
  v1::RegisterDeviceRequest reg;
  reg.set_key("measuring");
  reg.set_target("llvm");
  reg.set_fingerprint(fingerprint);
  return farm.register_device(reg).id;
}

/// The state and quarantine reason of `device` as the farm lists it.
std::pair<std::string, std::string> state_of(server::Farm& farm, tracker::DeviceId device) {
  for (const v1::DeviceInfo& d : farm.devices(""))
    if (d.device_id() == device) return {d.state(), d.quarantine_reason()};
  return {"gone", ""};
}

// A device reported a negative, NaN or infinite cost, or a cost of 0 s for a task with flops (an
// infinite GFLOP/s): the record log refused the record, report_result threw (INTERNAL to the
// agent), and the request's slot in its batch was never settled. A cost that is not finite and
// non-negative is a board whose timer cannot be trusted now: the result is refused, the board
// quarantined with the reason, and the request measured by another device (nothing lost); a zero
// cost is a record without GFLOP/s.
TEST_F(FarmRequestsTest, ADeviceWithBrokenCostsIsQuarantinedAndItsRequestMeasuredElsewhere) {
  uint64_t config = 0;
  for (double cost : {-1.0, std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity(), 0.0}) {
    const tracker::DeviceId device = measuring_device(*farm_, "board " + std::to_string(config));
    const tracker::RequestId id = enqueue(++config, "measuring", "llvm", 1e9);
    ASSERT_EQ(take(*farm_, device), std::vector<uint64_t>{id});
    v1::MeasureResult result;
    result.set_request_id(id);
    result.set_device_id(device);
    result.add_costs_s(cost);
    result.set_error(v1::ERROR_KIND_NONE);
    const bool accepted = report(*farm_, result);
    const auto recs = [&] { return farm_->records().records("dense:1x10:ab", "llvm"); };
    if (cost == 0) {
      ASSERT_TRUE(accepted);
      ASSERT_EQ(recs().size(), config);
      EXPECT_EQ(recs().back().error, ErrorKind::kNone);
      EXPECT_EQ(recs().back().gflops, 0.0);
      EXPECT_EQ(state_of(*farm_, device).first, "online");
      continue;
    }
    EXPECT_FALSE(accepted) << cost;
    EXPECT_EQ(recs().size(), config - 1) << "no record of an untrusted cost";
    const auto [state, reason] = state_of(*farm_, device);
    EXPECT_EQ(state, "quarantined");
    EXPECT_NE(reason.find("its timer cannot be trusted"), std::string::npos) << reason;
    // Another device measures the request; its record is kept.
    const tracker::DeviceId good = measuring_device(*farm_, "good " + std::to_string(config));
    ASSERT_EQ(take(*farm_, good), std::vector<uint64_t>{id}) << "the request was re-queued";
    result.set_device_id(good);
    result.clear_costs_s();
    result.add_costs_s(1e-3);
    ASSERT_TRUE(report(*farm_, result));
    ASSERT_EQ(recs().size(), config);
    EXPECT_EQ(recs().back().device, "good " + std::to_string(config));
    EXPECT_EQ(recs().back().cost(), 1e-3);
    ASSERT_NE(farm_->devices("").size(), 0u);
    farm_->device_gone(good, "test over");  // leaves the key to the next round's board
  }
}

// A board whose monotonic clock runs backwards (in a heartbeat or a result) cannot be trusted
// with timings: quarantined with the reason, its request re-queued for another device.
TEST_F(FarmRequestsTest, ABoardWhoseClockRunsBackwardsIsQuarantined) {
  const tracker::DeviceId board = measuring_device(*farm_, "board");
  EXPECT_FALSE(farm_->heartbeat(board, 500000).quarantined);
  EXPECT_FALSE(farm_->heartbeat(board, 600000).quarantined);
  EXPECT_FALSE(farm_->heartbeat(board, 590000).quarantined) << "a late heartbeat, within slack";
  const tracker::RequestId id = enqueue(7);
  ASSERT_EQ(take(*farm_, board), std::vector<uint64_t>{id});
  v1::MeasureResult result;
  result.set_request_id(id);
  result.set_device_id(board);
  result.add_costs_s(1e-3);
  result.set_device_clock_ms(400000);  // 200 s before its latest heartbeat
  EXPECT_FALSE(report(*farm_, result));
  const server::Farm::Lease lease = farm_->heartbeat(board, 700000);
  EXPECT_TRUE(lease.quarantined);
  EXPECT_NE(lease.reason.find("its clock ran backwards (from 600000 ms to 400000 ms)"),
            std::string::npos)
      << lease.reason;
  EXPECT_TRUE(farm_->records().records("dense:1x10:ab", "llvm").empty());
  const tracker::DeviceId good = measuring_device(*farm_, "good");
  EXPECT_EQ(take(*farm_, good), std::vector<uint64_t>{id}) << "the request was re-queued";

  // The same through a heartbeat alone.
  const tracker::DeviceId other = measuring_device(*farm_, "other");
  EXPECT_FALSE(farm_->heartbeat(other, 900000).quarantined);
  const server::Farm::Lease l2 = farm_->heartbeat(other, 100);
  EXPECT_TRUE(l2.quarantined);
  EXPECT_NE(l2.reason.find("its clock ran backwards"), std::string::npos) << l2.reason;
}

// A board that sends results for requests it was never given is refused each time, and
// quarantined at the third; a result for a request that was its own but is stale (re-queued,
// cancelled) is refused quietly and counts for nothing.
TEST_F(FarmRequestsTest, ResultsForRequestsNeverGivenAreRefusedAndQuarantineTheBoard) {
  const tracker::DeviceId board = measuring_device(*farm_, "board");
  const tracker::RequestId mine = enqueue(3);
  ASSERT_EQ(take(*farm_, board), std::vector<uint64_t>{mine});
  v1::MeasureResult result;
  result.set_device_id(board);
  result.add_costs_s(1e-3);
  for (uint64_t stray : {mine + 100, mine + 101}) {
    result.set_request_id(stray);
    EXPECT_FALSE(report(*farm_, result));
    EXPECT_EQ(state_of(*farm_, board).first, "busy");  // still running `mine`
  }
  result.set_request_id(mine + 102);
  EXPECT_FALSE(report(*farm_, result));
  const auto [state, reason] = state_of(*farm_, board);
  EXPECT_EQ(state, "quarantined");
  EXPECT_NE(reason.find("it sent 3 results for requests it was never given (the last: request " +
                        std::to_string(mine + 102) + ")"),
            std::string::npos)
      << reason;
  // Its own request went back to the queue: nothing lost.
  const tracker::DeviceId good = measuring_device(*farm_, "good");
  EXPECT_EQ(take(*farm_, good), std::vector<uint64_t>{mine});
  // The quarantined board's late result for it is stale now: refused, not counted as stray.
  result.set_request_id(mine);
  EXPECT_FALSE(report(*farm_, result));
  result.set_device_id(good);
  EXPECT_TRUE(report(*farm_, result));
  EXPECT_EQ(farm_->records().records("dense:1x10:ab", "llvm").size(), 1u);
}

// A key is measured on real boards or under emulation, never both; an emulated board's records
// go to the emulated lane of the log and say so.
TEST_F(FarmRequestsTest, EmulatedAndRealBoardsNeverShareAKeyAndTheirRecordsStayApart) {
  const std::string target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";
  v1::RegisterDeviceRequest reg;
  reg.set_key("a53");
  reg.set_target(target);
  reg.mutable_capabilities()->set_arch("aarch64");
  reg.mutable_capabilities()->set_emulated(true);
  reg.set_fingerprint("qemu a53");
  const tracker::DeviceId emulated = farm_->register_device(reg).id;
  reg.mutable_capabilities()->set_emulated(false);
  EXPECT_FARM_ERROR(farm_->register_device(reg), FarmError::Code::kInvalidArgument,
                    "key 'a53' is measured under emulation (device " + std::to_string(emulated) +
                        "); a real device must register under another key");
  // A board of another architecture than its target builds for is refused too.
  reg.set_key("a53-real");
  reg.set_target("llvm");
  EXPECT_FARM_ERROR(farm_->register_device(reg), FarmError::Code::kInvalidArgument,
                    "the device runs aarch64 but target 'llvm' builds x86_64 code; give "
                    "-mtriple=aarch64-linux-gnu");
  // A VDLA (the simulator's cycle model) registers whatever the host's architecture.
  reg.set_key("vdla");
  reg.set_target("vdla");
  reg.mutable_capabilities()->set_arch("x86_64");
  EXPECT_GT(farm_->register_device(reg).id, 0u);

  const tracker::RequestId id = enqueue(5, "a53", target);
  ASSERT_EQ(take(*farm_, emulated), std::vector<uint64_t>{id});
  v1::MeasureResult result;
  result.set_request_id(id);
  result.set_device_id(emulated);
  result.add_costs_s(2e-3);
  ASSERT_TRUE(report(*farm_, result));
  const records::RecordLog& log = farm_->records();
  EXPECT_TRUE(log.records("dense:1x10:ab", target).empty()) << "the device lane is apart";
  EXPECT_FALSE(log.measured("dense:1x10:ab", target, 5));
  const auto recs = log.records("dense:1x10:ab", target, records::Lane::kEmulated);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(recs[0].emulated);
  EXPECT_EQ(recs[0].device, "qemu a53");
  EXPECT_TRUE(log.measured("dense:1x10:ab", target, 5, records::Lane::kEmulated));
}

// A batch's flops make each record's GFLOP/s: NaN, infinite or negative ones are refused; so is
// an integer input's value range with one end or its ends swapped.
TEST_F(FarmRequestsTest, ABatchsFlopsMustBeFiniteAndNonNegative) {
  v1::DriverProgress p;
  *p.mutable_auth() = driver_;
  p.set_has_tasks(true);
  p.add_tasks()->set_task_key("dense:1x10:ab");
  p.mutable_tasks(0)->set_target("llvm");
  farm_->driver_progress(p);
  v1::MeasureBatchRequest batch;
  *batch.mutable_auth() = driver_;
  batch.mutable_task()->set_task_key("dense:1x10:ab");
  batch.mutable_task()->set_target("llvm");
  batch.mutable_task()->set_template_name("dense");
  batch.mutable_task()->set_workload("{}");
  batch.add_configs()->set_index(1);
  v1::TensorSpec* in = batch.add_inputs();
  in->set_dtype("float32");
  in->add_shape(4);
  *batch.mutable_output() = *in;
  for (double flops :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(), -1.0}) {
    batch.set_flops(flops);
    EXPECT_FARM_ERROR(farm_->measure_batch(batch, [] { return true; }),
                      FarmError::Code::kInvalidArgument, "flops must be finite");
  }
  batch.set_flops(8);
  // An integer input's value range: both ends, low <= high (the VDLA's int8 / int32 inputs).
  v1::TensorSpec* shift = batch.add_inputs();
  shift->set_dtype("int32");
  shift->add_shape(16);
  shift->set_low(0);
  EXPECT_FARM_ERROR(farm_->measure_batch(batch, [] { return true; }),
                    FarmError::Code::kInvalidArgument,
                    "input 1 has a value range [0, ?]: give both ends, low <= high");
  shift->set_high(-1);
  EXPECT_FARM_ERROR(farm_->measure_batch(batch, [] { return true; }),
                    FarmError::Code::kInvalidArgument, "input 1 has a value range [0, -1]");
  shift->set_high(31);  // valid: queued, then withdrawn (the driver "went away")
  EXPECT_FARM_ERROR(farm_->measure_batch(batch, [] { return true; }), FarmError::Code::kCancelled,
                    "went away");
}

}  // namespace
}  // namespace kiln
