// Running a bundle from a command line: what `kiln run` (client/) and `kiln-run` (run_main.cc, the
// board's runner, which links no compiler) share — one implementation of binding .npy files to
// the inputs, the outputs' file names, the runs with their timings and the per-node profile, and
// the listing of the outputs.
//
// It happens in two steps, so that a caller can tell the user's mistakes from failures of the run:
// prepare_run loads the bundle, binds the inputs and makes the output folder, and raises
// kiln::Error for everything that can be wrong with the bundle, the inputs or the flags (each
// message names the file or the input); execute_run then runs it and writes the outputs.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "deploy/runtime/graph_executor.h"

namespace kiln::runtime {

/// One input given on the command line: "NAME=FILE.npy", or "FILE.npy" alone (name empty) for the
/// next input by position.
struct InputFile {
  std::string name;
  std::string path;
};

/// Splits "NAME=FILE.npy" at its first '='; without one the whole text is the file.
InputFile parse_input_file(const std::string& text);

struct RunOptions {
  std::string bundle;             ///< the bundle file
  std::vector<InputFile> inputs;  ///< by position first, then by name (see InputFile)
  std::string output_dir;         ///< each output to <dir>/<name>.npy; empty: print first values
  int runs = 1;                   ///< how many times the graph runs; the outputs are the last's
  bool profile = false;           ///< time every node over `runs` runs (after one warm-up run)
  int threads = 0;                ///< threads of the runtime's pool; 0 keeps the default
  /// Where the nodes run (--device): the CPU, the GPU kind a GPU bundle was built for, or kVdla
  /// (or kCpu) for a bundle with VDLA programs.
  TargetKind device = TargetKind::kCpu;
};

/// A loaded bundle with its inputs bound and, when there is an output folder, each output's file.
struct PreparedRun {
  GraphExecutor graph;
  std::vector<std::string> output_paths;  ///< empty: the outputs are printed
};

/// Loads the bundle and binds every input file; kiln::Error naming the bundle, the input or the
/// file when the bundle cannot be loaded (damaged, built for another CPU, or for another device
/// than options.device, or that device is absent), a file cannot be read
/// as .npy, an input is not the bundle's, is given twice, has the wrong shape or dtype, or is
/// missing (an input with a default value in the bundle may be left out), or the output folder
/// cannot be made. Sets the runtime's thread count when options.threads > 0.
PreparedRun prepare_run(const RunOptions& options);

/// Runs the graph options.runs times and prints to `out`: on a GPU, the device first; with
/// options.profile, every node's
/// median time (slowest first) and the time of each run, on the CPU also a header with the
/// machine's measured peak and bandwidth (machine_peak.h) and each kernel's GFLOP/s, GB/s, the
/// roof that bounds it and the time it loses there (kernel_efficiency.h; "-" where the bundle
/// does not give its work); without, the time of each run when there
/// is more than one; then one line per output, "output 'NAME': DTYPE[SHAPE]", with " -> FILE"
/// after writing it when there is an output folder, else its first values.
void execute_run(PreparedRun& run, const RunOptions& options, std::ostream& out);

/// A file-name-safe form of an output name: characters other than letters, digits, '.', '-' and
/// '_' become '_', and so does a leading '.' (no hidden files); an empty name is "output".
std::string file_safe(const std::string& name);

/// Where each output of `graph` goes under `dir`: <file_safe(name)>.npy, with _2, _3, ... added to
/// a name that two outputs would share.
std::vector<std::string> output_paths(const GraphExecutor& graph, const std::string& dir);

}  // namespace kiln::runtime
