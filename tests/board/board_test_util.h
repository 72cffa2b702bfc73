// What the board tests share: running a program (kiln, kiln-run, kiln-run under QEMU) through the
// shell with its exit code, stdout and stderr, and quoting its arguments.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::testing {

struct Run {
  int code = -1;  ///< the exit code; -1 when the program did not exit (a signal)
  std::string out, err;
};

/// `s` quoted for the shell.
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `argv` (each argument quoted), its stdout and stderr captured in files under `dir`.
inline Run run(const std::vector<std::string>& argv, const std::string& dir) {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  std::string cmd;
  for (const std::string& a : argv) cmd += (cmd.empty() ? "" : " ") + quote(a);
  cmd += " </dev/null >" + quote(out) + " 2>" + quote(err);
  const int status = std::system(cmd.c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace kiln::testing
