// Parsing, usage text and dispatch for the `kiln` commands.
#include "client/cli.h"

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>

namespace kiln::cli {
namespace {

constexpr size_t kWidth = 100;  // columns of the usage text

/// `text` with its words filled into lines of at most kWidth columns.
std::string wrap(const std::string& text) {
  std::istringstream words(text);
  std::string out, line, w;
  while (words >> w) {
    if (!line.empty() && line.size() + 1 + w.size() > kWidth) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

const Flag* find_flag(const Command& c, const std::string& name) {
  for (const Flag& f : c.flags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

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

/// Runs `c` on `args`; see dispatch().
int run_command(const Command& c, const std::vector<std::string>& args) {
  try {
    bool help = false;
    const Args parsed = c.parse(args, &help);
    if (help) {
      std::cout << c.usage();
      return 0;
    }
    return c.main(parsed);
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\nusage: " << c.synopsis() << "\n(kiln " << c.name
              << " --help lists its flags)\n";
    return 2;
  } catch (const std::exception& e) {
    return report(e);
  }
}

}  // namespace

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  auto it = values.find(flag);
  return it == values.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::all(const std::string& flag) const {
  auto it = values.find(flag);
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

const std::string& Args::only_operand(const std::string& what) const {
  if (operands.empty()) throw UsageError("kiln " + command + " needs a " + what);
  if (operands.size() > 1) {
    throw UsageError("kiln " + command + " takes one " + what + ", got '" + operands[0] +
                     "' and '" + operands[1] + "'");
  }
  return operands[0];
}

void Args::no_operands() const {
  if (!operands.empty()) {
    throw UsageError("kiln " + command + " takes no argument, got '" + operands[0] + "'");
  }
}

std::string Command::synopsis() const {
  std::vector<std::string> words{"kiln " + name};
  if (!operands.empty()) words.push_back(operands);
  for (const Flag& f : flags) {
    words.push_back("[" + f.name + (f.value.empty() ? "" : " " + f.value) + "]");
  }
  // Printed after "usage: "; continuation lines start under the operands.
  const std::string indent(7 + words[0].size() + 1, ' ');
  std::string out, line;
  for (const std::string& w : words) {
    const size_t column = (out.empty() ? 7 : 0) + line.size();
    if (!line.empty() && line != indent && column + 1 + w.size() > kWidth) {
      out += line + "\n";
      line = indent;
    }
    line += (line.empty() || line == indent ? "" : " ") + w;
  }
  return out + line;
}

std::string Command::usage() const {
  std::ostringstream os;
  os << "usage: " << synopsis() << "\n" << summary << "\n";
  size_t width = 0;
  for (const Flag& f : flags) {
    width = std::max(width, f.name.size() + (f.value.empty() ? 0 : 1 + f.value.size()));
  }
  if (!flags.empty()) os << "\n";
  for (const Flag& f : flags) {
    const std::string left = f.name + (f.value.empty() ? "" : " " + f.value);
    os << "  " << left << std::string(width - left.size() + 2, ' ') << f.help << "\n";
  }
  if (!notes.empty()) os << "\n" << wrap(notes) << "\n";
  return os.str();
}

Args Command::parse(const std::vector<std::string>& args, bool* help) const {
  Args out;
  out.command = name;
  std::string mistake;  // the first one; --help anywhere still wins
  *help = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const Flag* f = find_flag(*this, a);
    if (is_help(a)) {
      *help = true;
      return out;
    }
    if (f != nullptr && !f->value.empty()) {
      if (i + 1 >= args.size()) {
        if (mistake.empty()) mistake = a + " needs a value (" + f->value + ")";
        continue;
      }
      out.values[a].push_back(args[++i]);
    } else if (f != nullptr) {
      out.switches.insert(a);
    } else if (a.size() > 1 && a[0] == '-') {
      if (mistake.empty()) mistake = "kiln " + name + " has no option '" + a + "'";
    } else {
      out.operands.push_back(a);
    }
  }
  if (!mistake.empty()) throw UsageError(mistake);
  return out;
}

int dispatch(const std::vector<const Command*>& commands, const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << overview(commands);
    return 2;
  }
  if (is_help(args[0]) || args[0] == "help") {
    if (args[0] == "help" && args.size() > 1) {
      if (const Command* c = find_command(commands, args[1])) {
        std::cout << c->usage();
        return 0;
      }
      std::cerr << "error: unknown command '" << args[1]
                << "'; the commands are: " << command_names(commands) << "\n";
      return 2;
    }
    std::cout << overview(commands);
    return 0;
  }
  const Command* c = find_command(commands, args[0]);
  if (c == nullptr) {
    std::cerr << "error: unknown command '" << args[0]
              << "'; the commands are: " << command_names(commands)
              << " (kiln --help says what each does)\n";
    return 2;
  }
  return run_command(*c, args);
}

int report(const std::exception& e) {
  std::string msg = e.what();
  if (msg.rfind("error: ", 0) == 0) msg = msg.substr(7);
  std::cerr << "error: " << msg << "\n";
  return 1;
}

long long whole_number(const std::string& text, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw UsageError(what + " needs a whole number, got '" + text + "'");
  }
  return v;
}

int positive_number(const std::string& text, const std::string& what) {
  long long v = 0;
  try {
    v = whole_number(text, what);
  } catch (const UsageError&) {
    v = 0;
  }
  if (v <= 0 || v > INT32_MAX) {
    throw UsageError(what + " needs a positive number, got '" + text + "'");
  }
  return static_cast<int>(v);
}

}  // namespace kiln::cli
