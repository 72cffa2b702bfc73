# Fails when BINARY (kilnd) links LLVM or ONNX: code that compiles a user's model must never run
# inside kilnd. ldd must work and show gRPC, so that a silent ldd cannot pass the check.
execute_process(COMMAND ldd ${BINARY} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${BINARY} failed (${rc})")
endif()
if(NOT libs MATCHES "libgrpc")
  message(FATAL_ERROR "ldd ${BINARY} shows no gRPC library; is it kilnd?\n${libs}")
endif()
string(REGEX MATCHALL "[^\n]*(libLLVM|libonnx|libclang)[^\n]*" bad "${libs}")
if(bad)
  message(FATAL_ERROR "${BINARY} links a compiler library:\n${bad}")
endif()
message(STATUS "${BINARY} links no LLVM and no ONNX")
