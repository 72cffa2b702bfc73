// kiln-tuner: a farm job's driver, started by kilnd for each running job (and with --check for
// each submission), so that a user's model is only ever read in a process that may crash. Its
// exit status tells kilnd what happened (rpc/driver_contract.h).
//
//   kiln-tuner --server 127.0.0.1:7070 --job 7 [--tls-ca F] [--memory-limit-mb N]
//       (environment: KILN_DRIVER_SECRET from kilnd, KILN_TOKEN when the farm has a token)
//   kiln-tuner --check MODEL.onnx [--name NAME] [--input-shape NAME=D0,D1,...]...
//              [--memory-limit-mb N]
// A mistake on the command line exits 64, not 2: 2 says the model cannot be compiled.
#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/error.h"
#include "base/parent_death.h"
#include "base/stack_overflow.h"
#include "compiler/graph/onnx_frontend.h"
#include "rpc/channel.h"
#include "rpc/driver_contract.h"
#include "tuner/job_driver.h"

namespace {

using namespace kiln;

const cli::Program kTuner{
    .name = "kiln-tuner",
    .summary =
        "Drives one farm job (started by kilnd, which sets KILN_DRIVER_SECRET): imports the "
        "model, extracts its tasks, tunes them through kilnd and uploads the bundle.",
    .flags = {{"--server", "HOST:PORT", "kilnd's gRPC address (required without --check)"},
              {"--job", "ID", "the job to drive (required without --check)"},
              {"--tls-ca", "FILE", "reach kilnd over TLS, trusting this CA (default: plaintext)"},
              {"--check", "MODEL.onnx",
               "only import and validate this model (default: drive a job)"},
              {"--name", "NAME",
               "with --check, the model as its messages name it (default: the file's path; kilnd "
               "gives the name the client sent, never a path on the server)"},
              {"--input-shape", "NAME=D0,D1,...",
               "with --check: the shape of a symbolic input; once per input (default: none)"},
              {"--memory-limit-mb", "N", "this process's address space, 0 no limit (default: 0)"}},
    .notes =
        "Exit status: 0 done, 1 failed (try again), 2 the model cannot be compiled, 3 a "
        "compiler bug on this model, 4 out of memory, 5 stopped, 6 the compiler overflowed its "
        "stack on this model, 64 a mistake on the command line.",
};

/// Reports the model's fault or a compiler bug to kilnd (best effort) before exiting with it.
int report(tuner::FarmClient* client, int code, std::string message) {
  if (message.rfind("error: ", 0) == 0) message.erase(0, 7);  // kiln::Error's own prefix
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

int drive(const cli::Args& args) {
  const std::string server = args.get("--server"), tls_ca = args.get("--tls-ca"),
                    check = args.get("--check"), name = args.get("--name", check);
  graph::OnnxImportOptions import;  // --input-shape, for --check (a job's come with the job)
  for (const std::string& v : args.all("--input-shape")) {
    std::pair<std::string, std::vector<int64_t>> shape;
    try {
      shape = graph::parse_input_shape(v);
    } catch (const kiln::Error& e) {
      std::string msg = e.what();
      if (msg.rfind("error: ", 0) == 0) msg.erase(0, 7);
      throw cli::UsageError(msg);
    }
    if (!import.input_shapes.emplace(shape.first, shape.second).second) {
      throw cli::UsageError("--input-shape gives input '" + shape.first + "' twice");
    }
  }
  const uint64_t job = args.has("--job") ? cli::number_at_least(args.get("--job"), "--job", 1) : 0;
  const uint64_t memory_mb =
      args.has("--memory-limit-mb")
          ? cli::number_at_least(args.get("--memory-limit-mb"), "--memory-limit-mb", 0)
          : 0;
  if (check.empty() && (server.empty() || job == 0)) {
    throw cli::UsageError("kiln-tuner needs --server and --job, or --check MODEL.onnx");
  }
  if (memory_mb > 0) {
    const rlim_t bytes = static_cast<rlim_t>(memory_mb) << 20;
    const rlimit limit{bytes, bytes};
    if (::setrlimit(RLIMIT_AS, &limit) != 0) {
      std::perror("kiln-tuner: setrlimit");
      return rpc::kDriverFailed;
    }
  }
  // A stack overflow is reported as one (exit 6), not as a bare SIGSEGV; the stack stopped short
  // by the address-space limit as running out of memory (exit 4).
  report_stack_overflow({"error: stack overflow: the compiler recursed too deep on this model\n",
                         rpc::kDriverStackOverflow,
                         "error: out of memory (the memory limit stopped the stack from growing)\n",
                         rpc::kDriverOutOfMemory});

  std::unique_ptr<tuner::FarmClient> client;
  try {
    if (!check.empty()) {
      tuner::maybe_inject_fault(check, "importing the model");  // the path: jobs' hooks miss it
      std::ifstream in(check, std::ios::binary);
      std::ostringstream bytes;
      bytes << in.rdbuf();
      KILN_SYSTEM_CHECK(in.good() || in.eof()) << "kiln-tuner: cannot read '" << check << "'";
      const graph::Graph g = graph::import_onnx_bytes(bytes.str(), name, import);
      std::cout << "ok: " << g.nodes().size() << " nodes\n";
      return rpc::kDriverDone;
    }
    const char* secret = std::getenv(rpc::kDriverSecretEnv);
    if (secret == nullptr || *secret == '\0') {
      std::cerr << "error: kiln-tuner is started by kilnd (" << rpc::kDriverSecretEnv
                << " is not set)\n";
      return rpc::kDriverBadCommandLine;
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

}  // namespace

int main(int argc, char** argv) {
  die_with_parent_from_env();
  return cli::run(kTuner, argc, argv, drive, rpc::kDriverBadCommandLine);
}
