// The regression run of a fuzz target in the ordinary build (g++, no libFuzzer): calls the
// target's LLVMFuzzerTestOneInput once on every file of the folders (or files) given, in name
// order, so that each seed and each fixed crash's reproducer is checked by the test suite.
//
//   fuzz_<target>_regression CORPUS_DIR_OR_FILE...
// Prints "case=fuzz_<target> inputs=<n>"; a crash, an escaping exception or a failed
// property ends the run with the file's name on stderr.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// The input being run, for the signal handler: a crash names its file.
const char* current_input = nullptr;

void on_fatal_signal(int sig) {
  if (current_input != nullptr) {
    const char* what = "fatal signal while running ";
    (void)!::write(STDERR_FILENO, what, std::strlen(what));
    (void)!::write(STDERR_FILENO, current_input, std::strlen(current_input));
    (void)!::write(STDERR_FILENO, "\n", 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

const kiln::cli::Program kRegression{
    .name = "fuzz_<target>_regression",
    .operands = "CORPUS_DIR_OR_FILE...",
    .summary =
        "Runs the fuzz target once on every file of the folders (or files) given, in name "
        "order.",
};

/// The run over `args`' operands; `target` is "fuzz_<target>", for the summary line.
int run_corpus(const kiln::cli::Args& args, const std::string& target) {
  if (args.operands.empty()) throw kiln::cli::UsageError("no corpus folder or file given");
  std::vector<fs::path> files;
  for (const std::string& a : args.operands) {
    const fs::path arg(a);
    if (fs::is_directory(arg)) {
      for (const auto& e : fs::directory_iterator(arg))
        if (e.is_regular_file()) files.push_back(e.path());
    } else if (fs::is_regular_file(arg)) {
      files.push_back(arg);
    } else {
      throw kiln::cli::UsageError("no such file or folder: " + a);
    }
  }
  std::sort(files.begin(), files.end());
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, on_fatal_signal);
  size_t ran = 0;
  for (const fs::path& f : files) {
    const std::string bytes = read_file(f);
    current_input = f.c_str();
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: uncaught exception: %s\n", f.c_str(), e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "%s: uncaught exception of an unknown type\n", f.c_str());
      return 1;
    }
    ++ran;
  }
  std::printf("case=%s inputs=%zu\n", target.c_str(), ran);
  return ran == 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = fs::path(argv[0]).filename().string();
  const std::string target = name.substr(0, name.rfind("_regression"));
  kiln::cli::Program program = kRegression;
  program.name = name;
  return kiln::cli::run(program, argc, argv,
                        [&](const kiln::cli::Args& args) { return run_corpus(args, target); });
}
