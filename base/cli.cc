// Parsing and usage text of a program's command line (base/cli.h).
#include "base/cli.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <iostream>
#include <sstream>

namespace kiln::cli {
namespace {

constexpr size_t kWidth = 100;  // columns of the usage text

/// `text` with its words filled into lines of at most `width` columns; the lines after the first
/// start with `indent` (which the width does not count).
std::string wrap(const std::string& text, size_t width = kWidth, const std::string& indent = "") {
  std::istringstream words(text);
  std::string out, line, w;
  while (words >> w) {
    if (!line.empty() && line.size() + 1 + w.size() > width) {
      out += line + "\n" + indent;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

bool is_help(const std::string& a) { return a == "--help" || a == "-h"; }

const Flag* find_flag(const Program& p, const std::string& name) {
  for (const Flag& f : p.flags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string with_value(const Flag& f) { return f.name + (f.value.empty() ? "" : " " + f.value); }

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
  if (operands.empty()) throw UsageError(program + " needs a " + what);
  if (operands.size() > 1) {
    throw UsageError(program + " takes one " + what + ", got '" + operands[0] + "' and '" +
                     operands[1] + "'");
  }
  return operands[0];
}

void Args::no_operands() const {
  if (!operands.empty()) {
    throw UsageError(program + " takes no argument, got '" + operands[0] + "'");
  }
}

std::string Program::synopsis() const {
  std::vector<std::string> words{name};
  if (!operands.empty()) words.push_back(operands);
  for (const Flag& f : flags)
    words.push_back(f.required ? with_value(f) : "[" + with_value(f) + "]");
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

std::string Program::usage() const {
  std::ostringstream os;
  os << "usage: " << synopsis() << "\n" << wrap(summary) << "\n";
  size_t width = 0;
  for (const Flag& f : flags) width = std::max(width, with_value(f).size());
  if (!flags.empty()) os << "\n";
  // "  FLAG VALUE  help", the help in one column, wrapped within it.
  const size_t column = std::min<size_t>(2 + width + 2, kWidth / 2);
  for (const Flag& f : flags) {
    const std::string left = "  " + with_value(f) + "  ";
    const std::string help = f.help + (f.required ? " (required)" : "");
    os << left << std::string(column - std::min(column, left.size()), ' ')
       << wrap(help, kWidth - std::max(column, left.size()), std::string(column, ' ')) << "\n";
  }
  if (!notes.empty()) os << "\n" << wrap(notes) << "\n";
  return os.str();
}

Args Program::parse(const std::vector<std::string>& args, bool* help) const {
  Args out;
  out.program = name;
  std::string mistake;  // the first one; --help anywhere still wins
  auto note = [&](const std::string& m) {
    if (mistake.empty()) mistake = m;
  };
  *help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (is_help(a)) {
      *help = true;
      return out;
    }
    // "--flag=VALUE" is "--flag VALUE".
    const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    const std::string flag_name = eq == std::string::npos ? a : a.substr(0, eq);
    const Flag* f = find_flag(*this, flag_name);
    if (f != nullptr && !f->value.empty()) {
      if (eq != std::string::npos) {
        out.values[f->name].push_back(a.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        out.values[f->name].push_back(args[++i]);
      } else {
        note(a + " needs a value (" + f->value + ")");
      }
    } else if (f != nullptr) {
      if (eq != std::string::npos) {
        note(f->name + " takes no value, got '" + a + "'");
      } else {
        out.switches.insert(a);
      }
    } else if (a.size() > 1 && a[0] == '-') {
      note("unknown flag '" + flag_name + "'");
    } else {
      out.operands.push_back(a);
    }
  }
  if (!mistake.empty()) throw UsageError(mistake);
  if (operands.empty()) out.no_operands();
  for (const Flag& f : flags) {
    if (f.required && !out.has(f.name)) throw UsageError(name + " needs " + with_value(f));
  }
  return out;
}

void print_usage_error(const Program& program, const UsageError& e) {
  std::cerr << "error: " << e.what() << "\nusage: " << program.synopsis() << "\n(" << program.name
            << " --help lists its flags)\n";
}

int run(const Program& program, int argc, char** argv, const std::function<int(const Args&)>& main,
        int usage_exit) {
  try {
    bool help = false;
    const Args args = program.parse(std::vector<std::string>(argv + 1, argv + argc), &help);
    if (help) {
      std::cout << program.usage();
      return 0;
    }
    return main(args);
  } catch (const UsageError& e) {
    print_usage_error(program, e);
    return usage_exit;
  }
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

long long number_at_least(const std::string& text, const std::string& what, long long min) {
  long long v = 0;
  bool ok = true;
  try {
    v = whole_number(text, what);
  } catch (const UsageError&) {
    ok = false;
  }
  if (!ok || v < min) {
    throw UsageError(what + " needs a whole number >= " + std::to_string(min) + ", got '" + text +
                     "'");
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
  if (v <= 0 || v > INT_MAX) {
    throw UsageError(what + " needs a positive number, got '" + text + "'");
  }
  return static_cast<int>(v);
}

std::vector<int> positive_numbers(const std::string& text, const std::string& what) {
  std::vector<int> out;
  std::string item;
  std::istringstream items(text);
  try {
    while (std::getline(items, item, ',')) out.push_back(positive_number(item, what));
  } catch (const UsageError&) {
    out.clear();
  }
  if (out.empty() || text.back() == ',') {
    throw UsageError(what + " needs positive numbers separated by commas, got '" + text + "'");
  }
  return out;
}

double real_at_least(const std::string& text, const std::string& what, double min) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(v >= min) || !std::isfinite(v)) {
    std::ostringstream os;
    os << what << " needs a number >= " << min << ", got '" << text << "'";
    throw UsageError(os.str());
  }
  return v;
}

double duration_seconds(const std::string& text, const std::string& what) {
  const char unit = text.empty() ? '\0' : text.back();
  const double scale = unit == 'h' ? 3600 : unit == 'm' ? 60 : 1;
  const std::string number =
      unit == 'h' || unit == 'm' || unit == 's' ? text.substr(0, text.size() - 1) : text;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !(v > 0) || !std::isfinite(v)) {
    throw UsageError(what + " needs a duration such as 90s, 10m or 1h, got '" + text + "'");
  }
  return v * scale;
}

}  // namespace kiln::cli
