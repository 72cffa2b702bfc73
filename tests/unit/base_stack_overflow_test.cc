// report_stack_overflow (base/stack_overflow.h), in forked children: one that recurses without end
// writes the overflow message and exits with its status; one whose stack the address-space limit
// stops short (the memory is taken first) writes the out-of-memory message and exits with that
// status; a bad pointer still dies of SIGSEGV.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <functional>
#include <string>

#include "base/sanitizers.h"
#include "base/stack_overflow.h"

namespace kiln {
namespace {

volatile bool never = false;

[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (never) return frame[0];
  return recurse(depth + 1) + frame[0];
}

struct Ended {
  int status = 0;  // waitpid's
  std::string err;
};

/// Runs `body` in a child with the handler installed (overflow status 7, out of memory 8).
Ended run_child(const std::function<void()>& body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    report_stack_overflow(
        {"error: stack overflow (test)\n", 7, "error: out of memory (test)\n", 8});
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  Ended e;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) e.err.append(buf, size_t(n));
  ::close(fds[0]);
  ::waitpid(pid, &e.status, 0);
  return e;
}

TEST(StackOverflowTest, ARecursionWithoutEndIsReportedAsAStackOverflow) {
  if (KILN_ASAN || KILN_TSAN) GTEST_SKIP() << "the sanitizer owns SIGSEGV";
  const Ended e = run_child([] { recurse(0); });
  ASSERT_TRUE(WIFEXITED(e.status)) << e.status;
  EXPECT_EQ(WEXITSTATUS(e.status), 7);
  EXPECT_EQ(e.err, "error: stack overflow (test)\n");
}

TEST(StackOverflowTest, AStackStoppedByTheMemoryLimitIsOutOfMemory) {
  if (KILN_ASAN || KILN_TSAN) GTEST_SKIP() << "no address-space limit under a sanitizer";
  const Ended e = run_child([] {
    // Take all the address space a limit 64 MiB above what is mapped now leaves, then recurse:
    // the stack cannot grow long before its 8 MiB (or whatever RLIMIT_STACK says) are used.
    rlimit stack{};
    ::getrlimit(RLIMIT_STACK, &stack);
    if (stack.rlim_cur == RLIM_INFINITY || stack.rlim_cur < (4u << 20)) ::_exit(3);
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const rlim_t mapped = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::getpagesize());
    const rlimit as{mapped + (64u << 20), mapped + (64u << 20)};
    if (pages == 0 || ::setrlimit(RLIMIT_AS, &as) != 0) ::_exit(3);
    for (size_t chunk = 1u << 20; chunk >= 4096; chunk /= 2) {
      while (::mmap(nullptr, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
             MAP_FAILED) {
      }
    }
    recurse(0);
  });
  ASSERT_TRUE(WIFEXITED(e.status)) << e.status;
  ASSERT_NE(WEXITSTATUS(e.status), 3) << "could not set up the limit";
  EXPECT_EQ(WEXITSTATUS(e.status), 8) << e.err;
  EXPECT_EQ(e.err, "error: out of memory (test)\n");
}

TEST(StackOverflowTest, ABadPointerStillDiesOfSigsegv) {
  if (KILN_ASAN || KILN_TSAN) GTEST_SKIP() << "the sanitizer owns SIGSEGV";
  const Ended e = run_child([] { *static_cast<volatile int*>(nullptr) = 1; });
  ASSERT_TRUE(WIFSIGNALED(e.status)) << e.status;
  EXPECT_EQ(WTERMSIG(e.status), SIGSEGV);
  EXPECT_EQ(e.err, "");
}

}  // namespace
}  // namespace kiln
