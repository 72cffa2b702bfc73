#!/usr/bin/env bash
# Builds Kiln and runs its tests: scripts/test.sh [PRESET] [CTEST ARGS...]
# PRESET is a CMake preset (dev by default; asan-ubsan for the sanitizers, tsan for the farm under
# ThreadSanitizer). Installs missing packages first (scripts/setup.sh is a quick no-op when
# everything is there).
# Fast set only: scripts/test.sh dev -LE slow
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-dev}"
shift || true
scripts/setup.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
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
