# The dashboard (kilnd's page and JSON API): the API over HTTP against a kilnd (fast), and the page
# in headless chromium with a job in flight (slow; saves dashboard.png in this build folder).
kiln_add_test(NAME dashboard_test LABEL farm SOURCES dashboard_test.cc
  LIBS kiln_http kiln_proto kiln_rpc kiln_metrics kiln_graph kiln_runtime onnx_proto)
target_compile_definitions(dashboard_test PRIVATE KILND_BINARY="$<TARGET_FILE:kilnd>")
add_dependencies(dashboard_test kilnd kiln-runner)

add_executable(dashboard_browser_test dashboard_browser_test.cc)
target_link_libraries(dashboard_browser_test PRIVATE kiln_proto kiln_rpc kiln_graph kiln_runtime
  onnx_proto GTest::gtest GTest::gtest_main kiln_warnings)
target_compile_definitions(dashboard_browser_test PRIVATE
  KILND_BINARY="$<TARGET_FILE:kilnd>"
  DASHBOARD_SCREENSHOT="${CMAKE_CURRENT_BINARY_DIR}/dashboard.png")
add_dependencies(dashboard_browser_test kilnd kiln-runner)
add_test(NAME dashboard_browser_test COMMAND dashboard_browser_test)
set_tests_properties(dashboard_browser_test PROPERTIES LABELS "farm;slow" TIMEOUT 600)
