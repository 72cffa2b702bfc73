// The programs kilnd starts and watches: a job driver per running job (kiln-tuner), the model
// check at submission (kiln-tuner --check), and the embedded default's local worker and agent.
// Each child runs in a process group of its own with stdout and stderr appended to a log file,
// gets KILN_PARENT_PID so that it dies with kilnd (base/parent_death.h), and is killed and reaped
// when its ChildProcess goes away. The thread that starts a child must outlive it (the kernel's
// parent-death signal follows the thread), so each is started and waited for by one thread.
//
//   ChildProcess p = ChildProcess::start({tuner, "--job", "7"}, {"KILN_TOKEN=..."}, "job-7.log");
//   while (!(status = p.wait_for(100ms))) { if (hung) p.kill(); }
//   status->describe();   // "exited with status 2", "killed by SIGSEGV"
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace kiln::server {

/// How a child ended.
struct ExitStatus {
  bool signaled = false;
  int code = 0;   ///< the exit status, when !signaled
  int signo = 0;  ///< the signal, when signaled
  bool exited(int c) const { return !signaled && code == c; }
  /// "exited with status 2", "killed by SIGSEGV".
  std::string describe() const;
};

class ChildProcess {
 public:
  /// Starts argv[0] (a path) with `argv`, this process's environment plus `env` ("NAME=value"),
  /// stdin from /dev/null, and stdout and stderr appended to `log_path`. kiln::SystemError
  /// naming the program when it cannot be started.
  static ChildProcess start(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env, const std::string& log_path);
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  /// Kills (SIGKILL, the whole group) and reaps a child still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  /// Waits up to `timeout` for the child to end; its status once it did (again on later calls).
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  /// Sends `signo` to the child's process group (nothing once it was reaped).
  void signal(int signo);
  /// SIGTERM, then SIGKILL after `grace`; returns the status.
  ExitStatus stop(std::chrono::milliseconds grace);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

/// Where the program `name` (kiln-tuner, kiln-worker, kiln-agent) is: $ENV_VAR if set, else
/// `name` beside this executable if it is there, else `build_path` (the build tree's, compiled
/// in) if it exists, else `name` beside this executable.
std::string find_program(const std::string& name, const char* env_var, const char* build_path);

/// The last `max_bytes` of the file at `path` ("" when it cannot be read).
std::string file_tail(const std::string& path, size_t max_bytes);

}  // namespace kiln::server
