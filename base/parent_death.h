// A child that kilnd starts (a job driver, a local worker or agent) dies with it: kilnd puts its
// own pid in KILN_PARENT_PID, and the child asks the kernel for SIGKILL when that parent goes
// (PR_SET_PDEATHSIG), or exits at once if the parent is already gone. Without the variable
// (started by hand) nothing happens.
#pragma once

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

namespace kiln {

inline void die_with_parent_from_env() {
  const char* env = std::getenv("KILN_PARENT_PID");
  if (env == nullptr || *env == '\0') return;
  char* end = nullptr;
  const long parent = std::strtol(env, &end, 10);
  const bool valid = *end == '\0' && parent > 1;
  ::unsetenv("KILN_PARENT_PID");  // not for this process's own children
  if (!valid) return;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != static_cast<pid_t>(parent)) std::_Exit(1);  // the parent died before prctl
}

}  // namespace kiln
