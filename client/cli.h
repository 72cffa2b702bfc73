// The `kiln` commands on top of the one command-line parser (base/cli.h): a command is a
// cli::Program ("kiln compile MODEL.onnx [flags]") with its main and its heading in `kiln --help`,
// and dispatch() runs `kiln COMMAND ...`. Exit codes are the same everywhere: 0 done, 1 a failure
// ("error: ..."), 2 a mistake on the command line ("error: ..." and where to read the usage).
#pragma once

#include <string>
#include <vector>

#include "base/cli.h"

namespace kiln::cli {

using Main = int (*)(const Args&);

/// A `kiln` command: `kiln NAME OPERANDS [flags]`. A name of two words ("records export") is a
/// subcommand: `kiln records` alone lists the commands named "records ...".
struct Command {
  std::string name;      ///< "compile", "records export"
  std::string operands;  ///< "MODEL.onnx", "" for none
  std::string summary;   ///< one line, for `kiln --help`
  std::vector<Flag> flags;
  std::string notes;  ///< a paragraph after the flags (what it writes, exit codes), may be empty
  Main main = nullptr;
  std::string group;  ///< a heading in `kiln --help` ("" for the local commands)

  /// The command line it takes, named "kiln NAME": its synopsis, usage and parser.
  Program program() const { return {"kiln " + name, operands, summary, flags, notes}; }
};

/// `kiln ARGS`: runs the command args[0] (or args[0] args[1], a subcommand) of `commands` and
/// returns the exit code. No arguments: the usage on stderr, 2. `--help`, `-h` or `help
/// [COMMAND]`: the usage on stdout, 0. An unknown command names itself and lists the commands, 2;
/// a word with subcommands but none of them lists them (on stdout with 0 after --help, else 2).
/// `COMMAND --help`: the command's usage on stdout, 0. A UsageError: 2; any other exception:
/// "error: ..." and 1.
int dispatch(const std::vector<const Command*>& commands, const std::vector<std::string>& args);

}  // namespace kiln::cli
