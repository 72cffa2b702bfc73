// The farm commands of `kiln`: talk to a kilnd through the public KilnService
// (proto/kiln/v1/service.proto).
//
//   kiln submit resnet18.onnx --target "llvm -mcpu=znver4" --device-key epyc --trials 512 --watch
//   kiln submit resnet18.onnx --target "llvm -mcpu=znver4" --device-key epyc --budget 2000 --time
//   1h kiln jobs --state running kiln watch 7          # live progress; exit 0 when the job ends
//   DONE kiln fetch 7 -o resnet18.kiln
//
// Every command takes --server HOST:PORT ($KILN_SERVER, else 127.0.0.1:7070), --token-file F
// (else $KILN_TOKEN) and --tls-ca F. A failed call prints "error: <server's message> (<CODE>)"
// and exits 1; a bad command line prints "error: ..." and exits 2. Connecting waits at most
// kConnectTimeout, so an unreachable farm is an error, never a hang.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/fnv1a.h"
#include "client/cli.h"
#include "client/commands.h"
#include "proto/kiln/v1/common.pb.h"
#include "proto/kiln/v1/service.grpc.pb.h"
#include "rpc/channel.h"
#include "rpc/job_progress.h"
#include "rpc/model_upload.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = kiln::v1;
using Clock = std::chrono::system_clock;

constexpr auto kConnectTimeout = std::chrono::seconds(5);
constexpr auto kCallTimeout = std::chrono::seconds(60);  // unary calls
constexpr uint64_t kShowUploadBytes = 16u << 20;         // submit shows progress from this size
constexpr int kWatchRetries = 8;                         // a kilnd restart; backoff up to 4 s

using kiln::cli::Args;
using kiln::cli::UsageError;

/// The flags every farm command takes, after its own.
std::vector<kiln::cli::Flag> with_farm_flags(std::vector<kiln::cli::Flag> flags) {
  flags.push_back(
      {"--server", "HOST:PORT", "kilnd's address (default: $KILN_SERVER, else 127.0.0.1:7070)"});
  flags.push_back({"--token-file", "F", "a file holding the farm's token (default: $KILN_TOKEN)"});
  flags.push_back({"--tls-ca", "CA.pem", "talk TLS, trusting this CA (default: plaintext)"});
  return flags;
}

constexpr const char* kFarmGroup = "on a tuning farm (kilnd)";
constexpr const char* kFarmNotes =
    "Exit codes: 0 done, 1 a failed call (\"error: <kilnd's message> (<gRPC code>)\"), 2 a "
    "mistake on the command line. An unreachable kilnd is an error after 5 s, never a hang.";

/// The job id, the command's one operand.
uint64_t job_arg(const Args& a) {
  const std::string& t = a.only_operand("JOB id");
  const bool digits =
      !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || t.size() > 19 || std::stoull(t) == 0) {
    throw UsageError("JOB must be a positive job id, got '" + t + "'");
  }
  return std::stoull(t);
}

// ---- names and formatting -------------------------------------------------------------------

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN_CODE";
  }
}

/// "RUNNING" for JOB_STATE_RUNNING.
std::string state_name(v1::JobState s) {
  std::string n = v1::JobState_Name(s);
  const std::string prefix = "JOB_STATE_";
  return n.rfind(prefix, 0) == 0 ? n.substr(prefix.size()) : n;
}

/// "running", "RUNNING" or "JOB_STATE_RUNNING" -> JOB_STATE_RUNNING.
v1::JobState parse_state(const std::string& text) {
  std::string up;
  for (char c : text) up += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up.rfind("JOB_STATE_", 0) != 0) up = "JOB_STATE_" + up;
  v1::JobState s{};
  if (!v1::JobState_Parse(up, &s) || s == v1::JOB_STATE_UNSPECIFIED) {
    throw UsageError("--state must be queued, running, done, failed or cancelled, got '" + text +
                     "'");
  }
  return s;
}

bool finished(v1::JobState s) {
  return s == v1::JOB_STATE_DONE || s == v1::JOB_STATE_FAILED || s == v1::JOB_STATE_CANCELLED;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string age(int64_t since_ms) {
  if (since_ms <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, (now_ms() - since_ms) / 1000);
  char buf[32];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s / 3600 % 24));
  } else if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

std::string best_ms(double seconds) {
  if (seconds <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

/// How much the job measures: "64/task" (the fixed split), or its budget and / or time limit
/// with the cap per task and the early stop when given ("400, 10m00s, max 50/task, stop 8").
std::string budget_text(const v1::Job& j) {
  if (!kiln::rpc::is_scheduled(j)) return std::to_string(j.trials()) + "/task";
  std::string t;
  auto add = [&](const std::string& part) { t += (t.empty() ? "" : ", ") + part; };
  if (j.budget() > 0) add(std::to_string(j.budget()));
  if (j.time_limit_s() > 0) add(duration_text(j.time_limit_s()));
  if (j.trials() > 0) add("max " + std::to_string(j.trials()) + "/task");
  if (j.has_early_stop()) add("stop " + std::to_string(j.early_stop()));
  return t;
}

std::string bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return "[" + std::string(filled, '#') + std::string(width - filled, ' ') + "]";
}

// ---- the connection -------------------------------------------------------------------------

/// The farm as one command sees it: the address, the token and the stub.
class Farm {
 public:
  explicit Farm(const Args& a) {
    const char* env = std::getenv("KILN_SERVER");
    address_ = a.get("--server", env && *env ? env : "127.0.0.1:7070");
    token_ = kiln::rpc::read_token(a.get("--token-file"));
    tls_ = !a.get("--tls-ca").empty();
    channel_ = kiln::rpc::make_channel(address_, a.get("--tls-ca"));
    stub_ = v1::KilnService::NewStub(channel_);
  }

  const std::string& address() const { return address_; }
  v1::KilnService::Stub& stub() { return *stub_; }

  /// Waits until the channel is connected: kiln::Error "cannot reach kilnd" when the connection
  /// fails or takes longer than kConnectTimeout.
  void connect() {
    const auto deadline = Clock::now() + kConnectTimeout;
    for (;;) {
      const grpc_connectivity_state s = channel_->GetState(/*try_to_connect=*/true);
      if (s == GRPC_CHANNEL_READY) return;
      if (s == GRPC_CHANNEL_TRANSIENT_FAILURE || s == GRPC_CHANNEL_SHUTDOWN) {
        KILN_USER_ERROR() << "cannot reach kilnd at " << address_
                          << " (the connection failed; is kilnd running there"
                          << (tls_ ? ", and is --tls-ca the farm's CA?" : "?") << ")";
      }
      if (!channel_->WaitForStateChange(s, deadline)) {
        KILN_USER_ERROR() << "cannot reach kilnd at " << address_ << " (no connection within "
                          << kConnectTimeout.count() << " s)";
      }
    }
  }

  /// A context carrying the token, with a deadline when `timeout` is positive.
  std::unique_ptr<grpc::ClientContext> context(std::chrono::seconds timeout = kCallTimeout) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    kiln::rpc::add_token(*ctx, token_);
    if (timeout.count() > 0) ctx->set_deadline(Clock::now() + timeout);
    return ctx;
  }

  /// kiln::Error for a failed call: "<server's message> (<CODE>)".
  [[noreturn]] void fail(const grpc::Status& s) const {
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      KILN_USER_ERROR() << "cannot reach kilnd at " << address_ << " (" << s.error_message() << ")";
    }
    KILN_USER_ERROR() << s.error_message() << " (" << code_name(s.error_code()) << ")"
                      << (s.error_code() == grpc::StatusCode::UNIMPLEMENTED
                              ? "; is " + address_ + " a kilnd that serves kiln.v1?"
                              : std::string());
  }
  void check(const grpc::Status& s) const {
    if (!s.ok()) fail(s);
  }

 private:
  std::string address_, token_;
  bool tls_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KilnService::Stub> stub_;
};

std::unique_ptr<Farm> connect(const Args& a) {
  auto farm = std::make_unique<Farm>(a);
  farm->connect();
  return farm;
}

// ---- watch ----------------------------------------------------------------------------------

/// Follows job `id` to its end; returns the exit code (0 when DONE).
int watch_job(Farm& farm, uint64_t id) {
  v1::GetJobRequest get;
  get.set_job_id(id);
  v1::Job job;
  farm.check(farm.stub().GetJob(farm.context().get(), get, &job));
  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  std::string last_line;
  v1::JobProgress last = job.progress();
  auto show = [&](const v1::JobProgress& p) {
    // A time limit counts from the job's start, which a job queued when the watch began lacks.
    if (job.time_limit_s() > 0 && job.started_ms() == 0 && p.state() != v1::JOB_STATE_QUEUED) {
      v1::Job now;
      if (farm.stub().GetJob(farm.context().get(), get, &now).ok()) job = now;
    }
    *job.mutable_progress() = p;
    std::ostringstream line;
    line << "job " << id << " " << state_name(p.state()) << "  tasks " << p.tasks_done() << "/"
         << p.tasks_total() << "  trials " << p.trials_done();
    if (job.budget() > 0) line << "/" << job.budget();
    line << " (" << p.trials_failed() << " failed)";
    if (job.time_limit_s() > 0) {
      line << "  time " << duration_text(kiln::rpc::limited_seconds_elapsed(job, now_ms())) << "/"
           << duration_text(job.time_limit_s());
    }
    line << "  best " << (p.best_latency_s() > 0 ? best_ms(p.best_latency_s()) + " ms" : "-")
         << "  " << bar(kiln::rpc::job_progress(job, now_ms()), 20);
    // What the job's driver is doing, cut to keep the line on one terminal row.
    if (p.state() == v1::JOB_STATE_RUNNING && !p.phase().empty())
      line << "  " << (p.phase().size() > 40 ? p.phase().substr(0, 37) + "..." : p.phase());
    if (line.str() == last_line) return;  // nothing new to draw
    last_line = line.str();
    std::cout << (tty ? "\r\033[K" : "") << last_line << (tty ? "" : "\n") << std::flush;
  };
  show(last);

  int retries = 0;
  while (!finished(last.state())) {
    v1::WatchJobRequest req;
    req.set_job_id(id);
    auto ctx = farm.context(std::chrono::seconds(0));  // a job may run for hours
    auto reader = farm.stub().WatchJob(ctx.get(), req);
    v1::JobProgress p;
    bool got = false;
    while (reader->Read(&p)) {
      last = p;
      got = true;
      show(p);
    }
    const grpc::Status s = reader->Finish();
    if (got) retries = 0;
    if (s.ok() && finished(last.state())) break;
    if (!s.ok() && s.error_code() != grpc::StatusCode::UNAVAILABLE) {
      if (tty) std::cout << "\n";
      farm.fail(s);
    }
    // The stream broke (kilnd restarting) or ended before the job did: ask again after a pause.
    if (++retries > kWatchRetries) {
      if (tty) std::cout << "\n";
      if (!s.ok()) farm.fail(s);
      KILN_USER_ERROR() << "the progress stream of job " << id << " keeps ending before the job "
                        << "does (last state " << state_name(last.state()) << ")";
    }
    const auto pause = std::chrono::milliseconds(std::min(4000, 250 << retries));
    std::cerr << (tty ? "\n" : "") << "lost the progress stream of job " << id << " ("
              << (s.ok() ? "it ended early" : s.error_message()) << "); retrying in "
              << pause.count() / 1000.0 << " s (" << retries << "/" << kWatchRetries << ")\n";
    std::this_thread::sleep_for(pause);
    try {
      farm.connect();
    } catch (const kiln::Error&) {
      // still down: the next attempt fails with UNAVAILABLE and counts as a retry
    }
  }
  if (tty) std::cout << "\n";

  farm.check(farm.stub().GetJob(farm.context().get(), get, &job));  // the final word, with error
  switch (last.state()) {
    case v1::JOB_STATE_DONE:
      std::cout << "job " << id << " done: best " << best_ms(last.best_latency_s())
                << " ms; fetch it with: kiln fetch " << id << "\n";
      return 0;
    case v1::JOB_STATE_FAILED:
      std::cerr << "error: job " << id
                << " failed: " << (job.error().empty() ? "(no reason given)" : job.error()) << "\n";
      return 1;
    default:
      std::cerr << "job " << id << " was cancelled"
                << (job.error().empty() ? "" : " (" + job.error() + ")") << "\n";
      return 1;
  }
}

// ---- fetch ----------------------------------------------------------------------------------

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

/// A file being written: removed when it goes away before commit() renamed it into place.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove(path_, ec);
    }
  }
  const std::string& path() const { return path_; }
  void commit(const std::string& to) {
    fs::rename(path_, to);
    path_.clear();
  }

 private:
  std::string path_;
};

int fetch_job(Farm& farm, uint64_t id, const std::string& out) {
  const std::string what = "job " + std::to_string(id);
  TempFile tmp(out + ".tmp");
  std::ofstream file(tmp.path(), std::ios::binary | std::ios::trunc);
  KILN_USER_CHECK(file.good()) << "cannot write '" << tmp.path() << "'";
  const bool tty = ::isatty(STDERR_FILENO) != 0;

  v1::FetchBundleRequest req;
  req.set_job_id(id);
  auto ctx = farm.context(std::chrono::seconds(0));  // a large bundle on a slow link takes long
  auto reader = farm.stub().FetchBundle(ctx.get(), req);
  v1::BundleChunk chunk;
  uint64_t received = 0, total = 0;
  bool first = true, ended = false;
  uint64_t hash = kiln::kFnv1a64Basis;  // FNV-1a of the bytes so far
  std::string problem;
  while (problem.empty() && reader->Read(&chunk)) {
    if (ended) {
      problem = "a chunk came after the last one";
    } else if (chunk.offset() != received) {
      problem = "chunk at offset " + std::to_string(chunk.offset()) + ", expected " +
                std::to_string(received) + " (a gap or an overlap)";
    } else if (!first && chunk.total_size() != total) {
      problem = "the total size changed from " + std::to_string(total) + " to " +
                std::to_string(chunk.total_size()) + " bytes";
    } else if (received + chunk.data().size() > chunk.total_size()) {
      problem =
          "chunks run past the total size of " + std::to_string(chunk.total_size()) + " bytes";
    }
    if (!problem.empty()) break;
    total = chunk.total_size();
    first = false;
    file.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    hash = kiln::fnv1a64(chunk.data().data(), chunk.data().size(), hash);
    received += chunk.data().size();
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s: %s / %s %s", what.c_str(), mib(received).c_str(),
                   mib(total).c_str(), bar(total ? double(received) / total : 1.0, 20).c_str());
    }
    if (chunk.last()) {
      ended = true;
      if (received != total) {
        problem = "the last chunk ends at " + std::to_string(received) + " bytes of " +
                  std::to_string(total);
      } else if (chunk.checksum() != hash) {
        problem = "checksum mismatch: the server says " + hex(chunk.checksum()) +
                  ", the received bytes hash to " + hex(hash);
      }
    }
  }
  if (tty && received > 0) std::fprintf(stderr, "\n");
  if (!problem.empty()) {
    ctx->TryCancel();  // stop the stream; the temp file goes with `tmp`
    reader->Finish();
    KILN_USER_ERROR() << "fetching the bundle of " << what << ": " << problem
                      << "; nothing written";
  }
  const grpc::Status s = reader->Finish();
  if (!s.ok()) farm.fail(s);
  KILN_USER_CHECK(ended) << "fetching the bundle of " << what << ": the stream ended after "
                         << received << " of " << total
                         << " bytes without its last chunk; nothing written";
  file.close();
  KILN_USER_CHECK(file.good()) << "cannot write '" << tmp.path() << "'";
  tmp.commit(out);
  std::cerr << "wrote " << out << " (" << received << " bytes, checksum " << hex(hash) << ")\n";
  return 0;
}

// ---- the commands' bodies ------------------------------------------------------------------

int submit_main(const Args& a) {
  const std::string& model = a.only_operand("MODEL.onnx");
  for (const char* flag : {"--target", "--device-key"}) {
    if (a.get(flag).empty()) throw UsageError(std::string("kiln submit needs ") + flag);
  }
  const TuningBudget budget = tuning_budget(a);
  if (!a.has("--trials") && !budget.scheduled()) {
    throw UsageError("kiln submit needs --trials (per task), --budget or --time");
  }
  const int trials =
      a.has("--trials") ? kiln::cli::positive_number(a.get("--trials"), "--trials") : 0;
  const long long priority = kiln::cli::whole_number(a.get("--priority", "0"), "--priority");
  if (priority < INT32_MIN || priority > INT32_MAX) {
    throw UsageError("--priority is out of range: '" + a.get("--priority") + "'");
  }
  std::error_code ec;
  const bool regular = fs::is_regular_file(model, ec);
  std::ifstream in(model, std::ios::binary);
  KILN_USER_CHECK(regular && in.good()) << "cannot read model '" << model << "'";
  const uint64_t size = fs::file_size(model);
  v1::SubmitModelRequest req;
  req.set_name(a.get("--name", fs::path(model).stem().string()));
  req.set_target(a.get("--target"));
  req.set_device_key(a.get("--device-key"));
  req.set_trials(static_cast<uint32_t>(trials));
  req.set_budget(static_cast<uint32_t>(budget.budget));
  req.set_time_limit_s(budget.time_s);
  if (budget.early_stop) req.set_early_stop(static_cast<uint32_t>(*budget.early_stop));
  req.set_priority(static_cast<int32_t>(priority));
  for (const auto& [name, dims] : input_shapes(a)) {
    v1::InputShape* shape = req.add_input_shapes();
    shape->set_name(name);
    for (int64_t d : dims) shape->add_dims(d);
  }
  const char* user = std::getenv("USER");
  req.set_owner(a.get("--owner", user ? user : ""));

  auto farm = connect(a);
  // The model goes in chunks, read from the file as they are sent; a big one shows its progress.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const bool show = tty && size >= kShowUploadBytes;
  const std::string what = fs::path(model).filename().string();
  v1::SubmitModelResponse resp;
  // No deadline: a big model on a slow link takes long (an unreachable kilnd failed above).
  auto ctx = farm->context(std::chrono::seconds(0));
  const grpc::Status st =
      kiln::rpc::submit_model(farm->stub(), *ctx, req, in, size, &resp, [&](uint64_t sent) {
        if (show) {
          std::fprintf(stderr, "\r\033[Kuploading %s: %s / %s %s", what.c_str(), mib(sent).c_str(),
                       mib(size).c_str(), bar(static_cast<double>(sent) / size, 20).c_str());
        }
      });
  if (show) std::fprintf(stderr, "\n");
  farm->check(st);
  std::cout << "submitted job " << resp.job_id() << "\n" << std::flush;
  return a.has("--watch") ? watch_job(*farm, resp.job_id()) : 0;
}

int jobs_main(const Args& a) {
  v1::ListJobsRequest req;
  req.set_owner(a.get("--owner"));
  for (const std::string& s : a.all("--state")) req.add_states(parse_state(s));
  auto farm = connect(a);
  v1::ListJobsResponse resp;
  farm->check(farm->stub().ListJobs(farm->context().get(), req, &resp));
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "OWNER", "MODEL", "TARGET", "KEY",
                                                 "BUDGET", "TASKS", "TRIALS", "FAILED", "BEST(ms)",
                                                 "AGE"}};
  for (const v1::Job& j : resp.jobs()) {
    const v1::JobProgress& p = j.progress();
    rows.push_back({std::to_string(j.id()), state_name(p.state()), j.owner(), j.model_name(),
                    j.target(), j.device_key(), budget_text(j),
                    std::to_string(p.tasks_done()) + "/" + std::to_string(p.tasks_total()),
                    std::to_string(p.trials_done()), std::to_string(p.trials_failed()),
                    best_ms(p.best_latency_s()), age(j.created_ms())});
  }
  print_table(rows);
  return 0;
}

int watch_main(const Args& a) {
  const uint64_t id = job_arg(a);
  auto farm = connect(a);
  return watch_job(*farm, id);
}

int fetch_main(const Args& a) {
  const uint64_t id = job_arg(a);
  const std::string out = a.get("-o", "job" + std::to_string(id) + ".kiln");
  auto farm = connect(a);
  return fetch_job(*farm, id, out);
}

int devices_main(const Args& a) {
  v1::ListDevicesRequest req;
  req.set_key(a.get("--key"));
  auto farm = connect(a);
  v1::ListDevicesResponse resp;
  farm->check(farm->stub().ListDevices(farm->context().get(), req, &resp));
  std::vector<std::vector<std::string>> rows = {
      {"ID", "KEY", "STATE", "TARGET", "BOARD", "CPU", "CORES", "MEMORY", "DONE", "IN_FLIGHT"}};
  for (const v1::DeviceInfo& d : resp.devices()) {
    std::string state = d.state();
    if (!d.quarantine_reason().empty()) state += " (" + d.quarantine_reason() + ")";
    const v1::DeviceCapabilities& c = d.capabilities();
    // An emulated agent's board says so already ("qemu-user on ..."); one told by --emulator
    // alone is marked here.
    std::string board = c.board().empty() ? "-" : c.board();
    if (c.emulated() && board.find("qemu") == std::string::npos) board += " (emulated)";
    std::string cpu = c.cpu_model().empty() ? d.fingerprint() : c.cpu_model();
    char memory[32] = "-";
    if (c.memory_bytes() > 0)
      std::snprintf(memory, sizeof memory, "%.1f GiB", c.memory_bytes() / double(1 << 30));
    rows.push_back({std::to_string(d.device_id()), d.key(), state, d.target(), board, cpu,
                    c.cores() ? std::to_string(c.cores()) : "-", memory,
                    std::to_string(d.completed()), std::to_string(d.in_flight())});
  }
  print_table(rows);
  return 0;
}

int cancel_main(const Args& a) {
  const uint64_t id = job_arg(a);
  v1::CancelJobRequest req;
  req.set_job_id(id);
  req.set_reason(a.get("--reason"));
  auto farm = connect(a);
  v1::Job job;
  farm->check(farm->stub().CancelJob(farm->context().get(), req, &job));
  std::cout << "job " << id << " is " << state_name(job.progress().state()) << "\n";
  return 0;
}

}  // namespace

void print_table(std::vector<std::vector<std::string>> rows) {
  std::vector<size_t> width;
  for (auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (row[c].empty()) row[c] = "-";
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// ---- the commands -----------------------------------------------------------------------------

const kiln::cli::Command& submit_command() {
  static const kiln::cli::Command c{
      .name = "submit",
      .operands = "MODEL.onnx",
      .summary = "submit a model to be tuned on the farm's devices of one key",
      .flags = with_farm_flags(
          {{"--target", "T", "what to tune for, e.g. 'llvm -mcpu=znver4' (required)"},
           {"--device-key", "KEY",
            "the devices that measure it (required; kiln devices lists them)"},
           {"--trials", "N",
            "configs per task (required without --budget/--time; with them, a cap)"},
           kBudgetFlag,
           kTimeFlag,
           kEarlyStopFlag,
           {"--name", "NAME", "the job's name (default: the model's file name)"},
           {"--priority", "P", "higher runs first (default: 0)"},
           {"--owner", "O", "whose job it is (default: $USER)"},
           {"--watch", "", "follow the job to its end, as kiln watch does"},
           kInputShapeFlag}),
      .notes = std::string("Prints the job's id. The model is uploaded in 1 MiB chunks, read "
                           "from the file as they go (any size up to the farm's "
                           "--max-model-bytes), with progress on a terminal for big ones. The "
                           "farm checks that the model imports (with its --input-shape bindings) "
                           "before it takes the job. With --budget or --time the farm tunes as "
                           "kiln tune does: every task gets a first round, then each round goes "
                           "where the model's estimated latency drops most (a task gets none "
                           "after --early-stop K trials without a 1% gain, nor past --trials); "
                           "the budget counts "
                           "the farm's record log (what earlier jobs measured of the same tasks), "
                           "the time runs from the job's start (retries included). ") +
               kFarmNotes,
      .main = submit_main,
      .group = kFarmGroup,
  };
  return c;
}

const kiln::cli::Command& jobs_command() {
  static const kiln::cli::Command c{
      .name = "jobs",
      .operands = "",
      .summary = "list the farm's jobs with their progress",
      .flags = with_farm_flags(
          {{"--owner", "O", "only this owner's jobs (default: everyone's)"},
           {"--state", "S",
            "queued, running, done, failed or cancelled; repeatable (default: all states)"}}),
      .notes = kFarmNotes,
      .main = jobs_main,
      .group = kFarmGroup,
  };
  return c;
}

const kiln::cli::Command& watch_command() {
  static const kiln::cli::Command c{
      .name = "watch",
      .operands = "JOB",
      .summary = "follow a job's progress until it ends",
      .flags = with_farm_flags({}),
      .notes =
          "Exit codes: 0 when the job ends done; 1 when it fails, is cancelled or a call "
          "fails; 2 for a mistake on the command line. A progress stream that breaks (a "
          "kilnd restart) is opened again, with a pause growing up to 4 s.",
      .main = watch_main,
      .group = kFarmGroup,
  };
  return c;
}

const kiln::cli::Command& fetch_command() {
  static const kiln::cli::Command c{
      .name = "fetch",
      .operands = "JOB",
      .summary = "download a finished job's tuned bundle",
      .flags = with_farm_flags({{"-o", "FILE", "the bundle to write (default: job<JOB>.kiln)"}}),
      .notes = std::string("The file appears only once every chunk has arrived and the checksum "
                           "matches. ") +
               kFarmNotes,
      .main = fetch_main,
      .group = kFarmGroup,
  };
  return c;
}

const kiln::cli::Command& devices_command() {
  static const kiln::cli::Command c{
      .name = "devices",
      .operands = "",
      .summary = "list the farm's devices: key, state, target, work done",
      .flags = with_farm_flags({{"--key", "KEY", "only devices of this key (default: all)"}}),
      .notes = kFarmNotes,
      .main = devices_main,
      .group = kFarmGroup,
  };
  return c;
}

const kiln::cli::Command& cancel_command() {
  static const kiln::cli::Command c{
      .name = "cancel",
      .operands = "JOB",
      .summary = "cancel a job",
      .flags = with_farm_flags({{"--reason", "R", "why, shown with the job (default: none)"}}),
      .notes = kFarmNotes,
      .main = cancel_main,
      .group = kFarmGroup,
  };
  return c;
}
