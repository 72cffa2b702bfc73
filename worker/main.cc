// kiln-worker: a compiler worker of the farm (worker.h); `kiln-worker --help` lists its flags. It
// runs until SIGINT or SIGTERM (exit 0). A bad flag prints "error: ..." and exits with 2; the
// tracker refusing the worker (a wrong token) or any other failure exits with 1.

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "base/cli.h"
#include "base/error.h"
#include "base/parent_death.h"
#include "base/stop_signals.h"
#include "rpc/channel.h"
#include "worker/worker.h"

namespace {

const kiln::cli::Program kWorker{
    .name = "kiln-worker",
    .summary = "Takes builds from the farm's tracker, compiles them and reports the artifacts.",
    .flags = {{"--tracker", "HOST:PORT", "the tracker (kilnd's gRPC port)", true},
              {"--token-file", "F", "the farm's token, its first line (default: $KILN_TOKEN)"},
              {"--tls-ca", "F", "trust this CA (PEM) and use TLS (default: plaintext)"},
              {"--name", "ID", "this worker's id (default: <hostname>-<pid>)"},
              {"--batch", "N",
               "builds asked for at once (default: " +
                   std::to_string(kiln::worker::WorkerOptions{}.max_batch) + ")"},
              {"--threads", "N",
               "builds run at once, 0 one per CPU (default: " +
                   std::to_string(kiln::worker::WorkerOptions{}.threads) + ")"},
              {"--target", "T", "build only for target T; repeatable (default: any target)"}},
    .notes =
        "Runs until SIGINT or SIGTERM (exit 0). The tracker refusing the worker (a wrong "
        "token) or any other failure exits 1; a mistake on the command line exits 2.",
};

/// The value of the number flag `flag` in [min, 65536], or `fallback` when it is not given.
int number(const kiln::cli::Args& args, const std::string& flag, int min, int fallback) {
  if (!args.has(flag)) return fallback;
  const long long n = kiln::cli::number_at_least(args.get(flag), flag, min);
  if (n > (1 << 16)) {
    throw kiln::cli::UsageError(flag + " needs a whole number <= 65536, got '" + args.get(flag) +
                                "'");
  }
  return static_cast<int>(n);
}

int serve(const kiln::cli::Args& args) {
  kiln::worker::WorkerOptions options;
  options.tracker = args.get("--tracker");
  options.tls_ca = args.get("--tls-ca");
  options.name = args.get("--name");
  options.targets = args.all("--target");
  options.max_batch = number(args, "--batch", 1, options.max_batch);
  options.threads = number(args, "--threads", 0, options.threads);

  kiln::StopSignals signals;  // before any thread starts
  try {
    options.token = kiln::rpc::read_token(args.get("--token-file"));
    kiln::worker::Worker worker(options);
    signals.watch([&](const char* name) {
      std::cerr << "kiln-worker: " << name << ", stopping\n";
      worker.stop();
    });
    std::cerr << "kiln-worker: " << worker.name() << " taking builds from " << options.tracker
              << "\n";
    int code = 0;
    try {
      worker.run();
      std::cerr << "kiln-worker: stopped after " << worker.builds_done() << " builds\n";
    } catch (const std::exception& e) {
      code = kiln::cli::report(e);
    }
    // Builds abandoned at their time limit may still run in detached threads: do not wait.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  } catch (const std::exception& e) {
    return kiln::cli::report(e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  kiln::die_with_parent_from_env();
  return kiln::cli::run(kWorker, argc, argv, serve);
}
