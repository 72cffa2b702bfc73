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
#include <vector>

#include "base/error.h"
#include "base/stop_signals.h"
#include "rpc/channel.h"
#include "server/dashboard.h"
#include "server/farm.h"
#include "server/http_server.h"
#include "server/local_sides.h"
#include "server/services.h"

namespace {

int usage(std::ostream& os, int code) {
  os << "usage: kilnd [--listen HOST:PORT] [--http HOST:PORT] [--state DIR] [--records DIR]\n"
        "             [--token-file F] [--tls-cert F --tls-key F [--tls-ca F]]\n"
        "             [--local-workers N] [--local-agent KEY] [--local-agent-target T]\n"
        "             [--lease-ms N] [--max-model-bytes N] [--max-running-jobs N]\n"
        "             [--submits-per-minute N] [--batch N] [--explorer E] [--repeat N]\n"
        "             [--run-timeout-ms N] [--threads N] [--driver-memory-mb N]\n"
        "             [--driver-idle-timeout-s N] [--driver-tries N]\n"
        "  --listen: gRPC address (default 127.0.0.1:7070; port 0 picks a free one)\n"
        "  --http: the dashboard (/), its JSON API (/api/v1/) and /metrics (default "
        "127.0.0.1:7071;\n"
        "          port 0 picks a free one)\n"
        "  --state: jobs, models and bundles (default kiln-state); --records: the record log\n"
        "           (default STATE/records)\n"
        "  --token-file: the farm's token (else $KILN_TOKEN; none: no token is asked for)\n"
        "  --tls-ca: the CA the in-process worker and agent trust to reach kilnd (default: the\n"
        "            certificate itself, which fits a self-signed one)\n"
        "  --local-workers, --local-agent: compiler workers and a CPU agent started by kilnd\n"
        "            (kiln-worker and kiln-agent child processes, restarted when they end)\n"
        "  --driver-memory-mb: address space of each job driver (default 8192; 0: no limit)\n"
        "  --driver-idle-timeout-s: a job driver silent this long is killed (default 600)\n"
        "  --driver-tries: crashed, hung or out-of-memory driver tries before a job fails\n"
        "            (default 2)\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  std::string listen = "127.0.0.1:7070", http = "127.0.0.1:7071", token_file, tls_cert, tls_key,
              tls_ca;
  std::string local_agent, local_agent_target = "llvm -mcpu=native";
  int local_workers = 0;
  server::FarmOptions farm_opts;
  farm_opts.state_dir = "kiln-state";
  server::KilnServiceOptions service_opts;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return usage(std::cout, 0);
    if (a.rfind("--", 0) != 0) {
      std::cerr << "error: unexpected argument '" << a << "'\n";
      return usage(std::cerr, 2);
    }
    if (i + 1 >= args.size()) {
      std::cerr << "error: " << a << " needs a value\n";
      return 2;
    }
    const std::string& v = args[++i];
    auto number = [&](long min) {
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < min) {
        std::cerr << "error: " << a << " needs a number >= " << min << ", got '" << v << "'\n";
        std::exit(2);
      }
      return n;
    };
    if (a == "--listen")
      listen = v;
    else if (a == "--http")
      http = v;
    else if (a == "--state")
      farm_opts.state_dir = v;
    else if (a == "--records")
      farm_opts.records_dir = v;
    else if (a == "--token-file")
      token_file = v;
    else if (a == "--tls-cert")
      tls_cert = v;
    else if (a == "--tls-key")
      tls_key = v;
    else if (a == "--tls-ca")
      tls_ca = v;
    else if (a == "--local-workers")
      local_workers = static_cast<int>(number(0));
    else if (a == "--local-agent")
      local_agent = v;
    else if (a == "--local-agent-target")
      local_agent_target = v;
    else if (a == "--lease-ms")
      farm_opts.tracker.registry.lease = std::chrono::milliseconds(number(100));
    else if (a == "--max-model-bytes")
      farm_opts.max_model_bytes = static_cast<uint64_t>(number(1));
    else if (a == "--max-running-jobs")
      farm_opts.max_running_jobs = static_cast<int>(number(1));
    else if (a == "--submits-per-minute")
      service_opts.submits_per_minute = static_cast<int>(number(1));
    else if (a == "--batch")
      farm_opts.batch = static_cast<int>(number(1));
    else if (a == "--explorer")
      farm_opts.explorer = v;
    else if (a == "--repeat")
      farm_opts.repeat = static_cast<uint32_t>(number(1));
    else if (a == "--run-timeout-ms")
      farm_opts.run_timeout_ms = static_cast<uint32_t>(number(1));
    else if (a == "--threads")
      farm_opts.threads = static_cast<uint32_t>(number(0));
    else if (a == "--driver-memory-mb")
      farm_opts.driver.memory_limit_mb = static_cast<uint32_t>(number(0));
    else if (a == "--driver-idle-timeout-s")
      farm_opts.driver.idle_timeout = std::chrono::seconds(number(1));
    else if (a == "--driver-tries")
      farm_opts.driver.max_tries = static_cast<int>(number(1));
    else {
      std::cerr << "error: unknown option '" << a << "'\n";
      return usage(std::cerr, 2);
    }
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
