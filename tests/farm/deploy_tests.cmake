# deploy/farm stays true to the programs: the systemd units' and Kubernetes manifests' flags exist
# in each binary's --help, ports and volumes agree (deploy_manifests_test.py, python3 + PyYAML),
# and every metric the Grafana dashboard queries is one kilnd exports (grafana_metrics_test).
add_test(NAME deploy_manifests_test
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/deploy_manifests_test.py
    --kilnd $<TARGET_FILE:kilnd> --agent $<TARGET_FILE:kiln-agent>
    --worker $<TARGET_FILE:kiln-worker> --deploy ${PROJECT_SOURCE_DIR}/deploy/farm
    --board ${PROJECT_SOURCE_DIR}/deploy/board)
set_tests_properties(deploy_manifests_test PROPERTIES LABELS farm TIMEOUT 120)

kiln_add_test(NAME grafana_metrics_test LABEL farm SOURCES grafana_metrics_test.cc
  LIBS kiln_metrics kiln_runtime)
target_compile_definitions(grafana_metrics_test PRIVATE
  KILN_GRAFANA_DASHBOARD="${PROJECT_SOURCE_DIR}/deploy/farm/grafana/kiln-farm.json")

# Every program's command line (base/cli.h): --help lists exactly the flags the tests and deploy/
# use, each with its default; an unknown flag, a missing value or a bad number exits with the
# usage code naming the flag.
kiln_add_test(NAME program_flags_test LABEL farm SOURCES program_flags_test.cc LIBS kiln_base)
target_compile_definitions(program_flags_test PRIVATE
  KILND_BINARY="$<TARGET_FILE:kilnd>"
  KILN_AGENT_BINARY="$<TARGET_FILE:kiln-agent>"
  KILN_WORKER_BINARY="$<TARGET_FILE:kiln-worker>"
  KILN_TUNER_BINARY="$<TARGET_FILE:kiln-tuner>"
  KILN_RUN_BINARY="$<TARGET_FILE:kiln-run>"
  KILN_RUNNER_BINARY="$<TARGET_FILE:kiln-runner>"
  KILN_DEVICE_INFO_BINARY="$<TARGET_FILE:kiln-device-info>")
add_dependencies(program_flags_test kilnd kiln-agent kiln-worker kiln-tuner kiln-run kiln-runner
  kiln-device-info)
