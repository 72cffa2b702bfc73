// `kiln tune` end to end on a small CNN built here: a run SIGKILLed in the middle of tuning and run
// again continues from the record log — every measurement the killed run reported is still there,
// no config of any task is measured twice, each task ends with exactly its trial budget — and the
// tuned bundle computes what the untuned one does. The same with --budget: the second run spends
// exactly the rest of the budget. The log's cost model, trained by one model's tuning, carries to
// another model: kiln compile --records builds its never-measured operators with the model's
// configs, and its tuning starts from the kept model. Then bad arguments.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "deploy/runtime/graph_executor.h"
#include "records/record_log.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/small_cnn.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

std::string read(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TuneCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(path("model.onnx"), std::ios::binary) << testing::small_cnn_model();
  }
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }

  /// Starts `kiln ARGS` with stderr to `err`; returns its pid. Its temporary folders (the
  /// measurer's kiln-tune-<pid>-<n>, which a SIGKILLed run cannot remove) go in the test's.
  pid_t start(const std::vector<std::string>& args, const std::string& err) const {
    const std::string tmp = dir_.path().string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      FILE* f = std::freopen(err.c_str(), "w", stderr);
      (void)f;
      ::setenv("TMPDIR", tmp.c_str(), 1);
      std::vector<char*> argv{const_cast<char*>(KILN_BINARY)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(KILN_BINARY, argv.data());
      std::_Exit(127);
    }
    return pid;
  }
  int wait(pid_t pid) const {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::vector<std::string> tune_args(int trials) const {
    return {"tune",      path("model.onnx"),     "--target", "llvm",
            "--trials",  std::to_string(trials), "--batch",  "4",
            "--records", path("records"),        "-o",       path("tuned.kiln")};
  }

  testing::TempDir dir_{"kiln_tune_cli_test"};
};

TEST_F(TuneCliTest, KilledRunResumesWithoutLosingOrRepeating) {
  constexpr int kTrials = 24;
  // Kill the first run once it reported at least 8 trials of the second task.
  const std::string err1 = path("run1.txt");
  const pid_t pid = start(tune_args(kTrials), err1);
  const std::regex task2(R"(\[task 2/4\] \S+ \[[# ]+\] (\d+)/)");
  int reported = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text = read(err1);
    for (std::sregex_iterator it(text.begin(), text.end(), task2), end; it != end; ++it)
      reported = std::max(reported, std::stoi((*it)[1]));
    if (reported >= 8) break;
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "kiln tune ended early:\n" << read(err1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(reported, 8) << read(err1);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);

  std::map<std::string, size_t> after_kill;
  {
    records::RecordLog log = records::RecordLog::open(path("records"));
    ASSERT_EQ(log.tasks("llvm").size(), 2u);  // tasks 3 and 4 never started
    for (const std::string& t : log.tasks("llvm")) after_kill[t] = log.count(t, "llvm");
  }
  // Task 1 finished; task 2 holds at least what was reported (appends are durable first).
  std::vector<size_t> counts;
  for (const auto& [t, n] : after_kill) counts.push_back(n);
  EXPECT_EQ(*std::max_element(counts.begin(), counts.end()), static_cast<size_t>(kTrials));
  EXPECT_GE(*std::min_element(counts.begin(), counts.end()), static_cast<size_t>(reported));

  const std::string err2 = path("run2.txt");
  ASSERT_EQ(wait(start(tune_args(kTrials), err2)), 0) << read(err2);
  const std::string log2 = read(err2);
  EXPECT_NE(log2.find("[task 1/4]"), std::string::npos);
  EXPECT_NE(log2.find("(0 now"), std::string::npos) << log2;  // task 1 was skipped
  records::RecordLog log = records::RecordLog::open(path("records"));
  ASSERT_EQ(log.tasks("llvm").size(), 4u);
  for (const std::string& t : log.tasks("llvm")) {
    std::set<uint64_t> configs;
    const auto records = log.records(t, "llvm");
    if (t.rfind("conv2d", 0) == 0) {
      EXPECT_EQ(records.size(), static_cast<size_t>(kTrials)) << t;
    } else {  // small spaces: every config once
      EXPECT_LE(records.size(), static_cast<size_t>(kTrials)) << t;
    }
    for (const auto& r : records) EXPECT_TRUE(configs.insert(r.config_index).second) << t;
    if (after_kill.count(t)) {  // the records of the killed run are the first ones, unchanged
      EXPECT_GE(records.size(), after_kill[t]);
    }
  }

  // The tuned bundle computes what an untuned build computes.
  runtime::GraphExecutor tuned = runtime::GraphExecutor::load(path("tuned.kiln"));
  const std::string err3 = path("compile.txt");
  ASSERT_EQ(
      wait(start({"compile", path("model.onnx"), "--target", "llvm", "-o", path("plain.kiln")},
                 err3)),
      0);
  runtime::GraphExecutor plain = runtime::GraphExecutor::load(path("plain.kiln"));
  runtime::NDArray x = testing::random_array({1, 8, 12, 12}, 5);
  tuned.set_input("x", x);
  plain.set_input("x", x);
  tuned.run();
  plain.run();
  EXPECT_TRUE(testing::all_close(tuned.output(0), plain.output(0).to_vector<float>(), 1e-4, 1e-5));
}

TEST_F(TuneCliTest, KilledBudgetRunSpendsExactlyTheRestOfItsBudget) {
  constexpr int kBudget = 40;
  const std::vector<std::string> args = {
      "tune",      path("model.onnx"),      "--target", "llvm",
      "--budget",  std::to_string(kBudget), "--batch",  "4",
      "--records", path("records"),         "-o",       path("tuned.kiln")};
  // Kill the first run once it reported at least 20 measurements (past every first round).
  const std::string err1 = path("run1.txt");
  const pid_t pid = start(args, err1);
  const std::regex measured(R"(\[(\d+)/40 measured\])");
  int reported = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text = read(err1);
    for (std::sregex_iterator it(text.begin(), text.end(), measured), end; it != end; ++it)
      reported = std::max(reported, std::stoi((*it)[1]));
    if (reported >= 20) break;
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "kiln tune ended early:\n" << read(err1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(reported, 20) << read(err1);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  size_t after_kill = 0;
  {
    records::RecordLog log = records::RecordLog::open(path("records"));
    for (const std::string& t : log.tasks("llvm")) after_kill += log.count(t, "llvm");
  }
  ASSERT_GE(after_kill, static_cast<size_t>(reported));
  ASSERT_LT(after_kill, static_cast<size_t>(kBudget));

  // Again with the same budget: the rest, exactly, and no config twice.
  const std::string err2 = path("run2.txt");
  ASSERT_EQ(wait(start(args, err2)), 0) << read(err2);
  const std::string log2 = read(err2);
  EXPECT_NE(log2.find("tuning ended (budget spent): 40 measurements in the log (" +
                      std::to_string(kBudget - after_kill) + " now)"),
            std::string::npos)
      << log2;
  EXPECT_NE(log2.find(", model est. "), std::string::npos) << log2;
  records::RecordLog log = records::RecordLog::open(path("records"));
  ASSERT_EQ(log.tasks("llvm").size(), 4u);
  size_t total = 0;
  for (const std::string& t : log.tasks("llvm")) {
    std::set<uint64_t> configs;
    for (const auto& r : log.records(t, "llvm")) {
      EXPECT_TRUE(configs.insert(r.config_index).second) << t << ": config " << r.config_index;
    }
    total += configs.size();
  }
  EXPECT_EQ(total, static_cast<size_t>(kBudget));
  EXPECT_NO_THROW(runtime::GraphExecutor::load(path("tuned.kiln")));
}

TEST_F(TuneCliTest, TheLogsCostModelCarriesToAnotherModelAndItsBuild) {
  const std::string err1 = path("tune1.txt");
  ASSERT_EQ(wait(start(tune_args(8), err1)), 0) << read(err1);
  EXPECT_NE(read(err1).find("cost model: no records to learn from"), std::string::npos)
      << read(err1);
  {
    records::RecordLog log = records::RecordLog::open(path("records"));
    EXPECT_TRUE(log.shelf("cost-model/xgb/llvm").has_value());  // trained after the run
  }
  // Another model, never measured but for its dense layer (the same as the first one's).
  std::ofstream(path("wide.onnx"), std::ios::binary) << testing::small_cnn_model(20);
  const std::string err2 = path("compile.txt");
  ASSERT_EQ(wait(start({"compile", path("wide.onnx"), "--target", "llvm", "--records",
                        path("records"), "-o", path("zero.kiln")},
                       err2)),
            0)
      << read(err2);
  // Zero-shot only where the log shows tuning gains much over a template's defaults (not always
  // so on this CPU): the three others are predicted or default.
  std::smatch m;
  const std::string text2 = read(err2);
  ASSERT_TRUE(std::regex_search(
      text2, m,
      std::regex(
          R"(configs from \S+: 1 measured, (\d) predicted by its cost model, (\d) default)")))
      << text2;
  EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), 3) << text2;
  ASSERT_EQ(wait(start({"compile", path("wide.onnx"), "--target", "llvm", "-o", path("plain.kiln")},
                       path("plain.txt"))),
            0);
  runtime::GraphExecutor zero = runtime::GraphExecutor::load(path("zero.kiln"));
  runtime::GraphExecutor plain = runtime::GraphExecutor::load(path("plain.kiln"));
  runtime::NDArray x = testing::random_array({1, 8, 20, 20}, 7);
  zero.set_input("x", x);
  plain.set_input("x", x);
  zero.run();
  plain.run();
  EXPECT_TRUE(testing::all_close(zero.output(0), plain.output(0).to_vector<float>(), 1e-4, 1e-5));
  // Tuning the other model starts from the kept model.
  const std::string err3 = path("tune2.txt");
  ASSERT_EQ(wait(start({"tune", path("wide.onnx"), "--target", "llvm", "--trials", "4", "--batch",
                        "4", "--records", path("records"), "-o", path("wide.kiln")},
                       err3)),
            0)
      << read(err3);
  EXPECT_NE(read(err3).find("cost model: kept model, learned from "), std::string::npos)
      << read(err3);
  // A record log that is not there is named.
  const std::string err4 = path("missing.txt");
  EXPECT_EQ(wait(start({"compile", path("wide.onnx"), "--records", path("nolog")}, err4)), 1);
  EXPECT_NE(read(err4).find(path("nolog") + "': no such folder"), std::string::npos) << read(err4);
}

TEST_F(TuneCliTest, BadArgumentsAreNamed) {
  const std::string err = path("bad.txt");
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--trials", "0"}, err)), 2);
  EXPECT_NE(read(err).find("--trials needs a positive number"), std::string::npos) << read(err);
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--explorer", "magic", "--records", path("r2")},
                       err)),
            1);
  EXPECT_NE(read(err).find("unknown explorer 'magic'"), std::string::npos) << read(err);
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--cost-model", "forest"}, err)), 2);
  EXPECT_NE(read(err).find("--cost-model: unknown cost model 'forest' (known: xgb, mlp)"),
            std::string::npos)
      << read(err);
  EXPECT_EQ(wait(start({"tune", path("missing.onnx"), "--records", path("r3")}, err)), 1);
  EXPECT_NE(read(err).find("missing.onnx"), std::string::npos) << read(err);
  std::ofstream(path("afile")) << "x";
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--records", path("afile")}, err)), 1);
  EXPECT_NE(read(err).find("afile"), std::string::npos) << read(err);
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--budget", "-3"}, err)), 2);
  EXPECT_NE(read(err).find("--budget needs a positive number"), std::string::npos) << read(err);
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--time", "soon"}, err)), 2);
  EXPECT_NE(read(err).find("--time needs a duration such as 90s, 10m or 1h, got 'soon'"),
            std::string::npos)
      << read(err);
  EXPECT_EQ(wait(start({"tune", path("model.onnx"), "--early-stop", "8"}, err)), 2);
  EXPECT_NE(read(err).find("--early-stop needs --budget or --time"), std::string::npos)
      << read(err);
}

}  // namespace
}  // namespace kiln
