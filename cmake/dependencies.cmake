# Finds the Debian packages Kiln builds with. The comments at each step say why it is the way it
# is (LLVM's version check, the zstd target clash).

# A board's build (KILN_BOARD: the agent, the runners, the wire; usually cross-compiled, see
# cmake/toolchains/) needs only the wire's libraries and threads. protoc and grpc_cpp_plugin are
# the build machine's programs, the libraries the target's.
if(KILN_BOARD)
  find_package(Protobuf REQUIRED)
  find_package(gRPC CONFIG REQUIRED)
  find_program(KILN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
  find_package(Threads REQUIRED)
  return()
endif()

# zstd first: RocksDB wants zstd::zstd, LLVM wants zstd::libzstd_shared; make both exist.
find_package(zstd CONFIG QUIET)
if(zstd_FOUND AND NOT TARGET zstd::zstd AND TARGET zstd::libzstd_shared)
  add_library(zstd::zstd INTERFACE IMPORTED)
  target_link_libraries(zstd::zstd INTERFACE zstd::libzstd_shared)
endif()

find_package(LLVM 19.1 CONFIG REQUIRED PATHS /usr/lib/llvm-19/lib/cmake/llvm NO_DEFAULT_PATH)
message(STATUS "LLVM ${LLVM_PACKAGE_VERSION} at ${LLVM_DIR}")
# One shared libLLVM keeps every binary small (the static components make each ~50 MB).
add_library(kiln_llvm INTERFACE)
target_include_directories(kiln_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
separate_arguments(KILN_LLVM_DEFS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
target_compile_definitions(kiln_llvm INTERFACE ${KILN_LLVM_DEFS})
target_link_libraries(kiln_llvm INTERFACE LLVM)
# lld as a library (liblld-19-dev): code generation links shared objects in-process.
find_package(LLD 19.1 CONFIG REQUIRED PATHS /usr/lib/llvm-19/lib/cmake/lld NO_DEFAULT_PATH)

# libonnx (ONNX front end): its targets `onnx`, `onnx_proto` need protobuf::libprotobuf.
find_package(Protobuf REQUIRED)
find_package(ONNX CONFIG REQUIRED)

# The farm's wire (proto/): gRPC's C++ library (gRPC::grpc++) and its protoc plugin
# (grpc_cpp_plugin, Debian package protobuf-compiler-grpc).
find_package(gRPC CONFIG REQUIRED)
find_program(KILN_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
# kilnd's /metrics (server/): prometheus-cpp::core (registry, text format), ::pull (HTTP exposer).
find_package(prometheus-cpp CONFIG REQUIRED)

# The tuner's record log (RocksDB, after the zstd fix above) and cost model (XGBoost's C API;
# Debian's config needs the `xgboost` package beside libxgboost-dev, scripts/setup.sh has both).
find_package(RocksDB CONFIG REQUIRED)
find_package(xgboost CONFIG REQUIRED)

find_package(Threads REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark QUIET)
find_package(BLAS QUIET)  # OpenBLAS, for comparisons in bench/ only
