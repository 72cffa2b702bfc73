// What kilnd and the job drivers it starts (kiln-tuner) agree on besides the JobDriver service:
// how a driver is told who it is, and what its exit status means. kilnd reads the status to tell a
// model's fault or a compiler bug it repeats (fail the job at once) from a crash, hang or memory
// exhaustion (try once more).
//
//   kiln-tuner --server ADDR --job ID [--tls-ca F] [--memory-limit-mb N]
//     environment: KILN_DRIVER_SECRET (the driver's credential), KILN_TOKEN (the farm's token)
//   kiln-tuner --check MODEL.onnx      imports and validates a model: exit 0 or kUserError
#pragma once

namespace kiln::rpc {

inline constexpr const char* kDriverSecretEnv = "KILN_DRIVER_SECRET";

enum DriverExit : int {
  kDriverDone = 0,         ///< the bundle is uploaded (or, with --check, the model imports)
  kDriverFailed = 1,       ///< something unexpected (kilnd unreachable, an I/O error): retry
  kDriverUserError = 2,    ///< the model cannot be compiled (its message was reported): no retry
  kDriverInternal = 3,     ///< a bug of the compiler on this model (reported): no retry
  kDriverOutOfMemory = 4,  ///< the memory limit was reached: retry once
  kDriverStopped = 5,      ///< the job was cancelled or kilnd is stopping: nothing to do
  /// The compiler overflowed its stack on the model (base/stack_overflow.h; it wrote "stack
  /// overflow" to its log): a compiler bug that another try repeats, so no retry.
  kDriverStackOverflow = 6,
  /// A mistake on kiln-tuner's command line (kilnd's bug, not the model's: not 2, as the other
  /// programs' usage errors are).
  kDriverBadCommandLine = 64,
};

}  // namespace kiln::rpc
