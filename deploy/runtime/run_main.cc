// kiln-run: runs a bundle from the command line with the runtime alone (no compiler, no LLVM), so
// that a board can run a model compiled for it elsewhere. What it does is `kiln run`'s, from the
// same code (run_bundle.h); only the command line differs (a board has no `kiln`).
//
//   kiln-run BUNDLE [--input [NAME=]FILE.npy]... [-o DIR] [--profile] [--threads N] [--repeat N]
//            [--device cpu|cuda|opencl|vdla]
//
// Exit codes: 0 done; 2 a mistake on the command line, in the bundle or in the inputs (a missing,
// unknown or unreadable input, a wrong shape or dtype, a bundle that is damaged or built for
// another CPU or device, no such device here); 1 a failure while running or writing the outputs.
// Errors are "error: ..." lines on stderr.
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/run_bundle.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln-run BUNDLE [--input [NAME=]FILE.npy]... [-o DIR] [--profile] [--threads N]\n"
    "                [--repeat N] [--device cpu|cuda|opencl|vdla]\n"
    "Runs a Kiln bundle (kiln compile's output) on this machine with the runtime alone.\n"
    "  --input [NAME=]FILE.npy  an input by name, or without NAME= the next one in order (once\n"
    "                           per input; an input with a default value in the bundle may be\n"
    "                           left out)\n"
    "  -o DIR                   write each output to DIR/<output name>.npy, creating DIR\n"
    "                           (default: print each output's first values)\n"
    "  --profile                print every kernel's median time over the runs, and the time of\n"
    "                           a run (after one warm-up run)\n"
    "  --threads N              threads the kernels run on (default: KILN_NUM_THREADS, else all\n"
    "                           CPUs)\n"
    "  --repeat N               run N times and print the time of a run; the outputs are the\n"
    "                           last run's (default: 1)\n"
    "  --device KIND            where the kernels run: cpu (default) for a CPU bundle, cuda or\n"
    "                           opencl for a bundle built for that GPU target, vdla (or cpu)\n"
    "                           for a bundle built for the VDLA\n"
    "  --help                   this text\n"
    "Exit codes: 0 done, 2 a mistake in the command line, the bundle or the inputs, 1 a failure\n"
    "while running.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int positive(const std::string& text, const std::string& flag) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v <= 0 || v > INT_MAX) {
    throw UsageError(flag + " needs a positive number, got '" + text + "'");
  }
  return static_cast<int>(v);
}

/// The options of `args` (argv[1..]); *help when --help or -h is among them.
kiln::runtime::RunOptions parse(const std::vector<std::string>& args, bool* help) {
  kiln::runtime::RunOptions o;
  for (const std::string& a : args) {  // --help wins over the rest, even a mistake
    if (a == "--help" || a == "-h") {
      *help = true;
      return o;
    }
  }
  std::vector<std::string> operands;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--profile") {
      o.profile = true;
      continue;
    }
    if (a == "--input" || a == "-o" || a == "--threads" || a == "--repeat" || a == "--device") {
      if (i + 1 == args.size()) throw UsageError(a + " needs a value");
      const std::string& v = args[++i];
      if (a == "--input") {
        kiln::runtime::InputFile in = kiln::runtime::parse_input_file(v);
        if (in.path.empty()) throw UsageError("--input '" + v + "' names no file");
        o.inputs.push_back(in);
      } else if (a == "-o") {
        o.output_dir = v;
      } else if (a == "--device") {
        try {
          o.device = kiln::parse_device_kind(v);
        } catch (const kiln::Error& e) {
          throw UsageError("--device: " + std::string(e.what()).substr(7));  // without "error: "
        }
      } else if (a == "--threads") {
        o.threads = positive(v, a);
      } else {
        o.runs = positive(v, a);
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-') throw UsageError("unknown flag '" + a + "'");
    operands.push_back(a);
  }
  if (operands.empty()) throw UsageError("no bundle given");
  if (operands.size() > 1) {
    throw UsageError("one bundle at a time, got '" + operands[0] + "' and '" + operands[1] + "'");
  }
  o.bundle = operands[0];
  return o;
}

/// "error: <what>" on stderr (kiln::Error's message already starts with "error: ").
int fail(const std::exception& e, int code) {
  std::string m = e.what();
  if (m.rfind("error: ", 0) == 0) m = m.substr(7);
  std::cerr << "error: " << m << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  kiln::runtime::RunOptions options;
  try {
    bool help = false;
    options = parse(args, &help);
    if (help) {
      std::cout << kUsage;
      return 0;
    }
  } catch (const UsageError& e) {
    std::cerr << "error: " << e.what() << "\n" << kUsage;
    return 2;
  }
  kiln::runtime::PreparedRun run;
  try {
    run = kiln::runtime::prepare_run(options);
  } catch (const kiln::Error& e) {
    return fail(e, 2);
  } catch (const std::exception& e) {
    return fail(e, 1);
  }
  try {
    kiln::runtime::execute_run(run, options, std::cout);
  } catch (const std::exception& e) {
    return fail(e, 1);
  }
  return 0;
}
