// The one command-line parser (base/cli.h): flags with values, `--flag=value`, switches, repeated
// flags, operands, required flags, --help winning over mistakes, the errors' wording, the usage
// text, the number helpers, and cli::run's exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/cli.h"

namespace kiln::cli {
namespace {

const Program kProgram{
    .name = "kiln-test",
    .operands = "FILE",
    .summary = "A program for the test.",
    .flags = {{"--server", "HOST:PORT", "the server", true},
              {"--batch", "N", "builds at once (default: 4)"},
              {"--target", "T", "a target; repeatable (default: any)"},
              {"-o", "DIR", "where to write (default: print)"},
              {"--profile", "", "time every kernel"}},
    .notes = "Exit codes: 0 done, 1 a failure, 2 a mistake on the command line.",
};

const Program kNoOperands{.name = "kiln-none", .summary = "Takes no operand."};

Args parse(const Program& p, const std::vector<std::string>& args) {
  bool help = false;
  Args a = p.parse(args, &help);
  EXPECT_FALSE(help);
  return a;
}

/// The UsageError's message for `args`, or "" when they parse.
std::string mistake(const Program& p, const std::vector<std::string>& args) {
  try {
    parse(p, args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Cli, ValuesSwitchesAndOperands) {
  const Args a = parse(kProgram, {"in.onnx", "--server", "h:1", "--batch=8", "-o", "out",
                                  "--profile", "--target", "llvm", "--target=cuda"});
  EXPECT_EQ(a.program, "kiln-test");
  EXPECT_EQ(a.operands, std::vector<std::string>{"in.onnx"});
  EXPECT_EQ(a.only_operand("FILE"), "in.onnx");
  EXPECT_EQ(a.get("--server"), "h:1");
  EXPECT_EQ(a.get("--batch"), "8");
  EXPECT_EQ(a.get("-o"), "out");
  EXPECT_TRUE(a.has("--profile"));
  EXPECT_EQ(a.all("--target"), (std::vector<std::string>{"llvm", "cuda"}));
  // Not given: the fallback, no values.
  EXPECT_FALSE(a.has("--nothing"));
  EXPECT_EQ(a.get("--nothing", "dflt"), "dflt");
  EXPECT_TRUE(a.all("--nothing").empty());
  // A flag given twice: the last value wins for get(), all() keeps both.
  const Args twice = parse(kProgram, {"f", "--server", "a", "--batch", "1", "--batch", "2"});
  EXPECT_EQ(twice.get("--batch"), "2");
  EXPECT_EQ(twice.all("--batch"), (std::vector<std::string>{"1", "2"}));
  // A value may start with '-' or hold '=': it is the flag's, not a flag.
  const Args odd = parse(kProgram, {"f", "--server", "-x", "--target", "llvm -mcpu=native"});
  EXPECT_EQ(odd.get("--server"), "-x");
  EXPECT_EQ(odd.get("--target"), "llvm -mcpu=native");
  // "-" alone is an operand (stdin, by convention).
  EXPECT_EQ(parse(kProgram, {"-", "--server", "h"}).operands, std::vector<std::string>{"-"});
  EXPECT_EQ(parse(kProgram, {"--server=a=b", "f"}).get("--server"), "a=b");
}

TEST(Cli, MistakesAreUsageErrorsNamingTheFlag) {
  EXPECT_EQ(mistake(kProgram, {"f", "--server", "h", "--frobnicate"}),
            "unknown flag '--frobnicate'");
  EXPECT_EQ(mistake(kProgram, {"f", "--server", "h", "--frobnicate=3"}),
            "unknown flag '--frobnicate'");
  EXPECT_EQ(mistake(kProgram, {"f", "--server", "h", "-x"}), "unknown flag '-x'");
  EXPECT_EQ(mistake(kProgram, {"f", "--server", "h", "--batch"}), "--batch needs a value (N)");
  EXPECT_EQ(mistake(kProgram, {"f", "--server", "h", "--profile=yes"}),
            "--profile takes no value, got '--profile=yes'");
  EXPECT_EQ(mistake(kProgram, {"f"}), "kiln-test needs --server HOST:PORT");
  // The first mistake is the one reported.
  EXPECT_EQ(mistake(kProgram, {"--bad", "--batch"}), "unknown flag '--bad'");
  // Operands: none where the program takes none; one where it takes one.
  EXPECT_EQ(mistake(kNoOperands, {"x"}), "kiln-none takes no argument, got 'x'");
  EXPECT_EQ(mistake(kNoOperands, {"--x"}), "unknown flag '--x'");
  EXPECT_EQ(mistake(kNoOperands, {}), "");
  try {
    parse(kProgram, {"--server", "h"}).only_operand("FILE");
    ADD_FAILURE() << "no operand accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "kiln-test needs a FILE");
  }
  try {
    parse(kProgram, {"a", "b", "--server", "h"}).only_operand("FILE");
    ADD_FAILURE() << "two operands accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "kiln-test takes one FILE, got 'a' and 'b'");
  }
}

TEST(Cli, HelpWinsOverEverything) {
  // -h as a flag's value is the value.
  EXPECT_EQ(parse(kProgram, {"f", "--server", "-h"}).get("--server"), "-h");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"--frobnicate", "--help"}, {"a", "b", "--help"}}) {
    bool help = false;
    EXPECT_NO_THROW(kProgram.parse(args, &help)) << args.back();
    EXPECT_TRUE(help) << args.back();
  }
}

TEST(Cli, UsageListsEveryFlagWithItsHelp) {
  const std::string usage = kProgram.usage();
  EXPECT_EQ(
      usage.rfind("usage: kiln-test FILE --server HOST:PORT [--batch N] [--target T] [-o DIR] "
                  "[--profile]\nA program for the test.\n",
                  0),
      0u)
      << usage;
  for (const Flag& f : kProgram.flags) {
    const std::string left = f.name + (f.value.empty() ? "" : " " + f.value);
    EXPECT_NE(usage.find("\n  " + left + " "), std::string::npos) << f.name << "\n" << usage;
    EXPECT_NE(usage.find(f.help), std::string::npos) << f.name;
  }
  EXPECT_NE(usage.find("(default: 4)"), std::string::npos);
  EXPECT_NE(usage.find("\nExit codes: 0 done"), std::string::npos);
  // The help texts are aligned in one column.
  EXPECT_NE(usage.find("\n  --batch N           builds at once"), std::string::npos) << usage;
  EXPECT_NE(usage.find("\n  --profile           time every kernel"), std::string::npos) << usage;
}

TEST(Cli, SynopsisWrapsAtOneHundredColumns) {
  Program p{.name = "kiln-wide", .operands = "MODEL.onnx", .summary = "s"};
  for (int i = 0; i < 12; ++i) p.flags.push_back({"--flag-" + std::to_string(i), "VALUE", "h"});
  const std::string usage = p.usage();
  std::istringstream lines(usage);
  int synopsis_lines = 0;
  for (std::string line; std::getline(lines, line) && line != "s";) {
    EXPECT_LE(line.size(), 100u) << line;
    if (synopsis_lines > 0) {
      EXPECT_EQ(line.rfind(std::string(17, ' ') + "[--flag-", 0), 0u) << line;
    }
    ++synopsis_lines;
  }
  EXPECT_GT(synopsis_lines, 1) << usage;
}

TEST(Cli, LongHelpAndSummaryWrapUnderTheirColumn) {
  std::string words;
  for (int i = 0; i < 40; ++i) words += " word" + std::to_string(i);
  const Program p{.name = "kiln-long",
                  .summary = "A summary of" + words,
                  .flags = {{"--a", "N", "short"}, {"--long-flag", "VALUE", "long" + words}}};
  const std::string usage = p.usage();
  std::istringstream lines(usage);
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;
    all.push_back(line);
  }
  // The help column starts after "  --long-flag VALUE  " (21 columns); continuation lines too.
  EXPECT_NE(usage.find("\n  --a N              short\n"), std::string::npos) << usage;
  const auto first = std::find_if(all.begin(), all.end(), [](const std::string& l) {
    return l.rfind("  --long-flag VALUE  long word0", 0) == 0;
  });
  ASSERT_NE(first, all.end()) << usage;
  ASSERT_NE(first + 1, all.end());
  EXPECT_EQ((first + 1)->rfind(std::string(21, ' ') + "word", 0), 0u) << usage;
  // No word is lost.
  std::string joined;
  for (auto it = first; it != all.end() && !it->empty(); ++it) joined += " " + *it;
  EXPECT_NE(joined.find("word39"), std::string::npos) << usage;
  EXPECT_NE(usage.find("word39\n"), std::string::npos);
}

TEST(Cli, Numbers) {
  EXPECT_EQ(whole_number("-12", "--n"), -12);
  EXPECT_EQ(number_at_least("100", "--lease-ms", 100), 100);
  EXPECT_EQ(positive_number("7", "--threads"), 7);
  auto message = [](auto f) {
    try {
      f();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message([] { whole_number("12x", "--n"); }), "--n needs a whole number, got '12x'");
  EXPECT_EQ(message([] { whole_number("", "--n"); }), "--n needs a whole number, got ''");
  EXPECT_EQ(message([] { number_at_least("99", "--lease-ms", 100); }),
            "--lease-ms needs a whole number >= 100, got '99'");
  EXPECT_EQ(message([] { number_at_least("many", "--threads", 0); }),
            "--threads needs a whole number >= 0, got 'many'");
  EXPECT_EQ(message([] { positive_number("0", "--repeat"); }),
            "--repeat needs a positive number, got '0'");
  EXPECT_EQ(message([] { positive_number("3000000000", "--repeat"); }),
            "--repeat needs a positive number, got '3000000000'");
  EXPECT_EQ(message([] { whole_number("99999999999999999999", "--n"); }),
            "--n needs a whole number, got '99999999999999999999'");
  EXPECT_EQ(positive_numbers("1,2,16", "--threads"), (std::vector<int>{1, 2, 16}));
  for (const char* bad : {"", "1,,2", "1,x", "0", "1,2,"}) {
    EXPECT_EQ(
        message([&] { positive_numbers(bad, "--threads"); }),
        std::string("--threads needs positive numbers separated by commas, got '") + bad + "'");
  }
  EXPECT_DOUBLE_EQ(real_at_least("0.25", "--min-time", 0), 0.25);
  EXPECT_DOUBLE_EQ(real_at_least("3", "--seconds", 0), 3.0);
  for (const char* bad : {"", "-1", "1s", "nan", "inf"}) {
    EXPECT_EQ(message([&] { real_at_least(bad, "--min-time", 0); }),
              std::string("--min-time needs a number >= 0, got '") + bad + "'");
  }
  EXPECT_DOUBLE_EQ(duration_seconds("90", "--time"), 90.0);
  EXPECT_DOUBLE_EQ(duration_seconds("90s", "--time"), 90.0);
  EXPECT_DOUBLE_EQ(duration_seconds("10m", "--time"), 600.0);
  EXPECT_DOUBLE_EQ(duration_seconds("1.5h", "--time"), 5400.0);
  for (const char* bad : {"", "m", "0", "-1m", "10 m", "10d", "nan", "infs", "1mm"}) {
    EXPECT_EQ(message([&] { duration_seconds(bad, "--time"); }),
              std::string("--time needs a duration such as 90s, 10m or 1h, got '") + bad + "'");
  }
}

/// cli::run on `args` (argv[0] included) with a main that records what it got; its exit code,
/// stdout and stderr.
struct Ran {
  int code = -1;
  std::string out, err;
  Args got;
};
Ran run_with(const std::vector<std::string>& args, int usage_exit = 2,
             bool main_throws_usage = false) {
  std::vector<std::string> words = args;
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  Ran r;
  std::ostringstream out, err;
  std::streambuf* old_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* old_err = std::cerr.rdbuf(err.rdbuf());
  r.code = run(
      kProgram, static_cast<int>(argv.size()), argv.data(),
      [&](const Args& a) {
        r.got = a;
        if (main_throws_usage) throw UsageError("--batch needs a positive number, got '0'");
        return 7;
      },
      usage_exit);
  std::cout.rdbuf(old_out);
  std::cerr.rdbuf(old_err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(Cli, RunGivesExitCodesAndMessages) {
  Ran r = run_with({"kiln-test", "f", "--server", "h"});
  EXPECT_EQ(r.code, 7);
  EXPECT_EQ(r.got.get("--server"), "h");
  EXPECT_EQ(r.out + r.err, "");

  r = run_with({"kiln-test", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, kProgram.usage());
  EXPECT_EQ(r.err, "");

  r = run_with({"kiln-test", "f", "--server", "h", "--frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "error: unknown flag '--frobnicate'\nusage: " + kProgram.synopsis() +
                       "\n(kiln-test --help lists its flags)\n");

  // A UsageError thrown by the program's main is reported the same way.
  r = run_with({"kiln-test", "f", "--server", "h"}, 2, true);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("error: --batch needs a positive number, got '0'\nusage: kiln-test", 0), 0u)
      << r.err;

  // A program whose exit codes give 2 another meaning picks its own.
  r = run_with({"kiln-test"}, 64);
  EXPECT_EQ(r.code, 64);
  EXPECT_EQ(r.err.rfind("error: kiln-test needs --server HOST:PORT\n", 0), 0u) << r.err;
}

TEST(Cli, ReportStripsASecondErrorPrefix) {
  std::ostringstream err;
  std::streambuf* old = std::cerr.rdbuf(err.rdbuf());
  const int a = report(std::runtime_error("error: no such file 'x'"));
  const int b = report(std::runtime_error("disk full"));
  std::cerr.rdbuf(old);
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(err.str(), "error: no such file 'x'\nerror: disk full\n");
}

}  // namespace
}  // namespace kiln::cli
