# The compiler worker against a fake tracker in the test (no kilnd needed), and the kiln-worker
# binary's flags and signals.
if(TARGET kiln_worker)
  kiln_add_test(NAME worker_test LABEL farm SOURCES worker_test.cc
    LIBS kiln_worker kiln_rpc kiln_proto kiln_graph kiln_compiler kiln_runtime onnx_proto gRPC::grpc++)
  target_compile_definitions(worker_test PRIVATE KILN_WORKER_BINARY="$<TARGET_FILE:kiln-worker>")
  add_dependencies(worker_test kiln-worker)
endif()
