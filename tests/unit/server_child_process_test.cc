// kilnd's children (server/child_process.h): exit statuses as people read them, output into the
// log, KILN_PARENT_PID for the child, stop() with SIGTERM then SIGKILL, and the whole process
// group killed with its owner.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "server/child_process.h"
#include "tests/common/temp_dir.h"

namespace kiln::server {
namespace {

using namespace std::chrono_literals;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChildProcess, ExitStatusesAndTheLog) {
  testing::TempDir dir("child_process");
  const std::string log = dir.file("child.log");
  ChildProcess ok = ChildProcess::start(
      {"/bin/sh", "-c", "echo out; echo err >&2; echo parent=$KILN_PARENT_PID $EXTRA; exit 3"},
      {"EXTRA=given"}, log);
  const auto status = ok.wait_for(20s);
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(status->exited(3));
  EXPECT_EQ(status->describe(), "exited with status 3");
  const std::string text = read(log);
  EXPECT_NE(text.find("out\nerr\n"), std::string::npos) << text;
  EXPECT_NE(text.find("parent=" + std::to_string(::getpid()) + " given"), std::string::npos)
      << text;
  EXPECT_EQ(file_tail(log, 6), "given\n");

  ChildProcess crash = ChildProcess::start({"/bin/sh", "-c", "kill -SEGV $$"}, {}, log);
  const auto crashed = crash.wait_for(20s);
  ASSERT_TRUE(crashed.has_value());
  EXPECT_TRUE(crashed->signaled);
  EXPECT_EQ(crashed->describe(), "killed by SIGSEGV");
  EXPECT_THROW(ChildProcess::start({dir.file("missing")}, {}, log), SystemError);
}

TEST(ChildProcess, StopEndsAHungChildAndItsGroup) {
  testing::TempDir dir("child_process_stop");
  // A child that ignores SIGTERM and leaves a grandchild behind.
  ChildProcess hung =
      ChildProcess::start({"/bin/sh", "-c",
                           "trap '' TERM; sleep 300 & echo $! > " + dir.file("grandchild") +
                               "; while true; do sleep 1; done"},
                          {}, dir.file("log"));
  EXPECT_FALSE(hung.wait_for(200ms).has_value());
  std::string grandchild;
  for (int i = 0; i < 100 && grandchild.empty(); ++i) {
    std::this_thread::sleep_for(20ms);
    grandchild = read(dir.file("grandchild"));
  }
  ASSERT_FALSE(grandchild.empty());
  const ExitStatus s = hung.stop(300ms);
  EXPECT_TRUE(s.signaled);
  EXPECT_EQ(s.signo, SIGKILL);
  const pid_t g = static_cast<pid_t>(std::stol(grandchild));
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = ::kill(g, 0) != 0;
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone) << "the grandchild " << g << " outlived its group";
}

}  // namespace
}  // namespace kiln::server
