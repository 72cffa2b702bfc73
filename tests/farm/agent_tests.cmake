# device_agent/: the agent against a fake tracker in the test (agent_test.cc), measuring the
# hand-written kernels of tests/unit/data/measure_test_module.c through kiln-runner, and the
# kiln-agent program's command line and signals.
kiln_add_test(NAME agent_test LABEL farm SOURCES agent_test.cc
  LIBS kiln_agent kiln_rpc kiln_proto)
target_compile_definitions(agent_test PRIVATE
  KILN_MEASURE_TEST_MODULE="$<TARGET_FILE:kiln_measure_test_module>"
  KILN_RUNNER_PATH="$<TARGET_FILE:kiln-runner>"
  KILN_AGENT_PATH="$<TARGET_FILE:kiln-agent>")
add_dependencies(agent_test kiln_measure_test_module kiln-runner kiln-agent)
