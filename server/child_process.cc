#include "server/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "deploy/runtime/measure_child.h"

extern char** environ;

namespace kiln::server {

std::string ExitStatus::describe() const {
  if (signaled) return "killed by " + runtime::signal_name(signo);
  return "exited with status " + std::to_string(code);
}

ChildProcess ChildProcess::start(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env, const std::string& log_path) {
  KILN_ICHECK(!argv.empty()) << "ChildProcess::start without a program";
  KILN_SYSTEM_CHECK(::access(argv[0].c_str(), X_OK) == 0)
      << "cannot start '" << argv[0] << "': " << std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Default signal handling and an empty mask (kilnd blocks its stop signals); a group of its own.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> args = argv;
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "KILN_PARENT_PID=", 16) != 0) env_store.emplace_back(*e);
  }
  env_store.push_back("KILN_PARENT_PID=" + std::to_string(::getpid()));
  env_store.insert(env_store.end(), env.begin(), env.end());
  std::vector<char*> env_ptrs;
  for (std::string& e : env_store) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);

  pid_t pid = -1;
  const int rc =
      ::posix_spawn(&pid, args[0].c_str(), &actions, &attr, arg_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  KILN_SYSTEM_CHECK(rc == 0) << "cannot start '" << argv[0] << "' (log '" << log_path
                             << "'): " << std::strerror(rc);
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), status_(other.status_) {
  other.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    this->~ChildProcess();
    pid_ = other.pid_;
    status_ = other.status_;
    other.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || status_) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

std::optional<ExitStatus> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      ExitStatus s;
      s.signaled = WIFSIGNALED(status);
      s.code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      s.signo = s.signaled ? WTERMSIG(status) : 0;
      status_ = s;
      // What the child left in its group (nothing, normally) goes with it.
      ::kill(-pid_, SIGKILL);
      return status_;
    }
    if (r < 0 && errno != EINTR) {
      status_ = ExitStatus{};  // not our child any more: cannot happen unless reaped elsewhere
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

void ChildProcess::signal(int signo) {
  if (pid_ > 0 && !status_) ::kill(-pid_, signo);
}

ExitStatus ChildProcess::stop(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  if (auto s = wait_for(grace)) return *s;
  signal(SIGKILL);
  return *wait_for(std::chrono::hours(1));
}

std::string find_program(const std::string& name, const char* env_var, const char* build_path) {
  if (const char* env = std::getenv(env_var); env != nullptr && env[0] != '\0') return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string beside = ec ? name : (self.parent_path() / name).string();
  if (::access(beside.c_str(), X_OK) == 0) return beside;
  if (build_path != nullptr && ::access(build_path, X_OK) == 0) return build_path;
  return beside;
}

std::string file_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                                   ? size - static_cast<std::streamoff>(max_bytes)
                                   : 0;
  in.seekg(start);
  std::string out(static_cast<size_t>(size - start), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

}  // namespace kiln::server
