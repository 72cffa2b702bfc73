# kilnd as a process: bad requests, token, TLS, /metrics, the embedded default end to end.
kiln_add_test(NAME kilnd_test LABEL farm SOURCES kilnd_test.cc
  LIBS kiln_proto kiln_rpc kiln_metrics kiln_graph kiln_runtime onnx_proto)
target_compile_definitions(kilnd_test PRIVATE KILND_BINARY="$<TARGET_FILE:kilnd>")
add_dependencies(kilnd_test kilnd kiln-runner)
