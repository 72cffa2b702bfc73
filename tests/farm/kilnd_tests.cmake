# kilnd as a process: bad requests, token, TLS, /metrics, the embedded default end to end (per
# task, under a budget, under a time limit).
kiln_add_test(NAME kilnd_test LABEL farm SOURCES kilnd_test.cc
  LIBS kiln_proto kiln_rpc kiln_metrics kiln_graph kiln_runtime onnx_proto)
target_compile_definitions(kilnd_test PRIVATE KILND_BINARY="$<TARGET_FILE:kilnd>")
add_dependencies(kilnd_test kilnd kiln-runner)

# SubmitModel's upload stream: a model in chunks, refused uploads (over the limit, a bad checksum,
# cut short, cancelled) leaving no file and no job; and a 300 MiB model accepted while kilnd's
# resident memory stays far below it (slow).
kiln_add_test(NAME model_upload_test LABEL farm SOURCES model_upload_test.cc
  LIBS kiln_proto kiln_rpc kiln_graph kiln_runtime onnx_proto)
target_compile_definitions(model_upload_test PRIVATE KILND_BINARY="$<TARGET_FILE:kilnd>")
add_dependencies(model_upload_test kilnd)
kiln_add_test(NAME big_model_upload_test LABEL farm ALSO_LABEL slow
  SOURCES big_model_upload_test.cc LIBS kiln_proto kiln_rpc onnx_proto)
target_compile_definitions(big_model_upload_test PRIVATE KILND_BINARY="$<TARGET_FILE:kilnd>")
add_dependencies(big_model_upload_test kilnd)

# The farm as separate processes (kilnd, kiln-worker, kiln-agent), with faults: slow.
add_executable(farm_integration_test farm_integration_test.cc)
target_link_libraries(farm_integration_test PRIVATE kiln_proto kiln_rpc kiln_graph kiln_runtime
  kiln_record_log onnx_proto GTest::gtest GTest::gtest_main kiln_warnings)
target_compile_definitions(farm_integration_test PRIVATE
  KILND_BINARY="$<TARGET_FILE:kilnd>"
  KILN_WORKER_BINARY="$<TARGET_FILE:kiln-worker>"
  KILN_AGENT_BINARY="$<TARGET_FILE:kiln-agent>")
add_dependencies(farm_integration_test kilnd kiln-worker kiln-agent kiln-runner)
add_test(NAME farm_integration_test COMMAND farm_integration_test)
set_tests_properties(farm_integration_test PROPERTIES LABELS "farm;slow" TIMEOUT 900)

# kilnd links no compiler: no LLVM, no ONNX (a user's model is read only by kiln-tuner processes).
add_test(NAME kilnd_links_no_compiler
  COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:kilnd>
          -P ${CMAKE_CURRENT_SOURCE_DIR}/links_no_compiler.cmake)
set_tests_properties(kilnd_links_no_compiler PROPERTIES LABELS farm)

# Models that break the compiler (crash, hang, memory) and a driver killed mid-job fail at most
# their job; kilnd, the other jobs, the worker and the agent go on, also after a restart.
add_executable(job_driver_test job_driver_test.cc)
target_link_libraries(job_driver_test PRIVATE kiln_proto kiln_rpc kiln_graph kiln_runtime
  kiln_record_log onnx_proto GTest::gtest GTest::gtest_main kiln_warnings)
target_compile_definitions(job_driver_test PRIVATE KILND_BINARY="$<TARGET_FILE:kilnd>")
add_dependencies(job_driver_test kilnd)
add_test(NAME job_driver_test COMMAND job_driver_test)
set_tests_properties(job_driver_test PROPERTIES LABELS "farm;slow" TIMEOUT 900)

# The Farm's answers to requests, in process, with a script as the job driver: the bugs the gRPC
# fuzz target found.
kiln_add_test(NAME farm_requests_test LABEL farm SOURCES farm_requests_test.cc
  LIBS kiln_farm kiln_record_log kiln_runtime)

# A board under emulation end to end: the AArch64 kiln-agent (build/arm64) under
# qemu-aarch64-static tunes the DQN model with an x86 kilnd and worker; the fetched bundle runs
# under qemu with the AArch64 kiln-run and matches ONNX Runtime. Skipped where either is missing.
add_executable(board_emulation_test board_emulation_test.cc)
target_link_libraries(board_emulation_test PRIVATE kiln_proto kiln_rpc kiln_runtime kiln_record_log
  onnx_proto GTest::gtest GTest::gtest_main kiln_warnings)
target_compile_definitions(board_emulation_test PRIVATE
  KILND_BINARY="$<TARGET_FILE:kilnd>"
  KILN_ARM64_BUILD_DIR="${PROJECT_SOURCE_DIR}/build/arm64"
  KILN_MODELS_DATA_DIR="${PROJECT_BINARY_DIR}/tests/models/data")
add_dependencies(board_emulation_test kilnd kiln-worker)
add_test(NAME board_emulation_test COMMAND board_emulation_test)
set_tests_properties(board_emulation_test PROPERTIES LABELS "farm;slow" TIMEOUT 1800
  FIXTURES_REQUIRED models SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# The farm tuning for an OpenCL device (PoCL here): a real kiln-agent with target
# "opencl -device=mali", kiln submit / fetch / run --device opencl, ONNX Runtime as the reference.
add_executable(opencl_farm_test opencl_farm_test.cc)
target_link_libraries(opencl_farm_test PRIVATE kiln_proto kiln_rpc kiln_runtime kiln_record_log
  onnx_proto GTest::gtest GTest::gtest_main kiln_warnings)
target_compile_definitions(opencl_farm_test PRIVATE
  KILND_BINARY="$<TARGET_FILE:kilnd>"
  KILN_AGENT_BINARY="$<TARGET_FILE:kiln-agent>"
  KILN_BINARY="$<TARGET_FILE:kiln>")
add_dependencies(opencl_farm_test kilnd kiln-worker kiln-agent kiln-runner kiln)
add_test(NAME opencl_farm_test COMMAND opencl_farm_test)
set_tests_properties(opencl_farm_test PROPERTIES LABELS "farm;slow" TIMEOUT 600
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# The VDLA in the farm: kilnd with a worker and a real `kiln-agent --key vdla --target vdla`;
# kernel level (this process drives a job's tuning of vdla_conv2d tasks, the job's driver being
# tests/common's script) and a quantized model tuned by kiln-tuner, fetched and run.
add_executable(vdla_farm_test vdla_farm_test.cc)
target_link_libraries(vdla_farm_test PRIVATE kiln_job_driver kiln_autotune_tuner kiln_topi onnx_proto kiln_proto
  kiln_rpc kiln_runtime kiln_record_log GTest::gtest GTest::gtest_main kiln_warnings)
target_compile_definitions(vdla_farm_test PRIVATE
  KILND_BINARY="$<TARGET_FILE:kilnd>"
  KILN_AGENT_BINARY="$<TARGET_FILE:kiln-agent>"
  KILN_BINARY="$<TARGET_FILE:kiln>")
add_dependencies(vdla_farm_test kilnd kiln-worker kiln-agent kiln-runner kiln-tuner kiln)
add_test(NAME vdla_farm_test COMMAND vdla_farm_test)
set_tests_properties(vdla_farm_test PROPERTIES LABELS "farm;slow" TIMEOUT 900)
