#!/usr/bin/env bash
# Cross-compiles a board's programs for AArch64 (an ARM Cortex-A53 board): the `arm64` CMake preset
# (KILN_BOARD=ON, cmake/toolchains/aarch64-linux-gnu.cmake) into build/arm64, then prints one line
# per program with its path and what `file` says of it.
#   scripts/build-arm64.sh [CMAKE BUILD ARGS...]
# Needs g++-aarch64-linux-gnu and Debian's arm64 gRPC and protobuf packages (libgrpc++-dev:arm64,
# libprotobuf-dev:arm64): scripts/setup.sh installs them. Exit code 2 when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v aarch64-linux-gnu-g++ > /dev/null || missing+=("g++-aarch64-linux-gnu (aarch64-linux-gnu-g++)")
for p in libgrpc++-dev:arm64 libprotobuf-dev:arm64; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-arm64: missing: ${missing[*]}; scripts/setup.sh installs them" >&2
  exit 2
fi

cmake --preset arm64
cmake --build --preset arm64 "$@"
for p in device_agent/kiln-agent deploy/runtime/kiln-runner deploy/runtime/kiln-run; do
  echo "build/arm64/$p: $(file -b "build/arm64/$p")"
done
