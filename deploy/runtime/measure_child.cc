#include "deploy/runtime/measure_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "base/error.h"

extern char** environ;

namespace kiln::runtime {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStdoutLimit = size_t{4} << 20;  // the result is one line; keep at most this
constexpr size_t kStderrTail = 4096;              // bytes of stderr quoted in messages
constexpr size_t kStderrKeep = 64 << 10;          // bytes of stderr kept while reading

// A file descriptor closed on scope exit.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Moves `fd` above the standard descriptors (keeping close-on-exec), so that the child's dup2 onto
// 0, 1 and 2 never finds the source already there (which would leave close-on-exec set).
int lift_fd(int fd) {
  if (fd > 2) return fd;
  int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  ::close(fd);
  return moved;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Appends what `fd` has now to `buf`, keeping at most `keep` bytes (the tail). Returns false at
// end of file or on an error other than "try again".
bool drain(int fd, std::string& buf, size_t keep) {
  char chunk[16384];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      if (buf.size() > keep) buf.erase(0, buf.size() - keep);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

std::string tail_of(const std::string& s, size_t n) {
  std::string t = s.size() > n ? "..." + s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

// The last non-empty line of `s`.
std::string last_line(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == '\r')) --end;
  size_t begin = s.rfind('\n', end == 0 ? 0 : end - 1);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return s.substr(begin, end - begin);
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Waits for `pid` until `deadline`; returns true and its status when it exited, false otherwise.
bool wait_until(pid_t pid, Clock::time_point deadline, int* status) {
  auto sleep = std::chrono::microseconds(50);
  for (;;) {
    pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) {
      *status = 0;
      return true;  // not our child any more (cannot happen unless someone else reaped it)
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(5000));
  }
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string signal_name(int signo) {
  switch (signo) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGSYS:
      return "SIGSYS";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGHUP:
      return "SIGHUP";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    default:
      return "signal " + std::to_string(signo);
  }
}

std::string default_runner_path() {
  if (const char* env = std::getenv("KILN_RUNNER"); env != nullptr && env[0] != '\0') return env;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::string beside;
  if (!ec) {
    beside = (self.parent_path() / "kiln-runner").string();
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
#ifdef KILN_RUNNER_BUILD_PATH
  if (::access(KILN_RUNNER_BUILD_PATH, X_OK) == 0 || beside.empty()) return KILN_RUNNER_BUILD_PATH;
#endif
  return beside.empty() ? std::string("kiln-runner") : beside;
}

RunResult measure_in_child(const RunRequest& request, double timeout_s,
                           const std::string& runner_path,
                           const std::vector<std::string>& launcher) {
  return measure_in_child_json(request.to_json().dump(), timeout_s, runner_path, launcher);
}

RunResult measure_in_child_json(const std::string& request_json, double timeout_s,
                                const std::string& runner_path,
                                const std::vector<std::string>& launcher) {
  KILN_USER_CHECK(::access(runner_path.c_str(), X_OK) == 0)
      << "the kernel runner '" << runner_path << "' is missing or not executable ("
      << std::strerror(errno) << "); build the kiln-runner target or set KILN_RUNNER";

  // stdin is a socket so that writing to a child that already died fails with EPIPE (through
  // MSG_NOSIGNAL) instead of raising SIGPIPE in this process. Every descriptor is close-on-exec,
  // so children that other threads start at the same time inherit none of them.
  int sv[2];
  KILN_USER_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0)
      << "measure_in_child: socketpair failed: " << std::strerror(errno);
  Fd in_parent(lift_fd(sv[0])), in_child(lift_fd(sv[1]));
  int out_p[2], err_p[2];
  KILN_USER_CHECK(::pipe2(out_p, O_CLOEXEC) == 0)
      << "measure_in_child: pipe failed: " << std::strerror(errno);
  Fd out_parent(lift_fd(out_p[0])), out_child(lift_fd(out_p[1]));
  KILN_USER_CHECK(::pipe2(err_p, O_CLOEXEC) == 0)
      << "measure_in_child: pipe failed: " << std::strerror(errno);
  Fd err_parent(lift_fd(err_p[0])), err_child(lift_fd(err_p[1]));
  KILN_USER_CHECK(in_parent.get() >= 0 && in_child.get() >= 0 && out_parent.get() >= 0 &&
                  out_child.get() >= 0 && err_parent.get() >= 0 && err_child.get() >= 0)
      << "measure_in_child: cannot set up the child's descriptors: " << std::strerror(errno);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_child.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_child.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_child.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGSEGV, SIGBUS, SIGFPE}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  // The runner sets PR_SET_PDEATHSIG and exits if its parent is not this process any more.
  std::string parent = std::to_string(::getpid());
  std::vector<std::string> words = launcher;
  words.insert(words.end(), {runner_path, "--parent", parent});
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const auto start = Clock::now();
  int rc = ::posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  KILN_USER_CHECK(rc == 0) << "cannot start the kernel runner '" << runner_path << "'"
                           << (launcher.empty() ? "" : " through '" + launcher[0] + "'") << ": "
                           << std::strerror(rc);
  in_child.reset();
  out_child.reset();
  err_child.reset();
  set_nonblocking(in_parent.get());
  set_nonblocking(out_parent.get());
  set_nonblocking(err_parent.get());

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(timeout_s, 0.0)));
  const std::string to_send = request_json + "\n";
  size_t sent = 0;
  bool out_open = true, err_open = true, timed_out = false;
  std::string out_buf, err_buf;
  while (out_open || err_open) {
    auto now = Clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    pollfd fds[3];
    int n = 0;
    int in_idx = -1, out_idx = -1, err_idx = -1;
    if (in_parent.get() >= 0) {
      in_idx = n;
      fds[n++] = {in_parent.get(), POLLOUT, 0};
    }
    if (out_open) {
      out_idx = n;
      fds[n++] = {out_parent.get(), POLLIN, 0};
    }
    if (err_open) {
      err_idx = n;
      fds[n++] = {err_parent.get(), POLLIN, 0};
    }
    auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    int wait_ms = static_cast<int>(std::clamp<int64_t>(left_ms + 1, 1, INT_MAX));
    int ready = ::poll(fds, static_cast<nfds_t>(n), wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;  // cannot happen with valid descriptors; the exit status decides below
    }
    if (in_idx >= 0 && fds[in_idx].revents != 0) {
      while (sent < to_send.size()) {
        ssize_t w = ::send(in_parent.get(), to_send.data() + sent, to_send.size() - sent,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
          sent += static_cast<size_t>(w);
        } else if (w < 0 && errno == EINTR) {
          continue;
        } else {
          if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) sent = to_send.size();  // gone
          break;
        }
      }
      if (sent >= to_send.size()) in_parent.reset();  // end of file for the child's stdin
    }
    if (out_idx >= 0 && fds[out_idx].revents != 0) {
      out_open = drain(out_parent.get(), out_buf, kStdoutLimit);
    }
    if (err_idx >= 0 && fds[err_idx].revents != 0) {
      err_open = drain(err_parent.get(), err_buf, kStderrKeep);
    }
  }
  in_parent.reset();

  RunResult result;
  result.child_pid = pid;
  int status = 0;
  // The child closed its output; it should exit at once. Give it until the deadline.
  if (timed_out || !wait_until(pid, deadline, &status)) {
    kill_and_reap(pid);
    result.wall_s = seconds_between(start, Clock::now());
    result.error = ErrorKind::kRunTimeout;
    result.message =
        "the run did not finish within " + std::to_string(timeout_s) + " s; the runner was killed";
    return result;
  }
  const double wall_s = seconds_between(start, Clock::now());
  const std::string err_tail = tail_of(err_buf, kStderrTail);

  if (WIFSIGNALED(status)) {
    result.error = ErrorKind::kCrash;
    result.message = "the runner died of " + signal_name(WTERMSIG(status));
    if (!err_tail.empty()) result.message += "; stderr: " + err_tail;
    result.wall_s = wall_s;
    return result;
  }
  std::string line = last_line(out_buf);
  if (!line.empty()) {
    try {
      RunResult parsed = RunResult::from_json(Json::parse(line, "the runner's result"));
      parsed.wall_s = wall_s;
      parsed.child_pid = pid;
      return parsed;
    } catch (const std::exception& e) {
      result.message = std::string("unreadable result (") + e.what() + ")";
    }
  }
  result.error = ErrorKind::kRuntimeError;
  result.wall_s = wall_s;
  std::string why = "the runner exited with status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                    " without a result";
  result.message = result.message.empty() ? why : why + ": " + result.message;
  if (!err_tail.empty()) result.message += "; stderr: " + err_tail;
  return result;
}

}  // namespace kiln::runtime
