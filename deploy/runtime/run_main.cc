// kiln-run: runs a bundle from the command line with the runtime alone (no compiler, no LLVM), so
// that a board can run a model compiled for it elsewhere. What it does is `kiln run`'s, from the
// same code (run_bundle.h); only the command line differs (a board has no `kiln`).
//
//   kiln-run BUNDLE [--input [NAME=]FILE.npy]... [-o DIR] [--profile] [--threads N] [--repeat N]
//            [--device cpu|cuda|opencl|vdla]        (`kiln-run --help` says what each flag does)
//
// Exit codes: 0 done; 2 a mistake on the command line, in the bundle or in the inputs (a missing,
// unknown or unreadable input, a wrong shape or dtype, a bundle that is damaged or built for
// another CPU or device, no such device here); 1 a failure while running or writing the outputs.
// Errors are "error: ..." lines on stderr.
#include <exception>
#include <iostream>
#include <string>

#include "base/cli.h"
#include "base/error.h"
#include "deploy/runtime/run_bundle.h"

namespace {

using kiln::cli::UsageError;

const kiln::cli::Program kRun{
    .name = "kiln-run",
    .operands = "BUNDLE",
    .summary = "Runs a Kiln bundle (kiln compile's output) on this machine with the runtime alone.",
    .flags =
        {{"--input", "[NAME=]FILE.npy",
          "an input by name, or without NAME= the next one in order; once per input (an input "
          "with a default value in the bundle may be left out)"},
         {"-o", "DIR",
          "write each output to DIR/<output name>.npy, creating DIR (default: print each "
          "output's first values)"},
         {"--profile", "",
          "print every kernel's median time over the runs, its GFLOP/s and GB/s against the "
          "machine's measured peak and bandwidth, and the time of a run"},
         {"--threads", "N",
          "threads the kernels run on (default: KILN_NUM_THREADS, else all CPUs)"},
         {"--repeat", "N",
          "run N times and print the time of a run; the outputs are the last run's (default: 1)"},
         {"--device", "cpu|cuda|opencl|vdla",
          "where the kernels run: the CPU, the GPU of a bundle built for it, or the VDLA's "
          "simulator for a bundle built for the VDLA (default: cpu)"}},
    .notes =
        "With --profile the runs follow one warm-up run. Exit codes: 0 done; 2 a mistake on "
        "the command line, in the bundle or in the inputs (a missing, unknown or unreadable "
        "input, a wrong shape or dtype, a bundle that is damaged or built for another CPU or "
        "device, no such device here); 1 a failure while running or writing the outputs.",
};

/// The options of a parsed command line.
kiln::runtime::RunOptions options_of(const kiln::cli::Args& args) {
  kiln::runtime::RunOptions o;
  o.bundle = args.only_operand("BUNDLE");
  for (const std::string& v : args.all("--input")) {
    kiln::runtime::InputFile in = kiln::runtime::parse_input_file(v);
    if (in.path.empty()) throw UsageError("--input '" + v + "' names no file");
    o.inputs.push_back(in);
  }
  o.output_dir = args.get("-o");
  o.profile = args.has("--profile");
  if (args.has("--device")) {
    try {
      o.device = kiln::parse_device_kind(args.get("--device"));
    } catch (const kiln::Error& e) {
      std::string msg = e.what();
      if (msg.rfind("error: ", 0) == 0) msg.erase(0, 7);
      throw UsageError("--device: " + msg);
    }
  }
  if (args.has("--threads"))
    o.threads = kiln::cli::positive_number(args.get("--threads"), "--threads");
  if (args.has("--repeat")) o.runs = kiln::cli::positive_number(args.get("--repeat"), "--repeat");
  return o;
}

int run_main(const kiln::cli::Args& args) {
  const kiln::runtime::RunOptions options = options_of(args);
  kiln::runtime::PreparedRun run;
  try {
    run = kiln::runtime::prepare_run(options);
  } catch (const kiln::Error& e) {
    kiln::cli::report(e);
    return 2;
  } catch (const std::exception& e) {
    return kiln::cli::report(e);
  }
  try {
    kiln::runtime::execute_run(run, options, std::cout);
  } catch (const std::exception& e) {
    return kiln::cli::report(e);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kRun, argc, argv, run_main); }
