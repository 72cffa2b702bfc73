// kilnd: the farm's server. Hosts the public KilnService, the Tracker service and the JobDriver
// service on one gRPC port, /metrics, the dashboard page and its JSON API on an HTTP port, starts a
// job driver process (kiln-tuner) per running job, and optionally compiler workers and a local CPU
// agent as child processes (the embedded default: one command stands up a whole farm on this
// machine). kilnd itself never parses or compiles a user's model.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/cli.h"
#include "base/error.h"
#include "base/stop_signals.h"
#include "rpc/channel.h"
#include "server/dashboard.h"
#include "server/farm.h"
#include "server/http_server.h"
#include "server/local_sides.h"
#include "server/services.h"

namespace {

/// "(default: V)".
template <typename T>
std::string by_default(const T& v) {
  if constexpr (std::is_convertible_v<T, std::string>) {
    return "(default: " + std::string(v) + ")";
  } else {
    return "(default: " + std::to_string(v) + ")";
  }
}

/// kilnd's command line; the defaults are the options' own.
kiln::cli::Program kilnd_program() {
  using namespace std::chrono;
  const kiln::server::FarmOptions f;
  const kiln::server::KilnServiceOptions s;
  return {
      .name = "kilnd",
      .summary =
          "The Kiln farm's server: the public API, the tracker and the job drivers on one "
          "gRPC port; the dashboard, its JSON API and /metrics on an HTTP port.",
      .flags = {{"--listen", "HOST:PORT", "the gRPC address " + by_default("127.0.0.1:7070")},
                {"--http", "HOST:PORT",
                 "the dashboard (/), its JSON API (/api/v1/) and /metrics " +
                     by_default("127.0.0.1:7071")},
                {"--state", "DIR", "jobs, models and bundles " + by_default("kiln-state")},
                {"--records", "DIR", "the record log " + by_default("STATE/records")},
                {"--token-file", "F",
                 "the farm's token, its first line (default: $KILN_TOKEN, else none asked for)"},
                {"--tls-cert", "F", "serve TLS with this certificate, PEM (default: plaintext)"},
                {"--tls-key", "F", "the certificate's private key, PEM (default: none)"},
                {"--tls-ca", "F",
                 "the CA kilnd's own workers, agent and drivers trust (default: --tls-cert's)"},
                {"--local-workers", "N",
                 "compiler workers (kiln-worker) kilnd starts and restarts " + by_default(0)},
                {"--local-agent", "KEY",
                 "start a CPU agent (kiln-agent) with this device key (default: none)"},
                {"--local-agent-target", "T",
                 "the local agent's target " + by_default("llvm -mcpu=native")},
                {"--lease-ms", "N",
                 "a device silent this long is gone, >= 100 " +
                     by_default(duration_cast<milliseconds>(f.tracker.registry.lease).count())},
                {"--max-model-bytes", "N",
                 "larger models are refused " + by_default(f.max_model_bytes)},
                {"--max-running-jobs", "N", "jobs tuned at once " + by_default(f.max_running_jobs)},
                {"--submits-per-minute", "N",
                 "submissions accepted per minute " + by_default(s.submits_per_minute)},
                {"--batch", "N", "configs measured per round of a job " + by_default(f.batch)},
                {"--explorer", "E", "xgb, random, grid or ga " + by_default(f.explorer)},
                {"--repeat", "N", "measurements of each config " + by_default(f.repeat)},
                {"--run-timeout-ms", "N", "a kernel's time limit " + by_default(f.run_timeout_ms)},
                {"--threads", "N",
                 "kernel threads on a device, 0 all its CPUs " + by_default(f.threads)},
                {"--driver-memory-mb", "N",
                 "address space of each job driver, 0 no limit " +
                     by_default(f.driver.memory_limit_mb)},
                {"--driver-idle-timeout-s", "N",
                 "a job driver silent this long is killed " +
                     by_default(duration_cast<seconds>(f.driver.idle_timeout).count())},
                {"--driver-tries", "N",
                 "crashed, hung or out-of-memory driver tries before a job fails " +
                     by_default(f.driver.max_tries)}},
      .notes =
          "Port 0 in --listen or --http picks a free one; the ports taken are printed. "
          "--local-workers and --local-agent start kiln-worker and kiln-agent child "
          "processes, restarted when they end. SIGINT or SIGTERM stops kilnd (exit 0); a "
          "failure to start prints \"error: ...\" and exits 1; a mistake on the command line "
          "exits 2.",
  };
}

int serve(const kiln::cli::Args& args) {
  using namespace kiln;
  using cli::number_at_least;
  const std::string listen = args.get("--listen", "127.0.0.1:7070");
  const std::string http = args.get("--http", "127.0.0.1:7071");
  const std::string token_file = args.get("--token-file"), tls_cert = args.get("--tls-cert"),
                    tls_key = args.get("--tls-key"), tls_ca = args.get("--tls-ca");
  const std::string local_agent = args.get("--local-agent");
  const std::string local_agent_target = args.get("--local-agent-target", "llvm -mcpu=native");
  int local_workers = 0;
  server::FarmOptions farm_opts;
  farm_opts.state_dir = args.get("--state", "kiln-state");
  farm_opts.records_dir = args.get("--records");
  farm_opts.explorer = args.get("--explorer", farm_opts.explorer);
  server::KilnServiceOptions service_opts;
  // `field` = the flag's value (at least `min`) when it is given; else the options' default.
  auto number = [&](const std::string& flag, long long min, auto& field) {
    if (args.has(flag)) {
      field = static_cast<std::remove_reference_t<decltype(field)>>(
          number_at_least(args.get(flag), flag, min));
    }
  };
  number("--local-workers", 0, local_workers);
  number("--max-model-bytes", 1, farm_opts.max_model_bytes);
  number("--max-running-jobs", 1, farm_opts.max_running_jobs);
  number("--submits-per-minute", 1, service_opts.submits_per_minute);
  number("--batch", 1, farm_opts.batch);
  number("--repeat", 1, farm_opts.repeat);
  number("--run-timeout-ms", 1, farm_opts.run_timeout_ms);
  number("--threads", 0, farm_opts.threads);
  number("--driver-memory-mb", 0, farm_opts.driver.memory_limit_mb);
  number("--driver-tries", 1, farm_opts.driver.max_tries);
  if (args.has("--lease-ms")) {
    farm_opts.tracker.registry.lease =
        std::chrono::milliseconds(number_at_least(args.get("--lease-ms"), "--lease-ms", 100));
  }
  if (args.has("--driver-idle-timeout-s")) {
    farm_opts.driver.idle_timeout = std::chrono::seconds(
        number_at_least(args.get("--driver-idle-timeout-s"), "--driver-idle-timeout-s", 1));
  }

  StopSignals signals;  // before any thread starts
  rpc::prepare_server_process();

  try {
    const std::string token = rpc::read_token(token_file);
    service_opts.token = token;
    // The drivers and local sides reach kilnd through its own port, as remote ones do.
    const std::string trusted = tls_ca.empty() ? tls_cert : tls_ca;
    farm_opts.driver.token = token;
    farm_opts.driver.tls_ca = trusted;
    server::Farm farm(farm_opts);
    server::TrackerService tracker_service(farm, token);
    server::KilnService kiln_service(farm, service_opts);
    server::JobDriverService driver_service(farm, token);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(listen, rpc::server_credentials(tls_cert, tls_key), &port);
    // Models arrive in chunks (SubmitModel's stream), so no message is near a model's size.
    builder.SetMaxReceiveMessageSize(rpc::kMaxMessageBytes);
    builder.SetMaxSendMessageSize(rpc::kMaxMessageBytes);
    builder.RegisterService(&tracker_service);
    builder.RegisterService(&kiln_service);
    builder.RegisterService(&driver_service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    KILN_USER_CHECK(server && port > 0) << "kilnd: cannot listen on '" << listen << "'";
    // One HTTP server: /metrics, the dashboard and its API (which asks for the token when set).
    server::Dashboard dashboard(farm, token);
    server::HttpServer http_server;
    dashboard.install(http_server);
    const int http_port = http_server.start(http);
    const std::string host = listen.substr(0, listen.rfind(':'));
    const std::string grpc_address = host + ":" + std::to_string(port);
    // A wildcard address is not one to dial: children dial the loopback.
    const std::string dial_host = host == "0.0.0.0" ? "127.0.0.1" : host == "[::]" ? "[::1]" : host;
    const std::string dial_address = dial_host + ":" + std::to_string(port);
    farm.start(dial_address);
    server::LocalSides local(dial_address, token, trusted,
                             (std::filesystem::path(farm_opts.state_dir) / "sides").string());
    if (local_workers > 0) local.start_workers(local_workers);
    if (!local_agent.empty()) local.start_agent(local_agent, local_agent_target);
    std::cout << "kilnd listening grpc=" << grpc_address
              << " http=" << http.substr(0, http.rfind(':')) << ":" << http_port
              << " state=" << farm_opts.state_dir << std::endl;

    std::cerr << "kilnd: " << signals.wait() << ", stopping\n";
    local.stop();
    http_server.stop();
    farm.stop();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kilnd_program(), argc, argv, serve); }
