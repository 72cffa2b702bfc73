// The dashboard's JSON API under a big job: one process holds a server::Farm (temporary state
// folder, not started: the job stays as built here) and kilnd's HttpServer with the Dashboard on
// 127.0.0.1:<free port>. The job's tasks get --records records in all (appended to the farm's
// record log directly, from several threads so they share syncs; about 10% of them errors), and
// the job's task keys point at them (Farm::update_job). Then GET /api/v1/jobs/<id> is timed over
// loopback, each request on a new connection, as the page does it.
//
//   bench_dashboard [--records N (4000)] [--tasks T (4)] [--runs R (15)]
//
// Prints:
//   case=api_job records=<n> tasks=<t> ms=<median> p90_ms=<x> bytes=<response size>
// The goal of the issue: under 100 ms for a job with a few thousand records.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/cli.h"
#include "server/dashboard.h"
#include "server/farm.h"
#include "server/http_server.h"
#include "tests/common/model_stream.h"
#include "tests/common/small_cnn.h"
#include "tests/common/temp_dir.h"

namespace {

std::string get(int port, const std::string& path) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    throw std::runtime_error("cannot connect");
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    throw std::runtime_error("cannot send");
  }
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  if (resp.rfind("HTTP/1.1 200", 0) != 0)
    throw std::runtime_error("bad response: " + resp.substr(0, 300));
  return resp;
}

const kiln::cli::Program kBench{
    .name = "bench_dashboard",
    .summary = "Times kilnd's JSON API (GET /api/v1/jobs/<id>) for a job with many records.",
    .flags = {{"--records", "N", "records of the job, about 10% errors (default: 4000)"},
              {"--tasks", "T", "tasks the records are spread over (default: 4)"},
              {"--runs", "R", "timed requests (default: 15)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using namespace kiln;
  const size_t records =
      args.has("--records") ? cli::number_at_least(args.get("--records"), "--records", 0) : 4000;
  const size_t tasks =
      args.has("--tasks") ? cli::positive_number(args.get("--tasks"), "--tasks") : 4;
  const size_t runs = args.has("--runs") ? cli::positive_number(args.get("--runs"), "--runs") : 15;
  try {
    kiln::testing::TempDir dir("bench_dashboard");
    server::FarmOptions options;
    options.state_dir = dir.file("state");
    server::Farm farm(options);
    v1::RegisterDeviceRequest reg;
    reg.set_key("bench");
    reg.set_target("llvm");
    farm.register_device(reg);
    server::Submission submission;
    submission.name = "bench";
    submission.target = "llvm";
    submission.device_key = "bench";
    submission.owner = "bench";
    submission.trials = 10000;
    const tracker::JobId id =
        farm.submit(submission, kiln::testing::model_stream(kiln::testing::small_cnn_model()));
    std::vector<std::string> keys;
    for (size_t t = 0; t < tasks; ++t)
      keys.push_back("conv2d_nchw:1x64x56x56:bench" + std::to_string(t));

    // The records, from 16 threads (the record log commits concurrent appends together).
    const size_t threads = 16;
    std::vector<std::thread> pool;
    for (size_t w = 0; w < threads; ++w) {
      pool.emplace_back([&, w] {
        for (size_t i = w; i < records; i += threads) {
          records::MeasureRecord r;
          r.target = "llvm";
          r.device = "bench-device";
          r.task_key = keys[i % tasks];
          r.config_index = i;
          r.config = "tile_f=[1, 4, 8, 2], tile_y=[1, 1, 7, 8], tile_x=[1, 2, 28, 1], unroll=" +
                     std::to_string(i % 512);
          if (i % 10 == 7) {
            r.error = ErrorKind::kRunTimeout;
            r.error_msg = "the run took longer than 10000 ms";
          } else {
            const double s = 1e-3 * (1.0 + static_cast<double>((i * 7919) % 1000) / 100.0);
            r.costs_s = {s, s * 1.01, s * 1.02};
            r.gflops = 0.23 / s;
          }
          r.timestamp_ms = 1700000000000 + static_cast<int64_t>(i);
          farm.records().append(r);
        }
      });
    }
    for (auto& t : pool) t.join();
    farm.update_job(id, [&](tracker::JobRecord& j) {
      j.task_keys = keys;
      j.tasks_total = static_cast<uint32_t>(tasks);
      j.trials_done = records;
    });

    server::Dashboard dashboard(farm, "");
    server::HttpServer http;
    dashboard.install(http);
    const int port = http.start("127.0.0.1:0");
    const std::string path = "/api/v1/jobs/" + std::to_string(id);
    size_t bytes = get(port, path).size();  // warm-up
    std::vector<double> ms;
    for (size_t r = 0; r < runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      bytes = get(port, path).size();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("case=api_job records=%zu tasks=%zu ms=%.2f p90_ms=%.2f bytes=%zu\n", records,
                tasks, ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)], bytes);
    http.stop();
    farm.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dashboard: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
