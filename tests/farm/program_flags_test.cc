// Every program's command line comes from the one parser (base/cli.h): for kilnd, kiln-agent,
// kiln-worker, kiln-tuner, kiln-run, kiln-runner and kiln-device-info, `--help` lists exactly the
// flags the farm's tests, deploy/farm's systemd units and Kubernetes manifests use (each with its
// default, or saying it is required), and a flag it does not have, a flag missing its value or a
// bad number exits with the usage code (2; kiln-tuner 64, its 2 says the model is bad) naming the
// flag, with the synopsis, before the program does anything.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/board/board_test_util.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

struct Program {
  std::string name, binary;
  std::vector<std::string> flags;  ///< in --help's order
  int usage_exit = 2;
  std::vector<std::string> valid;  ///< words that parse (the required flags), before a mistake
  std::string number_flag;         ///< a flag taking a number, "" for none
};

const std::vector<Program>& programs() {
  static const std::vector<Program> all = {
      {"kilnd",
       KILND_BINARY,
       {"--listen",
        "--http",
        "--state",
        "--records",
        "--token-file",
        "--tls-cert",
        "--tls-key",
        "--tls-ca",
        "--local-workers",
        "--local-agent",
        "--local-agent-target",
        "--lease-ms",
        "--max-model-bytes",
        "--max-running-jobs",
        "--submits-per-minute",
        "--batch",
        "--explorer",
        "--repeat",
        "--run-timeout-ms",
        "--threads",
        "--driver-memory-mb",
        "--driver-idle-timeout-s",
        "--driver-tries"},
       2,
       {},
       "--lease-ms"},
      {"kiln-agent",
       KILN_AGENT_BINARY,
       {"--tracker", "--key", "--target", "--token-file", "--tls-ca", "--fingerprint", "--threads",
        "--runner", "--work-dir", "--emulator"},
       2,
       {"--tracker", "127.0.0.1:1", "--key", "k", "--target", "llvm"},
       "--threads"},
      {"kiln-worker",
       KILN_WORKER_BINARY,
       {"--tracker", "--token-file", "--tls-ca", "--name", "--batch", "--threads", "--target"},
       2,
       {"--tracker", "127.0.0.1:1"},
       "--batch"},
      {"kiln-tuner",
       KILN_TUNER_BINARY,
       {"--server", "--job", "--tls-ca", "--check", "--name", "--input-shape", "--memory-limit-mb"},
       64,
       {"--check", "model.onnx"},
       "--memory-limit-mb"},
      {"kiln-run",
       KILN_RUN_BINARY,
       {"--input", "-o", "--profile", "--threads", "--repeat", "--device"},
       2,
       {"model.kiln"},
       "--repeat"},
      {"kiln-runner", KILN_RUNNER_BINARY, {"--parent"}, 2, {}, "--parent"},
      {"kiln-device-info", KILN_DEVICE_INFO_BINARY, {}, 2, {}, ""},
  };
  return all;
}

class ProgramFlagsTest : public ::testing::Test {
 protected:
  testing::Run run(const Program& p, std::vector<std::string> args) {
    args.insert(args.begin(), p.binary);
    return testing::run(args, dir_.path().string());
  }
  testing::TempDir dir_{"program_flags_test"};
};

TEST_F(ProgramFlagsTest, HelpListsEveryFlagWithItsDefault) {
  for (const Program& p : programs()) {
    for (const char* how : {"--help", "-h"}) {
      const testing::Run r = run(p, {how});
      EXPECT_EQ(r.code, 0) << p.name << " " << how << ": " << r.err;
      EXPECT_EQ(r.out.rfind("usage: " + p.name, 0), 0u) << p.name << " " << how << ": " << r.out;
    }
    const std::string usage = run(p, {"--help"}).out;
    // One entry per flag, the flags listed and no other: "  --flag VALUE  what (default: ...)",
    // the help wrapped onto lines indented under it.
    std::vector<std::string> listed, texts;
    std::istringstream lines(usage);
    bool in_flag = false;  // the last line was a flag's
    for (std::string line; std::getline(lines, line);) {
      EXPECT_LE(line.size(), 100u) << p.name << ": " << line;
      if (line.rfind("  -", 0) == 0) {
        listed.push_back(line.substr(2, line.find(' ', 2) - 2));
        texts.push_back(line);
        in_flag = true;
      } else if (in_flag && line.rfind("    ", 0) == 0) {
        texts.back() += " " + line.substr(line.find_first_not_of(' '));
      } else {
        in_flag = false;
      }
    }
    for (const std::string& text : texts) {
      const bool has_value = text.find(' ', 2) < text.find("  ", 2);
      if (has_value) {
        EXPECT_TRUE(text.find("(default: ") != std::string::npos ||
                    text.find("required") != std::string::npos ||
                    text.find("once per input") != std::string::npos)
            << p.name << ": a flag with a value says its default: " << text;
      }
    }
    EXPECT_EQ(listed, p.flags) << p.name << "\n" << usage;
  }
}

TEST_F(ProgramFlagsTest, MistakesExitWithTheUsageCodeNamingTheFlag) {
  for (const Program& p : programs()) {
    // p.valid + `extra`: exits with the usage code, its stderr's first line "error: " + `says`
    // (the whole line, or its start when `prefix`), then the synopsis and where to read more.
    auto expect_mistake = [&](std::vector<std::string> extra, const std::string& says,
                              bool prefix = false) {
      std::vector<std::string> args = p.valid;
      args.insert(args.end(), extra.begin(), extra.end());
      const testing::Run r = run(p, args);
      EXPECT_EQ(r.code, p.usage_exit) << p.name << ": " << r.err;
      EXPECT_EQ(r.out, "") << p.name;
      EXPECT_EQ(r.err.rfind("error: " + says + (prefix ? "" : "\n"), 0), 0u) << p.name << ":\n"
                                                                             << r.err;
      EXPECT_NE(r.err.find("\nusage: " + p.name), std::string::npos) << p.name << ":\n" << r.err;
      EXPECT_NE(r.err.find("(" + p.name + " --help lists its flags)"), std::string::npos)
          << p.name << ": " << r.err;
      return r.err;
    };
    expect_mistake({"--frobnicate", "3"}, "unknown flag '--frobnicate'");
    expect_mistake({"--frobnicate=3"}, "unknown flag '--frobnicate'");
    if (!p.number_flag.empty()) {
      const std::string err = expect_mistake({p.number_flag, "many"}, p.number_flag + " needs a ",
                                             /*prefix=*/true);
      EXPECT_NE(err.find(", got 'many'\n"), std::string::npos) << p.name << ": " << err;
      const testing::Run r = run(p, {p.number_flag});
      EXPECT_EQ(r.code, p.usage_exit) << p.name;
      EXPECT_EQ(r.err.rfind("error: " + p.number_flag + " needs a value (", 0), 0u) << r.err;
    }
    // --help wins over a mistake.
    EXPECT_EQ(run(p, {"--frobnicate", "--help"}).code, 0) << p.name;
  }
}

TEST_F(ProgramFlagsTest, RequiredFlagsAndOperandsAreNamed) {
  auto err_of = [&](const std::string& name, const std::vector<std::string>& args) {
    for (const Program& p : programs()) {
      if (p.name == name) return run(p, args);
    }
    return testing::Run{};
  };
  testing::Run r = err_of("kiln-agent", {"--tracker", "127.0.0.1:1", "--key", "k"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: kiln-agent needs --target TARGET\n", 0), 0u) << r.err;
  r = err_of("kiln-worker", {});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: kiln-worker needs --tracker HOST:PORT\n", 0), 0u) << r.err;
  r = err_of("kiln-tuner", {"--server", "127.0.0.1:1"});
  EXPECT_EQ(r.code, 64);
  EXPECT_EQ(r.err.rfind("error: kiln-tuner needs --server and --job, or --check MODEL.onnx\n", 0),
            0u)
      << r.err;
  r = err_of("kilnd", {"extra"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: kilnd takes no argument, got 'extra'\n", 0), 0u) << r.err;
  r = err_of("kilnd", {"--lease-ms", "99"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: --lease-ms needs a whole number >= 100, got '99'\n", 0), 0u)
      << r.err;
  r = err_of("kiln-device-info", {"x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: kiln-device-info takes no argument, got 'x'\n", 0), 0u) << r.err;
}

}  // namespace
}  // namespace kiln
