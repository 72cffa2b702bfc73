# Cross-compiling for 64-bit ARM Linux (a Cortex-A53 board) on Debian with multiarch: the compiler
# is g++-aarch64-linux-gnu, the arm64 libraries are Debian's own packages installed beside the
# host's (dpkg --add-architecture arm64; libgrpc++-dev:arm64, libprotobuf-dev:arm64), in
# /usr/lib/aarch64-linux-gnu with their CMake configs in /usr/lib/aarch64-linux-gnu/cmake.
# scripts/setup.sh installs all of it; scripts/build-arm64.sh builds the `arm64` preset with it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Libraries and package configs are looked up in the lib/aarch64-linux-gnu folders only, never in
# the host's lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Multiarch keeps both sides under the same root (/usr), so "/" is the target's root, beside the
# cross C library's /usr/aarch64-linux-gnu. Programs (protoc, grpc_cpp_plugin) are the host's;
# libraries, headers and packages are looked up under the roots only.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# gRPC's config finds RE2 and OpenSSL through pkg-config, which must read the arm64 .pc files.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

# Tests of the cross build (and try_run) run the arm64 programs under QEMU's user-mode emulator
# when it is installed (qemu-user-static): -L / lets the program's loader,
# /lib/ld-linux-aarch64.so.1 from libc6:arm64, find the arm64 libraries where multiarch put them.
find_program(KILN_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(KILN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${KILN_QEMU_AARCH64} -L /)
endif()
