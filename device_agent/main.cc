// kiln-agent: the program a board of the farm runs (see agent.h); `kiln-agent --help` lists its
// flags. SIGINT and SIGTERM stop it (exit 0); a refused registration prints "error: ..." and exits
// 1; a bad command line exits 2.

#include <iostream>
#include <sstream>
#include <string>

#include "base/cli.h"
#include "base/error.h"
#include "base/parent_death.h"
#include "base/stop_signals.h"
#include "device_agent/agent.h"
#include "rpc/channel.h"

namespace {

const kiln::cli::Program kAgent{
    .name = "kiln-agent",
    .summary =
        "A board of the Kiln farm: registers with the tracker and measures the kernels it "
        "is sent.",
    .flags =
        {{"--tracker", "HOST:PORT", "the tracker's address (kilnd's gRPC port)", true},
         {"--key", "KEY", "the device key measure requests are matched by (e.g. rk3399)", true},
         {"--target", "TARGET",
          "the target this board runs (cuda / opencl: its GPU; vdla: the simulator)", true},
         {"--token-file", "FILE", "the farm's token, its first line (default: $KILN_TOKEN)"},
         {"--tls-ca", "FILE", "reach the tracker over TLS, trusting this CA (default: plaintext)"},
         {"--fingerprint", "TEXT",
          "the board's identity in records (default: the CPU, GPU or VDLA's description)"},
         {"--threads", "N", "kernel threads when a request leaves it to the device (default: all)"},
         {"--runner", "PATH", "the kiln-runner program (default: $KILN_RUNNER, else beside this)"},
         {"--work-dir", "DIR", "folder for kernels and inputs (default: a temporary one)"},
         {"--emulator", "CMD",
          "the emulator this agent runs under, a command (default: none; see below)"}},
    .notes =
        "--emulator names the emulator as a command (e.g. \"qemu-aarch64-static -L "
        "/usr/aarch64-linux-gnu\"): the agent reports itself emulated (its records are kept "
        "apart from real boards') and starts kiln-runner through it; without it, emulation is "
        "still found from /proc/cpuinfo. SIGINT or SIGTERM stops the agent (exit 0); a refused "
        "registration prints \"error: ...\" and exits 1; a mistake on the command line exits "
        "2.",
};

int serve(const kiln::cli::Args& args) {
  kiln::agent::AgentOptions options;
  options.tracker = args.get("--tracker");
  options.key = args.get("--key");
  options.target = args.get("--target");
  options.tls_ca = args.get("--tls-ca");
  options.fingerprint = args.get("--fingerprint");
  options.runner = args.get("--runner");
  options.work_dir = args.get("--work-dir");
  {
    std::istringstream words(args.get("--emulator"));
    for (std::string w; words >> w;) options.emulator.push_back(w);
  }
  if (args.has("--threads")) {
    options.threads =
        static_cast<int>(kiln::cli::number_at_least(args.get("--threads"), "--threads", 0));
  }

  kiln::StopSignals signals;  // before any thread starts
  try {
    options.token = kiln::rpc::read_token(args.get("--token-file"));
    kiln::agent::Agent agent(std::move(options));
    signals.watch([&](const char* name) {
      std::cerr << "kiln-agent: " << name << ", stopping\n";
      agent.stop();
    });
    agent.run();
  } catch (const std::exception& e) {
    return kiln::cli::report(e);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::die_with_parent_from_env();
  return kiln::cli::run(kAgent, argc, argv, serve);
}
