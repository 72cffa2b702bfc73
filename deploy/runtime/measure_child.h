// Measuring a kernel in a guarded child process: measure_in_child starts `kiln-runner`
// (runner_main.cc) with posix_spawn, writes the request (kernel_runner.h) to its stdin and reads
// one JSON result line from its stdout before a deadline. A kernel that hangs is killed (SIGKILL)
// at the deadline -> kRunTimeout; a kernel that crashes the child -> kCrash naming the signal
// ("SIGSEGV"); a child that exits without a result -> kRuntimeError with the tail of its stderr.
// None of these throw: a failing kernel is a result, never fatal to the caller.
//
// The child is always reaped before measure_in_child returns (no zombies), and it asks the kernel
// to kill it if the calling thread dies first (PR_SET_PDEATHSIG; no orphans). stdout and stderr
// are read together with poll(), so a child that writes more than a pipe buffer cannot deadlock.
// Safe to call from several threads at once (each call has its own child and pipes).
#pragma once

#include <string>
#include <vector>

#include "deploy/runtime/kernel_runner.h"

namespace kiln::runtime {

/// Where the runner is: the environment variable KILN_RUNNER if set, else `kiln-runner` beside
/// this executable (/proc/self/exe) if it exists there, else the one in the build tree this
/// runtime was built in. The path returned may not exist; measure_in_child checks it.
std::string default_runner_path();

/// Runs `request` in a child running `runner_path`, killing it after `timeout_s` seconds. Throws
/// kiln::Error (naming the path) only when the runner is missing or not executable, or the child
/// cannot be started; every failure of the kernel is a RunResult. wall_s is the child's life time.
/// `launcher`, when not empty, is the command the runner is started through (an emulator:
/// {"qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"} for an agent that runs under qemu-user
/// on a machine without binfmt_misc); its first word is looked up in PATH.
RunResult measure_in_child(const RunRequest& request, double timeout_s,
                           const std::string& runner_path = default_runner_path(),
                           const std::vector<std::string>& launcher = {});

/// The same with the request as JSON text, sent as it is (for tests of malformed requests, and
/// for agents that forward a request they received).
RunResult measure_in_child_json(const std::string& request_json, double timeout_s,
                                const std::string& runner_path = default_runner_path(),
                                const std::vector<std::string>& launcher = {});

/// "SIGSEGV" for SIGSEGV, ..., "signal 42" for one without a name here.
std::string signal_name(int signo);

}  // namespace kiln::runtime
