// Why a measurement produced no time: the one error-kind vocabulary of every side that builds,
// runs or records a candidate (the kernel runner, the local measurer, the device agent, the record
// log, the farm's wire). After TVM's MeasureErrorNo. The names are what JSON texts (the runner's
// result, the record log) carry; the wire's kiln.v1.ErrorKind is this enum shifted by one
// (rpc/wire.h).
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace kiln {

enum class ErrorKind : uint8_t {
  kNone,            ///< measured; the costs are valid
  kCompileError,    ///< the config did not lower or compile
  kCompileTimeout,  ///< the build ran past its time limit
  kRuntimeError,    ///< bad request, library or function missing, the function returned an error
  kRunTimeout,      ///< the run ran past its time limit and was killed
  kCrash,           ///< the measuring child died of a signal (the message names it: "SIGSEGV")
  kWrongAnswer,     ///< an output differs from its reference (first bad index and values)
};

inline constexpr const char* kErrorKindNames[] = {
    "none",        "compile_error", "compile_timeout", "runtime_error",
    "run_timeout", "crash",         "wrong_answer"};
inline constexpr int kNumErrorKinds = sizeof(kErrorKindNames) / sizeof(kErrorKindNames[0]);

/// "none", "compile_error", "compile_timeout", "runtime_error", "run_timeout", "crash",
/// "wrong_answer".
inline const char* error_kind_name(ErrorKind kind) {
  const int i = static_cast<int>(kind);
  KILN_ICHECK(i >= 0 && i < kNumErrorKinds) << "bad ErrorKind " << i;
  return kErrorKindNames[i];
}

/// The kind named `name`; kiln::Error naming `what` and listing the names otherwise.
inline ErrorKind error_kind_from_name(const std::string& name,
                                      const std::string& what = "error kind") {
  std::string all;
  for (int i = 0; i < kNumErrorKinds; ++i) {
    if (name == kErrorKindNames[i]) return static_cast<ErrorKind>(i);
    all += (i ? ", " : "") + std::string(kErrorKindNames[i]);
  }
  KILN_USER_ERROR() << what << ": unknown error kind '" << name << "' (known: " << all << ")";
  return ErrorKind::kNone;
}

}  // namespace kiln
