#!/usr/bin/env bash
# Builds Kiln and runs its tests: scripts/test.sh [PRESET] [CTEST ARGS...]
# PRESET is a CMake preset (dev by default; asan-ubsan for the sanitizers). Installs missing
# packages first (scripts/setup.sh is a quick no-op when everything is there).
# Fast set only: scripts/test.sh dev -LE slow
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-dev}"
shift || true
scripts/setup.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" "$@"
