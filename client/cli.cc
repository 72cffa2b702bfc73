// The dispatch from `kiln COMMAND ...` to the command (client/cli.h).
#include "client/cli.h"

#include <algorithm>
#include <iostream>
#include <sstream>

namespace kiln::cli {
namespace {

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

/// The usage of every command: one line each, under its group's heading.
std::string overview(const std::vector<const Command*>& commands) {
  std::ostringstream os;
  os << "usage: kiln COMMAND [ARGS...]\n"
        "       kiln COMMAND --help    the command's flags and their defaults\n"
        "Kiln compiles deep-learning models (ONNX) into tuned kernels and runs them.\n";
  size_t width = 0;
  for (const Command* c : commands) width = std::max(width, c->name.size());
  std::string group = "\n";  // no command has this group: the first one prints its heading
  for (const Command* c : commands) {
    if (c->group != group) {
      group = c->group;
      os << "\n" << (group.empty() ? "commands" : group) << ":\n";
    }
    os << "  " << c->name << std::string(width - c->name.size() + 3, ' ') << c->summary << "\n";
  }
  return os.str();
}

std::string command_names(const std::vector<const Command*>& commands) {
  std::string names;
  for (const Command* c : commands) names += (names.empty() ? "" : ", ") + c->name;
  return names;
}

const Command* find_command(const std::vector<const Command*>& commands, const std::string& name) {
  for (const Command* c : commands) {
    if (c->name == name) return c;
  }
  return nullptr;
}

/// The command `args` starts with: its name's one or two words ("records export").
const Command* match_command(const std::vector<const Command*>& commands,
                             const std::vector<std::string>& args) {
  if (args.size() >= 2) {
    if (const Command* c = find_command(commands, args[0] + " " + args[1])) return c;
  }
  return find_command(commands, args[0]);
}

/// The commands named "WORD ..." ("records export", "records import" for "records").
std::vector<const Command*> subcommands(const std::vector<const Command*>& commands,
                                        const std::string& word) {
  std::vector<const Command*> out;
  for (const Command* c : commands) {
    if (c->name.rfind(word + " ", 0) == 0) out.push_back(c);
  }
  return out;
}

/// `kiln WORD` without one of its subcommands: their list ("usage: kiln records SUBCOMMAND").
std::string subcommand_usage(const std::string& word, const std::vector<const Command*>& subs) {
  std::ostringstream os;
  os << "usage: kiln " << word << " SUBCOMMAND [ARGS...]\n"
     << "       kiln " << word << " SUBCOMMAND --help    its flags and their defaults\n\n"
     << "subcommands:\n";
  size_t width = 0;
  for (const Command* c : subs) width = std::max(width, c->name.size() - word.size() - 1);
  for (const Command* c : subs) {
    const std::string sub = c->name.substr(word.size() + 1);
    os << "  " << sub << std::string(width - sub.size() + 3, ' ') << c->summary << "\n";
  }
  return os.str();
}

/// Runs `c` on `args` (they start with its name); see dispatch().
int run_command(const Command& c, const std::vector<std::string>& args) {
  const Program program = c.program();
  const size_t words = static_cast<size_t>(std::count(c.name.begin(), c.name.end(), ' ')) + 1;
  try {
    bool help = false;
    const Args parsed =
        program.parse({args.begin() + static_cast<std::ptrdiff_t>(words), args.end()}, &help);
    if (help) {
      std::cout << program.usage();
      return 0;
    }
    return c.main(parsed);
  } catch (const UsageError& e) {
    print_usage_error(program, e);
    return 2;
  } catch (const std::exception& e) {
    return report(e);
  }
}

}  // namespace

int dispatch(const std::vector<const Command*>& commands, const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << overview(commands);
    return 2;
  }
  if (is_help(args[0]) || args[0] == "help") {
    if (args[0] == "help" && args.size() > 1) {
      if (const Command* c = match_command(commands, {args.begin() + 1, args.end()})) {
        std::cout << c->program().usage();
        return 0;
      }
      if (auto subs = subcommands(commands, args[1]); !subs.empty()) {
        std::cout << subcommand_usage(args[1], subs);
        return 0;
      }
      std::cerr << "error: unknown command '" << args[1]
                << "'; the commands are: " << command_names(commands) << "\n";
      return 2;
    }
    std::cout << overview(commands);
    return 0;
  }
  const Command* c = match_command(commands, args);
  if (c == nullptr) {
    if (auto subs = subcommands(commands, args[0]); !subs.empty()) {
      // `kiln records --help`, `kiln records`, `kiln records frob`.
      if (args.size() >= 2 && is_help(args[1])) {
        std::cout << subcommand_usage(args[0], subs);
        return 0;
      }
      std::string names;
      for (const Command* sub : subs) {
        names += (names.empty() ? "" : ", ") + sub->name.substr(args[0].size() + 1);
      }
      std::cerr << "error: "
                << (args.size() < 2 ? "kiln " + args[0] + " needs a subcommand"
                                    : "unknown subcommand 'kiln " + args[0] + " " + args[1] + "'")
                << "; the subcommands are: " << names << " (kiln " << args[0]
                << " --help says what each does)\n";
      return 2;
    }
    std::cerr << "error: unknown command '" << args[0]
              << "'; the commands are: " << command_names(commands)
              << " (kiln --help says what each does)\n";
    return 2;
  }
  return run_command(*c, args);
}

}  // namespace kiln::cli
