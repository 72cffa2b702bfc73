// The record log: JSON round trip, RocksDB persistence, best/count/measured/tasks, open errors,
// a SIGKILLed writer, concurrent appends and their group commit (its packs:
// records_record_pack_test.cc).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "base/json.h"
#include "records/record_log.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_record.h"

namespace kiln::records {
namespace {

using kiln::testing::TempDir;

const char* kTarget = "llvm -mcpu=znver4";
const char* kArm = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53";

MeasureRecord make(const std::string& task, uint64_t config, std::vector<double> costs,
                   const std::string& target = kTarget) {
  return kiln::testing::test_record(task, config, std::move(costs), target, "AMD EPYC 9R14 x2");
}

MeasureRecord failed(const std::string& task, uint64_t config, ErrorKind kind) {
  MeasureRecord r = make(task, config, {});
  r.error = kind;
  r.error_msg = "it went wrong";
  return r;
}

TEST(RecordLog, JsonRoundTripOfEveryField) {
  MeasureRecord r;
  r.target = kArm;
  r.device = "Cortex-A53 x4 \"quoted\"\n\ttabbed";
  r.task_key = "conv2d_nchw(1,64,56,56|64,64,3,3|1,1)";
  r.config_index = (uint64_t{1} << 63) + 12345;  // above INT64_MAX: written as a string
  r.config = "tile_y=[32, 32] unroll_k=4";
  r.costs_s = {1.0 / 3, 2e-7, 1.0, 0.00012345678901234567};
  r.error = ErrorKind::kNone;
  r.error_msg = "";
  r.gflops = 123.456789012345678;
  r.timestamp_ms = -5;
  r.search_seed = std::numeric_limits<uint64_t>::max();
  std::string text = record_to_string(r);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_NE(text.find("\"version\":1"), std::string::npos) << text;
  EXPECT_EQ(text.find("contended"), std::string::npos) << "written only when true: " << text;
  EXPECT_EQ(record_from_string(text), r);
  r.contended = true;
  EXPECT_EQ(record_from_string(record_to_string(r)), r);

  // Every error kind by name.
  for (ErrorKind k : {ErrorKind::kNone, ErrorKind::kCompileError, ErrorKind::kCompileTimeout,
                      ErrorKind::kRuntimeError, ErrorKind::kRunTimeout, ErrorKind::kCrash,
                      ErrorKind::kWrongAnswer}) {
    MeasureRecord f = failed("t", 7, k);
    EXPECT_EQ(record_from_string(record_to_string(f)), f) << error_kind_name(k);
    EXPECT_EQ(error_kind_from_name(error_kind_name(k)), k);
  }
  EXPECT_ERROR_CONTAINS(error_kind_from_name("segfault"), "wrong_answer");
}

TEST(RecordLog, MalformedJsonNamesTheField) {
  std::string good = record_to_string(make("t", 1, {0.5}));
  EXPECT_ERROR_CONTAINS(record_from_string("{\"version\":1}", "here"), "field 'target'");
  std::string bad = good;
  bad.replace(bad.find("\"costs\":[0.5]"), 13, "\"costs\":\"fast\"");
  EXPECT_ERROR_CONTAINS(record_from_string(bad, "here"), "here: field 'costs' must be an array");
  bad = good;
  bad.replace(bad.find("\"error\":\"none\""), 14, "\"error\":\"oops\"");
  EXPECT_ERROR_CONTAINS(record_from_string(bad, "here"), "field 'error'");
  bad = good;
  bad.replace(bad.find("\"version\":1"), 11, "\"version\":99");
  EXPECT_ERROR_CONTAINS(record_from_string(bad, "here"), "version 99");
  bad = good;
  bad.replace(bad.find("\"config_index\":1"), 16, "\"config_index\":-1");
  EXPECT_ERROR_CONTAINS(record_from_string(bad, "here"), "field 'config_index'");
  EXPECT_ERROR_CONTAINS(record_from_string("[1]", "here"), "JSON object");
}

TEST(RecordLog, AppendAndReopenKeepEverything) {
  TempDir tmp;
  const std::string dir = tmp.file("log");
  std::vector<MeasureRecord> written;
  {
    RecordLog log = RecordLog::open(dir);
    EXPECT_EQ(log.size(), 0u);
    for (uint64_t i = 0; i < 10; ++i) {
      written.push_back(i % 3 == 2 ? failed("a", i, ErrorKind::kRunTimeout)
                                   : make(i % 2 ? "a" : "b", i, {0.1 * (i + 1), 0.2}));
      EXPECT_EQ(log.append(written.back()), i);
    }
    EXPECT_EQ(log.size(), 10u);
  }
  RecordLog log = RecordLog::open(dir);
  EXPECT_EQ(log.size(), 10u);
  EXPECT_EQ(log.all(), written);
  std::vector<MeasureRecord> a;
  for (auto& r : written) {
    if (r.task_key == "a") a.push_back(r);
  }
  EXPECT_EQ(log.records("a", kTarget), a);
  EXPECT_EQ(log.count("a", kTarget), a.size());
  // The counter continues after the last record.
  EXPECT_EQ(log.append(make("a", 100, {1.0})), 10u);
  EXPECT_EQ(log.size(), 11u);
}

TEST(RecordLog, BestIgnoresErrorsAndPicksTheFastestRepeat) {
  TempDir tmp;
  RecordLog log = RecordLog::open(tmp.file("log"));
  EXPECT_FALSE(log.best("t", kTarget).has_value());
  log.append(failed("t", 0, ErrorKind::kCompileError));
  EXPECT_FALSE(log.best("t", kTarget).has_value());
  log.append(make("t", 1, {1.0, 3.0}));
  log.append(make("t", 2, {5.0, 1.0}));  // cost 1: not better than the first of equals
  log.append(failed("t", 3, ErrorKind::kWrongAnswer));
  EXPECT_EQ(log.best("t", kTarget)->config_index, 1u);
  log.append(make("t", 4, {0.5, 3.0}));  // cost 0.5 (a disturbed repeat does not count)
  log.append(make("t", 5, {0.7}));
  MeasureRecord wrong_but_fast = make("t", 6, {0.001});
  wrong_but_fast.error = ErrorKind::kWrongAnswer;
  log.append(wrong_but_fast);
  EXPECT_EQ(log.best("t", kTarget)->config_index, 4u);
  EXPECT_EQ(*log.best("t", kTarget), log.records("t", kTarget)[4]);
  // Per target.
  EXPECT_FALSE(log.best("t", kArm).has_value());
  log.append(make("t", 9, {10.0}, kArm));
  EXPECT_EQ(log.best("t", kArm)->config_index, 9u);
  EXPECT_EQ(log.best("t", kTarget)->config_index, 4u);
}

TEST(RecordLog, MeasuredCountAndTasksPerTarget) {
  TempDir tmp;
  RecordLog log = RecordLog::open(tmp.file("log"));
  log.append(make("dense", 3, {1.0}));
  log.append(failed("dense", 4, ErrorKind::kCrash));
  log.append(make("conv", 0, {1.0}));
  log.append(make("conv", 0, {1.0}, kArm));
  log.append(make("pool", 1, {1.0}, kArm));
  EXPECT_TRUE(log.measured("dense", kTarget, 3));
  EXPECT_TRUE(log.measured("dense", kTarget, 4));  // errors count as measured
  EXPECT_FALSE(log.measured("dense", kTarget, 5));
  EXPECT_FALSE(log.measured("dense", kArm, 3));
  EXPECT_FALSE(log.measured("conv", kTarget, 3));
  EXPECT_EQ(log.count("dense", kTarget), 2u);
  EXPECT_EQ(log.count("conv", kTarget), 1u);
  EXPECT_EQ(log.count("pool", kTarget), 0u);
  EXPECT_EQ(log.tasks(kTarget), (std::vector<std::string>{"conv", "dense"}));
  EXPECT_EQ(log.tasks(kArm), (std::vector<std::string>{"conv", "pool"}));
  EXPECT_TRUE(log.tasks("cuda").empty());
  // A target that is a prefix of another one does not see its tasks.
  EXPECT_TRUE(log.tasks("llvm").empty());
  EXPECT_ERROR_CONTAINS(log.append(make("", 0, {1.0})), "field 'task'");
  EXPECT_ERROR_CONTAINS(log.append(make("x", 0, {-1.0})), "field 'costs'");
  EXPECT_EQ(log.size(), 5u);
}

// What a model trained on the whole log reads: the tasks' sources, every task's records of a
// target grouped by task, and the shelf the trained model is kept on; all of it survives a reopen.
TEST(RecordLog, TaskSourcesHistoryAndShelf) {
  TempDir tmp;
  const std::string dir = tmp.file("log");
  {
    RecordLog log = RecordLog::open(dir);
    log.append(make("dense", 3, {1.0}));
    log.append(make("conv", 0, {2.0}));
    log.append(failed("dense", 4, ErrorKind::kCrash));
    log.append(make("pool", 1, {1.0}));  // no source: not in the history
    log.append(make("conv", 1, {1.0}, kArm));
    log.note_task("dense", {"dense_x86", R"({"n":1})"});
    log.note_task("conv", {"conv2d_nchwc_x86", R"({"c":2})"});
    log.note_task("conv", {"conv2d_nchwc_x86", R"({"c":2})"});  // again: nothing changes
    EXPECT_ERROR_CONTAINS(log.note_task("x", {"", "{}"}), "the template of task 'x'");
    EXPECT_ERROR_CONTAINS(log.note_task("x", {"t", std::string(70000, 'a')}),
                          "the workload of task 'x' must be non-empty, hold no NUL character and "
                          "be at most 65536 bytes (it has 70000)");
    log.put_shelf("cost-model", std::string("\0bytes\xff", 7));
    EXPECT_ERROR_CONTAINS(log.put_shelf("", "x"), "shelf name must be non-empty");
  }
  RecordLog log = RecordLog::open(dir);
  EXPECT_EQ(log.task_source("dense"), (TaskSource{"dense_x86", R"({"n":1})"}));
  EXPECT_FALSE(log.task_source("pool").has_value());
  EXPECT_EQ(log.count_target(kTarget), 4u);
  EXPECT_EQ(log.count_target(kArm), 1u);
  EXPECT_EQ(log.count_target("llvm"), 0u);
  std::vector<TaskHistory> h = log.history(kTarget);
  ASSERT_EQ(h.size(), 2u);  // in order of first record; pool has no source
  EXPECT_EQ(h[0].task_key, "dense");
  EXPECT_EQ(h[0].source.template_name, "dense_x86");
  ASSERT_EQ(h[0].records.size(), 2u);
  EXPECT_EQ(h[0].records[1].config_index, 4u);
  EXPECT_EQ(h[1].task_key, "conv");
  EXPECT_EQ(h[1].records.size(), 1u);
  EXPECT_EQ(log.history(kArm).size(), 1u);
  EXPECT_EQ(log.shelf("cost-model"), std::string("\0bytes\xff", 7));
  EXPECT_FALSE(log.shelf("other").has_value());
}

// Records measured under emulation live in their own lane: the device lane (RecordStore's view,
// the tuner's) never sees them, and the emulated lane never sees a real board's.
TEST(RecordLog, EmulatedRecordsLiveInTheirOwnLane) {
  TempDir tmp;
  RecordLog log = RecordLog::open(tmp.file("log"));
  log.append(make("conv", 1, {2.0}, kArm));
  MeasureRecord e = make("conv", 2, {1.0}, kArm);
  e.emulated = true;
  log.append(e);
  MeasureRecord e2 = make("pool", 1, {3.0}, kArm);
  e2.emulated = true;
  log.append(e2);
  EXPECT_EQ(log.count("conv", kArm), 1u);
  EXPECT_EQ(log.count("conv", kArm, Lane::kEmulated), 1u);
  EXPECT_EQ(log.best("conv", kArm)->config_index, 1u) << "the faster emulated record is apart";
  EXPECT_EQ(log.best("conv", kArm, Lane::kEmulated)->config_index, 2u);
  EXPECT_TRUE(log.best("conv", kArm, Lane::kEmulated)->emulated);
  EXPECT_FALSE(log.measured("conv", kArm, 2));
  EXPECT_TRUE(log.measured("conv", kArm, 2, Lane::kEmulated));
  EXPECT_EQ(log.tasks(kArm), (std::vector<std::string>{"conv"}));
  EXPECT_EQ(log.tasks(kArm, Lane::kEmulated), (std::vector<std::string>{"conv", "pool"}));
  ASSERT_EQ(log.records("pool", kArm, Lane::kEmulated).size(), 1u);
  EXPECT_TRUE(log.records("pool", kArm).empty());
  // The flag survives the JSON text (and so export, import and the wire).
  EXPECT_NE(record_to_string(e).find("\"emulated\":true"), std::string::npos);
  EXPECT_TRUE(record_from_string(record_to_string(e)).emulated);
  EXPECT_EQ(record_to_string(make("conv", 1, {2.0})).find("emulated"), std::string::npos);
  // A target holding the lane's marker cannot be appended.
  EXPECT_ERROR_CONTAINS(log.append(make("conv", 3, {1.0}, std::string("llvm\1e"))),
                        "field 'target'");
}

TEST(RecordLog, AFolderThatIsAFile) {
  TempDir tmp;
  const std::string path = tmp.file("plain_file");
  std::ofstream(path) << "hello";
  EXPECT_ERROR_CONTAINS(RecordLog::open(path), "plain_file");
  EXPECT_ERROR_CONTAINS(RecordLog::open(path + "/log"), "plain_file/log");
}

TEST(RecordLog, AFolderThatIsNotWritable) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write anywhere";
  TempDir tmp;
  const std::string ro = tmp.file("ro");
  std::filesystem::create_directories(ro);
  ::chmod(ro.c_str(), 0555);
  EXPECT_ERROR_CONTAINS(RecordLog::open(ro + "/log"), "ro/log");
  EXPECT_ERROR_CONTAINS(RecordLog::open(ro), "ro");
  ::chmod(ro.c_str(), 0755);
}

TEST(RecordLog, OpeningTheSameFolderTwiceNamesTheFolder) {
  TempDir tmp;
  const std::string dir = tmp.file("shared_log");
  RecordLog first = RecordLog::open(dir);
  first.append(make("t", 0, {1.0}));
  EXPECT_ERROR_CONTAINS(RecordLog::open(dir), "shared_log");
  EXPECT_ERROR_CONTAINS(RecordLog::open(dir), "in use");
  // The first one still works, and once it is gone the folder opens again.
  first.append(make("t", 1, {1.0}));
  { RecordLog gone = std::move(first); }
  EXPECT_EQ(RecordLog::open(dir).size(), 2u);
}

// The SIGKILL test's child plays `kiln tune`: for every config not yet measured it appends a
// record and then reports the config's index on a pipe. It is this test program run again (fork
// and exec, so it starts with a fresh RocksDB), with the log's folder and the pipe in the
// environment, and only this test selected (a static initializer cannot do it: RocksDB is linked
// statically, and its own statics may not be set up yet). Run by itself, the test is skipped.
constexpr uint64_t kCrashConfigs = 300;

TEST(RecordLogCrashChild, WriterRunsOnlyAsAChild) {
  const char* dir = std::getenv("KILN_RECORD_LOG_CHILD_DIR");
  const char* fd = std::getenv("KILN_RECORD_LOG_CHILD_FD");
  if (!dir || !fd) GTEST_SKIP() << "the SIGKILL test's child; runs only under that test";
  const int write_fd = std::atoi(fd);
  try {
    RecordLog log = RecordLog::open(dir);
    for (uint64_t i = 0; i < kCrashConfigs; ++i) {
      if (log.measured("task", kTarget, i)) continue;
      log.append(make("task", i, {0.001 * static_cast<double>(i + 1)}));
      if (::write(write_fd, &i, sizeof(i)) != static_cast<ssize_t>(sizeof(i))) ::_exit(3);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash child: %s\n", e.what());
    ::_exit(2);
  }
  ::_exit(0);
}

// The parent SIGKILLs the child at a random point, reopens the log, and checks that every
// reported record is there; a last run finishes the job, and every config is then measured
// exactly once.
TEST(RecordLog, SigkilledWriterLosesNoAcknowledgedRecord) {
  TempDir tmp;
  const std::string dir = tmp.file("log");
  constexpr uint64_t kConfigs = kCrashConfigs;
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));

  auto run_child = [&](int write_fd) {
    int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, 1);  // the child's gtest chatter
    ::setenv("KILN_RECORD_LOG_CHILD_DIR", dir.c_str(), 1);
    ::setenv("KILN_RECORD_LOG_CHILD_FD", std::to_string(write_fd).c_str(), 1);
    const char* argv[] = {"autotune_record_log_test",
                          "--gtest_filter=RecordLogCrashChild.WriterRunsOnlyAsAChild", nullptr};
    ::execv("/proc/self/exe", const_cast<char* const*>(argv));
    ::_exit(4);
  };

  std::set<uint64_t> acknowledged;
  for (int round = 0; round < 4; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      run_child(fds[1]);
    }
    ::close(fds[1]);
    const bool kill_it = round < 3;
    const size_t kill_after = std::uniform_int_distribution<size_t>(1, 40)(rng);
    size_t got = 0;
    uint64_t index = 0;
    while (::read(fds[0], &index, sizeof(index)) == static_cast<ssize_t>(sizeof(index))) {
      EXPECT_TRUE(acknowledged.insert(index).second) << "config " << index << " measured twice";
      if (kill_it && ++got == kill_after) {
        if (std::uniform_int_distribution<int>(0, 1)(rng)) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
        }
        ::kill(pid, SIGKILL);
      }
    }
    // Whatever was written to the pipe before the kill was acknowledged too (read above).
    ::close(fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (kill_it) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "round " << round;
    } else {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }

    RecordLog log = RecordLog::open(dir);  // opens cleanly after the kill
    std::set<uint64_t> in_log;
    for (const MeasureRecord& r : log.records("task", kTarget)) {
      EXPECT_TRUE(in_log.insert(r.config_index).second) << "config " << r.config_index << " twice";
      EXPECT_EQ(r, make("task", r.config_index, {0.001 * static_cast<double>(r.config_index + 1)}));
    }
    for (uint64_t i : acknowledged) EXPECT_TRUE(in_log.count(i)) << "acknowledged " << i << " lost";
    // At most one record was written but not yet reported when the child died.
    EXPECT_LE(in_log.size(), acknowledged.size() + 1);
    EXPECT_EQ(log.size(), in_log.size());
    EXPECT_EQ(log.count("task", kTarget), in_log.size());
    acknowledged.insert(in_log.begin(), in_log.end());
    if (!kill_it) {
      EXPECT_EQ(in_log.size(), kConfigs);
      EXPECT_EQ(log.best("task", kTarget)->config_index, 0u);
    }
  }
}

TEST(RecordLog, ConcurrentAppendsFromFourThreads) {
  TempDir tmp;
  const std::string dir = tmp.file("log");
  constexpr int kThreads = 4;
  constexpr uint64_t kEach = 100;
  std::vector<std::vector<uint64_t>> seqs(kThreads);
  {
    RecordLog log = RecordLog::open(dir);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string task = "task" + std::to_string(t);
        for (uint64_t i = 0; i < kEach; ++i) {
          // Every thread also appends to a shared task, so best/count race on the same keys.
          seqs[t].push_back(log.append(make(task, i, {1.0 + static_cast<double>(i)})));
          seqs[t].push_back(
              log.append(make("shared", t * kEach + i, {static_cast<double>(t * kEach + i + 1)})));
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(log.size(), kThreads * kEach * 2);
  }
  std::set<uint64_t> all;
  for (auto& s : seqs) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    all.insert(s.begin(), s.end());
  }
  EXPECT_EQ(all.size(), kThreads * kEach * 2);
  EXPECT_EQ(*all.rbegin(), kThreads * kEach * 2 - 1);

  RecordLog log = RecordLog::open(dir);
  EXPECT_EQ(log.size(), kThreads * kEach * 2);
  for (int t = 0; t < kThreads; ++t) {
    auto recs = log.records("task" + std::to_string(t), kTarget);
    ASSERT_EQ(recs.size(), kEach);
    for (uint64_t i = 0; i < kEach; ++i) EXPECT_EQ(recs[i].config_index, i);
    EXPECT_EQ(log.best("task" + std::to_string(t), kTarget)->config_index, 0u);
  }
  EXPECT_EQ(log.count("shared", kTarget), kThreads * kEach);
  EXPECT_EQ(log.best("shared", kTarget)->config_index, 0u);
  for (uint64_t c = 0; c < kThreads * kEach; ++c) EXPECT_TRUE(log.measured("shared", kTarget, c));
}

// Group commit: many appenders at once share synced batches; each record is there exactly once,
// with the sequence number its append returned, and the count and best entries (updated across
// a group that holds several records of the same task) are right.
TEST(RecordLog, GroupCommitOfThirtyTwoThreadsKeepsEveryRecordOnce) {
  TempDir tmp;
  const std::string dir = tmp.file("log");
  constexpr int kThreads = 32;
  constexpr uint64_t kEach = 25;
  constexpr uint64_t kTotal = kThreads * kEach * 2;
  // seq -> the record its append returned it for.
  std::vector<std::vector<std::pair<uint64_t, MeasureRecord>>> appended(kThreads);
  std::vector<double> task_best(kThreads, std::numeric_limits<double>::infinity());
  std::vector<uint64_t> task_best_config(kThreads, 0);
  {
    RecordLog log = RecordLog::open(dir);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t));
        std::uniform_real_distribution<double> cost(0.5, 2.0);
        const std::string task = "task" + std::to_string(t);
        for (uint64_t i = 0; i < kEach; ++i) {
          // Every third record of a thread's own task is an error: it counts but is never best.
          MeasureRecord own = i % 3 == 2 ? failed(task, i, ErrorKind::kRunTimeout)
                                         : make(task, i, {cost(rng), cost(rng)});
          if (own.error == ErrorKind::kNone && own.cost() < task_best[t]) {
            task_best[t] = own.cost();
            task_best_config[t] = i;
          }
          appended[t].emplace_back(log.append(own), own);
          // The shared task's best is config 0 (cost 0.1); the others cost more.
          const uint64_t c = t * kEach + i;
          MeasureRecord shared = make("shared", c, {c == 0 ? 0.1 : 1.0 + cost(rng)});
          appended[t].emplace_back(log.append(shared), shared);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(log.size(), kTotal);
    EXPECT_EQ(log.count("shared", kTarget), kThreads * kEach);
    ASSERT_TRUE(log.best("shared", kTarget).has_value());
    EXPECT_EQ(log.best("shared", kTarget)->config_index, 0u);
  }

  // Sequence numbers: 0..n-1, each once, increasing within a thread (its appends are ordered).
  std::vector<const MeasureRecord*> by_seq(kTotal, nullptr);
  for (const auto& mine : appended) {
    for (size_t k = 0; k < mine.size(); ++k) {
      const uint64_t seq = mine[k].first;
      ASSERT_LT(seq, kTotal);
      EXPECT_EQ(by_seq[seq], nullptr) << "seq " << seq << " returned twice";
      by_seq[seq] = &mine[k].second;
      if (k > 0) {
        EXPECT_LT(mine[k - 1].first, seq);
      }
    }
  }

  // Reopened: the log holds exactly those records at those sequence numbers.
  RecordLog log = RecordLog::open(dir);
  EXPECT_EQ(log.size(), kTotal);
  const std::vector<MeasureRecord> all = log.all();
  ASSERT_EQ(all.size(), kTotal);
  for (uint64_t seq = 0; seq < kTotal; ++seq) {
    ASSERT_NE(by_seq[seq], nullptr) << "seq " << seq << " was never returned";
    EXPECT_EQ(all[seq], *by_seq[seq]) << "seq " << seq;
  }
  for (int t = 0; t < kThreads; ++t) {
    const std::string task = "task" + std::to_string(t);
    EXPECT_EQ(log.count(task, kTarget), kEach);
    const auto recs = log.records(task, kTarget);
    ASSERT_EQ(recs.size(), kEach);
    for (uint64_t i = 0; i < kEach; ++i) EXPECT_EQ(recs[i].config_index, i);
    ASSERT_TRUE(log.best(task, kTarget).has_value());
    EXPECT_EQ(log.best(task, kTarget)->config_index, task_best_config[t]);
    EXPECT_EQ(log.best(task, kTarget)->cost(), task_best[t]);
  }
  EXPECT_EQ(log.count("shared", kTarget), kThreads * kEach);
  EXPECT_EQ(log.records("shared", kTarget).size(), kThreads * kEach);
  EXPECT_EQ(log.best("shared", kTarget)->config_index, 0u);
  for (uint64_t c = 0; c < kThreads * kEach; ++c) EXPECT_TRUE(log.measured("shared", kTarget, c));
  EXPECT_EQ(log.tasks(kTarget).size(), static_cast<size_t>(kThreads) + 1);
}

// Not a check: how many synced appends a second one thread and 32 threads get (group commit makes
// the second number much larger on a disk where fsync costs anything).
TEST(RecordLog, AppendsPerSecondWithOneAndThirtyTwoThreads) {
  for (int threads : {1, 32}) {
    TempDir tmp;
    RecordLog log = RecordLog::open(tmp.file("log"));
    constexpr uint64_t kPerThread = 40;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const uint64_t n = threads == 1 ? kPerThread * 8 : kPerThread;
        for (uint64_t i = 0; i < n; ++i)
          log.append(make("task" + std::to_string(t % 4), t * 1000 + i, {1.0}));
      });
    }
    for (auto& th : ts) th.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("record log: %d thread(s): %zu appends in %.3f s = %.0f appends/s\n", threads,
                log.size(), s, static_cast<double>(log.size()) / s);
    EXPECT_GT(log.size(), 0u);
  }
}

// append_async: callers never wait; each record's callback comes once, after its group is on
// disk, mixed with synchronous appends; everything is there after a reopen.
TEST(RecordLog, AsyncAppendsAreAnsweredOnceTheirGroupIsOnDisk) {
  TempDir tmp;
  const std::string dir = tmp.file("log");
  constexpr int kThreads = 8;
  constexpr uint64_t kEach = 50;
  std::mutex mu;
  std::condition_variable cv;
  std::set<uint64_t> seqs;
  size_t answered = 0;
  {
    RecordLog log = RecordLog::open(dir);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (uint64_t i = 0; i < kEach; ++i) {
          MeasureRecord r =
              make("task" + std::to_string(t), i, {1e-3 + 1e-6 * static_cast<double>(i)});
          if (i % 5 == 0) {  // some synchronous appends in the mix
            const uint64_t seq = log.append(r);
            std::lock_guard<std::mutex> lock(mu);
            EXPECT_TRUE(seqs.insert(seq).second);
            ++answered;
            continue;
          }
          log.append_async(r, [&](uint64_t seq, std::exception_ptr error) {
            EXPECT_FALSE(error);
            std::lock_guard<std::mutex> lock(mu);
            EXPECT_TRUE(seqs.insert(seq).second) << "sequence " << seq << " answered twice";
            ++answered;
            cv.notify_all();
          });
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered == kThreads * kEach; }));
  }
  EXPECT_EQ(seqs.size(), kThreads * kEach);
  EXPECT_EQ(*seqs.rbegin(), kThreads * kEach - 1);
  RecordLog again = RecordLog::open(dir);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(again.count("task" + std::to_string(t), "llvm -mcpu=znver4"), kEach);
    EXPECT_EQ(again.best("task" + std::to_string(t), "llvm -mcpu=znver4")->config_index, 0u);
  }
}

}  // namespace
}  // namespace kiln::records
