// kiln-worker: a compiler worker of the farm (worker.h).
//   kiln-worker --tracker HOST:PORT [--token-file F] [--tls-ca F] [--name ID] [--batch N]
//               [--threads N] [--target T]...
// runs until SIGINT or SIGTERM (exit 0). A bad flag prints "error: ..." and exits with 2; the
// tracker refusing the worker (a wrong token) or any other failure exits with 1.

#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include "base/error.h"
#include "base/parent_death.h"
#include "base/stop_signals.h"
#include "rpc/channel.h"
#include "worker/worker.h"

namespace {

constexpr char kUsage[] =
    "usage: kiln-worker --tracker HOST:PORT [--token-file F] [--tls-ca F] [--name ID]\n"
    "                   [--batch N] [--threads N] [--target T]...\n"
    "Takes builds from the farm's tracker, compiles them and reports the artifacts.\n"
    "  --tracker HOST:PORT  the tracker (kilnd's tracker port)\n"
    "  --token-file F       the farm's token (first line of F; default $KILN_TOKEN)\n"
    "  --tls-ca F           trust this CA (PEM) and use TLS; plaintext without it\n"
    "  --name ID            this worker's id (default <hostname>-<pid>)\n"
    "  --batch N            builds asked for at once (default 4)\n"
    "  --threads N          builds run at once (default one per CPU)\n"
    "  --target T           build only for target T (repeatable; default any)\n";

int bad_usage(const std::string& msg) {
  std::cerr << "error: " << msg << "\n" << kUsage;
  return 2;
}

/// `text` as an int in [lo, hi], or nullopt.
std::optional<int> parse_int(const std::string& text, int lo, int hi) {
  try {
    size_t used = 0;
    const long v = std::stol(text, &used);
    if (used != text.size() || v < lo || v > hi) return std::nullopt;
    return static_cast<int>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

int main(int argc, char** argv) {
  kiln::die_with_parent_from_env();
  kiln::worker::WorkerOptions options;
  std::string token_file;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    const bool takes_value = flag == "--tracker" || flag == "--token-file" || flag == "--tls-ca" ||
                             flag == "--name" || flag == "--batch" || flag == "--threads" ||
                             flag == "--target";
    if (!takes_value) return bad_usage("unknown flag '" + flag + "'");
    if (i + 1 >= argc) return bad_usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--tracker") {
      options.tracker = value;
    } else if (flag == "--token-file") {
      token_file = value;
    } else if (flag == "--tls-ca") {
      options.tls_ca = value;
    } else if (flag == "--name") {
      options.name = value;
    } else if (flag == "--target") {
      options.targets.push_back(value);
    } else {
      const auto n = parse_int(value, flag == "--batch" ? 1 : 0, 1 << 16);
      if (!n)
        return bad_usage(flag + " needs a " + (flag == "--batch" ? "positive" : "non-negative") +
                         " number (got '" + value + "')");
      (flag == "--batch" ? options.max_batch : options.threads) = *n;
    }
  }
  if (options.tracker.empty()) return bad_usage("missing --tracker HOST:PORT");

  kiln::StopSignals signals;  // before any thread starts
  try {
    options.token = kiln::rpc::read_token(token_file);
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
      std::cerr << "error: " << e.what() << "\n";
      code = 1;
    }
    // Builds abandoned at their time limit may still run in detached threads: do not wait.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
