// Fuzz target: every request message kilnd accepts, as protobuf bytes into its three gRPC services
// (server/services.h) over one Farm in a temporary folder. The input is
//   <method> <flags> <the method's request message>
// where the method byte picks one of the 20 methods (by its remainder) and the rest is parsed as
// that method's request; bytes that do not parse are ignored. The rest of the client streams
// (SubmitModel, UploadBundle) is their messages, each <u16 length, little-endian> <ModelUpload or
// BundleUpload of that many bytes>. The flags:
//   1  each DriverAuth of the request is replaced by a real driver's (its job id and secret)
//   2  ... by the driver of the done job instead of the running one's (UploadBundle: always)
//   4  first the chosen driver's job gets the fixture's tasks back (inputs may have changed them)
//   8  a device id of the request names the fixture's registered device
//  16  ReportResult answers a request in flight on the fixture's measuring device (the oldest the
//      farm delivered to it; one is enqueued when none is), so that results are accepted
// so that the fuzzer explores refused and authorized requests alike. The synchronous handlers get
// a bare grpc::ServerContext, bound to no call: in gRPC 1.51 its peer() is "", IsCancelled() is
// false and client_metadata() is empty (the farm has no token); SubmitModel's body
// (KilnService::submit_model) reads the input's messages as its stream. The streaming and callback
// methods (GetWork, ReportResult, WatchJob, FetchBundle, FetchModel, UploadBundle) and MeasureBatch
// (whose handler waits for workers and devices until its call is cancelled) go, after their
// handler's own checks, to the Farm methods the handlers call, with nothing waiting: GetWork
// attaches a sink that counts and detaches it; MeasureBatch's driver "goes away" at the batch's
// first wait, which withdraws what it queued; WatchJob waits zero milliseconds.
//
// The farm: one device, a running job and a done job, each with a live driver session, and a
// cancelled job. Its job drivers are tests/common/script_driver.h's shell script, which passes
// the model check and leaves the secret kilnd gave it where this target reads it; the farm's
// stop() kills them when the fixture goes at exit (and they end by themselves within a second
// of this process's end otherwise).
//
// Per input: no crash, no exception out of a handler, a status code kilnd means to send (INTERNAL
// only comes from a bug), and the farm stays consistent: ListJobs answers (every job can be
// read), the running job still runs, the done job's bundle is the one its driver uploaded, a
// withdrawn batch left no build, a refused ReportDriverProgress or AppendRecords changed nothing.
//
// KILN_FUZZ_TRACE=1 prints each request's method, flags and status (to see what seeds reach).
// Seeds (fuzz/corpus/grpc/seed-*, a valid request of every method and a few bad ones) are written
// by this target itself (grpc_seeds.cc), which links the protos:  python3 fuzz/make_seeds.py  runs
//   KILN_FUZZ_WRITE_SEEDS=fuzz/corpus/grpc build/dev/fuzz/fuzz_grpc_regression ANY_FILE
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/fnv1a.h"
#include "deploy/runtime/bundle.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/grpc_input.h"
#include "server/farm.h"
#include "server/services.h"
#include "server/wire.h"
#include "tests/common/model_stream.h"
#include "tests/common/script_driver.h"

namespace {

using namespace kiln;
using namespace kiln::fuzz_grpc;
namespace fs = std::filesystem;
using grpc::Status;
using grpc::StatusCode;
using tracker::JobId;

// What inputs pile up in the farm from one execution to the next is capped, so that every
// execution stays fast: devices registered by inputs (the oldest is dropped, as a lost device,
// past this many); records appended by AppendRecords (skipped past this many: GetTaskRecords
// and MeasureBatch read all records of a job's task); results accepted by ReportResult (their
// records go to kMeasuredTask, which no job has, so they only fill the log). SubmitModel's jobs
// are capped by the service's own rate limit, set to kSubmitsPerMinute, and none of them runs:
// both job runners hold the fixture's drivers.
constexpr size_t kMaxInputDevices = 16;
constexpr size_t kMaxAppended = 500;
constexpr size_t kMaxReported = 20000;
constexpr int kSubmitsPerMinute = 20;
constexpr const char* kMeasuredTask = "fuzz_measured:1:0";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The services' own mapping of exceptions to statuses (services.cc), for the Farm methods this
/// target calls directly.
template <typename F>
Status call(F&& body) {
  try {
    return body();
  } catch (const server::FarmError& e) {
    return server::to_status(e);
  } catch (const Error& e) {
    return Status(StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const SystemError& e) {
    return Status(StatusCode::UNAVAILABLE, e.what());
  } catch (const std::exception& e) {
    return Status(StatusCode::INTERNAL, e.what());
  }
}

Status missing(const char* rpc, const char* field) {
  return Status(StatusCode::INVALID_ARGUMENT, std::string(rpc) + ": " + field + " is missing");
}

/// A device's work stream that keeps the ids of what it was given.
struct CountingSink final : server::WorkSink {
  std::vector<uint64_t> delivered;
  void deliver(v1::MeasureRequest wire) override { delivered.push_back(wire.request_id()); }
  void close(bool, const std::string&) override {}
};

/// A folder for the farm's state, on tmpfs where there is one (the farm syncs every write),
/// removed with everything in it when the process ends normally. The folders of runs that
/// crashed (whose process is gone) are removed first: RocksDB preallocates its logs, some 150 MB
/// a farm, which is memory on tmpfs.
struct Folder {
  fs::path path;
  Folder() {
    const fs::path base =
        fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    const std::string prefix = "kiln_fuzz_grpc_";
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
        fs::remove_all(e.path(), ec);
    }
    path = base / (prefix + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// The farm and its services, made once per process; stopped (its drivers killed) and its folder
/// removed at exit.
struct Fixture {
  Folder dir;
  testing::ScriptDriver drivers{dir.path};
  std::unique_ptr<server::Farm> farm;
  std::unique_ptr<server::TrackerService> tracker_service;
  std::unique_ptr<server::KilnService> kiln_service;
  std::unique_ptr<server::JobDriverService> driver_service;
  v1::DriverAuth running, done;  // the drivers of the running and the done job
  tracker::DeviceId device = 0;
  tracker::DeviceId measure_device = 0;  // of key kMeasureKey
  std::deque<uint64_t> measuring;        // requests in flight on it, oldest first
  uint64_t measure_configs = 0;
  size_t appended = 0, reported = 0;  // records appended by inputs
  std::string done_bundle;            // what the done job's driver uploaded
  std::deque<tracker::DeviceId> input_devices;

  Fixture() {
    server::FarmOptions o;
    o.state_dir = (dir.path / "state").string();
    o.max_running_jobs = 2;
    o.tracker.registry.lease = std::chrono::hours(24);  // the fixture's device never expires
    o.driver.program = drivers.program();
    o.driver.idle_timeout = std::chrono::hours(24);
    farm = std::make_unique<server::Farm>(o);
    tracker_service = std::make_unique<server::TrackerService>(*farm, "");
    server::KilnServiceOptions kiln_options;
    kiln_options.submits_per_minute = kSubmitsPerMinute;
    kiln_service = std::make_unique<server::KilnService>(*farm, kiln_options);
    driver_service = std::make_unique<server::JobDriverService>(*farm, "");

    v1::RegisterDeviceRequest reg;
    reg.set_key(kDeviceKey);
    reg.set_target(kTarget);
    device = farm->register_device(reg).id;
    server::Submission s;
    s.target = kTarget;
    s.device_key = kDeviceKey;
    s.owner = "fuzz";
    s.trials = 8;
    s.name = "running";
    const std::string model = "an ONNX model: the fuzz target's drivers never read it";
    const JobId running_job = farm->submit(s, testing::model_stream(model));
    s.name = "done";
    const JobId done_job = farm->submit(s, testing::model_stream(model));
    farm->start("127.0.0.1:1");  // the drivers never call it
    running = drivers.wait(running_job);
    done = drivers.wait(done_job);
    for (const v1::DriverAuth* d : {&running, &done}) reset_tasks(*d);

    // Records of the first task, which MeasureBatch answers from the log.
    v1::AppendRecordsRequest append;
    *append.mutable_auth() = running;
    for (uint64_t i = 0; i < 4; ++i) {
      v1::MeasureRecord* r = append.add_records();
      r->set_target(kTarget);
      r->set_device("fuzz-device");
      r->set_task_key(kTasks[0]);
      r->set_config_index(i);
      r->set_config("tile=[" + std::to_string(i) + "]");
      r->set_error(i == 3 ? v1::ERROR_KIND_RUN_TIMEOUT : v1::ERROR_KIND_NONE);
      if (i != 3) r->add_costs_s(1e-3 * static_cast<double>(i + 1));
      r->set_timestamp_ms(1700000000000);
    }
    farm->driver_append(append);

    done_bundle = valid_bundle("the done job's library");
    std::vector<v1::BundleUpload> chunks = bundle_chunks(done_bundle, done, 40);
    size_t next = 0;
    farm->store_bundle([&](v1::BundleUpload& c) {
      if (next == chunks.size()) return false;
      c = chunks[next++];
      return true;
    });
    KILN_FUZZ_CHECK(farm->job(done.job_id()).state == tracker::JobState::kDone);

    s.name = "cancelled";
    farm->cancel(farm->submit(s, testing::model_stream(model)), "by the fuzz target");
  }

  /// The job of driver `d` gets the fixture's tasks (on the job's target) back.
  void reset_tasks(const v1::DriverAuth& d) {
    const tracker::JobRecord j = farm->job(d.job_id());
    if (j.task_keys == kTasks) return;
    v1::DriverProgress p;
    *p.mutable_auth() = d;
    p.set_has_tasks(true);
    p.set_phase("tuning");
    for (const std::string& key : kTasks) {
      v1::TaskRef* t = p.add_tasks();
      t->set_task_key(key);
      t->set_target(j.target);
    }
    farm->driver_progress(p);
  }

  const v1::DriverAuth& driver(uint8_t flags) const {
    return (flags & kDoneDriver) ? done : running;
  }

  void authorize(v1::DriverAuth* auth, uint8_t flags) const {
    if (flags & kRealAuth) *auth = driver(flags);
  }

  void device_id(uint64_t& id, uint8_t flags) const {
    if (flags & kFixtureDevice) id = device;
  }

  /// The oldest request in flight on the measuring device; one is enqueued (for the done job,
  /// so that no batch withdraws it) when none is. A measuring device that is quarantined, or
  /// holds requests this does not know of (a GetWork input took them), is replaced: what it held
  /// is requeued and comes to the new one.
  uint64_t request_in_flight() {
    bool usable = false;
    for (const v1::DeviceInfo& d : farm->devices(kMeasureKey)) {
      usable = usable || (d.device_id() == measure_device && d.state() != "quarantined" &&
                          d.in_flight() == measuring.size());
    }
    if (!usable) {
      farm->device_gone(measure_device, "replaced by the fuzz target");  // no-op when unknown
      v1::RegisterDeviceRequest reg;
      reg.set_key(kMeasureKey);
      reg.set_target(kTarget);
      measure_device = farm->register_device(reg).id;
      measuring.clear();
    }
    if (measuring.empty()) {
      tracker::MeasureSpec spec;
      spec.job_id = done.job_id();
      spec.task_key = kMeasuredTask;
      spec.config_index = 1000000 + measure_configs++;
      spec.target = kTarget;
      spec.device_key = kMeasureKey;
      spec.config_text = "measured by the fuzz target";
      spec.flops = 1e9;
      farm->enqueue_measure(spec);
    }
    CountingSink sink;  // takes what is queued for the device
    if (farm->attach(measure_device, &sink) == server::Farm::Attach::kAttached)
      farm->detach(measure_device, &sink);
    measuring.insert(measuring.end(), sink.delivered.begin(), sink.delivered.end());
    return measuring.empty() ? 0 : measuring.front();
  }

  /// A device registered by an input; past kMaxInputDevices the oldest is dropped.
  void registered(tracker::DeviceId id) {
    input_devices.push_back(id);
    if (input_devices.size() <= kMaxInputDevices) return;
    farm->device_gone(input_devices.front(), "dropped by the fuzz target (it keeps 16 devices)");
    input_devices.pop_front();
  }

  /// Job `id` as the API shows it.
  std::string job_text(JobId id) const { return server::to_wire(farm->job(id)).DebugString(); }

  /// The farm after an input that may have changed it, and job `touched` (0: none) with it.
  void check_consistent(JobId touched) {
    if (touched != 0) {  // it can be read (or does not exist)
      const Status s = call([&] {
        farm->job(touched);
        return Status::OK;
      });
      if (!s.ok() && s.error_code() != StatusCode::NOT_FOUND) {
        std::fprintf(stderr, "job %llu: %s\n", static_cast<unsigned long long>(touched),
                     s.error_message().c_str());
        KILN_FUZZ_CHECK(!"a job an input changed cannot be read");
      }
    }
    KILN_FUZZ_CHECK(farm->job(running.job_id()).state == tracker::JobState::kRunning);
    KILN_FUZZ_CHECK(farm->job(done.job_id()).state == tracker::JobState::kDone);
    KILN_FUZZ_CHECK(read_file(farm->bundle_path(done.job_id())) == done_bundle);
  }
};

Fixture& fixture() {
  static Fixture f;  // destroyed at exit: the farm stops its drivers, the folder goes
  return f;
}

/// Whether kilnd means to send `s` (INTERNAL only comes from a bug).
void check_status(const Status& s, Method method) {
  switch (s.error_code()) {
    case StatusCode::OK:
    case StatusCode::INVALID_ARGUMENT:
    case StatusCode::NOT_FOUND:
    case StatusCode::FAILED_PRECONDITION:
    case StatusCode::RESOURCE_EXHAUSTED:
    case StatusCode::PERMISSION_DENIED:
    case StatusCode::CANCELLED:
    case StatusCode::UNAVAILABLE:
    case StatusCode::UNAUTHENTICATED:
      return;
    default:
      std::fprintf(stderr, "method %d answered status %d: %s\n", static_cast<int>(method),
                   static_cast<int>(s.error_code()), s.error_message().c_str());
      KILN_FUZZ_CHECK(!"a status code kilnd does not mean to send");
  }
}

/// A client stream's messages: <u16 length> <that many bytes>, ...; false when one does not
/// parse.
template <typename Message>
bool parse_chunks(const std::string& rest, std::vector<Message>& chunks) {
  size_t pos = 0;
  while (pos + 2 <= rest.size()) {
    const size_t n = static_cast<unsigned char>(rest[pos]) |
                     (static_cast<size_t>(static_cast<unsigned char>(rest[pos + 1])) << 8);
    pos += 2;
    const size_t take = std::min(n, rest.size() - pos);
    Message c;
    if (!c.ParseFromString(rest.substr(pos, take))) return false;
    chunks.push_back(std::move(c));
    pos += take;
  }
  return true;
}

/// A reader over `messages` (false after the last), as a client stream's handler reads.
template <typename Message>
std::function<bool(Message&)> reader(const std::vector<Message>& messages) {
  return [&messages, next = size_t{0}](Message& m) mutable {
    if (next == messages.size()) return false;
    m = messages[next++];
    return true;
  };
}

/// Runs one request; returns its status (nullopt: the bytes did not parse, or the request was
/// skipped), and whether it may have changed the farm.
struct Outcome {
  std::optional<Status> status;
  bool changes = false;
  JobId touched = 0;  ///< the job it changed, if any
};

Outcome run(Fixture& f, Method method, uint8_t flags, const std::string& rest) {
  grpc::ServerContext ctx;
  Outcome out;
  auto parsed = [&](google::protobuf::Message& m) { return m.ParseFromString(rest); };
  switch (method) {
    case kRegisterDevice: {
      v1::RegisterDeviceRequest req;
      v1::RegisterDeviceResponse resp;
      if (!parsed(req)) return out;
      out.status = f.tracker_service->RegisterDevice(&ctx, &req, &resp);
      if (out.status->ok()) f.registered(resp.device_id());
      out.changes = true;
      return out;
    }
    case kHeartbeat: {
      v1::HeartbeatRequest req;
      v1::HeartbeatResponse resp;
      if (!parsed(req)) return out;
      uint64_t id = req.device_id();
      f.device_id(id, flags);
      req.set_device_id(id);
      out.status = f.tracker_service->Heartbeat(&ctx, &req, &resp);
      return out;
    }
    case kGetWork: {  // the handler's checks, then its stream attached and gone
      v1::GetWorkRequest req;
      if (!parsed(req)) return out;
      uint64_t id = req.device_id();
      f.device_id(id, flags);
      if (id == 0) {
        out.status = missing("GetWork", "device_id");
        return out;
      }
      CountingSink sink;
      switch (f.farm->attach(id, &sink)) {
        case server::Farm::Attach::kAttached:
          f.farm->detach(id, &sink);
          out.status = Status::OK;
          break;
        case server::Farm::Attach::kUnknownDevice:
          out.status = Status(StatusCode::NOT_FOUND, "device is not registered");
          break;
        case server::Farm::Attach::kStopping:
          out.status = Status(StatusCode::UNAVAILABLE, "kilnd is stopping");
          break;
      }
      return out;
    }
    case kReportResult: {  // the handler's checks, then the farm's answer
      v1::MeasureResult req;
      if (!parsed(req)) return out;
      uint64_t id = req.device_id();
      f.device_id(id, flags);
      req.set_device_id(id);
      uint64_t in_flight = 0;
      if ((flags & kInFlight) && f.reported < kMaxReported) {
        in_flight = f.request_in_flight();
        req.set_request_id(in_flight);
        req.set_device_id(f.measure_device);
      }
      if (req.request_id() == 0) {
        out.status = missing("ReportResult", "request_id");
      } else if (req.device_id() == 0) {
        out.status = missing("ReportResult", "device_id");
      } else {
        // As the handler: whatever report_result throws, or the error it answers with, is
        // INTERNAL. (Its answer comes at once here: nothing else appends to the log.)
        auto answer = std::make_shared<std::optional<bool>>();
        try {
          f.farm->report_result(req, [answer](bool accepted, std::exception_ptr error) {
            if (!error) *answer = accepted;
          });
          out.status = answer->has_value() ? Status::OK
                                           : Status(StatusCode::INTERNAL, "the record log failed");
        } catch (const std::exception& e) {
          out.status = Status(StatusCode::INTERNAL, e.what());
        }
        if (in_flight != 0 && answer->value_or(false)) {
          f.measuring.pop_front();
          ++f.reported;
        }
      }
      out.changes = true;
      return out;
    }
    case kGetBuildWork: {
      v1::GetBuildWorkRequest req;
      v1::BuildBatch resp;
      if (!parsed(req)) return out;
      req.set_wait_ms(0);  // nothing waits
      out.status = f.tracker_service->GetBuildWork(&ctx, &req, &resp);
      return out;
    }
    case kReportArtifact: {
      v1::ReportArtifactRequest req;
      v1::ReportArtifactResponse resp;
      if (!parsed(req)) return out;
      out.status = f.tracker_service->ReportArtifact(&ctx, &req, &resp);
      return out;
    }
    case kSubmitModel: {
      std::vector<v1::ModelUpload> messages;
      v1::SubmitModelResponse resp;
      if (!parse_chunks(rest, messages)) return out;
      out.status = f.kiln_service->submit_model(&ctx, reader(messages), &resp);
      // Whatever was refused or cut short left no upload behind.
      for (const fs::directory_entry& e : fs::directory_iterator(f.dir.path / "state" / "models"))
        KILN_FUZZ_CHECK(e.path().filename().string().rfind("upload-", 0) != 0);
      out.changes = true;
      out.touched = resp.job_id();
      return out;
    }
    case kGetJob: {
      v1::GetJobRequest req;
      v1::Job resp;
      if (!parsed(req)) return out;
      out.status = f.kiln_service->GetJob(&ctx, &req, &resp);
      return out;
    }
    case kListJobs: {
      v1::ListJobsRequest req;
      v1::ListJobsResponse resp;
      if (!parsed(req)) return out;
      out.status = f.kiln_service->ListJobs(&ctx, &req, &resp);
      // Every job can be read: a request with known states is answered.
      bool known = true;
      for (int st : req.states()) known = known && server::from_wire(static_cast<v1::JobState>(st));
      if (known && !out.status->ok())
        std::fprintf(stderr, "ListJobs: %s\n", out.status->error_message().c_str());
      KILN_FUZZ_CHECK(!known || out.status->ok());
      return out;
    }
    case kWatchJob: {  // the handler's loop, once, waiting zero milliseconds
      v1::WatchJobRequest req;
      if (!parsed(req)) return out;
      if (req.job_id() == 0) {
        out.status = missing("WatchJob", "job_id");
        return out;
      }
      out.status = call([&] {
        const tracker::JobRecord j = f.farm->job(req.job_id());
        const v1::JobProgress p = server::progress_of(j);
        KILN_FUZZ_CHECK(p.job_id() == req.job_id());
        if (!tracker::is_final(j.state))
          f.farm->wait_job(req.job_id(), 0, std::chrono::milliseconds(0));
        return Status::OK;
      });
      return out;
    }
    case kCancelJob: {
      v1::CancelJobRequest req;
      v1::Job resp;
      if (!parsed(req)) return out;
      // The running job's driver is what every authorized input needs: it is never cancelled
      // (the fixture's cancelled job covers cancellation).
      if (req.job_id() == f.running.job_id()) return out;
      out.status = f.kiln_service->CancelJob(&ctx, &req, &resp);
      out.changes = true;
      out.touched = req.job_id();
      return out;
    }
    case kFetchBundle: {  // the handler's checks and the bundle it would send
      v1::FetchBundleRequest req;
      if (!parsed(req)) return out;
      if (req.job_id() == 0) {
        out.status = missing("FetchBundle", "job_id");
        return out;
      }
      out.status = call([&] {
        const std::string path = f.farm->bundle_path(req.job_id());
        if (!fs::exists(path)) std::fprintf(stderr, "job %s has no bundle\n", path.c_str());
        KILN_FUZZ_CHECK(fs::exists(path));  // the handler answers INTERNAL otherwise
        return Status::OK;
      });
      return out;
    }
    case kListDevices: {
      v1::ListDevicesRequest req;
      v1::ListDevicesResponse resp;
      if (!parsed(req)) return out;
      out.status = f.kiln_service->ListDevices(&ctx, &req, &resp);
      return out;
    }
    case kGetDriverJob: {
      v1::DriverJobRequest req;
      v1::DriverJob resp;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      out.status = f.driver_service->GetDriverJob(&ctx, &req, &resp);
      return out;
    }
    case kReportDriverProgress: {
      v1::DriverProgress req;
      v1::DriverProgressResponse resp;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      const std::string before = f.job_text(f.driver(flags).job_id());
      out.status = f.driver_service->ReportDriverProgress(&ctx, &req, &resp);
      // A refused report changes nothing.
      if (!out.status->ok()) KILN_FUZZ_CHECK(f.job_text(f.driver(flags).job_id()) == before);
      out.changes = true;
      return out;
    }
    case kGetTaskRecords: {
      v1::TaskRecordsRequest req;
      v1::TaskRecords resp;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      out.status = f.driver_service->GetTaskRecords(&ctx, &req, &resp);
      return out;
    }
    case kAppendRecords: {
      v1::AppendRecordsRequest req;
      v1::AppendRecordsResponse resp;
      if (!parsed(req)) return out;
      if (f.appended >= kMaxAppended) return out;
      f.authorize(req.mutable_auth(), flags);
      const size_t before = f.farm->records().size();
      out.status = f.driver_service->AppendRecords(&ctx, &req, &resp);
      if (out.status->ok()) KILN_FUZZ_CHECK(resp.seqs_size() == req.records_size());
      f.appended += f.farm->records().size() - before;
      // A refused append appends nothing.
      if (!out.status->ok()) KILN_FUZZ_CHECK(f.farm->records().size() == before);
      out.changes = true;
      return out;
    }
    case kMeasureBatch: {  // validated, queued, and withdrawn at the batch's first wait
      v1::MeasureBatchRequest req;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      int polls = 0;
      out.status = call([&] {
        const std::vector<records::MeasureRecord> records =
            f.farm->measure_batch(req, [&polls] { return ++polls > 1; });
        KILN_FUZZ_CHECK(records.size() == static_cast<size_t>(req.configs_size()));
        return Status::OK;
      });
      // Nothing of the batch is left for a worker.
      KILN_FUZZ_CHECK(
          f.farm->take_builds("fuzz-check", 1, {}, std::chrono::milliseconds(0)).empty());
      out.changes = true;
      return out;
    }
    case kUploadBundle: {
      std::vector<v1::BundleUpload> chunks;
      if (!parse_chunks(rest, chunks)) return out;
      // Only the done job's driver uploads: an upload that finished the running job would end
      // the state every later input needs (the fixture's own upload covers that path).
      if (flags & kRealAuth) {
        for (size_t i = 0; i < chunks.size(); ++i)
          if (i == 0 || chunks[i].has_auth()) *chunks[i].mutable_auth() = f.done;
      }
      out.status = call([&] {
        f.farm->store_bundle(reader(chunks));
        return Status::OK;
      });
      out.changes = true;
      return out;
    }
    case kFetchModel: {  // the handler's checks and the model it would send
      v1::DriverJobRequest req;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      out.status = call([&] {
        KILN_FUZZ_CHECK(fs::is_regular_file(f.farm->driver_model_path(req.auth())));
        return Status::OK;
      });
      return out;
    }
    case kGetTargetHistory: {  // the handler's checks and what it would stream
      v1::DriverJobRequest req;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      out.status = call([&] {
        f.farm->driver_history(req.auth(), [](const v1::TaskHistory& h) {
          KILN_FUZZ_CHECK(!h.task_key().empty() && !h.template_name().empty());
        });
        return Status::OK;
      });
      return out;
    }
    case kGetShelf: {
      v1::ShelfRequest req;
      v1::ShelfEntry resp;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      out.status = f.driver_service->GetShelf(&ctx, &req, &resp);
      return out;
    }
    case kPutShelf: {
      v1::PutShelfRequest req;
      v1::PutShelfResponse resp;
      if (!parsed(req)) return out;
      f.authorize(req.mutable_auth(), flags);
      out.status = f.driver_service->PutShelf(&ctx, &req, &resp);
      // What a driver kept, another call reads back.
      if (out.status->ok()) {
        v1::ShelfRequest get;
        *get.mutable_auth() = req.auth();
        get.set_name(req.name());
        KILN_FUZZ_CHECK(f.farm->driver_shelf(get).data() == req.data());
      }
      out.changes = true;
      return out;
    }
    case kNumMethods:
      break;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const char* folder = std::getenv("KILN_FUZZ_WRITE_SEEDS")) {
    write_grpc_seeds(folder);
    std::printf("seeds written to %s\n", folder);
    std::exit(0);
  }
  Fixture& f = fixture();
  if (size < 2) return 0;
  const auto method = static_cast<Method>(data[0] % kNumMethods);
  const uint8_t flags = data[1];
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  if ((flags & kResetTasks) && (flags & kRealAuth)) f.reset_tasks(f.driver(flags));
  const Outcome out = run(f, method, flags, rest);
  if (!out.status) return 0;
  static const bool trace = std::getenv("KILN_FUZZ_TRACE") != nullptr;
  if (trace) {
    std::fprintf(stderr, "method %d flags %d: status %d %s\n", static_cast<int>(method), flags,
                 static_cast<int>(out.status->error_code()), out.status->error_message().c_str());
  }
  check_status(*out.status, method);
  if (out.changes) f.check_consistent(out.touched);
  return 0;
}
