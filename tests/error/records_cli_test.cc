// `kiln records list / export / import` as a user runs them: exit codes (0 done, 1 a failure,
// 2 a mistake on the command line) and messages, a pack carried from one log into another and
// again (duplicates skipped) with its task sources, a tampered pack refused by its line with
// nothing written, exporting a key the log does not hold, a log another process holds (refused at
// once, not waited for), and the note when a pack's timings come from another machine than the
// log's.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "records/record_log.h"
#include "records/record_pack.h"
#include "tests/common/run_command.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_record.h"

namespace kiln::records {
namespace {

namespace fs = std::filesystem;

const char* kTarget = "llvm -mcpu=znver4";

MeasureRecord make(const std::string& task, uint64_t config, double cost,
                   const std::string& device = "AMD EPYC 9R14 (2 cores)") {
  return ::kiln::testing::test_record(task, config, {cost}, kTarget, device);
}

using Result = ::kiln::testing::CommandResult;

class RecordsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RecordLog log = RecordLog::open(farm_);
    log.note_task("conv", {"conv2d_nchwc_x86", R"({"c":2})"});
    log.append(make("conv", 1, 2e-3));
    log.append(make("pool", 2, 1e-4));
    log.append(make("conv", 3, 1e-3));
  }

  std::string path(const std::string& name) const { return dir_.file(name); }
  static std::string read(const std::string& p) { return ::kiln::testing::read_file(p); }

  /// Runs `kiln ARGS` with stdout and stderr captured.
  Result kiln(const std::string& args) const {
    return ::kiln::testing::run_command(KILN_BINARY, args, dir_);
  }

  kiln::testing::TempDir dir_{"kiln_records_cli_test"};
  const std::string farm_ = path("farm");
  const std::string pack_ = path("znver4.jsonl");
};

TEST_F(RecordsCliTest, ExportThenImportTwice) {
  Result r = kiln("records list '" + farm_ + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("TARGET"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TARGET             LANE    TASKS  RECORDS  SOURCES\n"
                       "llvm -mcpu=znver4  device  2      3        1\n"),
            std::string::npos)
      << r.out;

  r = kiln("records export '" + farm_ + "' --key '" + kTarget + "' -o '" + pack_ + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + pack_ +
                       ": 3 records of 2 tasks (1 with its source), target 'llvm -mcpu=znver4' "
                       "(device lane), "
                       "measured on AMD EPYC 9R14 (2 cores)\n");
  EXPECT_EQ(read_pack(pack_).records.size(), 3u);
  EXPECT_EQ(read_pack(pack_).sources.size(), 1u);

  const std::string other = path("other");
  r = kiln("records import '" + pack_ + "' --records '" + other + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "imported 3, skipped 0 already present, 1 new task source: target 'llvm -mcpu=znver4' "
            "(device lane) into " +
                other + "\n");
  EXPECT_EQ(r.err, "");
  r = kiln("records import '" + pack_ + "' --records '" + other + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 0, skipped 3 already present, 0 new task sources"),
            std::string::npos)
      << r.out;
  {
    RecordLog log = RecordLog::open_existing(other);
    EXPECT_EQ(log.size(), 3u);
    EXPECT_EQ(log.best("conv", kTarget)->config_index, 3u);
    EXPECT_EQ(log.task_source("conv"), (TaskSource{"conv2d_nchwc_x86", R"({"c":2})"}));
  }
  r = kiln("records list '" + other + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("llvm -mcpu=znver4  device  2      3        1\n"), std::string::npos)
      << r.out;
}

TEST_F(RecordsCliTest, ATamperedPackIsRefusedByItsLineAndNothingIsWritten) {
  ASSERT_EQ(kiln("records export '" + farm_ + "' --key '" + kTarget + "' -o '" + pack_ + "'").code,
            0);
  std::string text = read(pack_);
  // The pool record, line 4 (after the header and conv's source).
  const size_t at = text.find("\"costs\":[0.0001]");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 16, "\"costs\":[1e-05]");
  std::ofstream(pack_, std::ios::binary | std::ios::trunc) << text;

  const std::string other = path("other");
  { RecordLog::open(other).append(make("dense", 9, 1.0)); }
  const Result r = kiln("records import '" + pack_ + "' --records '" + other + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("error: " + pack_ + ":4: the record's checksum does not match its fields"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(RecordLog::open_existing(other).size(), 1u) << "nothing is written";
  EXPECT_FALSE(RecordLog::open_existing(other).task_source("conv").has_value()) << "no source";
}

TEST_F(RecordsCliTest, ExportingAKeyTheLogDoesNotHold) {
  Result r = kiln("records export '" + farm_ + "' --key cpu -o '" + pack_ + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("error: record log '" + farm_ +
                       "' holds no records of target 'cpu' in the device lane; it holds "
                       "'llvm -mcpu=znver4' (3 records of 2 tasks)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(pack_));
  r = kiln("records export '" + farm_ + "' --key '" + kTarget + "' --emulated -o '" + pack_ + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("in the emulated lane"), std::string::npos) << r.err;

  r = kiln("records export '" + path("nowhere") + "' --key x -o '" + pack_ + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("record log '" + path("nowhere") + "': no such folder"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("nowhere"))) << "export creates no log";
}

TEST_F(RecordsCliTest, ALogInUseIsRefusedAtOnce) {
  ASSERT_EQ(kiln("records export '" + farm_ + "' --key '" + kTarget + "' -o '" + pack_ + "'").code,
            0);
  // This process holds the log, as a running kilnd holds its STATE/records.
  RecordLog held = RecordLog::open(farm_);
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& args :
       {"records export '" + farm_ + "' --key '" + kTarget + "' -o '" + path("x.jsonl") + "'",
        "records import '" + pack_ + "' --records '" + farm_ + "'",
        "records list '" + farm_ + "'"}) {
    const Result r = kiln(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_NE(r.err.find("error: record log '" + farm_ + "': in use by another process"),
              std::string::npos)
        << r.err;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << "never waits";
}

TEST_F(RecordsCliTest, ANoteWhenThePackWasTimedOnAnotherMachine) {
  ASSERT_EQ(kiln("records export '" + farm_ + "' --key '" + kTarget + "' -o '" + pack_ + "'").code,
            0);
  const std::string other = path("other");
  { RecordLog::open(other).append(make("conv", 7, 1e-3, "AMD Ryzen 9 9950X (16 cores)")); }
  const Result r = kiln("records import '" + pack_ + "' --records '" + other + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("note: the log's timed records of this target were measured on AMD Ryzen "
                       "9 9950X (16 cores); the pack's also on AMD EPYC 9R14 (2 cores)"),
            std::string::npos)
      << r.err;
}

TEST_F(RecordsCliTest, MistakesOnTheCommandLine) {
  for (const std::string& args :
       {std::string("records"), std::string("records frob"),
        "records export '" + farm_ + "' -o '" + pack_ + "'",
        "records export '" + farm_ + "' --key x", "records import '" + pack_ + "'",
        "records import --records '" + farm_ + "'", std::string("records list"),
        "records list '" + farm_ + "' --key x"}) {
    const Result r = kiln(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << args << "\n" << r.err;
  }
  Result r = kiln("records");
  EXPECT_NE(r.err.find("the subcommands are: list, export, import"), std::string::npos) << r.err;
  r = kiln("records export --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("usage: kiln records export DIR --key TARGET -o PACK.jsonl [--emulated]"),
            std::string::npos)
      << r.out;
  r = kiln("records --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("import"), std::string::npos) << r.out;
  r = kiln("--help");
  EXPECT_NE(r.out.find("records export"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln::records
