// kiln-runner: measures one compiled kernel, in a process of its own so that a kernel that crashes
// or hangs takes only this process down (measure_child.h starts it and watches it).
//
//   kiln-runner [--parent PID] < request.json
//
// stdin holds ONE request (kernel_runner.h, RunRequest::to_json):
//   {"version": 1, "library": "/path/k.so", "function": "name",
//    "args": [{"input": "/path/a.npy"},
//             {"output": {"dtype": "float32", "shape": [2, 3]},
//              "reference": "/path/ref.npy", "rtol": 1e-4, "atol": 1e-5}],
//    "number": 1, "repeat": 3, "min_repeat_ms": 100, "cooldown_ms": 0, "flush_cache": false,
//    "threads": 0, "disturbed_retry_ms": 2000}
// stdout gets ONE line: {"error": "none", "costs_s": [...], "number": N, "disturbed_repeats": D,
// "contended": false, ...} or
// {"error": "runtime_error" | "wrong_answer", "message": "..."}. The exit code is 0 whenever a
// result was written. The kernel's own writes to stdout go to stderr, so they cannot corrupt the
// result line. With --parent PID the runner dies (SIGKILL) when the thread that started it does,
// and exits at once if PID is no longer its parent.
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <iterator>
#include <string>

#include "base/cli.h"
#include "base/sanitizers.h"
#include "deploy/runtime/kernel_runner.h"

namespace {

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// A kernel that crashes must kill the runner by its signal, which the parent reports as the crash,
// also when the runner itself is built with AddressSanitizer or ThreadSanitizer (whose handlers
// would print a report and exit with a status instead).
#if KILN_ASAN
extern "C" const char* __asan_default_options() {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0";
}
#endif
#if KILN_TSAN
extern "C" const char* __tsan_default_options() {
  return "handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_sigill=0";
}
#endif

namespace {

const kiln::cli::Program kRunner{
    .name = "kiln-runner",
    .summary =
        "Measures one kernel: reads ONE request (JSON) on stdin, writes ONE result line on "
        "stdout (deploy/runtime/kernel_runner.h).",
    .flags = {{"--parent", "PID",
               "die (SIGKILL) with the thread that started it; exit 3 at once if PID is no "
               "longer the parent (default: live on)"}},
};

int measure(const kiln::cli::Args& args) {
  if (args.has("--parent")) {
    const long long parent = kiln::cli::whole_number(args.get("--parent"), "--parent");
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != static_cast<pid_t>(parent)) return 3;  // the parent is already gone
  }

  // Keep the real stdout for the result; everything else written to fd 1 goes to stderr.
  const int result_fd = ::dup(STDOUT_FILENO);
  if (result_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    std::perror("kiln-runner: dup");
    return 1;
  }

  std::string request((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  kiln::runtime::RunResult result;
  try {
    result = kiln::runtime::run_kernel_json(request);
  } catch (const std::exception& e) {  // run_kernel_json does not throw; be safe anyway
    result = {};
    result.error = kiln::ErrorKind::kRuntimeError;
    result.message = e.what();
  }
  std::fflush(stdout);
  if (!write_all(result_fd, result.to_json().dump() + "\n")) return 1;
  ::close(result_fd);
  // Skip static destructors and the thread pool's join: the result is out, nothing else matters,
  // and a kernel that left the pool in a bad state cannot turn a measured result into a crash.
  std::fflush(stderr);
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kRunner, argc, argv, measure); }
