// A process that overflows its stack says so, rather than dying of a bare SIGSEGV that its parent
// cannot tell from any other crash. report_stack_overflow() puts a SIGSEGV handler on an alternate
// signal stack (the overflowed one has no room left to run it) for the calling thread (call it
// from main, where the compiler runs). A fault next to the faulting thread's stack pointer is the
// stack's end: the handler writes its message to stderr and exits with its status. When the main
// thread faulted well short of its stack limit (RLIMIT_STACK), the stack could not grow because
// the address-space limit (RLIMIT_AS, kiln-tuner --memory-limit-mb) was reached first: that is
// memory, not depth, and it writes the out-of-memory message and exits with that status instead.
// Any other SIGSEGV (a bad pointer) gets the default action again, so the process still dies of
// the signal.
//
//   kiln::report_stack_overflow({"error: stack overflow: ...\n", 6, "error: out of memory\n", 4});
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace kiln {

/// What the handler writes (whole lines) and the exit statuses.
struct StackOverflowReport {
  const char* overflow_message;  ///< the stack's limit was reached
  int overflow_status;
  const char* out_of_memory_message;  ///< the address-space limit stopped the stack's growth
  int out_of_memory_status;
};

namespace detail {

struct StackOverflowState {
  StackOverflowReport report{};
  uintptr_t main_top = 0;    // an address near the top of the main thread's stack
  uintptr_t main_limit = 0;  // RLIMIT_STACK's soft limit, 0 when unlimited
  alignas(16) char alt_stack[64 << 10];
};

inline StackOverflowState& stack_overflow_state() {
  static StackOverflowState state;
  return state;
}

inline void write_all(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

inline void on_segv(int, siginfo_t* info, void* context) {
  const StackOverflowState& s = stack_overflow_state();
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  const auto sp = static_cast<uintptr_t>(uc->uc_mcontext.sp);
#else
  const uintptr_t sp = 0;
  (void)uc;
#endif
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  constexpr uintptr_t kNear = 64 << 10;  // a frame's reach below or above the stack pointer
  if (sp != 0 && addr + kNear >= sp && addr <= sp + kNear) {
    const uintptr_t used = s.main_top >= sp ? s.main_top - sp : UINTPTR_MAX;
    constexpr uintptr_t kSlack = 1 << 20;
    const bool main_thread = s.main_limit != 0 && used <= s.main_limit + kSlack;
    if (main_thread && used + kSlack < s.main_limit) {
      write_all(s.report.out_of_memory_message);
      ::_exit(s.report.out_of_memory_status);
    }
    write_all(s.report.overflow_message);
    ::_exit(s.report.overflow_status);
  }
  // Not the stack: the faulting instruction runs again under the default action.
  ::signal(SIGSEGV, SIG_DFL);
}

}  // namespace detail

/// Installs the handler (see above) for the calling thread's stack; the messages must outlive the
/// process (string literals).
inline void report_stack_overflow(const StackOverflowReport& report) {
  detail::StackOverflowState& s = detail::stack_overflow_state();
  s.report = report;
  int here = 0;
  s.main_top = reinterpret_cast<uintptr_t>(&here);
  rlimit limit{};
  s.main_limit = ::getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                     ? static_cast<uintptr_t>(limit.rlim_cur)
                     : 0;
  stack_t alt{};
  alt.ss_sp = s.alt_stack;
  alt.ss_size = sizeof s.alt_stack;
  if (::sigaltstack(&alt, nullptr) != 0) return;
  struct sigaction action {};
  action.sa_sigaction = detail::on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGSEGV, &action, nullptr);
}

}  // namespace kiln
