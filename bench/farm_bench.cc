// The tracker under load on loopback: one process holds a server::Farm (its own record log in a
// temporary state folder), the Tracker gRPC service on 127.0.0.1:<free port>, and N simulated
// device agents, each a gRPC client of that port with its own thread (RegisterDevice, the GetWork
// stream, a fake run that sleeps --run-ms, ReportResult with costs). Measure requests are put in
// with Farm::enqueue_measure and topped up so that the queue never runs dry while timed. Leases
// are long, so the agents send no heartbeats.
//
//   bench_farm [--agents N,N,... (64,256)] [--seconds S (5)] [--warmup S (1)] [--run-ms R (1)]
//              [--channels C (16): TCP connections the agents share]
//
// Prints one line per agent count:
//   case=dispatch agents=<n> per_s=<x> p50_ms=<a> p99_ms=<b> records=<r> run_ms=<R>
// per_s: results accepted (each appended to the record log before it is acknowledged) per second
// over the timed window after the warm-up. p50/p99: the tracker's dispatch latency, as each agent
// sees it: from the moment it is free (its previous ReportResult returned, or it opened its stream)
// to the arrival of its next request, for requests arriving in the timed window. records: the
// record log's size at the end (every accepted result is a record). The goal of the issue: at
// least 5,000 dispatches per second with p99 under 20 ms (2 cores, 256 agents, 1 ms runs).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/cli.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "rpc/channel.h"
#include "server/farm.h"
#include "server/services.h"
#include "tests/common/temp_dir.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = kiln::v1;

constexpr const char* kKey = "bench";
constexpr const char* kTarget = "llvm";
constexpr int kTasks = 8;

struct Options {
  std::vector<int> agents = {64, 256};
  double seconds = 5;
  double warmup = 1;
  int run_ms = 1;
  int channels = 16;
};

/// What every agent shares.
struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<bool> timing{false};    ///< inside the timed window
  std::atomic<uint64_t> accepted{0};  ///< accepted results, all the run
  std::atomic<int> registered{0};
  std::mutex mu;
  std::vector<double> latencies_ms;  ///< of requests that arrived in the timed window
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// One simulated device agent: register, then take requests from the stream until told to stop.
void agent(int index, const std::shared_ptr<grpc::Channel>& channel, const Options& opt,
           Shared& shared) {
  auto stub = v1::Tracker::NewStub(channel);
  v1::RegisterDeviceRequest reg;
  reg.set_key(kKey);
  reg.set_target(kTarget);
  reg.set_fingerprint("bench-agent-" + std::to_string(index));
  v1::RegisterDeviceResponse reg_resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->RegisterDevice(&ctx, reg, &reg_resp);
    if (!s.ok()) {
      std::fprintf(stderr, "bench_farm: agent %d: RegisterDevice: %s\n", index,
                   s.error_message().c_str());
      std::exit(1);
    }
  }
  ++shared.registered;
  std::vector<double> mine;
  grpc::ClientContext ctx;
  v1::GetWorkRequest gw;
  gw.set_device_id(reg_resp.device_id());
  std::unique_ptr<grpc::ClientReader<v1::MeasureRequest>> reader = stub->GetWork(&ctx, gw);
  Clock::time_point free_since = Clock::now();
  v1::MeasureRequest work;
  while (!shared.stop && reader->Read(&work)) {
    if (shared.timing) mine.push_back(ms_between(free_since, Clock::now()));
    std::this_thread::sleep_for(std::chrono::milliseconds(opt.run_ms));  // the fake runner
    v1::MeasureResult res;
    res.set_request_id(work.request_id());
    res.set_device_id(reg_resp.device_id());
    for (int r = 0; r < 3; ++r) res.add_costs_s(1e-3 * (1 + (work.config().index() + r) % 7));
    res.set_run_ms(static_cast<uint32_t>(opt.run_ms));
    v1::ReportResultResponse ack;
    grpc::ClientContext rctx;
    grpc::Status s = stub->ReportResult(&rctx, res, &ack);
    if (s.ok() && ack.accepted()) ++shared.accepted;
    free_since = Clock::now();
  }
  ctx.TryCancel();
  reader->Finish();
  std::lock_guard<std::mutex> lock(shared.mu);
  shared.latencies_ms.insert(shared.latencies_ms.end(), mine.begin(), mine.end());
}

/// A small wire request, as a tuning batch would queue (without an artifact).
std::string payload(uint64_t config) {
  v1::MeasureRequest w;
  w.set_job_id(1);
  w.mutable_task()->set_task_key("bench_task_" + std::to_string(config % kTasks));
  w.mutable_task()->set_target(kTarget);
  w.mutable_task()->set_template_name("bench");
  w.mutable_config()->set_index(config);
  w.mutable_config()->set_text("tile=[" + std::to_string(config) + "]");
  w.set_device_key(kKey);
  w.mutable_options()->set_number(1);
  w.mutable_options()->set_repeat(3);
  return w.SerializeAsString();
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

void run_case(int agents, const Options& opt) {
  kiln::testing::TempDir state("kiln_bench_farm");
  kiln::server::FarmOptions fo;
  fo.state_dir = state.file("state");
  fo.tracker.registry.lease = std::chrono::minutes(10);  // no heartbeats needed
  kiln::server::Farm farm(fo);
  kiln::server::TrackerService service(farm, "");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "bench_farm: cannot listen on 127.0.0.1\n");
    std::exit(1);
  }
  farm.start();
  const std::string address = "127.0.0.1:" + std::to_string(port);

  // Separate connections: channels with different arguments share no subchannel.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < std::max(1, std::min(opt.channels, agents)); ++c) {
    grpc::ChannelArguments args;
    args.SetInt("kiln.bench.channel", c);
    channels.push_back(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }

  Shared shared;
  std::vector<std::thread> threads;
  for (int i = 0; i < agents; ++i) {
    threads.emplace_back(agent, i, std::cref(channels[static_cast<size_t>(i) % channels.size()]),
                         std::cref(opt), std::ref(shared));
  }
  while (shared.registered < agents) std::this_thread::sleep_for(std::chrono::milliseconds(5));

  // Keep a backlog: the queue must never run dry while timed.
  const uint64_t backlog = std::max<uint64_t>(4000, static_cast<uint64_t>(agents) * 16);
  uint64_t enqueued = 0;
  auto top_up = [&] {
    while (enqueued < shared.accepted + backlog) {
      kiln::tracker::MeasureSpec spec;
      spec.job_id = 1;
      spec.task_key = "bench_task_" + std::to_string(enqueued % kTasks);
      spec.config_index = enqueued;
      spec.target = kTarget;
      spec.device_key = kKey;
      spec.payload = payload(enqueued);
      spec.config_text = "tile=[" + std::to_string(enqueued) + "]";
      spec.flops = 1e6;
      farm.enqueue_measure(std::move(spec));
      ++enqueued;
    }
  };
  bool ran_dry = false;
  auto run_for = [&](double seconds) {
    const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
    while (Clock::now() < end) {
      if (enqueued <= shared.accepted + static_cast<uint64_t>(agents)) ran_dry = true;
      top_up();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  run_for(opt.warmup);
  const uint64_t accepted0 = shared.accepted;
  const auto t0 = Clock::now();
  shared.timing = true;
  ran_dry = false;
  run_for(opt.seconds);
  shared.timing = false;
  const uint64_t accepted1 = shared.accepted;
  const double window_s = std::chrono::duration<double>(Clock::now() - t0).count();

  shared.stop = true;
  farm.stop();  // ends every GetWork stream
  for (std::thread& t : threads) t.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server.reset();

  std::vector<double>& lat = shared.latencies_ms;
  const double p50 = percentile(lat, 0.50), p99 = percentile(lat, 0.99);
  std::printf(
      "case=dispatch agents=%d per_s=%.0f p50_ms=%.2f p99_ms=%.2f records=%zu run_ms=%d%s\n",
      agents, static_cast<double>(accepted1 - accepted0) / window_s, p50, p99,
      farm.records().size(), opt.run_ms, ran_dry ? " queue_ran_dry=1" : "");
  std::fflush(stdout);
}

const kiln::cli::Program kBench{
    .name = "bench_farm",
    .summary = "The tracker's dispatch rate and latency on loopback with simulated agents.",
    .flags = {{"--agents", "N,N,...", "the agent counts to run (default: 64,256)"},
              {"--seconds", "S", "seconds measured per case (default: 5)"},
              {"--warmup", "S", "seconds before measuring (default: 1)"},
              {"--run-ms", "R", "a simulated measurement's run time (default: 1)"},
              {"--channels", "C", "TCP connections the agents share (default: 16)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using namespace kiln::cli;
  kiln::rpc::prepare_server_process();
  Options opt;
  if (args.has("--agents")) opt.agents = positive_numbers(args.get("--agents"), "--agents");
  if (args.has("--seconds")) opt.seconds = real_at_least(args.get("--seconds"), "--seconds", 0);
  if (args.has("--warmup")) opt.warmup = real_at_least(args.get("--warmup"), "--warmup", 0);
  if (args.has("--run-ms"))
    opt.run_ms = static_cast<int>(number_at_least(args.get("--run-ms"), "--run-ms", 0));
  if (args.has("--channels")) opt.channels = positive_number(args.get("--channels"), "--channels");
  for (int n : opt.agents) run_case(n, opt);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
