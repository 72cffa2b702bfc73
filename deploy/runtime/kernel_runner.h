// Measuring one compiled kernel: the request (which library, which function, the arguments as
// .npy files or output shapes, the reference outputs, number / repeat / min_repeat_ms, cool-down,
// cache flush), the result (costs or an error kind), their JSON forms, and run_kernel, which does
// the work in the calling process. run_kernel is what `kiln-runner` (runner_main.cc) runs inside
// the guarded child that measure_in_child (measure_child.h) starts; nothing here needs LLVM, so a
// board's agent can measure with the runtime alone.
//
// On a GPU (request.device "cuda" or "opencl") the library is a DeviceProgram's JSON file
// (device_program.h) and the function its name: the inputs are copied to the device once, the
// outputs are allocated there, the warm-up launch's outputs are copied back and checked, and each
// repeat's `number` launches are timed by the device's events (DeviceAPI::time_ms), with the same
// growth, statistics and contention rule as on the CPU. A program the device refuses to build is
// kCompileError with the driver's log; a launch the device refuses is kRuntimeError.
//
// On the VDLA (request.device "vdla") the library is a VdlaProgram's JSON file
// (deploy/vdla/driver/program.h) and the function its name: the program runs once on the VDLA's
// simulator (vdla_run.h: the paper's prototype, executing every instruction and timing it on the
// cycle model), its outputs are checked, and the one cost is cycles / 200 MHz. The cycle model is
// deterministic, so number, repeat and the timing options do not apply; the result carries the
// cycles. A malformed program, tensors that do not match it and a stream the device refuses (a
// deadlock, a row out of range) are kRuntimeError naming what is wrong.
//
// Timing follows TVM's time evaluator: one warm-up call (which is also the call whose outputs are
// compared with the references), then `repeat` repeats of `number` calls each; while one repeat of
// `number` calls lasts less than min_repeat_ms, `number` grows (at least doubling, enough to reach
// the minimum at the measured speed) and the repeat is timed again; the grown number carries over
// to later repeats. Each repeat reports its mean time per call. Between repeats the runner sleeps
// cooldown_ms and, with flush_cache, writes a 64 MiB buffer (larger than the last-level cache),
// so that each repeat's first call starts with cold caches (use number = 1 for cold-cache timing).
//
// Contention: a repeat during which this process's threads waited for a CPU (runnable, but
// another process held it: the run-queue wait of Linux's /proc/self/task/*/schedstat) for more
// than 1% of the repeat's time is *disturbed*, and is timed again until the disturbed repeats
// thrown away add up to the request's disturbed_retry_ms (clean repeats do not count), so that a
// build or test running beside the measurement does not halve a candidate's speed in the log.
// When the allowance runs out first, the disturbed costs are kept (a measurement is never lost)
// and the result says `contended`. Where the kernel does not report run-queue waits (no
// schedstat), no repeat counts as disturbed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/error_kind.h"
#include "base/json.h"
#include "base/target_kind.h"

namespace kiln::runtime {

/// One argument of the measured function, in order.
struct RunArg {
  enum class Kind { kInput, kOutput };
  Kind kind = Kind::kInput;
  std::string input;              ///< kInput: the .npy file holding the array
  std::string dtype = "float32";  ///< kOutput: element type ("float32", "int8", ...)
  std::vector<int64_t> shape;     ///< kOutput: shape of the array allocated for it
  std::string reference;          ///< kOutput: .npy of the expected values; empty = not checked
  double rtol = 1e-4;             ///< kOutput: |out - ref| <= atol + rtol * |ref| (np.allclose)
  double atol = 1e-5;

  static RunArg make_input(std::string npy_path);
  static RunArg make_output(std::string dtype, std::vector<int64_t> shape,
                            std::string reference = "", double rtol = 1e-4, double atol = 1e-5);
};

/// What to measure and how. The JSON form is the runner's stdin (see runner_main.cc).
struct RunRequest {
  std::string library;   ///< shared object following c_abi.h; on a GPU a DeviceProgram JSON file
  std::string function;  ///< entry name; on a GPU the program's name
  /// Where it runs: kCpu (a shared object), kCuda or kOpenCL (a DeviceProgram, on device 0 of
  /// that kind, or KILN_OPENCL_DEVICE's), kVdla (a VdlaProgram on the VDLA's simulator). In the
  /// JSON, "device": "cpu", "cuda", "opencl" or "vdla" (base/target_kind.h's device names).
  TargetKind device = TargetKind::kCpu;
  std::vector<RunArg> args;
  int64_t number = 1;        ///< calls per repeat (grown to reach min_repeat_ms)
  int64_t repeat = 1;        ///< repeats; one cost per repeat
  double min_repeat_ms = 0;  ///< minimum duration of one repeat
  double cooldown_ms = 0;    ///< sleep between repeats
  bool flush_cache = false;  ///< write a buffer larger than the LLC between repeats
  int threads = 0;           ///< thread-pool size for the kernel; 0 = the runtime's default
  /// Time that disturbed repeats thrown away may add up to (see "Contention" above); 0 = none.
  double disturbed_retry_ms = 2000;

  Json to_json() const;
  /// Parses and checks a request; kiln::Error naming the missing or malformed field.
  static RunRequest from_json(const Json& json);
};

/// How a measurement went.
struct RunResult {
  ErrorKind error = ErrorKind::kNone;
  std::string message;            ///< empty for kNone
  std::vector<double> costs_s;    ///< mean seconds per call, one per repeat (kNone only)
  double wall_s = 0;              ///< wall time of the whole measurement (the child's life)
  int64_t number = 0;             ///< calls per repeat finally used (after min_repeat_ms growth)
  double max_error = 0;           ///< largest |out - ref| over the checked outputs
  int64_t child_pid = 0;          ///< the child's process id (measure_in_child), for diagnostics
  int64_t disturbed_repeats = 0;  ///< repeats timed while another process held our CPU
  bool contended = false;         ///< some of costs_s are disturbed repeats (the allowance ran out)
  int64_t cycles = 0;  ///< device "vdla": the cycle model's cycles of the one run (0 elsewhere)

  bool ok() const { return error == ErrorKind::kNone; }
  /// One JSON object: {"error": ..., "costs_s": [...], ...}.
  Json to_json() const;
  /// kiln::Error if the object is not a result.
  static RunResult from_json(const Json& json);
};

/// Seconds that this process's threads have spent runnable but waiting for a CPU, summed over
/// the threads alive now (Linux schedstat); NaN where the kernel keeps no scheduler statistics.
double run_queue_wait_s();

/// Loads the library and the inputs, runs the function once and checks the outputs against their
/// references, then times it as described above. Never throws: every failure becomes a result
/// (a bad request is kRuntimeError naming the field). Crashes and hangs of the kernel are the
/// caller's to guard against: run it in a child (measure_in_child).
RunResult run_kernel(const RunRequest& request);

/// Parses `request_json` and runs it; a malformed request becomes kRuntimeError.
RunResult run_kernel_json(const std::string& request_json);

}  // namespace kiln::runtime
