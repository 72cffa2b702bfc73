// Running a program the way a user does, from a shell command line, with what it printed: the
// CLI tests' way to check exit codes and messages.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/temp_dir.h"

namespace kiln::testing {

struct CommandResult {
  int code = -1;  ///< the exit status (-1 when killed by a signal)
  std::string out, err;
};

/// A file's whole contents ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Runs `program` (quoted) with `args` (a shell fragment) through the shell, its stdout and
/// stderr captured in files of `dir`.
inline CommandResult run_command(const std::string& program, const std::string& args,
                                 const TempDir& dir) {
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  const std::string cmd = "'" + program + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CommandResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

}  // namespace kiln::testing
