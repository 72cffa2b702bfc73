// What every `kiln` command shares: its description (operands, flags with their defaults, notes),
// the parser that reads a command line by that description, the usage text that `--help` prints,
// and the dispatch from `kiln COMMAND ...` to the command. Exit codes are the same everywhere: 0
// done, 1 a failure ("error: ..."), 2 a mistake on the command line ("error: ..." and where to
// read the usage).
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::cli {

/// A mistake on the command line: printed with the command's synopsis, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One flag of a command.
struct Flag {
  std::string name;   ///< "--target", "-o"
  std::string value;  ///< what follows it in the usage ("TARGET"); empty for a switch
  std::string help;   ///< one line: what it does and its default
};

/// A parsed command line: the operands in order, every value given to each flag (a flag given
/// twice keeps both), and the switches given.
struct Args {
  std::string command;  ///< the command's name, for messages
  std::vector<std::string> operands;
  std::map<std::string, std::vector<std::string>> values;
  std::set<std::string> switches;

  /// The last value of `flag`, or `fallback` when it is not given.
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  /// Every value of `flag`, in order.
  std::vector<std::string> all(const std::string& flag) const;
  bool has(const std::string& flag) const { return values.count(flag) || switches.count(flag); }
  /// The one operand; UsageError "kiln CMD needs a WHAT" / "kiln CMD takes one WHAT, got ...".
  const std::string& only_operand(const std::string& what) const;
  /// UsageError "kiln CMD takes no argument, got ..." when there are operands.
  void no_operands() const;
};

using Main = int (*)(const Args&);

/// A `kiln` command: `kiln NAME OPERANDS [flags]`.
struct Command {
  std::string name;      ///< "compile"
  std::string operands;  ///< "MODEL.onnx", "" for none
  std::string summary;   ///< one line, for `kiln --help`
  std::vector<Flag> flags;
  std::string notes;  ///< a paragraph after the flags (what it writes, exit codes), may be empty
  Main main = nullptr;
  std::string group;  ///< a heading in `kiln --help` ("" for the local commands)

  /// "kiln compile MODEL.onnx [--target TARGET] [-o FILE] [--no-fuse] [--no-layout]", wrapped.
  std::string synopsis() const;
  /// The synopsis, the summary, one line per flag, the notes.
  std::string usage() const;
  /// Reads args[1..] (args[0] is the command's name) by this command's flags. UsageError for a
  /// flag it does not have or one missing its value. *help is set when --help or -h is given
  /// (then nothing else is checked).
  Args parse(const std::vector<std::string>& args, bool* help) const;
};

/// `kiln ARGS`: runs the command args[0] of `commands` and returns the exit code. No arguments:
/// the usage on stderr, 2. `--help`, `-h` or `help [COMMAND]`: the usage on stdout, 0. An unknown
/// command names itself and lists the commands, 2. `COMMAND --help`: the command's usage on
/// stdout, 0. A UsageError: 2; any other exception: "error: ..." and 1.
int dispatch(const std::vector<const Command*>& commands, const std::vector<std::string>& args);

/// Prints "error: <what>" for a failure and returns the exit code 1.
int report(const std::exception& e);

/// The whole number `text` given for `what`; UsageError "WHAT needs a whole number, got 'TEXT'".
long long whole_number(const std::string& text, const std::string& what);
/// A whole number > 0 that fits an int; UsageError "WHAT needs a positive number, got 'TEXT'".
int positive_number(const std::string& text, const std::string& what);

}  // namespace kiln::cli
