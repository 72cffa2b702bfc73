// kiln-agent: the program a board of the farm runs (see agent.h).
//   kiln-agent --tracker HOST:PORT --key KEY --target T [--token-file F] [--tls-ca F]
//              [--fingerprint S] [--threads N] [--runner PATH] [--work-dir D] [--emulator CMD]
// SIGINT and SIGTERM stop it (exit 0); a refused registration prints "error: ..." and exits 1; a
// bad command line exits 2.

#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "base/error.h"
#include "base/parent_death.h"
#include "base/stop_signals.h"
#include "device_agent/agent.h"
#include "rpc/channel.h"

namespace {

constexpr char kUsage[] =
    "usage: kiln-agent --tracker HOST:PORT --key KEY --target TARGET [--token-file FILE]\n"
    "                  [--tls-ca FILE] [--fingerprint TEXT] [--threads N] [--runner PATH]\n"
    "                  [--work-dir DIR] [--emulator CMD]\n"
    "  --tracker      the tracker's address (kilnd's tracker port)\n"
    "  --key          the device key measure requests are matched by (e.g. rk3399)\n"
    "  --target       the target string this board runs (cuda / opencl: its GPU; vdla: the\n"
    "                 VDLA's simulator and cycle model, run by kiln-runner)\n"
    "  --token-file   file whose first line is the farm's token (default: $KILN_TOKEN)\n"
    "  --tls-ca       CA certificate (PEM) to reach the tracker over TLS\n"
    "  --fingerprint  the board's identity in records (default: CPU model and core count; the\n"
    "                 GPU's or the VDLA's description)\n"
    "  --threads      kernel threads when a request leaves it to the device (default: all)\n"
    "  --runner       the kiln-runner executable (default: beside kiln-agent, or $KILN_RUNNER)\n"
    "  --work-dir     folder for kernels and inputs (default: a temporary one)\n"
    "  --emulator     the emulator this agent runs under, as a command (e.g. "
    "\"qemu-aarch64-static\n"
    "                 -L /usr/aarch64-linux-gnu\"): the agent reports itself emulated (its\n"
    "                 records are kept apart from real boards') and starts kiln-runner through\n"
    "                 it; without it, emulation is still found from /proc/cpuinfo\n";

int usage_error(const std::string& msg) {
  std::cerr << "error: " << msg << "\n" << kUsage;
  return 2;
}

std::string without_prefix(std::string msg) {
  if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
  return msg;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::die_with_parent_from_env();
  std::map<std::string, std::string> flags;
  const std::map<std::string, bool> known = {{"--tracker", true},   {"--key", true},
                                             {"--target", true},    {"--token-file", false},
                                             {"--tls-ca", false},   {"--fingerprint", false},
                                             {"--threads", false},  {"--runner", false},
                                             {"--work-dir", false}, {"--emulator", false}};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (!known.count(arg)) return usage_error("unknown flag '" + arg + "'");
    if (!has_value) {
      if (i + 1 >= argc) return usage_error(arg + " needs a value");
      value = argv[++i];
    }
    flags[arg] = value;
  }
  for (const auto& [flag, required] : known) {
    if (required && flags[flag].empty()) return usage_error("missing required flag " + flag);
  }

  kiln::agent::AgentOptions options;
  options.tracker = flags["--tracker"];
  options.key = flags["--key"];
  options.target = flags["--target"];
  options.tls_ca = flags["--tls-ca"];
  options.fingerprint = flags["--fingerprint"];
  options.runner = flags["--runner"];
  options.work_dir = flags["--work-dir"];
  {
    std::istringstream words(flags["--emulator"]);
    for (std::string w; words >> w;) options.emulator.push_back(w);
  }
  if (!flags["--threads"].empty()) {
    try {
      size_t used = 0;
      options.threads = std::stoi(flags["--threads"], &used);
      if (used != flags["--threads"].size() || options.threads < 0) throw std::exception();
    } catch (const std::exception&) {
      return usage_error("--threads needs a count (0 or more), got '" + flags["--threads"] + "'");
    }
  }

  kiln::StopSignals signals;  // before any thread starts
  try {
    options.token = kiln::rpc::read_token(flags["--token-file"]);
    kiln::agent::Agent agent(std::move(options));
    signals.watch([&](const char* name) {
      std::cerr << "kiln-agent: " << name << ", stopping\n";
      agent.stop();
    });
    agent.run();
  } catch (const std::exception& e) {
    std::cerr << "error: " << without_prefix(e.what()) << "\n";
    return 1;
  }
  return 0;
}
