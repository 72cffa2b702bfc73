// The one command-line parser of every Kiln program: a program (or a `kiln` command) describes its
// operands and flags once, with each flag's help and default, and gets the parsing, the usage text
// that `--help` prints, and the same errors everywhere ("error: unknown flag '--x'", "error: --x
// needs a value (N)", exit code 2, with the synopsis and where to read the usage). The standard
// library only, so that a board's build (KILN_BOARD) can use it. The `kiln` CLI's dispatch from
// `kiln COMMAND ...` to a command lives in client/ on top of this.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::cli {

/// A mistake on the command line: printed with the program's synopsis, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One flag of a program.
struct Flag {
  std::string name;       ///< "--target", "-o"
  std::string value;      ///< what follows it in the usage ("TARGET"); empty for a switch
  std::string help;       ///< one line: what it does and its default ("(default: 4)")
  bool required = false;  ///< the program cannot run without it (shown without brackets)
};

/// A parsed command line: the operands in order, every value given to each flag (a flag given
/// twice keeps both), and the switches given.
struct Args {
  std::string program;  ///< the program's name, for messages ("kilnd", "kiln compile")
  std::vector<std::string> operands;
  std::map<std::string, std::vector<std::string>> values;
  std::set<std::string> switches;

  /// The last value of `flag`, or `fallback` when it is not given.
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  /// Every value of `flag`, in order.
  std::vector<std::string> all(const std::string& flag) const;
  bool has(const std::string& flag) const { return values.count(flag) || switches.count(flag); }
  /// The one operand; UsageError "PROGRAM needs a WHAT" / "PROGRAM takes one WHAT, got ...".
  const std::string& only_operand(const std::string& what) const;
  /// UsageError "PROGRAM takes no argument, got ..." when there are operands.
  void no_operands() const;
};

/// What a program (or one `kiln` command) takes: `NAME OPERANDS [flags]`.
/// Every member but the name may be left out of a designated initializer.
struct Program {
  std::string name;        ///< as it is typed: "kilnd", "kiln compile"
  std::string operands{};  ///< "MODEL.onnx", "BUNDLE"; "" for none (then an operand is a mistake)
  std::string summary{};   ///< one line under the synopsis
  std::vector<Flag> flags{};
  std::string notes{};  ///< a paragraph after the flags (what it writes, exit codes), may be empty

  /// "kiln compile MODEL.onnx [--target TARGET] [-o FILE] [--no-fuse] [--no-layout]", wrapped.
  std::string synopsis() const;
  /// The synopsis, the summary, one line per flag (a required one says so), the notes.
  std::string usage() const;
  /// Reads `args` (the words after the name) by this program's flags: `--flag VALUE`,
  /// `--flag=VALUE`, switches, operands. UsageError for a flag it does not have, one missing its
  /// value, a switch given a value, an operand when it takes none, or a required flag not given.
  /// *help is set when --help or -h is given in place of a flag (then nothing else is checked).
  Args parse(const std::vector<std::string>& args, bool* help) const;
};

/// Prints a UsageError for `program` on stderr: "error: WHAT", "usage: SYNOPSIS" and "(NAME --help
/// lists its flags)".
void print_usage_error(const Program& program, const UsageError& e);

/// A single-command program's main: parses argv[1..] by `program`; --help or -h prints the usage
/// on stdout and returns 0; a UsageError (from the parse or thrown by `main`) is printed with
/// print_usage_error and returns `usage_exit` (2 unless a program's exit codes say otherwise).
/// Otherwise returns what `main` returns; other exceptions pass through.
int run(const Program& program, int argc, char** argv, const std::function<int(const Args&)>& main,
        int usage_exit = 2);

/// Prints "error: <what>" for a failure (without a second "error: ") and returns the exit code 1.
int report(const std::exception& e);

/// The whole number `text` given for `what`; UsageError "WHAT needs a whole number, got 'TEXT'".
long long whole_number(const std::string& text, const std::string& what);
/// A whole number >= `min`; UsageError "WHAT needs a whole number >= MIN, got 'TEXT'".
long long number_at_least(const std::string& text, const std::string& what, long long min);
/// A whole number > 0 that fits an int; UsageError "WHAT needs a positive number, got 'TEXT'".
int positive_number(const std::string& text, const std::string& what);
/// Positive whole numbers separated by commas ("1,2,4"); UsageError "WHAT needs positive numbers
/// separated by commas, got 'TEXT'".
std::vector<int> positive_numbers(const std::string& text, const std::string& what);
/// A number with or without a fraction (seconds), >= `min`; UsageError "WHAT needs a number >= MIN,
/// got 'TEXT'".
double real_at_least(const std::string& text, const std::string& what, double min);
/// A positive duration in seconds: a number with an optional unit, s, m or h ("90", "90s", "10m",
/// "1.5h"); UsageError "WHAT needs a duration such as 90s, 10m or 1h, got 'TEXT'".
double duration_seconds(const std::string& text, const std::string& what);

}  // namespace kiln::cli
