// kiln-tuner: a farm job's driver, started by kilnd for each running job (and with --check for
// each submission), so that a user's model is only ever read in a process that may crash. Its
// exit status tells kilnd what happened (rpc/driver_contract.h).
//
//   kiln-tuner --server 127.0.0.1:7070 --job 7 [--tls-ca F] [--memory-limit-mb N]
//       (environment: KILN_DRIVER_SECRET from kilnd, KILN_TOKEN when the farm has a token)
//   kiln-tuner --check MODEL.onnx [--input-shape NAME=D0,D1,...]... [--memory-limit-mb N]
#include <sys/resource.h>

#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/parent_death.h"
#include "compiler/graph/onnx_frontend.h"
#include "rpc/channel.h"
#include "rpc/driver_contract.h"
#include "tuner/job_driver.h"

namespace {

using namespace kiln;

int usage(std::ostream& os, int code) {
  os << "usage: kiln-tuner --server HOST:PORT --job ID [--tls-ca FILE] [--memory-limit-mb N]\n"
        "       kiln-tuner --check MODEL.onnx [--input-shape NAME=D0,D1,...]... [--memory-limit-mb "
        "N]\n"
        "Drives one farm job (started by kilnd, which sets KILN_DRIVER_SECRET): imports the\n"
        "model, extracts its tasks, tunes them through kilnd and uploads the bundle. --check only\n"
        "imports and validates a model. Exit status: 0 done, 1 failed (try again), 2 the model\n"
        "cannot be compiled, 3 a compiler bug on this model, 4 out of memory, 5 stopped.\n";
  return code;
}

/// Reports the model's fault or a compiler bug to kilnd (best effort) before exiting with it.
int report(tuner::FarmClient* client, int code, const std::string& message) {
  std::cerr << "error: " << message << std::endl;
  if (client != nullptr) {
    try {
      kiln::v1::DriverProgress p;
      p.set_error(message);
      client->progress(std::move(p));
    } catch (...) {
      // kilnd reads the message from this process's log instead.
    }
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  die_with_parent_from_env();
  std::string server, tls_ca, check;
  graph::OnnxImportOptions import;  // --input-shape, for --check (a job's come with the job)
  uint64_t job = 0;
  uint64_t memory_mb = 0;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return usage(std::cout, 0);
    if (i + 1 >= args.size()) {
      std::cerr << "error: unknown or incomplete option '" << a << "'\n";
      return usage(std::cerr, 64);
    }
    const std::string& v = args[++i];
    char* end = nullptr;
    if (a == "--server") {
      server = v;
    } else if (a == "--tls-ca") {
      tls_ca = v;
    } else if (a == "--check") {
      check = v;
    } else if (a == "--input-shape") {
      try {
        auto shape = graph::parse_input_shape(v);
        if (!import.input_shapes.emplace(shape.first, shape.second).second) {
          std::cerr << "error: --input-shape gives input '" << shape.first << "' twice\n";
          return 64;
        }
      } catch (const kiln::Error& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 64;
      }
    } else if (a == "--job" || a == "--memory-limit-mb") {
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0') {
        std::cerr << "error: " << a << " needs a number, got '" << v << "'\n";
        return 64;
      }
      (a == "--job" ? job : memory_mb) = n;
    } else {
      std::cerr << "error: unknown option '" << a << "'\n";
      return usage(std::cerr, 64);
    }
  }
  if (check.empty() && (server.empty() || job == 0)) return usage(std::cerr, 64);
  if (memory_mb > 0) {
    const rlim_t bytes = static_cast<rlim_t>(memory_mb) << 20;
    const rlimit limit{bytes, bytes};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) {
      std::perror("kiln-tuner: setrlimit");
      return rpc::kDriverFailed;
    }
  }

  std::unique_ptr<tuner::FarmClient> client;
  try {
    if (!check.empty()) {
      tuner::maybe_inject_fault(check, "importing the model");
      const graph::Graph g = graph::import_onnx(check, import);
      std::cout << "ok: " << g.nodes().size() << " nodes\n";
      return rpc::kDriverDone;
    }
    const char* secret = std::getenv(rpc::kDriverSecretEnv);
    if (secret == nullptr || *secret == '\0') {
      std::cerr << "error: kiln-tuner is started by kilnd (" << rpc::kDriverSecretEnv
                << " is not set)\n";
      return 64;
    }
    client = std::make_unique<tuner::FarmClient>(server, tls_ca, rpc::read_token(""), job, secret);
    tuner::JobDriver(*client).run();
    return rpc::kDriverDone;
  } catch (const tuner::Stopped& s) {
    std::cerr << "kiln-tuner: stopped: " << s.why << std::endl;
    return rpc::kDriverStopped;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory (limit " << memory_mb << " MiB)" << std::endl;
    return rpc::kDriverOutOfMemory;
  } catch (const Error& e) {
    return report(client.get(), rpc::kDriverUserError, e.what());
  } catch (const InternalError& e) {
    return report(client.get(), rpc::kDriverInternal, e.what());
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
    return rpc::kDriverFailed;
  }
}
