#!/usr/bin/env bash
# Builds Kiln and runs its tests: scripts/test.sh [PRESET] [CTEST ARGS...]
# PRESET is a CMake preset (dev by default; asan-ubsan for the sanitizers, tsan for the farm under
# ThreadSanitizer). Installs missing packages first (scripts/setup.sh is a quick no-op when
# everything is there).
# With dev it also builds the arm64 preset (scripts/build-arm64.sh) for the board tests, skipped
# where the cross toolchain is missing.
# Fast set only: scripts/test.sh dev -LE slow
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-dev}"
shift || true
scripts/setup.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
# With dev, also a board's programs for AArch64 (build/arm64), which the board tests check and run
# under QEMU. Where the cross toolchain is missing, build-arm64.sh says so and exits 2: the build
# is skipped and those tests skip too.
if [ "$preset" = dev ]; then
  arm64=0
  scripts/build-arm64.sh || arm64=$?
  if [ "$arm64" = 2 ]; then
    echo "test.sh: skipping the arm64 build: the cross toolchain is missing (see above)" >&2
  elif [ "$arm64" != 0 ]; then
    exit "$arm64"
  fi
fi
# Under tsan every process writes its reports to build/tsan/tsan-report.<pid>, also those whose
# end a test survives (a local worker kilnd restarts, a kiln-runner child whose exit is a
# measurement's error): any report fails the run.
reports=build/tsan/tsan-report
[ "$preset" != tsan ] || rm -f "$reports".*
status=0
ctest --preset "$preset" "$@" || status=$?
if [ "$preset" = tsan ] && compgen -G "$reports.*" > /dev/null; then
  echo "ThreadSanitizer reports:" "$reports".* >&2
  status=1
fi
exit "$status"
