# The farm commands of `kiln` (submit, jobs, watch, fetch, devices, cancel) against a fake
# KilnService in the test process; the real `kiln` binary runs as a subprocess.
kiln_add_test(NAME client_test LABEL farm SOURCES client_test.cc LIBS kiln_rpc kiln_proto)
target_compile_definitions(client_test PRIVATE KILN_BINARY="$<TARGET_FILE:kiln>")
add_dependencies(client_test kiln)
