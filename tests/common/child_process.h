// A program started by a test (kilnd, kiln-worker, kiln-agent, kiln): its stdout is read line by
// line in the background (so it never blocks on a full pipe), its stderr goes to a file, and it
// is killed and reaped when the object goes away.
//
//   ChildProcess p({KILND_BINARY, "--listen", "127.0.0.1:0", ...}, dir / "kilnd.log");
//   std::string line = p.wait_for_line("kilnd listening", std::chrono::seconds(20));
//   p.signal(SIGKILL);  int status = p.wait();
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kiln::testing {

class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, const std::string& stderr_path,
               std::vector<std::string> extra_env = {})
      : stderr_path_(stderr_path) {
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
    for (std::string& e : extra_env) env_store.push_back(e);
    std::vector<char*> env;
    for (std::string& e : env_store) env.push_back(e.data());
    env.push_back(nullptr);
    const int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    if (rc != 0) {
      close(out[0]);
      throw std::runtime_error("cannot start " + argv[0]);
    }
    reader_ = std::thread([this, fd = out[0]] {
      std::string partial;
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof buf)) > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        partial.append(buf, static_cast<size_t>(n));
        size_t nl;
        while ((nl = partial.find('\n')) != std::string::npos) {
          lines_.push_back(partial.substr(0, nl));
          partial.erase(0, nl + 1);
        }
        cv_.notify_all();
      }
      close(fd);
      std::lock_guard<std::mutex> lock(mu_);
      if (!partial.empty()) lines_.push_back(partial);
      eof_ = true;
      cv_.notify_all();
    });
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (reader_.joinable()) reader_.join();
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  /// The first stdout line containing `text`; throws (with the stderr log) after `timeout`.
  std::string wait_for_line(const std::string& text, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      for (const std::string& l : lines_)
        if (l.find(text) != std::string::npos) return l;
      if (eof_ || cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
        for (const std::string& l : lines_)
          if (l.find(text) != std::string::npos) return l;
        throw std::runtime_error("no line with '" + text + "' on stdout; stderr:\n" +
                                 stderr_text());
      }
    }
  }
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::string stderr_text() const {
    std::ifstream in(stderr_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void signal(int sig) {
    if (!reaped_) ::kill(pid_, sig);
  }
  /// Waits for the exit and returns the wait status.
  int wait() {
    if (reaped_) return status_;
    waitpid(pid_, &status_, 0);
    reaped_ = true;
    return status_;
  }
  /// Waits up to `timeout`; true when it exited (status in wait()).
  bool wait_for_exit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!reaped_) {
      const pid_t r = waitpid(pid_, &status_, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

 private:
  std::string stderr_path_;
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::thread reader_;
};

}  // namespace kiln::testing
